# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The SQLite ledger backend: the default, one file on the controller."""

from __future__ import annotations

import os
import random
import sqlite3
import time
from contextlib import contextmanager
from typing import Any, Iterator

from .errors import LedgerError
from .ledger_base import SQLLedger

# Each migration moves the schema one version up; never edit a released one.  ``ledger_pg`` keeps the same
# versions in PostgreSQL's types: a migration added here is added there with the same number.
MIGRATIONS = [
    """
    CREATE TABLE results (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        run_id TEXT NOT NULL, node TEXT NOT NULL, stage TEXT NOT NULL, check_name TEXT NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('pass','fail','blocked','not_run')),
        reason TEXT, expected TEXT, observed TEXT, remediation TEXT, evidence TEXT,
        started REAL, finished REAL, recorded_at REAL NOT NULL);
    CREATE INDEX results_key ON results (node, stage, check_name, id);
    CREATE TABLE gates (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        run_id TEXT NOT NULL, node TEXT NOT NULL, stage TEXT NOT NULL,
        status TEXT NOT NULL CHECK (status IN ('pass','fail','blocked','not_run')),
        reason TEXT, failing TEXT, waived TEXT, recorded_at REAL NOT NULL);
    CREATE INDEX gates_key ON gates (node, stage, id);
    CREATE TABLE waivers (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        node TEXT NOT NULL, stage TEXT NOT NULL, check_name TEXT NOT NULL,
        who TEXT NOT NULL, why TEXT NOT NULL, recorded_at REAL NOT NULL);
    """,
    """
    CREATE TABLE events (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        node TEXT, kind TEXT NOT NULL, data TEXT, recorded_at REAL NOT NULL);
    CREATE INDEX events_key ON events (node, kind, id);
    """,
    # Leases are who owns a node now, not history: the one table whose rows are replaced and deleted.
    """
    CREATE TABLE leases (
        node TEXT PRIMARY KEY, run_id TEXT NOT NULL, host TEXT NOT NULL, pid INTEGER NOT NULL, stage TEXT,
        acquired_at REAL NOT NULL, heartbeat_at REAL NOT NULL, expires_at REAL NOT NULL);
    CREATE INDEX leases_run ON leases (run_id);
    """,
]
SCHEMA_VERSION = len(MIGRATIONS)


class SQLiteLedger(SQLLedger):
    """SQLite backend.  Safe with many Ansible forks writing at once.

    WAL mode lets readers run beside one writer; every write is one
    ``BEGIN IMMEDIATE`` transaction so concurrent forks queue on the lock
    (``busy_timeout``) instead of failing, and a batch is never half-written.
    """

    _db: sqlite3.Connection
    errors = (sqlite3.Error,)

    def __init__(self, path: str, timeout_s: float = 60.0) -> None:
        self.path = self.where = path
        directory = os.path.dirname(os.path.abspath(path))
        deadline = time.monotonic() + timeout_s
        attempt = 0
        while True:
            try:
                os.makedirs(directory, exist_ok=True)
                self._db = sqlite3.connect(path, timeout=timeout_s, isolation_level=None)
                self._db.execute("PRAGMA busy_timeout = %d" % int(timeout_s * 1000))
                self._db.execute("PRAGMA journal_mode = WAL")
                self._db.execute("PRAGMA synchronous = NORMAL")
                self._migrate()
                return
            except sqlite3.OperationalError as exc:
                # Forks opening a brand-new ledger at once: switching it to WAL needs an exclusive lock, and SQLite
                # answers "database is locked" at once instead of calling the busy handler (it would deadlock).
                # Retry with a jittered back-off until the timeout.
                self._close_quietly()
                attempt += 1
                if ("locked" not in str(exc) and "busy" not in str(exc)) or time.monotonic() >= deadline:
                    raise LedgerError("cannot open ledger: %s" % exc, where=path)
                time.sleep(min(0.5, 0.01 * attempt) * (0.5 + random.random()))
            except (OSError, sqlite3.Error) as exc:
                self._close_quietly()
                raise LedgerError("cannot open ledger: %s" % exc, where=path)

    def _close_quietly(self) -> None:
        # closing a sqlite3 connection twice is harmless: a retry simply replaces it
        db = getattr(self, "_db", None)
        if db is not None:
            try:
                db.close()
            except sqlite3.Error:
                pass

    def _migrate(self) -> None:
        self._db.execute("BEGIN IMMEDIATE")
        try:
            version = self._db.execute("PRAGMA user_version").fetchone()[0]
            if version > SCHEMA_VERSION:
                raise LedgerError("ledger schema version %d is newer than this collection's %d"
                                  % (version, SCHEMA_VERSION), where=self.path)
            for number in range(version, SCHEMA_VERSION):
                for statement in MIGRATIONS[number].split(";"):
                    if statement.strip():
                        self._db.execute(statement)
                self._db.execute("PRAGMA user_version = %d" % (number + 1))
            self._db.execute("COMMIT")
        except BaseException:
            self._db.execute("ROLLBACK")
            raise

    def _cursor(self) -> Any:
        return self._db.cursor()

    @contextmanager
    def _transaction(self) -> Iterator[Any]:
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield self._db.cursor()
            self._db.execute("COMMIT")
        except BaseException:
            self._db.execute("ROLLBACK")
            raise

    def schema_version(self) -> int:
        return int(self._query("PRAGMA user_version")[0][0])

    def close(self) -> None:
        self._db.close()
