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
    """What the role does: the runner's rows, then one row per declared fabric test from fabric_test (here none
    measured: not_run), then gate_record with burnin_run's declared.  Every declared test has a row; a run whose
    fabric tier reported nothing still gates on the fabric tests, so a required one keeps the gate closed."""
    manifest = _sku.load_manifest(str(ROOT / "skus" / sku))
    out = _plan_only(manifest, profile)
    declared_tests = [t["name"] for tier in manifest["burn_in"]["tiers"] for t in tier["tests"]]
    assert set(declared_tests) <= set(out["declared"])
    runner_rows = [{"name": t["name"], "status": "pass"} for t in out["plan"] if t["tier"] in P.RUNNER_TIERS]
    runner_rows += [{"name": P.XID_CHECK % tier, "status": "pass"} for tier in P.RUNNER_TIERS
                    if any(t["tier"] == tier for t in out["plan"])]
    fabric = [t["name"] for t in out["fabric_tests"]]
    assert fabric, "every shipped SKU declares a fabric tier"
    fabric_rows = [{"name": name, "status": "not_run", "reason": "not measured by the fabric tier in this run"}
                   for name in fabric]
    results, _verdict = gate_ops.evaluate("n1", "burn_in", runner_rows + fabric_rows, "r1", out["optional"], (),
                                          declared=out["declared"])
    assert set(out["declared"]) <= {r.check for r in results}
    # the fabric tier reported nothing at all: the declaration still gates on every fabric test
    _results, verdict = gate_ops.evaluate("n1", "burn_in", runner_rows, "r1", out["optional"], (),
                                          declared=out["declared"])
    required = set(fabric) - set(out["optional"])
    if required:
        assert verdict.status == "not_run" and required <= set(verdict.failing)
    else:
        assert verdict.status == "pass"


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
    # a runner kind in the fabric tier (with keys gpu_burn knows, so the SKU's key check lets it through)
    manifest["burn_in"]["tiers"][3]["tests"][0] = {"name": "fabric_pairwise", "kind": "gpu_burn", "timeout_s": 60}
    manifest["profiles"]["lab"]["burn_in"]["tests"].pop("fabric_pairwise")
    with pytest.raises(ManifestError, match="tier fabric"):
        P.check_kinds(manifest, C.KINDS)
    with pytest.raises(ManifestError, match="fabric_pairwise"):
        _plan_only(manifest, "production")


def test_declared_check_missing_from_the_run_is_judged_on_its_latest_result():
    """A partial rerun (only cpu_stress) never passes over an earlier failure of another declared check."""
    earlier = [CheckResult(node="n1", stage="burn_in", check="gpu_burn", status="fail", reason="GPU 3 FAULTY"),
               CheckResult(node="n1", stage="burn_in", check="dcgm_diag", status="pass")]
    results, verdict = gate_ops.evaluate("n1", "burn_in", [{"name": "cpu_stress", "status": "pass"}], "r2",
                                         declared=["cpu_stress", "gpu_burn", "dcgm_diag"], earlier=earlier)
    assert verdict.status == "fail" and verdict.failing == ["gpu_burn"]
    assert [r.check for r in results] == ["cpu_stress"]  # earlier results are judged, not recorded again
    _results, verdict = gate_ops.evaluate("n1", "burn_in", [{"name": "cpu_stress", "status": "pass"}], "r2",
                                          declared=["cpu_stress", "fabric_pairwise"])
    assert verdict.status == "not_run" and verdict.failing == ["fabric_pairwise"]
