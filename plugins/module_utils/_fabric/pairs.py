# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fabric schedules and localisation (pure: no I/O, no clock).

Schedules decide which disjoint node pairs are tested together in each round:

* :func:`round_robin`: the circle method, N-1 rounds of N/2 disjoint pairs covering every pair once
  (N rounds with one bye each for odd N); Microsoft SuperBench ``pattern: pair-wise``
  (``gen_traffic_pattern_config.py::gen_pair_wise_config``), ../shared/reference/numbers.md section 6.
* :func:`random_matching`: one random perfect matching; with :class:`AdaptiveScheduler` the suspects of
  each round are re-paired with known-good nodes (Google Cluster Health Scanner ``PAIRING_MODE: random``,
  ``nccl_runner.py::generate_index_pairs``).
* :func:`tri_ring`: the tri-node ring A->B, B->C, A->C in three rounds over triples of nodes.

Localisation (:func:`localise`) is Boolean network tomography over the pair results: every test
exercises components (the two node interfaces and the fabric links on the pair's route); a component
on a passing test is good; a failing test whose only unexonerated component is C convicts C; a
component that is the common member of two failing tests whose other suspects are disjoint is
convicted by parsimony (one fault instead of two); what is left is reported as ambiguous with its
candidates.  So a node whose pairs fail with known-good partners has a bad interface, a pair that
fails while both members pass with others is a bad link, and nothing healthy is blamed on a guess.

A "link" is what the :class:`Fabric` says a route crosses.  :class:`PairPathFabric` (the default; what
the lab and a twin with only node-to-leaf cabling can say) makes the path between two nodes one link,
keyed by the two endpoints' twin cabling ``"<leafA>:<portA>~<leafB>:<portB>"``.
:class:`LeafSpineFabric` models a two-tier Clos with deterministic ECMP, so a bad leaf-spine cable is a
link shared by many pairs (used by the simulation bench and where the spine layout is known).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field, asdict

from .._core.errors import ValidationError

INTERFACE = "interface"
LINK = "link"

OK = "ok"
FAIL = "fail"
ERROR = "error"      # the test could not be run or measured: no evidence either way


@dataclass
class PairTest:
    """One pair measurement.

    ``a``/``b``: node names (``a`` is the client/sender side); ``status``: ``ok``, ``fail`` or ``error``
    (``error``: not measured, e.g. SSH or the tool failed; excluded from localisation); ``value`` and
    ``unit``: what was measured (``Gb/s`` for iperf3/ib_write_bw, ``GB/s`` busbw for nccl-tests);
    ``round``: 1-based schedule round; ``evidence``: raw numbers and tool output references.
    """

    a: str
    b: str
    status: str
    value: float = None
    unit: str = ""
    round: int = 0
    reason: str = ""
    evidence: dict = field(default_factory=dict)

    def to_dict(self):
        return asdict(self)


# ----------------------------------------------------------------------------------------------
# Schedules
# ----------------------------------------------------------------------------------------------

def _check_nodes(nodes):
    nodes = list(nodes)
    if len(set(nodes)) != len(nodes):
        dup = sorted({n for n in nodes if nodes.count(n) > 1})
        raise ValidationError("node list has duplicates: %s" % ", ".join(dup), where="fabric schedule")
    return nodes


def round_robin(nodes):
    """Circle-method round-robin tournament.

    ``nodes``: list of node names.  Returns a list of rounds, each a list of ``(a, b)`` disjoint pairs;
    N-1 rounds for even N, N rounds for odd N (one node sits out each round).  Every unordered pair
    appears exactly once.  Raises :class:`ValidationError` on duplicate names.
    """
    nodes = _check_nodes(nodes)
    if len(nodes) < 2:
        return []
    ring = nodes + ([None] if len(nodes) % 2 else [])
    n = len(ring)
    fixed, rest = ring[0], ring[1:]
    rounds = []
    for _round in range(n - 1):
        line = [fixed] + rest
        pairs = []
        for i in range(n // 2):
            a, b = line[i], line[n - 1 - i]
            if a is not None and b is not None:
                pairs.append((a, b))
        rounds.append(pairs)
        rest = rest[-1:] + rest[:-1]
    return rounds


def random_matching(nodes, rng=None):
    """One random perfect matching: ``(pairs, leftover)``.

    ``pairs`` is a list of disjoint ``(a, b)``; ``leftover`` is the node left without a partner when N
    is odd (None otherwise); the adaptive scheduler pairs it with a known-good node next round.
    ``rng``: a :class:`random.Random` (seeded for reproducible schedules).
    """
    nodes = _check_nodes(nodes)
    rng = rng or random.Random()
    order = list(nodes)
    rng.shuffle(order)
    leftover = order.pop() if len(order) % 2 else None
    return [(order[i], order[i + 1]) for i in range(0, len(order), 2)], leftover


def tri_ring(nodes):
    """Tri-node ring schedule: nodes in triples (A, B, C) tested A->B, B->C, A->C over three rounds.

    A node failing both its edges of a triple while the third edge passes is a bad interface; a single
    failing edge is a bad link (:func:`localise` draws these conclusions).  Nodes left over after the
    triples (N mod 3) are paired, each round, with the member of a triple that is idle that round.
    Returns a list of rounds of disjoint pairs.  Fewer than three nodes: the one pair, if any.
    """
    nodes = _check_nodes(nodes)
    if len(nodes) < 3:
        return [[tuple(nodes)]] if len(nodes) == 2 else []
    count = len(nodes) // 3
    triples = [nodes[3 * i:3 * i + 3] for i in range(count)]
    leftovers = nodes[3 * count:]
    edges = ((0, 1, 2), (1, 2, 0), (0, 2, 1))  # (sender, receiver, idle) per round
    rounds = []
    for r, (x, y, idle) in enumerate(edges):
        pairs = [(t[x], t[y]) for t in triples]
        for i, extra in enumerate(leftovers):
            t = triples[(i + r) % len(triples)]
            if not any(t[idle] in p for p in pairs):
                pairs.append((extra, t[idle]))
        rounds.append(pairs)
    return rounds


# ----------------------------------------------------------------------------------------------
# Fabric models: which links a pair's traffic crosses
# ----------------------------------------------------------------------------------------------

class Fabric:
    """What a pair test exercises.  Subclasses define :meth:`route` and :meth:`probes`."""

    def route(self, a, b):
        """Link keys (tuple of str) crossed by traffic between ``a`` and ``b``."""
        raise NotImplementedError

    def probes(self, link, candidates):
        """Pairs ``(a, b)`` drawn from ``candidates`` (an iterable of nodes) whose route crosses ``link``."""
        raise NotImplementedError

    def coverage_links(self):
        """Links every complete schedule must exercise at least once (empty: none required)."""
        return ()

    def link_info(self, link):
        """A dict describing ``link`` for reports and the ledger."""
        return {"link": link}

    def components(self, a, b):
        """Every component a test between ``a`` and ``b`` exercises: ``{(INTERFACE, node), (LINK, key)}``."""
        comps = {(INTERFACE, a), (INTERFACE, b)}
        comps.update((LINK, k) for k in self.route(a, b))
        return frozenset(comps)


class PairPathFabric(Fabric):
    """The path between two nodes is one link (no knowledge of switches beyond the node's own cable).

    ``cabling``: optional ``{node: "<leaf>:<port>"}`` (from the twin, one rail); link keys are
    ``"<endpoint>~<endpoint>"`` with endpoints sorted, where an endpoint is the node's cabling or, when
    the twin has none, its name.  Such a link can only be exercised by testing that very pair.
    """

    SEP = "~"

    def __init__(self, cabling=None):
        self.cabling = dict(cabling or {})
        self._pairs = {}

    def endpoint(self, node):
        return self.cabling.get(node) or node

    def route(self, a, b):
        ends = sorted(((self.endpoint(a), a), (self.endpoint(b), b)))
        key = "%s%s%s" % (ends[0][0], self.SEP, ends[1][0])
        self._pairs[key] = (ends[0][1], ends[1][1])
        return (key,)

    def probes(self, link, candidates):
        pair = self._pairs.get(link)
        if pair and pair[0] in candidates and pair[1] in candidates:
            yield pair

    def link_info(self, link):
        pair = self._pairs.get(link)
        info = {"link": link, "kind": "pair_path"}
        if pair:
            info["nodes"] = list(pair)
            info["cabling"] = {n: self.cabling.get(n) for n in pair}
        return info


class LeafSpineFabric(Fabric):
    """Two-tier leaf/spine Clos with deterministic, symmetric ECMP.

    ``leaf_of``: ``{node: leaf name}``; ``spines``: number of spines, each leaf has one uplink cable to
    each spine, keyed ``"<leaf>~spine<NN>"``.  Traffic between nodes on one leaf crosses no uplink;
    between leaves it crosses the uplink of both leaves to spine ``(index(a) + index(b)) mod spines``
    (a stand-in for a flow hash that is symmetric in source and destination, as IB/RoCE fabrics with
    static routes are deterministic per pair).  ``index`` is the node's position in ``leaf_of``.
    """

    def __init__(self, leaf_of, spines):
        if spines < 1:
            raise ValidationError("a leaf/spine fabric needs at least one spine", where="spines")
        self.leaf_of = dict(leaf_of)
        self.spines = int(spines)
        self.index = {n: i for i, n in enumerate(self.leaf_of)}
        self.leaves = sorted(set(self.leaf_of.values()))
        self._by_leaf_residue = {}
        for n, i in self.index.items():
            self._by_leaf_residue.setdefault((self.leaf_of[n], i % self.spines), []).append(n)

    @classmethod
    def uniform(cls, nodes, per_leaf, spines):
        """``nodes`` cabled ``per_leaf`` to a leaf in order (leaf names ``leaf000``...)."""
        return cls({n: "leaf%03d" % (i // per_leaf) for i, n in enumerate(nodes)}, spines)

    def uplink(self, leaf, spine):
        return "%s~spine%02d" % (leaf, spine)

    def spine_for(self, a, b):
        return (self.index[a] + self.index[b]) % self.spines

    def route(self, a, b):
        la, lb = self.leaf_of[a], self.leaf_of[b]
        if la == lb:
            return ()
        s = self.spine_for(a, b)
        return (self.uplink(la, s), self.uplink(lb, s))

    def coverage_links(self):
        return tuple(self.uplink(leaf, s) for leaf in self.leaves for s in range(self.spines))

    def _parse(self, link):
        leaf, spine = link.rsplit("~spine", 1)
        return leaf, int(spine)

    def probes(self, link, candidates):
        leaf, spine = self._parse(link)
        candidates = set(candidates)
        for a in sorted(n for n in candidates if self.leaf_of.get(n) == leaf):
            need = (spine - self.index[a]) % self.spines
            for other in self.leaves:
                if other == leaf:
                    continue
                for b in self._by_leaf_residue.get((other, need), ()):
                    if b in candidates:
                        yield (a, b)

    def link_info(self, link):
        leaf, spine = self._parse(link)
        return {"link": link, "kind": "leaf_spine_uplink", "leaf": leaf, "spine": "spine%02d" % spine}


# ----------------------------------------------------------------------------------------------
# Localisation
# ----------------------------------------------------------------------------------------------

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
    bad = set()
    while True:
        unexplained = [(t, c) for t, c in failing if not (c & bad)]
        newly = set()
        for _t, c in unexplained:
            suspects = c - good
            if len(suspects) == 1:
                newly |= suspects
        if not newly:
            by_comp = {}
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
    interfaces, links, ambiguous = {}, {}, []
    per_node = {}
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


# ----------------------------------------------------------------------------------------------
# Adaptive schedule
# ----------------------------------------------------------------------------------------------

class AdaptiveScheduler:
    """Random perfect matching, then suspects re-paired with known-good nodes until localised.

    Round 1 is :func:`random_matching`.  Each later round (disjoint pairs) holds: every interface that
    is suspect or untested paired with a known-good node over a route of known-good links when one
    exists (a node on the same leaf, with :class:`LeafSpineFabric`); every suspect link probed by two
    known-good nodes whose route crosses it and otherwise only known-good links; every coverage link
    not yet exercised probed the same way.  :meth:`next_round` returns ``[]`` when nothing is left to
    learn.  ``rng``: :class:`random.Random` for reproducible schedules.
    """

    def __init__(self, nodes, fabric=None, rng=None, partner_tries=256):
        self.nodes = _check_nodes(nodes)
        self.fabric = fabric or PairPathFabric()
        self.rng = rng or random.Random()
        self.partner_tries = partner_tries
        self.rounds = 0

    def first_round(self):
        pairs, _leftover = random_matching(self.nodes, self.rng)
        self.rounds = 1
        return pairs

    def _clean(self, a, b, good):
        return all((LINK, k) in good for k in self.fabric.route(a, b))

    def next_round(self, tests):
        """The next round's pairs given every :class:`PairTest` so far (``[]``: done)."""
        if self.rounds == 0:
            return self.first_round()
        loc = localise(tests, self.fabric, self.nodes)
        good = loc.good
        tested = {frozenset((t.a, t.b)) for t in tests if t.status in (OK, FAIL)}
        errored = {frozenset((t.a, t.b)) for t in tests if t.status == ERROR}
        free_good = [n for n in self.nodes if (INTERFACE, n) in good]
        self.rng.shuffle(free_good)
        free = set(free_good)
        busy = set()
        pairs = []

        def take(a, b):
            pairs.append((a, b))
            busy.update((a, b))
            free.discard(a)
            free.discard(b)

        suspects = [n for n in self.nodes if loc.interfaces[n]["verdict"] in ("ambiguous", "untested")]
        for x in suspects:
            if x in busy:
                continue
            choice, fallback, tries = None, None, 0
            for g in free_good:
                if g not in free or g == x or frozenset((x, g)) in tested | errored:
                    continue
                tries += 1
                if self._clean(x, g, good):
                    choice = g
                    break
                if fallback is None:
                    fallback = g
                if tries >= self.partner_tries:
                    break
            choice = choice or fallback
            if choice is not None:
                take(x, choice)

        # A coverage link is settled once it is good or convicted; one seen only in failing tests that
        # another component explains is still unknown (a fault could hide behind the other fault).
        wanted = [k for k, v in loc.links.items() if v["verdict"] == "ambiguous"]
        wanted += [k for k in self.fabric.coverage_links()
                   if (LINK, k) not in good and (LINK, k) not in loc.bad and k not in loc.links]
        for link in wanted:
            best, fallback, tries = None, None, 0
            for a, b in self.fabric.probes(link, free):
                if frozenset((a, b)) in tested:
                    continue
                tries += 1
                others = [k for k in self.fabric.route(a, b) if k != link]
                if all((LINK, k) in good for k in others):
                    best = (a, b)
                    break
                if fallback is None:
                    fallback = (a, b)
                if tries >= self.partner_tries:
                    break
            pick = best or fallback
            if pick:
                take(*pick)
        if pairs:
            self.rounds += 1
        return pairs


def run_schedule(nodes, run_round, schedule="adaptive", fabric=None, seed=None, max_rounds=8):
    """Drive a schedule to the end and localise.

    ``run_round``: ``callable(round_number, pairs, tests_so_far) -> every test so far`` (the transport
    appends the round's :class:`PairTest` and may re-judge all of them, see :func:`judge`).  ``schedule``: ``adaptive``, ``round_robin`` or ``tri_ring``.
    ``max_rounds`` bounds the adaptive schedule (what is unresolved then is ambiguous).
    Returns ``{"rounds": int, "tests": [PairTest], "localisation": Localisation, "schedule": str}``.
    """
    nodes = _check_nodes(nodes)
    fabric = fabric or PairPathFabric()
    tests = []
    if schedule in ("round_robin", "tri_ring"):
        plan = round_robin(nodes) if schedule == "round_robin" else tri_ring(nodes)
        for number, pairs in enumerate(plan, 1):
            tests = run_round(number, pairs, tests)
        rounds = len(plan)
    elif schedule == "adaptive":
        sched = AdaptiveScheduler(nodes, fabric, random.Random(seed))
        pairs = sched.first_round()
        while pairs:
            tests = run_round(sched.rounds, pairs, tests)
            if sched.rounds >= max_rounds:
                break
            pairs = sched.next_round(tests)
        rounds = sched.rounds
    else:
        raise ValidationError("unknown schedule %r (adaptive, round_robin, tri_ring)" % schedule,
                              where="schedule")
    return {"rounds": rounds, "tests": tests, "schedule": schedule,
            "localisation": localise(tests, fabric, nodes)}


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


# ----------------------------------------------------------------------------------------------
# Ledger view (pure): per-node check results and per-link events
# ----------------------------------------------------------------------------------------------

CHECK_INTERFACE = "fabric_interface"
EVENT_LINK = "fabric_link"


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
    errors = {}
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
            res = {"status": "pass", "reason": "passed with %s" % ", ".join(partners), "remediation": ""}
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
