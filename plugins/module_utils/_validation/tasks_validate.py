# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Entry point of ``cluster_validate``: the evict-replace-rerun loop on Slurm, its ledger records and certificate.

The plan for check mode comes from the pure :func:`plan_validate`.
"""

from __future__ import annotations

import os
from typing import Any, Dict, Optional

from .._core import gate as _gate
from .._core.errors import ValidationError
from .._core.ledger import open_ledger
from .._host.slurm import Slurm
from . import cluster_run as _cluster_run
from . import evict as _evict


def plan_validate(p: Dict[str, Any], burn_in: Dict[str, str], slurm_names: Optional[Dict[str, str]] = None,
                  not_in_slurm: Optional[Dict[str, str]] = None) -> Dict[str, Any]:
    """Pure: the scales, nodes, Slurm names and eligible spares a run would use (check mode).

    ``burn_in``: ``{node: burn_in gate status}``; ``slurm_names``/``not_in_slurm``: from
    :func:`_evict.resolve_slurm_names`.
    """
    scales = _evict.scales_from_targets(p["targets"], pool=len(p["nodes"]),
                                        ladder_max_nodes=int(p.get("ladder_max_nodes") or 0))
    candidates = [s for s in p["spares"] if s not in (not_in_slurm or {})]
    spares, skipped = _evict.pick_spares(candidates, burn_in, set(p["nodes"]), len(p["nodes"]))
    skipped.update(not_in_slurm or {})
    return {"scales": [s.to_dict() for s in scales], "nodes": p["nodes"], "eligible_spares": spares,
            "skipped_spares": skipped, "max_attempts": p["max_attempts"], "slurm_names": slurm_names or {}}


def run_validate(p: Dict[str, Any], check_mode: bool = False) -> Dict[str, Any]:
    """cluster_validate: the evict-replace-rerun loop, ledger records and the handoff certificate."""
    ledger = open_ledger(p.get("ledger"))
    gates = ledger.current_gates()
    burn_in = {n: s["burn_in"].status for n, s in gates.items() if "burn_in" in s}
    env = dict(os.environ, SLURM_CONF=p["slurm_conf"]) if p.get("slurm_conf") else None
    slurm = Slurm(env=env)
    blocked: Dict[str, str] = {}
    names, not_in_slurm = _evict.resolve_slurm_names(p["nodes"], p["spares"], slurm.node_states(),
                                                     addresses=p.get("addresses"), explicit=p.get("slurm_names"),
                                                     blocked=blocked)
    runnable = [n for n in p["nodes"] if n not in blocked]
    if check_mode:
        return {"changed": False, "plan": dict(plan_validate(dict(p, nodes=runnable), burn_in, names, not_in_slurm),
                                               blocked=blocked)}
    if not runnable:
        raise ValidationError("no node of the play can run: %s" % "; ".join("%s: %s" % kv for kv in blocked.items()),
                              where="nodes")
    opts = _cluster_run.ValidationOptions(
        nodes=runnable, spares=[s for s in p["spares"] if s not in not_in_slurm], script=p.get("script") or "",
        template=p.get("template") or "", job=p.get("job") or {}, script_dir=p.get("script_dir") or "",
        ladder_max_nodes=int(p.get("ladder_max_nodes") or 0), stragglers=p.get("stragglers") or {},
        blocked=blocked,
        log_dir=p["log_dir"], job_name=p["job_name"], partition=p.get("partition"), timeout_s=p["timeout_s"],
        poll_s=p["poll_s"], log_format=p["log_format"], targets=p["targets"], telemetry_file=p.get("telemetry_file"),
        telemetry_dir=p.get("telemetry_dir"), nccl_not_run=p.get("nccl_not_run") or "",
        optional=list(p.get("optional") or []),
        thermal=p["thermal"], max_operating_temp_c=p.get("max_operating_temp_c"), max_attempts=p["max_attempts"],
        model=p.get("model"), gpu=p.get("gpu"), gpus_per_node=p["gpus_per_node"], warmup=p["warmup"],
        cluster=p["cluster"], sku=p["sku"], out_dir=p["dest"], slurm_names=names)
    out = _cluster_run.run_cluster_validation(opts, ledger, slurm, p.get("run_id") or _gate.new_run_id("cv"))
    result = out["result"]
    return {"changed": True, "status": result["status"], "reason": result["reason"],
            "final_nodes": result["final_nodes"], "evicted": result["evicted"],
            "replacements": result["replacements"], "outliers": result["outliers"], "actions": result["actions"],
            "certificate": out["certificate"], "paths": {"json": out["paths"][0], "text": out["paths"][1]},
            "gates": out["gates"], "slurm_names": names, "spares_not_in_slurm": not_in_slurm, "blocked": blocked}
