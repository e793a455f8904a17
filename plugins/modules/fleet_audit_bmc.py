#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: fleet_audit_bmc
short_description: Out-of-band drift of handed-off nodes, firmware and BIOS against the SKU (reads only)
description:
  - Stage 5 of symphony.cluster (fleet_audit), the out-of-band half. For each node it reads the Redfish
    FirmwareInventory and BIOS attributes and compares them with the SKU through the provisioning plan in check
    mode; it sends no write request to any BMC.
  - Returns per host the checks C(firmware_drift) and C(bios_drift), each with one drift row per component in
    C(evidence.rows). A BMC that cannot be read (completely) makes them C(not_run) with the reason.
  - With O(ledger), each node is leased in the ledger before its BMC is read; a node another run holds (an audit
    still running, a provisioning run) is C(not_run) naming the holder, so overlapping runs never read twice.
version_added: 0.1.0
author:
  - symphony.cluster maintainers (@symphony-cluster)
options: {}
extends_documentation_fragment:
  - symphony.cluster.ledger
  - symphony.cluster.redfish
  - symphony.cluster.fleet
  - symphony.cluster.fleet.TWIN_BATCH
  - symphony.cluster.attributes
  - symphony.cluster.attributes.CONTROLLER
  - symphony.cluster.attributes.INFO_MODULE
"""

EXAMPLES = r"""
- name: Firmware and BIOS drift of the play's hosts
  symphony.cluster.fleet_audit_bmc:
    nodes: "{{ ansible_play_hosts | map('extract', hostvars, 'symphony_twin') | list }}"
    sku_dir: "{{ playbook_dir }}/../skus"
    username: "{{ bmc_username }}"
    password: "{{ bmc_password }}"
  run_once: true
  delegate_to: localhost
  register: oob
"""

RETURN = r"""
checks:
  description: Per host, the C(gate_record) check dicts C(firmware_drift) and C(bios_drift).
  returned: always
  type: dict
summary:
  description: Count of checks per status.
  returned: always
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.symphony.cluster.plugins.module_utils._core.ledger import default_ledger_path
from ansible_collections.symphony.cluster.plugins.module_utils._core.module import run_module
from ansible_collections.symphony.cluster.plugins.module_utils._fleet.batch import fleet_argument_spec
from ansible_collections.symphony.cluster.plugins.module_utils._fleet_audit.oob import audit_oob

ARGUMENT_SPEC = fleet_argument_spec(twin_batch=True, options={"ledger": {"type": "str"}})


def _run(params, check_mode):
    # check mode leases nothing: it writes no ledger row
    ledger = None if check_mode else (params.get("ledger") or default_ledger_path())
    return audit_oob(dict(params, ledger=ledger))


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    run_module(module, _run)


if __name__ == "__main__":
    main()
