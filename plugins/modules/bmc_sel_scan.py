#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: bmc_sel_scan
short_description: Burn-in's BMC SEL scan over Redfish - mark before the tiers, judge the entries logged during them
description:
  - Reads each node's BMC System Event Log (SEL) over Redfish from the controller, for a batch of hosts at once
    with a bounded worker pool (the Systems and Managers LogServices whose C(LogEntryType) is C(SEL) or C(Event)).
  - V(mark), before the burn-in tiers, returns per host where each SEL stood (newest entry id and time).
  - V(check), after the tiers and the fabric tier, reads the SEL again and judges only the entries that appeared
    since the mark, as the burn_in check C(bmc_sel_scan) - C(fail) on any C(Severity) C(Critical) entry (the
    entries named in the reason), C(pass) otherwise with any C(Warning) entries in the reason, C(not_run) with the
    reason when the BMC or its SEL could not be read before or after (never C(pass)).
  - A SEL cleared or wrapped during burn-in (newest id lower than marked) counts whole.
  - Returns check dicts for M(symphony.cluster.gate_record); writes nothing.
version_added: 0.1.0
author:
  - symphony.cluster maintainers (@symphony-cluster)
options:
  mode:
    description: V(mark) before the tiers, V(check) after them.
    type: str
    choices: [mark, check]
    required: true
  hosts:
    description: Inventory hostnames whose BMCs are read.
    type: list
    elements: str
    required: true
  marks:
    description: With O(mode=check), the C(marks) that O(mode=mark) returned (host -> mark).
    type: dict
    default: {}
  bmc_addresses:
    description: BMC address or URL per host not in O(bmc_map) (for example the twin's C(bmc_address)).
    type: dict
    default: {}
  injected:
    description:
      - With O(mode=check), per host the messages of SEL entries a fault-injection exercise wrote (the ledger's
        C(fault_injected) events, M(symphony.cluster.fleet_audit_exercise)); such an entry is judged like any
        other and marked C([injected]) in the reason and C(injected) in C(observed).
    type: dict
    default: {}
  window:
    description: With O(mode=check), the reason's words for when the judged entries were logged.
    type: str
    default: during burn-in
  validate_certs:
    description: Verify the BMCs' TLS certificates (this module does not return the warning when it is off).
extends_documentation_fragment:
  - symphony.cluster.redfish
  - symphony.cluster.fleet
  - symphony.cluster.attributes
  - symphony.cluster.attributes.CONTROLLER
  - symphony.cluster.attributes.INFO_MODULE
"""

EXAMPLES = r"""
- name: Mark the SELs before the burn-in tiers
  symphony.cluster.bmc_sel_scan:
    mode: mark
    hosts: "{{ ansible_play_hosts }}"
    bmc_map: build/demo/bmcs.json
  run_once: true
  delegate_to: localhost
  register: sel_mark

- name: Judge what the BMCs logged during burn-in
  symphony.cluster.bmc_sel_scan:
    mode: check
    hosts: "{{ ansible_play_hosts }}"
    marks: "{{ sel_mark.marks }}"
    username: "{{ bmc_username }}"
    password: "{{ bmc_password }}"
    bmc_addresses: "{{ dict(ansible_play_hosts | zip(ansible_play_hosts | map('extract', hostvars, ['symphony_twin', 'bmc_address']))) }}"
  run_once: true
  delegate_to: localhost
  register: sel_check
"""

RETURN = r"""
marks:
  description: With O(mode=mark), per host per LogService the entry count, newest numeric id, its C(Created) and
    C(Message), and the controller time of the mark; C(error) instead when the BMC could not be read.
  returned: when mode is mark
  type: dict
  sample: {"gpu-r01-u02": {"marked_at": "2026-03-02T10:00:00Z", "logs": {"/redfish/v1/Systems/1/LogServices/Log1": {
           "entries": 82, "last_id": 82, "last_created": "2023-11-30T20:35:05Z",
           "last_message": "[PWR-0000] PS8 Status, Power Supply Installed"}}}}
checks:
  description: With O(mode=check), per host the C(bmc_sel_scan) check dict for M(symphony.cluster.gate_record)
    (C(name), C(status), C(reason), C(remediation), C(expected), C(observed) with the new Critical/Warning entries).
  returned: when mode is check
  type: dict
  sample: {"gpu-r01-u02": {"name": "bmc_sel_scan", "status": "fail", "required": true,
           "reason": "SEL: 1 Critical entry during burn-in: 'GPU5 temperature above upper critical' at 2026-03-02T11:04:10Z"}}
summary:
  description: Number of hosts per check status.
  returned: when mode is check
  type: dict
  sample: {"pass": 7, "fail": 1}
failed_hosts:
  description: Hosts whose check failed.
  returned: when mode is check
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.symphony.cluster.plugins.module_utils._core.module import run_module
from ansible_collections.symphony.cluster.plugins.module_utils._fleet.batch import fleet_argument_spec
from ansible_collections.symphony.cluster.plugins.module_utils._burnin.sel_scan import sel_scan

ARGUMENT_SPEC = fleet_argument_spec(options={
    "mode": {"type": "str", "choices": ["mark", "check"], "required": True},
    "hosts": {"type": "list", "elements": "str", "required": True},
    "marks": {"type": "dict", "default": {}},
    "bmc_addresses": {"type": "dict", "default": {}},
    "injected": {"type": "dict", "default": {}},
    "window": {"type": "str", "default": "during burn-in"},
})


def _run(params, check_mode):
    return sel_scan(params)


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    run_module(module, _run)


if __name__ == "__main__":
    main()
