#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: node_evict
short_description: Drain a node in Slurm with a reason and promote a spare that passed burn-in
description:
  - Drains O(node) with C(scontrol update nodename=... state=DRAIN reason=...) unless it is already drained or
    down, records a C(drain) event in the ledger, and picks the first of O(spares) whose C(burn_in) gate passed
    (ledger) and that is not in O(exclude), recorded as a C(spare_promoted) event.
  - Check mode returns the plan (drain or not, which spare, why others were skipped) without changing anything.
version_added: 0.1.0
author:
  - symphony.cluster maintainers (@symphony-cluster)
options:
  node:
    description: The node to drain (its inventory name, which the ledger uses).
    type: str
    required: true
  slurm_node:
    description: The node's Slurm C(NodeName) when it is not O(node) (the demo's lab hosts are C(labN)); Slurm is
      asked and drained by this name. Default O(node).
    type: str
  reason:
    description: Why (Slurm keeps it with the node; the ledger keeps it with the event).
    type: str
    required: true
  spares:
    description: The twin's spare pool, in order of preference.
    type: list
    elements: str
    default: []
  exclude:
    description: Nodes already in use or evicted.
    type: list
    elements: str
    default: []
  slurm_conf:
    description: C(SLURM_CONF) for the Slurm client commands (the lab's slurm.conf).
    type: path
  run_id:
    description: Run id recorded with the events.
    type: str
extends_documentation_fragment:
  - symphony.cluster.attributes
  - symphony.cluster.ledger
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
"""

EXAMPLES = r"""
- name: Drain the hot node and promote a spare
  symphony.cluster.node_evict:
    node: gpu-040
    reason: "cluster_validation: GPU 7 20 C above peer median"
    spares: "{{ groups['spare'] }}"
    ledger: /var/lib/symphony/ledger.sqlite
  register: evicted
"""

RETURN = r"""
drain:
  description: Whether the node was (or would be) drained.
  returned: success
  type: bool
before:
  description: The node's Slurm state before.
  returned: success
  type: str
spare:
  description: The promoted spare, or null when none passed burn-in.
  returned: success
  type: str
skipped_spares:
  description: Spares passed over and why.
  returned: success
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.symphony.cluster.plugins.module_utils._core.module import run_module
from ansible_collections.symphony.cluster.plugins.module_utils._validation.tasks_evict import run_evict

ARGUMENT_SPEC = {
    "node": {"type": "str", "required": True},
    "slurm_node": {"type": "str"},
    "reason": {"type": "str", "required": True},
    "spares": {"type": "list", "elements": "str", "default": []},
    "exclude": {"type": "list", "elements": "str", "default": []},
    "ledger": {"type": "str"},
    "slurm_conf": {"type": "path"},
    "run_id": {"type": "str"},
}


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    run_module(module, run_evict)


if __name__ == "__main__":
    main()
