# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Logic of the ``gate_record`` and ``gate_info`` modules.

:func:`evaluate` is pure (check results + graph -> derived results and gate), so check mode returns exactly
what a real run would record; :func:`record` appends it to the ledger; :func:`read` reads the current view.
"""

from __future__ import annotations

import os
import time
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple, cast

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
from .ledger import default_ledger_path, open_ledger


def _exists(location: Optional[str]) -> bool:
    """Whether the ledger at ``location`` already exists (URL backends are assumed to)."""
    location = location or default_ledger_path()
    path = location[len("sqlite:///"):] if location.startswith("sqlite:///") else location
    return "://" in path or os.path.exists(path)


def evaluate(node: str, stage: str, checks: Sequence[Dict[str, Any]], run_id: str, optional: Iterable[str] = (),
             waivers: Iterable[str] = (), clock: Callable[[], float] = time.time, declared: Iterable[str] = (),
             prior: Sequence[CheckResult] = ()) -> Tuple[List[CheckResult], GateVerdict]:
    """Derive ``blocked`` from the checks' graph and compute the gate; writes nothing.

    ``checks``: list of dicts ``{name, status, reason, expected, observed, remediation, evidence, depends_on,
    required, started, finished}`` (``name`` and ``status`` required; times in UNIX seconds).  ``optional``:
    check names the gate does not require (the SKU's ``gates.<profile>.<stage>.optional``); names that are not
    among ``checks`` are ignored, since a SKU may list checks a given run does not carry.  ``waivers``: waived
    check names.  ``declared``: every check the stage's declaration (the SKU) requires a row for; the gate is
    built from these names plus ``checks``, never from ``checks`` alone (DESIGN.md "Declared means judged").  A
    declared check absent from ``checks`` is judged on its latest result in ``prior`` (the ledger's current
    results: "latest result of every required check"), or else gets a new ``not_run`` row saying no result was
    recorded.  A check reported ``blocked`` whose dependencies all passed, a dependency on an unknown check,
    or a cycle raises :class:`GateError`.  Returns ``(results, verdict)``: the :class:`CheckResult` list to
    record (graph order; prior results are judged, not re-recorded) and the :class:`GateVerdict`.
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
    given = {spec.name for spec in specs}
    latest = {r.check: r for r in prior if r.node == node and r.stage == stage}
    judged_prior: List[CheckResult] = []
    for name in dict.fromkeys(declared or ()):
        if name in given:
            continue
        specs.append(CheckSpec(name, (), name not in not_required))
        if name in latest:
            judged_prior.append(latest[name])
        else:
            results.append(CheckResult(node=node, stage=stage, check=name, status="not_run",
                                       reason="declared for %s but no result was recorded (not run in this run "
                                              "or an earlier one)" % stage, started=now, finished=now,
                                       run_id=run_id))
    graph = CheckGraph(stage, specs)
    derived = derive_blocked(graph, results)
    # a prior result was judged (and its dependencies derived) when it was recorded
    verdict = compute_gate(graph, derived + judged_prior, waivers)
    return derived, verdict


def gate_record(params: Dict[str, Any], check_mode: bool) -> Dict[str, Any]:
    """Run ``gate_record``: evaluate, then (unless ``check_mode``) append waivers, results and the gate.

    ``params`` are the module's: ledger, node, stage, checks, run_id, optional, waive, declared.  Returns the module
    result dict (``changed`` is true when rows were appended).  Raises :class:`SymphonyError` subclasses.
    """
    node, stage = params["node"], params["stage"]
    run_id = params.get("run_id") or new_run_id()
    waive = params.get("waive") or []
    ledger = None
    try:
        waived: List[str] = []
        if _exists(params.get("ledger")):
            ledger = open_ledger(params.get("ledger"))
            waived = ledger.waivers(node, stage)
        waived += [w["check"] for w in waive]
        declared = params.get("declared") or ()
        prior = ledger.current_results(node=node, stage=stage) if ledger is not None and declared else []
        results, verdict = evaluate(node, stage, params["checks"], run_id, params.get("optional") or (), waived,
                                    declared=declared, prior=prior)
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
    if not _exists(params.get("ledger")):
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
