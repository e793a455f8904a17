# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""nccl-tests / rccl-tests output, busbw factors and sweep shape checks (pure).

Parsing (case P-C4 in ../shared/cases/parsing-cases.md): the text table is located from its header
line (``size count type redop [root] time algbw busbw #wrong|error time algbw busbw #wrong|error``, with
or without the ``root`` column, ``time`` or ``cputime``); ``NCCL INFO`` log lines inside the table and
other non-numeric rows are skipped; ``#wrong`` is ``N/A`` when validation is off; the footer
``# Out of bounds values : N OK|FAILED`` and ``# Avg bus bandwidth : X`` prove completion.  ``-J``
JSON (nccl-tests ``src/util.cu``, ``JSON_FILE_VERSION 2``): ``results[]`` with ``size``, ``count``,
``type``, ``redop``, ``root``, ``out_of_place``/``in_place`` ``{time|cpu_time, alg_bw, bus_bw,
nwrong|null}``, ``out_of_bounds{count, okay}``, ``average_bus_bandwidth{bandwidth, okay}``; booleans are
written as the strings ``"true"``/``"false"`` and NaN as ``"nan"``.  rccl-tests prints the same formats.

Units: sizes in bytes, time in microseconds, algbw/busbw in GB/s with GB = 1e9 bytes (nccl-tests
``baseBw = bytes / 1.0E9 / sec``).  busbw factors: nccl-tests ``doc/PERFORMANCE.md`` and ``src/*.cu``
(../shared/reference/numbers.md section 3.1).
"""

from __future__ import annotations

import math
import re
from typing import Any

from .._core.errors import ParseError, ValidationError
from .parsers import load_json_document

TOOL = "nccl-tests"

COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "alltoall", "sendrecv", "broadcast", "reduce",
               "gather", "scatter", "hypercube")
BINARIES = {c: "%s_perf" % c for c in COLLECTIVES}
DEFAULT_MAX_BYTES = 8 * 1024 ** 3
NCCL_ENV_PREFIXES = ("NCCL_", "RCCL_", "UCX_", "CUDA_", "HSA_", "NVSHMEM_")


def busbw_factor(collective: str, nranks: int) -> float:
    """busbw / algbw for ``collective`` over ``nranks`` ranks (GPUs in the communicator).

    all_reduce 2(n-1)/n; all_gather, reduce_scatter, alltoall, gather, scatter (n-1)/n; sendrecv,
    broadcast, reduce, hypercube 1 (nccl-tests PERFORMANCE.md and src/*.cu ``getBw``).
    Raises :class:`ValidationError` on an unknown collective or ``nranks`` < 1.
    """
    name = normalise_collective(collective)
    n = int(nranks)
    if n < 1:
        raise ValidationError("nranks must be >= 1, got %r" % nranks, where="busbw_factor")
    if name == "all_reduce":
        return 2.0 * (n - 1) / n
    if name in ("all_gather", "reduce_scatter", "alltoall", "gather", "scatter"):
        return (n - 1) / float(n)
    return 1.0


def normalise_collective(name: str) -> str:
    """``all_reduce_perf`` / ``allreduce`` / ``all_reduce`` -> ``all_reduce``; ValidationError otherwise."""
    key = str(name).strip().lower()
    key = key[:-5] if key.endswith("_perf") else key
    aliases = {"allreduce": "all_reduce", "allgather": "all_gather", "reducescatter": "reduce_scatter",
               "all_to_all": "alltoall", "send_recv": "sendrecv", "alltoallv": "alltoall"}
    key = aliases.get(key, key)
    if key not in COLLECTIVES:
        raise ValidationError("unknown collective %r (known: %s)" % (name, ", ".join(COLLECTIVES)),
                              where="collective")
    return key


def _num(text: str) -> float | None:
    text = text.strip()
    if text.lower() in ("n/a", "na", "-", "nan", ""):
        return None
    try:
        return float(text)
    except ValueError:
        return None


_HEADER = re.compile(r"^#\s+size\s+count\s+type", re.I)
_OOB = re.compile(r"^#\s*Out of bounds values\s*:\s*(\d+)\s*(\w*)", re.I)
_AVG = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*([-+0-9.eE]+|nan)\s*(\w*)", re.I)
_PARAMS = re.compile(r"^#\s*nThread\s+(\d+)\s+nGpus\s+(\d+)\s+minBytes\s+(\d+)\s+maxBytes\s+(\d+).*?"
                     r"validation:\s*(\d+)", re.I)
_RANK = re.compile(r"^#\s*Rank\s+(\d+)\s+(?:Group\s+\d+\s+)?Pid\s+\d+\s+on\s+(\S+)\s+device\s+(\d+)\s+\[([^\]]*)\]\s*(.*)$")
_CONCLUDED = re.compile(r"^#\s*Collective test concluded:\s*(\S+)")
# nccl-tests src/common.h NCCLCHECK/CUDACHECK: "<host>: Test NCCL failure common.cu:NNN 'msg / last error'"
# (and "Test CUDA failure", "Test failure" from testStreamSynchronize); rccl-tests prints the same words.
_TEST_FAILURE = re.compile(r"\bTest (?:\w+ )?failure\b", re.I)


def _strip_provenance(text: str) -> str:
    # The shared fixtures carry a '# SOURCE: ...' line 1; real output never starts with it.
    if text.startswith("# SOURCE:"):
        return text.split("\n", 1)[1] if "\n" in text else ""
    return text


def parse_text(text: str) -> dict[str, Any]:
    """Parse nccl-tests/rccl-tests text output.

    Returns ``{"rows": [{"size": B, "count": int, "type": str, "redop": str, "root": int|None,
    "out_of_place": {"time_us", "algbw", "busbw", "wrong"}, "in_place": {...}}], "out_of_bounds": int,
    "out_of_bounds_ok": bool, "avg_busbw": GB/s, "avg_busbw_failed": bool (nccl-tests' own NCCL_TESTS_MIN_BW
    verdict), "validation": bool|None, "ranks": [...], "nranks": int,
    "completed": True, "collective": str|None}``; ``wrong`` is None when validation is off (``N/A``).
    Raises :class:`ParseError` when the header, every data row, or the completion footer is missing.
    """
    if not isinstance(text, str) or not text.strip():
        raise ParseError("output is empty", where=TOOL)
    lines = _strip_provenance(text).splitlines()
    header = None
    params = {}
    ranks = []
    rows = []
    oob = oob_ok = avg = None
    avg_failed = False
    collective = None
    for line in lines:
        s = line.strip()
        if not s:
            continue
        if s.startswith("#"):
            m = _PARAMS.match(s)
            if m:
                params = {"nthreads": int(m.group(1)), "ngpus": int(m.group(2)), "min_bytes": int(m.group(3)),
                          "max_bytes": int(m.group(4)), "validation": m.group(5) != "0"}
                continue
            m = _RANK.match(s)
            if m:
                ranks.append({"rank": int(m.group(1)), "host": m.group(2), "device": int(m.group(3)),
                              "pci": m.group(4), "model": m.group(5).strip()})
                continue
            if _HEADER.match(s):
                header = s.lstrip("#").split()
                continue
            m = _OOB.match(s)
            if m:
                oob, oob_ok = int(m.group(1)), (m.group(2).upper() != "FAILED" and int(m.group(1)) == 0)
                continue
            m = _AVG.match(s)
            if m:
                avg = _num(m.group(1))
                # NCCL_TESTS_MIN_BW set: nccl-tests appends OK/FAILED (FAILED below 0.9 x that value)
                avg_failed = m.group(2).upper() == "FAILED"
                continue
            m = _CONCLUDED.match(s)
            if m:
                collective = m.group(1)
            continue
        if header is None:
            continue
        row = _parse_row(s.split(), header)
        if row is not None:
            rows.append(row)
    if header is None:
        raise ParseError("no result table header ('# size count type ...') in output", where=TOOL)
    if not rows:
        raise ParseError("result table has no data rows", where=TOOL)
    if avg is None or oob is None:
        raise ParseError("no '# Out of bounds values' / '# Avg bus bandwidth' footer: the run did not complete",
                         where=TOOL)
    return {"rows": rows, "out_of_bounds": oob, "out_of_bounds_ok": bool(oob_ok), "avg_busbw": avg,
            "avg_busbw_failed": avg_failed,
            "validation": params.get("validation"), "params": params, "ranks": ranks,
            "nranks": len(ranks) or None, "completed": True,
            "collective": normalise_collective(collective) if collective else None}


def failure_lines(text: str) -> list[str]:
    """The ``Test ... failure`` lines nccl-tests/rccl-tests printed (stripped, in order); ``[]`` when none."""
    return [line.strip() for line in (text or "").splitlines() if _TEST_FAILURE.search(line)]


def rank_problem(parsed: dict[str, Any], expected_ranks: int | None = None) -> str | None:
    """Why a parsed run cannot be judged on its rank count, or None when it can.

    The ranks are the ``# Rank n ... device`` lines under ``# Using devices`` (or ``config.devices`` in ``-J``
    JSON).  busbw over one rank is 0 by definition (nccl-tests ``doc/PERFORMANCE.md``: the busbw factor of
    all_reduce is 2(n-1)/n), so a run over fewer than two ranks, or over fewer than ``expected_ranks`` (the GPUs
    the test was meant to span), is an invalid configuration: never a pass, and never a 0 GB/s fail.
    """
    nranks = parsed.get("nranks")
    if nranks and nranks >= 2 and not (expected_ranks and nranks < expected_ranks):
        return None
    return ("invalid configuration: %s rank(s) in the 'Using devices' lines (expected %s); busbw over one rank "
            "is 0 by definition, so the run cannot be judged" % (nranks or "no", expected_ranks or ">= 2"))


def _parse_row(fields: list[str], header: Any) -> dict[str, Any] | None:
    # header: size count type redop [root] time algbw busbw #wrong|error time algbw busbw #wrong|error [...]
    lead = 5 if "root" in header[:6] else 4
    if len(fields) < lead + 8:
        return None
    try:
        size = int(fields[0])
        count = int(fields[1])
    except ValueError:
        return None
    root = None
    if lead == 5:
        try:
            root = int(fields[4])
        except ValueError:
            root = None
    halves = []
    extra = (len(header) - lead - 8) // 2 if len(header) > lead + 8 else 0
    width = 4 + max(0, extra)
    for start in (lead, lead + width):
        chunk = fields[start:start + 4]
        if len(chunk) < 4:
            return None
        time_us, algbw, busbw = _num(chunk[0]), _num(chunk[1]), _num(chunk[2])
        if algbw is None or busbw is None:
            return None
        halves.append({"time_us": time_us, "algbw": algbw, "busbw": busbw, "wrong": _num(chunk[3])})
    return {"size": size, "count": count, "type": fields[2], "redop": fields[3], "root": root,
            "out_of_place": halves[0], "in_place": halves[1]}


def _jbool(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        return value.strip().lower() == "true"
    return None


def _jnum(value: Any) -> float | None:
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            return None
    value = float(value)
    return None if math.isnan(value) else value


def parse_json(document: Any) -> dict[str, Any]:
    """Parse a nccl-tests ``-J`` JSON document (already decoded to a dict).

    Returns the same shape as :func:`parse_text`, plus ``"env"``: the ``NCCL_*``-family variables the
    run saw (other variables are dropped: they may hold secrets).  Raises :class:`ParseError` when
    ``results`` or the ``out_of_bounds``/``average_bus_bandwidth`` footer objects are missing.
    """
    if not isinstance(document, dict):
        raise ParseError("JSON document is %s, not an object" % type(document).__name__, where=TOOL + " -J")
    results = document.get("results")
    if not isinstance(results, list):
        raise ParseError("no 'results' list in JSON", where=TOOL + " -J")
    rows = []
    for i, item in enumerate(results):
        if not isinstance(item, dict) or "size" not in item:
            raise ParseError("results[%d] has no size" % i, where=TOOL + " -J")
        halves: dict[str, dict[str, float | None] | None] = {}
        for key in ("out_of_place", "in_place"):
            half = item.get(key)
            if half is None:
                halves[key] = None
                continue
            halves[key] = {"time_us": _jnum(half.get("time", half.get("cpu_time"))), "algbw": _jnum(half.get("alg_bw")),
                           "busbw": _jnum(half.get("bus_bw")), "wrong": _jnum(half.get("nwrong"))}
        root = item.get("root")
        try:
            root = int(str(root).strip()) if root is not None else None
        except ValueError:
            root = None
        rows.append({"size": int(item["size"]), "count": int(item.get("count", 0)), "type": item.get("type"),
                     "redop": item.get("redop"), "root": root, "out_of_place": halves["out_of_place"],
                     "in_place": halves["in_place"]})
    oob = document.get("out_of_bounds")
    avg = document.get("average_bus_bandwidth")
    if not isinstance(oob, dict) or not isinstance(avg, dict):
        raise ParseError("no out_of_bounds/average_bus_bandwidth objects: the run did not complete",
                         where=TOOL + " -J")
    config = document.get("config") or {}
    devices = config.get("devices") or []
    env = {}
    for entry in document.get("env") or []:
        if isinstance(entry, str) and "=" in entry:
            k, v = entry.split("=", 1)
            if k.startswith(NCCL_ENV_PREFIXES):
                env[k] = v
    validation = config.get("validation")
    return {"rows": rows, "out_of_bounds": int(oob.get("count", 0)),
            "out_of_bounds_ok": bool(_jbool(oob.get("okay"))) and int(oob.get("count", 0)) == 0,
            "avg_busbw": _jnum(avg.get("bandwidth")), "validation": bool(validation) if validation is not None else None,
            "params": {k: config.get(k) for k in ("ngpus", "minimum_bytes", "maximum_bytes", "iterations") if k in config},
            "ranks": [{"rank": d.get("rank"), "host": d.get("hostname"), "device": d.get("device"),
                       "pci": d.get("device_hex"), "model": d.get("device_info")} for d in devices],
            "nranks": len(devices) or None, "completed": True, "collective": None, "env": env,
            "nccl_version": document.get("nccl_version")}


def parse(text: str) -> dict[str, Any]:
    """Parse either format: a ``{``-led document is ``-J`` JSON, anything else the text table."""
    if not isinstance(text, str) or not text.strip():
        raise ParseError("output is empty", where=TOOL)
    body = _strip_provenance(text).lstrip()
    if body.startswith("{"):
        doc, _pre, _dups = load_json_document(TOOL + " -J", body)
        return parse_json(doc)
    return parse_text(text)


def corruption(parsed: dict[str, Any]) -> dict[str, Any]:
    """Data-corruption findings: sizes with ``#wrong`` > 0 (either half) and the out-of-bounds count.

    Returns ``{"wrong_sizes": [B...], "out_of_bounds": int, "corrupt": bool}``; ``#wrong`` N/A
    (validation off) is not corruption, but is reported through ``validation`` by the caller.
    """
    wrong = []
    for row in parsed["rows"]:
        for half in (row.get("out_of_place"), row.get("in_place")):
            if half and half.get("wrong"):
                wrong.append(row["size"])
                break
    oob = parsed.get("out_of_bounds") or 0
    return {"wrong_sizes": wrong, "out_of_bounds": oob, "corrupt": bool(wrong) or oob > 0
            or not parsed.get("out_of_bounds_ok", True)}


def curve(parsed: dict[str, Any], half: str = "out_of_place") -> list[tuple[int, float]]:
    """``[(size B, busbw GB/s)]`` for sizes > 0, sorted by size, one point per size (the best repeat)."""
    best: dict[int, float] = {}
    for row in parsed["rows"]:
        h = row.get(half) or row.get("in_place")
        if not h or row["size"] <= 0 or h.get("busbw") is None:
            continue
        best[row["size"]] = max(best.get(row["size"], 0.0), h["busbw"])
    return sorted(best.items())


def sweep_sizes(max_bytes: int = DEFAULT_MAX_BYTES, min_bytes: int = 8) -> list[int]:
    """Message sizes from ``min_bytes`` (8 B) to ``max_bytes`` (default 8 GiB) by powers of two."""
    if min_bytes < 1 or max_bytes < min_bytes:
        raise ValidationError("sweep needs 1 <= min_bytes <= max_bytes, got %r..%r" % (min_bytes, max_bytes),
                              where="nccl sweep")
    out, s = [], int(min_bytes)
    while s <= max_bytes:
        out.append(s)
        s *= 2
    return out


def node_counts(cluster_size: int, start: int = 1) -> list[int]:
    """Node counts in powers of two from ``start`` up to ``cluster_size`` (``[1, 2, 4, ...]``)."""
    if cluster_size < 1:
        raise ValidationError("cluster has no nodes", where="nccl sweep")
    out, n = [], max(1, int(start))
    while n <= cluster_size:
        out.append(n)
        n *= 2
    return out


def fmt_size(size: float) -> str:
    """``131072`` -> ``'128 KiB'``."""
    for unit, factor in (("GiB", 1024 ** 3), ("MiB", 1024 ** 2), ("KiB", 1024)):
        if size >= factor and size % factor == 0:
            return "%d %s" % (size // factor, unit)
    return "%d B" % size


def check_sweep(points: list[tuple[int, float]], floor_gbps: float | None = None, tolerance: float = 0.10,
                plateau_points: int = 3, plateau_flat: float = 0.10, noise_gbps: float = 0.5) -> dict[str, Any]:
    """Check a busbw curve for shape and level.

    ``points``: ``[(size B, busbw GB/s)]`` (see :func:`curve`).  ``tolerance``: a point more than this
    fraction below the best busbw seen at any smaller size, or below the geometric mean of its two
    neighbours (a notch in a rising curve), is a dip (``noise_gbps``: differences smaller
    than this many GB/s are noise, which keeps the latency-bound small sizes from flagging).  The
    plateau is the median busbw of the ``plateau_points`` largest sizes; ``floor_gbps`` (the SKU's
    ``validation.nccl_busbw_floors``) fails a plateau below it, and the curve must flatten near it:
    the largest sizes must lie within ``plateau_flat`` of each other, or it is reported as still rising.

    Returns ``{"ok": bool, "dips": [{"size", "size_h", "busbw", "expected_at_least"}], "plateau_gbps",
    "floor_gbps", "below_floor": bool, "flat": bool, "failing_sizes": [B], "reasons": [str]}``.
    Raises :class:`ValidationError` on an empty curve.
    """
    if not points:
        raise ValidationError("empty busbw curve", where="nccl sweep")
    points = sorted(points)
    floor = None if floor_gbps is None else float(floor_gbps)
    dips: list[dict[str, Any]] = []
    best = 0.0
    for i, (size, bw) in enumerate(points):
        # A drop below the best of the smaller sizes, or a notch below the geometric mean of its two
        # neighbours on a rising curve (the classic 128 KiB protocol-switch dip).
        expected = best
        if 0 < i < len(points) - 1 and points[i - 1][1] > 0 and points[i + 1][1] > 0:
            expected = max(expected, (points[i - 1][1] * points[i + 1][1]) ** 0.5)
        if expected > 0 and bw < expected * (1.0 - tolerance) and expected - bw > noise_gbps:
            dips.append({"size": size, "size_h": fmt_size(size), "busbw": bw,
                         "expected_at_least": round(expected * (1.0 - tolerance), 3)})
        best = max(best, bw)
    tail = sorted(bw for _s, bw in points[-plateau_points:])
    plateau = tail[len(tail) // 2]
    flat = (max(tail) - min(tail)) <= plateau_flat * max(tail) if max(tail) > 0 else False
    below = floor is not None and plateau < floor
    failing = [d["size"] for d in dips]
    reasons = []
    for d in dips:
        reasons.append("busbw dips to %.2f GB/s at %s (expected >= %.2f: the curve must rise monotonically)"
                       % (d["busbw"], d["size_h"], d["expected_at_least"]))
    if below and floor is not None:
        low = [s for s, bw in points[-plateau_points:] if bw < floor]
        failing += [s for s in low if s not in failing]
        reasons.append("plateau %.2f GB/s is below the SKU floor %.2f GB/s" % (plateau, floor))
    if not flat:
        reasons.append("busbw still rising/unstable at the largest sizes (%s): no plateau reached"
                       % ", ".join("%.2f" % bw for bw in tail))
    # A curve still rising at its largest sizes has not shown its plateau: its level is not known, so it fails.
    return {"ok": not dips and not below and flat, "dips": dips, "plateau_gbps": plateau,
            "floor_gbps": float(floor_gbps) if floor_gbps is not None else None, "below_floor": below,
            "flat": flat, "failing_sizes": sorted(failing), "reasons": reasons}


def analyse(parsed: dict[str, Any], floor_gbps: float | None = None, tolerance: float = 0.10,
            nccl_env: dict | None = None, min_size: int | None = None) -> dict[str, Any]:
    """Full verdict of one nccl-tests run: corruption + shape + level.

    Returns ``{"ok": bool|None, "corruption": {...}, "shape": {...}, "validation": bool|None,
    "avg_busbw": GB/s, "max_busbw": GB/s, "nccl_env": {...}, "reasons": [...]}``.  ``nccl_env`` (the
    SKU's golden recipe) is recorded with the result.  ``min_size``: ignore smaller sizes for shape.
    ``ok`` is None (not judged) when nothing failed but no ``floor_gbps`` was given: a run never passes
    without a floor met.
    """
    points = [(s, b) for s, b in curve(parsed) if min_size is None or s >= min_size]
    shape = check_sweep(points, floor_gbps, tolerance)
    corrupt = corruption(parsed)
    reasons = list(shape["reasons"])
    if corrupt["wrong_sizes"]:
        reasons.insert(0, "#wrong > 0 (data corruption) at %s" % ", ".join(fmt_size(s) for s in corrupt["wrong_sizes"]))
    if corrupt["out_of_bounds"] or not parsed.get("out_of_bounds_ok", True):
        reasons.insert(0, "out of bounds values: %d (data corruption)" % corrupt["out_of_bounds"])
    failing = sorted(set(shape["failing_sizes"]) | set(corrupt["wrong_sizes"]))
    if parsed.get("avg_busbw_failed"):
        reasons.append("nccl-tests printed FAILED after '# Avg bus bandwidth' (below its NCCL_TESTS_MIN_BW)")
    ok: bool | None = shape["ok"] and not corrupt["corrupt"] and not parsed.get("avg_busbw_failed")
    if ok and floor_gbps is None:
        ok = None
        reasons.append("no busbw floor declared: the run cannot pass without one")
    return {"ok": ok, "corruption": corrupt, "shape": shape,
            "failing_sizes": failing, "validation": parsed.get("validation"), "avg_busbw": parsed.get("avg_busbw"),
            "max_busbw": max((b for _s, b in points), default=None), "nccl_env": dict(nccl_env or parsed.get("env") or {}),
            "reasons": reasons}
