# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations


class ModuleDocFragment(object):
    """The ledger option shared by every module that records or reads check results."""

    DOCUMENTATION = r"""
options:
  ledger:
    description:
      - Where the ledger lives, a SQLite file path or C(sqlite:///path).
      - Or the PostgreSQL ledger several controllers and AWX jobs share,
        C(postgresql://user@host:5432/db?sslmode=verify-full&sslrootcert=/path/ca.pem) (Python package C(psycopg)).
        The password comes from C($SYMPHONY_LEDGER_PASSWORD), the variable a C(password_env=NAME) URL parameter
        names, or libpq's C($PGPASSWORD) / C(~/.pgpass); it is never logged. A TCP host without C(sslmode) gets
        C(verify-full).
      - When omitted, C($SYMPHONY_LEDGER), else C(~/.local/share/symphony/ledger.sqlite) on the controller.
      - The ledger is append-only; rows are never edited or deleted.
    type: str
    required: false
notes:
  - Runs on the controller (use C(delegate_to=localhost) or a play on C(localhost)); the ledger is a controller file
    or a PostgreSQL server the controller reaches.
  - SQLite in WAL mode with one C(BEGIN IMMEDIATE) transaction per write, so many forks may write at once;
    PostgreSQL takes one advisory lock per write transaction, so rows keep the same order and grouping.
"""
