# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ledger: append-only check results, gates, waivers and events with history.

Callers use :func:`open_ledger` and the :class:`Ledger` interface only; the
storage backend (SQLite here, PostgreSQL later) is chosen by the URL, so adding
a backend touches no caller.  Rows are never updated or deleted: the current
view is the latest row per key.
"""

from __future__ import annotations

import json
import os
import random
import socket
import sqlite3
import time
from abc import ABC, abstractmethod
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from .errors import LedgerError
from .gate import (
    CheckResult,
    GateVerdict,
    STAGES,
)

DEFAULT_LEDGER_ENV = "SYMPHONY_LEDGER"


def default_ledger_path() -> str:
    """``$SYMPHONY_LEDGER`` if set, else ``~/.local/share/symphony/ledger.sqlite``."""
    env = os.environ.get(DEFAULT_LEDGER_ENV)
    if env:
        return env
    return os.path.join(os.path.expanduser("~"), ".local", "share", "symphony", "ledger.sqlite")


class Ledger(ABC):
    """Storage-independent ledger interface."""

    @abstractmethod
    def record_results(self, results: Sequence[CheckResult]) -> None:
        """Append a list of :class:`CheckResult`; all or nothing."""

    @abstractmethod
    def record_gate(self, verdict: GateVerdict, run_id: str) -> None:
        """Append a :class:`GateVerdict` for ``run_id``."""

    @abstractmethod
    def record_waiver(self, node: str, stage: str, check: str, who: str, why: str) -> None:
        """Append an operator's waiver of ``check`` for ``node`` at ``stage``."""

    @abstractmethod
    def record_event(self, node: Optional[str], kind: str, data: Any) -> None:
        """Append a free-form event (drain, eviction, replacement) as JSON ``data``."""

    @abstractmethod
    def current_results(self, node: Optional[str] = None, stage: Optional[str] = None) -> List[CheckResult]:
        """Latest :class:`CheckResult` per (node, stage, check), filtered."""

    @abstractmethod
    def history(self, node: str, stage: Optional[str] = None, check: Optional[str] = None) -> List[CheckResult]:
        """Every recorded result for ``node`` (oldest first)."""

    @abstractmethod
    def current_gates(self, node: Optional[str] = None) -> Dict[str, Dict[str, GateVerdict]]:
        """``{node: {stage: GateVerdict}}``: the latest gate per node and stage."""

    @abstractmethod
    def waivers(self, node: str, stage: str) -> List[str]:
        """Check names waived for ``node`` at ``stage``."""

    @abstractmethod
    def events(self, node: Optional[str] = None, kind: Optional[str] = None) -> List[Dict[str, Any]]:
        """Events as dicts ``{node, kind, data, recorded_at}`` (oldest first)."""

    @abstractmethod
    def acquire_leases(self, nodes: Sequence[str], holder: Mapping[str, Any], ttl_s: float,
                       now: Optional[float] = None) -> Dict[str, Dict[str, Any]]:
        """Lease each of ``nodes`` to ``holder`` (``{run_id, host, pid, stage}``) for ``ttl_s`` seconds.

        A node is granted when it has no lease, its lease expired, it is already ``holder``'s run's, or its
        holder is a process of this host that no longer exists.  Returns ``{node: the holder's lease}`` for the
        nodes another live run holds (not granted); all in one transaction.
        """

    @abstractmethod
    def renew_leases(self, run_id: str, ttl_s: float, now: Optional[float] = None) -> int:
        """Heartbeat: move the expiry of every lease of ``run_id`` to ``now + ttl_s``; returns how many."""

    @abstractmethod
    def release_leases(self, run_id: str, nodes: Optional[Sequence[str]] = None) -> None:
        """Drop the leases of ``run_id`` (only on ``nodes`` when given)."""

    @abstractmethod
    def leases(self, node: Optional[str] = None) -> List[Dict[str, Any]]:
        """Current lease rows ``{node, run_id, host, pid, stage, acquired_at, heartbeat_at, expires_at}``."""

    def node_position(self, node: str) -> Tuple[Optional[str], Optional[str]]:
        """``(stage, gate_status)`` of the node's furthest gated stage, or ``(None, None)``."""
        gates = self.current_gates(node).get(node, {})
        for stage in reversed(STAGES):
            if stage in gates:
                return stage, gates[stage].status
        return None, None

    def close(self) -> None:
        """Release resources."""


# Each migration moves the schema one version up; never edit a released one.
_MIGRATIONS = [
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
SCHEMA_VERSION = len(_MIGRATIONS)


def _dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def _loads(text: Optional[str]) -> Any:
    return json.loads(text) if text not in (None, "") else None


class SQLiteLedger(Ledger):
    """SQLite backend.  Safe with many Ansible forks writing at once.

    WAL mode lets readers run beside one writer; every write is one
    ``BEGIN IMMEDIATE`` transaction so concurrent forks queue on the lock
    (``busy_timeout``) instead of failing, and a batch is never half-written.
    """

    _db: sqlite3.Connection

    def __init__(self, path: str, timeout_s: float = 60.0) -> None:
        self.path = path
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
                for statement in _MIGRATIONS[number].split(";"):
                    if statement.strip():
                        self._db.execute(statement)
                self._db.execute("PRAGMA user_version = %d" % (number + 1))
            self._db.execute("COMMIT")
        except BaseException:
            self._db.execute("ROLLBACK")
            raise

    def _write(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        try:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                self._db.executemany(sql, rows)
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
        except sqlite3.Error as exc:
            raise LedgerError("write failed: %s" % exc, where=self.path)

    def record_results(self, results: Sequence[CheckResult]) -> None:
        now = time.time()
        rows = [(r.run_id, r.node, r.stage, r.check, r.status, r.reason, _dumps(r.expected),
                 _dumps(r.observed), r.remediation, _dumps(r.evidence), r.started, r.finished, now)
                for r in results]
        self._write("INSERT INTO results (run_id, node, stage, check_name, status, reason, expected, observed,"
                    " remediation, evidence, started, finished, recorded_at)"
                    " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)", rows)

    def record_gate(self, verdict: GateVerdict, run_id: str) -> None:
        self._write("INSERT INTO gates (run_id, node, stage, status, reason, failing, waived, recorded_at)"
                    " VALUES (?,?,?,?,?,?,?,?)",
                    [(run_id, verdict.node, verdict.stage, verdict.status, verdict.reason,
                      _dumps(verdict.failing), _dumps(verdict.waived), time.time())])

    def record_waiver(self, node: str, stage: str, check: str, who: str, why: str) -> None:
        if not who or not why:
            raise LedgerError("a waiver needs who and why", where="%s/%s/%s" % (node, stage, check))
        self._write("INSERT INTO waivers (node, stage, check_name, who, why, recorded_at) VALUES (?,?,?,?,?,?)",
                    [(node, stage, check, who, why, time.time())])

    def record_event(self, node: Optional[str], kind: str, data: Any) -> None:
        self._write("INSERT INTO events (node, kind, data, recorded_at) VALUES (?,?,?,?)",
                    [(node, kind, _dumps(data), time.time())])

    def _query(self, sql: str, params: Sequence[Any] = ()) -> List[Any]:
        try:
            return self._db.execute(sql, params).fetchall()
        except sqlite3.Error as exc:
            raise LedgerError("read failed: %s" % exc, where=self.path)

    @staticmethod
    def _row_to_result(row: Sequence[Any]) -> CheckResult:
        (run_id, node, stage, check, status, reason, expected, observed, remediation, evidence,
         started, finished) = row
        return CheckResult(node=node, stage=stage, check=check, status=status, reason=reason or "",
                           expected=_loads(expected), observed=_loads(observed),
                           remediation=remediation or "", evidence=_loads(evidence) or {},
                           started=started or 0.0, finished=finished or 0.0, run_id=run_id)

    _RESULT_COLUMNS = ("run_id, node, stage, check_name, status, reason, expected, observed, remediation,"
                       " evidence, started, finished")

    def current_results(self, node: Optional[str] = None, stage: Optional[str] = None) -> List[CheckResult]:
        where: List[str] = []
        params: List[Any] = []
        if node is not None:
            where.append("node = ?")
            params.append(node)
        if stage is not None:
            where.append("stage = ?")
            params.append(stage)
        cond = ("WHERE " + " AND ".join(where)) if where else ""
        sql = ("SELECT %s FROM results WHERE id IN (SELECT MAX(id) FROM results %s"
               " GROUP BY node, stage, check_name) ORDER BY id" % (self._RESULT_COLUMNS, cond))
        return [self._row_to_result(r) for r in self._query(sql, params)]

    def history(self, node: str, stage: Optional[str] = None, check: Optional[str] = None) -> List[CheckResult]:
        sql = "SELECT %s FROM results WHERE node = ?" % self._RESULT_COLUMNS
        params: List[Any] = [node]
        if stage is not None:
            sql += " AND stage = ?"
            params.append(stage)
        if check is not None:
            sql += " AND check_name = ?"
            params.append(check)
        return [self._row_to_result(r) for r in self._query(sql + " ORDER BY id", params)]

    def current_gates(self, node: Optional[str] = None) -> Dict[str, Dict[str, GateVerdict]]:
        cond, params = "", []
        if node is not None:
            cond, params = "WHERE node = ?", [node]
        rows = self._query("SELECT node, stage, status, reason, failing, waived FROM gates WHERE id IN"
                           " (SELECT MAX(id) FROM gates %s GROUP BY node, stage) ORDER BY id" % cond, params)
        out: Dict[str, Dict[str, GateVerdict]] = {}
        for node_, stage, status, reason, failing, waived in rows:
            out.setdefault(node_, {})[stage] = GateVerdict(node_, stage, status, reason or "",
                                                           _loads(failing) or [], _loads(waived) or [])
        return out

    def waivers(self, node: str, stage: str) -> List[str]:
        rows = self._query("SELECT DISTINCT check_name FROM waivers WHERE node = ? AND stage = ?", (node, stage))
        return [r[0] for r in rows]

    def events(self, node: Optional[str] = None, kind: Optional[str] = None) -> List[Dict[str, Any]]:
        sql = "SELECT node, kind, data, recorded_at FROM events WHERE 1=1"
        params: List[Any] = []
        if node is not None:
            sql += " AND node = ?"
            params.append(node)
        if kind is not None:
            sql += " AND kind = ?"
            params.append(kind)
        return [{"node": n, "kind": k, "data": _loads(d), "recorded_at": t}
                for n, k, d, t in self._query(sql + " ORDER BY id", params)]

    _LEASE_COLUMNS = ("node", "run_id", "host", "pid", "stage", "acquired_at", "heartbeat_at", "expires_at")

    def acquire_leases(self, nodes: Sequence[str], holder: Mapping[str, Any], ttl_s: float,
                       now: Optional[float] = None) -> Dict[str, Dict[str, Any]]:
        now = time.time() if now is None else now
        taken: Dict[str, Dict[str, Any]] = {}
        try:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                for node in nodes:
                    row = self._db.execute("SELECT %s FROM leases WHERE node = ?" % ", ".join(self._LEASE_COLUMNS),
                                           (node,)).fetchone()
                    current = dict(zip(self._LEASE_COLUMNS, row)) if row else None
                    if current and current["run_id"] != holder["run_id"] and current["expires_at"] > now \
                            and _alive(current["host"], current["pid"]):
                        taken[node] = current
                        continue
                    acquired = current["acquired_at"] if current and current["run_id"] == holder["run_id"] else now
                    self._db.execute("INSERT OR REPLACE INTO leases (%s) VALUES (?,?,?,?,?,?,?,?)"
                                     % ", ".join(self._LEASE_COLUMNS),
                                     (node, holder["run_id"], holder["host"], int(holder["pid"]), holder.get("stage"),
                                      acquired, now, now + ttl_s))
                self._db.execute("COMMIT")
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
        except sqlite3.Error as exc:
            raise LedgerError("lease failed: %s" % exc, where=self.path)
        return taken

    def renew_leases(self, run_id: str, ttl_s: float, now: Optional[float] = None) -> int:
        now = time.time() if now is None else now
        try:
            cur = self._db.execute("UPDATE leases SET heartbeat_at = ?, expires_at = ? WHERE run_id = ?",
                                   (now, now + ttl_s, run_id))
        except sqlite3.Error as exc:
            raise LedgerError("lease heartbeat failed: %s" % exc, where=self.path)
        return cur.rowcount

    def release_leases(self, run_id: str, nodes: Optional[Sequence[str]] = None) -> None:
        if nodes is None:
            self._write("DELETE FROM leases WHERE run_id = ?", [(run_id,)])
        else:
            self._write("DELETE FROM leases WHERE run_id = ? AND node = ?", [(run_id, n) for n in nodes])

    def leases(self, node: Optional[str] = None) -> List[Dict[str, Any]]:
        sql = "SELECT %s FROM leases" % ", ".join(self._LEASE_COLUMNS)
        where, params = (" WHERE node = ?", (node,)) if node is not None else (" ORDER BY node", ())
        rows = self._query(sql + where, params)
        return [dict(zip(self._LEASE_COLUMNS, row)) for row in rows]

    def close(self) -> None:
        self._db.close()


def _alive(host: str, pid: int) -> bool:
    """Whether the lease holder ``pid`` on ``host`` may still run: a process of another host is assumed alive (its
    lease expires), one of this host is looked up (``kill(pid, 0)``: ESRCH = gone; EPERM = alive, not ours)."""
    if host != socket.gethostname():
        return True
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def open_ledger(location: Optional[str] = None) -> Ledger:
    """Open the ledger named by ``location``.

    ``location``: a file path or ``sqlite:///path``; ``postgresql://...`` is
    reserved for the shared backend and raises :class:`LedgerError` until it
    ships.  ``None`` uses :func:`default_ledger_path`.
    """
    location = location or default_ledger_path()
    if location.startswith("sqlite:///"):
        return SQLiteLedger(location[len("sqlite:///"):])
    if location.startswith(("postgresql://", "postgres://")):
        raise LedgerError("the PostgreSQL ledger backend is not available in this release; use a SQLite path",
                          where="ledger")
    if "://" in location:
        raise LedgerError("unknown ledger URL scheme", where=location)
    return SQLiteLedger(location)
