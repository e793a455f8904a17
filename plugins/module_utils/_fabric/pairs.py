# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fabric pair tests and the fabric models they exercise (pure: no I/O, no clock).

A :class:`PairTest` is one measurement between two nodes; the components it exercises are the two node
interfaces and the links the :class:`Fabric` says its route crosses.

A "link" is what the :class:`Fabric` says a route crosses.  :class:`PairPathFabric` (the default; what
the lab and a twin with only node-to-leaf cabling can say) makes the path between two nodes one link,
keyed by the two endpoints' twin cabling ``"<leafA>:<portA>~<leafB>:<portB>"``.
:class:`LeafSpineFabric` models a two-tier Clos with deterministic ECMP, so a bad leaf-spine cable is a
link shared by many pairs (used by the simulation bench and where the spine layout is known).
"""

from __future__ import annotations

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
    value: float | None = None
    unit: str = ""
    round: int = 0
    reason: str = ""
    evidence: dict = field(default_factory=dict)

    def to_dict(self):
        return asdict(self)


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
        self._by_leaf_residue: dict[tuple[str, int], list[str]] = {}
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
