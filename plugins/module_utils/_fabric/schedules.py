# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fabric schedules: which disjoint node pairs are tested together in each round (pure: no I/O, no clock).

* :func:`round_robin`: the circle method, N-1 rounds of N/2 disjoint pairs covering every pair once
  (N rounds with one bye each for odd N); Microsoft SuperBench ``pattern: pair-wise``
  (``gen_traffic_pattern_config.py::gen_pair_wise_config``), ../shared/reference/numbers.md section 6.
* :func:`random_matching`: one random perfect matching; with :class:`AdaptiveScheduler` the suspects of
  each round are re-paired with known-good nodes (Google Cluster Health Scanner ``PAIRING_MODE: random``,
  ``nccl_runner.py::generate_index_pairs``).
* :func:`tri_ring`: the tri-node ring A->B, B->C, A->C in three rounds over triples of nodes.

:func:`run_schedule` drives one of them to the end and localises (:func:`._fabric.localise.localise`).
"""

from __future__ import annotations

import random

from .._core.errors import ValidationError
from .localise import localise
from .pairs import ERROR, FAIL, INTERFACE, LINK, OK, PairPathFabric, PairTest


def check_nodes(nodes):
    """``nodes`` as a list; :class:`ValidationError` naming any duplicate."""
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
    nodes = check_nodes(nodes)
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
    nodes = check_nodes(nodes)
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
    nodes = check_nodes(nodes)
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
        self.nodes = check_nodes(nodes)
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
        busy: set[str] = set()
        pairs: list[tuple[str, str]] = []

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
    nodes = check_nodes(nodes)
    fabric = fabric or PairPathFabric()
    tests: list[PairTest] = []
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
