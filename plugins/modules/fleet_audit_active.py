#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: fleet_audit_active
short_description: Active health checks of an idle node as a preemptible Slurm job that yields to customer jobs
description:
  - Stage 5 of symphony.cluster (fleet_audit). Submits a short job (GPU query, DCGM r1, a one-node NCCL test, a
    memory test) with C(--deadline --exclusive --no-requeue) into O(partition)/O(qos), which the cluster configures
    as preemptible (slurm.conf C(PreemptType=preempt/partition_prio) or C(preempt/qos), C(PreemptMode=CANCEL)).
  - A job preempted by a customer job makes its checks C(not_run) "preempted by job N", never C(fail); a busy node
    (the job removed at its deadline) or no Slurm on the submit host makes them C(not_run) with the reason.
  - Checks the profile's hosts cannot run (O(not_expected)) are C(not_run) naming the part and are not submitted.
version_added: 0.1.0
author:
  - symphony.cluster maintainers (@symphony-cluster)
options:
  node:
    description: The Slurm node name.
    type: str
    required: true
  partition:
    description: The preemptible audit partition.
    type: str
    required: true
  qos:
    description: The preemptible audit QOS, where preemption is by QOS.
    type: str
  not_expected:
    description: Parts the profile's hosts lack (C(gpus) skips the GPU checks).
    type: list
    elements: str
    default: []
  work_dir:
    description: Folder on a file system the node and the submit host share, for the job script and its output.
    type: path
    required: true
  time_limit_min:
    description: The job's C(--time), minutes.
    type: int
    default: 10
  timeout_s:
    description: Seconds to wait for the job before cancelling it.
    type: float
    default: 900
  slurm_conf:
    description: The C(slurm.conf) the Slurm commands use (C(SLURM_CONF); the lab's).
    type: path
extends_documentation_fragment:
  - symphony.cluster.attributes
  - symphony.cluster.attributes.CONTROLLER
attributes:
  check_mode:
    support: none
  diff_mode:
    support: none
"""

EXAMPLES = r"""
- name: Active health on idle nodes
  symphony.cluster.fleet_audit_active:
    node: "{{ inventory_hostname }}"
    partition: audit
    work_dir: /shared/symphony/fleet_audit
  delegate_to: localhost
  register: active
"""

RETURN = r"""
checks:
  description: The C(gate_record) check dicts C(active_gpu_query), C(active_dcgm_r1), C(active_nccl_single),
    C(active_memtest), not required by the gate (they run only when the node is idle).
  returned: always
  type: list
  elements: dict
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.symphony.cluster.plugins.module_utils._core.module import run_module
from ansible_collections.symphony.cluster.plugins.module_utils._fleet_audit.active import run_active
from ansible_collections.symphony.cluster.plugins.module_utils._fleet_audit.stage import check_dict
from ansible_collections.symphony.cluster.plugins.module_utils._host.slurm import Slurm

ARGUMENT_SPEC = {
    "node": {"type": "str", "required": True},
    "partition": {"type": "str", "required": True},
    "qos": {"type": "str"},
    "not_expected": {"type": "list", "elements": "str", "default": []},
    "work_dir": {"type": "path", "required": True},
    "time_limit_min": {"type": "int", "default": 10},
    "timeout_s": {"type": "float", "default": 900},
    "slurm_conf": {"type": "path"},
}


def _run(params, check_mode):
    os.makedirs(params["work_dir"], exist_ok=True)
    base = os.path.join(params["work_dir"], "active-%s" % params["node"])
    slurm = Slurm(env=dict(os.environ, SLURM_CONF=params["slurm_conf"])) if params.get("slurm_conf") else None
    outcomes = run_active(params["node"], params["partition"], base + ".sh", base + ".out", params["not_expected"],
                          qos=params.get("qos"), time_limit_min=params["time_limit_min"],
                          timeout_s=params["timeout_s"], slurm=slurm)
    return {"changed": False, "checks": [check_dict(name, o, required=False) for name, o in outcomes.items()]}


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=False)
    run_module(module, _run)


if __name__ == "__main__":
    main()
