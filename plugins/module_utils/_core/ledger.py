# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ledger: append-only check results, gates, waivers and events with history.

Callers use :func:`open_ledger` and the :class:`Ledger` interface only; the storage backend is chosen by the
URL: a path or ``sqlite:///path`` (``ledger_sqlite``, the default), ``postgresql://...`` (``ledger_pg``, shared by
several controllers and AWX jobs).  Rows are never updated or deleted: the current view is the latest row per key
(``ledger_base``).
"""

from __future__ import annotations

import os
import re
from typing import Optional

from .errors import LedgerError
from .ledger_base import DEFAULT_LEDGER_ENV, Ledger, SQLLedger, default_ledger_path
from .ledger_pg import PostgresLedger, pg_ledger_exists, redact
from .ledger_sqlite import MIGRATIONS as _MIGRATIONS, SCHEMA_VERSION, SQLiteLedger

__all__ = ["DEFAULT_LEDGER_ENV", "Ledger", "SQLLedger", "SCHEMA_VERSION", "SQLiteLedger", "PostgresLedger",
           "default_ledger_path", "is_postgres", "ledger_exists", "open_ledger", "redact", "_MIGRATIONS"]


def is_postgres(location: Optional[str]) -> bool:
    """Whether ``location`` names a PostgreSQL ledger (``postgresql://`` or ``postgres://``)."""
    return bool(location) and str(location).startswith(("postgresql://", "postgres://"))


# An RFC 3986 scheme (two characters or more, so no drive letter) then ":": "postgresql:host/db", a URL missing its
# "//", must not become a SQLite file of that name while the other controllers write the shared ledger.
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]+:")


def _sqlite_path(location: str) -> str:
    path = location[len("sqlite:///"):] if location.startswith("sqlite:///") else location
    if "://" in path:
        raise LedgerError("unknown ledger URL scheme (a path, sqlite:///path or postgresql://...)",
                          where=redact(location))
    scheme = _SCHEME.match(path)
    if scheme:
        # without "//" urlsplit finds no user-info, so nothing past the scheme is named: it may hold a password
        raise LedgerError("unknown ledger URL scheme %r (a path, sqlite:///path or postgresql://...; a file whose "
                          "name starts so: ./%s...)" % (scheme.group(0), scheme.group(0)), where="ledger location")
    return path


def ledger_exists(location: Optional[str] = None) -> bool:
    """Whether the ledger at ``location`` (``open_ledger``'s argument) already exists; creates nothing.

    SQLite: the file exists.  PostgreSQL: the server answers and the ledger's schema table is there.  Raises
    :class:`LedgerError` for an unknown scheme or an unreachable PostgreSQL server.
    """
    location = location or default_ledger_path()
    if is_postgres(location):
        return pg_ledger_exists(location)
    return os.path.exists(_sqlite_path(location))


def open_ledger(location: Optional[str] = None) -> Ledger:
    """Open (creating and migrating as needed) the ledger named by ``location``.

    ``location``: a file path, ``sqlite:///path`` or ``postgresql://user@host/db?sslmode=verify-full...``
    (password and TLS rules in ``ledger_pg``).  ``None`` uses :func:`default_ledger_path`.  Raises
    :class:`LedgerError` for an unknown scheme, an unreachable or refusing server, or a newer schema.
    """
    location = location or default_ledger_path()
    if is_postgres(location):
        return PostgresLedger(location)
    return SQLiteLedger(_sqlite_path(location))
