"""The exercise's return to service, the pure pieces make demo relies on: Slurm's name for a node (the demo's lab
hosts are labN), may_resume judging the latest burn-in run after the drain, the spare back in the pool, and the
timings the demo's summary shows."""

import time

from ansible_collections.symphony.cluster.plugins.module_utils._core import gate_ops as _gate_ops
from ansible_collections.symphony.cluster.plugins.module_utils._core.gate import CheckResult
from ansible_collections.symphony.cluster.plugins.module_utils._core.inventory import read_ledger_view
from ansible_collections.symphony.cluster.plugins.module_utils._core.ledger import open_ledger
from ansible_collections.symphony.cluster.plugins.module_utils._fleet_audit.exercise import may_resume
from ansible_collections.symphony.cluster.plugins.module_utils._fleet_audit import state as _state
from ansible_collections.symphony.cluster.plugins.module_utils._validation.tasks_evict import run_evict, slurm_name

from symphony_demo.exercise import exercise_timings, timing_cells


class FakeSlurm:
    def __init__(self, states):
        self.states, self.calls = dict(states), []

    def node_states(self, nodes=None):
        return {n: {"state": self.states[n]} for n in (nodes or self.states) if n in self.states}

    def drain(self, node, reason, cluster=None):
        self.calls.append(("drain", node))
        self.states[node] = "drained"

    def resume(self, node):
        self.calls.append(("resume", node))
        self.states[node] = "idle"


def _r(check, status, run_id, finished):
    return CheckResult(node="n", stage="burn_in", check=check, status=status, run_id=run_id, started=finished - 1,
                       finished=finished)


def test_slurm_name_defaults_to_the_inventory_name():
    assert slurm_name({"node": "gpu-r01-u26"}) == "gpu-r01-u26"
    assert slurm_name({"node": "gpu-r01-u26", "slurm_node": "lab3"}) == "lab3"


def test_node_evict_drains_the_slurm_name_and_records_the_inventory_name(ledger_path):
    _gate_ops.gate_record({"ledger": ledger_path, "node": "spare1", "stage": "burn_in", "optional": [], "waive": [],
                           "checks": [{"name": "cpu_stress", "status": "pass"}]}, False)
    slurm = FakeSlurm({"lab3": "idle"})
    out = run_evict({"node": "gpu-r01-u26", "slurm_node": "lab3", "reason": "xid", "spares": ["spare1"],
                     "exclude": [], "ledger": ledger_path}, slurm=slurm)
    assert slurm.calls == [("drain", "lab3")] and out["spare"] == "spare1"
    led = open_ledger(ledger_path)
    try:
        assert led.events("gpu-r01-u26", "drain")[-1]["data"]["slurm_node"] == "lab3"
        assert led.events("spare1", "spare_promoted")[-1]["data"]["replaces"] == "gpu-r01-u26"
    finally:
        led.close()


SINGLE_NODE = ["cpu_stress", "dcgm_diag", "gpu_xid_scan", "bmc_sel_scan"]   # what the role passes (rerun)


def test_may_resume_judges_the_latest_burn_in_run_after_the_drain():
    drained = 100.0
    old = [_r("fabric_pairwise", "pass", "b1", 50.0), _r("cabling", "not_run", "b1", 50.0)]
    # a re-burn-in of the single-node tiers: the multi-node fabric results it cannot repeat alone stay older
    quick = [_r("cpu_stress", "pass", "b2", 150.0), _r("bmc_sel_scan", "not_run", "b2", 151.0)]
    assert may_resume(old + quick, "pass", drained, SINGLE_NODE) is None
    assert "did not rerun cabling, fabric_pairwise" in may_resume(old + quick, "pass", drained)   # no list: all
    assert "no burn-in ran after the drain" in may_resume(old, "pass", drained)
    failed = quick + [_r("cpu_stress", "fail", "b3", 200.0)]
    assert may_resume(old + failed, "pass", drained).startswith("the re-burn-in after the drain (run b3) did not pass")
    assert "passed no check" in may_resume([_r("cpu_stress", "not_run", "b4", 150.0)], "pass", drained)
    assert "gate is fail" in may_resume(old + quick, "fail", drained)
    assert "not drained" in may_resume(quick, "pass", None)


def test_resume_uses_the_slurm_name_and_returns_the_spare_to_the_pool(ledger_path):
    for node in ("spare1", "gpu-r01-u26"):
        _gate_ops.gate_record({"ledger": ledger_path, "node": node, "stage": "burn_in", "optional": [], "waive": [],
                               "checks": [{"name": "cpu_stress", "status": "pass"}]}, False)
    _state.exercise_module({"ledger": ledger_path, "node": "gpu-r01-u26", "action": "record_injection",
                            "injection": {"kind": "xid", "message": "NVRM: Xid 79"}}, False)
    slurm = FakeSlurm({"lab3": "idle"})
    run_evict({"node": "gpu-r01-u26", "slurm_node": "lab3", "reason": "xid", "spares": ["spare1"], "exclude": [],
               "ledger": ledger_path}, slurm=slurm)
    assert read_ledger_view(ledger_path)["promoted"] == {"spare1": "gpu-r01-u26"}
    refused = _state.exercise_module({"ledger": ledger_path, "node": "gpu-r01-u26", "action": "resume",
                                      "slurm_node": "lab3"}, False, slurm)
    assert refused.get("failed") and "no burn-in ran after the drain" in refused["msg"]
    time.sleep(0.01)
    _gate_ops.gate_record({"ledger": ledger_path, "node": "gpu-r01-u26", "stage": "burn_in", "optional": [],
                           "waive": [], "checks": [{"name": "cpu_stress", "status": "pass"}]}, False)
    out = _state.exercise_module({"ledger": ledger_path, "node": "gpu-r01-u26", "action": "resume",
                                  "slurm_node": "lab3"}, False, slurm)
    assert out == {"changed": True, "spares_returned": ["spare1"]}
    assert slurm.calls[-1] == ("resume", "lab3")
    assert read_ledger_view(ledger_path)["promoted"] == {}   # spare1 is a spare again

    led = open_ledger(ledger_path)
    try:
        timings = exercise_timings(led, "gpu-r01-u26")
    finally:
        led.close()
    # no audit result marked injected was recorded here: detect is missing, the rest is timed from the events
    assert timings["missing"] == ["detect"] and timings["spare"] == "spare1"
    assert 0 <= timings["drain_s"] <= timings["replace_s"] <= timings["return_s"]
    cells = timing_cells(timings)
    assert cells[0] == "—" and all(c.endswith(" s") for c in cells[1:])


def test_timings_of_a_node_never_exercised_are_all_missing(ledger_path):
    led = open_ledger(ledger_path)
    try:
        timings = exercise_timings(led, "n1")
    finally:
        led.close()
    assert timings["missing"] == ["inject"] and timings["spare"] is None
    assert timing_cells(timings) == ["—"] * 4


def test_a_re_burn_in_that_skipped_the_gpu_tier_does_not_return_an_xid_node():
    drained = 100.0
    before = [_r("dcgm_diag", "pass", "b1", 50.0), _r("gpu_xid_scan", "pass", "b1", 51.0),
              _r("fabric_pairwise", "pass", "b1", 52.0)]
    node_only = [_r("cpu_stress", "pass", "b2", 150.0)]
    why = may_resume(before + node_only, "pass", drained, SINGLE_NODE)
    assert why and "did not rerun dcgm_diag, gpu_xid_scan" in why
    gpu_too = node_only + [_r("dcgm_diag", "pass", "b2", 160.0), _r("gpu_xid_scan", "pass", "b2", 161.0)]
    assert may_resume(before + gpu_too, "pass", drained, SINGLE_NODE) is None
    # a run that started before the drain and finished after it is not a re-burn-in
    straddling = CheckResult(node="n", stage="burn_in", check="cpu_stress", status="pass", run_id="b0", started=90.0,
                             finished=120.0)
    assert "no burn-in ran after the drain" in may_resume(before + [straddling], "pass", drained, SINGLE_NODE)
