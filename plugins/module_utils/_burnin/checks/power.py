# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Power-tier test kinds: sustained and pulsating TDP load with 1 Hz GPU telemetry, judged by :func:`evaluate_power`.

The load (gpu-burn, dcgmproftester, or the built-in PyTorch load of :mod:`_host.gpu_load` where neither is
installed) runs as a :func:`_host.process.spawn` process group: the pulsating load is driven by
:class:`_burnin.pulse.PulseDriver` (SIGSTOP/SIGCONT on the SKU's period, duty cycle and ramp) while
:class:`_host.telemetry.Sampler` reads the GPUs.  A wave whose edges missed their schedule by more than
``params.max_edge_error_ms`` (50) is not the load the SKU declared: the test is ``not_run`` saying so.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import time
from typing import Any

from ..._core.errors import ManifestError, ToolNotFoundError
from ..._core.gate import Outcome, failed, not_run, passed
from ..._host import telemetry
from ..._host.gpu_load import NO_CUDA_RC, PYTORCH_LOAD, PYTORCH_PROBE
from ..._host.process import spawn
from ..context import TestContext
from ..kernel_log import kernel_findings
from ..pulse import PulseDriver
from .common import gpu_expectation, where_in_sku


def evaluate_power(samples: list[telemetry.Sample], tdp_w: float, min_fraction: float, max_fraction: float,
                   max_throttle_pct: float, max_temp_c: float, warmup_s: float = 0.0,
                   on_windows: list[tuple[float, float]] | None = None, expected_gpus: int | None = None,
                   max_power_brake_events: float | None = None,
                   max_hw_thermal_events: float | None = None) -> tuple[bool, list[str], dict[str, dict]]:
    """Judge power telemetry (1 Hz samples) against the SKU.

    ``samples``: :class:`telemetry.Sample` list; ``tdp_w`` (W); the mean power of each GPU over the
    load window must lie within ``[min_fraction, max_fraction] × tdp_w``; ``max_throttle_pct``:
    share of load samples with a thermal or power-brake throttle reason (NVML
    ``HwThermalSlowdown``/``SwThermalSlowdown``/``HwSlowdown``/``HwPowerBrakeSlowdown``) must stay
    at or below it (the SW power cap at the limit is expected under TDP load and not counted);
    ``max_temp_c``: every sample below it.  The load window starts after ``warmup_s``; with
    ``on_windows`` (pulsating load, ``[(start_s, end_s)]``) power is judged on on-phase samples
    only (skipping each phase's first second of ramp).  ``max_power_brake_events``: rising edges of
    ``hw_power_brake_slowdown`` per GPU allowed (None: only the throttle share is judged);
    ``max_hw_thermal_events`` likewise for ``hw_thermal_slowdown`` (the GPU's hardware thermal protection).
    ``per_gpu`` also records the SM clock under load (min/mean MHz) and the throttle reasons seen, and
    ``unmeasured``: ``temperature`` and/or ``throttle reasons`` where no sample carried them (those rules are then
    not judged, their values None: the caller decides what an unmeasured rule means).
    Returns ``(ok, problems, per_gpu)``.
    """
    problems: list[str] = []
    per_gpu: dict[str, dict[str, Any]] = {}
    loaded = [s for s in samples if s.t_s >= warmup_s]
    if not loaded:
        return False, ["no telemetry sample after the %gs warm-up" % warmup_s], per_gpu
    gpus = sorted({s.gpu for s in samples})
    if expected_gpus is not None and len(gpus) < expected_gpus:
        problems.append("telemetry from %d GPUs, expected %d" % (len(gpus), expected_gpus))
    low, high = tdp_w * min_fraction, tdp_w * max_fraction
    for gpu in gpus:
        mine = [s for s in loaded if s.gpu == gpu]
        judged = mine
        if on_windows:
            judged = [s for s in mine if any(a + 1.0 <= s.t_s < b for a, b in on_windows)]
        powers = [s.power_w for s in judged if s.power_w is not None]
        temps = [s.temp_c for s in samples if s.gpu == gpu and s.temp_c is not None]
        throttled = [s for s in mine if set(s.throttle) & set(telemetry.THERMAL_THROTTLE + telemetry.POWER_BRAKE_THROTTLE)]
        # a backend without throttle reasons (rocm-smi, amd-smi, a CSV poller without the field) measured none:
        # the throttle share and the brake/thermal events are unknown, never zero
        reasons_read = any(s.throttle_mask is not None for s in mine)
        entry: dict[str, Any] = {"samples": len(mine), "judged": len(powers),
                                 "mean_power_w": round(sum(powers) / len(powers), 1) if powers else None,
                                 "min_power_w": min(powers) if powers else None, "max_power_w": max(powers) if powers else None,
                                 "max_temp_c": max(temps) if temps else None,
                                 "throttle_pct": round(100.0 * len(throttled) / len(mine), 1) if mine and reasons_read
                                 else None,
                                 "throttle_reasons": sorted({r for s in throttled for r in s.throttle
                                                             if r in telemetry.THERMAL_THROTTLE + telemetry.POWER_BRAKE_THROTTLE})}
        clocks = [s.sm_clock_mhz for s in judged if s.sm_clock_mhz is not None]
        entry["min_sm_clock_mhz"] = min(clocks) if clocks else None
        entry["mean_sm_clock_mhz"] = round(sum(clocks) / len(clocks), 1) if clocks else None
        for reason, key, limit, words in (("hw_power_brake_slowdown", "power_brake_events", max_power_brake_events,
                                           "power-brake"),
                                          ("hw_thermal_slowdown", "hw_thermal_events", max_hw_thermal_events,
                                           "hardware thermal slowdown")):
            edges = _rising_edges(mine, reason) if reasons_read else None
            entry[key] = edges
            if limit is not None and edges is not None and edges > limit:
                problems.append("GPU %d %d %s event(s) > %g" % (gpu, edges, words, limit))
        per_gpu[str(gpu)] = entry
        if not powers:
            problems.append("GPU %d: no power reading in the load window" % gpu)
        elif not low <= entry["mean_power_w"] <= high:
            problems.append("GPU %d mean %.1f W outside %.1f-%.1f W (%g-%g × TDP %g W)"
                            % (gpu, entry["mean_power_w"], low, high, min_fraction, max_fraction, tdp_w))
        if entry["throttle_pct"] is not None and entry["throttle_pct"] > max_throttle_pct:
            problems.append("GPU %d thermal/power-brake throttled %.1f%% of samples > %g%% (%s)"
                            % (gpu, entry["throttle_pct"], max_throttle_pct, ", ".join(entry["throttle_reasons"])))
        if entry["max_temp_c"] is not None and entry["max_temp_c"] >= max_temp_c:
            problems.append("GPU %d reached %.0f °C ≥ %g °C" % (gpu, entry["max_temp_c"], max_temp_c))
        entry["unmeasured"] = ([] if temps else ["temperature"]) + ([] if reasons_read else ["throttle reasons"])
    return not problems, problems, per_gpu


def _rising_edges(samples: list[telemetry.Sample], reason: str) -> int:
    """How many times ``reason`` turned on in ``samples`` (one GPU, in time order)."""
    edges, was = 0, False
    for sample in samples:
        now = reason in sample.throttle
        edges += 1 if now and not was else 0
        was = now
    return edges


def _load_command(ctx: TestContext, duration_s: float) -> tuple[list[str], str, str]:
    """``(argv, executable, name)`` of the load for ``params.load``: ``auto`` takes gpu_burn, then dcgmproftester,
    then ``pytorch`` (this interpreter's PyTorch, when it sees a CUDA device: :mod:`_host.gpu_load`)."""
    load = ctx.params.get("load", "auto")
    why = ""
    if load in ("auto", "gpu_burn"):
        tool = ctx.which("gpu_burn", "gpu-burn")
        if tool:
            return ([tool] + [str(a) for a in ctx.params.get("load_args", ["-tc"])] + [str(int(duration_s))], tool,
                    os.path.basename(tool))
    if load in ("auto", "dcgmproftester"):
        tool = ctx.which("dcgmproftester12", "dcgmproftester11", "dcgmproftester")
        if tool:
            return [tool, "--no-dcgm-validation", "-t", "1004", "-d", str(int(duration_s))], tool, os.path.basename(tool)
    if load in ("auto", "pytorch"):
        if importlib.util.find_spec("torch") is None:
            why = "; PyTorch is not installed for %s" % sys.executable
        else:
            probe = ctx.run([sys.executable, "-c", PYTORCH_PROBE], "pytorch-probe", timeout_s=120)
            if probe.rc == 0:
                return [sys.executable, "-c", PYTORCH_LOAD, str(int(duration_s))], sys.executable, "pytorch"
            why = "; %s" % ((probe.stdout + probe.stderr).strip().splitlines() or ["PyTorch probe exited %s" % probe.rc])[-1]
            if probe.rc != NO_CUDA_RC:
                why += " (probe exited %s)" % probe.rc
    raise ToolNotFoundError("no GPU load generator (gpu_burn, dcgmproftester or PyTorch with a CUDA device) on this "
                            "node%s" % why)


def _power_test(ctx: TestContext, pulse: bool) -> Outcome:
    """Shared body of the power tests.

    thresholds: ``target_w`` (default ``bom.gpus.tdp_w``), ``min_fraction_of_tdp`` (0.9),
    ``max_fraction_of_tdp`` (1.05), ``max_throttle_pct`` (5), ``max_temp_c`` (default
    ``bom.gpus.max_operating_temp_c``, else 87), ``max_xid`` (0), ``max_power_brake_events`` (pulsating: 0).
    ``max_hw_thermal_events`` (0: the GPU's hardware thermal protection must not engage under load).
    ``max_sel_critical`` is judged on the controller from the BMC SEL, not here.
    params: ``duration_s`` (300), ``warmup_s`` (10), ``sample_interval_s`` (1), ``period_s`` (10),
    ``duty_cycle`` (0.5), ``ramp_s`` (0) and ``ramp_step_s`` (0.1), ``max_edge_error_ms`` (50), ``load``
    (auto|gpu_burn|dcgmproftester|pytorch).
    """
    count, gpus = gpu_expectation(ctx)
    tdp = ctx.threshold("target_w", gpus.get("tdp_w"))
    max_temp = ctx.threshold("max_temp_c", gpus.get("max_operating_temp_c") or 87)
    if tdp is None:
        raise ManifestError("power tests need thresholds.target_w or bom.gpus.tdp_w", where=where_in_sku(ctx))
    low, high = float(ctx.threshold("min_fraction_of_tdp", 0.9)), float(ctx.threshold("max_fraction_of_tdp", 1.05))
    max_throttle, max_xid = float(ctx.threshold("max_throttle_pct", 5)), float(ctx.threshold("max_xid", 0))
    brakes = ctx.threshold("max_power_brake_events", 0 if pulse else None)
    hw_thermal = ctx.threshold("max_hw_thermal_events", 0)
    duration = float(ctx.params.get("duration_s", 300))
    warmup = float(ctx.params.get("warmup_s", 10))
    period, duty = float(ctx.params.get("period_s", 10)), float(ctx.params.get("duty_cycle", 0.5))
    if pulse and not (0 < duty < 1 and period >= 2):
        raise ManifestError("power_pulsating needs params.period_s ≥ 2 and 0 < params.duty_cycle < 1",
                            where=where_in_sku(ctx))
    backend = telemetry.open_backend(tuple(ctx.params.get("telemetry", telemetry.PREFERENCE)))
    argv, tool, load_name = _load_command(ctx, duration)
    xid_note = ""
    try:
        marker = ctx.kernel_log.snapshot()
    except ToolNotFoundError as exc:
        marker, xid_note = None, exc.message
    sampler = telemetry.Sampler(backend, float(ctx.params.get("sample_interval_s", 1.0))).start()
    wave = None
    rel, out_path = ctx.evidence_store.reserve(ctx.rel_dir, "load.stdout.txt")
    with open(out_path, "w", encoding="utf-8") as out:
        try:
            # a pulsed load is paused with SIGSTOP: a guard ends it if this module dies mid-pause
            load = spawn(argv, output=out, cwd=os.path.dirname(tool), orphan_guard_s=30 if pulse else None)
            t0 = time.monotonic()
            try:
                if pulse:
                    driver = PulseDriver(load.signal, period, duty, ramp_s=float(ctx.params.get("ramp_s", 0)),
                                         step_s=float(ctx.params.get("ramp_step_s", 0.1)),
                                         clock=lambda: sampler.clock() - sampler.started, sleep=ctx.sleep)
                    wave = driver.run(duration, stop=lambda: load.poll() is not None or ctx.remaining() <= 5)
                while not pulse and load.poll() is None:
                    if time.monotonic() - t0 >= duration + 60 or ctx.remaining() <= 5:
                        break
                    ctx.sleep(0.2)
            finally:
                load.stop(grace_s=30)
        finally:
            samples = sampler.stop()
            backend.close()
    ctx.evidence["load_output"] = rel
    windows = [list(w) for w in wave.windows] if wave is not None else []
    ctx.save_text("samples.csv", telemetry.samples_to_csv(samples))
    ctx.save_json("samples.json", {"backend": backend.name, "interval_s": sampler.interval_s,
                                   "tdp_w": tdp, "on_windows": windows, "errors": sampler.errors,
                                   "edges": wave.edges if wave is not None else [],
                                   "samples": [s.to_dict() for s in samples]})
    edge_limit = float(ctx.params.get("max_edge_error_ms", 50))
    if wave is not None and (wave.max_edge_error_ms is None or wave.max_edge_error_ms > edge_limit):
        return not_run("the pulsating load missed its schedule (largest edge error %s ms > %g ms): the wave the SKU "
                       "declares was not applied" % (wave.max_edge_error_ms, edge_limit))
    ok, problems, per_gpu = evaluate_power(samples, float(tdp), low, high, max_throttle, float(max_temp), warmup,
                                           list(windows) if pulse else None, count,
                                           None if brakes is None else float(brakes),
                                           None if hw_thermal is None else float(hw_thermal))
    xids = []
    if marker is not None:
        _text, records = ctx.kernel_log.since(marker)
        xids = kernel_findings(records)["xids"]
        if sum(f["count"] for f in xids) > max_xid:
            problems.append("XID during load: %s" % ", ".join("Xid %d x%d (%s)" % (f["xid"], f["count"], f["description"])
                                                              for f in xids))
    else:
        problems.append("kernel log not readable, XIDs not checked: %s" % xid_note)
    observed = {"per_gpu": per_gpu, "xids": xids, "samples": len(samples), "backend": backend.name,
                "load": load_name}
    if wave is not None:
        observed["max_edge_error_ms"] = wave.max_edge_error_ms
    expected = {"mean_power_w": "%g-%g × %g W" % (low, high, tdp), "max_throttle_pct": max_throttle,
                "max_temp_c": max_temp, "max_xid": max_xid}
    if pulse:
        expected.update(period_s=period, duty=duty)
    if problems:
        return failed("; ".join(problems), "check PSUs and power cabling for power-brake events, fans/coolant and "
                                           "heatsink contact for thermal throttling; replace the GPU or PSU that "
                                           "stands out", observed=observed, expected=expected)
    unmeasured = sorted({u for entry in per_gpu.values() for u in entry["unmeasured"]})
    # temperature is always judged (bom.gpus.max_operating_temp_c); throttle rules only where the SKU declares them
    declared = set(ctx.test.thresholds) & {"max_throttle_pct", "max_power_brake_events", "max_hw_thermal_events"}
    if "temperature" in unmeasured or ("throttle reasons" in unmeasured and declared):
        return not_run("%s reported no %s during the load: %s not judged" % (
            backend.name, " or ".join(unmeasured), ", ".join(sorted(declared | {"max_temp_c"}))))
    return passed(observed=observed, expected=expected,
                  reason="%s load %gs: %d GPUs within %g-%g × %g W, %s, below %g °C, no XID"
                         % ("pulsating" if pulse else "sustained", duration, len(per_gpu), low, high, tdp,
                            "throttle reasons not reported by %s (not judged)" % backend.name
                            if unmeasured else "throttle ≤ %g%%" % max_throttle, max_temp))


def check_power_sustained(ctx: TestContext) -> Outcome:
    """Sustained TDP load for ``params.duration_s`` sampled at 1 Hz; judged by :func:`evaluate_power` and no XID."""
    return _power_test(ctx, pulse=False)


def check_power_pulsating(ctx: TestContext) -> Outcome:
    """Pulsating load (``params.period_s``, ``params.duty_cycle``) that mimics a training step: the load
    process is stopped (SIGSTOP) and resumed (SIGCONT) on that square wave; same rules on on-phase power,
    plus power-brake events."""
    return _power_test(ctx, pulse=True)
