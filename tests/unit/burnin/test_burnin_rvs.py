"""ROCm Validation Suite judged per result line (_host/parsers/rvs.py, check rocm_validation_suite)."""

from ansible_collections.symphony.cluster.plugins.module_utils._burnin import runner as B
from ansible_collections.symphony.cluster.plugins.module_utils._burnin.checks import KINDS
from ansible_collections.symphony.cluster.plugins.module_utils._burnin.evidence import EvidenceStore
from ansible_collections.symphony.cluster.plugins.module_utils._burnin.executor import CommandResult, Executor
from ansible_collections.symphony.cluster.plugins.module_utils._burnin.kernel_log import KernelLog
from ansible_collections.symphony.cluster.plugins.module_utils._burnin.plan import build_plan
from ansible_collections.symphony.cluster.plugins.module_utils._core import sku as _sku
from ansible_collections.symphony.cluster.plugins.module_utils._host.parsers.rvs import parse_rvs_results

# Result lines in RVS's shape: the verdict words pass:/met: TRUE|FALSE (AMD-AGI/Primus-SaFE's MI300X preflight fails
# on "met: FALSE" after rvs -c gst_single.conf); values constructed.
GST = ("[RESULT] [1101.2] [gst-1215-1] gst 28851 GFLOPS 101234.5 Target GFLOPS: 95000 met: TRUE\n"
       "[RESULT] [1101.3] [gst-1215-1] gst 44214 GFLOPS 81234.5 Target GFLOPS: 95000 met: FALSE\n")
PASS = "[RESULT] [ 12.1] [action_1] pebb 28851 pass: TRUE\n"


def test_parser_reads_each_result():
    results = parse_rvs_results(GST + PASS)
    assert [(r["module"], r["kind"], r["ok"]) for r in results] == [("gst", "met", True), ("gst", "met", False),
                                                                    ("pebb", "pass", True)]
    assert results[0]["fields"] == ["RESULT", "1101.2", "gst-1215-1"]
    assert parse_rvs_results("RVS-1.0 loading modules\n") == []


class FakeRvs(Executor):
    def __init__(self, stdout, rc=0):
        super().__init__()
        self.stdout, self.rc = stdout, rc

    def which(self, tool):
        return "/opt/rocm/bin/rvs" if tool == "rvs" else None

    def run(self, argv, timeout_s, cwd=None):
        return CommandResult(list(argv), self.rc, self.stdout, "", 1.0)


def _run(repo_root, tmp_path, stdout, rc=0):
    manifest = _sku.load_manifest(str(repo_root / "skus" / "cray_ex235a.yml"))
    test = [t for t in build_plan(manifest, "production") if t.name == "amd_field_diag"][0]
    fake = FakeRvs(stdout, rc)
    return B.run_test(test, "n1", manifest, "production", fake, EvidenceStore(str(tmp_path), "n1", "r1"),
                      KernelLog(fake), KINDS[test.kind])


def test_met_false_fails_where_only_pass_false_was_read_before(repo_root, tmp_path):
    outcome = _run(repo_root, tmp_path, GST)
    assert outcome.status == "fail" and "Target GFLOPS: 95000 met: FALSE" in outcome.reason


def test_no_result_line_is_not_a_pass(repo_root, tmp_path):
    outcome = _run(repo_root, tmp_path, "RVS-1.0 loading modules\nno devices matched\n")
    assert outcome.status == "not_run" and "no result line" in outcome.reason
    assert _run(repo_root, tmp_path, PASS).status == "pass"
