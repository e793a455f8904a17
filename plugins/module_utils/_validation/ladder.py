# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The scale ladder: which node counts each (recipe, precision) target runs at.

Scales are the SKU's ``mfu_targets[].nodes`` plus a generated ladder 1, 2, 4, ... up to the pool (the active
nodes), capped by ``ladder_max_nodes`` (the role's ``cluster_validation_ladder_max_nodes``; 0 turns the ladder
off).  A target without ``nodes`` runs on the whole pool, as before.  A ladder rung is judged against the
target of its recipe and precision whose ``nodes`` is the largest not above the rung (else the smallest):
throughput per device falls as the job grows, so a floor set at N nodes is the stricter one below N and the
closest one above it.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence


def ladder(pool: int, cap: int) -> List[int]:
    """Powers of two from 1 up to ``min(pool, cap)``; empty when ``cap`` is 0."""
    top = min(int(pool), int(cap))
    out, n = [], 1
    while n <= top:
        out.append(n)
        n *= 2
    return out


def expand(targets: Sequence[Dict[str, Any]], pool: int, cap: int) -> List[Dict[str, Any]]:
    """Targets with an explicit ``nodes`` for every scale to run; ``ladder`` marks the generated rungs.

    ``targets``: SKU ``validation.mfu_targets``-shaped dicts; ``pool``: active nodes.  A target without
    ``nodes`` keeps ``nodes: None`` (the whole pool, whatever it is at that attempt).
    """
    out: List[Dict[str, Any]] = []
    groups: Dict[tuple, List[Dict[str, Any]]] = {}
    for target in targets or []:
        groups.setdefault((target["recipe"], target["precision"]), []).append(target)
        out.append(dict(target))
    for group in groups.values():
        sized = sorted((t for t in group if t.get("nodes")), key=lambda t: t["nodes"])
        have = {t.get("nodes") for t in group}
        for rung in ladder(pool, cap):
            # The whole-pool target already runs at the pool's size.
            if rung in have or (None in have and rung == pool):
                continue
            below = [t for t in sized if t["nodes"] <= rung]
            base: Optional[Dict[str, Any]] = below[-1] if below else (sized[0] if sized else group[0])
            out.append(dict(base, nodes=rung, ladder=True))
    return out
