# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ledger interface and the SQL both backends share (``ledger_sqlite``, ``ledger_pg``).

Rows are never updated or deleted (leases aside, which say who owns a node now): the current view is the
latest row per key, "latest" being the highest ``id``.  Every backend serialises its write transactions (SQLite:
``BEGIN IMMEDIATE``; PostgreSQL: one advisory lock), so ``id`` order is commit order and a batch's rows are
contiguous: a reader never sees a later row before an earlier one, whichever process wrote them.
"""

from __future__ import annotations

import json
import os
import socket
import time
from abc import ABC, abstractmethod
from contextlib import contextmanager
from typing import Any, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple, Type

from .errors import LedgerError
from .secrets import scrub
from .gate import (
    CheckResult,
    GateVerdict,
    STAGES,
)

DEFAULT_LEDGER_ENV = "SYMPHONY_LEDGER"

# The append-only tables and their columns (``id`` first), in the order a copy (``ledger_copy``) writes them.
TABLES: Dict[str, Tuple[str, ...]] = {
    "results": ("id", "run_id", "node", "stage", "check_name", "status", "reason", "expected", "observed",
                "remediation", "evidence", "started", "finished", "recorded_at"),
    "gates": ("id", "run_id", "node", "stage", "status", "reason", "failing", "waived", "recorded_at"),
    "waivers": ("id", "node", "stage", "check_name", "who", "why", "recorded_at"),
    "events": ("id", "node", "kind", "data", "recorded_at"),
}
LEASE_COLUMNS = ("node", "run_id", "host", "pid", "stage", "acquired_at", "heartbeat_at", "expires_at")


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


def _dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True, default=str)


def _loads(text: Optional[str]) -> Any:
    return json.loads(text) if text not in (None, "") else None


def alive(host: str, pid: int) -> bool:
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


class SQLLedger(Ledger):
    """The ledger over a DB-API connection; a backend supplies the connection, its write transaction and errors.

    SQL here is written with ``?`` placeholders and portable between SQLite (>= 3.24, for the upsert) and
    PostgreSQL; :meth:`_sql` adapts it to the driver's paramstyle.
    """

    #: the driver's exception base class(es), turned into :class:`LedgerError`
    errors: Tuple[Type[BaseException], ...] = ()
    #: where the ledger is, as errors name it (never with a password)
    where: str = "ledger"
    #: values scrubbed from every error message (the connection's password)
    secrets: List[str] = []

    def _error(self, what: str, exc: BaseException) -> LedgerError:
        return LedgerError("%s: %s" % (what, scrub(str(exc), self.secrets)), where=self.where)

    def _sql(self, sql: str) -> str:
        """``sql`` in the driver's paramstyle (``?`` stays ``?`` unless the backend says otherwise)."""
        return sql

    @abstractmethod
    def _cursor(self) -> Any:
        """A fresh DB-API cursor of the connection (autocommit reads)."""

    @abstractmethod
    @contextmanager
    def _transaction(self) -> Iterator[Any]:
        """A write transaction that holds the ledger's one writer lock; yields a cursor; rolls back on error."""

    @abstractmethod
    def schema_version(self) -> int:
        """The schema version this ledger is at (the number of migrations applied)."""

    def reset_ids(self) -> None:
        """After rows were inserted with explicit ids (``ledger_copy``): make new ids follow the highest one.

        Nothing to do for SQLite (AUTOINCREMENT already follows the highest id); PostgreSQL moves its sequences.
        """

    def _write(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        try:
            with self._transaction() as cur:
                cur.executemany(self._sql(sql), list(rows))
        except self.errors as exc:
            raise self._error("write failed", exc)

    def _query(self, sql: str, params: Sequence[Any] = ()) -> List[Any]:
        try:
            cur = self._cursor()
            cur.execute(self._sql(sql), tuple(params))
            return list(cur.fetchall())
        except self.errors as exc:
            raise self._error("read failed", exc)

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

    @staticmethod
    def _filters(pairs: Sequence[Tuple[str, Any]]) -> Tuple[str, List[Any]]:
        """``" AND column = ?"`` for each ``(column, value)`` whose value is not None, and those values."""
        used = [(column, value) for column, value in pairs if value is not None]
        return "".join(" AND %s = ?" % column for column, _value in used), [value for _column, value in used]

    def current_results(self, node: Optional[str] = None, stage: Optional[str] = None) -> List[CheckResult]:
        cond, params = self._filters([("node", node), ("stage", stage)])
        sql = ("SELECT %s FROM results WHERE id IN (SELECT MAX(id) FROM results WHERE 1=1%s"
               " GROUP BY node, stage, check_name) ORDER BY id" % (self._RESULT_COLUMNS, cond))
        return [self._row_to_result(r) for r in self._query(sql, params)]

    def history(self, node: str, stage: Optional[str] = None, check: Optional[str] = None) -> List[CheckResult]:
        cond, params = self._filters([("node", node), ("stage", stage), ("check_name", check)])
        sql = "SELECT %s FROM results WHERE 1=1%s ORDER BY id" % (self._RESULT_COLUMNS, cond)
        return [self._row_to_result(r) for r in self._query(sql, params)]

    def current_gates(self, node: Optional[str] = None) -> Dict[str, Dict[str, GateVerdict]]:
        cond, params = self._filters([("node", node)])
        rows = self._query("SELECT node, stage, status, reason, failing, waived FROM gates WHERE id IN"
                           " (SELECT MAX(id) FROM gates WHERE 1=1%s GROUP BY node, stage) ORDER BY id" % cond, params)
        out: Dict[str, Dict[str, GateVerdict]] = {}
        for node_, stage, status, reason, failing, waived in rows:
            out.setdefault(node_, {})[stage] = GateVerdict(node_, stage, status, reason or "",
                                                           _loads(failing) or [], _loads(waived) or [])
        return out

    def waivers(self, node: str, stage: str) -> List[str]:
        rows = self._query("SELECT DISTINCT check_name FROM waivers WHERE node = ? AND stage = ?", (node, stage))
        return [r[0] for r in rows]

    def events(self, node: Optional[str] = None, kind: Optional[str] = None) -> List[Dict[str, Any]]:
        cond, params = self._filters([("node", node), ("kind", kind)])
        return [{"node": n, "kind": k, "data": _loads(d), "recorded_at": t} for n, k, d, t in
                self._query("SELECT node, kind, data, recorded_at FROM events WHERE 1=1%s ORDER BY id" % cond, params)]

    def acquire_leases(self, nodes: Sequence[str], holder: Mapping[str, Any], ttl_s: float,
                       now: Optional[float] = None) -> Dict[str, Dict[str, Any]]:
        now = time.time() if now is None else now
        taken: Dict[str, Dict[str, Any]] = {}
        columns = ", ".join(LEASE_COLUMNS)
        upsert = self._sql("INSERT INTO leases (%s) VALUES (?,?,?,?,?,?,?,?) ON CONFLICT (node) DO UPDATE SET %s"
                           % (columns, ", ".join("%s = excluded.%s" % (c, c) for c in LEASE_COLUMNS[1:])))
        try:
            with self._transaction() as cur:
                for node in nodes:
                    cur.execute(self._sql("SELECT %s FROM leases WHERE node = ?" % columns), (node,))
                    row = cur.fetchone()
                    current = dict(zip(LEASE_COLUMNS, row)) if row else None
                    if current and current["run_id"] != holder["run_id"] and current["expires_at"] > now \
                            and alive(current["host"], current["pid"]):
                        taken[node] = current
                        continue
                    acquired = current["acquired_at"] if current and current["run_id"] == holder["run_id"] else now
                    cur.execute(upsert, (node, holder["run_id"], holder["host"], int(holder["pid"]),
                                         holder.get("stage"), acquired, now, now + ttl_s))
        except self.errors as exc:
            raise self._error("lease failed", exc)
        return taken

    def renew_leases(self, run_id: str, ttl_s: float, now: Optional[float] = None) -> int:
        now = time.time() if now is None else now
        try:
            with self._transaction() as cur:
                cur.execute(self._sql("UPDATE leases SET heartbeat_at = ?, expires_at = ? WHERE run_id = ?"),
                            (now, now + ttl_s, run_id))
                return int(cur.rowcount)
        except self.errors as exc:
            raise self._error("lease heartbeat failed", exc)

    def release_leases(self, run_id: str, nodes: Optional[Sequence[str]] = None) -> None:
        if nodes is None:
            self._write("DELETE FROM leases WHERE run_id = ?", [(run_id,)])
        else:
            self._write("DELETE FROM leases WHERE run_id = ? AND node = ?", [(run_id, n) for n in nodes])

    def leases(self, node: Optional[str] = None) -> List[Dict[str, Any]]:
        sql = "SELECT %s FROM leases" % ", ".join(LEASE_COLUMNS)
        where, params = (" WHERE node = ?", (node,)) if node is not None else (" ORDER BY node", ())
        rows = self._query(sql + where, params)
        return [dict(zip(LEASE_COLUMNS, row)) for row in rows]

    def table_rows(self, table: str) -> List[Tuple[Any, ...]]:
        """Every row of the append-only ``table`` (one of :data:`TABLES`), its columns in that order, by ``id``."""
        if table not in TABLES:
            raise LedgerError("unknown ledger table %r (one of %s)" % (table, ", ".join(TABLES)), where=self.where)
        return [tuple(r) for r in self._query("SELECT %s FROM %s ORDER BY id" % (", ".join(TABLES[table]), table))]
