# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The handoff report's data: read from the ledger, as JSON and JUnit XML, and the dispatch rows.

Everything is read from the ledger (results, gates, events) and the evidence
files the ledger points at; nothing is recomputed.  The HTML page drawn from the
same data is :mod:`.report_html`; :func:`write_report` writes all three files.
"""

from __future__ import annotations

import json
import os
import time
import xml.etree.ElementTree as ET
from typing import Any, Dict, Iterable, List, Mapping, Optional

from .gate import STAGES, TLS_UNVERIFIED, CheckResult
from .ledger import Ledger
from .report_html import render_html
# write_dispatch_latest: the handoff_report module writes the list beside the report through this module
from .dispatch import dispatch_list, write_dispatch_latest  # noqa: F401  pylint: disable=unused-import

REPORT_FILES = {"html": "index.html", "json": "report.json", "junit": "junit.xml"}


def _load_evidence(path: str) -> Any:
    """Read a JSON evidence file; ``None`` when absent (evidence may live on another controller)."""
    try:
        with open(path, "r", encoding="utf-8") as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return None


def collect(ledger: Ledger, nodes: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
    """Build the report's data from the ledger.

    ``nodes``: ``{hostname: twin node dict}`` (site, rack, u, serial, sku, spare)
    to order and label rows; nodes only in the ledger are added.
    Returns a JSON-serialisable dict: ``generated``, ``summary`` (``tls_unverified``: ``{node: [stage]}``
    whose current results were read without TLS verification), ``nodes``,
    ``matrix`` (node -> stage -> check -> {status, reason, remediation, note, warnings, tls_unverified}; ``note``
    is ``optional`` or ``waived`` for a check that did not pass and did not close the gate; ``warnings`` the
    result's fleet-outlier warnings; ``tls_unverified``: the result was read from its BMC with
    validate_certs=false), ``dispatch``,
    ``firmware``, ``events``, ``charts`` (series pulled from evidence), ``topology`` (switch -> nodes its ports
    were found cabled to by the ``cabling`` check).
    """
    nodes = dict(nodes or {})
    results = ledger.current_results()
    gates = ledger.current_gates()
    for res in results:
        nodes.setdefault(res.node, {"hostname": res.node})
    for node in gates:
        nodes.setdefault(node, {"hostname": node})

    matrix: Dict[str, Dict[str, Dict[str, Any]]] = {}
    tls_unverified: Dict[str, set] = {}
    checks_by_stage: Dict[str, List[str]] = {s: [] for s in STAGES}
    for res in results:
        verdict = gates.get(res.node, {}).get(res.stage)
        # A check that did not pass under an open gate did not gate it: waived, or optional in the profile
        # (the lab's GPU tiers).  Under a closed gate the verdict names only its worst bucket, so say nothing.
        note = ""
        if verdict is not None and res.status != "pass":
            if res.check in verdict.waived:
                note = "waived"
            elif verdict.status == "pass":
                note = "optional"
        # fleet-outlier warnings (burn-in's thresholds from the fleet): shown, never a status
        warnings = ((res.evidence or {}).get("fleet") or {}).get("warnings") or []
        # a result read with validate_certs=false says so wherever it is shown (issue 25)
        unverified = bool((res.evidence or {}).get(TLS_UNVERIFIED))
        matrix.setdefault(res.node, {}).setdefault(res.stage, {})[res.check] = {
            "status": res.status, "reason": res.reason, "remediation": res.remediation, "note": note,
            "warnings": list(warnings), "tls_unverified": unverified}
        if unverified:
            tls_unverified.setdefault(res.node, set()).add(res.stage)
        if res.stage in checks_by_stage and res.check not in checks_by_stage[res.stage]:
            checks_by_stage[res.stage].append(res.check)

    rows = []
    for host, twin in nodes.items():
        node_gates = gates.get(host, {})
        last_stage, last_gate = None, None
        for stage in STAGES:
            if stage in node_gates:
                last_stage, last_gate = stage, node_gates[stage].status
        rows.append({
            "hostname": host, "site": twin.get("site"), "rack": twin.get("rack"), "u": twin.get("u"),
            "serial": twin.get("serial"), "sku": twin.get("sku"), "spare": twin.get("spare", False),
            "last_stage": last_stage, "gate": last_gate,
            "reason": node_gates[last_stage].reason if last_stage else "not yet audited",
            "gates": {s: node_gates[s].status for s in node_gates},
        })

    dispatch = dispatch_list(ledger, nodes, results=results, gates=gates)

    firmware = []
    for host in sorted({r.node for r in results if r.stage == "provisioning"}):
        # Before = what the last update of the component found (evidence "from"); after = the latest fresh read.
        changed = {}
        for res in ledger.history(host, "provisioning"):
            if res.check.startswith("firmware") and (res.evidence or {}).get("from"):
                changed[res.check] = res.evidence["from"]
        for res in results:
            if res.node == host and res.stage == "provisioning" and res.check.startswith("firmware"):
                firmware.append({"hostname": host, "check": res.check, "status": res.status,
                                 "before": changed.get(res.check, res.observed), "after": res.observed,
                                 "changed": res.check in changed, "expected": res.expected, "reason": res.reason})

    by_gate: Dict[str, int] = {}
    handed_off = 0
    for row in rows:
        key = "%s:%s" % (row["last_stage"], row["gate"]) if row["last_stage"] else "none"
        by_gate[key] = by_gate.get(key, 0) + 1
        # the inventory's handed_off group: cluster_validation passed, whatever fleet_audit found since
        if row["gates"].get("cluster_validation") == "pass":
            handed_off += 1
    summary = {"nodes": len(rows), "by_gate": by_gate, "handed_off": handed_off,
               "tls_unverified": {host: sorted(stages) for host, stages in sorted(tls_unverified.items())}}

    return {
        "generated": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "summary": summary,
        "nodes": rows,
        "checks_by_stage": {s: c for s, c in checks_by_stage.items() if c},
        "matrix": matrix,
        "dispatch": dispatch,
        "firmware": firmware,
        "events": ledger.events(),
        "charts": _chart_series(results),
        "topology": _topology(results),
    }


def _topology(results: Iterable[CheckResult]) -> Dict[str, List[str]]:
    """Switch -> nodes, from what the latest ``cabling`` results found on each port (verified, not planned)."""
    out: Dict[str, set] = {}
    for res in results:
        if res.check == "cabling":
            for port in (res.evidence or {}).get("ports") or ():
                if port.get("found"):
                    out.setdefault(str(port["found"][0]), set()).add(res.node)
    return {switch: sorted(hosts) for switch, hosts in sorted(out.items())}


def _chart_series(results: Iterable[CheckResult]) -> Dict[str, Any]:
    """Series for the charts, from what the stages recorded (their result ``observed`` and ``evidence``).

    - burn-in power/temperature traces: evidence ``samples`` (list of ``{t_s, gpu, power_w, temp_c}``) or
      ``samples_file`` (a JSON file of that list), as the power tier writes them;
    - storage: the ``fio_*`` checks' observed ``{"read"|"write": {bw_mbps, iops, p99_lat_us}}``;
    - fabric pair matrix: ``fabric_interface`` evidence ``pairs`` (``{a, b, value, unit, status}``);
    - NCCL busbw curves: evidence ``curve`` (``[{size_bytes, busbw_gbps}]``) of ``nccl_sweep_*`` checks;
    - MFU per run: evidence ``mfu`` (``{mfu_pct, convention, scale_nodes, precision}``);
    - telemetry outliers: evidence ``outliers`` (``{node, gpu, metric, value, peer_median, reason}``);
    - per-rank step times: the ``stragglers`` check's evidence ``rank_steps`` (``{"<N>n_<precision>": {rank:
      {node, median_s, steps}}}``), one point per run, scale and rank.
    """
    traces: List[Dict[str, Any]] = []
    storage: Dict[str, Dict[str, Any]] = {}
    pairs: Dict[Any, Dict[str, Any]] = {}
    nccl: List[Dict[str, Any]] = []
    mfu: List[Dict[str, Any]] = []
    outliers: List[Dict[str, Any]] = []
    rank_steps: Dict[Any, Dict[str, Any]] = {}
    fio_keys = {"fio_seq_read": ("read", "bw_mbps", "seq read (MB/s)"),
                "fio_seq_write": ("write", "bw_mbps", "seq write (MB/s)"),
                "fio_randread_4k": ("read", "iops", "4 KiB random read (IOPS)")}
    for res in results:
        ev = res.evidence or {}
        samples = ev.get("samples")
        if samples is None and ev.get("samples_file"):
            samples = _load_evidence(ev["samples_file"])
        if isinstance(samples, list) and samples:
            traces.append({"node": res.node, "check": res.check, "samples": samples})
        if res.check in fio_keys and isinstance(res.observed, dict):
            direction, key, label = fio_keys[res.check]
            value = (res.observed.get(direction) or {}).get(key)
            if value is not None:
                storage.setdefault(label, {})[res.node] = value
        for pair in ev.get("pairs") or []:
            pairs[tuple(sorted((pair["a"], pair["b"])))] = pair
        if isinstance(ev.get("curve"), list) and ev["curve"]:
            nccl.append({"node": res.node, "check": res.check, "curve": ev["curve"], "nodes": ev.get("nodes")})
        if isinstance(ev.get("mfu"), dict) and res.node:
            mfu.append(dict(ev["mfu"], node=res.node, check=res.check, run_id=res.run_id))
        for outlier in ev.get("outliers") or []:
            if isinstance(outlier, dict):
                outliers.append(dict(outlier, run_id=res.run_id))
        if res.check == "stragglers" and isinstance(ev.get("rank_steps"), dict):
            for scale, ranks in ev["rank_steps"].items():
                for rank, item in (ranks or {}).items():
                    rank_steps[(res.run_id, scale, int(rank))] = {"run_id": res.run_id, "scale": scale,
                                                                  "rank": int(rank), "node": item.get("node"),
                                                                  "median_s": item.get("median_s")}
    return {"traces": traces, "storage": storage, "pairs": list(pairs.values()), "nccl": nccl, "mfu": mfu,
            "outliers": outliers, "rank_steps": [rank_steps[k] for k in sorted(rank_steps)]}


def render_junit(data: Dict[str, Any]) -> str:
    """JUnit XML: one testsuite per stage, one testcase per node and check.

    ``fail`` -> ``<failure>``, ``blocked``/``not_run`` -> ``<skipped>`` with the reason (and, for a result
    that did not close its gate, ``(optional: did not gate)`` or ``(waived: did not gate)``).
    """
    root = ET.Element("testsuites", name="symphony.cluster")
    suites: Dict[str, ET.Element] = {}
    for host, stages in sorted(data["matrix"].items()):
        for stage, checks in stages.items():
            suite = suites.get(stage)
            if suite is None:
                suite = suites[stage] = ET.SubElement(root, "testsuite", name=stage)
            for check, res in checks.items():
                case = ET.SubElement(suite, "testcase", classname="%s.%s" % (stage, host), name=check)
                note = " (%s: did not gate)" % res["note"] if res.get("note") else ""
                if res["status"] == "fail":
                    node = ET.SubElement(case, "failure", message=(res["reason"] or "failed") + note)
                    node.text = res.get("remediation") or ""
                elif res["status"] in ("blocked", "not_run"):
                    ET.SubElement(case, "skipped", message="%s: %s%s" % (res["status"], res["reason"], note))
    for suite in suites.values():
        cases = list(suite)
        suite.set("tests", str(len(cases)))
        suite.set("failures", str(sum(1 for c in cases if c.find("failure") is not None)))
        suite.set("skipped", str(sum(1 for c in cases if c.find("skipped") is not None)))
    return ET.tostring(root, encoding="unicode")


def write_report(ledger: Ledger, out_dir: str, nodes: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
    """Write ``index.html``, ``report.json`` and ``junit.xml`` into ``out_dir``.

    Returns ``{"paths": {"html", "json", "junit"}, "summary": {...}}``.
    """
    out_dir = os.path.normpath(out_dir)
    data = collect(ledger, nodes)
    os.makedirs(out_dir, exist_ok=True)
    paths = {key: os.path.join(out_dir, name) for key, name in REPORT_FILES.items()}
    with open(paths["json"], "w", encoding="utf-8") as handle:
        json.dump(data, handle, indent=1, sort_keys=True, default=str)
    with open(paths["junit"], "w", encoding="utf-8") as handle:
        handle.write(render_junit(data))
    with open(paths["html"], "w", encoding="utf-8") as handle:
        handle.write(render_html(data))
    return {"paths": paths, "summary": data["summary"]}
