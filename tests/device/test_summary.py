"""The device check's summary where the GPU steps ran (issue 20): the part of tests/device that only a GPU machine
reaches, fed here with step outputs in the shapes the steps write (samples.json as the burn_in power checks keep it,
judged by the collection's evaluate_power; a real CPU run of the smoke workload's log) so that the first real run
cannot break on the summary.  The figures below are test inputs, not readings."""

import json
import subprocess
import sys

import pytest

import device_check
import power_trace
from ansible_collections.symphony.cluster.plugins.module_utils._burnin.checks.power import evaluate_power
from ansible_collections.symphony.cluster.plugins.module_utils._host import telemetry as T
from timescale import scaled

TDP = 700.0
WINDOWS = [(4.0 * k, 4.0 * k + 2.0) for k in range(11)]


def _sample(t, power, mask=0x4, temp=60.0):
    return T.Sample(t_s=round(t, 2), gpu=0, power_w=power, temp_c=temp, sm_clock_mhz=1980.0 if power > 300 else 345.0,
                    throttle_mask=mask, throttle=T.decode_throttle(mask))


def _sustained():
    return [_sample(i / 10.0, 90.0 if i < 40 else 690.0, temp=40.0 + min(i, 300) / 10.0) for i in range(700)]


def _pulsating():
    """10 Hz samples of 11 commanded pulses; the first two fall in the load's start-up and stay at idle power."""
    out = []
    for i in range(440):
        t = i / 10.0
        on = any(a + 0.2 <= t < b + 0.1 for a, b in WINDOWS[2:])
        out.append(_sample(t, 680.0 if on else 95.0, mask=0x4 if on else 0x1))
    return out


def _check(tmp_path, name, samples, pulse):
    doc = {"backend": "nvml", "interval_s": 0.1, "tdp_w": TDP, "on_windows": [list(w) for w in WINDOWS] if pulse else [],
           "errors": [], "samples": [s.to_dict() for s in samples]}
    path = tmp_path / ("%s-samples.json" % name)
    path.write_text(json.dumps(doc))
    ok, problems, per_gpu = evaluate_power(samples, TDP, 0.9, 1.05, 5, 87, warmup_s=8 if pulse else 10,
                                           on_windows=WINDOWS if pulse else None, expected_gpus=1,
                                           max_power_brake_events=0 if pulse else None)
    return {"name": name, "status": "pass" if ok else "fail", "reason": "; ".join(problems) or "ok",
            "observed": {"per_gpu": per_gpu, "load": "pytorch"}, "evidence": {"samples": str(path)}}


@pytest.fixture(scope="module")
def smoke_log(repo_root):
    script = repo_root / "roles" / "cluster_validation" / "files" / "smoke_train.py"
    return subprocess.run([sys.executable, str(script), "--steps", "3", "--warmup", "1", "--gemm-size", "128",
                           "--layers", "1", "--dim", "64", "--seq", "32"], capture_output=True, text=True,
                          timeout=scaled(120), check=True).stdout


def _work(tmp_path, smoke_log, steps=("nvsmi", "burn_in", "matmul", "smoke_bf16", "smoke_fp8")):
    work, out = tmp_path / "work", tmp_path / "out"
    (work / "steps").mkdir(parents=True)
    out.mkdir()
    for name in steps:
        (work / "steps" / ("%s.json" % name)).write_text(json.dumps({"rc": 0, "limit_s": 60, "wall_s": 5}))
    (work / "nvsmi.json").write_text(json.dumps({
        "status": "ran", "reason": "", "driver_version": "580.159.04", "cuda_version": "13.0", "tdp_w": TDP,
        "tdp_source": "the card's default power limit (nvidia-smi -q -x)", "fixtures": [],
        "gpu": {"product_name": "NVIDIA H200", "default_power_limit_w": TDP, "power_limit_w": TDP}}))
    (work / "burn_in.json").write_text(json.dumps({"run_id": "r1", "checks": [
        {"name": "nvidia_smi_health", "status": "pass", "reason": "1 GPUs healthy"},
        _check(tmp_path, "power_sustained", _sustained(), False),
        _check(tmp_path, "power_pulsating", _pulsating(), True)]}))
    (work / "matmul.json").write_text(json.dumps({"status": "ran", "reason": "", "bf16": {"status": "ran", "tflops": 790.0},
                                                  "fp8": {"status": "not_run", "reason": "torch._scaled_mm failed"}}))
    (work / "smoke-bf16.log").write_text(smoke_log)
    (work / "smoke-fp8.log").write_text("smoke_unsupported: fp8 training needs torchao.float8 (No module named "
                                        "'torchao')\n")
    return work, out


def test_summary_where_every_gpu_step_ran(tmp_path, smoke_log):
    work, out = _work(tmp_path, smoke_log)
    assert device_check.summary(str(work), str(out)) == 0
    doc = json.loads((out / "validation_gpu.json").read_text())     # validated against the schema on the way
    sus, pul = doc["power"]["sustained"], doc["power"]["pulsating"]
    assert sus["status"] == "ran" and sus["check"] == "pass" and sus["fraction_of_tdp"] == pytest.approx(690 / 700, abs=1e-3)
    assert sus["achieved_hz"] == pytest.approx(10.0) and sus["max_temp_c"] == 70.0
    assert sus["throttle_pct"] == {"sw_power_cap": 100.0} and sus["load"] == "pytorch"
    # 11 pulses commanded, the first two lost in the start-up: 9 edges each way, each 0.2 s after its SIGCONT.
    assert pul["pulses_commanded"] == 11 and (pul["edges_rising"], pul["edges_falling"]) == (9, 9)
    assert pul["rise_lag_s"] == pytest.approx(0.2) and (pul["on_power_w"], pul["off_power_w"]) == (680.0, 95.0)
    bf16 = doc["smoke"]["bf16"]
    assert bf16["status"] == "ran" and bf16["peak_tflops"] == 989.4 and bf16["convention"] == "torchtitan"
    assert bf16["mfu_pct_vs_measured"] == pytest.approx(bf16["mfu_pct"] * 989.4 / 790.0, abs=1e-3)
    assert bf16["disagrees"] is False          # against the workload's own GEMM peak, ours is its own figure
    assert doc["smoke"]["fp8"] == {"status": "not_run", "reason": "fp8 training needs torchao.float8 (No module "
                                                                  "named 'torchao')"}
    assert doc["matmul"]["bf16_tflops"] == 790.0 and doc["matmul"]["fp8_reason"] == "torch._scaled_mm failed"
    assert doc["complete"] is False            # fp8 did not run
    table = (out / "summary.txt").read_text()
    assert "9 rising / 9 falling seen for 11 pulses commanded (rise 0.2 s)" in table
    assert "NVIDIA H200, driver 580.159.04, CUDA 13.0" in table
    assert "bf16 790.0 TFLOP/s, fp8 not_run: torch._scaled_mm failed" in table
    assert "sw_power_cap (sustained 100% of samples)" in table
    assert (out / "power.png").exists() == (power_trace.pyplot is not None)


def test_a_step_that_timed_out_or_never_ran_is_not_run_with_why(tmp_path, smoke_log):
    work, out = _work(tmp_path, smoke_log, steps=("nvsmi", "burn_in"))
    (work / "matmul.json").unlink()
    (work / "smoke-bf16.log").unlink()
    (work / "steps" / "matmul.json").write_text(json.dumps({"rc": 124, "limit_s": 90, "wall_s": 90}))
    assert device_check.summary(str(work), str(out)) == 0
    doc = json.loads((out / "validation_gpu.json").read_text())
    assert doc["matmul"] == {"status": "not_run", "reason": "matmul: timed out after 90s", "bf16_tflops": None,
                             "fp8_tflops": None}
    assert doc["smoke"]["bf16"] == {"status": "not_run", "reason": "smoke model bf16: the step did not run"}
    # without a measured matmul rate there is no MFU against it, and nothing stands in for one
    assert "bf16_tflops" not in doc["smoke"]["bf16"]


def test_no_swing_no_edges():
    flat = [_sample(i / 10.0, 400.0) for i in range(200)]
    doc = {"samples": [s.to_dict() for s in flat], "tdp_w": TDP, "on_windows": [list(w) for w in WINDOWS[:5]]}
    figures = power_trace.power_summary(doc, None, pulse=True)
    assert (figures["edges_rising"], figures["edges_falling"]) == (0, 0) and "no on/off swing" in figures["edges_reason"]
