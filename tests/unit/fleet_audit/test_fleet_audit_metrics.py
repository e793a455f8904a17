"""The Prometheus textfile metrics and the Grafana dashboard that reads them."""

import json
import re
import shutil
import subprocess

import pytest
from prometheus_client.parser import text_string_to_metric_families

from ansible_collections.symphony.cluster.plugins.module_utils._core.gate import CheckResult
from ansible_collections.symphony.cluster.plugins.module_utils._fleet_audit.metrics import (
    METRICS, health_events, node_metrics)

CURVE = [{"check": "nccl_sweep_2n", "nodes": 2,
          "curve": [{"size_bytes": 1 << 20, "busbw_gbps": 41.5}, {"size_bytes": 1 << 30, "busbw_gbps": 362.0}]}]


def _text():
    events = health_events([CheckResult("n1", "fleet_audit", "kernel_log", "fail", "x",
                                        observed={"xids": [{"xid": 79}], "hardware": {"gpu_off_bus": {"count": 1}}}),
                            CheckResult("n1", "fleet_audit", "ib_counters", "fail", "x",
                                        observed={"deltas": {"mlx5_0/1": {"link_downed": 2}}})])
    return node_metrics("n1", {"cluster_validation": "pass", "fleet_audit": "fail"}, 3, events, 1764600000.0, CURVE)


def test_the_metrics_parse_with_the_values_the_ledger_gave():
    families = {f.name: f for f in text_string_to_metric_families(_text())}
    assert set(families) == set(METRICS)
    gate = {(s.labels["stage"], s.labels["status"]): s.value for s in families["symphony_gate_status"].samples}
    assert gate[("fleet_audit", "fail")] == 1.0 and gate[("fleet_audit", "pass")] == 0.0
    events = {s.labels["kind"]: s.value for s in families["symphony_fleet_audit_health_events"].samples}
    assert events == {"xid": 1.0, "gpu_off_bus": 1.0, "link_downed": 2.0}
    busbw = {s.labels["size_bytes"]: s.value for s in families["symphony_nccl_busbw_gbps"].samples}
    assert busbw == {str(1 << 20): 41.5, str(1 << 30): 362.0}


@pytest.mark.skipif(shutil.which("promtool") is None,
                    reason="promtool is not installed here (make bootstrap unpacks it into build/tools/bin)")
def test_promtool_accepts_the_textfile_and_refuses_a_broken_one(tmp_path):
    res = subprocess.run(["promtool", "check", "metrics"], input=_text(), capture_output=True, text=True, check=False)
    assert res.returncode == 0, res.stdout + res.stderr
    broken = _text().replace("symphony_gate_status{", "symphony_gate_status{node=", 1)
    res = subprocess.run(["promtool", "check", "metrics"], input=broken, capture_output=True, text=True, check=False)
    assert res.returncode != 0   # the check can fail: a sample line that does not parse


def test_the_dashboard_queries_only_exported_metrics(repo_root):
    dash = json.loads((repo_root / "roles" / "fleet_audit" / "files" / "grafana-fleet-audit.json").read_text())
    exprs = [t["expr"] for p in dash["panels"] for t in p["targets"]]
    exprs += [v["query"] for v in dash["templating"]["list"] if v["type"] == "query"]
    used = {name for e in exprs for name in re.findall(r"\bsymphony_[a-z_]+", e)}
    assert used == set(METRICS)
    labels = {"node", "stage", "status", "kind", "check", "nodes", "size_bytes"}
    for e in exprs:
        for group in re.findall(r"by \(([^)]*)\)", e) + re.findall(r"\{\{(\w+)\}\}", e):
            assert set(x.strip() for x in group.split(",")) <= labels, e
    assert len({p["id"] for p in dash["panels"]}) == len(dash["panels"])


def test_a_check_that_did_not_run_exports_no_event_count():
    rows = [CheckResult("n1", "fleet_audit", "dcgm_xid", "not_run", "no GPUs"),
            CheckResult("n1", "fleet_audit", "bmc_sel", "not_run", "no BMC credentials")]
    assert health_events(rows) == {}


def test_the_fleet_audit_page_json_and_junit(tmp_path, ledger_path):
    from xml.etree import ElementTree as ET

    from ansible_collections.symphony.cluster.plugins.module_utils._core.gate_ops import gate_record
    from ansible_collections.symphony.cluster.plugins.module_utils._fleet_audit.state import state_module

    gate_record({"ledger": ledger_path, "node": "n1", "stage": "fleet_audit", "optional": [], "waive": [],
                 "checks": [{"name": "kernel_log", "status": "fail", "reason": "Xid 79 [injected]"},
                            {"name": "software_drift", "status": "fail", "reason": "driver",
                             "evidence": {"rows": [{"component": "gpu_driver", "status": "drift",
                                                    "found": "535.54.03", "expected": ["535.161.08"]}]}}]}, False)
    out = state_module({"ledger": ledger_path, "hosts": ["n1"], "mode": "after", "report_dir": str(tmp_path / "r")})
    page = (tmp_path / "r" / "fleet_audit.html").read_text()
    assert "gpu_driver" in page and "Xid 79 [injected]" in page and "no fault injected" in page
    data = json.loads((tmp_path / "r" / "fleet_audit.json").read_text())
    assert data["nodes"]["n1"]["gate"] == "fail" and data["nodes"]["n1"]["drift"][0]["found"] == "535.54.03"
    suite = ET.parse(out["report"]["junit"]).getroot().find("testsuite")
    assert suite.get("name") == "fleet_audit" and suite.get("failures") == "2"
