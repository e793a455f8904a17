# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Evict, replace, rerun: the cluster_validation loop.

Each attempt runs the pretraining job at every scale the SKU names (node counts
with an MFU target), analyses the run's per-GPU telemetry against peers, and then
:func:`decide` says what happens next:

* outliers found -> their nodes are drained in Slurm with a reason (ledger event
  ``drain``), replaced by spares from the twin's spare pool whose ``burn_in`` gate
  passed (ledger event ``spare_promoted``), and the run is repeated;
* a scale below its MFU target, or a job that did not complete, with no outlier to
  blame -> the run is repeated as it is;
* every scale met its target and no outlier -> ``pass``;
* attempts exhausted, or no eligible spare left -> ``fail`` with the reason.

Side effects (launch, telemetry, drain, spare choice, events) are injected
callables, so the decision logic is tested without a cluster; the real ones, on a
Slurm cluster, are in :mod:`.cluster_run`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, asdict
from typing import Any, Dict, List, Optional

from .._core.errors import (
    SymphonyError,
    ToolNotFoundError,
    ValidationError,
)
from .._core import gate as _gate
from .._host.slurm import is_drained as _slurm_is_drained
from . import ladder as _ladder

STAGE = "cluster_validation"
GRAPH = _gate.CheckGraph(STAGE, [
    _gate.CheckSpec("training_run", description="the pretraining job ran to completion on this node"),
    _gate.CheckSpec("mfu_target", ("training_run",), description="every scale met the SKU's MFU target"),
    _gate.CheckSpec("telemetry_outliers", ("training_run",),
                    description="no GPU of this node was an outlier against its peers"),
    _gate.CheckSpec("stragglers", ("training_run",),
                    description="no rank of this node had a median step time beyond its peers'"),
    _gate.CheckSpec("nccl_sweep", description="the NCCL sweep before training passed at this node's node counts"),
])
# One ledger row per scale a node ran in (outside the gate graph: mfu_target already requires every scale).
SCALE_CHECK = "scale_%dn_%s"


@dataclass
class Scale:
    """One validation scale: ``nodes`` (None = every active node), MFU target in percent; ``ladder``: a rung the
    ladder added (:mod:`.ladder`), judged against the nearest SKU target of its recipe and precision."""

    recipe: str
    precision: str
    min_mfu_pct: float
    nodes: Optional[int] = None
    convention: str = "torchtitan"
    ladder: bool = False

    def to_dict(self):
        return asdict(self)


def scales_from_targets(targets, recipe=None, default_convention="torchtitan", pool=0, ladder_max_nodes=0):
    """:class:`Scale` list from a SKU's ``validation.mfu_targets`` (all, or those for ``recipe``), smallest first.

    ``pool``/``ladder_max_nodes``: add the ladder 1, 2, 4, ... up to ``min(pool, ladder_max_nodes)``
    (:func:`.ladder.expand`; 0 adds none).
    """
    chosen = [t for t in targets or [] if recipe is None or t["recipe"] == recipe]
    if pool and ladder_max_nodes:
        chosen = _ladder.expand(chosen, pool, ladder_max_nodes)
    scales = [Scale(recipe=t["recipe"], precision=t["precision"], min_mfu_pct=float(t["min_mfu_pct"]),
                    nodes=t.get("nodes"), convention=t.get("convention", default_convention),
                    ladder=bool(t.get("ladder")))
              for t in chosen]
    if not scales:
        raise ValidationError("no MFU target%s" % (" for recipe %r" % recipe if recipe else ""),
                              where="validation.mfu_targets")
    return sorted(scales, key=lambda s: (s.nodes or 1 << 30, s.precision))


def pick_spares(candidates, burn_in, exclude, count):
    """Up to ``count`` spares, in twin order, whose burn_in gate passed and that are not in ``exclude``.

    ``burn_in``: ``{node: gate status}``.  Returns ``(chosen, skipped)`` where
    ``skipped`` maps each passed-over spare to why.
    """
    chosen: List[str] = []
    skipped: Dict[str, str] = {}
    for node in candidates:
        if len(chosen) >= count:
            break
        if node in exclude:
            skipped[node] = "already in use or evicted"
        elif burn_in.get(node) != _gate.PASS:
            skipped[node] = "burn_in gate is %s, not pass" % (burn_in.get(node) or "not recorded")
        else:
            chosen.append(node)
    return chosen, skipped


def resolve_slurm_names(nodes, spares, slurm_nodes, addresses=None, explicit=None, blocked=None):
    """Slurm ``NodeName`` of each node and spare: ``({node: slurm_name}, {spare: why skipped})``.

    ``nodes``/``spares``: inventory (twin) hostnames; ``slurm_nodes``: :meth:`_slurm.Slurm.node_states` output
    (``{NodeName: {"addr", "hostname", ...}}``); ``addresses``: ``{node: address}`` (the inventory's
    ``ansible_host``); ``explicit``: ``{node: NodeName}`` given by the operator.  A node is its explicit name,
    else itself when Slurm has a node of that name, else the Slurm node whose ``NodeAddr`` or ``NodeHostName``
    equals its address (in the demo the twin's ``gpu-r01-u02`` is the lab host ``lab1`` at 10.77.0.11).
    A node of the run that Slurm does not know, or has drained or down, raises :class:`ValidationError` naming
    it; such a spare is left out of the spare pool with the reason.  With ``blocked`` (a dict), a drained or
    down node of the run goes there with the reason instead (issue 25: an admin's drain blocks that node, the
    others are still validated).
    """
    addresses, explicit = addresses or {}, explicit or {}
    by_addr: Dict[str, str] = {}
    for name, rec in slurm_nodes.items():
        for key in (rec.get("addr"), rec.get("hostname")):
            if key:
                by_addr.setdefault(key, name)
    names, skipped = {}, {}
    for host in list(nodes) + [s for s in spares if s not in nodes]:
        if explicit.get(host):
            name, how = explicit[host], "NodeName %s (slurm_names)" % explicit[host]
        else:
            name, how = host, "NodeName %s" % host
            if host not in slurm_nodes and addresses.get(host) in by_addr:
                name = by_addr[addresses[host]]
        if name in slurm_nodes:
            state = slurm_nodes[name].get("state") or ""
            if _slurm_is_drained(state):
                # A job asking for a drained node pends until its time-out: refuse up front, with Slurm's reason.
                why = "Slurm node %s is %s (%s)" % (name, state, slurm_nodes[name].get("reason") or "no reason given")
                if host in nodes and blocked is not None:
                    blocked[host] = why
                    continue
                if host in nodes:
                    raise ValidationError("node %s cannot run: %s; resume it once burn_in passes again, or leave "
                                          "it out of the play" % (host, why), where=host)
                skipped[host] = why
                continue
            names[host] = name
            continue
        why = "Slurm has no %s%s" % (how, " nor a NodeAddr/NodeHostName %s" % addresses[host]
                                     if not explicit.get(host) and addresses.get(host) else "")
        if host in nodes:
            raise ValidationError("node %s is not a Slurm node: %s" % (host, why), where=host)
        skipped[host] = why
    return names, skipped


def decide(attempt, number, max_attempts, spares_available):
    """What to do after attempt ``number`` (1-based).

    ``attempt``: ``{"runs": [{"status", "reason", ...}], "outliers": [{"node", ...}]}``.
    Returns ``{"action": "pass"|"evict"|"rerun"|"fail", "evict": [nodes], "reason"}``;
    ``evict`` is filled whenever outliers were found (a hot node is drained even
    when no rerun follows).
    """
    evict = []
    for item in attempt.get("outliers", []) + attempt.get("stragglers", []):
        if item["node"] not in evict:
            evict.append(item["node"])
    runs = attempt.get("runs", [])
    failing = [r for r in runs if r["status"] != _gate.PASS]
    last = number >= max_attempts
    if evict:
        if last:
            return {"action": "fail", "evict": evict,
                    "reason": "outliers on %s after %d attempt(s); no attempt left" % (", ".join(evict), number)}
        if spares_available < len(evict):
            return {"action": "fail", "evict": evict,
                    "reason": "%d node(s) to replace (%s) but only %d spare(s) passed burn-in"
                              % (len(evict), ", ".join(evict), spares_available)}
        return {"action": "evict", "evict": evict,
                "reason": "outliers on %s: drain, replace from the spare pool, rerun" % ", ".join(evict)}
    if not runs:
        return {"action": "fail", "evict": [], "reason": "no scale could run"}
    if not failing:
        return {"action": "pass", "evict": [], "reason": "every scale met its MFU target with no outlier"}
    reason = "; ".join(r["reason"] for r in failing)
    if last:
        return {"action": "fail", "evict": [], "reason": "%s (after %d attempt(s))" % (reason, number)}
    return {"action": "rerun", "evict": [], "reason": "%s; no outlier to blame: rerun" % reason}


def _run_scale(scale, nodes, launch, number):
    if scale.nodes and scale.nodes > len(nodes):
        return {"scale_nodes": scale.nodes, "precision": scale.precision, "recipe": scale.recipe,
                "status": _gate.NOT_RUN, "nodes": [],
                "reason": "scale %d nodes needs more than the %d active node(s)" % (scale.nodes, len(nodes))}
    used = list(nodes[:scale.nodes] if scale.nodes else nodes)
    base = {"scale_nodes": len(used), "precision": scale.precision, "recipe": scale.recipe, "nodes": used,
            "target_pct": scale.min_mfu_pct, "convention": scale.convention, "ladder": scale.ladder}
    try:
        out = launch(scale, used, number)
    except SymphonyError as exc:
        return dict(base, status=_gate.FAIL, reason="launch at %d node(s) failed: %s" % (len(used), exc))
    job = out.get("job") or {}
    run = dict(base, job=job, mfu=out.get("mfu"), log=out.get("log"), precision_used=out.get("precision_used"),
               precision_evidence=out.get("precision_evidence"), stragglers=out.get("stragglers") or [],
               rank_steps=out.get("rank_steps") or {})
    if job.get("state") != "COMPLETED" or job.get("exit_code") not in (0, None):
        return dict(run, status=_gate.FAIL,
                    reason=("job %s at %d node(s) ended %s (exit %s) %s" % (
                        job.get("job_id", "?"), len(used), job.get("state", "UNKNOWN"), job.get("exit_code"),
                        job.get("reason", ""))).strip())
    if out.get("precision_error"):
        # No MFU without the precision: the peak it is judged against is that precision's.
        return dict(run, status=_gate.FAIL, reason="%s at %d node(s): %s"
                    % (scale.precision, len(used), out["precision_error"]))
    mfu = out.get("mfu") or {}
    if mfu.get("mfu_pct") is None:
        return dict(run, status=_gate.FAIL, reason="no MFU from the run at %d node(s): %s"
                    % (len(used), out.get("error", "log had no throughput")))
    run["mfu_pct"] = mfu["mfu_pct"]
    if mfu["mfu_pct"] < scale.min_mfu_pct:
        return dict(run, status=_gate.FAIL, reason="MFU %.2f %% at %d node(s) %s below the target %.2f %% (%s)"
                    % (mfu["mfu_pct"], len(used), scale.precision, scale.min_mfu_pct, scale.convention))
    return dict(run, status=_gate.PASS, reason="MFU %.2f %% >= %.2f %% at %d node(s) %s (%s)"
                % (mfu["mfu_pct"], scale.min_mfu_pct, len(used), scale.precision, scale.convention))


def run_validation(nodes, scales, launch, telemetry, drain, spares, max_attempts, on_event=None,
                   clock=time.time):
    """The loop.  Returns the validation result (a dict, JSON-serialisable).

    ``launch(scale, nodes, attempt) -> {"job": slurm record, "mfu": _mfu.compute_mfu dict, "log": path}``;
    ``telemetry(nodes, attempt) -> outliers`` (``_outliers.find_outliers`` dicts) or raises
    :class:`ToolNotFoundError` (recorded as not analysed); ``drain(node, reason)``;
    ``spares(count, exclude) -> [node]`` (eligible spares); ``on_event(kind, node, data)``.
    Result keys: ``status``, ``reason``, ``attempts``, ``final_nodes``, ``evicted``,
    ``replacements``, ``outliers``, ``actions``, ``telemetry``.
    """
    if max_attempts < 1:
        raise ValidationError("max_attempts must be at least 1", where="max_attempts")
    if not nodes:
        raise ValidationError("no node to validate", where="nodes")
    on_event = on_event or (lambda kind, node, data: None)
    active = list(nodes)
    evicted: List[str] = []
    replacements: List[Dict[str, Any]] = []
    all_outliers: List[Dict[str, Any]] = []
    actions: List[str] = []
    attempts: List[Dict[str, Any]] = []
    telemetry_note: Optional[str] = None
    decision: Dict[str, Any] = {}
    for number in range(1, max_attempts + 1):
        started = clock()
        runs = [_run_scale(scale, active, launch, number) for scale in scales]
        stragglers = [dict(s, scale_nodes=r["scale_nodes"], precision=r["precision"])
                      for r in runs for s in r.get("stragglers", [])]
        try:
            outliers = list(telemetry(list(active), number))
            telemetry_note = None
        except ToolNotFoundError as exc:
            outliers, telemetry_note = [], "telemetry not analysed: %s" % exc
        attempt = {"number": number, "nodes": list(active), "runs": runs, "outliers": outliers,
                   "stragglers": stragglers,
                   "started": started, "finished": clock(), "telemetry_note": telemetry_note}
        all_outliers.extend(dict(o, attempt=number) for o in outliers)
        eligible = spares(len(active), set(active) | set(evicted))
        decision = decide(attempt, number, max_attempts, len(eligible))
        attempt["decision"] = decision
        attempts.append(attempt)
        for node in decision["evict"]:
            reasons = [o["reason"] for o in outliers + stragglers if o["node"] == node]
            reason = "cluster_validation attempt %d: %s" % (number, reasons[0] if reasons else "outlier")
            drain(node, reason[:200])
            on_event("drain", node, {"reason": reason, "attempt": number,
                                     "outliers": [o for o in outliers if o["node"] == node],
                                     "stragglers": [o for o in stragglers if o["node"] == node]})
            actions.append("drained %s: %s" % (node, reason))
            evicted.append(node)
        if decision["action"] == "evict":
            chosen = eligible[:len(decision["evict"])]
            for old, new in zip(decision["evict"], chosen):
                active[active.index(old)] = new
                replacements.append({"evicted": old, "spare": new, "attempt": number})
                on_event("spare_promoted", new, {"replaces": old, "attempt": number})
                actions.append("promoted spare %s (burn_in pass) to replace %s" % (new, old))
            actions.append("attempt %d: rerun on %s" % (number + 1, ", ".join(active)))
            continue
        if decision["action"] == "rerun":
            actions.append("attempt %d: %s" % (number + 1, decision["reason"]))
            continue
        break
    status = _gate.PASS if decision["action"] == "pass" else _gate.FAIL
    return {"status": status, "reason": decision["reason"], "attempts": attempts, "final_nodes": active,
            "evicted": evicted, "replacements": replacements, "outliers": all_outliers, "actions": actions,
            "telemetry": telemetry_note or "analysed"}


def node_results(result, run_id, clock=time.time, nccl=None, optional=()):
    """Check results and gate verdicts per node for the ledger.

    ``nccl``: ``{node: {status, reason, check}}``, the node's NCCL sweep result at this stage (the ledger's, see
    ``_handoff.nccl_from_ledger``); a node without one gets ``nccl_sweep`` ``not_run``.  ``optional``: checks the
    gate does not require (the SKU's ``gates.<profile>.cluster_validation.optional``).

    Final nodes get ``training_run``/``mfu_target``/``telemetry_outliers`` from the
    last attempt; evicted nodes get the attempt that evicted them.  Evidence keys
    follow the handoff report's conventions (``mfu``, ``gpu_temps``, ``outliers``).
    Returns ``(results, verdicts)``.
    """
    results, verdicts = [], []
    graph = GRAPH.with_required(optional)
    nccl = nccl or {}
    by_node_attempt = {}
    for attempt in result["attempts"]:
        for node in attempt["nodes"]:
            by_node_attempt[node] = attempt
    for node, attempt in by_node_attempt.items():
        runs = [r for r in attempt["runs"] if node in r.get("nodes", [])]
        mine = [o for o in attempt["outliers"] if o["node"] == node]
        temps = {"%s/%d" % (o["node"], o["gpu"]): o["value"] for o in attempt["outliers"] if o["metric"] == "temp_c"}

        def training(_ctx, runs=runs):
            if not runs:
                return _gate.not_run("no scale ran on this node")
            bad = [r for r in runs if r["status"] == _gate.FAIL and not r.get("mfu_pct")]
            if bad:
                return _gate.failed(bad[0]["reason"], "read the job log; rerun cluster_validation",
                                    evidence={"jobs": [r.get("job") for r in runs]})
            return _gate.passed(observed=[r.get("job", {}).get("job_id") for r in runs],
                                evidence={"jobs": [r.get("job") for r in runs]})

        def mfu(_ctx, runs=runs):
            below = [r for r in runs if r["status"] != _gate.PASS]
            ev = {"mfu": {"mfu_pct": runs[-1].get("mfu_pct"), "convention": runs[-1].get("convention"),
                          "scale_nodes": runs[-1]["scale_nodes"], "precision": runs[-1]["precision"]},
                  "runs": [{k: r.get(k) for k in ("scale_nodes", "precision", "mfu_pct", "target_pct", "status")}
                           for r in runs]}
            if below:
                return _gate.failed(below[0]["reason"], "tune or replace nodes; rerun cluster_validation",
                                    observed=below[0].get("mfu_pct"), expected=below[0].get("target_pct"),
                                    evidence=ev)
            return _gate.passed(observed=[r.get("mfu_pct") for r in runs],
                                expected=[r.get("target_pct") for r in runs], evidence=ev)

        def outliers(_ctx, mine=mine, attempt=attempt):
            if attempt.get("telemetry_note"):
                return _gate.not_run(attempt["telemetry_note"])
            ev = {"outliers": mine, "gpu_temps": temps, "samples": attempt.get("telemetry_evidence")}
            if mine:
                return _gate.failed("; ".join(o["reason"] for o in mine),
                                    "node drained: inspect cooling/thermal interface of the GPU(s) named, "
                                    "rerun burn_in before returning it to the spare pool", observed=mine,
                                    evidence=ev)
            return _gate.passed(reason="no GPU outlier against %d peer node(s)" % len(attempt["nodes"]),
                                evidence=ev)

        def stragglers(_ctx, runs=runs, node=node):
            slow = [s for r in runs for s in r.get("stragglers", []) if s["node"] == node]
            measured = [r for r in runs if r.get("rank_steps")]
            ev = {"stragglers": slow, "rank_steps": {"%dn_%s" % (r["scale_nodes"], r["precision"]): r["rank_steps"]
                                                     for r in measured}}
            if slow:
                return _gate.failed("; ".join(s["reason"] for s in slow),
                                    "node drained: check the slow rank's GPU clocks, PCIe link and thermals; rerun "
                                    "burn_in before returning it to the spare pool", observed=slow, evidence=ev)
            if not measured:
                return _gate.not_run("the training log has no per-rank step times (rank_step lines)")
            return _gate.passed(reason="no straggler rank in %d scale(s)" % len(measured), evidence=ev)

        def sweep(_ctx, node=node):
            found = nccl.get(node)
            if not found:
                return _gate.not_run("no NCCL sweep result recorded for this node at cluster_validation")
            why = "%s: %s" % (found.get("check", "nccl_sweep"), found.get("reason") or found["status"])
            if found["status"] == _gate.PASS:
                return _gate.passed(reason=why, evidence={"nccl": found})
            if found["status"] == _gate.FAIL:
                return _gate.failed(why, "localise with symphony.cluster.fabric_test, then rerun the sweep",
                                    evidence={"nccl": found})
            return _gate.not_run(why, evidence={"nccl": found})

        res = graph.run(node, run_id, {"training_run": training, "mfu_target": mfu, "telemetry_outliers": outliers,
                                       "stragglers": stragglers, "nccl_sweep": sweep}, clock=clock)
        results.extend(res)
        verdicts.append(_gate.compute_gate(graph, res))
        results.extend(_scale_rows(node, runs, run_id, clock()))
    return results, verdicts


def _scale_rows(node, runs, run_id, now):
    """One ledger row per scale this node ran in: the scale's status, its nodes, MFU, job and precision used."""
    rows = []
    for run in runs:
        mfu = run.get("mfu") or {}
        rows.append(_gate.CheckResult(
            node=node, stage=STAGE, check=SCALE_CHECK % (run["scale_nodes"], run["precision"]),
            status=run["status"], reason=run["reason"], expected=run.get("target_pct"), observed=run.get("mfu_pct"),
            evidence={"scale_nodes": run["scale_nodes"], "nodes": run.get("nodes"), "precision": run["precision"],
                      "precision_used": run.get("precision_used"), "precision_evidence": run.get("precision_evidence"),
                      "recipe": run["recipe"], "convention": run.get("convention"), "ladder": run.get("ladder"),
                      "job_id": (run.get("job") or {}).get("job_id"), "peak_tflops": mfu.get("peak_tflops"),
                      "peak_source": mfu.get("peak_source"), "rank_steps": run.get("rank_steps") or {}},
            started=now, finished=now, run_id=run_id))
    return rows


def blocked_results(blocked, run_id, clock=time.time):
    """Results and gates for nodes that could not take part (``{node: why}``, e.g. drained by an admin):
    every check ``blocked`` with the reason, so the node is neither passed nor failed for it."""
    results, verdicts = [], []
    for node, why in blocked.items():
        now = clock()
        res = [_gate.CheckResult(node=node, stage=STAGE, check=name, status=_gate.BLOCKED,
                                 reason="%s; resume it once burn_in passes again, then rerun cluster_validation" % why,
                                 started=now, finished=now, run_id=run_id) for name in GRAPH.order()]
        results.extend(res)
        verdicts.append(_gate.compute_gate(GRAPH, res))
    return results, verdicts
