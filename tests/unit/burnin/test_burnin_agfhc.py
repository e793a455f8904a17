"""AGFHC judged on its documented summary (_host/parsers/agfhc.py, check amd_field_diag).

No public AGFHC output sample exists.  The lines below are built from what AMD's own Cluster Validation Suite
reads (ROCm/cvs cvs/tests/health/agfhc_cvs.py and csp_qual_agfhc.py): "return code AGFHC_SUCCESS", "Log
directory: <dir>", FAIL/ERROR/ABORT words, and <dir>/results.json with "total_failed"; the other words are ours.
"""

import copy
import json

import pytest

from ansible_collections.symphony.cluster.plugins.module_utils._burnin import runner as B
from ansible_collections.symphony.cluster.plugins.module_utils._burnin.checks import KINDS
from ansible_collections.symphony.cluster.plugins.module_utils._burnin.evidence import EvidenceStore
from ansible_collections.symphony.cluster.plugins.module_utils._burnin.executor import CommandResult, Executor
from ansible_collections.symphony.cluster.plugins.module_utils._burnin.kernel_log import KernelLog
from ansible_collections.symphony.cluster.plugins.module_utils._burnin.plan import build_plan
from ansible_collections.symphony.cluster.plugins.module_utils._core import sku as _sku
from ansible_collections.symphony.cluster.plugins.module_utils._core.errors import ParseError
from ansible_collections.symphony.cluster.plugins.module_utils._host.parsers.agfhc import (
    parse_agfhc_output,
    parse_agfhc_results,
)


def _console(log_dir, code="AGFHC_SUCCESS", extra=""):
    return "Log directory: %s\n%sall_lvl1 finished, return code %s\n" % (log_dir, extra, code)


def test_console_summary():
    parsed = parse_agfhc_output(_console("/var/log/agfhc/run1"))
    assert parsed == {"return_code": "AGFHC_SUCCESS", "log_dir": "/var/log/agfhc/run1", "failure_lines": []}
    bad = parse_agfhc_output(_console("/x", extra="hbm: FAIL on GPU 3\n"))
    assert bad["failure_lines"] == ["hbm: FAIL on GPU 3"]


def test_results_json_needs_total_failed():
    assert parse_agfhc_results('{"total_failed": 0, "total_passed": 7}') == {
        "total_failed": 0, "totals": {"total_failed": 0, "total_passed": 7}}
    with pytest.raises(ParseError, match="total_failed"):
        parse_agfhc_results('{"tests": []}')


class FakeAgfhc(Executor):
    def __init__(self, stdout, rc=0):
        super().__init__()
        self.stdout, self.rc, self.argv = stdout, rc, None

    def which(self, tool):
        return tool if tool.endswith("agfhc") else None

    def run(self, argv, timeout_s, cwd=None):
        self.argv = list(argv)
        return CommandResult(list(argv), self.rc, self.stdout, "", 1.0)


def _run(repo_root, tmp_path, stdout, rc=0):
    manifest = copy.deepcopy(_sku.load_manifest(str(repo_root / "skus" / "cray_ex235a.yml")))
    for tier in manifest["burn_in"]["tiers"]:
        for test in tier["tests"]:
            if test["name"] == "amd_field_diag":
                test.update(kind="amd_field_diag", params={}, thresholds={})
    test = [t for t in build_plan(manifest, "production") if t.name == "amd_field_diag"][0]
    fake = FakeAgfhc(stdout, rc)
    return B.run_test(test, "n1", manifest, "production", fake, EvidenceStore(str(tmp_path / "ev"), "n1", "r1"),
                      KernelLog(fake), KINDS[test.kind])


def test_success_needs_results_json_with_no_failure(repo_root, tmp_path):
    log_dir = tmp_path / "agfhc"
    log_dir.mkdir()
    (log_dir / "results.json").write_text(json.dumps({"total_failed": 0, "total_passed": 12}))
    outcome = _run(repo_root, tmp_path, _console(log_dir))
    assert outcome.status == "pass" and "total_failed 0" in outcome.reason
    (log_dir / "results.json").write_text(json.dumps({"total_failed": 2, "total_passed": 10}))
    outcome = _run(repo_root, tmp_path, _console(log_dir))
    assert outcome.status == "fail" and "total_failed 2" in outcome.reason


def test_exit_0_is_not_a_pass_by_itself(repo_root, tmp_path):
    """The old judge passed on exit 0; now the summary decides."""
    assert _run(repo_root, tmp_path, "Starting AGFHC\n").status == "not_run"  # no return code: not judged
    assert _run(repo_root, tmp_path, _console(tmp_path / "missing")).status == "not_run"  # no results.json
    failing = _run(repo_root, tmp_path, _console(tmp_path, extra="xgmi: ERROR link 2 down\n"))
    assert failing.status == "fail" and "xgmi: ERROR link 2 down" in failing.reason
    other = _run(repo_root, tmp_path, _console(tmp_path, code="AGFHC_TEST_FAILURE"))
    assert other.status == "fail" and "return code AGFHC_TEST_FAILURE" in other.reason
