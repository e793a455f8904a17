# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Straggler ranks: per-rank step times from the training log, judged against the rank's peers.

In data-parallel training every rank waits for the slowest at each gradient all-reduce, so one slow GPU costs
the whole job its throughput while every rank reports the same wall-clock step.  The rank's own compute time
up to the collective shows which one it is.  The smoke workload prints, on every rank, per step::

    rank_step: {"rank": 3, "node": "lab2", "step": 4, "step_s": 0.21, "compute_s": 0.19}

(``compute_s``: forward and loss, before DDP's all-reduce hooks, on a GPU in wall time, on a CPU in the rank's own
CPU time so that a rank another process kept off a shared core is not called slow; ``step_s``: the whole step).  A rank is a
straggler when its median ``compute_s`` over the steps after warm-up is beyond BOTH rules against the median of
every rank's median (the peers' median):

* modified z-score (Iglewicz & Hoaglin 1993, ``0.6745 (x - median) / MAD``) above ``z_threshold``; and
* slower than the peers' median by more than ``min_slowdown_pct`` percent: a MAD of microseconds between
  healthy ranks would otherwise make any jitter a z of 10.

Both come from the SKU's ``validation.stragglers`` (defaults 3.5, the same cut-off as the thermal rule, and
10 %, a suggested value).  Needs at least three ranks: with two, the median is their mean and neither is an
outlier against it.
"""

from __future__ import annotations

import json
import re
import statistics
from typing import Any, Dict, List, Optional

DEFAULTS = {"z_threshold": 3.5, "min_slowdown_pct": 10.0}
MAD_SCALE = 0.6745  # Iglewicz & Hoaglin 1993
_RANK_STEP = re.compile(r"rank_step:\s*(\{.*?\})\s*$")


def parse_rank_steps(text: str) -> List[Dict[str, Any]]:
    """Every ``rank_step:`` record of a log (any prefix before it), in log order; malformed lines skipped."""
    out = []
    for line in text.splitlines():
        match = _RANK_STEP.search(line)
        if not match:
            continue
        try:
            rec = json.loads(match.group(1))
        except ValueError:
            continue
        if isinstance(rec, dict) and "rank" in rec and ("compute_s" in rec or "step_s" in rec):
            out.append(rec)
    return out


def per_rank(records: List[Dict[str, Any]], warmup: int = 1) -> Dict[int, Dict[str, Any]]:
    """``{rank: {node, median_s, steps, step_s: [..]}}`` from :func:`parse_rank_steps` records after ``warmup``.

    The time is ``compute_s`` where printed, else ``step_s`` (seconds).
    """
    ranks: Dict[int, Dict[str, Any]] = {}
    for rec in records:
        if int(rec.get("step", warmup + 1)) <= warmup:
            continue
        item = ranks.setdefault(int(rec["rank"]), {"node": rec.get("node") or "", "step_s": []})
        item["step_s"].append(float(rec.get("compute_s", rec.get("step_s"))))
    for item in ranks.values():
        item["median_s"] = statistics.median(item["step_s"])
        item["steps"] = len(item["step_s"])
    return ranks


def find_stragglers(ranks: Dict[int, Dict[str, Any]], z_threshold: Optional[float] = None,
                    min_slowdown_pct: Optional[float] = None) -> List[Dict[str, Any]]:
    """Straggler ranks: ``[{rank, node, median_s, peer_median_s, slowdown_pct, modified_z, reason}]``.

    ``ranks``: :func:`per_rank` output.  Thresholds: module docstring.
    """
    z_cut = DEFAULTS["z_threshold"] if z_threshold is None else float(z_threshold)
    margin = DEFAULTS["min_slowdown_pct"] if min_slowdown_pct is None else float(min_slowdown_pct)
    if len(ranks) < 3:
        return []
    medians = {rank: item["median_s"] for rank, item in ranks.items()}
    peer = statistics.median(medians.values())
    mad = statistics.median(abs(v - peer) for v in medians.values())
    out = []
    for rank, value in sorted(medians.items()):
        slowdown = 100.0 * (value - peer) / peer if peer > 0 else 0.0
        # MAD 0 (most ranks identical): any rank above the median is infinitely far out; the margin decides.
        z = MAD_SCALE * (value - peer) / mad if mad > 0 else (float("inf") if value > peer else 0.0)
        if z > z_cut and slowdown > margin:
            out.append({"rank": rank, "node": ranks[rank]["node"], "median_s": round(value, 6),
                        "peer_median_s": round(peer, 6), "slowdown_pct": round(slowdown, 1),
                        "modified_z": None if z == float("inf") else round(z, 2),
                        "reason": "rank %d on %s: median step %.4f s vs peers' %.4f s (+%.1f %%, modified z %s > %.1f)"
                                  % (rank, ranks[rank]["node"] or "?", value, peer, slowdown,
                                     "inf" if z == float("inf") else "%.1f" % z, z_cut)})
    return out
