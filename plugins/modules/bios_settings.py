#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: bios_settings
short_description: Set BIOS attributes through a BMC's Redfish settings object, optionally reset and read them back
description:
  - Reads C(Systems/<id>/Bios), PATCHes only the attributes that differ (and are not already pending) to the
    resource named by C(@Redfish.Settings.SettingsObject) with C(If-Match), at the apply time the service lists
    in C(SupportedApplyTimes).
  - With O(reset), resets the system (C(ForceRestart), else C(PowerCycle) or C(GracefulRestart); C(On) when it
    is off) and polls C(Bios) until every value reads back; a value that has not by O(timeout_s) fails the task
    with what it reads and what was wanted, whatever the PATCH answered.
  - Without O(reset) the values stay pending until the next reset (C(state=pending)).
  - An attribute name the BMC does not report shows as a change from null in check mode; the BMC's answer to the
    PATCH (for example C(PropertyUnknown)) decides in a real run. The provisioning stage
    (M(symphony.cluster.firmware_reconcile)) does the same for the SKU's C(bios.attributes) and resets once for
    all its pending work; use this module for one-off changes.
version_added: 0.1.0
author:
  - symphony.cluster maintainers (@symphony-cluster)
options:
  attributes:
    description: BIOS attribute names and values as the BMC's attribute registry spells them (case-exact).
    type: dict
    required: true
  apply_time:
    description: C(@Redfish.SettingsApplyTime) to ask for when the service supports it.
    type: str
    choices: [Immediate, OnReset, AtMaintenanceWindowStart, InMaintenanceWindowOnReset]
    default: OnReset
  reset:
    description: Reset the system after the PATCH and wait until the values read back.
    type: bool
    default: false
  system_id:
    description: The C(ComputerSystem) C(Id) (default the first system).
    type: str
  timeout_s:
    description: Seconds to wait, after the reset, for the values to read back.
    type: float
    default: 900
  poll_s:
    description: Seconds between reads while waiting.
    type: float
    default: 10
extends_documentation_fragment:
  - symphony.cluster.redfish
  - symphony.cluster.redfish.SINGLE_BMC
  - symphony.cluster.attributes
attributes:
  check_mode:
    support: full
    details:
      - Reads the BIOS and returns the changes it would make; sends no PATCH and no reset.
  diff_mode:
    support: full
    details:
      - The attributes before and after (after a reset, as read back).
requirements:
  - sushy
"""

EXAMPLES = r"""
- name: Turn PCIe ACS off on the rack and apply it now
  symphony.cluster.bios_settings:
    bmc_url: "https://{{ symphony_bmc_address }}"
    username: "{{ bmc_username }}"
    password: "{{ bmc_password }}"
    ca_path: /etc/symphony/bmc-ca.pem
    attributes:
      PCIeACSCTL_1E3C: Disable
    reset: true
  delegate_to: localhost
"""

RETURN = r"""
state:
  description: C(at_target) (nothing to change), C(pending) (applies at the next reset) or C(applied) (read back).
  returned: success
  type: str
changes:
  description: Each differing attribute as C([current, wanted]).
  returned: success
  type: dict
pending:
  description: Attributes waiting in the settings object for a reset.
  returned: success
  type: list
  elements: str
settings_object:
  description: Where the changes were (or would be) PATCHed.
  returned: success
  type: str
apply_time:
  description: The apply time sent, or null when the service lists none.
  returned: success
  type: str
reset:
  description: The ResetType sent, or null.
  returned: success
  type: str
notes:
  description: What the BMC said about its settings object (no SettingsObject, a previous apply that failed).
  returned: success
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.symphony.cluster.plugins.module_utils._core.module import run_module
from ansible_collections.symphony.cluster.plugins.module_utils._redfish import client as _redfish
from ansible_collections.symphony.cluster.plugins.module_utils._provision.bios import apply_bios_settings


def argument_spec():
    spec = _redfish.redfish_argument_spec()
    spec.update({
        "attributes": {"type": "dict", "required": True},
        "apply_time": {"type": "str", "default": "OnReset",
                       "choices": ["Immediate", "OnReset", "AtMaintenanceWindowStart", "InMaintenanceWindowOnReset"]},
        "reset": {"type": "bool", "default": False},
        "system_id": {"type": "str"},
        "timeout_s": {"type": "float", "default": 900},
        "poll_s": {"type": "float", "default": 10},
    })
    return spec


def _run(params, check_mode):
    client = _redfish.client_from_params(params)
    with client:
        out = apply_bios_settings(client, params["attributes"], apply_time=params["apply_time"],
                                  reset=params["reset"], system_id=params["system_id"],
                                  timeout_s=params["timeout_s"], poll_s=params["poll_s"], check_mode=check_mode)
    out["warnings"] = client.warnings
    return out


def main():
    module = AnsibleModule(argument_spec=argument_spec(), supports_check_mode=True)
    run_module(module, _run, requires={"sushy": _redfish.SUSHY_IMPORT_ERROR})


if __name__ == "__main__":
    main()
