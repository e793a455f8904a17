# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Out-of-band drift: firmware and BIOS attributes against the SKU, read over Redfish from the controller.

The comparison is the provisioning plan in check mode (``_core.fwplan.build_plan``, the one pure
desired-vs-observed function); this module only turns its steps into drift rows and sends no write request:

* a firmware member reading a version outside ``accepted`` is ``drift`` (whatever the plan would do about it);
* a member reporting no version, or fewer members than the SKU matches (``missing``), is ``unknown``;
* BIOS attributes that differ are ``drift`` one row each; BIOS attributes that could not be read are ``unknown``.

A BMC that cannot be reached or read completely (an incomplete FirmwareInventory or Bios read) makes the checks
``not_run`` with the reason (``firmware_drift`` and ``bios_drift``), never pass and never a hardware fail.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Dict, List, Mapping, Optional

from .._core.errors import SymphonyError
from .._core.fwplan import MISSING, build_plan
from .._core.gate import BLOCKED, Outcome, mark_unverified, new_run_id, not_run
from .._core.leases import NodeLeases
from .._core.secrets import scrub
from .._core.sku import load_skus
from .._fleet.batch import run_batch, worker_lost
from .._fleet.bmcmap import load_bmc_map, map_secrets
from .._fleet.client import bmc_client, close_quietly
from .._fleet.endpoint import resolve_endpoint
from .._fleet.nodes import twin_nodes_from_params
from .._fleet.settings import BmcFleetSettings, fleet_settings_kwargs, require_credentials
from .._redfish.reader import read_inventory
from .software import DRIFT, OK, UNKNOWN, rows_outcome

SECTIONS = ("systems", "managers", "firmware", "bios")
FIRMWARE_REMEDIATION = ("reflash the component to an accepted version with the provisioning stage "
                        "(firmware_reconcile), or qualify the new version into the SKU's accepted list")


def plan_rows(plan: Any) -> Dict[str, List[Dict[str, Any]]]:
    """``{"firmware": rows, "bios": rows}`` from a :class:`fwplan.Plan` (module docstring)."""
    firmware: List[Dict[str, Any]] = []
    bios: List[Dict[str, Any]] = []
    for step in plan.steps:
        if step.check.startswith("firmware:"):
            accepted = list(step.accepted)
            if step.action == MISSING:
                firmware.append({"component": step.component, "expected": accepted, "found": step.observed,
                                 "status": UNKNOWN, "reason": step.reason})
                continue
            off = {k: v for k, v in step.observed.items() if v is not None and v not in accepted}
            unread = sorted(k for k, v in step.observed.items() if v is None)
            if off:
                status = DRIFT
                reason = "%s runs %s, the SKU accepts %s" % (
                    step.component, ", ".join(sorted({str(v) for v in off.values()})), ", ".join(accepted))
            elif unread:
                status, reason = UNKNOWN, "%s: no version reported by %s" % (step.component, ", ".join(unread))
            else:
                status, reason = OK, step.reason
            firmware.append({"component": step.component, "expected": accepted, "found": step.observed,
                             "status": status, "reason": reason})
        elif step.check == "bios_settings":
            if step.action == MISSING:
                bios.append({"component": "bios", "expected": None, "found": None, "status": UNKNOWN,
                             "reason": step.reason})
                continue
            for name, (have, want) in sorted(step.changes.items()):
                bios.append({"component": "bios:%s" % name, "expected": want, "found": have, "status": DRIFT,
                             "reason": "BIOS %s is %r, the SKU sets %r" % (name, have, want)})
            if not step.changes:
                bios.append({"component": "bios", "expected": "as the SKU", "found": "as the SKU", "status": OK,
                             "reason": step.reason})
    return {"firmware": firmware, "bios": bios}


def judge_node(inventory: Any, manifest: Mapping[str, Any]) -> Dict[str, Outcome]:
    """``{"firmware_drift": Outcome, "bios_drift": Outcome}`` for one node's fresh read."""
    gaps = {part: [g for g in inventory.incomplete if g.get("part") == part] for part in ("firmware", "bios")}
    rows = plan_rows(build_plan(inventory, manifest))
    out = {}
    for check, part in (("firmware_drift", "firmware"), ("bios_drift", "bios")):
        if gaps[part]:
            gap = gaps[part][0]
            outcome = rows_outcome(rows[part], "%s" % part)
            # a drift already seen stands; a clean but incomplete read is not a pass
            out[check] = outcome if outcome.status == "fail" else not_run(
                "could not read %s at %s: %s" % (part, gap.get("uri"), gap.get("reason")))
        else:
            out[check] = rows_outcome(rows[part], part)
            if out[check].status == "fail" and part == "firmware":
                out[check].remediation = FIRMWARE_REMEDIATION
    return out


def _check(name: str, outcome: Outcome) -> Dict[str, Any]:
    return {"name": name, "status": outcome.status, "reason": outcome.reason, "expected": outcome.expected,
            "observed": outcome.observed, "remediation": outcome.remediation, "evidence": outcome.evidence}


def audit_oob(params: Mapping[str, Any], client_factory: Optional[Callable[..., Any]] = None) -> Dict[str, Any]:
    """The ``fleet_audit_bmc`` module's work: ``{"checks": {host: [check dict]}, "summary", "wall_s"}``.

    ``params``: the twin-batch fleet options (``nodes`` or ``twin``, ``sku_dir``, BMC connection, ``bmc_map``,
    ``workers``) and ``ledger``.  Reads only (``SECTIONS``); passwords never appear in the result.  With a ledger,
    each node is leased first (a run owns its nodes): a node another run holds (an audit still running, a
    provisioning run) is ``not_run`` naming the holder, and its BMC is not read.
    """
    started = time.monotonic()
    manifests = load_skus(params["sku_dir"])
    nodes = twin_nodes_from_params(params, manifests)
    settings = BmcFleetSettings(**fleet_settings_kwargs(params))
    require_credentials(settings, "fleet_audit_bmc")
    bmc_map = load_bmc_map(settings.bmc_map) if settings.bmc_map else None
    secrets = map_secrets(settings.password, bmc_map)
    items = []
    for host, node in nodes.items():
        endpoint, entry = resolve_endpoint(node["hostname"], bmc_map, address=node.get("bmc_address"))
        items.append((host, {"url": endpoint["url"] if endpoint else None, "entry": entry,
                             "manifest": manifests[node["sku"]]}))

    def work(host: str, item: Mapping[str, Any]) -> Dict[str, Outcome]:
        if not item["url"]:
            reason = "no BMC address for %s (not in the BMC map, no bmc_address in the twin)" % host
            return {"firmware_drift": not_run(reason), "bios_drift": not_run(reason)}
        client = None
        try:
            client = bmc_client(item["url"], item["entry"], settings, client_factory)
            client.open()
            judged = judge_node(read_inventory(client, sections=SECTIONS), item["manifest"])
            for outcome in judged.values():
                outcome.evidence = mark_unverified(outcome.evidence, getattr(client, "tls_verified", True))
            return judged
        except SymphonyError as exc:
            reason = "BMC %s not read: %s" % (item["url"], exc)
            return {"firmware_drift": not_run(reason), "bios_drift": not_run(reason)}
        finally:
            close_quietly(client)

    leases = NodeLeases(params["ledger"], params.get("run_id") or new_run_id("audit"), "fleet_audit",
                        wait_s=settings.lease_wait_s) \
        if params.get("ledger") else None
    outcomes = run_batch(items, work, workers=settings.workers, per_key=settings.per_bmc,
                         key=lambda it: it["url"] or id(it), leases=leases, processes=settings.processes)
    checks: Dict[str, List[Dict[str, Any]]] = {}
    summary: Dict[str, int] = {}
    for host, item in items:
        o = outcomes[host]
        why = ("another run holds the node: %s" if o.error.get("error") == "LeaseError" else
               "internal error reading the BMC: %s") % o.error.get("msg") if not o.ok else ""
        found = o.value if o.ok else {name: not_run(why) for name in ("firmware_drift", "bios_drift")}
        if worker_lost(o):
            # its worker process died: nothing is known, so blocked with the reason (never a pass, never dropped)
            found = {name: Outcome(BLOCKED, o.error["msg"]) for name in ("firmware_drift", "bios_drift")}
        # what a node's read found can hold only the credentials its own client was given (and a lease holder's
        # or an internal error's words, scrubbed of every password); one node's password per string, not the map's
        mine = [settings.password, (item["entry"] or {}).get("password")] if o.ok else secrets
        checks[host] = scrub([_check(name, outcome) for name, outcome in found.items()], mine)
        for c in checks[host]:
            summary[c["status"]] = summary.get(c["status"], 0) + 1
    return {"changed": False, "checks": checks, "summary": summary, "wall_s": round(time.monotonic() - started, 3)}
