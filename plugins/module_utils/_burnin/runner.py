# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Burn-in runner (DESIGN.md stage 3): plan, fail-fast tiers, flaky retry, per-test timeouts, evidence.

The plan comes from the SKU manifest's ``burn_in.tiers`` (merged with the profile's
overrides): tiers in the order node -> gpu -> power -> fabric, tests inside a tier by
``cost_s`` (seconds-long sanity checks first, hours-long stress last).  The first
failing test stops the node: every later test is ``not_run`` with "stopped by
fail-fast after <test>".  A test marked ``flaky`` is repeated once before it fails
the node and both attempts are kept.  Before and after each tier the kernel log is
read and the XIDs (and MCE/AER errors) that appeared during the tier become the
check ``<tier>_xid_scan``.  Raw output and parsed results are written under
``<evidence_root>/<node>/<run_id>/<tier>/<test>/attempt-<n>/``; results carry those
paths relative to ``evidence_root``.

The multi-node fabric tier runs from ``roles/burn_in/tasks/fabric.yml``; this runner
only marks fabric tests ``not_run`` when fail-fast has stopped the node.

The pieces: :mod:`.plan` (plan and gate graph), :mod:`.executor` and :mod:`.evidence` (commands and the
files they leave), :mod:`.kernel_log` (the per-tier scan), :mod:`.context` (what a test gets) and
:mod:`.checks` (the test kinds, one registry).  This module runs them and records the gate.
"""

from __future__ import annotations

import os
import time
from typing import Any, Callable, Mapping

from .._core.errors import (
    ManifestError,
    ParseError,
    SymphonyError,
    ToolNotFoundError,
)
from .._core.gate import (
    FAIL,
    NOT_RUN,
    PASS,
    CheckResult,
    GateVerdict,
    Outcome,
    compute_gate,
    failed,
    new_run_id,
    not_run,
)
from .._core.schema import HAS_JSONSCHEMA
from .._core.sku import validate_manifest
from .checks import KINDS
from .context import TestContext, TestTimeoutError
from .evidence import EvidenceStore, absolutise_evidence, safe_name
from .executor import Executor
from .fleet_stats import annotate
from .kernel_log import KernelLog, kernel_findings, xid_outcome
from .plan import RUNNER_TIERS, STAGE, TIER_ORDER, XID_CHECK, PlannedTest, build_plan, check_kinds, gate_graph


def _attempt(test, node, manifest, profile, executor, evidence, kernel_log, function, attempt, clock, sleep, sysfs,
             procfs):
    rel_dir = os.path.join(test.tier, safe_name(test.name), "attempt-%d" % attempt)
    ctx = TestContext(test, node, manifest, profile, executor, evidence, rel_dir, kernel_log,
                      clock() + test.timeout_s, clock=clock, sleep=sleep, sysfs=sysfs, procfs=procfs)
    try:
        outcome = function(ctx)
    except ToolNotFoundError as exc:
        outcome = not_run(str(exc.message))
    except TestTimeoutError as exc:
        outcome = failed(exc.message, "rerun the test; if it times out again, look at the raw output for where it "
                                      "hung and check the component it exercises")
    except ParseError as exc:
        outcome = failed("output could not be parsed: %s" % exc,
                         "inspect the raw output kept as evidence; a truncated output usually means the tool "
                         "crashed or was killed")
    except SymphonyError as exc:
        outcome = failed(str(exc), getattr(exc, "remediation", "") or "investigate the error above and rerun")
    if not isinstance(outcome, Outcome):
        raise TypeError("burn-in test %r returned %r, not an Outcome" % (test.name, type(outcome).__name__))
    merged = dict(ctx.evidence)
    merged.update(outcome.evidence or {})
    summary = {"status": outcome.status, "reason": outcome.reason, "expected": outcome.expected,
               "observed": outcome.observed, "remediation": outcome.remediation, "attempt": attempt}
    merged["result"] = evidence.write_json(rel_dir, "result.json", summary)
    outcome.evidence = merged
    return outcome


def run_test(test: PlannedTest, node: str, manifest: dict, profile: str | None, executor: Executor,
             evidence: EvidenceStore, kernel_log: KernelLog, function: Callable[[TestContext], Outcome],
             clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep,
             sysfs: str = "/sys", procfs: str = "/proc") -> Outcome:
    """Run one test (twice if it is flaky and the first attempt failed); returns an :class:`Outcome`.

    A flaky test's final status is its second attempt's; both attempts' evidence and
    observations are kept (``evidence.attempts``, ``observed.attempts``).
    """
    args = (test, node, manifest, profile, executor, evidence, kernel_log, function)
    first = _attempt(*args, 1, clock, sleep, sysfs, procfs)
    if not (test.flaky and first.status == FAIL):
        return first
    second = _attempt(*args, 2, clock, sleep, sysfs, procfs)
    attempts = [dict(status=o.status, reason=o.reason, observed=o.observed, evidence=o.evidence)
                for o in (first, second)]
    if second.status == PASS:
        reason = "passed on retry (flaky-prone test); first attempt failed: %s" % first.reason
    elif second.status == FAIL:
        reason = "failed twice (flaky-prone test retried once): %s" % second.reason
    else:
        reason = "retry %s: %s; first attempt failed: %s" % (second.status, second.reason, first.reason)
    evidence_out = dict(second.evidence)
    evidence_out["attempts"] = [o.evidence for o in (first, second)]
    return Outcome(second.status, reason, second.expected, {"attempts": attempts, "final": second.observed},
                   second.remediation or first.remediation, evidence_out)


def run_burnin(node: str, manifest: dict, plan: list[PlannedTest], run_id: str, evidence: EvidenceStore,
               profile: str | None = "production", executor: Executor | None = None,
               kernel_log: KernelLog | None = None,
               registry: Mapping[str, Callable[[TestContext], Outcome]] | None = None,
               stopped_after: str | None = None, fail_fast: bool = True,
               clock: Callable[[], float] = time.monotonic, wall: Callable[[], float] = time.time,
               sleep: Callable[[float], None] = time.sleep, sysfs: str = "/sys",
               procfs: str = "/proc") -> dict[str, Any]:
    """Run the node/gpu/power tiers of ``plan`` on this host for ``node``.

    Returns ``{"results": [CheckResult], "stopped_after": name|None, "files": [relative paths],
    "tiers": {tier: status}}`` where a tier's status is ``fail`` if any of its checks failed, else
    ``not_run`` if all were not run, else ``pass`` if none is ``not_run``, else ``partial``.
    ``stopped_after`` carries fail-fast across calls (a previous call's failing test).  Fabric
    tests in the plan are returned only as ``not_run`` when fail-fast stopped the node.
    ``registry``: kind -> ``callable(TestContext) -> Outcome`` (default: :data:`_burnin.checks.KINDS`).
    """
    registry = KINDS if registry is None else registry
    executor = executor or Executor()
    kernel_log = kernel_log or KernelLog(executor)
    results = []

    def record(test_name, outcome, started):
        results.append(CheckResult(node=node, stage=STAGE, check=test_name, status=outcome.status,
                                   reason=outcome.reason, expected=outcome.expected, observed=outcome.observed,
                                   remediation=outcome.remediation, evidence=outcome.evidence,
                                   started=started, finished=wall(), run_id=run_id))

    for tier in TIER_ORDER:
        tier_tests = [t for t in plan if t.tier == tier]
        if not tier_tests:
            continue
        if tier not in RUNNER_TIERS:
            if stopped_after:
                for test in tier_tests:
                    record(test.name, not_run("stopped by fail-fast after %s" % stopped_after), wall())
            continue
        if stopped_after:
            for name in [t.name for t in tier_tests] + [XID_CHECK % tier]:
                record(name, not_run("stopped by fail-fast after %s" % stopped_after), wall())
            continue
        tier_start = wall()
        rel_dir = os.path.join(tier, "kernel-log")
        try:
            marker = kernel_log.snapshot()
            scan_error = None
        except ToolNotFoundError as exc:
            marker, scan_error = None, exc.message
        for test in tier_tests:
            started = wall()
            if stopped_after:
                record(test.name, not_run("stopped by fail-fast after %s" % stopped_after), started)
                continue
            function = registry.get(test.kind)
            if function is None:
                outcome = not_run("test kind %r has no implementation in this collection" % test.kind)
            else:
                outcome = run_test(test, node, manifest, profile, executor, evidence, kernel_log, function,
                                   clock=clock, sleep=sleep, sysfs=sysfs, procfs=procfs)
            record(test.name, outcome, started)
            if fail_fast and outcome.status == FAIL:
                stopped_after = test.name
        # XIDs and hardware errors logged while the tier ran (even when it stopped early).
        if marker is None:
            outcome = not_run("kernel log not read before the tier: %s" % scan_error)
        else:
            try:
                text, records = kernel_log.since(marker)
                ev = {"kernel_log": evidence.write_text(rel_dir, "kernel-log-during-tier.txt", text)}
                findings = kernel_findings(records)
                ev["findings"] = evidence.write_json(rel_dir, "findings.json", findings)
                outcome = xid_outcome(findings, "during the %s tier" % tier, ev)
            except ToolNotFoundError as exc:
                outcome = not_run("kernel log not readable after the tier: %s" % exc.message)
        record(XID_CHECK % tier, outcome, tier_start)
        if fail_fast and outcome.status == FAIL and not stopped_after:
            stopped_after = XID_CHECK % tier
    tiers = {}
    for tier in TIER_ORDER:
        names = set(t.name for t in plan if t.tier == tier) | {XID_CHECK % tier}
        statuses = [r.status for r in results if r.check in names]
        if not statuses:
            continue
        if FAIL in statuses:
            tiers[tier] = FAIL
        elif all(s == NOT_RUN for s in statuses):
            tiers[tier] = NOT_RUN
        elif NOT_RUN in statuses:
            tiers[tier] = "partial"
        else:
            tiers[tier] = PASS
    return {"results": results, "stopped_after": stopped_after, "files": list(evidence.files), "tiers": tiers}


def record_burnin(ledger: Any, manifest: dict, profile: str | None, node: str, run_id: str, results: list,
                  evidence_root: str | None = None, waivers: list | None = None,
                  extra_checks: tuple | list = ()) -> GateVerdict:
    """Append ``results`` (dicts or :class:`CheckResult`) to ``ledger`` and record the node's burn-in gate.

    The gate is computed from the ledger's current burn-in results for the node (so results of
    the fabric tier recorded separately count) against :func:`gate_graph`.  Each result's numbers are compared
    with the fleet of the SKU first (:func:`~._burnin.fleet_stats.annotate`: warnings only).  Returns the
    :class:`GateVerdict`.  Raises :class:`LedgerError` on write failure.
    """
    rows = []
    for item in results:
        res = item if isinstance(item, CheckResult) else CheckResult.from_dict(item)
        if res.node != node or res.stage != STAGE:
            raise ManifestError("result for %s/%s/%s does not belong to %s/%s"
                                % (res.node, res.stage, res.check, node, STAGE), where=node)
        if evidence_root:
            res.evidence = absolutise_evidence(res.evidence, evidence_root)
        rows.append(res)
    if rows:
        # thresholds from the fleet: warnings in the evidence only, the SKU's floors decide (fleet_stats.py)
        annotate(rows, str(manifest.get("sku") or ""), ledger.current_results(stage=STAGE))
        ledger.record_results(rows)
    verdict = current_gate(ledger, manifest, profile, node, waivers, extra_checks)
    ledger.record_gate(verdict, run_id)
    return verdict


def current_gate(ledger: Any, manifest: dict, profile: str | None, node: str, waivers: list | None = None,
                 extra_checks: tuple | list = ()) -> GateVerdict:
    """The burn-in gate of ``node`` from the ledger's current results (no write)."""
    graph = gate_graph(manifest, profile, extra_checks=extra_checks)
    current = [r for r in ledger.current_results(node=node, stage=STAGE) if r.check in graph.specs]
    if not current:
        current = [CheckResult(node=node, stage=STAGE, check=graph.order()[0], status=NOT_RUN,
                               reason="no burn-in result recorded")]
    waived = ledger.waivers(node, STAGE) if waivers is None else waivers
    return compute_gate(graph, current, waived)


def _validate(manifest: dict) -> dict:
    """Validate the manifest where jsonschema is available (the controller); structural checks otherwise."""
    if HAS_JSONSCHEMA:
        validate_manifest(manifest, "SKU %s" % manifest.get("sku", "manifest"))
    return manifest


def burnin_run(params: Mapping[str, Any], check_mode: bool, executor: Executor | None = None,
               kernel_log: KernelLog | None = None) -> dict[str, Any]:
    """Logic of the ``burnin_run`` module.

    ``params``: node, manifest, profile, tiers, tests, overrides, evidence_dir, run_id, stopped_after,
    fail_fast.  In check mode returns the plan without running anything.  Returns the module result:
    ``{changed, run_id, plan, checks: [gate_record check dicts with absolute evidence paths], optional,
    declared, fabric_tests, stopped_after, tiers, evidence_dir, evidence_files}``.  ``declared`` is every
    check of the SKU's burn-in gate (whatever ``tiers``/``tests`` restrict this run to): ``gate_record`` builds
    the gate from it.  ``fabric_tests`` are the planned fabric-tier tests (merged params/thresholds) for
    ``fabric_test``'s ``test``.  Raises :class:`ManifestError` for a kind nothing implements.
    """
    manifest = _validate(params["manifest"])
    check_kinds(manifest, KINDS)
    profile = params.get("profile") or "production"
    plan = build_plan(manifest, profile, tiers=params.get("tiers") or None, only=params.get("tests") or None,
                      overrides=params.get("overrides") or None, calibration=params.get("calibration"))
    run_id = params.get("run_id") or new_run_id("burnin")
    optional = list(((manifest.get("gates") or {}).get(profile) or {}).get(STAGE, {}).get("optional") or [])
    # every declared check, not only this run's plan: the gate reads the latest result of each (issue 25)
    declared = gate_graph(manifest, profile).order()
    fabric_tests = [{"name": t.name, "kind": t.kind, "params": t.params, "thresholds": t.thresholds,
                     "timeout_s": t.timeout_s} for t in plan if t.tier not in RUNNER_TIERS]
    out = {"changed": False, "run_id": run_id, "plan": [t.to_dict() for t in plan], "optional": optional,
           "declared": declared, "fabric_tests": fabric_tests,
           "profile": profile, "checks": [], "stopped_after": params.get("stopped_after"), "tiers": {},
           "evidence_dir": params["evidence_dir"], "evidence_files": []}
    if check_mode:
        return out
    store = EvidenceStore(params["evidence_dir"], params["node"], run_id)
    report = run_burnin(params["node"], manifest, plan, run_id, store, profile=profile, executor=executor,
                        kernel_log=kernel_log, stopped_after=params.get("stopped_after"),
                        fail_fast=params.get("fail_fast", True))
    checks = []
    for res in report["results"]:
        checks.append({"name": res.check, "status": res.status, "reason": res.reason, "expected": res.expected,
                       "observed": res.observed, "remediation": res.remediation,
                       "evidence": absolutise_evidence(res.evidence, store.root),
                       "started": res.started, "finished": res.finished})
    out.update(changed=True, checks=checks, stopped_after=report["stopped_after"], tiers=report["tiers"],
               evidence_files=[os.path.join(store.root, f) for f in report["files"]])
    return out
