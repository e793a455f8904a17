# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Logic of the ``gate_record`` and ``gate_info`` modules.

:func:`evaluate` is pure (check results + graph -> derived results and gate), so check mode returns exactly
what a real run would record; :func:`record` appends it to the ledger; :func:`read` reads the current view.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Dict, Iterable, List, Sequence, Tuple, cast

from .errors import GateError
from .gate import (
    CheckGraph,
    CheckResult,
    CheckSpec,
    GateVerdict,
    STAGES,
    compute_gate,
    derive_blocked,
    new_run_id,
)
from .ledger import ledger_exists, open_ledger


def evaluate(node: str, stage: str, checks: Sequence[Dict[str, Any]], run_id: str, optional: Iterable[str] = (),
             waivers: Iterable[str] = (), clock: Callable[[], float] = time.time,
             earlier: Sequence[CheckResult] = (),
             declared: Iterable[str] = ()) -> Tuple[List[CheckResult], GateVerdict]:
    """Derive ``blocked`` from the checks' graph and compute the gate from the latest result of every check; writes
    nothing.

    The gate reads the latest result of each required check, whichever run wrote it (DESIGN.md, "Latest result of
    every required check"): ``earlier`` is the ledger's current results of this node and stage
    (``Ledger.current_results``) and ``declared`` the checks the stage declares for this node (its SKU and profile).
    A check in ``earlier`` or ``declared`` that this run did not carry counts with its latest recorded result, or as
    ``not_run`` "no result recorded", so a rerun of a subset can only add results, never open a gate that a check
    it did not rerun keeps closed.

    ``checks``: list of dicts ``{name, status, reason, expected, observed, remediation, evidence, depends_on,
    required, started, finished}`` (``name`` and ``status`` required; times in UNIX seconds).  ``optional``:
    check names the gate does not require (the SKU's ``gates.<profile>.<stage>.optional``), this run's or carried;
    names of no check are ignored, since a SKU may list checks a given run does not carry.  ``waivers``: waived
    check names.  A check reported ``blocked`` whose dependencies all passed, a dependency on an unknown check,
    or a cycle raises :class:`GateError`.  Returns ``(results, verdict)``: this run's :class:`CheckResult` list
    in graph order (what to record) and the :class:`GateVerdict`.
    """
    if stage not in STAGES:
        raise GateError("unknown stage %r (one of %s)" % (stage, ", ".join(STAGES)), where=node)
    if not checks:
        raise GateError("no checks given", where="%s/%s" % (node, stage))
    not_required = set(optional or ())
    specs: List[CheckSpec] = []
    results: List[CheckResult] = []
    now = clock()
    for index, check in enumerate(checks):
        name = check.get("name")
        if not name:
            raise GateError("checks[%d] has no name" % index, where="%s/%s" % (node, stage))
        specs.append(CheckSpec(name, tuple(check.get("depends_on") or ()),
                               bool(check.get("required", True)) and name not in not_required))
        # a missing or unknown status is refused by CheckResult itself
        results.append(CheckResult(
            node=node, stage=stage, check=name, status=cast(str, check.get("status")),
            reason=check.get("reason") or "",
            expected=check.get("expected"), observed=check.get("observed"),
            remediation=check.get("remediation") or "", evidence=check.get("evidence") or {},
            started=float(check.get("started") or now), finished=float(check.get("finished") or now),
            run_id=run_id))
    ran = {spec.name for spec in specs}
    latest = {r.check: r for r in earlier if r.node == node and r.stage == stage and r.check not in ran}
    carried = [name for name in dict.fromkeys(list(declared) + list(latest)) if name not in ran]
    # carried checks first, with no dependencies of their own: their recorded status was derived when recorded,
    # and a check of this run may depend on one of them
    graph = CheckGraph(stage, [CheckSpec(name, (), name not in not_required) for name in carried] + specs)
    view = [CheckResult(**dict(latest[name].to_dict(), reason="latest result (run %s): %s"
                               % (latest[name].run_id, latest[name].reason)))
            for name in carried if name in latest]
    gated = derive_blocked(graph, view + results, recorded=carried)
    verdict = compute_gate(graph, gated, waivers)
    return [r for r in gated if r.check in ran], verdict


def gate_record(params: Dict[str, Any], check_mode: bool) -> Dict[str, Any]:
    """Run ``gate_record``: evaluate, then (unless ``check_mode``) append waivers, results and the gate.

    ``params`` are the module's: ledger, node, stage, checks, run_id, optional, declared, waive.  The gate is
    computed from the latest result of every check this run carried, ``declared`` names, or the ledger holds for
    the node and stage (:func:`evaluate`).  Returns the module result dict (``changed`` is true when rows were
    appended).  Raises :class:`SymphonyError` subclasses.
    """
    node, stage = params["node"], params["stage"]
    run_id = params.get("run_id") or new_run_id()
    waive = params.get("waive") or []
    ledger = None
    try:
        waived: List[str] = []
        earlier: List[CheckResult] = []
        if ledger_exists(params.get("ledger")):
            ledger = open_ledger(params.get("ledger"))
            waived = ledger.waivers(node, stage)
            earlier = ledger.current_results(node=node, stage=stage)
        waived += [w["check"] for w in waive]
        results, verdict = evaluate(node, stage, params["checks"], run_id, params.get("optional") or (), waived,
                                    earlier=earlier, declared=params.get("declared") or ())
        if not check_mode:
            if ledger is None:
                ledger = open_ledger(params.get("ledger"))
            for item in waive:
                ledger.record_waiver(node, stage, item["check"], item["who"], item["why"])
            ledger.record_results(results)
            ledger.record_gate(verdict, run_id)
    finally:
        if ledger is not None:
            ledger.close()
    return {"changed": not check_mode, "recorded": not check_mode, "run_id": run_id,
            "gate": verdict.to_dict(), "results": [r.to_dict() for r in results]}


def gate_info(params: Dict[str, Any]) -> Dict[str, Any]:
    """Run ``gate_info``: current results, gates and positions (and history when asked), filtered.

    A ledger that does not exist yet reads as empty and is not created.
    """
    node, stage = params.get("node"), params.get("stage")
    empty: Dict[str, Any] = {"changed": False, "results": [], "gates": {}, "positions": {}}
    if params.get("history"):
        empty["history"] = []
    if not ledger_exists(params.get("ledger")):
        return empty
    ledger = open_ledger(params.get("ledger"))
    try:
        results = ledger.current_results(node=node, stage=stage)
        gates = ledger.current_gates(node)
        out = dict(empty, results=[r.to_dict() for r in results])
        for name, by_stage in gates.items():
            out["gates"][name] = {s: v.to_dict() for s, v in by_stage.items() if stage is None or s == stage}
            furthest = [s for s in STAGES if s in by_stage][-1]
            out["positions"][name] = {"stage": furthest, "gate": by_stage[furthest].status,
                                      "reason": by_stage[furthest].reason}
        if params.get("history"):
            if not node:
                raise GateError("history needs a node", where="gate_info")
            out["history"] = [r.to_dict() for r in ledger.history(node, stage=stage, check=params.get("check"))]
        return out
    finally:
        ledger.close()
