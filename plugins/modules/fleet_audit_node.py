#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: fleet_audit_node
short_description: Audit a handed-off node in-band (software drift, tunings, NCCL recipe, passive health)
description:
  - Stage 5 of symphony.cluster (fleet_audit), the in-band half. Runs on the node; changes nothing on it.
  - Drift against the SKU, C(software_drift) (kernel, GPU driver, CUDA, DCGM, NCCL, OFED, container toolkit, each
    against the C(software) pins), C(tunings_drift) (kernel command line, sysctl, GPU persistence mode and power
    limit) and C(nccl_recipe) (the C(nccl_env) golden recipe against O(nccl_conf)).
  - Passive health since the previous audit (O(previous), from M(symphony.cluster.fleet_audit_state)),
    C(kernel_log) (XIDs with the catalog's severity, MCE, AER, EDAC), C(gpu_counters) (uncorrectable ECC, remapped
    rows, retired pages), C(ib_counters) (InfiniBand port error counters).
  - A reading that cannot be made is C(not_run) with the reason, never C(pass); what the profile's hosts lack
    (O(not_expected), e.g. GPUs in the lab) is C(not_run) naming it.
version_added: 0.1.0
author:
  - symphony.cluster maintainers (@symphony-cluster)
options:
  manifest:
    description: The SKU manifest (the inventory's C(symphony_expected)).
    type: dict
    required: true
  not_expected:
    description: Parts the profile's hosts lack (the profile's C(not_expected), e.g. C(gpus), C(infiniband)).
    type: list
    elements: str
    default: []
  previous:
    description: The previous audit's readings, C({check -> observed}) (M(symphony.cluster.fleet_audit_state)).
    type: dict
    default: {}
  injected:
    description: Kernel-log messages the exercise injected on this node; a finding with one of them is marked injected.
    type: list
    elements: str
    default: []
  injected_xids:
    description: XIDs the exercise injected through DCGM on this node; a C(dcgm_xid) finding with one is marked
      injected.
    type: list
    elements: int
    default: []
  cleared_at:
    description: UNIX time of the node's latest passing burn_in; kernel-log findings older than it are closed.
    type: float
  kernel_log_source:
    description: The kernel log to read, C(/dev/kmsg) or a file in its record format (each lab host has its own).
    type: str
    default: /dev/kmsg
  nccl_conf:
    description: The NCCL configuration file the recipe is compared with.
    type: str
    default: /etc/nccl.conf
  ib_sysfs:
    description: The sysfs folder of the InfiniBand devices.
    type: str
    default: /sys/class/infiniband
extends_documentation_fragment:
  - symphony.cluster.attributes
  - symphony.cluster.attributes.INFO_MODULE
attributes:
  platform:
    description: Target OS/families that can be operated against.
    support: full
    platforms: posix
    details:
      - Runs on the node under audit.
"""

EXAMPLES = r"""
- name: Audit the node in-band
  symphony.cluster.fleet_audit_node:
    manifest: "{{ symphony_expected }}"
    previous: "{{ fleet_audit_state.hosts[inventory_hostname].previous }}"
  register: audit
"""

RETURN = r"""
checks:
  description: One C(gate_record) check dict per check; C(observed) carries the state the next audit compares with.
  returned: always
  type: list
  elements: dict
readings:
  description: The raw readings (software versions, tunings) behind the drift rows.
  returned: always
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.symphony.cluster.plugins.module_utils._core.module import run_module
from ansible_collections.symphony.cluster.plugins.module_utils._fleet_audit.stage import audit_node

ARGUMENT_SPEC = {
    "manifest": {"type": "dict", "required": True},
    "not_expected": {"type": "list", "elements": "str", "default": []},
    "previous": {"type": "dict", "default": {}},
    "injected": {"type": "list", "elements": "str", "default": []},
    "injected_xids": {"type": "list", "elements": "int", "default": []},
    "cleared_at": {"type": "float"},
    "kernel_log_source": {"type": "str", "default": "/dev/kmsg"},
    "nccl_conf": {"type": "str", "default": "/etc/nccl.conf"},
    "ib_sysfs": {"type": "str", "default": "/sys/class/infiniband"},
}


def _run(params, check_mode):
    return audit_node(params)


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    run_module(module, _run)


if __name__ == "__main__":
    main()
