# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Entry point of the ``telemetry_outliers`` module: read per-GPU telemetry from one source, find outliers."""

from __future__ import annotations

import os
from typing import Any, Dict

from .._core.errors import ValidationError, ToolNotFoundError
from . import outliers as _outliers


def run_outliers(p: Dict[str, Any]) -> Dict[str, Any]:
    """telemetry_outliers: ``{"status", "reason", "outliers", "nodes", "gpus", "samples"}``.

    A source that cannot be read on this host (no GPU, no file) is ``not_run`` with the reason.
    """
    try:
        if p["source"] == "file":
            if not p.get("path"):
                raise ValidationError("source=file needs path", where="path")
            trace = _outliers.load_file(p["path"], node=p.get("node"))
        elif p["source"] == "dcgm":
            if not p.get("url"):
                raise ValidationError("source=dcgm needs url", where="url")
            import requests
            url, verify = p["url"], p["validate_certs"]

            def fetch():
                resp = requests.get(url, timeout=10, verify=verify)
                resp.raise_for_status()
                return resp.text
            try:
                trace = _outliers.scrape_dcgm(fetch, p["samples"], p["interval_s"], node=p.get("node"), where=url)
            except requests.RequestException as exc:
                raise ToolNotFoundError("DCGM exporter not reachable: %s" % exc, where=url)
        else:
            trace = _outliers.sample_local(p["samples"], p["interval_s"], p.get("node") or os.uname()[1])
    except ToolNotFoundError as exc:
        return {"status": "not_run", "reason": str(exc), "outliers": [], "nodes": [], "gpus": 0, "samples": 0}
    if p.get("nodes"):
        wanted = set(p["nodes"])
        keep = [i for i, gpu in enumerate(trace.gpus) if gpu[0] in wanted]
        trace = _outliers.Telemetry([trace.gpus[i] for i in keep], {m: a[keep] for m, a in trace.values.items()},
                                    source=trace.source)
    found = _outliers.find_outliers(trace, z_threshold=p["z_threshold"], delta_c=p["delta_c"],
                                    max_temp_margin_c=p["max_temp_margin_c"],
                                    max_operating_temp_c=p.get("max_operating_temp_c"))
    status = "fail" if found else "pass"
    reason = "; ".join(o["reason"] for o in found) or "no outlier among %d GPU(s)" % len(trace.gpus)
    return {"status": status, "reason": reason, "outliers": found, "nodes": _outliers.outlier_nodes(found),
            "gpus": len(trace.gpus), "samples": trace.samples}
