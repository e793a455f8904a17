"""Thresholds from the fleet (_burnin/fleet_stats.py): the modified z-score of Iglewicz & Hoaglin (1993) against
the earlier passing nodes of the SKU in the ledger, a warning in the evidence that never changes a verdict."""

import copy

import pytest

from ansible_collections.symphony.cluster.plugins.module_utils._burnin import fleet_stats as F
from ansible_collections.symphony.cluster.plugins.module_utils._burnin import runner as B
from ansible_collections.symphony.cluster.plugins.module_utils._core import report as _report
from ansible_collections.symphony.cluster.plugins.module_utils._core import report_html as _report_html
from ansible_collections.symphony.cluster.plugins.module_utils._core import sku as _sku
from ansible_collections.symphony.cluster.plugins.module_utils._core.gate import CheckResult
from ansible_collections.symphony.cluster.plugins.module_utils._core.ledger import open_ledger

SKU = "hgx-h100-supermicro"
# eight GPUs' busbw of healthy nodes (GB/s; values ours, in the range of the superbench 8xA100 sample's 235 GB/s)
FLEET = [235.3, 236.1, 234.8, 235.9, 236.4, 235.0, 234.6]


def _row(node, value, status="pass", sku=SKU, check="nccl_single_node"):
    return CheckResult(node=node, stage="burn_in", check=check, status=status,
                       observed={"busbw_gbps": value, "nranks": 8, "rc": 0, "ok": True},
                       evidence={"sku": sku}, run_id="r-%s" % node)


def test_modified_z_is_iglewicz_and_hoaglin():
    stats = F.modified_z(20.0, [10.0, 11.0, 12.0, 13.0, 14.0])
    assert stats == {"z": pytest.approx(0.6745 * 8 / 1.0, abs=1e-3), "median": 12.0, "mad": 1.0, "n": 5}
    assert F.modified_z(5.0, [3.0, 3.0, 3.0])["z"] is None  # MAD 0: undefined, never a flag


def test_numeric_values_skip_bookkeeping_and_booleans():
    assert F.numeric_values({"busbw_gbps": 1.5, "rc": 0, "ok": True, "final": {"power_w": 700, "gpus": [1, 2]},
                             "name": "x"}) == {"busbw_gbps": 1.5, "final.power_w": 700.0}


def test_an_outlier_is_flagged_only_against_passing_peers_of_the_same_sku():
    fleet = [_row("n%d" % i, v) for i, v in enumerate(FLEET)]
    fleet += [_row("bad", 120.0, status="fail"), _row("other", 90.0, sku="dgx-h100"), _row("me", 235.0)]
    slow = _row("me", 212.0)
    comparison = F.fleet_comparison(slow, SKU, fleet)
    assert comparison["peers"] == len(FLEET) and list(comparison["compared"]) == ["busbw_gbps"]
    assert comparison["compared"]["busbw_gbps"]["median"] == 235.3
    (warning,) = comparison["warnings"]
    assert "nccl_single_node busbw_gbps = 212 is a fleet outlier for %s" % SKU in warning
    assert F.fleet_comparison(_row("me", 235.5), SKU, fleet)["warnings"] == []
    # too few peers: nothing compared
    assert F.fleet_comparison(slow, SKU, fleet[:4])["compared"] == {}


@pytest.fixture
def manifest(repo_root):
    m = copy.deepcopy(_sku.load_manifest(str(repo_root / "skus" / "hgx_h100_supermicro.yml")))
    m["burn_in"]["tiers"] = [{"name": "node", "tests": [{"name": "nccl_single_node", "kind": "ok", "timeout_s": 5}]}]
    m["gates"] = {}
    return m


@pytest.mark.parametrize("status", ["pass", "fail"])
def test_a_fleet_warning_never_changes_a_verdict(manifest, ledger_path, tmp_path, status):
    """The same result recorded into an empty ledger and into one whose fleet makes it an outlier: same gate."""
    result = _row("me", 150.0, status=status, sku=None).to_dict()
    others = [CheckResult(node="me", stage="burn_in", check=name, status="pass").to_dict()
              for name in B.gate_graph(manifest, "production").order() if name != "nccl_single_node"]
    alone = B.record_burnin(open_ledger(str(tmp_path / "alone.sqlite")), manifest, "production", "me", "r1",
                            [dict(result)] + others)
    ledger = open_ledger(ledger_path)
    ledger.record_results([_row("n%d" % i, v, sku=manifest["sku"]) for i, v in enumerate(FLEET)])
    verdict = B.record_burnin(ledger, manifest, "production", "me", "r1", [dict(result)] + others)
    assert (verdict.status, verdict.reason) == (alone.status, alone.reason) and verdict.status == status
    (row,) = [r for r in ledger.current_results("me", "burn_in") if r.check == "nccl_single_node"]
    assert row.status == status and row.evidence["sku"] == manifest["sku"]
    assert "fleet outlier" in row.evidence["fleet"]["warnings"][0]


def test_the_module_logic_reads_the_ledger_and_annotates_the_checks(ledger_path, tmp_path):
    ledger = open_ledger(ledger_path)
    ledger.record_results([_row("n%d" % i, v) for i, v in enumerate(FLEET)])
    ledger.close()
    checks = [{"name": "nccl_single_node", "status": "pass", "observed": {"busbw_gbps": 150.0}, "evidence": {}}]
    out = F.burnin_fleet({"ledger": ledger_path, "node": "me", "sku": SKU, "checks": checks})
    assert out["changed"] is False and out["peers_read"] == len(FLEET) and len(out["outliers"]) == 1
    assert out["warnings"] == out["outliers"]
    assert out["checks"][0]["status"] == "pass" and out["checks"][0]["evidence"]["fleet"]["peers"] == len(FLEET)
    missing = str(tmp_path / "none.sqlite")
    out = F.burnin_fleet({"ledger": missing, "node": "me", "sku": SKU, "checks": checks})
    assert out["outliers"] == [] and out["checks"][0]["evidence"] == {"sku": SKU}
    assert not (tmp_path / "none.sqlite").exists()


def test_the_report_shows_the_warning_and_keeps_the_status(ledger_path):
    ledger = open_ledger(ledger_path)
    fleet = [_row("n%d" % i, v) for i, v in enumerate(FLEET)]
    slow = _row("me", 150.0)
    F.annotate([slow], SKU, fleet)
    ledger.record_results(fleet + [slow])
    data = _report.collect(ledger)
    cell = data["matrix"]["me"]["burn_in"]["nccl_single_node"]
    assert cell["status"] == "pass" and "fleet outlier" in cell["warnings"][0]
    assert data["matrix"]["n0"]["burn_in"]["nccl_single_node"]["warnings"] == []
    html = _report_html.render_html(data)
    assert "pass<br><small>⚠ fleet outlier</small>" in html and "opacity" not in html.split("⚠ fleet outlier", maxsplit=1)[0][-200:]
