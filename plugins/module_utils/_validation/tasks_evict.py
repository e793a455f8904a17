# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Entry point of ``node_evict``: drain a node in Slurm and promote a spare whose burn_in gate passed.

The plan for check mode comes from the pure :func:`plan_evict`.
"""

from __future__ import annotations

import os
from typing import Any, Dict, List, Optional

from .._core.errors import ValidationError
from .._core.ledger import open_ledger
from .._host.slurm import Slurm, is_drained as _slurm_is_drained
from . import evict as _evict


def plan_evict(node: str, node_state: str, reason: str, spares: List[str], burn_in: Dict[str, str],
               exclude: List[str]) -> Dict[str, Any]:
    """Pure: what node_evict would do.  ``node_state``: Slurm state string of ``node``."""
    chosen, skipped = _evict.pick_spares(spares, burn_in, set(exclude) | {node}, 1)
    return {"drain": not _slurm_is_drained(node_state), "before": node_state, "reason": reason,
            "spare": chosen[0] if chosen else None, "skipped_spares": skipped}


def slurm_name(p: Dict[str, Any]) -> str:
    """The Slurm ``NodeName`` of ``p["node"]``: ``p["slurm_node"]`` when given, else the inventory name."""
    return p.get("slurm_node") or p["node"]


def run_evict(p: Dict[str, Any], check_mode: bool = False, slurm: Optional[Slurm] = None) -> Dict[str, Any]:
    """node_evict: drain (if not drained), ledger events ``drain`` and ``spare_promoted``.

    ``slurm_node``: the node's Slurm ``NodeName`` where it is not its inventory name (the demo's lab hosts are
    ``labN``); Slurm is asked and drained by that name, the ledger keeps the inventory name."""
    env = dict(os.environ, SLURM_CONF=p["slurm_conf"]) if p.get("slurm_conf") else None
    slurm = slurm or Slurm(env=env)
    name = slurm_name(p)
    ledger = open_ledger(p.get("ledger"))
    state = slurm.node_states([name]).get(name)
    if state is None:
        raise ValidationError("Slurm knows no node %s%s" % (name, "" if name == p["node"] else " (%s)" % p["node"]),
                              where=p["node"])
    gates = ledger.current_gates()
    burn_in = {n: s["burn_in"].status for n, s in gates.items() if "burn_in" in s}
    plan = plan_evict(p["node"], state["state"], p["reason"], p["spares"], burn_in, p["exclude"])
    if check_mode:
        return dict(plan, changed=plan["drain"] or plan["spare"] is not None)
    if plan["drain"]:
        slurm.drain(name, p["reason"])
        ledger.record_event(p["node"], "drain", {"reason": p["reason"], "run_id": p.get("run_id"), "slurm_node": name})
    if plan["spare"]:
        ledger.record_event(plan["spare"], "spare_promoted", {"replaces": p["node"], "run_id": p.get("run_id")})
    return dict(plan, changed=plan["drain"] or plan["spare"] is not None)
