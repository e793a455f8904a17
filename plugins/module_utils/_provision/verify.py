# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The provisioning verify phase: a fresh Redfish re-read judged against the manifest, the in-band results the
role collected on the node, and the ``--diff`` of an applied run from a fresh read.
"""

from __future__ import annotations

from typing import Any, Mapping, Optional

from .._core.errors import RedfishError, SymphonyError
from .._core.gate import NOT_RUN, Outcome, failed, fault_blocked_outcome, not_run, passed
from .._redfish.read_base import gaps_fault
from .._redfish.reader import read_inventory
from .bios import wait_job
from .._core.fwplan import SKIP, UPDATE, Step, build_plan, diff_after
from .node import READ_SECTIONS, NodeRun


def verify(nd: NodeRun) -> Outcome:
    """Re-read FirmwareInventory and the BIOS; every version and attribute must be the manifest's.

    The BIOS is read only once the configuration job the ``bios_settings`` PATCH named is Completed (a Dell
    ``Bios`` shows pending values before its job ran)."""
    job = next((r.evidence.get("job") for r in nd.results if r.check == "bios_settings" and r.evidence), None)
    if job:
        try:
            wait_job(nd.client, job, nd.settings.task_timeout_s, nd.settings.poll_s)
        except RedfishError as exc:
            return failed(exc.message, "read the job's messages on the BMC; clear the job queue and rerun",
                          evidence={"job": job})
    inv = read_inventory(nd.client, sections=READ_SECTIONS)
    gaps = [g for g in inv.incomplete if g.get("part") in ("firmware", "bios")]
    if gaps:
        text = "could not re-read %s: %s" % (gaps[0]["part"], gaps[0]["reason"])
        fault = gaps_fault(gaps)
        if fault:  # the BMC stopped answering during the re-read (still rebooting after its update)
            return fault_blocked_outcome(fault, text)
        return failed(text, "rerun the stage once the BMC answers")
    plan = build_plan(inv, nd.manifest)
    wrong = []
    for s in plan.steps:
        if s.check.startswith("firmware:") and s.action != SKIP:
            reads = ", ".join("%s=%s" % kv for kv in sorted(s.observed.items()) if kv[1] not in s.accepted)
            wrong.append("%s: expected %s, BMC reports %s"
                         % (s.component, " or ".join(s.accepted), reads or s.reason))
        if s.check == "bios_settings" and s.changes:
            wrong.extend("BIOS %s: expected %r, BMC reports %r" % (k, v[1], v[0]) for k, v in sorted(s.changes.items()))
    observed = {"firmware": {s.component: sorted({str(v) for v in s.observed.values()})
                             for s in plan.steps if s.check.startswith("firmware:")},
                "bios_checked": len((nd.manifest.get("bios") or {}).get("attributes") or {})}
    if wrong:
        return failed("; ".join(wrong), "rerun the stage; a part that keeps its old version after its update "
                      "needs the vendor's recovery procedure", observed=observed)
    return passed(observed=observed, reason="%d firmware components and %d BIOS attributes as the manifest says"
                  % (len(observed["firmware"]), observed["bios_checked"]))


def inband_outcome(step: Step, given: Optional[Mapping[str, Any]]) -> Outcome:
    """In-band check from the plan (already accepted over Redfish) or the node's result."""
    if step.action == SKIP:
        return passed(observed=step.observed, expected=step.accepted, reason=step.reason + " (read over Redfish)")
    if given:
        return Outcome(given.get("status", NOT_RUN), given.get("reason") or "no reason given",
                       given.get("expected"), given.get("observed"), given.get("remediation") or "",
                       given.get("evidence") or {})
    if step.action == UPDATE:
        return not_run("needs the in-band runtime (%s); the in-band phase did not report for this node" % step.method)
    return failed(step.reason, "check the part and the manifest", observed=step.observed, expected=step.accepted)


def fresh_diff(nd: NodeRun, diff: dict[str, Any]) -> dict[str, Any]:
    """The ``--diff`` of an applied run: before from the plan, after from a fresh read (verify, don't trust)."""
    try:
        inv = read_inventory(nd.client, sections=READ_SECTIONS)
        fresh = build_plan(inv, nd.manifest, nd.settings.allow_downgrade)
    except SymphonyError as exc:
        return {"before": diff["before"], "after": {"not re-read": str(exc)}}
    return diff_after(diff, fresh, inv.bios.get("attributes") or {})
