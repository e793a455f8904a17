#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: burnin_fleet
short_description: Compare a node's burn-in numbers with the fleet of its SKU in the ledger
description:
  - For each number a burn-in check observed, reads the latest passing result of the same check on the other
    nodes of the same SKU from the ledger and computes the modified z-score of Iglewicz and Hoaglin (1993)
    from their median and median absolute deviation; C(|z| > 3.5) is a fleet-outlier warning.
  - Warnings go into each check's C(evidence.fleet) (the report shows them); no status is changed. The SKU's
    floors decide the gate.
  - Paths with fewer than five peer values are not compared. A ledger that does not exist yet has no fleet.
version_added: 0.1.0
author:
  - symphony.cluster maintainers (@symphony-cluster)
options:
  node:
    description: The node the checks belong to (its own earlier results are not peers).
    type: str
    required: true
  sku:
    description: The node's SKU name (C(sku) of its manifest); recorded in each check's evidence.
    type: str
    required: true
  checks:
    description: The checks as M(symphony.cluster.burnin_run) returns them (C(name), C(status), C(observed), C(evidence)).
    type: list
    elements: dict
    required: true
extends_documentation_fragment:
  - symphony.cluster.attributes
  - symphony.cluster.attributes.CONTROLLER
  - symphony.cluster.attributes.INFO_MODULE
  - symphony.cluster.ledger
"""

EXAMPLES = r"""
- name: Compare the results with the fleet before recording them
  symphony.cluster.burnin_fleet:
    ledger: /var/lib/symphony/ledger.sqlite
    node: "{{ inventory_hostname }}"
    sku: "{{ burn_in_manifest.sku }}"
    checks: "{{ burn_in_checks }}"
  delegate_to: localhost
  register: burn_in_fleet

- name: Say which numbers stand out from the fleet
  ansible.builtin.debug:
    var: burn_in_fleet.outliers
"""

RETURN = r"""
checks:
  description: The checks, each with C(evidence.sku) and, where compared, C(evidence.fleet) (C(sku), C(peers),
    C(compared) per path C({value, median, mad, z, n}), C(warnings)).
  returned: always
  type: list
  elements: dict
outliers:
  description: Every fleet-outlier warning, one sentence each (also printed as the task's warnings).
  returned: always
  type: list
  elements: str
peers_read:
  description: How many current burn-in results the ledger held.
  returned: always
  type: int
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.symphony.cluster.plugins.module_utils._core.module import run_module
from ansible_collections.symphony.cluster.plugins.module_utils._burnin import fleet_stats as _fleet_stats

ARGUMENT_SPEC = {
    "ledger": {"type": "str"},
    "node": {"type": "str", "required": True},
    "sku": {"type": "str", "required": True},
    "checks": {"type": "list", "elements": "dict", "required": True},
}


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    run_module(module, _fleet_stats.burnin_fleet)


if __name__ == "__main__":
    main()
