"""Power tier: the pass rules over telemetry samples, the 1 Hz sampler, NVML throttle bits."""

import json
import os
import sys
import threading
import time

import pytest

from ansible_collections.symphony.cluster.plugins.module_utils._burnin import plan as P
from ansible_collections.symphony.cluster.plugins.module_utils._burnin.checks import power as C
from ansible_collections.symphony.cluster.plugins.module_utils._burnin.context import TestContext as Context
from ansible_collections.symphony.cluster.plugins.module_utils._burnin.evidence import EvidenceStore
from ansible_collections.symphony.cluster.plugins.module_utils._burnin.executor import CommandResult, Executor
from ansible_collections.symphony.cluster.plugins.module_utils._burnin.kernel_log import KernelLog
from ansible_collections.symphony.cluster.plugins.module_utils._core import sku as _sku
from ansible_collections.symphony.cluster.plugins.module_utils._core.errors import ToolNotFoundError
from ansible_collections.symphony.cluster.plugins.module_utils._host import gpu_load
from ansible_collections.symphony.cluster.plugins.module_utils._host import telemetry as T
from ansible_collections.symphony.cluster.plugins.module_utils._host.parsers.power_csv import parse_query_csv
from timescale import scaled


def _series(power, temp=60.0, mask=0x4, gpus=(0, 1), start=0):
    return [T.Sample(t_s=float(start + i), gpu=g, power_w=p, temp_c=temp, sm_clock_mhz=1980.0, throttle_mask=mask,
                     throttle=T.decode_throttle(mask)) for i, p in enumerate(power) for g in gpus]


def test_throttle_bits_follow_nvml():
    assert T.decode_throttle(0x4) == ["sw_power_cap"]
    assert T.decode_throttle(0x80 | 0x40 | 0x1) == ["gpu_idle", "hw_power_brake_slowdown", "hw_thermal_slowdown"]
    assert T.decode_throttle(0x10000) == ["bit_0x10000"] and T.decode_throttle(None) == []


def test_sustained_tdp_within_band_passes_and_sw_power_cap_is_expected():
    samples = _series([300.0] * 10 + [690.0] * 60)          # ramp, then holding at the 700 W cap
    ok, problems, per_gpu = C.evaluate_power(samples, 700, 0.9, 1.05, 5, 87, warmup_s=10, expected_gpus=2)
    assert ok and problems == []
    assert per_gpu["0"]["mean_power_w"] == 690.0 and per_gpu["0"]["throttle_pct"] == 0.0


def test_low_power_thermal_throttle_hot_and_missing_gpu_fail():
    samples = _series([600.0] * 30, gpus=(0,))                                # 600 W < 0.9 x 700 W
    samples += _series([690.0] * 30, temp=89.0, mask=0x40 | 0x4, gpus=(1,))   # HW thermal slowdown, 89 °C
    ok, problems, per_gpu = C.evaluate_power(samples, 700, 0.9, 1.05, 5, 87, expected_gpus=3)
    assert not ok
    assert "telemetry from 2 GPUs, expected 3" in problems
    assert "GPU 0 mean 600.0 W outside 630.0-735.0 W (0.9-1.05 × TDP 700 W)" in problems
    assert any(p.startswith("GPU 1 thermal/power-brake throttled 100.0% of samples > 5%") for p in problems)
    assert "GPU 1 reached 89 °C ≥ 87 °C" in problems
    assert per_gpu["1"]["throttle_reasons"] == ["hw_thermal_slowdown"]


def test_pulsating_judges_on_phase_and_counts_power_brake_events():
    power = ([690.0] * 5 + [90.0] * 5) * 6                    # 10 s period, 50 % duty
    masks = ([0x4] * 5 + [0x0] * 5) * 6
    masks[22] = masks[42] = 0x80                              # two power-brake events
    samples = [T.Sample(float(i), 0, p, 60.0, 1980.0, m, T.decode_throttle(m)) for i, (p, m) in
               enumerate(zip(power, masks))]
    windows = [(10.0 * k, 10.0 * k + 5) for k in range(6)]
    ok, problems, per_gpu = C.evaluate_power(samples, 700, 0.9, 1.05, 50, 87, on_windows=windows,
                                             max_power_brake_events=0)
    assert per_gpu["0"]["mean_power_w"] == 690.0            # off-phase 90 W not judged
    assert per_gpu["0"]["power_brake_events"] == 2 and problems == ["GPU 0 2 power-brake event(s) > 0"]
    ok, problems, _per_gpu = C.evaluate_power(samples, 700, 0.9, 1.05, 50, 87, on_windows=windows)
    assert ok
    # judged on all samples the square wave averages 390 W: outside the band
    assert not C.evaluate_power(samples, 700, 0.9, 1.05, 50, 87)[0]


def test_real_power_csv_series_from_a_power_stress(tool_text):
    """PKB's nvidia-smi power sampling (a T4-class GPU ramping 16 -> ~70 W) judged against a 70 W TDP."""
    rows = parse_query_csv(tool_text("nvidia-smi-query-power-csv-pkb.txt"))["rows"]
    samples = [T.Sample(float(i), r["index"], r["power.draw"]) for i, r in enumerate(rows)]
    ok, problems, per_gpu = C.evaluate_power(samples, 70, 0.95, 1.05, 5, 87, warmup_s=10)
    assert ok, problems
    assert per_gpu["0"]["samples"] == 81 and per_gpu["0"]["mean_power_w"] == 69.6
    assert per_gpu["0"]["min_power_w"] == 64.91 and per_gpu["0"]["max_power_w"] == 73.24
    ok, problems, per_gpu = C.evaluate_power(samples, 70, 0.95, 1.05, 5, 87, warmup_s=0)   # the ramp counts
    assert not ok and problems == ["GPU 0 mean 65.7 W outside 66.5-73.5 W (0.95-1.05 × TDP 70 W)"]


class _Backend:
    name = "test"

    def __init__(self):
        self.reads = 0

    def read(self):
        self.reads += 1
        if self.reads == 3:
            raise RuntimeError("NVML_ERROR_GPU_IS_LOST")
        return [{"gpu": 0, "power_w": 650.0 + self.reads, "temp_c": 70.0, "sm_clock_mhz": 1980.0,
                 "throttle_mask": 0x4}]


class _ClockedBackend(_Backend):
    """_Backend on a fake clock: each read costs 10 ms, read 5 costs 70 ms (longer than the 50 ms interval); the
    sampler is stopped after 12 reads, so the test does not depend on how busy the machine is."""

    def __init__(self):
        super().__init__()
        self.now = 100.0
        self.sampler = None

    def clock(self):
        return self.now

    def read(self):
        self.now += 0.07 if self.reads == 4 else 0.01
        if self.reads == 11:
            self.sampler._stop.set()
        return super().read()


class _FakeWait(threading.Event):
    """The sampler's stop event, whose wait() advances the fake clock instead of sleeping."""

    def __init__(self, backend):
        super().__init__()
        self.backend = backend

    def wait(self, timeout=None):
        self.backend.now += timeout or 0
        return self.is_set()


def test_sampler_runs_on_an_absolute_schedule_and_survives_a_failed_read():
    backend = _ClockedBackend()
    sampler = T.Sampler(backend, interval_s=0.05, clock=backend.clock)
    sampler._stop = _FakeWait(backend)
    backend.sampler = sampler
    sampler.start()._thread.join(timeout=scaled(30))   # the backend stops it after 12 reads
    samples = sampler.stop()
    assert backend.reads == 12 and len(samples) == 11
    assert len(sampler.errors) == 1 and "GPU_IS_LOST" in sampler.errors[0]
    assert samples[0].throttle == ["sw_power_cap"] and samples[0].power_w == 651.0
    # start + n x interval: the slow read (t=0.20 s) is followed at once by the late one (0.27 s), then the schedule
    # is back on 50 ms steps instead of drifting by the 60 ms it lost
    assert [s.t_s for s in samples] == [0.0, 0.05, 0.15, 0.2, 0.27, 0.3, 0.35, 0.4, 0.45, 0.5, 0.55]
    csv_text = T.samples_to_csv(samples)
    assert csv_text.splitlines()[0] == ",".join(T.SAMPLE_FIELDS) and "|" not in csv_text.splitlines()[1]


def test_no_gpu_telemetry_here_names_every_source():
    try:
        T.open_backend()
    except Exception as exc:   # ToolNotFoundError: the power test becomes not_run with this reason
        assert type(exc).__name__ == "ToolNotFoundError"
        assert "nvml:" in exc.message and "nvidia-smi: nvidia-smi not found" in exc.message
        assert "rocm-smi: rocm-smi not found" in exc.message
    else:   # pragma: no cover - only on a machine with a GPU
        raise AssertionError("a GPU telemetry source opened on a machine without GPUs")


class _SteadyBackend:
    """Eight GPUs at TDP, no throttle: what a healthy node under load reports."""

    name = "fake"

    def read(self):
        return [{"gpu": i, "power_w": 700.0, "temp_c": 60.0, "sm_clock_mhz": 1980.0, "throttle_mask": 0}
                for i in range(8)]

    def close(self):
        pass


def test_pulsating_power_test_drives_the_load_as_a_process_group(repo_root, tmp_path, monkeypatch):
    """The load runs as a spawned process group, paused and resumed on the square wave; its output is
    evidence and it is gone when the test ends."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    load = bindir / "gpu_burn"
    load.write_text("#!/bin/sh\necho \"load $*\"\necho $$ > %s\nsleep \"$2\"\n" % (tmp_path / "pid"))
    load.chmod(0o755)
    monkeypatch.setenv("PATH", "%s:/usr/bin:/bin" % bindir)
    monkeypatch.setattr(C.telemetry, "open_backend", lambda prefer: _SteadyBackend())
    manifest = _sku.load_manifest(str(repo_root / "skus" / "hgx_h100_supermicro.yml"))
    # this test is about the process group; the 50 ms edge rule is test_burnin_pulse's (on a 2-core box shared by
    # parallel test runs a real sleep can overshoot it, and the check is then rightly not_run)
    test = next(t for t in P.build_plan(manifest, overrides={"power_pulsating": {
        "timeout_s": 12, "params": {"duration_s": 3, "period_s": 3, "duty_cycle": 0.7, "sample_interval_s": 0.1,
                                    "warmup_s": 0, "max_edge_error_ms": 1000}}}) if t.name == "power_pulsating")
    kmsg = tmp_path / "kmsg"
    kmsg.write_text("6,1,1000000,-;Linux version 6.1\n")
    store = EvidenceStore(str(tmp_path / "ev"), "n1", "r1")
    ctx = Context(test, "n1", manifest, "production", Executor(), store, "power/power_pulsating/attempt-1",
                  KernelLog(source="kmsg", kmsg_path=str(kmsg)), time.monotonic() + test.timeout_s)
    outcome = C.check_power_pulsating(ctx)
    assert outcome.status == "pass", outcome.reason
    assert (tmp_path / "ev" / ctx.evidence["load_output"]).read_text().startswith("load -tc 3")
    assert ctx.evidence["load_output"] in store.files
    samples = json.loads((tmp_path / "ev" / ctx.evidence["samples"]).read_text())
    assert samples["on_windows"] and all(end is not None for _start, end in samples["on_windows"])
    pid = int((tmp_path / "pid").read_text())
    assert not os.path.exists("/proc/%d" % pid) or "Z" in open("/proc/%d/stat" % pid).read().split()[2]


def test_hw_thermal_slowdown_events_fail_and_clocks_are_recorded():
    """NVML HwThermalSlowdown (0x40) engaging under load is an event the power test fails on, however brief."""
    masks = [0x4] * 20
    masks[7] = masks[8] = 0x40 | 0x4                           # one event of two samples: 10 % of the samples
    samples = [T.Sample(float(i), 0, 690.0, 80.0, 1980.0 - (300.0 if m & 0x40 else 0.0), m, T.decode_throttle(m))
               for i, m in enumerate(masks)]
    ok, problems, per_gpu = C.evaluate_power(samples, 700, 0.9, 1.05, 50, 87, max_hw_thermal_events=0)
    assert not ok and problems == ["GPU 0 1 hardware thermal slowdown event(s) > 0"]
    assert per_gpu["0"]["hw_thermal_events"] == 1 and per_gpu["0"]["min_sm_clock_mhz"] == 1680.0
    assert C.evaluate_power(samples, 700, 0.9, 1.05, 50, 87)[0]   # not judged without the threshold


class _NoToolsExecutor(Executor):
    """No gpu_burn or dcgmproftester on the node; the PyTorch probe answers ``probe_rc``/``probe_out``."""

    def __init__(self, probe_rc, probe_out):
        super().__init__()
        self.probe_rc, self.probe_out, self.argvs = probe_rc, probe_out, []

    def which(self, tool):
        return None

    def run(self, argv, timeout_s, cwd=None):
        self.argvs.append(list(argv))
        return CommandResult(list(argv), self.probe_rc, self.probe_out, "", 0.1)


def _power_ctx(repo_root, tmp_path, executor, load="auto"):
    manifest = _sku.load_manifest(str(repo_root / "skus" / "hgx_h100_supermicro.yml"))
    test = next(t for t in P.build_plan(manifest, overrides={"power_sustained": {"params": {"load": load}}})
                if t.name == "power_sustained")
    store = EvidenceStore(str(tmp_path / "ev"), "n1", "r1")
    return Context(test, "n1", manifest, "production", executor, store, "power/power_sustained/attempt-1",
                   KernelLog(source="kmsg", kmsg_path=str(tmp_path / "kmsg")), time.monotonic() + 60)


def test_pytorch_load_where_gpu_burn_and_dcgm_are_absent(repo_root, tmp_path, monkeypatch):
    """auto falls back to the built-in PyTorch load only when this interpreter's PyTorch sees a CUDA device."""
    monkeypatch.setattr(C.importlib.util, "find_spec", lambda name: object())
    executor = _NoToolsExecutor(0, "PyTorch 2.11.0, 1 CUDA device(s): NVIDIA H200\n")
    argv, tool, name = C._load_command(_power_ctx(repo_root, tmp_path, executor), 60)
    assert argv == [sys.executable, "-c", gpu_load.PYTORCH_LOAD, "60"] and tool == sys.executable
    assert name == "pytorch" and executor.argvs == [[sys.executable, "-c", gpu_load.PYTORCH_PROBE]]


def test_no_load_generator_says_why_pytorch_cannot_serve(repo_root, tmp_path, monkeypatch):
    monkeypatch.setattr(C.importlib.util, "find_spec", lambda name: object())
    executor = _NoToolsExecutor(gpu_load.NO_CUDA_RC, "PyTorch 2.13.0+cpu sees no CUDA device\n")
    with pytest.raises(ToolNotFoundError, match=r"PyTorch with a CUDA device\) on this node; "
                                                r"PyTorch 2.13.0\+cpu sees no CUDA device$"):
        C._load_command(_power_ctx(repo_root, tmp_path, executor), 60)
    monkeypatch.setattr(C.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ToolNotFoundError, match="PyTorch is not installed for"):
        C._load_command(_power_ctx(repo_root, tmp_path, _NoToolsExecutor(0, "")), 60)
    # load: gpu_burn names one generator: no fallback to PyTorch
    with pytest.raises(ToolNotFoundError, match=r"on this node$"):
        C._load_command(_power_ctx(repo_root, tmp_path, _NoToolsExecutor(0, ""), load="gpu_burn"), 60)


def test_pytorch_programs_compile_and_share_the_no_cuda_exit_status():
    for name, text in (("probe", gpu_load.PYTORCH_PROBE), ("load", gpu_load.PYTORCH_LOAD)):
        compile(text, name, "exec")
        assert "sys.exit(%d)" % gpu_load.NO_CUDA_RC in text


class _NoReasonsBackend(_SteadyBackend):
    """rocm-smi/amd-smi shape: no throttle reasons (throttle_mask None); ``temp`` None = no temperature either."""

    name = "rocm-smi"

    def __init__(self, temp=60.0):
        self.temp = temp

    def read(self):
        return [{"gpu": i, "power_w": 700.0, "temp_c": self.temp, "sm_clock_mhz": 1700.0, "throttle_mask": None}
                for i in range(8)]


def test_unreported_throttle_reasons_are_unknown_never_zero():
    samples = [T.Sample(t_s=float(i), gpu=0, power_w=700.0, temp_c=None, throttle_mask=None) for i in range(5)]
    ok, problems, per_gpu = C.evaluate_power(samples, 700, 0.9, 1.05, 5, 87, max_hw_thermal_events=0)
    assert ok and per_gpu["0"]["throttle_pct"] is None and per_gpu["0"]["hw_thermal_events"] is None
    assert per_gpu["0"]["unmeasured"] == ["temperature", "throttle reasons"]


@pytest.mark.parametrize("temp,declared,status,words", [
    (60.0, {}, "pass", "throttle reasons not reported by rocm-smi (not judged)"),
    (60.0, {"max_throttle_pct": 5}, "not_run", "rocm-smi reported no throttle reasons"),
    (None, {}, "not_run", "reported no temperature or throttle reasons"),
])
def test_a_power_test_never_claims_what_the_backend_did_not_measure(repo_root, tmp_path, monkeypatch, temp,
                                                                    declared, status, words):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "gpu_burn").write_text("#!/bin/sh\nsleep \"$2\"\n")
    (bindir / "gpu_burn").chmod(0o755)
    monkeypatch.setenv("PATH", "%s:/usr/bin:/bin" % bindir)
    monkeypatch.setattr(C.telemetry, "open_backend", lambda prefer: _NoReasonsBackend(temp))
    manifest = _sku.load_manifest(str(repo_root / "skus" / "hgx_h100_supermicro.yml"))
    test = next(t for t in P.build_plan(manifest, overrides={"power_sustained": {
        "timeout_s": 12, "params": {"duration_s": 1, "sample_interval_s": 0.1, "warmup_s": 0},
        "thresholds": declared}}) if t.name == "power_sustained")
    kmsg = tmp_path / "kmsg"
    kmsg.write_text("6,1,1000000,-;Linux version 6.1\n")
    ctx = Context(test, "n1", manifest, "production", Executor(), EvidenceStore(str(tmp_path / "ev"), "n1", "r1"),
                  "power/power_sustained/attempt-1", KernelLog(source="kmsg", kmsg_path=str(kmsg)),
                  time.monotonic() + test.timeout_s)
    outcome = C.check_power_sustained(ctx)
    assert outcome.status == status and words in outcome.reason, outcome.reason
