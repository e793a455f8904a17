# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleet-audit page beside the handoff report: drift table, health events, exercise timings with a timeline.

``fleet_audit.html`` (self-contained, plotly.js inlined, in the handoff report's colours), ``fleet_audit.json``
(the same data) and ``fleet_audit_junit.xml`` (the handoff report's JUnit of the ``fleet_audit`` stage only).
"""

from __future__ import annotations

import html
import json
import os
import time
from typing import Any, Dict, Mapping, Sequence

from .._core.errors import ReportError
from .._core.ledger import Ledger
from .._core.report import collect, render_junit
from .._core.report_html import HAS_PLOTLY, STATUS_COLOURS

try:
    import plotly.graph_objects as go
    import plotly.offline
except ImportError:  # HAS_PLOTLY says so; render refuses without it
    pass

STAGE = "fleet_audit"
FILES = {"html": "fleet_audit.html", "json": "fleet_audit.json", "junit": "fleet_audit_junit.xml"}


def audit_data(ledger: Ledger, reports: Mapping[str, Mapping[str, Any]]) -> Dict[str, Any]:
    """``{generated, nodes: {host: {gate, reason, drift, health, exercise}}, matrix}`` for the page and the JSON.

    ``reports``: ``{host: state.report(...)}`` (drift table, exercise timings).
    """
    gates = ledger.current_gates()
    handoff = collect(ledger)
    nodes: Dict[str, Any] = {}
    for host, rep in sorted(reports.items()):
        gate = gates.get(host, {}).get(STAGE)
        health = [dict(check=c, **res) for c, res in handoff["matrix"].get(host, {}).get(STAGE, {}).items()
                  if c in ("kernel_log", "dcgm_xid", "gpu_counters", "ib_counters", "bmc_sel")]
        nodes[host] = {"gate": gate.status if gate else None, "reason": gate.reason if gate else "",
                       "drift": list(rep.get("drift") or []), "health": health, "exercise": rep.get("exercise")}
    matrix = {h: {STAGE: handoff["matrix"].get(h, {}).get(STAGE, {})} for h in nodes}
    return {"generated": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "nodes": nodes, "matrix": matrix}


def _cell(status: Any) -> str:
    colour = STATUS_COLOURS.get(str(status), "#90a4ae")
    return '<td style="background:%s;color:#fff">%s</td>' % (colour, html.escape(str(status)))


def _rows(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    head = "".join("<th>%s</th>" % html.escape(h) for h in headers)
    body = "".join("<tr>%s</tr>" % "".join(c if c.startswith("<td") else "<td>%s</td>" % c for c in row)
                   for row in rows)
    return "<table><thead><tr>%s</tr></thead><tbody>%s</tbody></table>" % (head, body)


def render_page(data: Mapping[str, Any]) -> str:
    """The HTML page; raises :class:`ReportError` without plotly (as the handoff report does)."""
    if not HAS_PLOTLY:
        raise ReportError("the plotly Python library is required for the HTML report", where="fleet_audit report")
    esc = html.escape
    parts = ["<!DOCTYPE html><html><head><meta charset='utf-8'><title>symphony.cluster fleet audit</title>",
             "<style>body{font-family:sans-serif;margin:1.5em}table{border-collapse:collapse;margin:1em 0}"
             "td,th{border:1px solid #ccc;padding:3px 6px;font-size:13px}</style>",
             "<script>%s</script></head><body>" % plotly.offline.get_plotlyjs(),
             "<h1>Fleet audit</h1><p>generated %s</p>" % esc(data["generated"])]
    nodes = data["nodes"]
    parts.append("<h2>Gates</h2>" + _rows(["node", "fleet_audit gate", "reason"], [
        [esc(h), _cell(n["gate"]), esc(n["reason"] or "")] for h, n in nodes.items()]))
    drift = [(h, d) for h, n in nodes.items() for d in n["drift"]]
    parts.append("<h2>Drift</h2>" + (_rows(["node", "check", "component", "expected", "found", "since", "first run"], [
        [esc(h), esc(d["check"]), esc(d["component"]), esc(json.dumps(d["expected"])), esc(json.dumps(d["found"])),
         esc(time.strftime("%Y-%m-%d %H:%M:%SZ", time.gmtime(d["since"])) if d.get("since") else "?"),
         esc(str(d["first_run"]))] for h, d in drift]) if drift else "<p>no drift</p>"))
    parts.append("<h2>Health events</h2>" + _rows(["node", "check", "status", "reason"], [
        [esc(h), esc(c["check"]), _cell(c["status"]), esc(c.get("reason") or "")]
        for h, n in nodes.items() for c in n["health"]]))
    timed = {h: n["exercise"] for h, n in nodes.items() if (n["exercise"] or {}).get("injected_at")}
    parts.append("<h2>Exercise: detect, drain, replace, return</h2>")
    if timed:
        parts.append(_rows(["node", "detect (s)", "drain (s)", "replace (s)", "return (s)", "not reached"], [
            [esc(h)] + [esc("—" if t.get(k) is None else "%.1f" % t[k])
                        for k in ("detect_s", "drain_s", "replace_s", "return_s")] + [esc(", ".join(t["missing"]))]
            for h, t in timed.items()]))
        fig = go.Figure()
        for h, t in timed.items():
            steps = [{"step": "inject", "s": 0.0}] + list(t["steps"])
            fig.add_trace(go.Scatter(x=[s["s"] for s in steps], y=[h] * len(steps), mode="lines+markers+text",
                                     text=[s["step"] for s in steps], textposition="top center", name=h))
        fig.update_layout(xaxis_title="seconds after the injection", height=200 + 40 * len(timed))
        parts.append(fig.to_html(full_html=False, include_plotlyjs=False))
    else:
        parts.append("<p>no fault injected</p>")
    parts.append("</body></html>")
    return "".join(parts)


def write_audit_report(ledger: Ledger, out_dir: str, reports: Mapping[str, Mapping[str, Any]]) -> Dict[str, str]:
    """Write the three files into ``out_dir``; returns their paths."""
    data = audit_data(ledger, reports)
    # rendered before anything is written, so a missing plotly leaves no half-written report behind
    texts = {"json": json.dumps(data, indent=1, sort_keys=True, default=str), "junit": render_junit(data),
             "html": render_page(data)}
    os.makedirs(out_dir, exist_ok=True)
    paths = {}
    for key, text in texts.items():
        paths[key] = os.path.join(out_dir, FILES[key])
        with open(paths[key], "w", encoding="utf-8") as handle:
            handle.write(text)
    return paths
