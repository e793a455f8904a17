# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``cabling`` gate rows of a batch of nodes, their technician actions and the topology they verified.

Runs on the controller over every node of the play at once: a swapped pair may span two nodes, an NVLink domain
is judged by the other nodes planned in it, and the verified topology (what was found, not planned) feeds Slurm's
``topology.conf`` at handoff (:mod:`.topology`).
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional

from .._core.dispatch import sort_rows
from .._core.errors import ParseError, SymphonyError
from .._core.twin import load_twin
from .._core.gate import FAIL, NOT_RUN, PASS
from .cabling import (
    CHECK,
    NO_PLAN,
    RATE_SPEED,
    actions,
    find_swaps,
    judge_domains,
    judge_ports,
    leaf_rails,
    scan_index,
)


def rated_from_gbps(speed_gbps: Optional[float]) -> Dict[str, Optional[str]]:
    """The rated InfiniBand link of an HCA port from the SKU's ``bom.nics[].speed_gbps`` (4X lanes): 400 ->
    ``{"width": "4X", "speed": "NDR"}``; no rate known -> both None (the plan's own width/speed still apply)."""
    speed = RATE_SPEED.get(int(speed_gbps)) if speed_gbps else None
    return {"width": "4X" if speed else None, "speed": speed}


def _node_result(host: str, ports: List[Dict[str, Any]], domain: Optional[Dict[str, Any]],
                 node_actions: List[Dict[str, Any]], sources: Dict[str, Any]) -> Dict[str, Any]:
    rows = [dict(p, found=list(p["found"]) if p["found"] else None, expected=list(p["expected"])) for p in ports]
    failing = [p["reason"] for p in ports if p["status"] == FAIL]
    unjudged = [p["reason"] for p in ports if p["status"] == NOT_RUN]
    if domain is not None:
        (failing if domain["status"] == FAIL else unjudged if domain["status"] == NOT_RUN else []).append(
            "NVLink domain: %s" % domain["reason"])
    # the technician's actions on this node, one each (a swap across two nodes is one action of both): the
    # dispatch list makes one row per action, so such a swap is one row, not one per node
    evidence: Dict[str, Any] = {"ports": rows, "sources": sources,
                                "actions": [dict(a, hosts=list(a["hosts"]), ports=list(a["ports"])) for a in node_actions]}
    if domain is not None:
        evidence["nvlink_domain"] = {"status": domain["status"], "reason": domain["reason"],
                                     "found": list(domain["key"]) if domain["key"] else None}
    expected = ["%s -> %s port %s" % (p["port"], p["expected"][0], p["expected"][1]) for p in ports]
    observed = ["%s -> %s" % (p["port"], "%s port %s" % p["found"] if p["found"] else "nothing judged")
                for p in ports]
    if failing:
        return {"name": CHECK, "status": FAIL, "reason": "; ".join(failing), "expected": expected,
                "observed": observed, "evidence": evidence,
                "remediation": "; ".join(a["action"] for a in node_actions) or "see the reason"}
    if unjudged:
        return {"name": CHECK, "status": NOT_RUN, "reason": "; ".join(unjudged), "evidence": evidence}
    return {"name": CHECK, "status": PASS, "reason": "%d ports reach their planned switch ports%s" % (
        len(ports), "; %s" % domain["reason"] if domain else ""), "expected": expected, "observed": observed,
        "evidence": evidence}


def cabling_checks(nodes: Mapping[str, Mapping[str, Any]], iblinkinfo: Optional[str] = None,
                   site_fabric: Optional[Mapping[str, Mapping[str, Any]]] = None,
                   rated: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
    """Judge the cabling of a batch of nodes.

    ``nodes``: ``{host: {"twin": twin node record (``fabric`` list, ``nvlink_domain``, ``site``), "required": the
    SKU needs a cabling plan (true), its profile has no fabric (false: the check is recorded but does not gate),
    or None (a planned node's check gates it), "lldp"/"ibstat"/"nvidia_smi_q": command output or None, "recorded": {name: a
    note naming a recorded output used instead of a live reading}}}``.  ``iblinkinfo``: the fabric scan (one for
    the whole fabric), None where there is no InfiniBand.  ``site_fabric``: ``Twin.fabric``.  ``rated``:
    ``{"width", "speed"}`` of links the plan gives no rate.

    Returns ``{"checks": {host: check dict for gate_record (name ``cabling``, ``required``)}, "actions": [one
    technician action per swapped pair or bad port], "swaps": [[port a, port b]], "found": {host: [{port,
    switch, switch_port, width, speed}]}, "domains": {host: [cluster_uuid, clique_id]}}``.  An absent or
    unreadable fabric scan leaves the InfiniBand ports not judged, with that reason.
    """
    site_fabric = site_fabric or {}
    scan_why = "" if iblinkinfo else "no fabric scan (iblinkinfo) was read"
    try:
        scan = scan_index(iblinkinfo)
    except ParseError as exc:  # the Ethernet ports and NVLink domains are still judged
        scan, scan_why = {}, "the fabric scan (iblinkinfo) is unreadable: %s" % exc.message
    plan = {h: {"links": (n.get("twin") or {}).get("fabric") or [],
                "nvlink_domain": (n.get("twin") or {}).get("nvlink_domain")} for h, n in nodes.items()}
    switches: Dict[str, Any] = {}
    for fabric in site_fabric.values():
        switches.update(fabric.get("switches") or {})
    rails = leaf_rails(plan, switches)
    ports: Dict[str, List[Dict[str, Any]]] = {}
    for host, node in nodes.items():
        site = (node.get("twin") or {}).get("site")
        optimised = bool((site_fabric.get(site) or {}).get("rail_optimised"))
        ports[host] = judge_ports(host, plan[host], node, scan, rails, optimised, rated or {}, scan_why)
    every = [p for host_ports in ports.values() for p in host_ports]
    swaps = find_swaps(every)
    todo = actions(every, swaps)
    domains = judge_domains(plan, nodes)
    checks: Dict[str, Dict[str, Any]] = {}
    for host, node in nodes.items():
        flag = _flag(node.get("required"))
        if not plan[host]["links"] and host not in domains:
            required = bool(flag)
            reason = NO_PLAN + ("; the SKU requires one (add the node's cables with the cabling sheet importer)"
                                if required else "")
            checks[host] = {"name": CHECK, "status": NOT_RUN, "reason": reason, "required": required}
            continue
        sources = {"lldp": "live" if node.get("lldp") is not None else None,
                   "ibstat": "live" if node.get("ibstat") is not None else None,
                   "iblinkinfo": "live" if iblinkinfo else None,
                   "nvidia_smi_q": "live" if node.get("nvidia_smi_q") is not None else None}
        sources.update({k: "recorded: %s" % v for k, v in (node.get("recorded") or {}).items()})
        mine = [a for a in todo if host in a["hosts"]]
        # a planned node's cabling gates it.  Where its profile says the fabric is not there (the lab's hosts), the
        # readings that are absent do not gate; a port that was read and found wrong (the lab's own LLDP cables)
        # still does: that is a real miscabling, not a missing fabric
        result = _node_result(host, ports[host], domains.get(host), mine, sources)
        checks[host] = dict(result, required=flag is not False or result["status"] == FAIL)
    found = {host: [{"port": p["port"], "switch": p["found"][0], "switch_port": p["found"][1], "width": p["width"],
                     "speed": p["speed"]} for p in host_ports if p["found"]] for host, host_ports in ports.items()}
    return {"checks": checks, "actions": todo, "swaps": [[_name(a), _name(b)] for a, b in swaps], "found": found,
            "domains": {h: list(d["key"]) for h, d in domains.items() if d["key"]}}


def _flag(value: Any) -> Optional[bool]:
    """``required`` as a role passes it: a bool, None, or the text a template made of one ("False")."""
    if value is None or isinstance(value, bool):
        return value
    return str(value).strip().lower() in ("true", "yes", "1", "on")


def _name(port: Mapping[str, Any]) -> str:
    return "%s %s" % (port["host"], port["port"])


def action_rows(todo: List[Mapping[str, Any]], twins: Mapping[str, Mapping[str, Any]]) -> List[Dict[str, Any]]:
    """The technician's rows for this run's cabling actions (:data:`~.._core.dispatch.DISPATCH_FIELDS`, rack walk
    order): one row per swapped pair (hostname ``"a <-> b"`` when it spans two nodes) or bad port, labelled from
    the first node's twin record."""
    rows = []
    for act in todo:
        twin = twins.get(act["hosts"][0]) or {}
        rows.append({"site": twin.get("site"), "rack": twin.get("rack"), "u": twin.get("u"),
                     "hostname": " <-> ".join(act["hosts"]), "serial": twin.get("serial"), "stage": "burn_in",
                     "check": CHECK, "reason": "%s: %s" % (act["kind"], ", ".join(act["ports"])),
                     "remediation": act["action"]})
    return sort_rows(rows)


def run_cabling(params: Mapping[str, Any]) -> Dict[str, Any]:
    """The ``cabling_check`` module: :func:`cabling_checks` on its params (``nodes``, ``iblinkinfo`` text or
    ``iblinkinfo_file``, ``twin`` for the sites' switches, ``rated_gbps`` or ``rated``), plus ``dispatch``
    (:func:`action_rows`).  Raises :class:`SymphonyError` (TwinError, an unreadable file) naming the file."""
    site_fabric = load_twin(params["twin"]).fabric if params.get("twin") else {}
    scan = params.get("iblinkinfo")
    if params.get("iblinkinfo_file"):
        try:
            with open(params["iblinkinfo_file"], encoding="utf-8") as handle:
                scan = handle.read()
        except OSError as exc:
            raise SymphonyError("cannot read the fabric scan: %s" % exc.strerror, where=params["iblinkinfo_file"])
    rated = dict(rated_from_gbps(params.get("rated_gbps")), **{k: v for k, v in (params.get("rated") or {}).items() if v})
    out = cabling_checks(params["nodes"], scan, site_fabric, rated)
    out["dispatch"] = action_rows(out["actions"], {h: n.get("twin") or {} for h, n in params["nodes"].items()})
    return out
