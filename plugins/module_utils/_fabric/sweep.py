# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The NCCL/RCCL sweep: message sizes by powers of two at power-of-two node counts, judged by
:func:`_host.nccl.analyse` against the SKU's busbw floors; the ``nccl_sweep`` module.
"""

from __future__ import annotations

import time

from .._core.errors import ParseError, ToolNotFoundError, ValidationError
from .._core.gate import CheckResult, new_run_id
from .._core.ledger import open_ledger
from .._core.sku import load_manifest
from .._host import nccl as _nccl
from .._host import nccl_info as _nccl_info
from .._host.launchers import launcher_from_params
from .commands import missing_tool, run_command, tail
from .schedules import check_nodes


def floor_for(manifest, collective, nodes):
    """The SKU's busbw floor (GB/s) for ``collective`` at ``nodes`` nodes from
    ``validation.nccl_busbw_floors`` (an entry without ``nodes`` applies to every count; the most
    specific wins), or None."""
    collective = _nccl.normalise_collective(collective)
    best = None
    for entry in ((manifest or {}).get("validation") or {}).get("nccl_busbw_floors") or []:
        if _nccl.normalise_collective(entry["collective"]) != collective:
            continue
        if entry.get("nodes") not in (None, nodes):
            continue
        if best is None or entry.get("nodes") is not None:
            best = entry
    return float(best["min_busbw_gbps"]) if best else None


def run_nccl_sweep(hosts, launcher=None, collective="all_reduce", gpus_per_node=8, max_bytes=_nccl.DEFAULT_MAX_BYTES,
                   min_bytes=8, floors=None, tolerance=0.10, nccl_env=None, binary_dir="", timeout_s=1800,
                   counts=None, outputs=None):
    """Sweep message sizes (``min_bytes``..``max_bytes`` by powers of two) at power-of-two node counts.

    ``floors``: ``{node_count: GB/s}`` (see :func:`floor_for`); ``outputs``: ``{node_count: text}`` of runs
    already made (analysed instead of launching).  Multi-node counts need ``srun``/``mpirun``; one node
    runs through any launcher as one process driving every GPU (``-g gpus_per_node``).
    Returns ``{"ok": bool|None, "runs": [{"nodes", "hosts", "status": pass|fail|not_run, "reason",
    "analysis", "command"}], "nccl_env": {...}, "collective"}``; ``ok`` is False when a count failed, else None
    when one could not run or be judged (no floor, fewer ranks than ``n * gpus_per_node``), else True.
    """
    collective = _nccl.normalise_collective(collective)
    binary = (binary_dir.rstrip("/") + "/" if binary_dir else "") + _nccl.BINARIES[collective]
    counts = counts or _nccl.node_counts(len(hosts))
    env = dict(nccl_env or {})
    # NCCL's own init lines are what the golden-recipe check reads (the HCAs, OOB interface and network it chose).
    run_env = dict(env, NCCL_DEBUG=env.get("NCCL_DEBUG") or "INFO")
    runs = []
    for n in counts:
        group = list(hosts[:n])
        run = {"nodes": n, "hosts": group, "command": None, "analysis": None}
        text = (outputs or {}).get(n)
        if text is None:
            args = [binary, "-b", str(min_bytes), "-e", str(max_bytes), "-f", "2", "-c", "1"]
            try:
                if n == 1:
                    argv = launcher.wrap(group[0], ["env"] + ["%s=%s" % kv for kv in sorted(run_env.items())] +
                                         args + ["-g", str(gpus_per_node)])
                else:
                    argv = launcher.group(group, gpus_per_node, args + ["-g", "1"], run_env)
            except ValidationError as exc:
                runs.append(dict(run, status="not_run", reason=str(exc)))
                continue
            run["command"] = argv
            rc, text, err = run_command(argv, timeout_s)
            if missing_tool(rc, err, binary.rsplit("/", 1)[-1]) or missing_tool(rc, err, argv[0]):
                runs.append(dict(run, status="not_run", reason="%s not found: %s" % (binary, tail(err, 200))))
                continue
            if rc != 0:
                runs.append(dict(run, status="fail", reason="%s exited %d: %s" % (binary, rc, tail(err or text, 300))))
                continue
        failures = _nccl.failure_lines(text)
        if failures:
            runs.append(dict(run, status="fail", reason="nccl-tests reported: %s" % " | ".join(failures)[:400]))
            continue
        try:
            parsed = _nccl.parse(text)
        except ParseError as exc:
            runs.append(dict(run, status="fail", reason=str(exc)))
            continue
        invalid = _nccl.rank_problem(parsed, n * gpus_per_node)
        if invalid:
            runs.append(dict(run, status="not_run", reason=invalid))
            continue
        analysis = _nccl.analyse(parsed, (floors or {}).get(n), tolerance, env or parsed.get("env"))
        info = _nccl_info.parse_debug_info(text)
        analysis["nccl_info"] = info
        # A recorded output without NCCL's init lines cannot be checked against the recipe; one we ran can.
        if env and (text is not (outputs or {}).get(n) or info["version"] or info["transport"]):
            analysis["golden_recipe"] = _nccl_info.golden_recipe_mismatches(info, env)
            if analysis["golden_recipe"]:
                analysis["ok"] = False
                analysis["reasons"] = list(analysis["reasons"]) + ["golden recipe: %s" % "; ".join(
                    analysis["golden_recipe"])]
        status = "not_run" if analysis["ok"] is None else "pass" if analysis["ok"] else "fail"
        runs.append(dict(run, status=status, analysis=analysis,
                         reason="; ".join(analysis["reasons"]) or "busbw rises monotonically to %.2f GB/s"
                         % analysis["shape"]["plateau_gbps"]))
    statuses = [r["status"] for r in runs]
    # A sweep passes only when every node count passed: one that could not run leaves it unjudged.
    ok = False if "fail" in statuses else None if "not_run" in statuses or not statuses else True
    return {"ok": ok, "runs": runs, "nccl_env": env, "collective": collective}


def nccl_sweep_module(params, check_mode=False):
    """Everything ``symphony.cluster.nccl_sweep`` does; ``params`` are the module's parameters.

    The SKU manifest (``sku_manifest``) supplies ``nccl_env`` (the golden recipe), ``validation.nccl_max_bytes``
    and ``validation.nccl_busbw_floors`` unless the parameters override them.  Per node a check result
    ``nccl_sweep_<collective>`` at ``stage`` (pass / fail / not_run) with every run's analysis and the NCCL
    environment as evidence.
    """
    nodes = list(params["nodes"])
    check_nodes(nodes)
    collective = _nccl.normalise_collective(params.get("collective") or "all_reduce")
    manifest = None
    if params.get("sku_manifest"):
        manifest = load_manifest(params["sku_manifest"])
    validation = (manifest or {}).get("validation") or {}
    max_bytes = params.get("max_bytes") or validation.get("nccl_max_bytes") or _nccl.DEFAULT_MAX_BYTES
    min_bytes = params.get("min_bytes") or 8
    env = dict((manifest or {}).get("nccl_env") or {})
    env.update(params.get("nccl_env") or {})
    counts = params.get("node_counts") or _nccl.node_counts(len(nodes))
    bad_counts = [c for c in counts if c < 1 or c > len(nodes)]
    if bad_counts:
        raise ValidationError("node counts %s exceed the %d nodes given" % (bad_counts, len(nodes)), where="node_counts")
    floors = {}
    for n in counts:
        floors[n] = params["floor_gbps"] if params.get("floor_gbps") is not None else floor_for(manifest, collective, n)
    outputs = {}
    for item in params.get("results_from") or []:
        try:
            with open(item["path"]) as handle:
                outputs[int(item["nodes"])] = handle.read()
        except OSError as exc:
            raise ValidationError("cannot read recorded nccl-tests output: %s" % exc, where=item["path"])
    run_id = params.get("run_id") or new_run_id("nccl")
    check = "nccl_sweep_%s" % collective
    sizes = _nccl.sweep_sizes(max_bytes, min_bytes)
    if check_mode:
        return {"changed": False, "run_id": run_id, "check": check, "node_counts": counts, "sizes": len(sizes),
                "min_bytes": min_bytes, "max_bytes": max_bytes, "floors": floors, "nccl_env": env}
    launcher = launcher_from_params(dict(params, launcher=params.get("launcher") or "srun"))
    started = time.time()
    try:
        if len(outputs) < len(counts):
            launcher.check()
        res = run_nccl_sweep(nodes, launcher, collective, params.get("gpus_per_node") or 8, max_bytes, min_bytes,
                             floors, params.get("tolerance") or 0.10, env, params.get("binary_dir") or "",
                             params.get("timeout_s") or 1800, counts, outputs)
    except ToolNotFoundError as exc:
        res = {"ok": None, "runs": [{"nodes": n, "hosts": nodes[:n], "status": "not_run", "reason": str(exc),
                                     "analysis": None, "command": None} for n in counts],
               "nccl_env": env, "collective": collective}
    finished = time.time()
    failing = [r for r in res["runs"] if r["status"] == "fail"]
    if res["ok"] is None:
        status = "not_run"
        reason = "; ".join(sorted({"%d node(s): %s" % (r["nodes"], r["reason"]) for r in res["runs"]}))
    elif res["ok"]:
        status = "pass"
        reason = "; ".join("%d node(s): %s" % (r["nodes"], r["reason"]) for r in res["runs"] if r["status"] == "pass")
    else:
        status = "fail"
        reason = "; ".join("%d node(s): %s" % (r["nodes"], r["reason"]) for r in failing)
    summary = [{"nodes": r["nodes"], "status": r["status"], "reason": r["reason"],
                "plateau_gbps": (r["analysis"] or {}).get("shape", {}).get("plateau_gbps"),
                "failing_sizes": (r["analysis"] or {}).get("failing_sizes", []),
                "dips": [d["size_h"] for d in ((r["analysis"] or {}).get("shape", {}).get("dips") or [])]}
               for r in res["runs"]]
    recorded = False
    if params.get("record", True):
        ledger = open_ledger(params.get("ledger"))
        try:
            ledger.record_results([CheckResult(
                node=n, stage=params.get("stage") or "cluster_validation", check=check, status=status,
                reason=reason, expected={"floors_gbps": floors, "max_bytes": max_bytes},
                observed=summary, remediation=("localise with symphony.cluster.fabric_test, then rerun the sweep"
                                               if status == "fail" else ""),
                evidence={"runs": res["runs"], "nccl_env": env}, started=started, finished=finished, run_id=run_id)
                for n in nodes])
            recorded = True
        finally:
            ledger.close()
    return {"changed": recorded, "run_id": run_id, "check": check, "status": status, "reason": reason,
            "runs": summary, "nccl_env": env, "node_counts": counts}
