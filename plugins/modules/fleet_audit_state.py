#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: fleet_audit_state
short_description: What the ledger holds for a fleet audit, before it (previous readings) and after it (drift table)
description:
  - Stage 5 of symphony.cluster (fleet_audit), the ledger side.
  - O(mode=lock) takes the fleet audit's run lock, a lease in the ledger held for the C(ansible-playbook)
    process. A run that overlaps a running one fails at once with a message naming the holder. It returns the
    run id, and when the last run was interrupted (it started and never finished) it resumes it, with the same run id,
    C(done) the hosts that run already recorded (the role skips them) and C(injected) the nodes it injected on
    (not injected again), so a rerun writes no row twice. O(mode=unlock) records the run finished and releases
    the lock.
  - O(mode=before) returns per host the previous audit's readings (kernel-log cursor and open findings, counter
    snapshots), the kernel-log messages the exercise injected, when the node last passed burn_in, and the SEL mark
    the previous audit left.
  - O(mode=after) returns per host the drift table (component, expected, found, since when, first seen in which
    run), the exercise's timings, both from the ledger's rows and timestamps, and the node's Prometheus textfile
    metrics; with O(report_dir) it also writes the fleet-audit page (drift table, health events, exercise timeline)
    with its JSON and JUnit.
  - O(mode=mark_sel) appends each host's SEL mark (O(sel_marks), from M(symphony.cluster.bmc_sel_scan)) as a
    ledger event, for the next audit's SEL check.
version_added: 0.1.0
author:
  - symphony.cluster maintainers (@symphony-cluster)
options:
  hosts:
    description: The nodes.
    type: list
    elements: str
    required: true
  mode:
    description: What to read or append (see the description).
    type: str
    choices: [lock, unlock, before, after, mark_sel]
    default: before
  run_id:
    description: This run's id (from O(mode=lock)); with O(mode=before) this run's own SEL marks are not the
      previous audit's, with O(mode=mark_sel) a host this run already marked is not marked again.
    type: str
  lock_id:
    description: With O(mode=unlock), the C(lock_id) O(mode=lock) returned.
    type: str
  lock_ttl_s:
    description: With O(mode=lock), seconds the lock outlives its holder when that is on another host (a holder
      on this host whose playbook is gone frees it at once).
    type: float
    default: 3600
  sel_marks:
    description: With O(mode=mark_sel), C({host -> SEL mark}).
    type: dict
    default: {}
  report_dir:
    description: With O(mode=after), write C(fleet_audit.html), C(fleet_audit.json) and C(fleet_audit_junit.xml) here.
    type: path
extends_documentation_fragment:
  - symphony.cluster.ledger
  - symphony.cluster.attributes
  - symphony.cluster.attributes.CONTROLLER
attributes:
  check_mode:
    support: full
    details:
      - O(mode=mark_sel) appends nothing in check mode; O(mode=lock) and O(mode=unlock) take and release nothing.
  diff_mode:
    support: none
"""

EXAMPLES = r"""
- name: Read what the previous audit left
  symphony.cluster.fleet_audit_state:
    hosts: "{{ ansible_play_hosts }}"
  run_once: true
  delegate_to: localhost
  register: fleet_audit_state
"""

RETURN = r"""
run_id:
  description: With O(mode=lock), the run's id (a resumed run's when C(resumed)).
  returned: with O(mode=lock)
  type: str
lock_id:
  description: With O(mode=lock), the lock's id, for O(mode=unlock).
  returned: with O(mode=lock)
  type: str
resumed:
  description: With O(mode=lock), whether an interrupted run is resumed.
  returned: with O(mode=lock)
  type: bool
done:
  description: With O(mode=lock), the hosts the resumed run already recorded.
  returned: with O(mode=lock)
  type: list
  elements: str
injected:
  description: With O(mode=lock), the nodes the resumed run already injected a fault on.
  returned: with O(mode=lock)
  type: list
  elements: str
hosts:
  description: Per host the state (O(mode=before)), or C(drift), C(exercise) and C(metrics) (O(mode=after)).
  returned: always
  type: dict
report:
  description: The paths of the files written (C(html), C(json), C(junit)).
  returned: with O(mode=after) and O(report_dir)
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.symphony.cluster.plugins.module_utils._core.module import run_module
from ansible_collections.symphony.cluster.plugins.module_utils._fleet_audit.metrics import PROMETHEUS_IMPORT_ERROR
from ansible_collections.symphony.cluster.plugins.module_utils._fleet_audit.state import state_module

ARGUMENT_SPEC = {
    "ledger": {"type": "str"},
    "hosts": {"type": "list", "elements": "str", "required": True},
    "mode": {"type": "str", "choices": ["lock", "unlock", "before", "after", "mark_sel"], "default": "before"},
    "run_id": {"type": "str"},
    "lock_id": {"type": "str"},
    "lock_ttl_s": {"type": "float", "default": 3600},
    "sel_marks": {"type": "dict", "default": {}},
    "report_dir": {"type": "path"},
}


def _run(params, check_mode):
    if check_mode and params["mode"] in ("lock", "unlock"):
        return {"changed": False, "run_id": params.get("run_id") or "check-mode", "lock_id": "", "resumed": False,
                "done": [], "injected": [], "hosts": {}}
    if check_mode and params["mode"] == "mark_sel":
        return {"changed": True, "hosts": {}}
    if check_mode:
        params = dict(params, report_dir=None)
    return state_module(params)


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    run_module(module, _run, requires={"prometheus_client": PROMETHEUS_IMPORT_ERROR})


if __name__ == "__main__":
    main()
