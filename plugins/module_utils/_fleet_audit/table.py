# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The drift table and the previous audit's state, both read from the ledger's ``fleet_audit`` rows (pure)."""

from __future__ import annotations

from typing import Any, Dict, List, Sequence

from .software import DRIFT

DRIFT_CHECKS = ("software_drift", "tunings_drift", "nccl_recipe", "firmware_drift", "bios_drift")
# Checks whose ``observed`` the next audit compares with (cursor, counter snapshots).
STATEFUL_CHECKS = ("kernel_log", "dcgm_xid", "gpu_counters", "ib_counters")


def drift_table(node: str, history: Sequence[Any]) -> List[Dict[str, Any]]:
    """One row per component drifting now: ``{node, check, component, expected, found, since, first_run, reason}``.

    ``history``: ``Ledger.history(node, "fleet_audit")`` (oldest first).  ``since``/``first_run``: the finish time
    (UNIX s) and run of the earliest audit in the unbroken run of audits that found this component drifting with
    the same value; an audit that found it fine, or did not read it, ends the run.
    """
    out = []
    for check in DRIFT_CHECKS:
        rows = [r for r in history if r.check == check]
        if not rows:
            continue
        latest = {d["component"]: d for d in (rows[-1].evidence or {}).get("rows") or [] if d.get("status") == DRIFT}
        for component, drift in latest.items():
            first = rows[-1]
            for earlier in reversed(rows[:-1]):
                same = [d for d in (earlier.evidence or {}).get("rows") or []
                        if d.get("component") == component and d.get("status") == DRIFT
                        and d.get("found") == drift.get("found")]
                if not same:
                    break
                first = earlier
            out.append({"node": node, "check": check, "component": component, "expected": drift.get("expected"),
                        "found": drift.get("found"), "since": first.finished, "first_run": first.run_id,
                        "reason": drift.get("reason")})
    return out


def previous_state(current: Sequence[Any]) -> Dict[str, Any]:
    """``{check: observed}`` of the node's latest ``fleet_audit`` rows that carry state, plus ``last_audit``.

    A row whose check did not pass still carries its reading (a failed kernel-log check's cursor is where the next
    audit starts: the same XID is not counted twice, and its fatal findings stay ``open``).  A row without a
    reading (a counter check ``not_run`` because the tool is absent) is skipped.
    """
    out: Dict[str, Any] = {"last_audit": None}
    for r in current:
        if r.check in STATEFUL_CHECKS and isinstance(r.observed, dict):
            out[r.check] = r.observed
        out["last_audit"] = max(out["last_audit"] or 0.0, r.finished) or None
    return out
