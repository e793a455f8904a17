# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""GPU telemetry sampled at 1 Hz during power tests: power (W), temperature (°C), SM clock (MHz), throttle reasons.

Backends, in order of preference: NVML through nvidia-ml-py (``pynvml``, optional
import), ``nvidia-smi --query-gpu`` CSV polling, and for AMD ``amd-smi metric --json``
then ``rocm-smi --json`` polling.  Where none can read a GPU, :func:`open_backend` raises
:class:`ToolNotFoundError` with the reasons, and the power test is ``not_run``.

Throttle bits are NVML's ``nvmlClocksEventReason*`` (nvml.h): GpuIdle 0x1,
ApplicationsClocksSetting 0x2, SwPowerCap 0x4, HwSlowdown 0x8, SyncBoost 0x10,
SwThermalSlowdown 0x20, HwThermalSlowdown 0x40, HwPowerBrakeSlowdown 0x80,
DisplayClockSetting 0x100.
"""

from __future__ import annotations

import csv
import io
import threading
import time
from dataclasses import dataclass, field, asdict
from typing import Any, Callable, Protocol, Sequence

from .._core.errors import ParseError, ToolNotFoundError
from .parsers.amd_smi import parse_amd_smi_metric
from .parsers.power_csv import parse_query_csv
from .parsers.rocm_smi import parse_rocm_smi_json
from .process import CommandTimeoutError, run, which

try:
    import pynvml  # nvidia-ml-py
    HAS_PYNVML = True
except ImportError:
    pynvml = None
    HAS_PYNVML = False

THROTTLE_BITS = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clocks_setting",
}
THERMAL_THROTTLE = ("sw_thermal_slowdown", "hw_thermal_slowdown", "hw_slowdown")
POWER_BRAKE_THROTTLE = ("hw_power_brake_slowdown",)
SAMPLE_FIELDS = ("t_s", "gpu", "power_w", "temp_c", "sm_clock_mhz", "throttle_mask", "throttle")


class Backend(Protocol):
    """What :class:`Sampler` reads: ``read()`` -> one dict per GPU (``gpu``, ``power_w``, ``temp_c``,
    ``sm_clock_mhz``, ``throttle_mask``), ``close()`` when done."""

    name: str

    def read(self) -> list[dict[str, Any]]: ...

    def close(self) -> None: ...


def decode_throttle(mask: int | None) -> list[str]:
    """NVML clock-event bitmask -> sorted reason names (unknown bits as ``bit_0x...``)."""
    if mask is None:
        return []
    names = []
    for bit, name in THROTTLE_BITS.items():
        if mask & bit:
            names.append(name)
    rest = mask & ~sum(THROTTLE_BITS)
    if rest:
        names.append("bit_%#x" % rest)
    return sorted(names)


@dataclass
class Sample:
    """One reading of one GPU: ``t_s`` seconds since sampling started."""

    t_s: float
    gpu: int
    power_w: float | None = None
    temp_c: float | None = None
    sm_clock_mhz: float | None = None
    throttle_mask: int | None = None
    throttle: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class NvmlBackend:
    """NVML via nvidia-ml-py."""

    name = "nvml"

    def __init__(self) -> None:
        if not HAS_PYNVML:
            raise ToolNotFoundError("nvidia-ml-py (pynvml) is not installed", where="telemetry")
        try:
            pynvml.nvmlInit()
            count = pynvml.nvmlDeviceGetCount()
        except Exception as exc:  # pynvml raises NVMLError subclasses; any failure means no NVML here
            raise ToolNotFoundError("NVML could not be initialised: %s" % exc, where="telemetry")
        if count == 0:
            raise ToolNotFoundError("NVML reports no GPU", where="telemetry")
        self.handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]

    def read(self) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for index, handle in enumerate(self.handles):
            # _call runs each reader at once, so the lambdas see this iteration's handle
            out.append({"gpu": index,
                        "power_w": _call(lambda: pynvml.nvmlDeviceGetPowerUsage(handle) / 1000.0),
                        "temp_c": _call(lambda: float(pynvml.nvmlDeviceGetTemperature(
                            handle, pynvml.NVML_TEMPERATURE_GPU))),
                        "sm_clock_mhz": _call(lambda: float(pynvml.nvmlDeviceGetClockInfo(
                            handle, pynvml.NVML_CLOCK_SM))),
                        "throttle_mask": _call(lambda: int(
                            pynvml.nvmlDeviceGetCurrentClocksThrottleReasons(handle)))})
        return out

    def close(self) -> None:
        try:
            pynvml.nvmlShutdown()
        except Exception:  # shutting down a broken NVML must not hide the test's result
            pass


def _call(func: Callable[[], Any]) -> Any:
    try:
        return func()
    except Exception:  # one unreadable field is None ("not reported"), never a crash
        return None


class NvidiaSmiBackend:
    """``nvidia-smi --query-gpu`` polling (CSV, no units)."""

    name = "nvidia-smi"
    FIELDS = ("index", "power.draw", "temperature.gpu", "clocks.sm", "clocks_event_reasons.active")

    def __init__(self, binary: str = "nvidia-smi") -> None:
        found = which(binary)
        if not found:
            raise ToolNotFoundError("nvidia-smi not found", where="telemetry")
        self.binary = found
        self.fields = list(self.FIELDS)
        try:
            self.read()
        except ParseError:
            # drivers before 535 name the field clocks_throttle_reasons.active
            self.fields[-1] = "clocks_throttle_reasons.active"
            self.read()

    def read(self) -> list[dict[str, Any]]:
        try:
            res = run([self.binary, "--query-gpu=%s" % ",".join(self.fields), "--format=csv,noheader,nounits"], 10)
        except (ToolNotFoundError, CommandTimeoutError) as exc:
            raise ToolNotFoundError("nvidia-smi could not be run: %s" % exc, where="telemetry")
        if res.rc != 0:
            raise ToolNotFoundError("nvidia-smi exited %d: %s" % (res.rc, (res.stdout + res.stderr)
                                                                  .strip()[:200]), where="telemetry")
        return samples_from_query_csv(res.stdout, self.fields)

    def close(self) -> None:
        pass


def samples_from_query_csv(text: str, fields: Sequence[str]) -> list[dict[str, Any]]:
    """Rows of ``nvidia-smi --query-gpu=<fields> --format=csv,noheader,nounits`` -> reading dicts."""
    parsed = parse_query_csv(text, header=list(fields))
    out = []
    for row in parsed["rows"]:
        mask = None
        for key in ("clocks_event_reasons.active", "clocks_throttle_reasons.active"):
            if row.get(key) is not None:
                mask = int(row[key])
        out.append({"gpu": row["index"], "power_w": row.get("power.draw"), "temp_c": row.get("temperature.gpu"),
                    "sm_clock_mhz": row.get("clocks.sm"), "throttle_mask": mask})
    return out


class _PolledTool:
    """A backend that runs ``binary`` with ``ARGS`` on every read (10 s limit); no throttle reasons."""

    name = ""
    ARGS: tuple[str, ...] = ()

    def __init__(self, binary: str | None = None) -> None:
        found = which(binary or self.name)
        if not found:
            raise ToolNotFoundError("%s not found" % self.name, where="telemetry")
        self.binary = found
        if not self.read():
            raise ToolNotFoundError("%s reports no GPU" % self.name, where="telemetry")

    def output(self) -> str:
        try:
            return run([self.binary] + list(self.ARGS), 10).stdout
        except (ToolNotFoundError, CommandTimeoutError) as exc:
            raise ToolNotFoundError("%s could not be run: %s" % (self.name, exc), where="telemetry")

    def read(self) -> list[dict[str, Any]]:
        raise NotImplementedError

    def close(self) -> None:
        pass


class RocmSmiBackend(_PolledTool):
    """``rocm-smi --showpower --showtemp --showclocks --json`` polling (AMD)."""

    name = "rocm-smi"
    ARGS = ("--showpower", "--showtemp", "--showclocks", "--json")

    def read(self) -> list[dict[str, Any]]:
        parsed = parse_rocm_smi_json(self.output())
        return [{"gpu": g["card"], "power_w": g["power_w"], "temp_c": g["temp_junction_c"] or g["temp_edge_c"],
                 "sm_clock_mhz": g["sclk_mhz"], "throttle_mask": None} for g in parsed["gpus"]]


class AmdSmiBackend(_PolledTool):
    """``amd-smi metric --json`` polling (AMD, ROCm 6+, where rocm-smi is deprecated)."""

    name = "amd-smi"
    ARGS = ("metric", "--json")

    def read(self) -> list[dict[str, Any]]:
        return [dict(g, throttle_mask=None) for g in parse_amd_smi_metric(self.output())]


BACKENDS: dict[str, Callable[[], Backend]] = {"nvml": NvmlBackend, "nvidia-smi": NvidiaSmiBackend,
                                              "amd-smi": AmdSmiBackend, "rocm-smi": RocmSmiBackend}


PREFERENCE = ("nvml", "nvidia-smi", "amd-smi", "rocm-smi")


def open_backend(prefer: Sequence[str] = PREFERENCE) -> Backend:
    """First backend in ``prefer`` that reads a GPU; :class:`ToolNotFoundError` listing why each failed."""
    reasons = []
    for name in prefer:
        try:
            return BACKENDS[name]()
        except (ToolNotFoundError, ParseError) as exc:
            reasons.append("%s: %s" % (name, exc.message))
    raise ToolNotFoundError("no GPU telemetry source: " + "; ".join(reasons), where="telemetry")


class Sampler:
    """Read ``backend`` every ``interval_s`` (1 Hz default) in a thread until :meth:`stop`.

    The schedule is absolute (``start + n × interval``) so a slow read does not drift the
    rate; a read that raises is recorded in ``errors`` and sampling continues.
    """

    def __init__(self, backend: Backend, interval_s: float = 1.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.backend = backend
        self.interval_s = float(interval_s)
        self.clock = clock
        self.samples: list[Sample] = []
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        # set by start(); the clock reading samples are timed from
        self.started = 0.0

    def sample_once(self) -> None:
        t_s = self.clock() - self.started
        try:
            readings = self.backend.read()
        except Exception as exc:  # keep sampling; the evaluation sees the gap and the error
            self.errors.append("t=%.1fs: %s" % (t_s, exc))
            return
        for reading in readings:
            mask = reading.get("throttle_mask")
            self.samples.append(Sample(t_s=round(t_s, 3), gpu=int(reading["gpu"]), power_w=reading.get("power_w"),
                                       temp_c=reading.get("temp_c"), sm_clock_mhz=reading.get("sm_clock_mhz"),
                                       throttle_mask=mask, throttle=decode_throttle(mask)))

    def _loop(self) -> None:
        n = 0
        while not self._stop.is_set():
            self.sample_once()
            n += 1
            delay = self.started + n * self.interval_s - self.clock()
            if delay > 0:
                self._stop.wait(delay)

    def start(self) -> Sampler:
        self.started = self.clock()
        self._thread = threading.Thread(target=self._loop, name="gpu-telemetry", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> list[Sample]:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.interval_s * 5 + 10)
        return self.samples


def samples_to_csv(samples: Sequence[Sample]) -> str:
    """CSV text of samples (header :data:`SAMPLE_FIELDS`; throttle reasons joined with ``|``)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(SAMPLE_FIELDS)
    for s in samples:
        writer.writerow([s.t_s, s.gpu, s.power_w, s.temp_c, s.sm_clock_mhz, s.throttle_mask, "|".join(s.throttle)])
    return out.getvalue()
