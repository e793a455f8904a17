#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: cabling_check
short_description: The burn_in check C(cabling) - every node port's neighbour against the twin's cabling plan
description:
  - Judges a batch of nodes at once on the controller, from what their ports see - C(lldpcli -f json show neighbors)
    for Ethernet/RoCE ports, C(ibstat) and one fabric scan (C(iblinkinfo)) for InfiniBand ports, the Fabric section
    of C(nvidia-smi -q) for NVLink domains - against each node's twin C(fabric) plan and C(nvlink_domain).
  - A port passes only when it reaches the planned switch and switch port at its rated width and speed; otherwise
    it fails naming both sides (C(mlx5_3 port 1 reaches leaf-r05 port 17; the plan says leaf-r03 port 17)).
  - Two ports whose neighbours are exchanged are one swapped pair with one technician action; on a rail-optimised
    site (twin C(sites[].fabric.rail_optimised)) a GPU-local port on another rail's leaf says so.
  - A port that hears no LLDP frame, or that the fabric scan does not list, is C(not_run) with that reason, never
    C(pass). A node without a cabling plan is C(not_run) "no cabling plan in the twin", required only where
    O(nodes) says the SKU needs a plan.
  - Returns check dicts for M(symphony.cluster.gate_record) and the verified topology for
    M(symphony.cluster.slurm_topology); writes nothing.
version_added: 0.1.0
author:
  - symphony.cluster maintainers (@symphony-cluster)
options:
  nodes:
    description:
      - Per host - C(twin) (its twin record, C(symphony_twin)), C(required) (the SKU needs a cabling plan; V(false)
        where the profile has no fabric, so readings that are absent do not gate, while a port read and found wrong
        still does), C(lldp), C(ibstat), C(nvidia_smi_q) (the command outputs; null when not read) and C(recorded) (name -> note
        for an output that was recorded rather than read live, shown in the evidence).
    type: dict
    required: true
  iblinkinfo:
    description: The InfiniBand fabric scan (C(iblinkinfo) output), one for the whole fabric.
    type: str
  iblinkinfo_file:
    description: A file holding the fabric scan, instead of O(iblinkinfo).
    type: path
  twin:
    description: The twin file, for its sites' switches (leaf rails, rail-optimised flag).
    type: path
  rated_gbps:
    description: Rated rate of the fabric HCA ports in Gb/s (the SKU's C(bom.nics[].speed_gbps)), for links whose
      plan names no C(width)/C(speed) (400 = 4X NDR).
    type: float
  rated:
    description: Rated C(width) (C(4X)) and C(speed) (C(NDR)) overriding O(rated_gbps).
    type: dict
    default: {}
extends_documentation_fragment:
  - symphony.cluster.attributes
  - symphony.cluster.attributes.CONTROLLER
  - symphony.cluster.attributes.INFO_MODULE
"""

EXAMPLES = r"""
- name: Judge the cabling of the play's hosts
  symphony.cluster.cabling_check:
    nodes:
      gpu-r03-u02:
        twin: "{{ hostvars['gpu-r03-u02'].symphony_twin }}"
        required: true
        lldp: "{{ lldp_out.stdout }}"
        ibstat: "{{ ibstat_out.stdout }}"
    iblinkinfo_file: /var/tmp/symphony/iblinkinfo.txt
    rated_gbps: 400
  run_once: true
  delegate_to: localhost
  register: cabling
"""

RETURN = r"""
checks:
  description: Per host the C(cabling) check dict (C(name), C(status), C(reason), C(remediation), C(expected),
    C(observed), C(evidence) with one entry per port, C(required)).
  returned: success
  type: dict
actions:
  description: One technician action per swapped pair or bad port (C(hosts), C(ports), C(kind), C(action)).
  returned: success
  type: list
  elements: dict
dispatch:
  description: The same actions as dispatch list rows (site, rack, U, hostname, serial, stage, check, reason,
    remediation).
  returned: success
  type: list
  elements: dict
swaps:
  description: The swapped pairs, each two C("<host> <port>") names.
  returned: success
  type: list
  elements: list
found:
  description: The verified topology - per host the switch and switch port each port reaches.
  returned: success
  type: dict
domains:
  description: Per host the NVLink domain found (C([ClusterUUID, CliqueId])).
  returned: success
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.symphony.cluster.plugins.module_utils._core.module import run_module
from ansible_collections.symphony.cluster.plugins.module_utils._fabric.cabling_gate import run_cabling

ARGUMENT_SPEC = {
    "nodes": {"type": "dict", "required": True},
    "iblinkinfo": {"type": "str"},
    "iblinkinfo_file": {"type": "path"},
    "twin": {"type": "path"},
    "rated_gbps": {"type": "float"},
    "rated": {"type": "dict", "default": {}},
}


def _run(params, check_mode):
    return dict(run_cabling(params), changed=False)


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True,
                           mutually_exclusive=[("iblinkinfo", "iblinkinfo_file")])
    run_module(module, _run)


if __name__ == "__main__":
    main()
