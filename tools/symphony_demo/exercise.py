"""The demo's fleet-audit exercise after detection: drain the XID node, promote a spare, re-burn it in, resume it;
and the timings the gate table and summary.json show (from the ledger, ``_fleet_audit.state.report``)."""

from __future__ import annotations

STEPS = ("detect_s", "drain_s", "replace_s", "return_s")


def exercise_timings(ledger, node):
    """``{node, injected_at, detect_s, drain_s, replace_s, return_s, missing, spare}`` for the exercised ``node``:
    the exercise's timings (seconds after the injection; None when a step was not reached) and the spare promoted
    for it after the injection (``spare_promoted`` naming it in ``replaces``)."""
    from ansible_collections.symphony.cluster.plugins.module_utils._fleet_audit.state import report
    timings = report(ledger, node)["exercise"]
    t0 = timings.get("injected_at")
    spare = None
    if t0 is not None:
        spare = next((e["node"] for e in reversed(ledger.events(kind="spare_promoted"))
                      if e["recorded_at"] >= t0 and (e["data"] or {}).get("replaces") == node), None)
    out = {"node": node, "injected_at": t0, "missing": list(timings.get("missing") or []), "spare": spare}
    out.update({step: timings.get(step) for step in STEPS})
    return out


def timing_cells(timings):
    """The table's cells: one per step, ``12.3 s`` or ``—`` (not reached)."""
    return ["—" if timings.get(step) is None else "%.1f s" % timings[step] for step in STEPS]


def return_to_service(console, node, run_playbook, var_files, log):
    """Drain ``node`` (a fleet-audit pass on it alone with fleet_audit_drain: node_evict drains it in Slurm and
    promotes a spare), re-burn it in (burn_in.yml on it alone: the cabling check and the node, GPU and power tiers, no fabric), and return it
    (a pass with fleet_audit_resume: resumed once that re-burn-in passed, the spare back in the pool).  Returns the
    first exit status that is neither 0 nor 2 (2: a gate failed, which the drain pass expects), else 0."""
    import json
    steps = [("fleet_audit.yml", {"fleet_audit_exercise_node": "", "fleet_audit_drain": True}),
             # the cabling check stays: it reads the node's ports in seconds, and without it the gate would read
             # the full run's not_run cabling row as a required check left unjudged (burn_in gate not_run)
             ("burn_in.yml", {"burn_in_hosts": node, "burn_in_tiers": ["node", "gpu", "power"],
                              "burn_in_fabric": False}),
             ("fleet_audit.yml", {"fleet_audit_exercise_node": "", "fleet_audit_resume": True})]
    for playbook, extra in steps:
        console.print("fleet_audit exercise: %s on %s (%s)" % (playbook, node, ", ".join(sorted(extra))))
        rc = run_playbook(console, playbook, var_files, ["--limit", node, "-e", json.dumps(extra)], log, append=True)
        if rc not in (0, 2):
            return rc
    return 0
