# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The gate model shared by every stage (DESIGN.md, "The gate model").

A check result is ``{node, stage, check, status, reason, expected, observed,
remediation, evidence, started, finished, run_id}``; ``status`` is one of
``pass``, ``fail``, ``blocked``, ``not_run``.  Checks declare dependencies;
``blocked`` is derived from that graph, never guessed.  A stage gate passes only
when every required check passes.
"""

from __future__ import annotations

import time
import traceback
import uuid
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple

from .errors import FAULT_CONTROLLER, NOT_THE_NODES_FAULTS, GateError, SymphonyError

PASS = "pass"
FAIL = "fail"
BLOCKED = "blocked"
NOT_RUN = "not_run"
STATUSES = (PASS, FAIL, BLOCKED, NOT_RUN)

STAGES = ("pre_deployment", "provisioning", "burn_in", "cluster_validation", "fleet_audit")
# The stage whose gate must have passed before a node may enter a stage.
PREVIOUS_STAGE: Dict[str, Optional[str]] = {
    "pre_deployment": None,
    "provisioning": "pre_deployment",
    "burn_in": "provisioning",
    "cluster_validation": "burn_in",
    "fleet_audit": "cluster_validation",
}


def new_run_id(prefix: str = "run") -> str:
    """Return a sortable unique run id such as ``run-20261129T153501-1a2b3c4d``."""
    return "%s-%s-%s" % (prefix, time.strftime("%Y%m%dT%H%M%S", time.gmtime()), uuid.uuid4().hex[:8])


@dataclass
class Outcome:
    """What a check function returns: status plus the words that explain it."""

    status: str
    reason: str = ""
    expected: object = None
    observed: object = None
    remediation: str = ""
    evidence: Dict[str, Any] = field(default_factory=dict)


def passed(observed: Any = None, expected: Any = None, reason: str = "",
           evidence: Optional[Dict[str, Any]] = None) -> Outcome:
    """Outcome for a check that ran and met its criterion."""
    return Outcome(PASS, reason, expected, observed, "", evidence or {})


def failed(reason: str, remediation: str = "", observed: Any = None, expected: Any = None,
           evidence: Optional[Dict[str, Any]] = None) -> Outcome:
    """Outcome for a check that ran and did not meet its criterion.

    ``reason`` must say what differed in the field's words; ``remediation`` what
    a technician or the automation does next.
    """
    if not reason:
        raise GateError("a failed check needs a reason")
    return Outcome(FAIL, reason, expected, observed, remediation, evidence or {})


def not_run(reason: str, evidence: Optional[Dict[str, Any]] = None) -> Outcome:
    """Outcome for a check not run for a reason of its own (tool absent, not applicable)."""
    if not reason:
        raise GateError("a not_run check needs a reason")
    return Outcome(NOT_RUN, reason, None, None, "", evidence or {})


# The evidence key of a result read from a BMC without TLS verification (validate_certs=false): every ledger row
# such a run wrote carries it and the handoff report marks it (DESIGN.md "Security": an explicit opt-out warns).
TLS_UNVERIFIED = "tls_unverified"


def mark_unverified(evidence: Optional[Dict[str, Any]], verified: bool) -> Dict[str, Any]:
    """``evidence`` (a new dict) with :data:`TLS_UNVERIFIED` set when the BMC was read with ``verified`` False."""
    out = dict(evidence or {})
    if not verified:
        out[TLS_UNVERIFIED] = True
    return out


def error_outcome(exc: SymphonyError) -> Outcome:
    """The outcome of a check that raised ``exc``: ``blocked`` with its remedy when ``exc.fault`` is a controller
    fault or a BMC that stayed unreachable (``_redfish.errors``: never a hardware ``fail``, DESIGN.md "Verdict
    rules"), else ``fail`` with the error's message.  ``evidence["fault"]`` keeps the class."""
    fault = getattr(exc, "fault", None)
    if fault in NOT_THE_NODES_FAULTS:
        return fault_blocked_outcome(str(fault), str(exc), getattr(exc, "remedy", "") or "")
    return Outcome(FAIL, str(exc), remediation=getattr(exc, "remediation", "") or
                   "investigate the error above and rerun the stage")


def fault_blocked_outcome(fault: str, message: str, remedy: str = "") -> Outcome:
    """``blocked`` for a step cut short by a fault that is not the node's (``fault``: a controller fault or a BMC
    that stayed unreachable, one of :data:`NOT_THE_NODES_FAULTS`): ``"<what>: <message>"``, the remedy, and
    ``evidence["fault"]`` for the dispatch list (DESIGN.md "Verdict rules").  Raises :class:`GateError` for
    another fault class (a BMC's own fault is a finding, not a block)."""
    if fault not in NOT_THE_NODES_FAULTS:
        raise GateError("fault %r is the node's own: not a blocked outcome" % fault)
    what = "a controller-side fault, not the node's" if fault == FAULT_CONTROLLER else "BMC unreachable"
    return Outcome(BLOCKED, "%s: %s" % (what, message), remediation=remedy or
                   "rerun the stage once the BMC answers; reset it (Manager.Reset) if it stays unreachable",
                   evidence={"fault": fault})


_ATOMIC = frozenset([str, int, float, bool, type(None)])


@dataclass
class _Box:
    value: Any


def _plain(value: Any) -> Any:
    """``value`` as ``dataclasses.asdict`` copies a field: strings and numbers as they are (``copy.deepcopy`` returns
    them as they are), plain dicts and lists rebuilt item by item, anything else through ``asdict`` itself."""
    kind = type(value)
    if kind in _ATOMIC:
        return value
    if kind is dict:
        return {_plain(k): _plain(v) for k, v in value.items()}
    if kind is list:
        return [_plain(v) for v in value]
    return asdict(_Box(value))["value"]


@dataclass
class CheckResult:
    """One ledger row.  ``started``/``finished`` are UNIX seconds (float)."""

    node: str
    stage: str
    check: str
    status: str
    reason: str = ""
    expected: object = None
    observed: object = None
    remediation: str = ""
    evidence: Dict[str, Any] = field(default_factory=dict)
    started: float = 0.0
    finished: float = 0.0
    run_id: str = ""

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise GateError("status %r is not one of %s" % (self.status, ", ".join(STATUSES)),
                            where="%s/%s/%s" % (self.node, self.stage, self.check))

    def to_dict(self) -> Dict[str, Any]:
        """The row as a dict, as ``dataclasses.asdict`` gives it (values copied deep), without its per-value
        recursion for the strings and numbers that are most of a row (issue 27 profile)."""
        return {name: _plain(getattr(self, name)) for name in _RESULT_FIELDS}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "CheckResult":
        known: Dict[str, Any] = {k: data.get(k) for k in cls.__dataclass_fields__ if k in data}
        if known.get("evidence") is None:
            known["evidence"] = {}
        return cls(**known)


_RESULT_FIELDS = tuple(f.name for f in fields(CheckResult))


@dataclass(frozen=True)
class CheckSpec:
    """A check of a stage: its name, what it depends on, whether the gate requires it."""

    name: str
    depends_on: Tuple[str, ...] = ()
    required: bool = True
    description: str = ""


class CheckGraph:
    """A stage's checks and their dependency graph.

    Raises :class:`GateError` on a dependency that names no check, or on a cycle.
    """

    def __init__(self, stage: str, specs: Iterable[CheckSpec]) -> None:
        self.stage = stage
        self.specs: Dict[str, CheckSpec] = {}
        for spec in specs:
            if spec.name in self.specs:
                raise GateError("check %r declared twice" % spec.name, where=stage)
            self.specs[spec.name] = spec
        for spec in self.specs.values():
            for dep in spec.depends_on:
                if dep not in self.specs:
                    raise GateError("check %r depends on unknown check %r" % (spec.name, dep), where=stage)
        self._order = self._topological()

    def _topological(self) -> List[str]:
        order: List[str] = []
        state: Dict[str, str] = {}

        def visit(name: str, path: List[str]) -> None:
            mark = state.get(name)
            if mark == "done":
                return
            if mark == "active":
                raise GateError("dependency cycle: %s" % " -> ".join(path + [name]), where=self.stage)
            state[name] = "active"
            for dep in self.specs[name].depends_on:
                visit(dep, path + [name])
            state[name] = "done"
            order.append(name)

        # Declaration order is kept among independent checks so output reads as declared.
        for name in self.specs:
            visit(name, [])
        return order

    def order(self) -> List[str]:
        """Check names in an order where every dependency comes first."""
        return list(self._order)

    def with_required(self, optional: Iterable[str] = ()) -> "CheckGraph":
        """Return a copy where the checks named in ``optional`` are not required by the gate."""
        optional = set(optional)
        unknown = optional - set(self.specs)
        if unknown:
            raise GateError("optional checks %s are not checks of this stage" % sorted(unknown), where=self.stage)
        return CheckGraph(self.stage, [
            CheckSpec(s.name, s.depends_on, s.required and s.name not in optional, s.description)
            for s in self.specs.values()
        ])

    def blocking_dependencies(self, name: str, statuses: Mapping[str, str]) -> List[Tuple[str, str]]:
        """Dependencies of ``name`` whose status (from ``statuses``) is not ``pass``."""
        return [(dep, statuses.get(dep, NOT_RUN)) for dep in self.specs[name].depends_on
                if statuses.get(dep) != PASS]

    def run(self, node: str, run_id: str, functions: Mapping[str, Callable[[Any], Outcome]], context: Any = None,
            clock: Callable[[], float] = time.time) -> List[CheckResult]:
        """Run every check in dependency order and return a list of :class:`CheckResult`.

        ``functions`` maps check name to ``callable(context) -> Outcome``.  A check
        whose dependency did not pass is ``blocked`` naming that dependency and is
        not called.  A :class:`SymphonyError` raised by a check function makes that
        check ``fail`` with the error's message, or ``blocked`` for a controller or unreachable-BMC fault
        (:func:`error_outcome`; the node goes on; other nodes are unaffected); any other exception is an internal error of that check: it fails with the
        traceback in its evidence, and the node's other checks still run.  A check with no
        function is ``not_run``.
        """
        statuses: Dict[str, str] = {}
        results: List[CheckResult] = []
        for name in self._order:
            start = clock()
            blockers = self.blocking_dependencies(name, statuses)
            if blockers:
                outcome = Outcome(BLOCKED, "blocked by %s" % ", ".join("%s (%s)" % b for b in blockers))
            elif name not in functions:
                outcome = not_run("no implementation of this check for this node")
            else:
                try:
                    outcome = functions[name](context)
                except SymphonyError as exc:
                    outcome = error_outcome(exc)
                except Exception as exc:  # a bug in one check (issue 16: one "N/A" threshold) is not the node's
                    outcome = Outcome(FAIL, "internal error in check %s: %s: %s" % (name, type(exc).__name__, exc),
                                      remediation="a bug in this check; report it with the traceback in the evidence",
                                      evidence={"traceback": traceback.format_exc()})
                if not isinstance(outcome, Outcome):
                    raise GateError("check %r returned %r, not an Outcome" % (name, type(outcome).__name__),
                                    where=self.stage)
            statuses[name] = outcome.status
            results.append(CheckResult(node=node, stage=self.stage, check=name, status=outcome.status,
                                       reason=outcome.reason, expected=outcome.expected,
                                       observed=outcome.observed, remediation=outcome.remediation,
                                       evidence=outcome.evidence, started=start, finished=clock(),
                                       run_id=run_id))
        return results


def derive_blocked(graph: CheckGraph, results: Sequence[CheckResult],
                   recorded: Iterable[str] = ()) -> List[CheckResult]:
    """Recompute ``blocked`` from the graph for results recorded elsewhere.

    ``results`` is a list of :class:`CheckResult` for one node and stage.  Any
    result whose dependency did not pass becomes ``blocked`` naming it; a result
    marked ``blocked`` whose dependencies all passed is an inconsistency and raises
    :class:`GateError`, unless its evidence names the fault that blocked it (:func:`error_outcome`).
    ``recorded``: names of checks whose results come from the ledger as an earlier run derived them (their dependencies are not in ``graph``);
    they are kept as they are.  Returns a new list in graph order.
    """
    by_name = {r.check: r for r in results}
    as_recorded = set(recorded)
    statuses: Dict[str, str] = {}
    out: List[CheckResult] = []
    for name in graph.order():
        res = by_name.get(name)
        if res is None:
            continue
        blockers = graph.blocking_dependencies(name, statuses)
        if name in as_recorded:
            pass
        elif blockers:
            res = CheckResult(**dict(res.to_dict(), status=BLOCKED,
                                     reason="blocked by %s" % ", ".join("%s (%s)" % b for b in blockers)))
        elif res.status == BLOCKED and not (res.evidence or {}).get("fault"):
            # (a check blocked by a fault of its own, a controller or unreachable-BMC one, carries it: error_outcome)
            raise GateError("check %r is blocked but all of its dependencies passed" % name,
                            where="%s/%s" % (res.node, graph.stage))
        statuses[name] = res.status
        out.append(res)
    return out


@dataclass
class GateVerdict:
    """A stage gate for one node: ``status`` and the checks that kept it closed."""

    node: str
    stage: str
    status: str
    reason: str
    failing: List[str] = field(default_factory=list)
    waived: List[str] = field(default_factory=list)

    def to_dict(self) -> Dict[str, Any]:
        return {name: _plain(getattr(self, name)) for name in _VERDICT_FIELDS}


_VERDICT_FIELDS = tuple(f.name for f in fields(GateVerdict))


def compute_gate(graph: CheckGraph, results: Sequence[CheckResult], waivers: Iterable[str] = ()) -> GateVerdict:
    """Gate of one node for one stage.

    ``results``: current :class:`CheckResult` per check (latest wins).  ``waivers``:
    check names an operator waived (ledger records, never edits).
    Precedence: any required ``fail`` → ``fail``; else any required ``blocked`` →
    ``blocked``; else any required ``not_run`` or missing → ``not_run``; else ``pass``.
    """
    if not results:
        raise GateError("no check results to gate on", where=graph.stage)
    node = results[0].node
    by_name = {r.check: r for r in results}
    waived_names = set(waivers)
    buckets: Dict[str, List[Tuple[str, str]]] = {FAIL: [], BLOCKED: [], NOT_RUN: []}
    waived: List[str] = []
    for name in graph.order():
        spec = graph.specs[name]
        if not spec.required:
            continue
        res = by_name.get(name)
        status = res.status if res else NOT_RUN
        if status == PASS:
            continue
        if name in waived_names:
            waived.append(name)
            continue
        buckets[status].append((name, res.reason if res else "no result recorded"))
    for status in (FAIL, BLOCKED, NOT_RUN):
        if buckets[status]:
            names = [name for name, _reason in buckets[status]]
            first = buckets[status][0]
            reason = "%s: %s" % (first[0], first[1])
            if len(names) > 1:
                reason += " (and %d more: %s)" % (len(names) - 1, ", ".join(names[1:]))
            return GateVerdict(node, graph.stage, status, reason, names, waived)
    return GateVerdict(node, graph.stage, PASS, "all required checks passed", [], waived)
