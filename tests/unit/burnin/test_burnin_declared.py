"""Declared means judged (DESIGN.md "Verdict rules"): every test a shipped SKU declares has a row in the burn-in gate.

The gate the burn_in role records is gate_record's, fed with burnin_run's ``declared``; these tests walk every
shipped SKU x profile through the same two functions."""

import pathlib

import pytest

from ansible_collections.symphony.cluster.plugins.module_utils._burnin import checks as C
from ansible_collections.symphony.cluster.plugins.module_utils._burnin import plan as P
from ansible_collections.symphony.cluster.plugins.module_utils._burnin import runner as B
from ansible_collections.symphony.cluster.plugins.module_utils._core import gate_ops
from ansible_collections.symphony.cluster.plugins.module_utils._core import sku as _sku
from ansible_collections.symphony.cluster.plugins.module_utils._core.errors import ManifestError
from ansible_collections.symphony.cluster.plugins.module_utils._core.gate import CheckResult
from ansible_collections.symphony.cluster.plugins.module_utils._fabric import declared as FD

ROOT = pathlib.Path(__file__).resolve().parents[3]
SKUS = sorted((ROOT / "skus").glob("*.yml"))
CASES = [(path.name, profile) for path in SKUS
         for profile in ["production"] + sorted((_sku.load_manifest(str(path)).get("profiles") or {}))]


def _plan_only(manifest, profile):
    return B.burnin_run({"node": "n1", "manifest": manifest, "profile": profile, "evidence_dir": "/nonexistent"},
                        check_mode=True)


@pytest.mark.parametrize("sku,profile", CASES)
def test_every_declared_test_has_a_gate_row(sku, profile):
    """The runner tiers all pass and the fabric tier reports nothing: the declared fabric tests still have rows,
    and where they are required the gate is not a pass."""
    manifest = _sku.load_manifest(str(ROOT / "skus" / sku))
    out = _plan_only(manifest, profile)
    declared_tests = [t["name"] for tier in manifest["burn_in"]["tiers"] for t in tier["tests"]]
    assert set(declared_tests) <= set(out["declared"])
    runner_rows = [{"name": t["name"], "status": "pass"} for t in out["plan"] if t["tier"] in P.RUNNER_TIERS]
    runner_rows += [{"name": P.XID_CHECK % tier, "status": "pass"} for tier in P.RUNNER_TIERS
                    if any(t["tier"] == tier for t in out["plan"])]
    results, verdict = gate_ops.evaluate("n1", "burn_in", runner_rows, "r1", out["optional"], (),
                                         declared=out["declared"])
    rows = {r.check: r for r in results}
    assert set(out["declared"]) <= set(rows)
    fabric = [t["name"] for t in out["fabric_tests"]]
    assert fabric, "every shipped SKU declares a fabric tier"
    for name in fabric:
        assert rows[name].status == "not_run" and "no result was recorded" in rows[name].reason
    if set(fabric) - set(out["optional"]):
        assert verdict.status == "not_run" and set(fabric) - set(out["optional"]) <= set(verdict.failing)


@pytest.mark.parametrize("sku,profile", CASES)
def test_every_fabric_test_has_options_from_the_sku(sku, profile):
    manifest = _sku.load_manifest(str(ROOT / "skus" / sku))
    for test in _plan_only(manifest, profile)["fabric_tests"]:
        options = FD.test_options(test)
        assert options["check"] == test["name"]
        if profile == "production":
            key = FD.KINDS[test["kind"]]["floor"]
            assert options["floor"] == test["thresholds"].get(key)


def test_fabric_kinds_match_the_fabric_package():
    assert set(FD.KINDS) == set(P.FABRIC_KINDS)


def test_a_kind_nothing_implements_is_an_error_naming_sku_tier_and_test(repo_root):
    manifest = _sku.load_manifest(str(repo_root / "skus" / "dgx_h100.yml"))
    manifest["burn_in"]["tiers"][1]["tests"][0]["kind"] = "nvlink_magic"
    with pytest.raises(ManifestError) as err:
        P.check_kinds(manifest, C.KINDS)
    assert manifest["sku"] in str(err.value)
    assert "tier gpu" in str(err.value) and "nvidia_smi_health" in str(err.value)
    manifest = _sku.load_manifest(str(repo_root / "skus" / "dgx_h100.yml"))
    manifest["burn_in"]["tiers"][3]["tests"][0]["kind"] = "gpu_burn"  # a runner kind in the fabric tier
    with pytest.raises(ManifestError, match="tier fabric"):
        P.check_kinds(manifest, C.KINDS)
    with pytest.raises(ManifestError, match="fabric_pairwise"):
        _plan_only(manifest, "production")


def test_declared_check_missing_from_the_run_is_judged_on_its_latest_result():
    """A partial rerun (only cpu_stress) never passes over an earlier failure of another declared check."""
    prior = [CheckResult(node="n1", stage="burn_in", check="gpu_burn", status="fail", reason="GPU 3 FAULTY"),
             CheckResult(node="n1", stage="burn_in", check="dcgm_diag", status="pass")]
    results, verdict = gate_ops.evaluate("n1", "burn_in", [{"name": "cpu_stress", "status": "pass"}], "r2",
                                         declared=["cpu_stress", "gpu_burn", "dcgm_diag"], prior=prior)
    assert verdict.status == "fail" and verdict.failing == ["gpu_burn"]
    # prior results are judged, not recorded again
    assert [r.check for r in results] == ["cpu_stress"]
    _results, verdict = gate_ops.evaluate("n1", "burn_in", [{"name": "cpu_stress", "status": "pass"}], "r2",
                                          declared=["cpu_stress", "dcgm_diag"], prior=prior)
    assert verdict.status == "pass"
    # without declared, the old behaviour: only the checks handed in
    _results, verdict = gate_ops.evaluate("n1", "burn_in", [{"name": "cpu_stress", "status": "pass"}], "r2")
    assert verdict.status == "pass"


def test_gate_record_reads_the_ledger_for_declared_checks(ledger_path):
    params = {"ledger": ledger_path, "node": "n1", "stage": "burn_in", "run_id": "r1", "optional": [], "waive": [],
              "checks": [{"name": "gpu_burn", "status": "fail", "reason": "GPU 3 FAULTY"},
                         {"name": "cpu_stress", "status": "pass"}]}
    assert gate_ops.gate_record(params, False)["gate"]["status"] == "fail"
    rerun = dict(params, run_id="r2", checks=[{"name": "cpu_stress", "status": "pass"}],
                 declared=["cpu_stress", "gpu_burn", "fabric_pairwise"])
    out = gate_ops.gate_record(rerun, False)
    assert out["gate"]["status"] == "fail" and out["gate"]["failing"] == ["gpu_burn"]
    assert {r["check"]: r["status"] for r in out["results"]} == {"cpu_stress": "pass", "fabric_pairwise": "not_run"}
