"""DCGM diag judged as the SKU and the DCGM docs say (_burnin/checks/dcgm.py)."""


from ansible_collections.symphony.cluster.plugins.module_utils._burnin import runner as B
from ansible_collections.symphony.cluster.plugins.module_utils._burnin.checks import dcgm as D
from ansible_collections.symphony.cluster.plugins.module_utils._burnin.evidence import EvidenceStore
from ansible_collections.symphony.cluster.plugins.module_utils._burnin.executor import CommandResult, Executor
from ansible_collections.symphony.cluster.plugins.module_utils._burnin.kernel_log import KernelLog
from ansible_collections.symphony.cluster.plugins.module_utils._burnin.plan import build_plan
from ansible_collections.symphony.cluster.plugins.module_utils._core import sku as _sku
from ansible_collections.symphony.cluster.plugins.module_utils._host.parsers.dcgm import parse_dcgm_diag
import json

REAL_3X = "dcgmi-diag-3.1.0-preamble-and-nulls-dcgm.json.txt"
SKU_THRESHOLDS = {"required_status": "Pass", "memory_bandwidth_min_mbps": 1905000}


def _result(gpu, status, warnings=None):
    out = {"entity_group": "GPU", "entity_group_id": 1, "entity_id": gpu, "status": status}
    if warnings:
        out["warnings"] = warnings
    return out


def _v4(*tests):
    """A DCGM 4.x document in the layout of NVIDIA's dcgm_diag_schema.json (constructed values)."""
    return json.dumps({"DCGM Diagnostic": {"test_categories": [{"category": "Hardware", "tests": [
        {"name": name, "results": results, "test_summary": {"status": summary}} for name, summary, results in tests]}]},
        "metadata": {"version": "4.2.3"}})


def test_real_3x_all_pass_is_a_pass_without_a_bandwidth_floor(tool_text):
    parsed = parse_dcgm_diag(tool_text(REAL_3X))
    assert D.judge_dcgm_diag(parsed, 0, 1, {"required_status": "Pass"}).status == "pass"
    # the SKU's floor needs DCGM's memory_bandwidth test, which this level-1 run does not have
    outcome = D.judge_dcgm_diag(parsed, 0, 1, SKU_THRESHOLDS)
    assert outcome.status == "not_run" and "memory_bandwidth" in outcome.reason


def test_pass_with_a_recorded_error_is_not_a_pass():
    """DCGM Diagnostic Errors: an error_id other than DCGM_FR_OK (0) is an error, whatever the status word."""
    error = {"warning": "GPU 1 memory bandwidth 1700000 MB/s below 1905000", "error_id": 44,
             "error_category": 1, "error_severity": 2}
    doc = _v4(("memory_bandwidth", "Pass", [_result(0, "Pass"), _result(1, "Pass", [error])]))
    outcome = D.judge_dcgm_diag(parse_dcgm_diag(doc), 0, 3, SKU_THRESHOLDS)
    assert outcome.status == "fail" and "reported Pass but recorded errors" in outcome.reason
    assert "GPU 1" in outcome.reason and "error_id 44" in outcome.reason
    ok = {"warning": "informational", "error_id": 0, "error_category": 0, "error_severity": 0}
    doc = _v4(("memory_bandwidth", "Pass", [_result(0, "Pass", [ok]), _result(1, "Pass")]))
    assert D.judge_dcgm_diag(parse_dcgm_diag(doc), 0, 3, SKU_THRESHOLDS).status == "pass"


def test_warn_fails_when_the_sku_requires_pass():
    doc = _v4(("memory_bandwidth", "Pass", [_result(0, "Pass")]), ("targeted_power", "Warn", [_result(0, "Warn")]))
    parsed = parse_dcgm_diag(doc)
    assert D.judge_dcgm_diag(parsed, 0, 3, SKU_THRESHOLDS).status == "fail"
    assert D.judge_dcgm_diag(parsed, 0, 3, {"required_status": "Warn"}).status == "pass"


def test_exit_status_read_with_the_json():
    failing = _v4(("memory", "Fail", [_result(0, "Fail", [{"warning": "DBE", "error_id": 83, "error_category": 10,
                                                           "error_severity": 2}])]))
    outcome = D.judge_dcgm_diag(parse_dcgm_diag(failing), 226, 3, SKU_THRESHOLDS)
    assert outcome.status == "fail" and "found errors (exit 226)" in outcome.reason
    could_not = json.dumps({"DCGM Diagnostic": {"runtime_error": "Couldn't start the host engine"}})
    outcome = D.judge_dcgm_diag(parse_dcgm_diag(could_not), 1, 3, SKU_THRESHOLDS)
    assert outcome.status == "not_run" and "could not run" in outcome.reason
    passing = _v4(("memory_bandwidth", "Pass", [_result(0, "Pass")]))
    assert D.judge_dcgm_diag(parse_dcgm_diag(passing), 1, 3, SKU_THRESHOLDS).status == "fail"


class FakeDcgmi(Executor):
    def __init__(self, stdout, rc=0):
        super().__init__()
        self.stdout, self.rc, self.argv = stdout, rc, None

    def which(self, tool):
        return "/usr/bin/dcgmi" if tool == "dcgmi" else None

    def run(self, argv, timeout_s, cwd=None):
        self.argv = list(argv)
        return CommandResult(list(argv), self.rc, self.stdout, "", 0.1)


def test_the_skus_level_and_bandwidth_floor_reach_dcgmi(repo_root, tmp_path):
    manifest = _sku.load_manifest(str(repo_root / "skus" / "dgx_h100.yml"))
    test = [t for t in build_plan(manifest, "production") if t.name == "dcgm_diag"][0]
    fake = FakeDcgmi(_v4(("memory_bandwidth", "Pass", [_result(g, "Pass") for g in range(8)])))
    store = EvidenceStore(str(tmp_path), "n1", "r1")
    outcome = B.run_test(test, "n1", manifest, "production", fake, store, KernelLog(fake), D.check_dcgm_diag)
    assert fake.argv[:5] == ["/usr/bin/dcgmi", "diag", "-r", "3", "-j"]
    assert fake.argv[5:7] == ["-p", "memory_bandwidth.minimum_bandwidth=1905000"]
    assert outcome.status == "pass"


def test_every_nvidia_sku_runs_a_quick_level_before_its_own(repo_root):
    for name in ("dgx_h100.yml", "hgx_h100_supermicro.yml", "gb200_nvl_tray.yml", "blade_h100_2node.yml"):
        plan = [t for t in build_plan(_sku.load_manifest(str(repo_root / "skus" / name))) if t.kind == "dcgm_diag"]
        assert [t.params["level"] for t in plan][0] == 1 and len(plan) == 2, name
        assert plan[0].cost_s < plan[1].cost_s
