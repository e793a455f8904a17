# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Provisioning stage: apply the firmware plan out-of-band, boot the runtime, verify.

Two controller-side phases per node, each batched over the play's hosts (``_fleet.run_batch``):

* ``out_of_band``: read the inventory, build the plan (``fwplan``), apply every out-of-band
  firmware step in manifest order (image sha256 checked against the manifest before upload;
  SimpleUpdate with ``TransferProtocol`` when the service lists allowed values (R-9) or a
  multipart push; the task followed to its end, ``Completed`` + ``Critical`` is a failure (R-17);
  a BMC that reboots itself is polled until it answers with the new version (R-18)), the BIOS
  settings (settings object, ``If-Match``, the apply time the service supports, R-1/R-4/R-5/R-20),
  then the one-time boot into the ephemeral runtime (VirtualMedia + ``Once`` override + reset,
  or PXE) when anything needs a reset or in-band work.
* ``verify``: eject the runtime media, record the in-band and tuning results the role collected
  on the node, re-read everything over Redfish and compare every version and BIOS attribute with
  the manifest (a mismatch fails with both strings whatever a tool said), compute the gate.

Each check result is appended to the ledger the moment it is known, so a run killed half-way
leaves what it finished; the rerun re-reads the BMC, skips what is already at the manifest, and
does not re-upload an image the ledger says was staged and is still awaiting its reset.
Secrets (BMC passwords) never reach results, the ledger or warnings (``_core.secrets.scrub``).

This file runs a phase per node and over the batch; the steps live beside it: ``node`` (graph, settings, a
node's run), ``firmware``, ``bios``, ``runtime``, ``verify``.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Mapping, Optional, TypedDict

from .._core.errors import FAULT_BMC, SymphonyError, ValidationError
from .._core.gate import (
    BLOCKED,
    FAIL,
    NOT_RUN,
    PASS,
    CheckResult,
    GateVerdict,
    Outcome,
    compute_gate,
    derive_blocked,
    error_outcome,
    fault_blocked_outcome,
    failed,
    new_run_id,
    not_run,
    passed,
)
from .._core.leases import NodeLeases
from .._core.ledger import default_ledger_path
from .._core.ledger_writer import ThreadLedger
from .._core.secrets import scrub
from .._core.sku import load_skus
from .._fleet.batch import run_batch, worker_lost
from .._fleet.bmcmap import load_bmc_map, map_secrets
from .._fleet.client import bmc_client, close_quietly
from .._fleet.endpoint import resolve_endpoint
from .._fleet.nodes import twin_nodes_from_params
from .._fleet.settings import fleet_settings_kwargs, require_credentials
from .._host.launchers import launcher_from_params
from .._redfish.errors import fault_of
from .._redfish.read_base import gaps_fault
from .._redfish.reader import read_inventory
from .._redfish.registries import MessageRegistries
from .bios import apply_bios
from .firmware import apply_oob_firmware
from .._core.fwplan import Step, build_plan, diff_of, format_plan
from .node import READ_SECTIONS, STAGE, NodeRun, ProvisionSettings, check_graph
from .os_install import install_os, verify_os_boot
from .proof import prove_boot
from .runtime import eject_runtime, runtime_boot
from .verify import fresh_diff, inband_outcome, verify


def process_node(host: str, item: dict[str, Any], settings: ProvisionSettings, run_id: str, ledger: Any,
                 registries: Any, phase: str, check_mode: bool,
                 client_factory: Optional[Callable[..., Any]] = None) -> dict[str, Any]:
    """Run ``phase`` (``plan``, ``out_of_band``, ``verify``) for one node; returns its result dict.

    Never raises for the node's own problems: they end in its check results.
    """
    node, manifest = item["node"], item["manifest"]
    graph = check_graph(manifest, settings.optional, prove_runtime=settings.runtime_probe == "proof",
                        install_os=settings.os_install)
    client = bmc_client(item["endpoint"]["url"], item["entry"], settings, client_factory, registries=registries)
    nd = NodeRun(host, node, manifest, client, settings, None if check_mode else ledger, run_id, graph)
    out = {"endpoint": item["endpoint"], "writes": 0}
    try:
        def read():
            client.open()
            nd.inv = read_inventory(client, sections=READ_SECTIONS)
            gaps = [g for g in nd.inv.incomplete if g.get("part") in ("firmware", "bios")]
            if gaps:
                text = "could not read %s at %s: %s" % (gaps[0]["part"], gaps[0]["uri"], gaps[0]["reason"])
                fault = gaps_fault(gaps)
                if fault:  # the BMC stopped answering mid-read (it rebooted): not the node's fault
                    return fault_blocked_outcome(fault, text)
                return failed(text, "rerun once the BMC answers; reset the BMC if its inventory stays incomplete")
            nd.plan = build_plan(nd.inv, manifest, settings.allow_downgrade)
            return passed(observed={"firmware_members": len(nd.inv.firmware)},
                          reason="%d FirmwareInventory members, %d BIOS attributes read"
                          % (len(nd.inv.firmware), len(nd.inv.bios.get("attributes") or {})))

        if phase in ("plan", "out_of_band") or check_mode:
            res = nd.run("inventory_read", read)
            if nd.plan is not None:
                out.update(plan=nd.plan.to_dict(), diff=diff_of(nd.plan), lines=format_plan(host, nd.plan),
                           inband=[_inband_item(s) for s in nd.plan.inband_work])
            if phase == "plan" or check_mode:
                out["results"] = [r.to_dict() for r in nd.results]
                out["status"] = res.status
                return out
            for step in [s for s in nd.plan.steps if s.phase == "out_of_band" and s.check.startswith("firmware:")] \
                    if nd.plan else []:
                nd.run(step.check, lambda s=step: apply_oob_firmware(nd, s))
            nd.run("bios_settings", lambda: apply_bios(nd, nd.plan.step("bios_settings")))
            boot = nd.run("runtime_boot", lambda: runtime_boot(nd))
            nd.run("runtime_proof", lambda: prove_boot(nd, boot))
            if out.get("diff") and any(out["diff"]["before"].values()):
                out["diff"] = fresh_diff(nd, out["diff"])
            for name in graph.order():
                if name not in nd.statuses and name not in ("tunings", "verify", "os_install", "os_boot") and not \
                        any(c.get("phase") == "in_band" and "firmware:%s" % c["id"] == name
                            for c in manifest.get("firmware", [])):
                    nd.run(name, lambda: not_run("not reached"))
        else:
            earlier = {r.check: r for r in (ledger.history(host, STAGE) if ledger else []) if r.run_id == run_id}
            nd.statuses = {k: r.status for k, r in earlier.items()}
            nd.results = list(earlier.values())
            client.open()
            nd.inv = read_inventory(client, sections=READ_SECTIONS)
            nd.plan = build_plan(nd.inv, manifest, settings.allow_downgrade)
            ejected = eject_runtime(nd)
            given = item.get("inband_results") or {}
            for step in [s for s in nd.plan.steps if s.phase == "in_band"]:
                nd.run(step.check, lambda s=step: inband_outcome(s, given.get(s.check)))
            tun = item.get("tunings_result")
            if "tunings" in graph.specs:
                nd.run("tunings", lambda: Outcome(tun.get("status", NOT_RUN), tun.get("reason") or "", None,
                                                  tun.get("observed"), tun.get("remediation") or "",
                                                  tun.get("evidence") or {}) if tun else
                       not_run("the in-band phase did not apply the tunings on this node"))
            nd.run("verify", lambda: verify(nd))
            if "os_install" in graph.specs:
                launcher = settings.launcher
                nd.run("os_install", lambda: install_os(nd, launcher) if nd.manifest.get("os") else
                       failed("os_install is on but the SKU pins no os image", "add os: to the SKU (images/os)"))
                nd.run("os_boot", lambda: verify_os_boot(nd, launcher, (settings.console_logs or {}).get(host)))
            if ejected:
                out["ejected"] = ejected
    except SymphonyError as exc:
        out["error"] = str(exc)
        if phase == "verify":
            name = "verify"
        else:
            name = "inventory_read" if "inventory_read" not in nd.statuses else \
                next((n for n in graph.order() if n not in nd.statuses), None)
        if name:
            nd.record(name, error_outcome(exc) if fault_of(exc) != FAULT_BMC else
                      Outcome(FAIL, str(exc), remediation="check the BMC answers and rerun"), time.time())
    finally:
        close_quietly(client)
        out["warnings"] = list(getattr(client, "warnings", []) or [])
        out["requests"] = getattr(client, "requests", 0)
    out["writes"] = nd.writes
    out["results"] = [r.to_dict() for r in nd.results]
    if phase == "verify" or (phase == "out_of_band" and any(r.status != PASS and r.check in (
            "inventory_read",) for r in nd.results)):
        by_check = {r.check: r for r in nd.results}
        for name in graph.order():
            if name not in by_check:
                by_check[name] = CheckResult(host, STAGE, name, NOT_RUN, "not reached in this run", run_id=run_id)
        results = derive_blocked(graph, list(by_check.values()))
        verdict = compute_gate(graph, results, ledger.waivers(host, STAGE) if ledger else ())
        verdict.reason = scrub(verdict.reason, [settings.password])
        # one gate row per node per run: the verify phase of this run_id records it (an out_of_band phase that
        # could not read the BMC returns its verdict, and verify, which always follows in the role, records it)
        if ledger is not None and not check_mode and phase == "verify":
            ledger.record_gate(verdict, run_id)
        out["gate"] = verdict.to_dict()
    return out


def _inband_item(step: Step) -> dict[str, Any]:
    return {"check": step.check, "component": step.component, "kind": step.kind, "method": step.method,
            "target": step.target, "accepted": step.accepted, "image": step.image, "activation": step.activation,
            "observed": step.observed}


class PhaseResult(TypedDict):
    """What :func:`run_stage` returns (the ``firmware_plan``/``firmware_reconcile`` RETURN before ``failed_hosts``).

    ``hosts``: ``{host: {"endpoint", "writes", "requests", "checks": [{"check", "status", "reason"}], and as the
    phase gives them "plan", "diff", "lines", "inband", "gate", "ejected", "error"}}``; ``plan_lines``: the plan
    in words; ``diff``: ``{"before": {host: ...}, "after": {host: ...}}``; ``summary``: ``{gate status: count}``;
    ``writes``: requests that changed a BMC; ``wall_s``: seconds.
    """

    run_id: str
    phase: str
    hosts: dict[str, dict[str, Any]]
    plan_lines: list[str]
    diff: dict[str, dict[str, Any]]
    summary: dict[str, int]
    warnings: list[str]
    changed: bool
    writes: int
    wall_s: float


def run_stage(nodes: dict[str, dict[str, Any]], manifests: Mapping[str, dict[str, Any]], settings: ProvisionSettings,
              phase: str, run_id: Optional[str] = None, check_mode: bool = False,
              inband_results: Optional[Mapping[str, Any]] = None, tunings_results: Optional[Mapping[str, Any]] = None,
              client_factory: Optional[Callable[..., Any]] = None, ledger: Any = None) -> PhaseResult:
    """Run one phase for many nodes with the bounded worker pool; returns the module's result (:class:`PhaseResult`).

    ``nodes``: ``{host: twin node}``; ``manifests``: ``{sku: manifest}``; ``phase``: ``plan``,
    ``out_of_band`` or ``verify``; ``inband_results``: ``{host: {check: result dict}}`` from the
    in-band module; ``tunings_results``: ``{host: result dict}``.  Raises :class:`SymphonyError`
    for problems of the whole run (bad map, unknown SKU, ledger).
    """
    if phase not in ("plan", "out_of_band", "verify"):
        raise ValidationError("phase must be plan, out_of_band or verify, not %r" % phase, where="phase")
    started = time.monotonic()
    run_id = run_id or new_run_id("prov")
    for host, node in nodes.items():
        if node.get("sku") not in manifests:
            raise ValidationError("SKU %r of %s has no manifest (known: %s)"
                                  % (node.get("sku"), host, ", ".join(sorted(manifests))), where=host)
    bmc_map = load_bmc_map(settings.bmc_map) if settings.bmc_map else None
    registries = MessageRegistries(directory=settings.registry_dir)
    own = None
    if ledger is None and settings.ledger and not check_mode:
        ledger = own = ThreadLedger(settings.ledger)
        ledger.history("-", STAGE)  # fail early (bad path, newer schema) for the whole run
    secrets = map_secrets(settings.password, bmc_map)
    items = []
    for host, node in nodes.items():
        endpoint, entry = resolve_endpoint(node["hostname"], bmc_map, address=node["bmc_address"])
        items.append((host, {"node": node, "manifest": manifests[node["sku"]], "endpoint": endpoint, "entry": entry,
                             "inband_results": (inband_results or {}).get(host) or {},
                             "tunings_result": (tunings_results or {}).get(host)}))
    try:
        outcomes = run_batch(items, lambda h, it: process_node(h, it, settings, run_id, ledger, registries, phase,
                                                               check_mode, client_factory),
                             workers=settings.workers, per_key=settings.per_bmc,
                             key=lambda it: it["endpoint"]["url"],
                             # a run owns its nodes: leased before a BMC is touched (the same run_id in every phase)
                             leases=NodeLeases(settings.ledger, run_id, STAGE, wait_s=settings.lease_wait_s) if own is not None else None,
                             # the read-only plan (firmware_plan) spreads over processes; the phases that write
                             # to BMCs and the ledger wait on BMC tasks, not on the CPU, and stay in this process
                             processes=settings.processes if phase == "plan" or check_mode else 1)
    finally:
        if own is not None:
            own.close()
    hosts: dict[str, dict[str, Any]] = {}
    warnings: list[str] = []
    lines: list[str] = []
    summary: dict[str, int] = {}
    diff: dict[str, dict[str, Any]] = {"before": {}, "after": {}}
    for host, _item in items:
        o = outcomes[host]
        entry = o.value if o.ok else {"error": o.error.get("msg"), "results": [], "writes": 0}
        if worker_lost(o):
            # its worker process died: nothing is known of the node, so it is blocked with the reason
            entry["status"] = BLOCKED
            entry["gate"] = GateVerdict(host, STAGE, BLOCKED, o.error["msg"]).to_dict()
        entry = scrub(entry, secrets)
        warnings.extend("%s: %s" % (host, w) for w in entry.pop("warnings", []))
        lines.extend(entry.get("lines", []))
        if entry.get("diff"):
            diff["before"][host] = entry["diff"]["before"]
            diff["after"][host] = entry["diff"]["after"]
        entry["checks"] = [{"check": r["check"], "status": r["status"], "reason": r["reason"]}
                           for r in entry.pop("results", [])]
        gate = entry.get("gate")
        if gate:
            summary[gate["status"]] = summary.get(gate["status"], 0) + 1
        hosts[host] = entry
    return {"run_id": run_id, "phase": phase, "hosts": hosts, "plan_lines": lines, "diff": diff,
            "summary": summary, "warnings": sorted(set(warnings)),
            "changed": any(h.get("writes") for h in hosts.values()),
            "writes": sum(h.get("writes", 0) for h in hosts.values()),
            "wall_s": round(time.monotonic() - started, 3)}


def settings_from_params(params: Mapping[str, Any], check_mode: bool = False) -> ProvisionSettings:
    """A :class:`ProvisionSettings` from module params."""
    return ProvisionSettings(
        **fleet_settings_kwargs(params),
        ledger=None if check_mode else (params.get("ledger") or default_ledger_path()),
        image_dir=params.get("image_dir"),
        image_base_url=params.get("image_base_url"), allow_downgrade=bool(params.get("allow_downgrade")),
        task_timeout_s=params.get("task_timeout_s") or 1800.0,
        runtime_timeout_s=params.get("runtime_timeout_s"), runtime_image_url=params.get("runtime_image_url"),
        runtime_config_url=params.get("runtime_config_url"),
        runtime_probe=params.get("runtime_probe") or "ssh", runtime_boot=params.get("runtime_boot") or "auto",
        poll_s=params.get("poll_s") or 5.0,
        launcher=launcher_from_params(params) if params.get("runtime_probe") == "proof" or params.get("os_install")
        else None,
        console_logs=params.get("console_logs"), os_install=bool(params.get("os_install")),
        os_image_url=params.get("os_image_url"), os_install_timeout_s=params.get("os_install_timeout_s") or 1800.0)


def module_run(params: Mapping[str, Any], phase: str, check_mode: bool = False) -> dict[str, Any]:
    """Entry point of the ``firmware_plan`` / ``firmware_reconcile`` modules: params -> result dict."""
    manifests = load_skus(params["sku_dir"])
    nodes = twin_nodes_from_params(params, manifests)
    settings = settings_from_params(params, check_mode or phase == "plan")
    require_credentials(settings, "firmware_reconcile")
    out: dict[str, Any] = dict(run_stage(nodes, manifests, settings, phase, run_id=params.get("run_id"),
                                         check_mode=check_mode or phase == "plan",
                                         inband_results=params.get("inband_results"),
                                         tunings_results=params.get("tunings_results")))
    if phase != "plan" and not params.get("return_plan"):
        for entry in out["hosts"].values():
            plan = entry.pop("plan", None)
            if plan:
                entry["plan_summary"] = plan["summary"]
    if phase == "plan" or check_mode:
        out["changed"] = any(((h.get("plan") or {}).get("summary") or h.get("plan_summary") or {}).get("update") or
                             ((h.get("plan") or {}).get("summary") or h.get("plan_summary") or {}).get("bios_changes")
                             for h in out["hosts"].values())
    out["failed_hosts"] = sorted(h for h, e in out["hosts"].items()
                                 if (e.get("gate") or {}).get("status", PASS) != PASS or e.get("error"))
    return out
