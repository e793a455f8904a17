#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: firmware_plan
short_description: Read each node's BMC and return its provisioning plan (changes nothing)
description:
  - Stage 2 of symphony.cluster (provisioning), the plan only. For each node it reads the Redfish FirmwareInventory
    and BIOS attributes and compares them with the SKU manifest, in the manifest's strict order (BMC, BIOS, other
    out-of-band parts, the BIOS settings, then GPU, NIC/DPU and NVMe in-band, then the OS tunings).
  - Each step names the component, observed and target version, method, image and activation, and an action
    C(skip), C(update), C(refuse_downgrade), C(missing), C(follows) or C(no_image). FirmwareInventory members the
    manifest does not know are listed per host.
  - Sends no write request to any BMC and writes no ledger row; safe in C(--check).
version_added: 0.1.0
author:
  - symphony.cluster maintainers (@symphony-cluster)
options:
  allow_downgrade:
    description: Allow a target older than the running version (a manifest component's C(allow_downgrade) also does).
    type: bool
    default: false
extends_documentation_fragment:
  - symphony.cluster.redfish
  - symphony.cluster.fleet
  - symphony.cluster.fleet.TWIN_BATCH
  - symphony.cluster.attributes
  - symphony.cluster.attributes.CONTROLLER
  - symphony.cluster.attributes.INFO_MODULE
"""

EXAMPLES = r"""
- name: Print the plan of the play's hosts
  symphony.cluster.firmware_plan:
    nodes: "{{ ansible_play_hosts | map('extract', hostvars, 'symphony_twin') | list }}"
    sku_dir: "{{ playbook_dir }}/../skus"
    username: "{{ bmc_username }}"
    password: "{{ bmc_password }}"
  run_once: true
  delegate_to: localhost
  register: plan
"""

RETURN = r"""
hosts:
  description: Per host the plan (C(steps), C(unknown), C(missing), C(summary)), the diff and the in-band steps.
  returned: always
  type: dict
plan_lines:
  description: One line per step that is not C(skip), for every host.
  returned: always
  type: list
  elements: str
diff:
  description: Per host the firmware versions and BIOS attributes before and after the plan.
  returned: when run with C(--diff)
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.symphony.cluster.plugins.module_utils._core.module import run_module
from ansible_collections.symphony.cluster.plugins.module_utils._fleet.batch import TWIN_BATCH_MODULE_KWARGS, fleet_argument_spec
from ansible_collections.symphony.cluster.plugins.module_utils._provision.stage import module_run

ARGUMENT_SPEC = fleet_argument_spec(twin_batch=True, options={
    "allow_downgrade": {"type": "bool", "default": False},
})


def _run(params, check_mode):
    # a plan changes nothing, whatever mode the task runs in
    return dict(module_run(params, "plan", check_mode=True), changed=False)


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True, **TWIN_BATCH_MODULE_KWARGS)
    run_module(module, _run)


if __name__ == "__main__":
    main()
