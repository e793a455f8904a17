# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The controller's side of the stage: what the ledger says before an audit, and the exercise's steps.

``fleet_audit_state``: the run lock (``runlock``: one audit at a time, an interrupted one resumed), per node the
previous audit's state (``table.previous_state``), the messages the exercise
injected, when the node last passed burn-in, the SEL mark of the previous audit, and after the audit the drift
table and the exercise timings.  ``fleet_audit_exercise``: record an injection and resume a node through Slurm
(opt-in by the role's variables; draining and the spare are ``node_evict``'s), each an event in the ledger.
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence

from .._core.errors import ValidationError
from .._core.ledger import Ledger, open_ledger
from .._host.slurm import Slurm
from . import runlock
from .exercise import DETECTED_BY, may_resume, open_link_injection, timings
from .metrics import health_events, nccl_curves, node_metrics
from .report import write_audit_report
from .table import drift_table, previous_state

STAGE = "fleet_audit"
SEL_MARK = "fleet_audit_sel_mark"


def node_state(ledger: Ledger, node: str, run_id: Optional[str] = None) -> Dict[str, Any]:
    """Everything the next audit of ``node`` compares with (module docstring).  ``run_id``: this run's, whose own
    SEL mark (an interrupted attempt of it took one) is not the previous audit's."""
    state = previous_state(ledger.current_results(node=node, stage=STAGE))
    events = [e.get("data") or {} for e in ledger.events(node, "fault_injected")]
    injected = [d["message"] for d in events if d.get("message")]
    injected_xids = [d["xid"] for d in events if d.get("method") == "dcgmi_inject" and d.get("xid")]
    link = open_link_injection(ledger.events(node))
    burn_in = ledger.current_results(node=node, stage="burn_in")
    gate = ledger.current_gates(node).get(node, {}).get("burn_in")
    marks = [m for m in ledger.events(node, SEL_MARK) if not run_id or (m["data"] or {}).get("run_id") != run_id]
    return {"previous": {k: v for k, v in state.items() if k != "last_audit"}, "last_audit": state["last_audit"],
            "injected": injected, "injected_xids": injected_xids,
            "injected_link": (link.get("data") or {}).get("message") if link else None,
            "cleared_at": max((r.finished for r in burn_in), default=None) if gate and gate.status == "pass" else None,
            "sel_mark": marks[-1]["data"] if marks else None}


def detecting_check(ledger: Ledger, node: str) -> str:
    """The check whose injected fail times the exercise's detection on ``node``: by the kind of its last
    injection (``exercise.DETECTED_BY``; ``kernel_log`` when none or the kind is unknown)."""
    injected = ledger.events(node, "fault_injected")
    kind = ((injected[-1].get("data") or {}).get("kind") if injected else None) or "xid"
    return DETECTED_BY.get(kind, "kernel_log")


def report(ledger: Ledger, node: str) -> Dict[str, Any]:
    """``{"drift": drift table rows, "exercise": timings, "metrics": textfile collector text}`` for ``node`` after
    its audit was recorded."""
    drift = drift_table(node, ledger.history(node, STAGE))
    current = ledger.current_results(node=node)
    audit = [r for r in current if r.stage == STAGE]
    gates = {stage: v.status for stage, v in ledger.current_gates(node).get(node, {}).items()}
    last = max((r.finished for r in audit), default=None)
    return {"drift": drift,
            "exercise": timings(node, ledger.events(), ledger.history(node, STAGE, detecting_check(ledger, node))),
            "metrics": node_metrics(node, gates, len(drift), health_events(audit), last,
                                    nccl_curves(current))}


def state_module(params: Mapping[str, Any]) -> Dict[str, Any]:
    """The ``fleet_audit_state`` module: ``{"hosts": {host: node_state or report}}``; ``mode`` ``before``/``after``.

    ``mode: mark_sel`` appends each host's SEL mark (``sel_marks``) as an event for the next audit; ``mode: after``
    with ``report_dir`` also writes the fleet-audit page, its JSON and JUnit there (``report.write_audit_report``).
    """
    mode = params.get("mode") or "before"
    run_id = params.get("run_id") or None
    ledger = open_ledger(params.get("ledger") or None)
    try:
        if mode == "lock":
            return dict(runlock.lock(ledger, params.get("hosts") or [], float(params.get("lock_ttl_s") or
                                                                              runlock.DEFAULT_LOCK_TTL_S)),
                        changed=True, hosts={})
        if mode == "unlock":
            if not run_id or not params.get("lock_id"):
                raise ValidationError("mode unlock needs run_id and lock_id (from mode lock)", where="lock_id")
            return dict(runlock.unlock(ledger, run_id, params["lock_id"]), changed=True, hosts={})
        hosts: Dict[str, Any] = {}
        for host in params.get("hosts") or []:
            if mode == "before":
                hosts[host] = node_state(ledger, host, run_id)
            elif mode == "after":
                hosts[host] = report(ledger, host)
            elif mode == "mark_sel":
                mark = (params.get("sel_marks") or {}).get(host)
                mine = run_id and any((m["data"] or {}).get("run_id") == run_id for m in ledger.events(host, SEL_MARK))
                if mark and not mark.get("error") and not mine:   # a rerun of this run keeps its first mark
                    ledger.record_event(host, SEL_MARK, dict(mark, run_id=run_id) if run_id else mark)
                    hosts[host] = {"marked": True}
            else:
                raise ValidationError("mode must be lock, unlock, before, after or mark_sel, not %r" % mode,
                                      where="mode")
        out: Dict[str, Any] = {"changed": mode == "mark_sel" and bool(hosts), "hosts": hosts}
        if mode == "after" and params.get("report_dir"):
            out["report"] = write_audit_report(ledger, params["report_dir"], hosts)
        return out
    finally:
        ledger.close()


def stood_in(promotions: Sequence[Mapping[str, Any]], node: str, since: float) -> List[str]:
    """The spares promoted for ``node`` since ``since`` (its drain): ``spare_promoted`` events naming it."""
    return list(dict.fromkeys(e["node"] for e in promotions
                              if e["recorded_at"] >= since and (e.get("data") or {}).get("replaces") == node))


def exercise_module(params: Mapping[str, Any], check_mode: bool, slurm: Optional[Slurm] = None) -> Dict[str, Any]:
    """The ``fleet_audit_exercise`` module: ``action`` ``record_injection``, ``record_clear`` (a degraded link
    repaired), ``resume`` or ``timings``.

    Draining and promoting a spare are ``node_evict``'s (events ``drain``, ``spare_promoted``).  ``resume`` changes
    the Slurm node state (``scontrol update state=RESUME``) and is refused (``failed``) until the node passed a
    re-burn-in after its drain (``exercise.may_resume``).  Every step is a ledger event.
    """
    action, node = params["action"], params["node"]
    ledger = open_ledger(params.get("ledger") or None)
    try:
        if action == "timings":
            return {"changed": False, "timings": report(ledger, node)["exercise"]}
        if action == "record_injection":
            data = dict(params.get("injection") or {}, injected=True)
            if params.get("run_id") and not data.get("run_id"):
                data["run_id"] = params["run_id"]
            if not data.get("message") and not data.get("argv"):
                raise ValidationError("the injection names no message (lab) or argv (dcgmi)", where="injection")
            if not check_mode:
                ledger.record_event(node, "fault_injected", data)
            return {"changed": not check_mode, "event": data}
        if action == "record_clear":
            data = dict(params.get("injection") or {})
            if data.get("kind") != "link":
                raise ValidationError("record_clear takes a link repair (kind link), not %r" % data.get("kind"),
                                      where="injection")
            if not check_mode:
                ledger.record_event(node, "fault_cleared", data)
            return {"changed": not check_mode, "event": data}
        slurm = slurm or Slurm()
        if action == "resume":
            drains = ledger.events(node, "drain")
            resumed = ledger.events(node, "resume")
            if not drains or (resumed and resumed[-1]["recorded_at"] >= drains[-1]["recorded_at"]):
                return {"changed": False, "msg": "%s is not drained by symphony: nothing to resume" % node}
            gate = ledger.current_gates(node).get(node, {}).get("burn_in")
            drained_at = drains[-1]["recorded_at"]
            why = may_resume(ledger.current_results(node=node, stage="burn_in"), gate.status if gate else None,
                             drained_at, params.get("rerun_checks"))
            if why:
                return {"changed": False, "failed": True, "msg": "%s not resumed: %s" % (node, why)}
            spares = stood_in(ledger.events(kind="spare_promoted"), node, drained_at)
            if not check_mode:
                slurm.resume(params.get("slurm_node") or node)
                ledger.record_event(node, "resume", {"stage": STAGE, "after": "re-burn-in passed",
                                                     "slurm_node": params.get("slurm_node") or node,
                                                     "spares_returned": spares})
                for spare in spares:   # back in the pool (the twin inventory's spares group)
                    ledger.record_event(spare, "spare_returned", {"replaces": node, "stage": STAGE})
            return {"changed": not check_mode, "spares_returned": spares}
        raise ValidationError("action must be record_injection, record_clear, resume or timings, not %r" % action,
                              where="action")
    finally:
        ledger.close()
