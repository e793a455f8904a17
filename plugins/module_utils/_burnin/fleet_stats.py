# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Thresholds from the fleet: each numeric burn-in result beside the fleet's own distribution for its SKU.

For every number a check observed (``observed`` flattened to dotted paths, e.g. ``busbw_gbps`` or
``final.power_w``), the peers are the latest *passing* result of the same check on the other nodes of the
same SKU in the ledger (``Ledger.current_results``, the public API; the SKU is the ``sku`` a result's
evidence carries).  With at least :data:`MIN_PEERS` peers, the modified z-score of Iglewicz & Hoaglin
(1993, "How to Detect and Handle Outliers", ASQC Basic References in Quality Control vol. 16):
``M = 0.6745 (x - median) / MAD``, MAD the median absolute deviation of the peers, flags ``|M| > 3.5``.
A MAD of 0 leaves M undefined: nothing is flagged from it.

A flag is a *warning* in the result's evidence (``evidence.fleet``) that the report shows; it never changes
a status: the SKU's floor decides the gate.
"""

from __future__ import annotations

import os
import statistics
from typing import Any, Iterable, Sequence

from .._core.gate import PASS, CheckResult
from .._core.ledger import default_ledger_path, open_ledger
from .plan import STAGE

Z_THRESHOLD = 3.5           # Iglewicz & Hoaglin 1993
MAD_SCALE = 0.6745          # E[MAD] = 0.6745 sigma for normal data (Iglewicz & Hoaglin 1993)
MIN_PEERS = 5               # our choice: below this the median and MAD of the fleet say too little
_MAX_DEPTH = 3
_SKIP = ("rc", "level", "attempt", "round", "nranks", "index", "count")


def numeric_values(observed: Any, prefix: str = "", depth: int = 0) -> dict[str, float]:
    """``{dotted path: float}`` of the numbers in ``observed`` (nested dicts up to 3 levels; lists, booleans,
    ``None`` and bookkeeping keys such as ``rc``/``level``/``count`` are skipped)."""
    out: dict[str, float] = {}
    if not isinstance(observed, dict) or depth > _MAX_DEPTH:
        return out
    for key, value in observed.items():
        path = "%s.%s" % (prefix, key) if prefix else str(key)
        if str(key) in _SKIP or isinstance(value, bool):
            continue
        if isinstance(value, (int, float)):
            out[path] = float(value)
        elif isinstance(value, dict):
            out.update(numeric_values(value, path, depth + 1))
    return out


def modified_z(value: float, peers: Sequence[float]) -> dict[str, Any]:
    """``{"z": float|None, "median", "mad", "n"}`` of ``value`` against ``peers`` (Iglewicz & Hoaglin 1993);
    ``z`` is None when the MAD is 0.  Raises :class:`ValueError` on an empty ``peers``."""
    if not peers:
        raise ValueError("no peers to compare with")
    median = statistics.median(peers)
    mad = statistics.median([abs(p - median) for p in peers])
    z = None if mad == 0 else MAD_SCALE * (value - median) / mad
    return {"z": None if z is None else round(z, 3), "median": median, "mad": mad, "n": len(peers)}


def fleet_comparison(result: CheckResult, sku: str, fleet: Iterable[CheckResult], min_peers: int = MIN_PEERS,
                     threshold: float = Z_THRESHOLD) -> dict[str, Any]:
    """Compare ``result``'s numbers with the passing results of the same check on other nodes of ``sku``.

    ``fleet``: ledger rows (the latest per node and check, as ``current_results`` gives them).  Returns
    ``{"sku", "peers": n, "compared": {path: {value, median, mad, z, n}}, "warnings": [str]}``; a path with
    fewer than ``min_peers`` peer values is not compared, and an empty ``sku`` has no fleet.
    """
    # without a SKU name there is no fleet to belong to
    peers = [r for r in fleet if sku and r.check == result.check and r.node != result.node and r.status == PASS
             and (r.evidence or {}).get("sku") == sku]
    values = numeric_values(result.observed)
    compared: dict[str, dict[str, Any]] = {}
    warnings = []
    for path, value in sorted(values.items()):
        peer_values = [v for v in (numeric_values(p.observed).get(path) for p in peers) if v is not None]
        if len(peer_values) < min_peers:
            continue
        stats = dict(modified_z(value, peer_values), value=value)
        compared[path] = stats
        if stats["z"] is not None and abs(stats["z"]) > threshold:
            warnings.append("%s %s = %.4g is a fleet outlier for %s (modified z %.1f; fleet median %.4g, MAD %.3g, "
                            "%d nodes)" % (result.check, path, value, sku, stats["z"], stats["median"], stats["mad"],
                                           stats["n"]))
    return {"sku": sku, "peers": len(peers), "compared": compared, "warnings": warnings}


def annotate(results: Sequence[CheckResult], sku: str, fleet: Iterable[CheckResult]) -> list[str]:
    """In place: each result's evidence gets ``sku`` and, where it has numbers to compare, ``fleet``
    (:func:`fleet_comparison`).  Statuses are left alone.  Returns every warning."""
    fleet = list(fleet)
    out: list[str] = []
    for res in results:
        res.evidence = dict(res.evidence or {}, sku=sku)
        comparison = fleet_comparison(res, sku, fleet)
        if comparison["compared"]:
            res.evidence["fleet"] = comparison
            out.extend(comparison["warnings"])
    return out


def burnin_fleet(params: dict[str, Any], check_mode: bool = False) -> dict[str, Any]:
    """Logic of the ``burnin_fleet`` module: ``params`` ``{ledger, node, sku, checks}`` (``checks`` as
    ``burnin_run`` returns them).  Returns ``{changed: False, checks: [annotated check dicts], outliers: [str],
    warnings: [str], peers_read: int}`` (``warnings``, the same sentences, is Ansible's own key: the play prints
    them); a ledger that does not exist yet has no fleet (nothing compared).  Reads only."""
    node, sku = params["node"], params["sku"]
    rows = [CheckResult(node=node, stage=STAGE, check=c["name"], status=c["status"], observed=c.get("observed"),
                        evidence=dict(c.get("evidence") or {})) for c in params["checks"]]
    location = params.get("ledger") or default_ledger_path()
    fleet: list[CheckResult] = []
    if "://" in location or os.path.exists(location):
        ledger = open_ledger(location)
        try:
            fleet = ledger.current_results(stage=STAGE)
        finally:
            ledger.close()
    warnings = annotate(rows, sku, fleet)
    checks = [dict(c, evidence=r.evidence) for c, r in zip(params["checks"], rows)]
    return {"changed": False, "checks": checks, "outliers": warnings, "warnings": list(warnings),
            "peers_read": len(fleet)}
