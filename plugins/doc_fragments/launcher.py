# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations


class ModuleDocFragment(object):
    """How the fabric and NCCL modules reach the nodes: OpenSSH, Slurm C(srun), C(mpirun) or the controller.

    The argument spec is ``_host.launchers.launcher_argument_spec()``; each module documents its own O(launcher)
    default.
    """

    DOCUMENTATION = r"""
options:
  launcher:
    description:
      - How commands reach the nodes. C(ssh) runs on each node with the OpenSSH client (BatchMode, host keys
        verified as the ssh configuration says); C(srun)/C(mpirun) use the cluster's scheduler (required for
        nccl-tests/rccl-tests across nodes); C(local) runs on the controller (loopback tests).
    type: str
    choices: [ssh, srun, mpirun, local]
  partition:
    description: Slurm partition for C(srun).
    type: str
  launcher_args:
    description: Extra arguments for C(srun) or C(mpirun).
    type: list
    elements: str
    default: []
  ssh_config:
    description: OpenSSH client configuration file (C(ssh -F)).
    type: path
  ssh_hosts:
    description:
      - SSH destination per node (its management address) when the node name does not resolve; nodes not
        listed are reached by their name.
    type: dict
    default: {}
  ssh_identity_file:
    description: Private key file (C(ssh -i)).
    type: path
  ssh_user:
    description: Remote user (C(ssh -l)).
    type: str
  ssh_port:
    description: Remote SSH port.
    type: int
  connect_timeout:
    description: SSH connect timeout in seconds.
    type: int
    default: 10
"""
