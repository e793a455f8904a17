# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""fio ``--output-format=json`` across fio 2.x and 3.x (parsing case P-C5).

fio 2.x reports latencies under ``clat``/``lat`` in microseconds, 3.x under
``clat_ns``/``lat_ns`` in nanoseconds (with ``lat_percentiles=1`` the percentiles
sit under ``lat_ns``); ``bw`` is KiB/s, 3.x adds ``bw_bytes``.  Duplicate keys occur
(``"0.00"`` in percentile maps, ``"filename"`` in ``global options``) and text may
precede the JSON.
"""

from __future__ import annotations

from typing import Any

from . import (
    load_json_document,
    number,
    parse_error,
)

TOOL = "fio"
DIRECTIONS = ("read", "write", "trim")


def _percentiles(stats: Any, scale_to_us: float) -> dict[str, float]:
    out: dict[str, float] = {}
    if not isinstance(stats, dict):
        return out
    pct = stats.get("percentile")
    if not isinstance(pct, dict):
        return out
    for key, value in pct.items():
        p, v = number(key), number(value)
        if p is None or v is None or p <= 0:
            continue  # fio pads the map with "0.00": 0 entries
        out["%g" % p] = v * scale_to_us
    return out


def _direction(job: dict[str, Any], name: str, jobname: str) -> dict[str, Any] | None:
    data = job.get(name)
    if data is None:
        return None
    if not isinstance(data, dict):
        raise parse_error(TOOL, "job %r: %r is not an object" % (jobname, name))
    if "iops" not in data or ("bw" not in data and "bw_bytes" not in data):
        raise parse_error(TOOL, "job %r: %s has no iops/bw" % (jobname, name))
    iops = number(data.get("iops"))
    bw_bytes = number(data.get("bw_bytes"))
    if bw_bytes is None:
        kib = number(data.get("bw"))
        bw_bytes = kib * 1024.0 if kib is not None else None
    if iops is None or bw_bytes is None:
        raise parse_error(TOOL, "job %r: %s iops/bw are not numbers" % (jobname, name))
    # Percentiles: clat_ns (3.x) > lat_ns (3.x with lat_percentiles=1) > clat (2.x, µs).
    percentiles, source = {}, None
    for key, scale in (("clat_ns", 1e-3), ("lat_ns", 1e-3), ("clat", 1.0), ("lat", 1.0)):
        pcts = _percentiles(data.get(key), scale)
        if pcts:
            percentiles, source = pcts, key
            break
    mean_us = None
    for key, scale in (("clat_ns", 1e-3), ("clat", 1.0)):
        mean = number(data[key].get("mean")) if isinstance(data.get(key), dict) else None
        if mean is not None:
            mean_us = mean * scale
            break
    return {
        "iops": iops,
        "bw_bytes_s": bw_bytes,
        "io_bytes": number(data.get("io_bytes")),
        "runtime_ms": number(data.get("runtime")),
        "total_ios": number(data.get("total_ios")),
        "clat_mean_us": mean_us,
        "percentiles_us": percentiles,
        "percentile_source": source,
        "p99_us": percentiles.get("99"),
        "idle": (iops == 0 and bw_bytes == 0),
    }


def parse_fio_json(text: str) -> dict[str, Any]:
    """Parse fio JSON output.

    Returns ``{version, duplicate_keys, preamble, global_options, jobs: [{name, error, rw, bs,
    read|write|trim: {iops, bw_bytes_s (B/s), io_bytes, runtime_ms, clat_mean_us, p99_us (µs),
    percentiles_us{pct: µs}, idle}}]}``.  Raises :class:`ParseError` when the document is missing,
    malformed, has no ``jobs`` or a job lacks iops/bw.
    """
    doc, preamble, duplicates = load_json_document(TOOL, text)
    if not isinstance(doc, dict):
        raise parse_error(TOOL, "top level is not a JSON object")
    jobs = doc.get("jobs")
    if not isinstance(jobs, list) or not jobs:
        raise parse_error(TOOL, "no 'jobs' in the JSON document")
    out_jobs = []
    for job in jobs:
        if not isinstance(job, dict):
            raise parse_error(TOOL, "a job is not an object")
        name = job.get("jobname")
        if not isinstance(name, str):
            raise parse_error(TOOL, "a job has no jobname")
        options: dict[str, Any] = job["job options"] if isinstance(job.get("job options"), dict) else {}
        entry = {"name": name, "error": job.get("error"), "rw": options.get("rw"), "bs": options.get("bs")}
        for direction in DIRECTIONS:
            parsed = _direction(job, direction, name)
            if parsed is not None:
                entry[direction] = parsed
        if "read" not in entry and "write" not in entry:
            raise parse_error(TOOL, "job %r has neither read nor write results" % name)
        out_jobs.append(entry)
    return {
        "version": doc.get("fio version"),
        "duplicate_keys": duplicates,
        "preamble": preamble,
        "global_options": doc.get("global options") if isinstance(doc.get("global options"), dict) else {},
        "jobs": out_jobs,
    }
