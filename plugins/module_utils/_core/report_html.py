# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The handoff report's HTML page, drawn from :func:`.report.collect`'s data.

One self-contained file: charts are plotly figures with plotly.js inlined once, so
the page opens with no network access.
"""

from __future__ import annotations

import html
import json
from typing import Any, Dict, List, Optional, Sequence, Tuple

from .errors import ReportError

try:
    import plotly.graph_objects as go
    import plotly.offline
    HAS_PLOTLY = True
    PLOTLY_IMPORT_ERROR: Optional[str] = None
except ImportError as _imp_err:
    HAS_PLOTLY = False
    PLOTLY_IMPORT_ERROR = str(_imp_err)

STATUS_COLOURS = {"pass": "#1b7f3b", "fail": "#c62828", "blocked": "#ef6c00", "not_run": "#78909c"}


def _figures(data: Dict[str, Any]) -> List[Tuple[str, Any]]:
    """``[(section, plotly Figure)]`` for every chart the data can fill; a chart with no data is left out."""
    charts, figs = data["charts"], []
    for trace in charts["traces"][:12]:
        fig = go.Figure()
        by_gpu: Dict[Any, List[Dict[str, Any]]] = {}
        for sample in trace["samples"]:
            by_gpu.setdefault(sample.get("gpu", 0), []).append(sample)
        for gpu, samples in sorted(by_gpu.items()):
            times = [x.get("t_s") for x in samples]
            fig.add_trace(go.Scatter(x=times, y=[x.get("power_w") for x in samples], name="GPU%s power (W)" % gpu))
            fig.add_trace(go.Scatter(x=times, y=[x.get("temp_c") for x in samples], name="GPU%s temp (°C)" % gpu,
                                     yaxis="y2"))
        fig.update_layout(title="%s %s: power and temperature" % (trace["node"], trace["check"]),
                          xaxis_title="s", yaxis_title="W", yaxis2={"title": "°C", "overlaying": "y", "side": "right"})
        figs.append(("burn-in: power tier", fig))
    for label, by_node in sorted(charts["storage"].items()):
        nodes = sorted(by_node)
        fig = go.Figure(go.Bar(x=nodes, y=[by_node[n] for n in nodes], name=label))
        fig.update_layout(title="Burn-in storage (fio): %s" % label)
        figs.append(("burn-in: storage", fig))
    if charts["pairs"]:
        names = sorted({p["a"] for p in charts["pairs"]} | {p["b"] for p in charts["pairs"]})
        index = {n: i for i, n in enumerate(names)}
        z = [[None] * len(names) for _row in names]
        text = [[""] * len(names) for _row in names]
        for pair in charts["pairs"]:
            i, j = index[pair["a"]], index[pair["b"]]
            z[i][j] = z[j][i] = pair.get("value")
            text[i][j] = text[j][i] = pair.get("status", "")
        unit = charts["pairs"][0].get("unit") or ""
        fig = go.Figure(go.Heatmap(z=z, x=names, y=names, text=text, colorbar={"title": unit},
                                   hovertemplate="%{y} - %{x}: %{z} " + unit + " (%{text})<extra></extra>"))
        fig.update_layout(title="Fabric pair matrix (%s per pair)" % unit)
        figs.append(("burn-in: fabric", fig))
    for curve in charts["nccl"][:6]:
        points = curve["curve"]
        fig = go.Figure(go.Scatter(x=[p["size_bytes"] for p in points], y=[p["busbw_gbps"] for p in points],
                                   mode="lines+markers", name="busbw"))
        fig.update_layout(title="NCCL busbw: %s (%s nodes)" % (curve["check"], curve.get("nodes") or "?"),
                          xaxis={"type": "log", "title": "message size (B)"}, yaxis_title="busbw (GB/s)")
        figs.append(("cluster validation: NCCL", fig))
    runs: Dict[Any, Dict[str, Any]] = {}
    for mfu in charts["mfu"]:
        runs[(mfu["run_id"], mfu.get("scale_nodes"), mfu.get("precision"))] = mfu
    if runs:
        keys = sorted(runs)
        fig = go.Figure(go.Bar(x=["%s<br>%s nodes %s" % (k[0], k[1], k[2]) for k in keys],
                               y=[runs[k].get("mfu_pct") for k in keys],
                               text=[runs[k].get("convention") for k in keys]))
        fig.update_layout(title="MFU per run (%, FLOPs convention on the bar)", yaxis_title="MFU %")
        figs.append(("cluster validation: MFU", fig))
    if charts["outliers"]:
        labels = ["%s GPU%s (%s)" % (o["node"], o.get("gpu"), o.get("run_id", "")) for o in charts["outliers"]]
        fig = go.Figure([go.Bar(x=labels, y=[o.get("value") for o in charts["outliers"]], name="outlier",
                                marker_color="#c62828"),
                         go.Bar(x=labels, y=[o.get("peer_median") for o in charts["outliers"]], name="peer median",
                                marker_color="#1565c0")])
        fig.update_layout(title="Telemetry outliers vs their peers (°C)", barmode="group", yaxis_title="°C")
        figs.append(("cluster validation: telemetry", fig))
    series: Dict[Any, List[Dict[str, Any]]] = {}
    for point in charts.get("rank_steps") or []:
        series.setdefault((point["run_id"], point["scale"]), []).append(point)
    if series:
        fig = go.Figure([go.Bar(x=["rank %d (%s)" % (p["rank"], p.get("node") or "?") for p in points],
                                y=[p["median_s"] for p in points], name="%s %s" % key)
                         for key, points in sorted(series.items())])
        fig.update_layout(title="Per-rank median step time (s, compute before the all-reduce)", barmode="group",
                          yaxis_title="s")
        figs.append(("cluster validation: stragglers", fig))
    return figs


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    out = ["<table><thead><tr>%s</tr></thead><tbody>" % "".join("<th>%s</th>" % html.escape(h) for h in headers)]
    for row in rows:
        out.append("<tr>%s</tr>" % "".join(cell if cell.startswith("<td") else "<td>%s</td>" % cell for cell in row))
    out.append("</tbody></table>")
    return "".join(out)


def _status_cell(status: Optional[str], reason: Optional[str] = "", note: Optional[str] = "",
                 mark: Optional[str] = "") -> str:
    colour = STATUS_COLOURS.get(status or "", "#fff")
    text = html.escape(status or "—") + "".join("<br><small>%s</small>" % html.escape(t) for t in (note, mark) if t)
    # a result that did not gate is drawn faded, so the eye goes to what closed a gate
    fade = ";opacity:.55" if note else ""
    return '<td class="st" style="background:%s%s" title="%s">%s</td>' % (
        colour, fade, html.escape(reason or ""), text)


def _matrix_cell(cell: Dict[str, Any]) -> str:
    warnings = cell.get("warnings") or []
    reason, marks = cell.get("reason"), []
    if warnings:
        # a fleet outlier is marked but keeps its status colour: the SKU's floor decided the verdict
        reason = "%s | fleet: %s" % (reason or "", "; ".join(warnings))
        marks.append("⚠ fleet outlier")
    if cell.get("tls_unverified"):
        marks.append("TLS unverified")
    return _status_cell(cell.get("status"), reason, cell.get("note"), "; ".join(marks))


def plain(value: Any) -> str:
    """A recorded value as a table cell reads it: ``{"BMC": "11.01.01"}`` -> ``BMC: 11.01.01``,
    ``["01.01.10"]`` -> ``01.01.10``, ``None`` -> ``""`` (nested values recurse)."""
    if value is None:
        return ""
    if isinstance(value, dict):
        return "; ".join("%s: %s" % (key, plain(item)) for key, item in value.items())
    if isinstance(value, (list, tuple)):
        return ", ".join(plain(item) for item in value)
    return str(value)


def _event_line(data: Optional[Dict[str, Any]]) -> str:
    """One line for an event: its reason when it has one, else its scalar fields."""
    data = data or {}
    if data.get("reason"):
        return str(data["reason"])
    if data.get("replaces"):
        return "replaces %s (attempt %s)" % (data["replaces"], data.get("attempt", "?"))
    if data.get("link"):
        return "link %s: %s" % (data["link"], data.get("verdict", "?"))
    return plain({k: v for k, v in data.items() if not isinstance(v, (dict, list))})


def render_html(data: Dict[str, Any], title: str = "symphony.cluster handoff report") -> str:
    """One self-contained HTML page (plotly.js inlined); raises :class:`ReportError` without plotly."""
    if not HAS_PLOTLY:
        raise ReportError("the plotly Python library is required for the HTML report", where="report")
    esc = html.escape
    parts = ["<!DOCTYPE html><html><head><meta charset='utf-8'><title>%s</title>" % esc(title),
             "<style>body{font-family:sans-serif;margin:1.5em}table{border-collapse:collapse;margin:1em 0}"
             "td,th{border:1px solid #ccc;padding:3px 6px;font-size:13px}td.st{color:#fff;text-align:center}"
             "td:first-child{white-space:nowrap}table{display:block;overflow-x:auto;max-width:100%}"
             ".cards span{display:inline-block;margin:0 1em 1em 0;padding:.6em 1em;background:#eceff1}</style>",
             "<script>%s</script></head><body>" % plotly.offline.get_plotlyjs(),
             "<h1>%s</h1><p>generated %s</p>" % (esc(title), esc(data["generated"]))]
    summary = data["summary"]
    parts.append("<h2 id='summary'>Fleet summary</h2><div class='cards'><span>%d nodes</span>"
                 "<span>%d handed off</span>%s</div>" % (
                     summary["nodes"], summary["handed_off"],
                     "".join("<span>%s: %d</span>" % (esc(k.replace(":", " ")), v)
                             for k, v in sorted(summary["by_gate"].items()))))
    unverified = summary.get("tls_unverified") or {}
    if unverified:
        parts.append("<p id='tls-unverified'><b>TLS unverified:</b> %d node(s) were read from their BMC with "
                     "validate_certs=false, so their gates were taken without proof of which BMC answered: %s</p>"
                     % (len(unverified), esc("; ".join("%s (%s)" % (host, ", ".join(stages))
                                                       for host, stages in unverified.items()))))
    parts.append(_table(["node", "site", "rack", "U", "serial", "last stage", "gate", "reason"], [
        [esc(r["hostname"]), esc(str(r["site"] or "")), esc(str(r["rack"] or "")), esc(str(r["u"] or "")),
         esc(str(r["serial"] or "")), esc(r["last_stage"] or "—"), _status_cell(r["gate"], r["reason"]),
         esc(r["reason"] or "")] for r in data["nodes"]]))
    parts.append("<h2 id='matrix'>Gate matrix (stage × check)</h2>")
    for stage, checks in data["checks_by_stage"].items():
        parts.append("<h3>%s</h3>" % esc(stage))
        parts.append(_table(["node"] + checks, [
            [esc(r["hostname"])] + [
                _matrix_cell(data["matrix"].get(r["hostname"], {}).get(stage, {}).get(c, {})) for c in checks]
            for r in data["nodes"] if stage in data["matrix"].get(r["hostname"], {})]))
    parts.append("<h2 id='dispatch'>Dispatch list</h2>")
    parts.append(_table(["site", "rack", "U", "node", "serial", "stage", "check", "reason", "remediation"], [
        [esc(str(d[k] if d[k] is not None else "")) for k in
         ("site", "rack", "u", "hostname", "serial", "stage", "check", "reason", "remediation")]
        for d in data["dispatch"]]) if data["dispatch"] else "<p>nothing to dispatch</p>")
    parts.append("<h2 id='topology'>Topology (verified cabling)</h2>")
    parts.append(_table(["switch", "nodes"], [[esc(switch), esc(", ".join(hosts))] for switch, hosts in
                                              data.get("topology", {}).items()])
                 if data.get("topology") else "<p>no cabling verified</p>")
    parts.append("<h2 id='firmware'>Firmware before / after</h2>")
    shown = [f for f in data["firmware"] if f["changed"] or f["status"] != "pass"]
    parts.append("<p>%d components checked on %d nodes; %d updated or not passing are listed.</p>" % (
        len(data["firmware"]), len({f["hostname"] for f in data["firmware"]}), len(shown)))
    parts.append(_table(["node", "component", "status", "before", "after", "expected"], [
        [esc(f["hostname"]), esc(f["check"]), _status_cell(f["status"], f["reason"]),
         esc(plain(f["before"])), esc(plain(f["after"])), esc(plain(f["expected"]))]
        for f in shown]) if shown else "<p>no firmware was changed</p>")
    parts.append("<h2 id='charts'>Evidence</h2>")
    for section, fig in _figures(data):
        parts.append("<h3>%s</h3>" % esc(section))
        parts.append(fig.to_html(full_html=False, include_plotlyjs=False))
    if data["events"]:
        parts.append("<h2 id='events'>Actions taken</h2>")
        # The event's own reason reads as a sentence; the full record stays one click away.
        parts.append(_table(["node", "event", "details"], [
            [esc(str(e["node"] or "")), esc(e["kind"]),
             "%s<details><summary>record</summary><pre>%s</pre></details>" % (
                 esc(_event_line(e["data"])), esc(json.dumps(e["data"], ensure_ascii=False, indent=1)))]
            for e in data["events"]]))
    parts.append("</body></html>")
    return "".join(parts)
