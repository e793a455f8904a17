# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The cluster_validation loop on a real Slurm cluster: the side effects :mod:`.evict` takes as callables.

Launch (sbatch, wait, parse the training log, compute MFU), telemetry from the run's file, spares from the
ledger's burn_in gates, drain through Slurm, ledger records and the handoff certificate.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any, Dict, List, Optional, TypedDict

from .._core.errors import SymphonyError, ToolNotFoundError, ValidationError
from .._core.gate import CheckResult
from .._host import slurm as _slurm
from . import handoff as _handoff
from . import mfu as _mfu
from . import outliers as _outliers
from . import precision as _precision
from . import recipes as _recipes
from . import stragglers as _stragglers
from .evict import blocked_results, node_results, pick_spares, run_validation, scales_from_targets


def slurm_launcher(slurm, script, log_dir, job_name, timeout_s, log_format, partition=None, model=None,
                   gpu=None, gpus_per_node=8, warmup=1, poll_s=2.0, names=None, stragglers=None, clusters=None,
                   telemetry_dir=None, sample_dirs=None):
    """A ``launch`` callable: sbatch the scale's script on the scale's nodes, wait, parse the log, compute MFU.

    ``script``: one sbatch script for every scale, or ``callable(scale, n_nodes) -> path`` (one script per scale
    and precision, :func:`script_writer`).  ``log_format``: ``torchtitan``, ``megatron`` or ``smoke``
    (``_recipes``).  ``model``: an ``_mfu`` model name or dict (default: the scale's recipe label, e.g.
    ``llama3_8b``); for the smoke workload the model and the measured GEMM peak come from its own summary line.
    ``gpu``: accelerator name for the dense peak table.  ``names``: ``{node: Slurm NodeName}``
    (:func:`resolve_slurm_names`; a node missing from it is its own Slurm name).  The precision is the one the
    log confirms (:func:`_precision.confirm`); MFU is against that precision's dense peak, and a log that does
    not confirm the scale's precision gives ``precision_error`` and no MFU.  ``stragglers``: the SKU's
    ``validation.stragglers``.  ``clusters``: a dict the launcher fills with ``{node: cluster}`` where sbatch
    answered a federated cluster, so the node is drained there.  ``telemetry_dir``: where the job's samplers
    write (``<telemetry_dir>/<job id>/``, the template's ``job.telemetry_dir``); each job's directory is appended
    to ``sample_dirs[attempt]``.
    """
    names = names or {}
    to_node = {slurm_name: node for node, slurm_name in names.items()}
    rules = stragglers or {}

    def launch(scale, nodes, attempt):
        name = "%s-a%d-n%d-%s" % (job_name, attempt, len(nodes), scale.precision)
        path = script(scale, len(nodes)) if callable(script) else script
        job_id = slurm.submit(path, nodes=[names.get(n, n) for n in nodes], partition=partition, job_name=name)
        job = slurm.wait(job_id, timeout_s, poll_s=poll_s)
        if clusters is not None and job.get("cluster"):
            clusters.update((n, job["cluster"]) for n in nodes)
        log = job.get("stdout") or os.path.join(log_dir, "%s-%s.out" % (name, job_id))
        out = {"job": job, "log": log, "mfu": None, "script": path}
        if telemetry_dir and sample_dirs is not None:
            sample_dirs.setdefault(attempt, []).append(os.path.join(telemetry_dir, str(job_id)))
        try:
            text = _recipes.read_log(log)
            ranks = _stragglers.per_rank(_stragglers.parse_rank_steps(text), warmup=warmup)
            for item in ranks.values():
                item["node"] = to_node.get(item["node"], item["node"])
            out["rank_steps"] = {str(r): {"node": v["node"], "median_s": v["median_s"], "steps": v["steps"]}
                                 for r, v in ranks.items()}
            out["stragglers"] = _stragglers.find_stragglers(ranks, rules.get("z_threshold"),
                                                            rules.get("min_slowdown_pct"))
            parsed = _recipes.parse_log(text, log_format, where=log)
            used, evidence, error = _precision.confirm(_recipes.strip_ansi(text), log_format, scale.precision,
                                                       parsed.get("summary"))
            out.update(precision_used=used, precision_evidence=evidence)
            if error:
                out["precision_error"] = error
                return out
            if log_format == "smoke":
                if not parsed.get("summary"):
                    raise _recipes.ParseError("the smoke workload printed no smoke_summary", where=log)
                shape = _mfu.ModelShape(**_recipes.smoke_shape(parsed["summary"]))
                if used == "fp8":
                    # The workload's GEMM probe runs in bf16; an fp8 run is judged against the part's fp8 peak.
                    peak, source = _mfu.peak_tflops(gpu, used)
                else:
                    peak = parsed["summary"]["gemm_peak_tflops"][0]
                    source = "measured: torch.matmul %s GEMM on the run's rank 0 host" % used
                tput = _recipes.throughput(parsed, "smoke", warmup=warmup)
            else:
                shape = _mfu.model_shape(model or scale.recipe)
                peak, source = _mfu.peak_tflops(gpu, used)
                devices = len(nodes) * max(1, int(gpus_per_node))
                tput = _recipes.throughput(parsed, log_format, warmup=warmup, seq_len=shape.seq_len,
                                           n_devices=devices)
            out["mfu"] = _mfu.compute_mfu(shape, scale.convention, tput["tokens_per_s_per_device"], peak,
                                          peak_source=source, reported_mfu_pct=tput["reported_mfu_pct"])
            out["mfu"]["last_loss"] = tput["last_loss"]
        except SymphonyError as exc:
            out["error"] = str(exc)
        return out

    return launch


def script_writer(template, job, out_dir, recipe):
    """A ``script`` callable for :func:`slurm_launcher`: one sbatch script per scale and precision.

    Renders ``template`` (the role's ``sbatch.j2``) with ``job`` (its variables) plus the scale's precision and
    that precision's recipe flags (:func:`_precision.precision_args`, appended to ``job["args"]``) into
    ``out_dir/cluster_validation-<precision>-<N>n.sbatch``.  The script takes its node count from the allocation
    (``$SLURM_NNODES``), so the same text is right at any scale; the name says which scale it was written for.
    Raises :class:`ValidationError` for a precision the recipe cannot train in.
    """
    def script(scale, n_nodes):
        args = list(job.get("args") or []) + _precision.precision_args(recipe, scale.precision)
        variables = dict(job, precision=scale.precision, nodes=n_nodes, args=args)
        text = _slurm.render_template(template, {"job": variables})
        path = os.path.join(out_dir, "cluster_validation-%s-%dn.sbatch" % (scale.precision, n_nodes))
        try:
            with open(path, "w", encoding="utf-8") as handle:
                handle.write(text)
        except OSError as exc:
            raise ValidationError("cannot write the job script: %s" % exc.strerror, where=path)
        return path

    return script


def file_telemetry(path, z_threshold=3.5, delta_c=10.0, max_temp_margin_c=3.0, max_operating_temp_c=None,
                   names=None):
    """A ``telemetry`` callable reading the run's telemetry file (the lab's source) and finding outliers.

    Only the GPUs of the nodes in the run are compared with each other.  Rows may name a node by its
    inventory name or by its Slurm name (``names``: ``{node: Slurm NodeName}``); outliers name the node by its
    inventory name.
    """
    to_node = {slurm_name: node for node, slurm_name in (names or {}).items()}

    def telemetry(nodes, attempt):
        if not os.path.exists(path):
            raise ToolNotFoundError("telemetry file %s does not exist" % path, where=path)
        trace = _outliers.load_file(path)
        gpus = [(gpu[0] if gpu[0] in nodes else to_node.get(gpu[0], gpu[0]),) + tuple(gpu[1:]) for gpu in trace.gpus]
        keep = [i for i, gpu in enumerate(gpus) if gpu[0] in nodes]
        if not keep:
            raise ToolNotFoundError("telemetry file has no sample for %s" % ", ".join(nodes), where=path)
        sub = _outliers.Telemetry([gpus[i] for i in keep],
                                  {m: a[keep] for m, a in trace.values.items()}, source=path)
        return _outliers.find_outliers(sub, z_threshold=z_threshold, delta_c=delta_c,
                                       max_temp_margin_c=max_temp_margin_c,
                                       max_operating_temp_c=max_operating_temp_c)

    return telemetry


def _read_json(path):
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except (OSError, ValueError) as exc:
        return {"tried": ["unreadable status %s: %s" % (path, exc)]}


def _read_samples(path):
    """A sampler's JSON lines; the last line is dropped when the kill at the end of training cut it short."""
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except OSError as exc:
        raise ToolNotFoundError("cannot read the GPU samples: %s" % exc.strerror, where=path)
    if not text.endswith("\n"):
        text = text[:text.rfind("\n") + 1]
    return _outliers.parse_records(text, path) if text.strip() else []


def sampled_telemetry(sample_dirs, info, thermal=None, max_operating_temp_c=None, names=None):
    """A ``telemetry`` callable: the samples the job's own samplers took during the attempt (``gpu_sampler.py``).

    ``sample_dirs``: ``{attempt: [job telemetry directory]}`` (filled by :func:`slurm_launcher`); ``info`` gets
    ``{attempt: {"source", "files", "samples"}}`` for the evidence.  Samples name nodes by Slurm name; outliers
    name the inventory node.  Raises :class:`ToolNotFoundError` with each node's sampler status (no GPU source,
    no sample) when nothing was sampled: the outlier check is then ``not_run`` with that reason.
    """
    thermal = thermal or {}
    to_node = {slurm_name: node for node, slurm_name in (names or {}).items()}

    def telemetry(nodes, attempt):
        records, files, sources, why = [], [], set(), []
        for folder in sample_dirs.get(attempt, []):
            for entry in sorted(os.listdir(folder)) if os.path.isdir(folder) else []:
                path = os.path.join(folder, entry)
                if entry.endswith(".status.json"):
                    status = _read_json(path)
                    if not status.get("source"):
                        why.append("%s: %s" % (status.get("node", entry), "; ".join(status.get("tried") or [])))
                    continue
                if not entry.endswith(".jsonl"):
                    continue
                files.append(path)
                for rec in _read_samples(path):
                    rec["node"] = to_node.get(rec.get("node"), rec.get("node"))
                    if rec["node"] in nodes:
                        records.append(rec)
                        sources.add(rec.get("source", "?"))
        if not records:
            raise ToolNotFoundError("no GPU sample was taken during the run (%s)"
                                    % ("; ".join(why) or "no sampler output in %s"
                                       % ", ".join(sample_dirs.get(attempt, [])) or "no job ran"), where="telemetry")
        source = ", ".join(sorted(sources))
        info[attempt] = {"source": source, "files": files, "samples": len(records)}
        trace = _outliers.Telemetry.from_records(records, source=source)
        return _outliers.find_outliers(trace, z_threshold=thermal.get("z_threshold", 3.5),
                                       delta_c=thermal.get("delta_c", 10.0),
                                       max_temp_margin_c=thermal.get("max_temp_margin_c", 3.0),
                                       max_operating_temp_c=max_operating_temp_c)

    return telemetry


def ledger_spares(ledger, candidates):
    """A ``spares`` callable: twin spares whose burn_in gate passed in ``ledger``."""
    def spares(count, exclude):
        gates = ledger.current_gates()
        burn_in = {node: stages["burn_in"].status for node, stages in gates.items() if "burn_in" in stages}
        return pick_spares(candidates, burn_in, exclude, count)[0]
    return spares


class _RequiredOptions(TypedDict):
    nodes: List[str]            # inventory (twin) names of the run's nodes
    log_dir: str
    log_format: str             # torchtitan, megatron or smoke (``_recipes``)
    targets: List[Dict[str, Any]]  # SKU ``validation.mfu_targets``-shaped


class ValidationOptions(_RequiredOptions, total=False):
    """What :func:`run_cluster_validation` takes; a missing optional key takes the default named here."""

    script: str                 # one rendered sbatch script for every scale, or:
    template: str               # the role's sbatch.j2, rendered per scale and precision (script_writer) with
    job: Dict[str, Any]         # its variables, into script_dir
    script_dir: str
    ladder_max_nodes: int       # the scale ladder's cap (0: the SKU's scales only)
    stragglers: Dict[str, float]  # SKU validation.stragglers: z_threshold, min_slowdown_pct
    blocked: Dict[str, str]     # {node: why} nodes that cannot take part (drained/down in Slurm): blocked rows
    spares: List[str]           # twin spare pool, in order
    job_name: str               # "cluster-validation"
    partition: Optional[str]
    timeout_s: int              # seconds per job, 1800
    poll_s: float               # seconds between job polls, 2.0
    telemetry_file: Optional[str]  # a telemetry file for the run (a DCGM exporter scrape), or:
    telemetry_dir: Optional[str]   # where the job's samplers write (gpu_sampler.py; preferred)
    nccl_not_run: str           # why the NCCL sweep could not run: nccl_sweep_all_reduce not_run per node
    optional: List[str]         # checks the gate does not require (SKU gates.<profile>.cluster_validation)
    thermal: Dict[str, float]   # z_threshold, delta_c, max_temp_margin_c
    max_operating_temp_c: Optional[float]
    max_attempts: int           # 3
    model: Any                  # an ``_mfu`` model name or dict
    gpu: Optional[str]
    gpus_per_node: int          # 8
    warmup: int                 # 1
    cluster: str                # "cluster"
    sku: str                    # ""
    out_dir: Optional[str]      # where the certificate is written (none: not written)
    slurm_names: Dict[str, str]  # {node: Slurm NodeName} where they differ, see resolve_slurm_names


def run_cluster_validation(opts: ValidationOptions, ledger: Any, slurm: Any, run_id: str) -> Dict[str, Any]:
    """The whole stage on a Slurm cluster: loop, ledger records, certificate.

    ``opts``: :class:`ValidationOptions`.  Nodes are named by their inventory names in the ledger and the
    certificate, by their Slurm names towards Slurm.  Returns ``{"result", "certificate", "paths", "gates"}``.
    """
    thermal = opts.get("thermal") or {}
    names = dict(opts.get("slurm_names") or {})
    scales = scales_from_targets(opts["targets"], pool=len(opts["nodes"]),
                                 ladder_max_nodes=int(opts.get("ladder_max_nodes", 0)))
    if opts.get("template"):
        script: Any = script_writer(opts["template"], dict(opts.get("job") or {}),
                                    opts.get("script_dir") or opts["log_dir"], opts["log_format"])
    elif opts.get("script"):
        script = opts["script"]
    else:
        raise ValidationError("cluster validation needs a job script or its template", where="script")
    clusters: Dict[str, str] = {}
    sample_dirs: Dict[int, List[str]] = {}
    sampled: Dict[int, Dict[str, Any]] = {}
    launch = slurm_launcher(slurm, script, opts["log_dir"], opts.get("job_name", "cluster-validation"),
                            opts.get("timeout_s", 1800), opts["log_format"], partition=opts.get("partition"),
                            model=opts.get("model"), gpu=opts.get("gpu"), gpus_per_node=opts.get("gpus_per_node", 8),
                            warmup=opts.get("warmup", 1), poll_s=opts.get("poll_s", 2.0), names=names,
                            stragglers=opts.get("stragglers"), clusters=clusters,
                            telemetry_dir=opts.get("telemetry_dir"), sample_dirs=sample_dirs)
    if opts.get("telemetry_dir"):
        telemetry = sampled_telemetry(sample_dirs, sampled, thermal, opts.get("max_operating_temp_c"), names)
    elif opts.get("telemetry_file"):
        telemetry = file_telemetry(opts["telemetry_file"], z_threshold=thermal.get("z_threshold", 3.5),
                                   delta_c=thermal.get("delta_c", 10.0),
                                   max_temp_margin_c=thermal.get("max_temp_margin_c", 3.0),
                                   max_operating_temp_c=opts.get("max_operating_temp_c"), names=names)
    else:
        def telemetry(nodes, attempt):
            raise ToolNotFoundError("no telemetry source configured for this run", where="telemetry")

    def on_event(kind, node, data):
        ledger.record_event(node, kind, dict(data, run_id=run_id))

    def drain(node, reason):
        slurm.drain(names.get(node, node), reason, cluster=clusters.get(node))

    result = run_validation(list(opts["nodes"]), scales, launch, telemetry, drain,
                            ledger_spares(ledger, list(opts.get("spares") or [])), int(opts.get("max_attempts", 3)),
                            on_event=on_event)
    for attempt in result["attempts"]:
        if attempt["number"] in sampled:
            attempt["telemetry_evidence"] = sampled[attempt["number"]]
    nccl = {item["node"]: item for item in _handoff.nccl_from_ledger(ledger)
            if item["stage"] == "cluster_validation" and item["check"].startswith("nccl_sweep")}
    took_part = sorted({n for attempt in result["attempts"] for n in attempt["nodes"]})
    if opts.get("nccl_not_run"):
        nccl.update((node, {"node": node, "check": "nccl_sweep_all_reduce", "status": "not_run",
                            "reason": opts["nccl_not_run"]}) for node in took_part)
    results, verdicts = node_results(result, run_id, nccl=nccl, optional=opts.get("optional") or ())
    blocked = dict(opts.get("blocked") or {})
    if blocked:
        extra, extra_verdicts = blocked_results(blocked, run_id)
        results, verdicts = results + extra, verdicts + extra_verdicts
        result["blocked"] = blocked
        result["actions"].extend("left out %s: %s" % (node, why) for node, why in blocked.items())
    if opts.get("nccl_not_run"):
        now = time.time()
        results = results + [CheckResult(node=node, stage="cluster_validation", check="nccl_sweep_all_reduce",
                                         status="not_run", reason=opts["nccl_not_run"], started=now, finished=now,
                                         run_id=run_id) for node in took_part]
    ledger.record_results(results)
    for verdict in verdicts:
        ledger.record_gate(verdict, run_id)
    cert = _handoff.build_certificate(result, opts.get("cluster", "cluster"), opts.get("sku", ""), run_id,
                                      nccl=_handoff.nccl_from_ledger(ledger, set(result["final_nodes"])))
    paths = _handoff.write_certificate(cert, opts["out_dir"]) if opts.get("out_dir") else None
    if paths:
        ledger.record_event(None, "handoff_certificate", {"run_id": run_id, "status": cert["status"],
                                                          "json": paths[0], "text": paths[1]})
    return {"result": result, "certificate": cert, "paths": paths,
            "gates": {v.node: v.status for v in verdicts}}
