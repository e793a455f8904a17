#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: gate_info
short_description: Read current check results, gates and history from the ledger
description:
  - Returns the current view of the ledger (the latest result per node, stage and check; the latest gate per
    node and stage; each node's furthest gated stage) and, on request, a node's full history.
  - A ledger that does not exist yet reads as empty and is not created.
version_added: 0.1.0
author:
  - symphony.cluster maintainers (@symphony-cluster)
options:
  node:
    description: Only this node. Required with O(history).
    type: str
  stage:
    description: Only this stage.
    type: str
    choices: [pre_deployment, provisioning, burn_in, cluster_validation, fleet_audit]
  history:
    description: Also return every recorded result of O(node) (oldest first), filtered by O(stage) and O(check).
    type: bool
    default: false
  check:
    description: With O(history), only this check.
    type: str
extends_documentation_fragment:
  - symphony.cluster.ledger
  - symphony.cluster.attributes
  - symphony.cluster.attributes.CONTROLLER
  - symphony.cluster.attributes.INFO_MODULE
"""

EXAMPLES = r"""
- name: Where is every node?
  symphony.cluster.gate_info:
    ledger: /var/lib/symphony/ledger.sqlite
  delegate_to: localhost
  run_once: true
  register: ledger_view

- name: Burn-in history of one node
  symphony.cluster.gate_info:
    node: gpu-r01-u02
    stage: burn_in
    history: true
  delegate_to: localhost
"""

RETURN = r"""
results:
  description: The latest result per node, stage and check (filtered).
  returned: always
  type: list
  elements: dict
  sample: [{"node": "gpu-r01-u02", "stage": "pre_deployment", "check": "bmc_login", "status": "pass",
            "reason": "", "run_id": "run-20261129T153501-1a2b3c4d"}]
gates:
  description: The latest gate per node and stage, as C({node -> {stage -> gate}}).
  returned: always
  type: dict
  sample: {"gpu-r01-u02": {"pre_deployment": {"status": "pass", "reason": "all required checks passed",
                                             "failing": [], "waived": []}}}
positions:
  description: Each node's furthest gated stage and that gate's status, as C({node -> {stage, gate, reason}}).
  returned: always
  type: dict
  sample: {"gpu-r01-u02": {"stage": "pre_deployment", "gate": "pass", "reason": "all required checks passed"}}
history:
  description: Every recorded result of O(node), oldest first.
  returned: when O(history) is true
  type: list
  elements: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.symphony.cluster.plugins.module_utils._core.module import run_module
from ansible_collections.symphony.cluster.plugins.module_utils._core.gate import STAGES
from ansible_collections.symphony.cluster.plugins.module_utils._core import gate_ops as _gate_ops

ARGUMENT_SPEC = {
    "ledger": {"type": "str"},
    "node": {"type": "str"},
    "stage": {"type": "str", "choices": list(STAGES)},
    "history": {"type": "bool", "default": False},
    "check": {"type": "str"},
}


def _run(params, check_mode):
    return _gate_ops.gate_info(params)


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True,
                           required_if=[("history", True, ("node",))])
    run_module(module, _run)


if __name__ == "__main__":
    main()
