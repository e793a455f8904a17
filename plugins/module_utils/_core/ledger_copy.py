# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Copy a ledger into another (a SQLite file into the shared PostgreSQL ledger, issue 19), then prove it matches.

Every append-only row is copied with its ``id`` (the "latest row per key" order survives), all in one transaction
of the target, which must be empty; leases are not copied (they say who owns a node now, and the run that held
them is over).  Afterwards row counts per table, the current gates and the current results of both are compared.
"""

from __future__ import annotations

from typing import Any, Dict, List

from .errors import LedgerError
from .ledger import SQLLedger, ledger_exists, open_ledger, redact
from .ledger_base import TABLES


def _as_sql(ledger: Any, location: str) -> SQLLedger:
    if not isinstance(ledger, SQLLedger):
        raise LedgerError("not a SQL ledger", where=redact(location))
    return ledger


def _counts(ledger: SQLLedger) -> Dict[str, int]:
    return {table: int(ledger._query("SELECT COUNT(*) FROM %s" % table)[0][0]) for table in TABLES}


def _view(ledger: SQLLedger) -> Dict[str, Any]:
    gates = {node: {stage: v.to_dict() for stage, v in by_stage.items()}
             for node, by_stage in ledger.current_gates().items()}
    results = sorted((r.node, r.stage, r.check, r.status, r.run_id, r.reason) for r in ledger.current_results())
    return {"gates": gates, "results": results}


def copy_ledger(source: str, target: str, check_mode: bool = False) -> Dict[str, Any]:
    """Copy ledger ``source`` into the empty ledger ``target`` (``open_ledger`` locations, either backend).

    Returns ``{"changed", "source", "target", "counts": {table: rows}, "gates": nodes with a gate, "match": True}``
    (``source``/``target`` without passwords).  ``check_mode``: count what would be copied, write nothing.  Raises
    :class:`LedgerError` when ``source`` does not exist, ``target`` already has rows, or, after the copy, a count,
    gate or current result differs (the copy is then left for inspection, never silently trusted).
    """
    if not ledger_exists(source):
        raise LedgerError("source ledger does not exist", where=redact(source))
    src = _as_sql(open_ledger(source), source)
    dst = _as_sql(open_ledger(target), target) if not check_mode else None
    try:
        counts = _counts(src)
        out: Dict[str, Any] = {"changed": False, "source": redact(source), "target": redact(target),
                               "counts": counts, "gates": len(src.current_gates()), "match": None}
        if dst is None:
            return out
        already = {t: n for t, n in _counts(dst).items() if n}
        if already:
            raise LedgerError("target ledger is not empty (%s); copy only into a new ledger"
                              % ", ".join("%s: %d rows" % kv for kv in sorted(already.items())), where=redact(target))
        rows: Dict[str, List[Any]] = {table: src.table_rows(table) for table in TABLES}
        try:
            with dst._transaction() as cur:
                for table, columns in TABLES.items():
                    if rows[table]:
                        cur.executemany(dst._sql("INSERT INTO %s (%s) VALUES (%s)" % (
                            table, ", ".join(columns), ",".join("?" * len(columns)))), rows[table])
        except dst.errors as exc:
            raise dst._error("copy failed", exc)
        dst.reset_ids()
        out["changed"] = True
        copied = _counts(dst)
        if copied != counts:
            raise LedgerError("row counts differ after the copy: source %s, target %s" % (counts, copied),
                              where=redact(target))
        if _view(dst) != _view(src):
            raise LedgerError("current gates or results differ after the copy", where=redact(target))
        out["match"] = True
        return out
    finally:
        src.close()
        if dst is not None:
            dst.close()
