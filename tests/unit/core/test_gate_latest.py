"""The gate reads the latest result of every required check, whichever run wrote it (issue 25).

The issue's case: ``burn_in_tests: [fio_seq_read]`` after a failed burn-in recorded ``pass | all required checks
passed`` from that run's three results, and the node moved on to cluster validation.
"""

import pytest
import yaml

from ansible_collections.symphony.cluster.plugins.module_utils._burnin.runner import burnin_run
from ansible_collections.symphony.cluster.plugins.module_utils._core import gate_ops as _gate_ops


@pytest.fixture(scope="module")
def plan(repo_root):
    """What burnin_run (check mode) tells the role for the lab profile of the DGX H100 SKU, subset and full."""
    with open(repo_root / "skus" / "dgx_h100.yml", encoding="utf-8") as handle:
        manifest = yaml.safe_load(handle)
    params = {"node": "lab1", "manifest": manifest, "profile": "lab", "evidence_dir": "/nonexistent"}
    subset = burnin_run(dict(params, tests=["fio_seq_read"]), check_mode=True)
    return {"declared": subset["declared"], "optional": subset["optional"],
            "subset": [t["name"] for t in subset["plan"]]}


def _record(ledger, run_id, checks, plan):
    # the role's gate_record task: this run's checks, the SKU's optional and declared checks
    return _gate_ops.gate_record({"ledger": ledger, "node": "lab1", "stage": "burn_in", "run_id": run_id,
                                  "checks": checks, "optional": plan["optional"], "declared": plan["declared"],
                                  "waive": []}, check_mode=False)["gate"]


def _all(plan, **statuses):
    required = [n for n in plan["declared"] if n not in plan["optional"]]
    return [{"name": n, "status": statuses.get(n, "pass"),
             "reason": "fio randread 4k 310 IOPS < 500 IOPS" if statuses.get(n) == "fail" else ""}
            for n in required]


def test_subset_rerun_after_a_failed_burn_in_keeps_the_gate_closed(ledger_url, plan):
    ledger = ledger_url
    assert plan["subset"] == ["fio_seq_read"] and "fio_randread_4k" in plan["declared"]
    gate = _record(ledger, "burnin-1", _all(plan, fio_randread_4k="fail"), plan)
    assert (gate["status"], gate["failing"]) == ("fail", ["fio_randread_4k"])
    # the rerun of one test: its result, the node tier's XID scan and the SEL scan (three results, all pass)
    rerun = [{"name": "fio_seq_read", "status": "pass"}, {"name": "xid_node", "status": "pass"},
             {"name": "bmc_sel_scan", "status": "pass"}]
    gate = _record(ledger, "burnin-2", rerun, plan)
    assert gate["status"] == "fail", gate
    assert gate["failing"] == ["fio_randread_4k"]
    assert gate["reason"] == "fio_randread_4k: latest result (run burnin-1): fio randread 4k 310 IOPS < 500 IOPS"
    # rerunning the failed test, now passing, opens it: every required check's latest result passes
    gate = _record(ledger, "burnin-3", [{"name": "fio_randread_4k", "status": "pass"}], plan)
    assert gate["status"] == "pass", gate


def test_a_subset_first_run_does_not_pass_on_what_it_ran(ledger_url, plan):
    """No earlier result at all: the declared checks this run did not carry are not_run, never passed."""
    gate = _record(ledger_url, "burnin-1", [{"name": "fio_seq_read", "status": "pass"}], plan)
    assert gate["status"] == "not_run"
    assert "no result recorded" in gate["reason"]


def test_earlier_results_count_without_declared(ledger_url):
    """A caller that gives no declared list still gates on every check the ledger holds for the node and stage."""
    ledger = ledger_url
    base = {"ledger": ledger, "node": "n1", "stage": "burn_in", "optional": [], "waive": []}
    _gate_ops.gate_record(dict(base, run_id="r1", checks=[{"name": "a", "status": "pass"},
                                                          {"name": "b", "status": "fail", "reason": "bad"}]), False)
    out = _gate_ops.gate_record(dict(base, run_id="r2", checks=[{"name": "a", "status": "pass"}]), False)
    assert (out["gate"]["status"], out["gate"]["failing"]) == ("fail", ["b"])
    # only this run's results are recorded again; the earlier one stays as it was
    assert [r["check"] for r in out["results"]] == ["a"]


def test_a_check_of_this_run_may_depend_on_an_earlier_result(ledger_url):
    ledger = ledger_url
    base = {"ledger": ledger, "node": "n1", "stage": "pre_deployment", "optional": [], "waive": []}
    _gate_ops.gate_record(dict(base, run_id="r1", checks=[
        {"name": "login", "status": "fail", "reason": "401"},
        {"name": "gpus", "status": "not_run", "depends_on": ["login"]}]), False)
    out = _gate_ops.gate_record(dict(base, run_id="r2", checks=[
        {"name": "gpus", "status": "pass", "depends_on": ["login"]}]), False)
    assert out["results"][0]["status"] == "blocked"
    assert out["gate"]["status"] == "fail"
