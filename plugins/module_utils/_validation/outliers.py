# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Per-GPU telemetry through a run and outliers against peers.

Sources (each returns a :class:`Telemetry`):

* a file (JSON lines or CSV, ours or ``nvidia-smi --query-gpu ... --format=csv``
  with units inside values): the lab's source, where hosts have no GPUs;
* a DCGM exporter scrape (Prometheus text format, parsed with prometheus_client):
  ``DCGM_FI_DEV_GPU_TEMP`` (°C), ``DCGM_FI_DEV_POWER_USAGE`` (W), ``DCGM_FI_DEV_SM_CLOCK`` (MHz);
* this host's GPUs through the burn-in sampler's backends (NVML via nvidia-ml-py,
  nvidia-smi, rocm-smi); none usable -> :class:`ToolNotFoundError` (``not_run``).

Rules (numbers.md section 7), applied to every GPU against all GPUs of the run:

* modified z-score ``M = 0.6745*(x - median)/MAD`` above ``z_threshold`` (3.5,
  Iglewicz & Hoaglin 1993, NIST/SEMATECH e-Handbook 1.3.5.17).  When MAD is 0 the
  mean absolute deviation scaled by 1.253314 is used instead (IBM SPSS convention);
* temperature at least ``delta_c`` (10 °C) above the peer median (suggested value,
  no published source: numbers.md says so);
* any temperature sample within ``max_temp_margin_c`` (3 °C) of the device's maximum
  operating temperature (nvidia-smi ``gpu_temp_max_gpu_threshold``; SKU
  ``bom.gpus.max_operating_temp_c``).

A GPU's value for the peer rules is the median of its samples (one sensor glitch
does not evict a node); the operating-limit rule uses its hottest sample.
Temperature and power are checked on the high side, SM clock on the low side
(a throttled GPU runs slower than its peers).
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
import time
from typing import Any, Dict, List, Optional, Tuple, cast

from .._core.errors import (
    ParseError,
    ToolNotFoundError,
    ValidationError,
)
from .._host.telemetry import open_backend

try:
    import numpy as np
    HAS_NUMPY = True
except ImportError:
    HAS_NUMPY = False

METRICS = ("temp_c", "power_w", "sm_clock_mhz")
# Which side of the peers is bad for each metric.
DIRECTION = {"temp_c": "high", "power_w": "high", "sm_clock_mhz": "low"}
UNITS = {"temp_c": "°C", "power_w": "W", "sm_clock_mhz": "MHz"}
DEFAULTS = {"z_threshold": 3.5, "delta_c": 10.0, "max_temp_margin_c": 3.0}
MAD_SCALE = 0.6745          # Iglewicz & Hoaglin 1993
MEANAD_SCALE = 1.253314     # sqrt(pi/2): mean absolute deviation of a normal vs its sigma

# nvidia-smi --query-gpu field names -> ours.
_NVSMI_FIELDS = {"index": "gpu", "temperature.gpu": "temp_c", "power.draw": "power_w", "clocks.sm": "sm_clock_mhz",
                 "clocks.current.sm": "sm_clock_mhz", "timestamp": "ts", "hostname": "node", "node": "node",
                 "gpu": "gpu", "ts": "ts", "temp_c": "temp_c", "power_w": "power_w", "sm_clock_mhz": "sm_clock_mhz"}
_NUMBER = re.compile(r"^\s*([-+]?\d+(?:\.\d+)?)")


def _require_numpy():
    if not HAS_NUMPY:
        raise ToolNotFoundError("the numpy Python library is required for telemetry analysis", where="numpy")


class Telemetry:
    """Samples per GPU: ``gpus`` is a list of ``(node, gpu_index)``; ``values[metric]`` a
    float array of shape ``(len(gpus), samples)`` with NaN where a sample is missing."""

    def __init__(self, gpus, values, source=""):
        _require_numpy()
        self.gpus = list(gpus)
        self.values = {}
        self.source = source
        for metric, arr in values.items():
            if metric not in METRICS:
                raise ValidationError("unknown telemetry metric %r (known: %s)" % (metric, ", ".join(METRICS)),
                                      where=source or "telemetry")
            arr = np.asarray(arr, dtype=float)
            if arr.ndim != 2 or arr.shape[0] != len(self.gpus):
                raise ValidationError("%s: expected an array of shape (%d, samples), got %s"
                                      % (metric, len(self.gpus), arr.shape), where=source or "telemetry")
            self.values[metric] = arr

    @property
    def samples(self):
        return max((a.shape[1] for a in self.values.values()), default=0)

    def nodes(self):
        return sorted({gpu[0] for gpu in self.gpus})

    @classmethod
    def from_records(cls, records, source=""):
        """Build from dicts ``{node, gpu, temp_c?, power_w?, sm_clock_mhz?}`` in time order."""
        _require_numpy()
        series: Dict[Tuple[str, int], Dict[str, List[Any]]] = {}
        for rec in records:
            key = (str(rec["node"]), int(rec["gpu"]))
            slot = series.setdefault(key, {m: [] for m in METRICS})
            for metric in METRICS:
                value = rec.get(metric)
                slot[metric].append(float("nan") if value is None else float(value))
        gpus = sorted(series)
        values = {}
        for metric in METRICS:
            if not any(any(not math.isnan(v) for v in series[g][metric]) for g in gpus):
                continue
            width = max(len(series[g][metric]) for g in gpus)
            arr = np.full((len(gpus), width), np.nan)
            for i, g in enumerate(gpus):
                row = series[g][metric]
                arr[i, :len(row)] = row
            values[metric] = arr
        if not gpus:
            raise ParseError("no telemetry samples", where=source or "telemetry")
        return cls(gpus, values, source)


def _number(text, where):
    if text is None:
        return None
    text = str(text).strip()
    if text in ("", "N/A", "[N/A]", "[Not Supported]", "nan"):
        return None
    match = _NUMBER.match(text)
    if not match:
        raise ParseError("cannot read a number from %r" % text, where=where)
    return float(match.group(1))


def _strip_provenance(text):
    lines = text.splitlines()
    while lines and lines[0].startswith("# SOURCE:"):
        lines = lines[1:]
    return "\n".join(lines)


def parse_records(text, where, node=None):
    """Telemetry records from JSON lines or CSV text.

    JSON lines: ``{"node": "gpu-001", "gpu": 7, "temp_c": 71.5, "power_w": 690, "sm_clock_mhz": 1980}``.
    CSV: a header naming ours (node, gpu, ts, temp_c, power_w, sm_clock_mhz) or
    nvidia-smi's (``index, temperature.gpu, power.draw [W], clocks.sm [MHz], timestamp``);
    units inside values (``16.48 W``) are stripped; ``N/A`` is missing.  ``node`` names
    the host when the file has no node column.  Raises :class:`ParseError` naming
    ``where`` and the line.
    """
    text = _strip_provenance(text).strip()
    if not text:
        raise ParseError("empty telemetry file", where=where)
    records: List[Dict[str, Any]] = []
    rec: Dict[str, Any]
    if text.startswith("{"):
        for number, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except ValueError as exc:
                raise ParseError("line %d is not JSON: %s" % (number, exc), where=where)
            rec.setdefault("node", node)
            if rec.get("node") is None or rec.get("gpu") is None:
                raise ParseError("line %d has no node or gpu" % number, where=where)
            records.append(rec)
        return records
    reader = csv.reader(io.StringIO(text), skipinitialspace=True)
    header = next(reader)
    fields: List[Optional[str]] = []
    for raw in header:
        name = re.sub(r"\s*\[.*\]\s*$", "", raw.strip().lstrip("#").strip()).lower()
        fields.append(_NVSMI_FIELDS.get(name))
    if "gpu" not in fields:
        raise ParseError("CSV header %r has no GPU index column (index or gpu)" % ",".join(header), where=where)
    for number, row in enumerate(reader, 2):
        if not row:
            continue
        rec = {"node": node}
        for field, cell in zip(fields, row):
            if field in METRICS:
                rec[field] = _number(cell, "%s line %d" % (where, number))
            elif field == "gpu":
                rec["gpu"] = int(_number(cell, "%s line %d" % (where, number)))
            elif field in ("node", "ts"):
                rec[field] = cell.strip()
        if rec.get("node") is None:
            raise ParseError("line %d: no node column and no node given" % number, where=where)
        records.append(rec)
    return records


def load_file(path, node=None):
    """:class:`Telemetry` from a JSON-lines or CSV file (see :func:`parse_records`)."""
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except OSError as exc:
        raise ParseError("cannot read telemetry file: %s" % exc.strerror, where=path)
    return Telemetry.from_records(parse_records(text, path, node), source=path)


_DCGM = {"DCGM_FI_DEV_GPU_TEMP": "temp_c", "DCGM_FI_DEV_POWER_USAGE": "power_w", "DCGM_FI_DEV_SM_CLOCK": "sm_clock_mhz"}


def parse_dcgm_exporter(text, node=None, where="dcgm-exporter"):
    """Records from one DCGM exporter scrape (Prometheus text exposition format).

    The node is the ``Hostname`` label dcgm-exporter adds, else ``node``.  Raises
    :class:`ToolNotFoundError` without prometheus_client, :class:`ParseError` on
    malformed text or a scrape without any GPU temperature.
    """
    try:
        from prometheus_client.parser import text_string_to_metric_families
    except ImportError:
        raise ToolNotFoundError("the prometheus_client Python library is required to parse a DCGM exporter scrape",
                                where=where)
    merged: Dict[Any, Dict[str, Any]] = {}
    try:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                metric = _DCGM.get(sample.name)
                if metric is None:
                    continue
                host = sample.labels.get("Hostname") or node
                if host is None:
                    raise ParseError("sample %s has no Hostname label and no node was given" % sample.name, where=where)
                key = (host, int(sample.labels["gpu"]))
                merged.setdefault(key, {"node": key[0], "gpu": key[1]})[metric] = float(sample.value)
    except (ValueError, KeyError, TypeError) as exc:
        raise ParseError("malformed Prometheus text: %s" % exc, where=where)
    if not any("temp_c" in rec for rec in merged.values()):
        raise ParseError("no DCGM_FI_DEV_GPU_TEMP samples in the scrape", where=where)
    return [merged[k] for k in sorted(merged)]


def scrape_dcgm(fetch, samples, interval_s, node=None, sleep=time.sleep, where="dcgm-exporter"):
    """``samples`` scrapes ``interval_s`` seconds apart; ``fetch()`` returns the exporter's text."""
    records = []
    for index in range(samples):
        if index:
            sleep(interval_s)
        records.extend(parse_dcgm_exporter(fetch(), node=node, where=where))
    return Telemetry.from_records(records, source=where)


def sample_local(samples, interval_s, node, prefer=("nvml", "nvidia-smi", "rocm-smi"), sleep=time.sleep):
    """Sample this host's GPUs through the burn-in telemetry backends (NVML, nvidia-smi, rocm-smi).

    Raises :class:`ToolNotFoundError` naming why no backend could read a GPU (the
    check becomes ``not_run``).
    """
    backend = open_backend(prefer)
    records = []
    try:
        for index in range(samples):
            if index:
                sleep(interval_s)
            for reading in backend.read():
                records.append({"node": node, "gpu": reading["gpu"], "temp_c": reading.get("temp_c"),
                                "power_w": reading.get("power_w"), "sm_clock_mhz": reading.get("sm_clock_mhz")})
    finally:
        backend.close()
    return Telemetry.from_records(records, source=backend.name)


def modified_z(values):
    """Modified z-scores of a 1-D array (NaN-safe); all zeros when every value is equal."""
    _require_numpy()
    med = np.nanmedian(values)
    dev = values - med
    mad = np.nanmedian(np.abs(dev))
    if mad > 0:
        return MAD_SCALE * dev / mad
    mean_ad = np.nanmean(np.abs(dev))
    if mean_ad > 0:
        return dev / (MEANAD_SCALE * mean_ad)
    return np.zeros_like(values)


def find_outliers(telemetry, z_threshold=DEFAULTS["z_threshold"], delta_c=DEFAULTS["delta_c"],
                  max_temp_margin_c=DEFAULTS["max_temp_margin_c"], max_operating_temp_c=None):
    """Outlier GPUs of a run.

    ``max_operating_temp_c``: one number for every GPU, or ``{node: number}``, or None
    (then the operating-limit rule is not applied).  Returns a list of dicts
    ``{node, gpu, metric, value, peer_median, delta, z, rules, reason}`` ordered by node
    and GPU; ``rules`` names each rule that fired (``modified_z``, ``delta_c``,
    ``max_temp``).  Vectorised over all GPUs and samples.
    """
    _require_numpy()
    found = {}
    nodes = [gpu[0] for gpu in telemetry.gpus]
    for metric, arr in telemetry.values.items():
        with np.errstate(all="ignore"):
            per_gpu = np.nanmedian(arr, axis=1)
        valid = ~np.isnan(per_gpu)
        if valid.sum() < 3:
            continue
        peer_median = float(np.nanmedian(per_gpu))
        z = np.zeros_like(per_gpu)
        z[valid] = modified_z(per_gpu[valid])
        bad_side = z if DIRECTION[metric] == "high" else -z
        hits = {i: ["modified_z"] for i in np.nonzero(valid & (bad_side > z_threshold))[0]}
        if metric == "temp_c":
            if delta_c is not None:
                for i in np.nonzero(valid & (per_gpu - peer_median >= delta_c))[0]:
                    hits.setdefault(i, []).append("delta_c")
            if max_operating_temp_c is not None:
                with np.errstate(all="ignore"):
                    hottest = np.nanmax(arr, axis=1)
                if isinstance(max_operating_temp_c, dict):
                    limits = np.array([float(max_operating_temp_c.get(n, np.nan)) for n in nodes])
                else:
                    limits = np.full(len(nodes), float(max_operating_temp_c))
                near = hottest >= limits - max_temp_margin_c
                for i in np.nonzero(near & ~np.isnan(hottest))[0]:
                    hits.setdefault(i, []).append("max_temp")
        for i, rules in hits.items():
            node, gpu = telemetry.gpus[i]
            value = float(per_gpu[i])
            unit = UNITS[metric]
            parts = []
            if "modified_z" in rules:
                parts.append("modified z-score %.1f > %.1f" % (z[i], z_threshold) if DIRECTION[metric] == "high"
                             else "modified z-score %.1f < -%.1f" % (z[i], z_threshold))
            if "delta_c" in rules:
                parts.append("%.1f %s above the peer median (>= %.1f)" % (value - peer_median, unit, delta_c))
            if "max_temp" in rules:
                # a node without a limit never reaches max_temp (its limit is NaN above)
                limit = cast(float, max_operating_temp_c.get(node) if isinstance(max_operating_temp_c, dict)
                             else max_operating_temp_c)
                parts.append("hottest sample %.1f %s within %.1f %s of the maximum operating %.1f %s"
                             % (float(np.nanmax(arr[i])), unit, max_temp_margin_c, unit, float(limit), unit))
            found[(node, gpu, metric)] = {
                "node": node, "gpu": int(gpu), "metric": metric, "value": round(value, 2),
                "peer_median": round(peer_median, 2), "delta": round(value - peer_median, 2),
                "z": round(float(z[i]), 2), "rules": rules,
                "reason": "%s GPU %d %s %.1f %s vs peer median %.1f %s: %s"
                          % (node, gpu, metric, value, unit, peer_median, unit, "; ".join(parts)),
            }
    return [found[k] for k in sorted(found)]


def outlier_nodes(outliers):
    """Distinct nodes named by ``outliers``, in order."""
    seen = []
    for item in outliers:
        if item["node"] not in seen:
            seen.append(item["node"])
    return seen


def synthetic_trace(nodes=64, gpus_per_node=8, samples=3600, seed=0, hot=None, base_c=55.0, name="node%03d"):
    """A rehearsal trace (tests, benchmark, demo): a :class:`Telemetry` for ``nodes`` x ``gpus_per_node`` GPUs.

    Each GPU has a fixed offset (N(0, 1.5) °C: position in the chassis) plus sample
    noise (N(0, 0.8) °C); power ~ N(650, 15) W and SM clock ~ N(1980, 5) MHz.
    ``hot = (node_index, gpu, delta_c)`` makes one GPU ``delta_c`` hotter for the whole run.
    """
    _require_numpy()
    rng = np.random.default_rng(seed)
    count = nodes * gpus_per_node
    gpus = [(name % n, g) for n in range(nodes) for g in range(gpus_per_node)]
    temp = base_c + rng.normal(0.0, 1.5, (count, 1)) + rng.normal(0.0, 0.8, (count, samples))
    power = 650.0 + rng.normal(0.0, 15.0, (count, 1)) + rng.normal(0.0, 5.0, (count, samples))
    clock = 1980.0 + rng.normal(0.0, 5.0, (count, 1)) + rng.normal(0.0, 2.0, (count, samples))
    if hot is not None:
        node_index, gpu, delta = hot
        temp[node_index * gpus_per_node + gpu] += delta
    return Telemetry(gpus, {"temp_c": temp, "power_w": power, "sm_clock_mhz": clock}, source="synthetic")
