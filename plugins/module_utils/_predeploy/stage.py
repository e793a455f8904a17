# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pre-deployment stage: out-of-band audit of one BMC against the twin and the SKU.

The stage is split in two so the judging is pure and testable with real captures:

* :class:`Observation`: what was seen for one node (DHCP lease and reservation,
  TCP reachability, Redfish service root, login, the normalised
  :class:`NodeInventory`), filled by :func:`observe_node` over the network.
* The checks: pure functions ``(AuditContext) -> Outcome`` over that observation,
  the twin node and the SKU manifest, run through :data:`CHECKS` with
  :class:`CheckGraph` so ``blocked`` is derived from declared dependencies.

This file runs the stage over many nodes and writes what it found: ledger rows and the technician's dispatch
list (``_core.dispatch``).  The pieces: ``graph`` (checks, observation, context), ``parts`` and ``checks_*``
(the checks per family), ``judge``, ``observe`` (the network side), ``discovery``/``leases`` (DHCP).
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import Any, Callable, Mapping, NamedTuple, Optional, TypedDict

from .._core.dispatch import dispatch_rows, write_dispatch, write_dispatch_latest
from .._core.errors import ValidationError
from .._core.gate import BLOCKED, PASS, CheckResult, GateVerdict, new_run_id
from .._core.leases import NodeLeases
from .._core.ledger import Ledger
from .._core.ledger_writer import ThreadLedger
from .._core.secrets import may_hold_secret, scrub
from .._core.sku import load_skus
from .._fleet.batch import run_batch, worker_lost
from .._fleet.bmcmap import load_bmc_map, map_secrets
from .._fleet.endpoint import resolve_endpoint
from .._fleet.nodes import twin_nodes_from_params
from .._fleet.settings import BmcFleetSettings, fleet_settings_kwargs, require_credentials
from .._redfish.registries import MessageRegistries
from .checks_health import parse_cutoff
from .discovery import discover_node
from .graph import STAGE, Observation, check_graph
from .judge import judge
from .leases import LeaseIndex, read_leases
from .observe import audit_reader, observe_node

AUDIT_WORKERS = 128


@dataclass
class StageSettings(BmcFleetSettings):
    """How the stage reaches the BMCs (:class:`BmcFleetSettings`, ``workers`` 128) and where it writes.

    ``sel_since``: SEL cutoff (``30d``, ISO time, ``all``); ``lease_file``/``lease_format``: the
    DHCP leases (``isc``, ``kea``, ``dnsmasq``); ``dispatch_dir``: where the dispatch list goes;
    ``profile``: gate profile of the SKU manifests.
    """

    workers: int = AUDIT_WORKERS
    sel_since: str = "30d"
    lease_file: Optional[str] = None
    lease_format: str = "isc"
    dispatch_dir: Optional[str] = None
    profile: str = "production"


class HostAudit(TypedDict, total=False):
    """One node's entry in :class:`StageResult` ``hosts``; ``results`` (full :class:`CheckResult` dicts) only with
    ``return_details``."""

    gate: str
    reason: str
    failing: list
    checks: list
    endpoint: dict
    requests: int
    elapsed_s: float
    results: list


class StageResult(TypedDict):
    """What :func:`run_stage` returns (the ``twin_audit`` module's RETURN before ``changed``/``failed_hosts``).

    ``hosts``: ``{host: HostAudit}``; ``summary``: ``{gate status: count}``; ``dispatch``: ``{"rows": n, "items":
    rows}`` and, when written, the run's ``csv``/``json`` paths and ``latest`` (the ledger's list);
    ``reservations``: ``{host: DHCP reservation}``; ``requests``: Redfish requests in all; ``wall_s``: seconds.
    """

    run_id: str
    hosts: dict[str, HostAudit]
    summary: dict[str, int]
    dispatch: dict[str, Any]
    reservations: dict[str, Any]
    warnings: list[str]
    requests: int
    wall_s: float


class _Figures(NamedTuple):
    """What the batch needs of a node's Observation: its request count and read time (seconds)."""

    requests: int
    elapsed_s: float


def _scrubbed(obs: Observation, warns: list[str], results: list[CheckResult], verdict: GateVerdict,
              secrets: list[Optional[str]]
              ) -> tuple[_Figures, list[str], list[CheckResult], list[dict[str, Any]], GateVerdict]:
    """One node's findings with every secret masked (``_core.secrets.scrub``), in the worker that found them, so
    no password is pickled back from a worker process: ``(figures, warnings, results, results as dicts, verdict)``.

    The Observation itself (the node's whole inventory, ~33 KB pickled) stays in the worker: the batch reads only
    its request count and time (:class:`_Figures`), and pickling it back cost ~1.5 ms of CPU per node (issue 27)."""
    dicts = [r.to_dict() for r in results]
    verdict.reason = scrub(verdict.reason, secrets)
    figures, warns = _Figures(obs.requests, obs.elapsed_s), scrub(list(warns), secrets)
    if not may_hold_secret(dicts, secrets):
        return figures, warns, results, dicts, verdict   # the usual case: nothing to mask, nothing rebuilt
    dicts = [scrub(d, secrets) for d in dicts]
    return figures, warns, [CheckResult.from_dict(d) for d in dicts], dicts, verdict


def _compact(result: CheckResult) -> dict[str, Any]:
    return {"check": result.check, "status": result.status, "reason": result.reason,
            "remediation": result.remediation}


def run_stage(nodes: dict[str, dict[str, Any]], manifests: Mapping[str, dict[str, Any]], settings: StageSettings,
              run_id: Optional[str] = None, client_factory: Optional[Callable[..., Any]] = None,
              reader: Optional[Callable[[Any], Any]] = None, now: Optional[float] = None,
              ledger: Optional[Ledger] = None, return_details: bool = False) -> StageResult:
    """Audit many nodes at once with a bounded worker pool (DESIGN.md "Scale").

    ``nodes``: ``{hostname: twin node dict}``; ``manifests``: ``{sku: manifest}``;
    ``settings``: :class:`StageSettings`; ``ledger``: an open :class:`Ledger`
    (or None to open ``settings.ledger``; no ledger when that is None too).
    Returns a :class:`StageResult`.  Secrets in ``settings`` never appear
    in it, in the ledger or in the dispatch files.
    Raises :class:`SymphonyError` for problems of the whole run (unreadable lease
    file, bad map, unknown SKU, ledger not writable); a node's own problems end in
    its results.
    """
    started = time.monotonic()
    now = time.time() if now is None else now
    run_id = run_id or new_run_id("pre")
    cutoff = parse_cutoff(settings.sel_since, now)
    for host, node in nodes.items():
        if node.get("sku") not in manifests:
            raise ValidationError("SKU %r of %s has no manifest (known: %s)"
                                  % (node.get("sku"), host, ", ".join(sorted(manifests))), where=host)
        per_chassis = manifests[node["sku"]].get("system", {}).get("nodes_per_chassis", 1)
        if per_chassis > 1 and not node.get("bmc_system_id"):
            # one BMC serves several nodes: without its system a node would be judged on all of them
            raise ValidationError("SKU %s has %d nodes per chassis behind one BMC; the twin must name %s's "
                                  "bmc_system_id (its Systems member)" % (node["sku"], per_chassis, host), where=host)
    index = None
    if settings.lease_file:
        index = LeaseIndex(read_leases(settings.lease_file, settings.lease_format), now=now)
    bmc_map = load_bmc_map(settings.bmc_map) if settings.bmc_map else None
    try:
        registries = MessageRegistries(directory=settings.registry_dir)
    except OSError as exc:
        raise ValidationError("cannot load the Redfish message registries: %s" % exc, where="registry_dir")
    secrets = map_secrets(settings.password, bmc_map)
    graphs = {sku: check_graph(m, settings.profile, settings.optional) for sku, m in manifests.items()}

    items: list[tuple[str, dict[str, Any]]] = []
    for host, node in nodes.items():
        discovery = discover_node(node, index) if index is not None else None
        endpoint, map_entry = resolve_endpoint(node["hostname"], bmc_map, (discovery or {}).get("leased_address"),
                                               node["bmc_address"])
        items.append((host, {"node": node, "discovery": discovery, "endpoint": endpoint, "entry": map_entry}))

    # Parallel GETs to one BMC shorten that BMC's read, but cost controller CPU (threads, a TLS handshake per
    # connection): measured at 300 emulated BMCs, 128 workers, 100 ms latency, 18 requests per BMC, the stage
    # took 9.7 s of CPU with one GET at a time per BMC and 14.5 s with four.  So they are used only while the
    # pool has more workers than nodes; a saturated pool reads each BMC one GET at a time.
    node_settings = settings
    if len(items) >= settings.workers and settings.max_concurrency > 1:
        node_settings = dataclasses.replace(settings, max_concurrency=1)

    def work(host, item):
        manifest = manifests[item["node"]["sku"]]
        obs, warns = observe_node(item["node"], item["endpoint"], item["entry"], node_settings, item["discovery"],
                                  settings.lease_file, client_factory, reader or audit_reader(item["node"], manifest),
                                  registries)
        results, verdict = judge(item["node"], manifest, obs, run_id, graphs[item["node"]["sku"]], cutoff, now)
        # a node's findings can hold only the credentials its own client was given: scrubbing each string with
        # every password of the map cost O(nodes) per string, O(nodes^2) per run (issue 27 profile)
        return _scrubbed(obs, warns, results, verdict, [settings.password, (item["entry"] or {}).get("password")])

    # a run owns its nodes: each is leased in the ledger before its BMC is touched (not in check mode: no ledger)
    outcomes = run_batch(items, work, workers=settings.workers, per_key=settings.per_bmc,
                         key=lambda item: item["endpoint"]["url"], processes=settings.processes,
                         leases=NodeLeases(settings.ledger, run_id, STAGE, wait_s=settings.lease_wait_s) if settings.ledger else None)
    all_results: list[CheckResult] = []
    verdicts: dict[str, GateVerdict] = {}
    hosts: dict[str, HostAudit] = {}
    warnings: list[str] = []
    by_host: dict[str, list[dict[str, Any]]] = {}
    total_requests = 0
    for host, item in items:
        out = outcomes[host]
        if not out.ok and out.error.get("error") in ("LeaseError", "InterruptedRunError"):
            # another run holds the node, or this run's playbook died before the node was started: this run
            # neither judges nor records it (the ledger has the interrupted event), and says why
            hosts[host] = {"gate": BLOCKED, "reason": scrub(out.error["msg"], secrets), "failing": [], "checks": [],
                           "endpoint": item["endpoint"], "requests": 0, "elapsed_s": 0.0}
            continue
        if worker_lost(out):
            # nothing is known of the node: blocked with the reason, recorded, never judged on a guess
            verdicts[host] = GateVerdict(host, STAGE, BLOCKED, scrub(out.error["msg"], secrets))
            hosts[host] = {"gate": BLOCKED, "reason": verdicts[host].reason, "failing": [], "checks": [],
                           "endpoint": item["endpoint"], "requests": 0, "elapsed_s": 0.0}
            by_host[host] = []
            continue
        if out.ok:
            figures, warns, results, dicts, verdict = out.value
        else:
            # Only a bug can land here (observe_node handles a node's own failures); judge it anyway so the
            # node ends fail with the reason instead of disappearing.
            obs = Observation(endpoint=item["endpoint"], discovery=item["discovery"], lease_source=settings.lease_file,
                              reachable=(True, ""), errors={"service_root": out.error.get("msg", "error")})
            judged = judge(item["node"], manifests[item["node"]["sku"]], obs, run_id, graphs[item["node"]["sku"]],
                           cutoff, now)
            figures, warns, results, dicts, verdict = _scrubbed(obs, [], judged[0], judged[1], secrets)
        warnings.extend("%s: %s" % (host, w) for w in warns)
        total_requests += figures.requests
        all_results.extend(results)
        by_host[host] = dicts
        verdicts[host] = verdict
        entry: HostAudit = {"gate": verdict.status, "reason": verdict.reason, "failing": verdict.failing,
                            "checks": [_compact(r) for r in results], "endpoint": item["endpoint"],
                            "requests": figures.requests, "elapsed_s": round(figures.elapsed_s, 3)}
        if return_details:
            entry["results"] = dicts
        hosts[host] = entry

    own_ledger = None
    rows = dispatch_rows(nodes, {h: {"gate": verdicts[h].to_dict(), "results": by_host[h]} for h in verdicts}, STAGE)
    dispatch = {"rows": len(rows), "items": rows}
    if ledger is None and settings.ledger:
        ledger = own_ledger = ThreadLedger(settings.ledger)
    try:
        if ledger is not None and verdicts:
            if all_results:
                ledger.record_results(all_results)  # the whole batch's check rows in one transaction
            for host, verdict in verdicts.items():
                ledger.record_gate(verdict, run_id)
        if settings.dispatch_dir:
            # dispatch-<run_id>: this run's nodes; dispatch-latest: the whole fleet, every stage, from the ledger
            # (a --limit run must not drop the others from the technicians' list)
            dispatch.update(write_dispatch(rows, settings.dispatch_dir, run_id, STAGE, latest=ledger is None))
            if ledger is not None:
                dispatch["latest"] = write_dispatch_latest(ledger, settings.dispatch_dir, nodes)
    finally:
        if own_ledger is not None:
            own_ledger.close()
    summary: dict[str, int] = {}
    for verdict in verdicts.values():
        summary[verdict.status] = summary.get(verdict.status, 0) + 1
    reservations = {h: item["discovery"]["reservation"] for h, item in items if item["discovery"]}
    return {"run_id": run_id, "hosts": hosts, "summary": summary, "dispatch": dispatch,
            "reservations": reservations, "warnings": sorted(set(warnings)), "requests": total_requests,
            "wall_s": round(time.monotonic() - started, 3)}


def module_twin_audit(params: Mapping[str, Any], check_mode: bool = False) -> dict[str, Any]:
    """The ``twin_audit`` module's work: params dict in, result dict out (see the module's RETURN).

    Nodes come from ``params["nodes"]`` (twin node dicts, e.g. hostvars ``symphony_twin``) or from
    ``params["twin"]`` filtered by ``params["hosts"]``; manifests from ``params["sku_dir"]``.  In check
    mode everything is observed and judged, nothing is written (ledger, dispatch files).
    Raises :class:`SymphonyError` for problems of the whole run.
    """
    manifests = load_skus(params["sku_dir"])
    nodes = twin_nodes_from_params(params, manifests, required=("sku", "serial", "bmc_mac", "bmc_address"))
    settings = StageSettings(
        **fleet_settings_kwargs(params, workers=AUDIT_WORKERS), sel_since=params.get("sel_since") or "30d",
        lease_file=params.get("lease_file"), lease_format=params.get("lease_format") or "isc",
        ledger=None if check_mode else params.get("ledger"),
        dispatch_dir=None if check_mode else params.get("dispatch_dir"),
        profile=params.get("profile") or "production")
    require_credentials(settings, "twin_audit")
    out: dict[str, Any] = dict(run_stage(nodes, manifests, settings, run_id=params.get("run_id"),
                                         return_details=params.get("return_details", False)))
    out["changed"] = not check_mode
    out["failed_hosts"] = sorted(h for h, e in out["hosts"].items() if e["gate"] != PASS)
    if not params.get("return_dispatch_rows", True):
        out["dispatch"].pop("items", None)
    return out
