# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The cluster_validation loop on a real Slurm cluster: the side effects :mod:`.evict` takes as callables.

Launch (sbatch, wait, parse the training log, compute MFU), telemetry from the run's file, spares from the
ledger's burn_in gates, drain through Slurm, ledger records and the handoff certificate.
"""

from __future__ import annotations

import os
from typing import Any, Dict, List, Optional, TypedDict

from .._core.errors import SymphonyError, ToolNotFoundError
from . import handoff as _handoff
from . import mfu as _mfu
from . import outliers as _outliers
from . import recipes as _recipes
from .evict import node_results, pick_spares, run_validation, scales_from_targets


def slurm_launcher(slurm, script, log_dir, job_name, timeout_s, log_format, partition=None, model=None,
                   gpu=None, gpus_per_node=8, warmup=1, poll_s=2.0, names=None):
    """A ``launch`` callable: sbatch ``script`` on the scale's nodes, wait, parse the log, compute MFU.

    ``log_format``: ``torchtitan``, ``megatron`` or ``smoke`` (``_recipes``).  ``model``:
    an ``_mfu`` model name or dict (default: the scale's recipe label, e.g. ``llama3_8b``);
    for the smoke workload the model and the measured CPU GEMM peak come from its own
    summary line.  ``gpu``: accelerator name for the dense peak table.  ``names``: ``{node: Slurm NodeName}``
    (:func:`resolve_slurm_names`; a node missing from it is its own Slurm name).
    """
    names = names or {}

    def launch(scale, nodes, attempt):
        name = "%s-a%d-n%d" % (job_name, attempt, len(nodes))
        job_id = slurm.submit(script, nodes=[names.get(n, n) for n in nodes], partition=partition, job_name=name)
        job = slurm.wait(job_id, timeout_s, poll_s=poll_s)
        log = job.get("stdout") or os.path.join(log_dir, "%s-%s.out" % (name, job_id))
        out = {"job": job, "log": log, "mfu": None}
        try:
            text = _recipes.read_log(log)
            parsed = _recipes.parse_log(text, log_format, where=log)
            if log_format == "smoke":
                if not parsed.get("summary"):
                    raise _recipes.ParseError("the smoke workload printed no smoke_summary", where=log)
                shape = _mfu.ModelShape(**_recipes.smoke_shape(parsed["summary"]))
                peak = parsed["summary"]["gemm_peak_tflops"][0]
                source = "measured: torch.matmul fp32 GEMM on the run's rank 0 host"
                tput = _recipes.throughput(parsed, "smoke", warmup=warmup)
            else:
                shape = _mfu.model_shape(model or scale.recipe)
                peak, source = _mfu.peak_tflops(gpu, scale.precision)
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


def ledger_spares(ledger, candidates):
    """A ``spares`` callable: twin spares whose burn_in gate passed in ``ledger``."""
    def spares(count, exclude):
        gates = ledger.current_gates()
        burn_in = {node: stages["burn_in"].status for node, stages in gates.items() if "burn_in" in stages}
        return pick_spares(candidates, burn_in, exclude, count)[0]
    return spares


class _RequiredOptions(TypedDict):
    nodes: List[str]            # inventory (twin) names of the run's nodes
    script: str                 # the rendered sbatch script
    log_dir: str
    log_format: str             # torchtitan, megatron or smoke (``_recipes``)
    targets: List[Dict[str, Any]]  # SKU ``validation.mfu_targets``-shaped


class ValidationOptions(_RequiredOptions, total=False):
    """What :func:`run_cluster_validation` takes; a missing optional key takes the default named here."""

    spares: List[str]           # twin spare pool, in order
    job_name: str               # "cluster-validation"
    partition: Optional[str]
    timeout_s: int              # seconds per job, 1800
    poll_s: float               # seconds between job polls, 2.0
    telemetry_file: Optional[str]
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
    scales = scales_from_targets(opts["targets"])
    launch = slurm_launcher(slurm, opts["script"], opts["log_dir"], opts.get("job_name", "cluster-validation"),
                            opts.get("timeout_s", 1800), opts["log_format"], partition=opts.get("partition"),
                            model=opts.get("model"), gpu=opts.get("gpu"), gpus_per_node=opts.get("gpus_per_node", 8),
                            warmup=opts.get("warmup", 1), poll_s=opts.get("poll_s", 2.0), names=names)
    if opts.get("telemetry_file"):
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
        slurm.drain(names.get(node, node), reason)

    result = run_validation(list(opts["nodes"]), scales, launch, telemetry, drain,
                            ledger_spares(ledger, list(opts.get("spares") or [])), int(opts.get("max_attempts", 3)),
                            on_event=on_event)
    results, verdicts = node_results(result, run_id)
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
