"""The pure modules end to end through ``main()``: real results, check mode, and the common failure shape."""

import json

from ansible_collections.symphony.cluster.plugins.modules import (
    gate_info,
    gate_record,
    mfu_calc,
    telemetry_outliers,
    training_manifest,
)


def test_mfu_calc_from_a_given_throughput(run_main):
    ok, res = run_main(mfu_calc, {"model": "llama3_8b", "tokens_per_s_per_device": 6012.0, "gpu": "h100_sxm",
                                  "precision": "bf16"})
    assert ok and res["changed"] is False
    assert res["mfu"]["convention"] == "torchtitan" and 0 < res["mfu"]["mfu_pct"] < 100


def test_mfu_calc_needs_a_throughput_or_a_log(run_main):
    ok, res = run_main(mfu_calc, {"model": "llama3_8b"})
    assert not ok and res["msg"] == "one of the following is required: tokens_per_s_per_device, log"


def test_telemetry_outliers_on_a_file(run_main, tmp_path):
    path = tmp_path / "telemetry.jsonl"
    lines = [{"node": "lab%d" % n, "gpu": 0, "temp_c": 55.0 + n * 0.3, "power_w": 300.0} for n in range(4)
             for _sample in range(10)]
    lines += [{"node": "lab2", "gpu": 0, "temp_c": 80.0}] * 11
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    ok, res = run_main(telemetry_outliers, {"path": str(path)})
    assert ok and res["changed"] is False
    assert res["status"] == "fail" and res["nodes"] == ["lab2"] and res["gpus"] == 4


def test_training_manifest_renders(run_main):
    ok, res = run_main(training_manifest, {"name": "cv", "image": "ghcr.io/pytorch/torchtitan:2026.11", "nodes": 2,
                                           "program": "torchtitan.train", "module": True})
    assert ok and res["changed"] is False
    assert res["manifest"]["kind"] == "PyTorchJob" and res["manifest"]["metadata"]["name"] == "cv"


CHECKS = [{"name": "login", "status": "pass"},
          {"name": "inventory", "status": "fail", "reason": "7 GPUs, expected 8", "depends_on": ["login"]}]


def test_gate_record_then_gate_info_on_a_tmp_ledger(run_main, tmp_path):
    ledger = str(tmp_path / "ledger.sqlite")
    args = {"ledger": ledger, "node": "n1", "stage": "pre_deployment", "checks": CHECKS, "run_id": "r1"}
    ok, planned = run_main(gate_record, args, check_mode=True)
    assert ok and planned["changed"] is False and planned["recorded"] is False
    assert not (tmp_path / "ledger.sqlite").exists()
    ok, res = run_main(gate_record, args)
    assert ok and res["changed"] is True and res["gate"]["status"] == "fail"
    assert res["gate"]["reason"] == "inventory: 7 GPUs, expected 8"
    ok, info = run_main(gate_info, {"ledger": ledger, "node": "n1", "history": True})
    assert ok and info["changed"] is False
    assert info["positions"]["n1"] == {"stage": "pre_deployment", "gate": "fail",
                                       "reason": "inventory: 7 GPUs, expected 8"}
    assert [r["check"] for r in info["history"]] == ["login", "inventory"]


def test_gate_info_history_needs_a_node(run_main, tmp_path):
    ok, res = run_main(gate_info, {"ledger": str(tmp_path / "l.sqlite"), "history": True})
    assert not ok and res["msg"] == "history is True but all of the following are missing: node"


def test_a_symphony_error_has_the_common_failure_shape(run_main, tmp_path):
    """run_module turns the error into msg + error (class) + where + details, and changed from the details."""
    bad = [{"name": "inventory", "status": "pass", "depends_on": ["nope"]}]
    ok, res = run_main(gate_record, {"ledger": str(tmp_path / "l.sqlite"), "node": "n1", "stage": "burn_in",
                                     "checks": bad})
    assert not ok and res["failed"] is True
    assert res["error"] == "GateError" and res["where"] == "burn_in" and res["details"] == {}
    assert res["msg"] == "burn_in: check 'inventory' depends on unknown check 'nope'"
    assert res["changed"] is False
