#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: ledger_migrate
short_description: Copy a ledger (a SQLite file) into a new one (the shared PostgreSQL ledger) and check it matches
description:
  - Copies every check result, gate, waiver and event of O(source) into the empty ledger O(target), keeping each
    row's id so the latest row per key stays the latest, in one transaction of the target.
  - Then compares the row counts of every table, the current gates and the current results of both, and fails
    when anything differs.
  - Leases are not copied; they say who owns a node now, and the runs that held them are over.
  - A target that already holds rows is refused; the source is only read.
version_added: 0.1.0
author:
  - symphony.cluster maintainers (@symphony-cluster)
options:
  source:
    description:
      - The ledger to copy, usually a SQLite file path; any location O(target) accepts.
    type: str
    required: true
  target:
    description:
      - The new ledger, usually C(postgresql://user@host:5432/db?sslmode=verify-full&sslrootcert=/path/ca.pem).
      - The password comes from C($SYMPHONY_LEDGER_PASSWORD), the variable a C(password_env=NAME) URL parameter
        names, or libpq's C($PGPASSWORD); never put it in the URL.
    type: str
    required: true
extends_documentation_fragment:
  - symphony.cluster.attributes
  - symphony.cluster.attributes.CONTROLLER
attributes:
  check_mode:
    support: full
    details: Counts what would be copied; writes nothing.
  diff_mode:
    support: none
"""

EXAMPLES = r"""
- name: Move the controller's ledger into the shared PostgreSQL ledger before the first AWX run
  symphony.cluster.ledger_migrate:
    source: /var/lib/symphony/ledger.sqlite
    target: "postgresql://symphony@ledger.example.internal:5432/symphony?sslmode=verify-full&sslrootcert=/etc/pki/ledger-ca.pem"
  environment:
    SYMPHONY_LEDGER_PASSWORD: "{{ vault_ledger_password }}"
  delegate_to: localhost
  run_once: true
"""

RETURN = r"""
counts:
  description: Rows per table in the source (and, after the copy, in the target).
  returned: always
  type: dict
  sample: {"results": 1840, "gates": 92, "waivers": 1, "events": 3}
gates:
  description: How many nodes have at least one gate in the source.
  returned: always
  type: int
  sample: 18
match:
  description: True when counts, current gates and current results of both ledgers are equal; null in check mode.
  returned: always
  type: bool
source:
  description: The source location (without any password).
  returned: always
  type: str
target:
  description: The target location (without any password).
  returned: always
  type: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.symphony.cluster.plugins.module_utils._core.module import run_module
from ansible_collections.symphony.cluster.plugins.module_utils._core import ledger_copy as _ledger_copy

ARGUMENT_SPEC = {
    "source": {"type": "str", "required": True},
    "target": {"type": "str", "required": True},
}


def _run(params, check_mode):
    return _ledger_copy.copy_ledger(params["source"], params["target"], check_mode=check_mode)


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    run_module(module, _run)


if __name__ == "__main__":
    main()
