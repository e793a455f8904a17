# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Argument specs and entry points of the cluster_validation modules (kept here so modules stay thin).

Each ``run_*`` takes the module's params dict and returns what the module returns;
errors are :class:`SymphonyError` subclasses, turned into ``fail_json`` by the module.
Plans for check mode come from pure functions (``plan_*``).
"""

from __future__ import annotations

import os

from .._core.errors import ValidationError, ToolNotFoundError
from . import mfu as _mfu
from . import recipes as _recipes

MFU_SPEC = {
    "model": {"type": "raw"},
    "seq_len": {"type": "int"},
    "convention": {"type": "str", "default": "torchtitan"},
    "tokens_per_s_per_device": {"type": "float", "no_log": False},
    "log": {"type": "path"},
    "log_format": {"type": "str", "choices": ["torchtitan", "megatron", "smoke"], "default": "torchtitan"},
    "warmup": {"type": "int", "default": 1},
    "devices": {"type": "int"},
    "gpu": {"type": "str"},
    "precision": {"type": "str", "default": "bf16"},
    "peak_tflops": {"type": "float"},
    "reported_mfu_pct": {"type": "float"},
}


def run_mfu(p):
    """mfu_calc: see the module's documentation."""
    reported = p.get("reported_mfu_pct")
    tps = p.get("tokens_per_s_per_device")
    peak, source = p.get("peak_tflops"), "given"
    shape = None
    if p.get("log"):
        from .._host.slurm import read_log
        parsed = _recipes.parse_log(read_log(p["log"]), p["log_format"], where=p["log"])
        if p["log_format"] == "smoke":
            if not parsed.get("summary"):
                raise ValidationError("the smoke log has no smoke_summary line", where=p["log"])
            shape = _mfu.ModelShape(**_recipes.smoke_shape(parsed["summary"]))
            if peak is None:
                peak, source = parsed["summary"]["gemm_peak_tflops"][0], "measured CPU GEMM peak (rank 0)"
        seq = p.get("seq_len") or (shape.seq_len if shape else _mfu.model_shape(p["model"]).seq_len
                                   if p.get("model") else None)
        tput = _recipes.throughput(parsed, p["log_format"], warmup=p["warmup"], seq_len=seq, n_devices=p.get("devices"))
        tps = tput["tokens_per_s_per_device"]
        reported = reported if reported is not None else tput["reported_mfu_pct"]
    if shape is None:
        if not p.get("model"):
            raise ValidationError("model is required (a known name or a dict)", where="model")
        shape = _mfu.model_shape(p["model"], p.get("seq_len"))
    if peak is None:
        if not p.get("gpu"):
            raise ValidationError("give peak_tflops, or gpu and precision for the dense peak table", where="gpu")
        peak, source = _mfu.peak_tflops(p["gpu"], p["precision"])
    return _mfu.compute_mfu(shape, p["convention"], tps, peak, peak_source=source, reported_mfu_pct=reported)


OUTLIERS_SPEC = {
    "source": {"type": "str", "choices": ["file", "dcgm", "local"], "default": "file"},
    "path": {"type": "path"},
    "node": {"type": "str"},
    "url": {"type": "str"},
    "validate_certs": {"type": "bool", "default": True},
    "samples": {"type": "int", "default": 10},
    "interval_s": {"type": "float", "default": 1.0},
    "nodes": {"type": "list", "elements": "str"},
    "z_threshold": {"type": "float", "default": 3.5},
    "delta_c": {"type": "float", "default": 10.0},
    "max_temp_margin_c": {"type": "float", "default": 3.0},
    "max_operating_temp_c": {"type": "float"},
}


def run_outliers(p):
    """telemetry_outliers: ``{"status", "reason", "outliers", "nodes", "gpus", "samples"}``.

    A source that cannot be read on this host (no GPU, no file) is ``not_run`` with the reason.
    """
    from . import outliers as _outliers
    try:
        if p["source"] == "file":
            if not p.get("path"):
                raise ValidationError("source=file needs path", where="path")
            trace = _outliers.load_file(p["path"], node=p.get("node"))
        elif p["source"] == "dcgm":
            if not p.get("url"):
                raise ValidationError("source=dcgm needs url", where="url")
            import requests
            url, verify = p["url"], p["validate_certs"]

            def fetch():
                resp = requests.get(url, timeout=10, verify=verify)
                resp.raise_for_status()
                return resp.text
            try:
                trace = _outliers.scrape_dcgm(fetch, p["samples"], p["interval_s"], node=p.get("node"), where=url)
            except requests.RequestException as exc:
                raise ToolNotFoundError("DCGM exporter not reachable: %s" % exc, where=url)
        else:
            trace = _outliers.sample_local(p["samples"], p["interval_s"], p.get("node") or os.uname()[1])
    except ToolNotFoundError as exc:
        return {"status": "not_run", "reason": str(exc), "outliers": [], "nodes": [], "gpus": 0, "samples": 0}
    if p.get("nodes"):
        wanted = set(p["nodes"])
        keep = [i for i, gpu in enumerate(trace.gpus) if gpu[0] in wanted]
        trace = _outliers.Telemetry([trace.gpus[i] for i in keep], {m: a[keep] for m, a in trace.values.items()},
                                    source=trace.source)
    found = _outliers.find_outliers(trace, z_threshold=p["z_threshold"], delta_c=p["delta_c"],
                                    max_temp_margin_c=p["max_temp_margin_c"],
                                    max_operating_temp_c=p.get("max_operating_temp_c"))
    status = "fail" if found else "pass"
    reason = "; ".join(o["reason"] for o in found) or "no outlier among %d GPU(s)" % len(trace.gpus)
    return {"status": status, "reason": reason, "outliers": found, "nodes": _outliers.outlier_nodes(found),
            "gpus": len(trace.gpus), "samples": trace.samples}


EVICT_SPEC = {
    "node": {"type": "str", "required": True},
    "reason": {"type": "str", "required": True},
    "spares": {"type": "list", "elements": "str", "default": []},
    "exclude": {"type": "list", "elements": "str", "default": []},
    "ledger": {"type": "str"},
    "slurm_conf": {"type": "path"},
    "run_id": {"type": "str"},
}


def plan_evict(node, node_state, reason, spares, burn_in, exclude):
    """Pure: what node_evict would do.  ``node_state``: Slurm state string of ``node``."""
    from .evict import pick_spares
    from .._host.slurm import is_drained
    chosen, skipped = pick_spares(spares, burn_in, set(exclude) | {node}, 1)
    return {"drain": not is_drained(node_state), "before": node_state, "reason": reason,
            "spare": chosen[0] if chosen else None, "skipped_spares": skipped}


def run_evict(p, check_mode=False):
    """node_evict: drain (if not drained), ledger events ``drain`` and ``spare_promoted``."""
    from .._core.ledger import open_ledger
    from .._host.slurm import Slurm
    env = dict(os.environ, SLURM_CONF=p["slurm_conf"]) if p.get("slurm_conf") else None
    slurm = Slurm(env=env)
    ledger = open_ledger(p.get("ledger"))
    state = slurm.node_states([p["node"]]).get(p["node"])
    if state is None:
        raise ValidationError("Slurm knows no node %s" % p["node"], where=p["node"])
    gates = ledger.current_gates()
    burn_in = {n: s["burn_in"].status for n, s in gates.items() if "burn_in" in s}
    plan = plan_evict(p["node"], state["state"], p["reason"], p["spares"], burn_in, p["exclude"])
    if check_mode:
        return dict(plan, changed=plan["drain"] or plan["spare"] is not None)
    if plan["drain"]:
        slurm.drain(p["node"], p["reason"])
        ledger.record_event(p["node"], "drain", {"reason": p["reason"], "run_id": p.get("run_id")})
    if plan["spare"]:
        ledger.record_event(plan["spare"], "spare_promoted", {"replaces": p["node"], "run_id": p.get("run_id")})
    return dict(plan, changed=plan["drain"] or plan["spare"] is not None)


LAUNCH_SPEC = {
    "script": {"type": "path"},
    "job_id": {"type": "str"},
    "state": {"type": "str", "choices": ["finished", "submitted", "cancelled"], "default": "finished"},
    "nodes": {"type": "list", "elements": "str"},
    "partition": {"type": "str"},
    "job_name": {"type": "str"},
    "timeout_s": {"type": "int", "default": 3600},
    "poll_s": {"type": "float", "default": 5.0},
    "log_lines": {"type": "int", "default": 40},
    "slurm_conf": {"type": "path"},
}


def run_launch(p):
    """training_launch: submit (and follow to the end) or cancel a Slurm job; returns the job record and log tail."""
    from .._host.slurm import Slurm, read_log
    from .._core.errors import SchedulerError
    env = dict(os.environ, SLURM_CONF=p["slurm_conf"]) if p.get("slurm_conf") else None
    slurm = Slurm(env=env)
    if p["state"] == "cancelled":
        if not p.get("job_id"):
            raise ValidationError("state=cancelled needs job_id", where="job_id")
        slurm.cancel(p["job_id"])
        return {"changed": True, "job": slurm.job(p["job_id"])}
    if not p.get("script"):
        raise ValidationError("state=%s needs script" % p["state"], where="script")
    job_id = slurm.submit(p["script"], nodes=p.get("nodes"), partition=p.get("partition"), job_name=p.get("job_name"))
    if p["state"] == "submitted":
        return {"changed": True, "job": slurm.job(job_id)}
    job = slurm.wait(job_id, p["timeout_s"], poll_s=p["poll_s"])
    tail = []
    if job.get("stdout"):
        try:
            tail = read_log(job["stdout"], 200_000).splitlines()[-p["log_lines"]:]
        except SchedulerError as exc:
            tail = [str(exc)]
    failed = job["state"] != "COMPLETED" or job.get("exit_code") not in (0, None)
    return {"changed": True, "job": job, "log_tail": tail, "failed_job": failed}


MANIFEST_SPEC = {
    "kind": {"type": "str", "choices": ["pytorchjob", "jobset"], "default": "pytorchjob"},
    "name": {"type": "str", "required": True},
    "namespace": {"type": "str", "default": "default"},
    "image": {"type": "str", "required": True},
    "nodes": {"type": "int", "required": True},
    "gpus_per_node": {"type": "int", "default": 8},
    "gpu_resource": {"type": "str", "default": "nvidia.com/gpu"},
    "program": {"type": "str", "required": True},
    "module": {"type": "bool", "default": False},
    "args": {"type": "list", "elements": "str", "default": []},
    "env": {"type": "dict", "default": {}},
    "node_selector": {"type": "dict", "default": {}},
    "rdzv_port": {"type": "int", "default": 29500},
}


def run_manifest(p):
    """training_manifest: the rendered, schema-checked manifest."""
    from . import k8s_render as _k8s_render
    job = {k: p[k] for k in MANIFEST_SPEC if k != "kind"}
    return _k8s_render.render(p["kind"], job)


VALIDATE_SPEC = {
    "nodes": {"type": "list", "elements": "str", "required": True},
    "spares": {"type": "list", "elements": "str", "default": []},
    "script": {"type": "path", "required": True},
    "log_dir": {"type": "path", "required": True},
    "job_name": {"type": "str", "default": "cluster-validation"},
    "partition": {"type": "str"},
    "timeout_s": {"type": "int", "default": 3600},
    "poll_s": {"type": "float", "default": 5.0},
    "log_format": {"type": "str", "choices": ["torchtitan", "megatron", "smoke"], "default": "torchtitan"},
    "targets": {"type": "list", "elements": "dict", "required": True},
    "telemetry_file": {"type": "path"},
    "thermal": {"type": "dict", "default": {}},
    "max_operating_temp_c": {"type": "float"},
    "max_attempts": {"type": "int", "default": 3},
    "model": {"type": "raw"},
    "gpu": {"type": "str"},
    "gpus_per_node": {"type": "int", "default": 8},
    "warmup": {"type": "int", "default": 1},
    "cluster": {"type": "str", "default": "cluster"},
    "sku": {"type": "str", "default": ""},
    "dest": {"type": "path", "required": True},
    "ledger": {"type": "str"},
    "slurm_conf": {"type": "path"},
    "addresses": {"type": "dict", "default": {}},
    "slurm_names": {"type": "dict", "default": {}},
    "run_id": {"type": "str"},
}


def plan_validate(p, burn_in, slurm_names=None, not_in_slurm=None):
    """Pure: the scales, nodes, Slurm names and eligible spares a run would use (check mode).

    ``burn_in``: ``{node: burn_in gate status}``; ``slurm_names``/``not_in_slurm``: from
    :func:`_evict.resolve_slurm_names`.
    """
    from . import evict as _evict
    scales = _evict.scales_from_targets(p["targets"])
    candidates = [s for s in p["spares"] if s not in (not_in_slurm or {})]
    spares, skipped = _evict.pick_spares(candidates, burn_in, set(p["nodes"]), len(p["nodes"]))
    skipped.update(not_in_slurm or {})
    return {"scales": [s.to_dict() for s in scales], "nodes": p["nodes"], "eligible_spares": spares,
            "skipped_spares": skipped, "max_attempts": p["max_attempts"], "slurm_names": slurm_names or {}}


def run_validate(p, check_mode=False):
    """cluster_validate: the evict-replace-rerun loop, ledger records and the handoff certificate."""
    from . import evict as _evict
    from .._core import gate as _gate
    from .._core.ledger import open_ledger
    from .._host.slurm import Slurm
    ledger = open_ledger(p.get("ledger"))
    gates = ledger.current_gates()
    burn_in = {n: s["burn_in"].status for n, s in gates.items() if "burn_in" in s}
    env = dict(os.environ, SLURM_CONF=p["slurm_conf"]) if p.get("slurm_conf") else None
    slurm = Slurm(env=env)
    names, not_in_slurm = _evict.resolve_slurm_names(p["nodes"], p["spares"], slurm.node_states(),
                                                     addresses=p.get("addresses"), explicit=p.get("slurm_names"))
    if check_mode:
        return {"changed": False, "plan": plan_validate(p, burn_in, names, not_in_slurm)}
    opts = dict(p, out_dir=p["dest"], slurm_names=names,
                spares=[s for s in p["spares"] if s not in not_in_slurm])
    out = _evict.run_cluster_validation(opts, ledger, slurm, p.get("run_id") or _gate.new_run_id("cv"))
    result = out["result"]
    return {"changed": True, "status": result["status"], "reason": result["reason"],
            "final_nodes": result["final_nodes"], "evicted": result["evicted"],
            "replacements": result["replacements"], "outliers": result["outliers"], "actions": result["actions"],
            "certificate": out["certificate"], "paths": {"json": out["paths"][0], "text": out["paths"][1]},
            "gates": out["gates"], "slurm_names": names, "spares_not_in_slurm": not_in_slurm}
