#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: gate_record
short_description: Record check results for a node and stage, and compute and record the stage gate
description:
  - Takes the check results of one node at one stage, each with the checks it depends on, derives C(blocked)
    from that dependency graph (a check is C(blocked) exactly when a dependency did not pass), computes the
    stage gate and appends the results and the gate to the ledger.
  - A gate passes only when the latest result of every required check passes, whichever run wrote it (see
    O(declared)). Precedence of a closed gate is C(fail), then C(blocked), then C(not_run) (a required check
    that did not run keeps the gate closed).
  - Waivers already in the ledger for this node and stage, and those given in O(waive), open the gate for the
    checks they name; a waiver is a new ledger row saying who waived what and why, never an edit.
  - The ledger is append-only, so every real run appends rows and reports C(changed).
version_added: 0.1.0
author:
  - symphony.cluster maintainers (@symphony-cluster)
options:
  node:
    description: The node (inventory hostname, as in the twin).
    type: str
    required: true
  stage:
    description: The stage the checks belong to.
    type: str
    required: true
    choices: [pre_deployment, provisioning, burn_in, cluster_validation, fleet_audit]
  checks:
    description: The check results of this run, one per check.
    type: list
    elements: dict
    required: true
    suboptions:
      name:
        description: Check name, unique within the stage.
        type: str
        required: true
      status:
        description:
          - C(pass), C(fail), C(blocked) or C(not_run).
          - Reported C(pass)/C(fail)/C(not_run) become C(blocked) when a dependency did not pass.
        type: str
        required: true
        choices: [pass, fail, blocked, not_run]
      reason:
        description: What differed, in the field's words (required in practice for C(fail) and C(not_run)).
        type: str
        default: ""
      expected:
        description: What the SKU or twin expected.
        type: raw
      observed:
        description: What was observed.
        type: raw
      remediation:
        description: What a technician or the automation does next.
        type: str
        default: ""
      evidence:
        description: References to raw evidence (file paths, tool output digests). Never secrets.
        type: dict
        default: {}
      depends_on:
        description: Names of checks (in O(checks)) that must pass before this one means anything.
        type: list
        elements: str
        default: []
      required:
        description: Whether the gate requires this check.
        type: bool
        default: true
      started:
        description: When the check started, UNIX seconds. Defaults to now.
        type: float
      finished:
        description: When the check finished, UNIX seconds. Defaults to now.
        type: float
  run_id:
    description: Run id to record under; a new sortable id (C(run-YYYYmmddTHHMMSS-xxxxxxxx)) when omitted.
    type: str
  optional:
    description:
      - Checks this gate does not require, typically the SKU's C(gates.<profile>.<stage>.optional).
      - Names of no check are ignored.
    type: list
    elements: str
    default: []
  declared:
    description:
      - Every check the stage declares for this node's SKU and profile (for burn-in, the C(declared) that
        M(symphony.cluster.burnin_run) returns), whether this run carried it or not.
      - The gate reads the latest result of every required check, whichever run wrote it; the checks are those
        of O(checks), O(declared) and the ledger's current results for the node and stage. A declared check with
        no result anywhere keeps the gate C(not_run), so a run of a subset can only add results and never opens
        a gate that a check it did not rerun keeps closed.
    type: list
    elements: str
    default: []
  waive:
    description: Operator waivers to record with this run.
    type: list
    elements: dict
    default: []
    suboptions:
      check:
        description: The waived check.
        type: str
        required: true
      who:
        description: Who waived it.
        type: str
        required: true
      why:
        description: Why.
        type: str
        required: true
extends_documentation_fragment:
  - symphony.cluster.ledger
  - symphony.cluster.attributes
  - symphony.cluster.attributes.CONTROLLER
attributes:
  check_mode:
    support: full
    details:
      - In check mode the results and the gate are computed and returned exactly as a real run would record
        them, and nothing is written.
  diff_mode:
    support: none
"""

EXAMPLES = r"""
- name: Record the pre-deployment gate of a node
  symphony.cluster.gate_record:
    ledger: /var/lib/symphony/ledger.sqlite
    node: "{{ inventory_hostname }}"
    stage: pre_deployment
    optional: "{{ symphony_expected.gates[symphony_profile].pre_deployment.optional | default([]) }}"
    checks:
      - name: bmc_reachable
        status: pass
      - name: bmc_login
        status: fail
        depends_on: [bmc_reachable]
        reason: "401 Unauthorized for user admin"
        remediation: fix the BMC credentials in the vault and rerun
      - name: gpu_inventory
        status: not_run
        depends_on: [bmc_login]
  delegate_to: localhost

- name: Waive a check with a reason (a new ledger row, never an edit)
  symphony.cluster.gate_record:
    node: gpu-r01-u02
    stage: burn_in
    checks: "{{ burn_in_results }}"
    waive:
      - check: fio_randread_4k
        who: jdoe
        why: "RMA of drive 3 booked (ticket 4711); node admitted with 7 drives"
  delegate_to: localhost
"""

RETURN = r"""
run_id:
  description: The run id the rows were (or would be) recorded under.
  returned: always
  type: str
  sample: run-20261129T153501-1a2b3c4d
recorded:
  description: Whether rows were appended (false in check mode).
  returned: always
  type: bool
gate:
  description: The stage gate of the node.
  returned: always
  type: dict
  contains:
    node: {description: The node., type: str, returned: always}
    stage: {description: The stage., type: str, returned: always}
    status: {description: "pass, fail, blocked or not_run.", type: str, returned: always}
    reason: {description: The first check that kept the gate closed and why., type: str, returned: always}
    failing: {description: Required checks that kept the gate closed., type: list, elements: str, returned: always}
    waived: {description: Required checks that did not pass but are waived., type: list, elements: str, returned: always}
  sample: {"node": "gpu-r01-u02", "stage": "pre_deployment", "status": "fail",
           "reason": "bmc_login: 401 Unauthorized for user admin", "failing": ["bmc_login"], "waived": []}
results:
  description: The check results as recorded, in dependency order, with C(blocked) derived.
  returned: always
  type: list
  elements: dict
  sample: [{"node": "gpu-r01-u02", "stage": "pre_deployment", "check": "gpu_inventory", "status": "blocked",
            "reason": "blocked by bmc_login (fail)", "run_id": "run-20261129T153501-1a2b3c4d"}]
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.symphony.cluster.plugins.module_utils._core.module import run_module
from ansible_collections.symphony.cluster.plugins.module_utils._core.gate import STAGES, STATUSES
from ansible_collections.symphony.cluster.plugins.module_utils._core import gate_ops as _gate_ops

CHECK_OPTIONS = {
    "name": {"type": "str", "required": True},
    "status": {"type": "str", "required": True, "choices": list(STATUSES)},
    "reason": {"type": "str", "default": ""},
    "expected": {"type": "raw"},
    "observed": {"type": "raw"},
    "remediation": {"type": "str", "default": ""},
    "evidence": {"type": "dict", "default": {}},
    "depends_on": {"type": "list", "elements": "str", "default": []},
    "required": {"type": "bool", "default": True},
    "started": {"type": "float"},
    "finished": {"type": "float"},
}
ARGUMENT_SPEC = {
    "ledger": {"type": "str"},
    "node": {"type": "str", "required": True},
    "stage": {"type": "str", "required": True, "choices": list(STAGES)},
    "checks": {"type": "list", "elements": "dict", "required": True, "options": CHECK_OPTIONS},
    "run_id": {"type": "str"},
    "optional": {"type": "list", "elements": "str", "default": []},
    "declared": {"type": "list", "elements": "str", "default": []},
    "waive": {"type": "list", "elements": "dict", "default": [],
              "options": {"check": {"type": "str", "required": True}, "who": {"type": "str", "required": True},
                          "why": {"type": "str", "required": True}}},
}


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    run_module(module, _gate_ops.gate_record)


if __name__ == "__main__":
    main()
