# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fault localisation over fabric pair tests, the judge that turns values into ok/fail, and the ledger view
(pure: no I/O, no clock).

Localisation (:func:`localise`) is Boolean network tomography over the pair results: every test
exercises components (the two node interfaces and the fabric links on the pair's route); a component
on a passing test is good; a failing test whose only unexonerated component is C convicts C; a
component that is the common member of two failing tests whose other suspects are disjoint is
convicted by parsimony (one fault instead of two); what is left is reported as ambiguous with its
candidates.  So a node whose pairs fail with known-good partners has a bad interface, a pair that
fails while both members pass with others is a bad link, and nothing healthy is blamed on a guess.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .pairs import ERROR, FAIL, INTERFACE, LINK, OK, PairPathFabric

CHECK_INTERFACE = "fabric_interface"
EVENT_LINK = "fabric_link"


@dataclass
class Localisation:
    """What the evidence says.

    ``interfaces``: ``{node: {"verdict": good|bad|ambiguous|untested, "tests": [PairTest dicts]}}``;
    ``links``: ``{link: {"verdict": bad|ambiguous, "info": {...}, "tests": [...]}}`` (only links the
    evidence points at); ``ambiguous``: ``[{"candidates": [[kind, name], ...], "tests": [...]}]``;
    ``good``: set of exonerated components; ``bad``: set of convicted components.
    """

    interfaces: dict
    links: dict
    ambiguous: list
    good: set
    bad: set

    def bad_interfaces(self):
        return sorted(n for n, v in self.interfaces.items() if v["verdict"] == "bad")

    def bad_links(self):
        return sorted(k for k, v in self.links.items() if v["verdict"] == "bad")

    def to_dict(self):
        return {"interfaces": self.interfaces, "links": self.links, "ambiguous": self.ambiguous,
                "bad_interfaces": self.bad_interfaces(), "bad_links": self.bad_links()}


def _test_view(test):
    return {"a": test.a, "b": test.b, "status": test.status, "value": test.value, "unit": test.unit,
            "round": test.round}


def localise(tests, fabric=None, nodes=None):
    """Localise faults from pair results.

    ``tests``: iterable of :class:`PairTest` (``error`` tests are ignored); ``fabric``: a
    :class:`Fabric` (default :class:`PairPathFabric`); ``nodes``: every node that should have been
    tested (those never measured come out ``untested``).  Deterministic faults are assumed: a bad
    component degrades every test that crosses it.  Returns a :class:`Localisation`.

    Rules, applied to a fixpoint: (1) components of passing tests are good; (2) a failing test with
    exactly one non-good component convicts it; (3) a component common to two unexplained failing
    tests whose other non-good components are disjoint is convicted (one fault explains both, the
    alternative needs two: the "second known-good partner" rule).  A failing test containing a
    convicted component is explained.  Unexplained failing tests are ambiguous with their non-good
    components as candidates (a failing test made only of good components is reported as inconsistent).
    """
    fabric = fabric or PairPathFabric()
    measured = [t for t in tests if t.status in (OK, FAIL)]
    comps = [fabric.components(t.a, t.b) for t in measured]
    good = set()
    for t, c in zip(measured, comps):
        if t.status == OK:
            good |= c
    failing = [(t, c) for t, c in zip(measured, comps) if t.status == FAIL]
    bad: set[tuple[str, str]] = set()
    while True:
        unexplained = [(t, c) for t, c in failing if not (c & bad)]
        newly = set()
        for _t, c in unexplained:
            suspects = c - good
            if len(suspects) == 1:
                newly |= suspects
        if not newly:
            by_comp: dict[tuple[str, str], list[int]] = {}
            for i, (_t, c) in enumerate(unexplained):
                for comp in c - good:
                    by_comp.setdefault(comp, []).append(i)
            # Interfaces first, then links, then name: a deterministic order of convictions.
            for comp in sorted(by_comp, key=lambda k: (k[0] != INTERFACE, -len(by_comp[k]), k[1])):
                idx = by_comp[comp]
                others = [(unexplained[i][1] - good) - {comp} for i in idx]
                if any(not (others[i] & others[j]) for i in range(len(idx)) for j in range(i + 1, len(idx))):
                    newly.add(comp)
                    break
        if not newly:
            break
        bad |= newly

    unexplained = [(t, c) for t, c in failing if not (c & bad)]
    interfaces: dict[str, dict[str, Any]] = {}
    links: dict[str, dict[str, Any]] = {}
    ambiguous: list[dict[str, Any]] = []
    per_node: dict[str, list[dict[str, Any]]] = {}
    for t in measured:
        per_node.setdefault(t.a, []).append(_test_view(t))
        per_node.setdefault(t.b, []).append(_test_view(t))
    ambiguous_comps = set()
    for t, c in unexplained:
        cands = sorted(c - good) or sorted(c)
        ambiguous_comps.update(cands)
        ambiguous.append({"candidates": [list(x) for x in cands], "tests": [_test_view(t)],
                          "inconsistent": not (c - good)})
    all_nodes = list(nodes) if nodes is not None else sorted(per_node)
    for n in all_nodes:
        comp = (INTERFACE, n)
        if comp in bad:
            verdict = "bad"
        elif comp in ambiguous_comps:
            verdict = "ambiguous"
        elif comp in good:
            verdict = "good"
        else:
            verdict = "untested"
        interfaces[n] = {"verdict": verdict, "tests": per_node.get(n, [])}
    for kind, key in sorted(bad | ambiguous_comps):
        if kind != LINK:
            continue
        verdict = "bad" if (kind, key) in bad else "ambiguous"
        crossing = [_test_view(t) for t, c in zip(measured, comps) if (LINK, key) in c]
        links[key] = {"verdict": verdict, "info": fabric.link_info(key), "tests": crossing}
    return Localisation(interfaces, links, ambiguous, good, bad)


def judge(tests, floor=None, min_fraction=0.8):
    """(Re)decide ``ok``/``fail`` of measured tests in place and return the threshold used.

    A test passes when ``value >= threshold``.  ``floor``: an absolute threshold in the tests' unit
    (e.g. the SKU's per-HCA Gb/s); without one the threshold is ``min_fraction`` x the upper quartile
    of all measured values (healthy pairs dominate the top of the distribution, so one slow node does
    not drag the reference down as it drags a mean).  ``error`` tests are left alone.
    Returns ``{"threshold": float|None, "reference": float|None, "basis": "floor"|"relative"}``.
    """
    values = sorted(t.value for t in tests if t.status != ERROR and t.value is not None)
    if floor is not None:
        threshold, reference, basis = float(floor), None, "floor"
    elif values:
        reference = values[min(len(values) - 1, (3 * len(values)) // 4)]
        threshold, basis = reference * float(min_fraction), "relative"
    else:
        return {"threshold": None, "reference": None, "basis": "relative"}
    for t in tests:
        if t.status == ERROR or t.value is None:
            continue
        t.status = OK if t.value >= threshold else FAIL
        t.reason = "" if t.status == OK else "%.3g %s < threshold %.3g %s" % (t.value, t.unit, threshold, t.unit)
    return {"threshold": threshold, "reference": reference, "basis": basis}


def _fmt(test):
    value = "n/a" if test.get("value") is None else "%.3g %s" % (test["value"], test.get("unit", ""))
    return "%s<->%s %s (%s, round %s)" % (test["a"], test["b"], value, test["status"], test.get("round"))


def node_outcomes(loc, tests, threshold=None, cabling=None):
    """Per-node verdicts as gate outcomes: ``{node: {"status", "reason", "remediation", "observed",
    "expected", "evidence"}}`` for check :data:`CHECK_INTERFACE`.

    good -> ``pass``; bad -> ``fail`` naming the known-good partners it failed with; ambiguous ->
    ``fail`` naming the candidates (never a guessed pass); untested -> ``not_run`` with the errors that
    kept it from being measured (tool missing, host unreachable) or "no partner".
    ``threshold``: the :func:`judge` dict; ``cabling``: ``{node: "<leaf>:<port>"}`` for remediation text.
    """
    cabling = cabling or {}
    errors: dict[str, list[str]] = {}
    for t in tests:
        if t.status == ERROR:
            errors.setdefault(t.a, []).append(t.reason)
            errors.setdefault(t.b, []).append(t.reason)
    expected = None
    if threshold and threshold.get("threshold") is not None:
        expected = {"min_value": round(threshold["threshold"], 4), "basis": threshold.get("basis"),
                    "reference": threshold.get("reference")}
    out = {}
    for node, info in loc.interfaces.items():
        views = info["tests"]
        values = [v["value"] for v in views if v.get("value") is not None]
        observed = {"verdict": info["verdict"], "min_value": min(values) if values else None,
                    "max_value": max(values) if values else None,
                    "unit": views[0]["unit"] if views else None, "tests": len(views)}
        evidence = {"tests": views, "cabling": cabling.get(node), "errors": errors.get(node, [])}
        where = (" at %s" % cabling[node]) if cabling.get(node) else ""
        if info["verdict"] == "good":
            partners = sorted({v["b"] if v["a"] == node else v["a"] for v in views if v["status"] == OK})
            res: dict[str, Any] = {"status": "pass", "reason": "passed with %s" % ", ".join(partners), "remediation": ""}
        elif info["verdict"] == "bad":
            failing = [v for v in views if v["status"] == FAIL]
            good_partners = [v for v in failing
                             if (INTERFACE, v["b"] if v["a"] == node else v["a"]) in loc.good]
            res = {"status": "fail",
                   "reason": "bad fabric interface: fails with known-good partners: %s"
                             % "; ".join(_fmt(v) for v in (good_partners or failing)),
                   "remediation": "check the NIC and its cable%s (link counters, reseat or replace), then rerun "
                                  "the fabric tier" % where}
        elif info["verdict"] == "ambiguous":
            cands = sorted({"%s %s" % tuple(c) for a in loc.ambiguous
                            if [INTERFACE, node] in a["candidates"] for c in a["candidates"]})
            res = {"status": "fail",
                   "reason": "ambiguous: the evidence cannot separate %s" % ", ".join(cands),
                   "remediation": "rerun the fabric tier with more known-good partners (schedule round_robin "
                                  "on this group) to separate the candidates"}
        else:
            errs = errors.get(node)
            res = {"status": "not_run",
                   "reason": ("not measured: %s" % "; ".join(sorted(set(errs)))) if errs
                   else "not measured: no partner could be tested with this node",
                   "remediation": ""}
        res.update({"observed": observed, "expected": expected, "evidence": evidence})
        out[node] = res
    return out


def link_events(loc, run_id=None):
    """One event per endpoint node of every bad or ambiguous link, for ``Ledger.record_event(node,
    EVENT_LINK, data)``: ``[(node, data)]`` where ``data`` is ``{"link", "verdict", "info", "tests",
    "run_id"}``.  Pair-path links name both nodes; leaf/spine uplinks name no node and are recorded
    with node ``None``."""
    out = []
    for key, info in sorted(loc.links.items()):
        data = {"link": key, "verdict": info["verdict"], "info": info["info"], "tests": info["tests"],
                "run_id": run_id}
        nodes = info["info"].get("nodes") or [None]
        for node in nodes:
            out.append((node, data))
    return out
