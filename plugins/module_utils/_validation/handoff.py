# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The handoff certificate: what the customer receives with the cluster.

JSON (machine-readable) and text (human-readable) built from a validation result
(:func:`_evict.run_validation`) and the ledger's NCCL results.  It lists MFU per
scale and precision with the FLOPs convention named, NCCL results, outliers found
and actions taken, and the final node list.  No secret is ever part of it: only
node names, figures and reasons.
"""

from __future__ import annotations

import json
import os
import time

from .._core.errors import SymphonyError, ValidationError

CERTIFICATE_VERSION = 1


def nccl_from_ledger(ledger, nodes=None):
    """NCCL results recorded by the fabric/burn-in stages: every current result whose check name mentions nccl.

    Returns ``[{node, stage, check, status, reason, observed, busbw_gbps?}]``.
    """
    out = []
    for res in ledger.current_results():
        if "nccl" not in res.check.lower():
            continue
        if nodes is not None and res.node not in nodes:
            continue
        ev = res.evidence or {}
        item = {"node": res.node, "stage": res.stage, "check": res.check, "status": res.status,
                "reason": res.reason, "observed": res.observed}
        for key in ("busbw_gbps", "avg_busbw_gbps", "collective", "nodes"):
            if key in ev:
                item[key] = ev[key]
        out.append(item)
    return out


def build_certificate(result, cluster, sku, run_id, nccl=(), issued=None):
    """The certificate dict.

    ``result``: :func:`_evict.run_validation` output.  MFU rows come from the last
    attempt: ``{scale_nodes, precision, recipe, convention, mfu_pct, target_pct, met,
    reported_mfu_pct, disagreement_pt, disagrees, tokens_per_s_per_device,
    peak_tflops, peak_source, job_id}``.
    """
    if not result.get("attempts"):
        raise ValidationError("the validation result has no attempt", where="result")
    last = result["attempts"][-1]
    mfu_rows = []
    for run in last["runs"]:
        mfu = run.get("mfu") or {}
        mfu_rows.append({
            "scale_nodes": run["scale_nodes"], "precision": run["precision"], "recipe": run["recipe"],
            "convention": mfu.get("convention", run.get("convention")), "mfu_pct": run.get("mfu_pct"),
            "target_pct": run.get("target_pct"), "met": run["status"] == "pass", "status": run["status"],
            "reason": run["reason"], "reported_mfu_pct": mfu.get("reported_mfu_pct"),
            "disagreement_pt": mfu.get("disagreement_pt"), "disagrees": bool(mfu.get("disagrees")),
            "tokens_per_s_per_device": mfu.get("tokens_per_s_per_device"), "peak_tflops": mfu.get("peak_tflops"),
            "peak_source": mfu.get("peak_source"), "job_id": (run.get("job") or {}).get("job_id"),
        })
    return {
        "certificate_version": CERTIFICATE_VERSION,
        "cluster": cluster, "sku": sku, "run_id": run_id,
        "issued": issued or time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "status": result["status"], "reason": result["reason"],
        "attempts": len(result["attempts"]),
        "mfu": mfu_rows,
        "nccl": list(nccl),
        "outliers": result.get("outliers", []),
        "telemetry": result.get("telemetry", "analysed"),
        "actions": result.get("actions", []),
        "evicted": result.get("evicted", []),
        "replacements": result.get("replacements", []),
        "final_nodes": result["final_nodes"],
    }


def render_text(cert):
    """Human-readable certificate (plain text, fixed-width tables)."""
    lines = [
        "HANDOFF CERTIFICATE  cluster %s  SKU %s" % (cert["cluster"], cert["sku"]),
        "issued %s  run %s" % (cert["issued"], cert["run_id"]),
        "RESULT: %s  (%s; %d attempt(s))" % (cert["status"].upper(), cert["reason"], cert["attempts"]),
        "",
        "MFU per scale and precision",
        "  %-6s %-9s %-11s %-12s %8s %8s %-5s %s" % (
            "nodes", "precision", "recipe", "convention", "MFU %", "target", "met", "recipe's own MFU"),
    ]
    for row in cert["mfu"]:
        own = "-"
        if row["reported_mfu_pct"] is not None:
            own = "%.2f %% (%+.2f pt%s)" % (
                row["reported_mfu_pct"], row["disagreement_pt"] or 0.0, ", DISAGREES > 1 pt" if row["disagrees"] else "")
        lines.append("  %-6s %-9s %-11s %-12s %8s %8s %-5s %s" % (
            row["scale_nodes"], row["precision"], row["recipe"], row["convention"] or "-",
            "-" if row["mfu_pct"] is None else "%.2f" % row["mfu_pct"],
            "-" if row["target_pct"] is None else "%.2f" % row["target_pct"], "yes" if row["met"] else "NO", own))
        if row.get("peak_tflops"):
            lines.append("         peak %.4g TFLOP/s per device (%s)" % (row["peak_tflops"], row["peak_source"] or "-"))
    lines += ["", "NCCL results"]
    if cert["nccl"]:
        for item in cert["nccl"]:
            lines.append("  %-12s %-24s %-8s %s" % (item["node"], item["check"], item["status"], item["reason"]))
    else:
        lines.append("  none recorded in the ledger")
    lines += ["", "Telemetry outliers (%s)" % cert["telemetry"]]
    lines += ["  attempt %s: %s" % (o.get("attempt", "?"), o["reason"]) for o in cert["outliers"]] or ["  none"]
    lines += ["", "Actions taken"]
    lines += ["  - %s" % a for a in cert["actions"]] or ["  none"]
    lines += ["", "Final node list (%d)" % len(cert["final_nodes"]), "  " + ", ".join(cert["final_nodes"]), ""]
    return "\n".join(lines)


def write_certificate(cert, out_dir):
    """Write ``handoff-certificate.json`` and ``handoff-certificate.txt``; returns both paths (normalised, as
    the ledger event and the report show them)."""
    out_dir = os.path.normpath(out_dir)
    try:
        os.makedirs(out_dir, exist_ok=True)
        json_path = os.path.join(out_dir, "handoff-certificate.json")
        text_path = os.path.join(out_dir, "handoff-certificate.txt")
        with open(json_path, "w", encoding="utf-8") as handle:
            json.dump(cert, handle, indent=2, sort_keys=True, default=str)
            handle.write("\n")
        with open(text_path, "w", encoding="utf-8") as handle:
            handle.write(render_text(cert))
    except OSError as exc:
        raise SymphonyError("cannot write the handoff certificate: %s" % exc.strerror, where=out_dir)
    return json_path, text_path
