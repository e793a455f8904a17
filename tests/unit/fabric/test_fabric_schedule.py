"""Schedules: circle-method round-robin, random perfect matching, tri-node ring."""

import itertools
import random

import pytest

from ansible_collections.symphony.cluster.plugins.module_utils._fabric import schedules as S
from ansible_collections.symphony.cluster.plugins.module_utils._core.errors import ValidationError


def _disjoint(rounds):
    for pairs in rounds:
        seen = [n for p in pairs for n in p]
        assert len(seen) == len(set(seen))


@pytest.mark.parametrize("n", [2, 4, 7, 8, 16])
def test_round_robin_covers_every_pair_once(n):
    nodes = ["n%d" % i for i in range(n)]
    rounds = S.round_robin(nodes)
    assert len(rounds) == (n - 1 if n % 2 == 0 else n)
    _disjoint(rounds)
    pairs = [frozenset(p) for r in rounds for p in r]
    assert len(pairs) == n * (n - 1) // 2
    assert set(pairs) == {frozenset(p) for p in itertools.combinations(nodes, 2)}


def test_round_robin_1024_has_1023_rounds_of_512_pairs():
    rounds = S.round_robin(list(range(1024)))
    assert len(rounds) == 1023
    assert {len(r) for r in rounds} == {512}


def test_duplicate_nodes_are_rejected():
    with pytest.raises(ValidationError, match="duplicates: a"):
        S.round_robin(["a", "b", "a"])


def test_random_matching_is_perfect_and_seeded():
    nodes = ["n%d" % i for i in range(11)]
    pairs, left = S.random_matching(nodes, random.Random(7))
    assert len(pairs) == 5 and left in nodes
    assert sorted([n for p in pairs for n in p] + [left]) == sorted(nodes)
    assert S.random_matching(nodes, random.Random(7)) == (pairs, left)


def test_tri_ring_edges_and_leftovers():
    rounds = S.tri_ring(["A", "B", "C"])
    assert rounds == [[("A", "B")], [("B", "C")], [("A", "C")]]
    rounds = S.tri_ring(["A", "B", "C", "D", "E", "F", "G"])
    _disjoint(rounds)
    assert [("A", "B"), ("D", "E")] == rounds[0][:2]
    # the leftover G is tested in every round with the idle member of a triple
    assert all(any("G" in p for p in r) for r in rounds)
    assert S.tri_ring(["A", "B"]) == [[("A", "B")]]
