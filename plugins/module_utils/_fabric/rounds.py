# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fabric test: a schedule of pair rounds through one transport, localised, recorded; the ``fabric_test`` module.

Per node a check ``fabric_interface`` (pass / fail / not_run) at the stage, per bad or ambiguous link a
``fabric_link`` ledger event (:mod:`._fabric.localise`).
"""

from __future__ import annotations

import random
import time

from .._core.errors import ToolNotFoundError, ValidationError
from .._core.gate import CheckResult, new_run_id
from .._core.ledger import open_ledger
from .._core.twin import load_twin
from .._host.launchers import launcher_from_params
from .declared import effective_floor, gpudirect_gap, hold_unmeasured, run_single_node, test_options
from .localise import CHECK_INTERFACE, EVENT_LINK, link_events, node_outcomes
from .pairs import PairPathFabric
from .schedules import check_nodes, random_matching, round_robin, run_schedule, tri_ring
from .transports import RoundRunner, make_transport


def cabling_from_twin(twin, nodes, rail=0):
    """``{node: "<leaf>:<port>"}`` for ``nodes`` on ``rail`` from a loaded twin (nodes without cabling
    on that rail are left out)."""
    out = {}
    for node in nodes:
        entry = twin.nodes.get(node)
        if not entry:
            continue
        for link in entry.get("fabric") or []:
            if int(link.get("rail", 0)) == int(rail):
                out[node] = "%s:%s" % (link["leaf"], link["port"])
                break
    return out


def plan(nodes, schedule="adaptive", seed=None):
    """What a run would test, without running (check mode): the full plan for ``round_robin`` and
    ``tri_ring``, the first round for ``adaptive`` (later rounds depend on the results)."""
    if schedule == "round_robin":
        return round_robin(nodes)
    if schedule == "tri_ring":
        return tri_ring(nodes)
    if schedule == "adaptive":
        return [random_matching(nodes, random.Random(seed))[0]]
    raise ValidationError("unknown schedule %r" % schedule, where="schedule")


def run_fabric_test(nodes, transport, schedule="adaptive", floor=None, min_fraction=0.8, seed=None, max_rounds=8,
                    workers=8, cabling=None, stage="burn_in", run_id=None, ledger=None, clock=time.time,
                    check=CHECK_INTERFACE, unmeasured=None, injected=None):
    """Run a schedule with ``transport``, localise, and (when ``ledger`` is given) record the verdicts.

    Per node: a :class:`~._core.gate.CheckResult` for ``check`` (default ``fabric_interface``; a SKU test's
    name when run from the declaration) at ``stage``; ``unmeasured`` (threshold -> why) holds a passing node
    at ``not_run`` (:func:`~._fabric.declared.hold_unmeasured`).  Per bad or
    ambiguous link: ``ledger.record_event(node, "fabric_link", data)`` for each endpoint node (see
    :func:`~._fabric.localise.link_events`).  ``injected`` (node -> what was injected there, fleet_audit's
    exercise): a failing node's reason ends ``[injected] <what>`` and its observed carries ``injected: true``
    (the fault is marked injected wherever it is recorded); a passing node is left as it is (a miss).  (See
    :func:`~._fabric.localise.link_events`).  Returns ``{"rounds", "schedule", "threshold", "interfaces":
    {node: status/reason/...}, "bad_interfaces", "bad_links", "links", "ambiguous", "tests", "run_id"}``.
    """
    run_id = run_id or new_run_id("fabric")
    cabling = dict(cabling or {})
    fabric = PairPathFabric(cabling)
    started = clock()
    runner = RoundRunner(transport, floor, min_fraction, workers)
    out = run_schedule(nodes, runner, schedule, fabric, seed=seed, max_rounds=max_rounds)
    finished = clock()
    loc = out["localisation"]
    outcomes = node_outcomes(loc, out["tests"], runner.threshold, cabling)
    for node, outcome in outcomes.items():
        # The node's own pair measurements travel with its verdict (the report's fabric pair matrix).
        outcome["evidence"] = dict(outcome.get("evidence") or {}, pairs=[
            {"a": t.a, "b": t.b, "value": t.value, "unit": t.unit, "status": t.status, "round": t.round}
            for t in out["tests"] if node in (t.a, t.b)])
    hold_unmeasured(outcomes, unmeasured or {})
    mark_injected(outcomes, injected or {})
    events = link_events(loc, run_id)
    if ledger is not None:
        results = [CheckResult(node=node, stage=stage, check=check, status=o["status"],
                               reason=o["reason"], expected=o["expected"], observed=o["observed"],
                               remediation=o["remediation"],
                               evidence=dict(o["evidence"], transport=transport.name, schedule=schedule,
                                             rounds=out["rounds"]),
                               started=started, finished=finished, run_id=run_id)
                   for node, o in outcomes.items()]
        ledger.record_results(results)
        for node, data in events:
            ledger.record_event(node, EVENT_LINK, data)
    return {"run_id": run_id, "check": check, "rounds": out["rounds"], "schedule": schedule,
            "transport": transport.name,
            "threshold": runner.threshold,
            "interfaces": {n: {k: o[k] for k in ("status", "reason", "remediation", "observed", "evidence")}
                           for n, o in outcomes.items()},
            "bad_interfaces": loc.bad_interfaces(), "bad_links": loc.bad_links(),
            "links": {k: {"verdict": v["verdict"], "info": v["info"]} for k, v in loc.links.items()},
            "ambiguous": loc.ambiguous, "tests": [t.to_dict() for t in out["tests"]]}


def _cabling(params, nodes):
    if not params.get("twin"):
        return {}
    return cabling_from_twin(load_twin(params["twin"]), nodes, params.get("rail") or 0)


def _not_run_everywhere(nodes, reason, stage, run_id, ledger, check):
    now = time.time()
    if ledger is not None:
        ledger.record_results([CheckResult(node=n, stage=stage, check=check, status="not_run", reason=reason,
                                           started=now, finished=now, run_id=run_id) for n in nodes])
    return {n: {"status": "not_run", "reason": reason, "remediation": "", "observed": None} for n in nodes}


def _record_single(nodes, interfaces, stage, run_id, ledger, check, started):
    if ledger is None:
        return
    now = time.time()
    ledger.record_results([CheckResult(node=n, stage=stage, check=check, status=o["status"], reason=o["reason"],
                                       observed=o.get("observed"), remediation=o.get("remediation") or "",
                                       evidence=o.get("evidence") or {}, started=started, finished=now,
                                       run_id=run_id) for n, o in interfaces.items() if n in nodes])


def _result(run_id, schedule, transport, interfaces, ledger, check, **extra):
    out = {"changed": ledger is not None, "run_id": run_id, "check": check, "schedule": schedule,
           "transport": transport, "rounds": 0, "interfaces": interfaces, "bad_interfaces": [], "bad_links": [],
           "links": {}, "ambiguous": [], "tests": [], "threshold": None}
    out.update(extra)
    return out


def mark_injected(outcomes, injected):
    """Mark each failing node of ``outcomes`` that ``injected`` names (node -> text; empty text: nothing there)."""
    for node, what in injected.items():
        outcome = outcomes.get(node)
        if what and outcome and outcome.get("status") == "fail":
            outcome["reason"] = "%s [injected] %s" % (outcome.get("reason") or "", what)
            outcome["observed"] = dict(outcome.get("observed") or {}, injected=True)


def fabric_test_module(params, check_mode=False):
    """Everything ``symphony.cluster.fabric_test`` does; ``params`` are the module's parameters.

    With ``params["test"]`` (a SKU fabric test: name, kind, params, thresholds) the transport, floor, size
    and check name come from the test (:func:`~._fabric.declared.test_options`), overriding the module's
    options; ``params["floor"]`` still sets the floor of a test whose tool the profile replaced.  Returns the
    module result dict.  Raises :class:`SymphonyError` subclasses on bad input (unknown schedule/transport/kind,
    malformed twin, ledger errors).
    """
    nodes = list(params["nodes"])
    check_nodes(nodes)
    schedule = params.get("schedule") or "adaptive"
    stage = params.get("stage") or "burn_in"
    run_id = params.get("run_id") or new_run_id("fabric")
    declared = test_options(params["test"]) if params.get("test") else {}
    check = declared.get("check") or CHECK_INTERFACE

    def option(name, key=None):
        value = declared.get(key or name)
        return params.get(name) if value is None else value

    floor = effective_floor(declared, params.get("floor"))
    cabling = _cabling(params, nodes)
    launcher = launcher_from_params(params)
    transport = make_transport(
        option("transport"), launcher, params.get("addresses") or {},
        timeout_s=params.get("timeout_s"), duration_s=option("duration_s"), port=params.get("port"),
        streams=params.get("streams"), hcas=option("hcas"), size=option("message_bytes"),
        gpus_per_node=option("gpus_per_node"), binary=option("binary"), env=params.get("nccl_env"),
        bidirectional=declared.get("bidirectional"), max_p99_lat_us=declared.get("max_p99_lat_us"),
        cuda_devices=declared.get("cuda_devices") if declared.get("gpudirect") else None)
    single = bool(declared) and declared["nodes"] == 1
    if check_mode:
        return {"changed": False, "run_id": run_id, "check": check, "schedule": "per_node" if single else schedule,
                "transport": transport.name, "cabling": cabling,
                "plan": [[[n]] for n in nodes] if single else
                [[list(p) for p in r] for r in plan(nodes, schedule, params.get("seed"))]}
    ledger = open_ledger(params.get("ledger")) if params.get("record", True) else None
    try:
        try:
            launcher.check()
        except ToolNotFoundError as exc:
            return _result(run_id, schedule, transport.name,
                           _not_run_everywhere(nodes, str(exc), stage, run_id, ledger, check), ledger, check)
        if single:
            started = time.time()
            options = dict(declared, transport=transport.name, floor=floor,
                           gpus_per_node=option("gpus_per_node"), binary=getattr(transport, "binary", None))
            interfaces = run_single_node(nodes, launcher.wrap, options, params.get("timeout_s") or 60)
            _record_single(nodes, interfaces, stage, run_id, ledger, check, started)
            return _result(run_id, "per_node", transport.name, interfaces, ledger, check, cabling=cabling,
                           threshold={"threshold": floor, "basis": "floor" if floor is not None else "none"})
        if len(nodes) < 2:
            reason = "%s pairs nodes: needs at least two in the batch, got %d" % (check, len(nodes))
            return _result(run_id, schedule, transport.name,
                           _not_run_everywhere(nodes, reason, stage, run_id, ledger, check), ledger, check)
        out = run_fabric_test(nodes, transport, schedule, floor=floor,
                              min_fraction=params.get("min_fraction") or 0.8, seed=params.get("seed"),
                              max_rounds=params.get("max_rounds") or 8, workers=params.get("workers") or 8,
                              cabling=cabling, stage=stage, run_id=run_id, ledger=ledger, check=check,
                              unmeasured=dict(declared.get("unmeasured") or {}, **gpudirect_gap(declared)),
                              injected=params.get("injected"))
    finally:
        if ledger is not None:
            ledger.close()
    out.update({"changed": ledger is not None, "cabling": cabling})
    return out
