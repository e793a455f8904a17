# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A SKU's fabric-tier test (``burn_in.tiers[fabric].tests[]``) as ``fabric_test`` runs it.

:data:`KINDS` maps each fabric kind to its tool, the threshold that is its floor and its collective.  The
floor is the SKU's threshold (``min_bidir_gbps``, ``min_busbw_gbps``).  A profile's ``params.transport``
replaces the tool (the lab profile measures over iperf3); the SKU's thresholds are in the declared tool's
terms, so a replaced tool is judged against ``params.floor`` (its own unit) or else relative to its peers.
``params.nodes: 1`` tests run on each node alone over all its GPUs (:func:`run_single_node`); the others are
pair schedules.  Results are recorded under the test's own name, so every declared test gets
its row in the burn-in gate.
"""

from __future__ import annotations

from typing import Any, Callable

from .._core.errors import ParseError, ValidationError
from .._host import nccl as _nccl
from .commands import TIMEOUT_RC, missing_tool, run_command, tail

# kind -> tool (a transport of .transports), floor threshold key, collective (nccl/rccl-tests binary).
KINDS: dict[str, dict[str, Any]] = {
    "ib_write_bw_pairwise": {"transport": "ib_write_bw", "floor": "min_bidir_gbps", "collective": None},
    "nccl_all_reduce": {"transport": "nccl-tests", "floor": "min_busbw_gbps", "collective": "all_reduce"},
    "nccl_all_gather": {"transport": "nccl-tests", "floor": "min_busbw_gbps", "collective": "all_gather"},
    "rccl_all_reduce": {"transport": "rccl-tests", "floor": "min_busbw_gbps", "collective": "all_reduce"},
}


def test_options(test: dict[str, Any]) -> dict[str, Any]:
    """``fabric_test`` options for one declared test ``{name, kind, params, thresholds}``.

    Returns ``{check, transport, replaced, floor, nodes, message_bytes, binary, gpus_per_node, duration_s,
    bidirectional, gpudirect, cuda_devices, hcas, max_p99_lat_us, unmeasured}``; ``unmeasured`` (threshold -> why)
    names a floor the SKU left out (a test that ran its own tool is never judged only relative to its peers);
    ``max_p99_lat_us`` (µs) goes to ib_write_bw's ``ib_write_lat`` pass; ``hcas``: the fabric HCAs to measure,
    in ``cuda_devices`` order; ``gpudirect`` with ``params.cuda_devices`` (GPU index
    per HCA, the node's PCIe pairing) puts ib_write_bw's buffers in GPU memory; ``floor`` in the transport's
    unit (Gb/s, busbw GB/s), None = relative; ``replaced``: the profile replaced the kind's tool.
    Raises :class:`ValidationError` for a kind not in :data:`KINDS`.
    """
    kind = test.get("kind")
    if kind not in KINDS:
        raise ValidationError("fabric test %r: kind %r has no implementation (known: %s)"
                              % (test.get("name"), kind, ", ".join(sorted(KINDS))), where="test")
    spec = KINDS[kind]
    params = dict(test.get("params") or {})
    thresholds = dict(test.get("thresholds") or {})
    transport = params.get("transport") or spec["transport"]
    if transport != spec["transport"]:
        thresholds = {spec["floor"]: params.get("floor")}
    size = params.get("size_bytes") or params.get("max_bytes")
    unmeasured = {}
    if transport == spec["transport"] and thresholds.get(spec["floor"]) is None:
        # judged relative to its peers only, a fleet that is uniformly slow would pass: never without the floor
        unmeasured[spec["floor"]] = "the SKU declares no %s for this test" % spec["floor"]
    binary = params.get("binary")
    if binary is None and spec["collective"] and transport in ("nccl-tests", "rccl-tests"):
        binary = _nccl.BINARIES[spec["collective"]]
    return {"check": test.get("name"), "transport": transport, "replaced": transport != spec["transport"],
            "floor": thresholds.get(spec["floor"]),
            "nodes": int(params.get("nodes") or 2), "message_bytes": size, "binary": binary,
            "gpus_per_node": params.get("gpus_per_node"), "duration_s": params.get("duration_s"),
            "bidirectional": bool(params.get("bidirectional", spec["floor"] == "min_bidir_gbps")),
            "gpudirect": bool(params.get("gpudirect")) and transport == "ib_write_bw",
            "cuda_devices": params.get("cuda_devices"), "hcas": params.get("hcas"),
            "max_p99_lat_us": thresholds.get("max_p99_lat_us") if transport == "ib_write_bw" else None,
            "unmeasured": unmeasured}


def effective_floor(options: dict[str, Any], module_floor: float | None) -> float | None:
    """The floor a run judges on: the SKU's (``options`` from :func:`test_options`), unless the profile replaced the
    kind's tool and the module was given one (the lab's calibrated iperf3 floor); without ``options``, the module's."""
    if not options or (options["replaced"] and module_floor is not None):
        return module_floor
    return options["floor"]


def gpudirect_gap(options: dict[str, Any]) -> dict[str, str]:
    """``{"gpudirect": why}`` where the SKU declares GPUDirect but gives no GPU per HCA: host memory would be
    measured instead, so the declared test is not what ran (:func:`hold_unmeasured` keeps it from passing)."""
    if options.get("gpudirect") and not options.get("cuda_devices"):
        return {"gpudirect": "GPUDirect declared without params.cuda_devices (the GPU beside each HCA): host memory "
                             "was measured"}
    return {}


def hold_unmeasured(interfaces: dict[str, dict[str, Any]], unmeasured: dict[str, str]) -> None:
    """A node that passed while a declared threshold went unmeasured is ``not_run`` saying which (in place)."""
    if not unmeasured:
        return
    for outcome in interfaces.values():
        if outcome.get("status") == "pass":
            outcome["status"] = "not_run"
            outcome["reason"] = "measured, but %s; the test cannot pass unjudged (%s)" % (
                "; ".join("%s: %s" % kv for kv in sorted(unmeasured.items())), outcome.get("reason") or "")


def judge_single_node(text: str, rc: int, floor: float | None, expected_ranks: int | None,
                      size: int | None = None) -> dict[str, Any]:
    """Judge one node's nccl-tests/rccl-tests run over all its GPUs.

    nccl-tests rules (doc/PERFORMANCE.md: busbw at one rank is 0 by definition): the rank count from the
    ``# Rank n ... device`` ("Using devices") lines decides whether the run can be judged -- one rank, or
    fewer than ``expected_ranks``, is an invalid configuration (``not_run``), never a pass nor a 0 GB/s fail.
    ``Test ... failure`` lines, a non-zero exit after the run started, ``#wrong``/out-of-bounds values fail quoting
    them (a non-zero exit with no nccl-tests output at all is ``not_run``: the launcher did not reach it); so does a
    run with no busbw at ``size`` (bytes; default its largest size).  Passes only with ``floor`` (GB/s) met;
    without a floor it is ``not_run``.  Returns ``{status, reason, remediation, observed}``.
    """
    failures = _nccl.failure_lines(text)
    if failures:
        return {"status": "fail", "reason": "nccl-tests reported: %s" % " | ".join(failures)[:400],
                "remediation": "read the raw output; reset the GPUs or NICs named and rerun", "observed": None}
    if rc not in (0, None) and "nThread" not in text:
        # nothing of nccl-tests ran (ssh exits 255 for its own errors): no evidence about the node
        return {"status": "not_run", "reason": "no nccl-tests output (exit %s): %s" % (rc, tail(text, 300)),
                "remediation": "check that the node is reachable through the launcher and rerun", "observed": None}
    if rc not in (0, None):
        return {"status": "fail", "reason": "exited %s: %s" % (rc, tail(text, 300)),
                "remediation": "read the raw output kept as evidence", "observed": None}
    try:
        parsed = _nccl.parse(text)
    except ParseError as exc:
        return {"status": "fail", "reason": "no complete result: %s" % exc,
                "remediation": "the run did not finish; read the raw output", "observed": None}
    nranks = parsed.get("nranks")
    observed: dict[str, Any] = {"nranks": nranks, "avg_busbw": parsed.get("avg_busbw")}
    invalid = _nccl.rank_problem(parsed, expected_ranks)
    if invalid:
        return {"status": "not_run", "observed": observed, "reason": invalid,
                "remediation": "run with every GPU of the node visible (-g <gpus>) and rerun"}
    corrupt = _nccl.corruption(parsed)
    if corrupt["corrupt"]:
        return {"status": "fail", "observed": dict(observed, corruption=corrupt),
                "reason": "data corruption: #wrong at sizes %s, %s out-of-bounds values"
                          % (corrupt["wrong_sizes"], corrupt["out_of_bounds"]),
                "remediation": "reset the GPUs, rerun; replace the GPU or baseboard if it repeats"}
    points = dict(_nccl.curve(parsed))
    at = int(size) if size else (max(points) if points else None)
    busbw = points.get(at) if at is not None else None
    observed.update(size_bytes=at, busbw_gbps=busbw)
    if busbw is None or at is None:
        return {"status": "fail", "observed": observed, "remediation": "rerun with -e at the declared size",
                "reason": "no busbw at %s bytes (no plateau measured)" % at}
    if floor is None:
        return {"status": "not_run", "observed": observed, "remediation": "declare min_busbw_gbps in the SKU",
                "reason": "busbw %.1f GB/s measured but no floor declared; never a pass without one" % busbw}
    if busbw < float(floor):
        return {"status": "fail", "observed": observed,
                "reason": "busbw %.1f GB/s at %s bytes < floor %.1f GB/s" % (busbw, at, float(floor)),
                "remediation": "check NVLink/NVSwitch health and the NCCL environment; rerun"}
    return {"status": "pass", "observed": observed, "remediation": "",
            "reason": "busbw %.1f GB/s at %s bytes >= floor %.1f GB/s over %d ranks" % (busbw, at, float(floor),
                                                                                        nranks)}


def run_single_node(nodes: list[str], wrap: Callable[[str, list[str]], list[str]], options: dict[str, Any],
                    timeout_s: float) -> dict[str, dict[str, Any]]:
    """Run ``options``' nccl/rccl-tests binary on each node alone over ``gpus_per_node`` GPUs (``-g``).

    ``wrap(node, argv)`` is the launcher's.  Returns ``{node: {status, reason, remediation, observed,
    evidence}}``; an absent tool or a timeout is ``not_run`` with that reason.
    """
    gpus = int(options.get("gpus_per_node") or 8)
    size = options.get("message_bytes") or _nccl.DEFAULT_MAX_BYTES
    binary = options.get("binary") or "all_reduce_perf"
    out: dict[str, dict[str, Any]] = {}
    for node in nodes:
        argv = [binary, "-b", str(size), "-e", str(size), "-g", str(gpus), "-c", "1"]
        rc, stdout, stderr = run_command(wrap(node, argv), timeout_s)
        evidence = {"tool": options.get("transport"), "argv": argv, "output_tail": tail(stdout + stderr, 2000)}
        if missing_tool(rc, stderr, binary):
            verdict = {"status": "not_run", "reason": "%s not found on %s" % (binary, node), "remediation":
                       "install nccl-tests/rccl-tests on the node image", "observed": None}
        elif rc == TIMEOUT_RC:
            verdict = {"status": "not_run", "reason": "%s timed out after %ss on %s" % (binary, timeout_s, node),
                       "remediation": "rerun; look at the raw output for where it hung", "observed": None}
        else:
            verdict = judge_single_node(stdout + "\n" + stderr if rc else stdout, rc, options.get("floor"), gpus,
                                        size)
        out[node] = dict(verdict, evidence=evidence)
    return out
