"""The handoff report from a ledger: summary, gate matrix, dispatch list, firmware before/after, charts, JUnit."""

import json
import xml.etree.ElementTree as ET

from ansible_collections.symphony.cluster.plugins.module_utils._core import gate as g
from ansible_collections.symphony.cluster.plugins.module_utils._core.ledger import open_ledger
from ansible_collections.symphony.cluster.plugins.module_utils._core import report as _report
from ansible_collections.symphony.cluster.plugins.module_utils._core import report_html as _report_html

TWIN = {"n1": {"site": "s", "rack": "r01", "u": 2, "serial": "S1", "sku": "x"},
        "n2": {"site": "s", "rack": "r01", "u": 10, "serial": "S2", "sku": "x"}}


def _record(ledger, node, stage, checks, run_id):
    graph = g.CheckGraph(stage, [g.CheckSpec(name) for name in checks])
    results = graph.run(node, run_id, checks)
    ledger.record_results(results)
    ledger.record_gate(g.compute_gate(graph, results), run_id)


def _fleet(ledger_path):
    ledger = open_ledger(ledger_path)
    _record(ledger, "n1", "pre_deployment", {"gpus": lambda c: g.passed()}, "pd1")
    _record(ledger, "n2", "pre_deployment", {"gpus": lambda c: g.failed(
        "expected 8 × H100 80GB HBM3, found 7; slot GPU5 empty", "reseat or replace GPU5")}, "pd1")
    _record(ledger, "n1", "provisioning", {"firmware:bmc": lambda c: g.passed(
        observed={"BMC": "11.01.01"}, evidence={"from": ["01.01.10"]})}, "pv1")
    _record(ledger, "n1", "provisioning", {"firmware:bmc": lambda c: g.passed(observed={"BMC": "11.01.01"})}, "pv2")
    pairs = [{"a": "n1", "b": "n3", "value": 9.5, "unit": "Gb/s", "status": "ok", "round": 1}]
    _record(ledger, "n1", "burn_in", {
        "fio_seq_read": lambda c: g.passed(observed={"read": {"bw_mbps": 591.8, "iops": 564.4}}),
        "fabric_interface": lambda c: g.passed(evidence={"pairs": pairs})}, "bi1")
    outlier = {"node": "n1", "gpu": 7, "metric": "temp_c", "value": 86.0, "peer_median": 56.7, "reason": "hot"}
    _record(ledger, "n1", "cluster_validation", {
        "mfu_target": lambda c: g.passed(evidence={"mfu": {"mfu_pct": 32.75, "convention": "torchtitan",
                                                           "scale_nodes": 5, "precision": "fp32"}}),
        "telemetry_outliers": lambda c: g.failed("hot", "drain", evidence={"outliers": [outlier]})}, "cv1")
    ledger.record_event("n1", "drain", {"reason": "GPU 7 hot"})
    link = {"link": "leaf-rail0:1~leaf-rail0:2", "verdict": "bad", "run_id": "bi1",
            "info": {"kind": "pair_path", "nodes": ["n2", "n1"]},
            "tests": [{"a": "n1", "b": "n2", "value": 0.19, "unit": "Gb/s", "status": "fail"}]}
    ledger.record_event("n1", "fabric_link", link)
    ledger.record_event("n2", "fabric_link", link)
    return ledger


def test_collect_reads_what_the_stages_recorded(tmp_path):
    data = _report.collect(_fleet(str(tmp_path / "l.sqlite")), TWIN)
    rows = {r["hostname"]: r for r in data["nodes"]}
    assert (rows["n1"]["last_stage"], rows["n1"]["gate"]) == ("cluster_validation", "fail")
    assert (rows["n2"]["last_stage"], rows["n2"]["gate"]) == ("pre_deployment", "fail")
    assert data["summary"]["by_gate"] == {"cluster_validation:fail": 1, "pre_deployment:fail": 1}
    # failing checks of every stage, in rack/U order: what a technician walks the floor with
    # and the fabric links burn-in convicted (no node fails for a bad cable), once per link
    assert [(d["hostname"], d["stage"], d["check"]) for d in data["dispatch"]] == [
        ("n1 <-> n2", "burn_in", "fabric_link"), ("n1", "cluster_validation", "telemetry_outliers"),
        ("n2", "pre_deployment", "gpus")]
    assert data["dispatch"][0]["reason"].startswith("link leaf-rail0:1~leaf-rail0:2 between n1 and n2 is slow "
                                                    "(measured 0.19 Gb/s)")
    assert data["dispatch"][2]["u"] == 10 and data["dispatch"][2]["remediation"] == "reseat or replace GPU5"
    # before = what the update found (an earlier run), after = the latest fresh read
    assert data["firmware"] == [{"hostname": "n1", "check": "firmware:bmc", "status": "pass", "before": ["01.01.10"],
                                 "after": {"BMC": "11.01.01"}, "changed": True, "expected": None, "reason": ""}]
    charts = data["charts"]
    assert charts["storage"] == {"seq read (MB/s)": {"n1": 591.8}}
    assert charts["pairs"][0]["value"] == 9.5
    assert charts["mfu"][0]["mfu_pct"] == 32.75 and charts["outliers"][0]["peer_median"] == 56.7
    assert data["matrix"]["n2"]["pre_deployment"]["gpus"]["status"] == "fail"


def test_written_files(tmp_path):
    written = _report.write_report(_fleet(str(tmp_path / "l.sqlite")), str(tmp_path / "out"), TWIN)
    assert written["summary"]["nodes"] == 2 and written["summary"]["handed_off"] == 0
    html = open(written["paths"]["html"], encoding="utf-8").read()
    assert "https://cdn" not in html.split("<script>", 2)[0]  # plotly.js is inlined, nothing to fetch
    assert html.count('class="plotly-graph-div') == 4  # storage, fabric pair matrix, MFU, outliers
    assert "slot GPU5 empty" in html and "01.01.10" in html
    # cells read as values, not JSON: before 01.01.10, after BMC: 11.01.01; an event by its reason
    firmware = html.split("id='firmware'", 1)[1].split("id='charts'", 1)[0]
    assert "<td>01.01.10</td><td>BMC: 11.01.01</td>" in firmware and "&quot;" not in firmware
    actions = html.split("id='events'", 1)[1]
    assert "<td>GPU 7 hot<details>" in actions
    assert "link leaf-rail0:1~leaf-rail0:2: bad<details>" in actions
    suites = {s.get("name"): s for s in ET.parse(written["paths"]["junit"]).getroot()}
    assert suites["pre_deployment"].get("failures") == "1"
    assert suites["cluster_validation"].find("testcase[@name='telemetry_outliers']/failure").get("message") == "hot"
    assert json.load(open(written["paths"]["json"], encoding="utf-8"))["events"][0]["kind"] == "drain"


def test_plain_cells():
    assert _report_html.plain(None) == "" and _report_html.plain(["a", 1]) == "a, 1"
    assert _report_html.plain({"BMC": "1.2", "NIC": ["3", "4"]}) == "BMC: 1.2; NIC: 3, 4"
    assert _report_html.plain({"read": {"bw_mbps": 591.8}}) == "read: bw_mbps: 591.8"


def test_results_that_did_not_gate_are_marked(tmp_path):
    """Under an open gate, a check that did not pass is optional (the profile) or waived; under a closed one, unmarked."""
    ledger = open_ledger(str(tmp_path / "l.sqlite"))
    specs = [g.CheckSpec("stress_ng"), g.CheckSpec("dcgm_diag", required=False), g.CheckSpec("fio_seq_read")]
    graph = g.CheckGraph("burn_in", specs)
    checks = {"stress_ng": lambda c: g.passed(), "dcgm_diag": lambda c: g.not_run("no GPU on this host"),
              "fio_seq_read": lambda c: g.failed("591 MB/s < 3000 MB/s", "reseat the NVMe")}
    for node, waivers in (("n1", ["fio_seq_read"]), ("n2", [])):
        results = graph.run(node, "bi1", checks)
        ledger.record_results(results)
        ledger.record_gate(g.compute_gate(graph, results, waivers), "bi1")
    data = _report.collect(ledger, TWIN)
    n1, n2 = data["matrix"]["n1"]["burn_in"], data["matrix"]["n2"]["burn_in"]
    assert (n1["dcgm_diag"]["note"], n1["fio_seq_read"]["note"], n1["stress_ng"]["note"]) == ("optional", "waived", "")
    assert (n2["dcgm_diag"]["note"], n2["fio_seq_read"]["note"]) == ("", "")  # n2's gate is closed by fio
    html = _report_html.render_html(data)
    assert "not_run<br><small>optional</small>" in html and "fail<br><small>waived</small>" in html
    junit = _report.render_junit(data)
    assert "591 MB/s &lt; 3000 MB/s (waived: did not gate)" in junit
    assert "not_run: no GPU on this host (optional: did not gate)" in junit


def test_dispatch_latest_every_stage_and_labels_survive_a_limited_run(tmp_path):
    """The technicians' list: every stage's gate-closing checks and bad links; a --limit run keeps the others."""
    ledger = _fleet(str(tmp_path / "l.sqlite"))
    # an optional check that failed under a passing gate is no job for a technician
    graph = g.CheckGraph("burn_in", [g.CheckSpec("stress"), g.CheckSpec("edac", required=False)])
    results = graph.run("n2", "bi2", {"stress": lambda c: g.passed(), "edac": lambda c: g.failed("no EDAC", "x")})
    ledger.record_results(results)
    ledger.record_gate(g.compute_gate(graph, results), "bi2")
    out = _report.write_dispatch_latest(ledger, str(tmp_path / "dispatch"), TWIN)
    rows = json.load(open(out["json"], encoding="utf-8"))["rows"]
    assert [(r["hostname"], r["stage"], r["check"]) for r in rows] == [
        ("n1 <-> n2", "burn_in", "fabric_link"), ("n1", "cluster_validation", "telemetry_outliers"),
        ("n2", "pre_deployment", "gpus")]
    assert out["rows"] == 3 and open(out["csv"], encoding="utf-8").readline().strip() == \
        "site,rack,u,hostname,serial,stage,check,reason,remediation"
    # a later run that knows only n1's twin record (--limit n1): n2 keeps its rack and U from the last list
    again = _report.write_dispatch_latest(ledger, str(tmp_path / "dispatch"), {"n1": TWIN["n1"]})
    rows = json.load(open(again["json"], encoding="utf-8"))["rows"]
    n2 = [r for r in rows if r["hostname"] == "n2"][0]
    assert (n2["rack"], n2["u"], n2["serial"]) == ("r01", 10, "S2")
    assert not (tmp_path / "dispatch" / "dispatch-latest.json.tmp").exists()


def test_tls_unverified_rows_are_marked_in_the_report(tmp_path):
    # issue 25: validate_certs=false was a console warning only; the row and the report now say so
    ledger = open_ledger(str(tmp_path / "ledger.db"))
    _record(ledger, "n1", "pre_deployment", {"gpus": lambda c: g.passed(
        evidence=g.mark_unverified({}, verified=False))}, "pd1")
    _record(ledger, "n2", "pre_deployment", {"gpus": lambda c: g.passed(
        evidence=g.mark_unverified({}, verified=True))}, "pd1")
    rows = {r.node: r for r in ledger.current_results()}
    assert rows["n1"].evidence == {g.TLS_UNVERIFIED: True} and rows["n2"].evidence == {}
    data = _report.collect(ledger, TWIN)
    assert data["summary"]["tls_unverified"] == {"n1": ["pre_deployment"]}
    assert data["matrix"]["n1"]["pre_deployment"]["gpus"]["tls_unverified"] is True
    assert data["matrix"]["n2"]["pre_deployment"]["gpus"]["tls_unverified"] is False
    page = _report_html.render_html(data)
    assert "TLS unverified:</b> 1 node(s)" in page and "n1 (pre_deployment)" in page
    assert page.count("<small>TLS unverified</small>") == 1


def test_handed_off_counts_nodes_audited_after_handoff(tmp_path):
    """A node stays handed off (the inventory's handed_off group) once fleet_audit has gated it, pass or fail."""
    ledger = open_ledger(str(tmp_path / "l.sqlite"))
    for node, audit in (("n1", g.passed), ("n2", lambda: g.failed("XID 79", "drain"))):
        _record(ledger, node, "cluster_validation", {"mfu_target": lambda c: g.passed()}, "cv1")
        _record(ledger, node, "fleet_audit", {"xid": lambda c, audit=audit: audit()}, "fa1")
    summary = _report.collect(ledger, TWIN)["summary"]
    assert summary["handed_off"] == 2
    assert summary["by_gate"] == {"fleet_audit:pass": 1, "fleet_audit:fail": 1}
