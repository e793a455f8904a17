# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ``cabling`` check: what each node port's neighbour says it is, against the twin's cabling plan.

Per planned port (a twin ``fabric`` entry): Ethernet/RoCE ports are read from ``lldpcli -f json show neighbors``
(the switch's SysName and port id), InfiniBand ports from the node's ``ibstat`` (port GUID, state) and a fabric
scan (``iblinkinfo``: the switch port it reaches, the width and speed it trained at).  A port passes only when it
reaches the planned switch and switch port at its rated width and speed.  Two ports that reach each other's
planned switch ports are one swapped pair, one technician action.  On a rail-optimised site a GPU-local HCA whose
leaf belongs to another rail says so.  NVLink-domain nodes (GB200 NVL72) must report the same ``ClusterUUID`` and
``CliqueId`` (``nvidia-smi -q`` Fabric) as the other nodes the plan puts in their domain.

A port with nothing to judge from (no LLDP frame heard: the switch sends none or the link is down; a port the
fabric scan does not list) is ``not_run`` with that reason, never ``pass``.  A node is ``fail`` when any port or
its domain fails, else ``not_run`` when any port could not be judged, else ``pass``.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any, Dict, List, Mapping, Optional, Tuple

from .._core.errors import ParseError
from .._core.gate import FAIL, NOT_RUN, PASS
from .._core.twin import node_port_name
from .._host.parsers.ib_fabric import SPEED_ORDER, parse_iblinkinfo, switch_name
from .._host.parsers.ibstat import parse_ibstat
from .._host.parsers.lldp import parse_lldp_neighbors
from .._host.parsers.nvlink import parse_fabric

CHECK = "cabling"
NO_PLAN = "no cabling plan in the twin"
# InfiniBand port rate (Gb/s, 4X) -> speed name: NVIDIA ConnectX/Quantum naming, NDR = 400 Gb/s over 4 lanes of
# 100G, HDR 200, EDR 100, FDR 56, QDR 40 (IBTA Vol. 2 lane rates; see _host/parsers/ib_fabric.py).
RATE_SPEED = {800: "XDR", 400: "NDR", 200: "HDR", 100: "EDR", 56: "FDR", 40: "QDR"}
_TRAILING = re.compile(r"(\d+)\D*$")

Port = Dict[str, Any]


def port_key(port: Any) -> Any:
    """A switch port as plan and neighbour can both name it: 17, "17", "swp17", "Ethernet1/17" -> 17; a name with
    no number stays the lower-cased string."""
    if isinstance(port, int):
        return port
    text = str(port).strip()
    match = _TRAILING.search(text)
    return int(match.group(1)) if match else text.lower()


def _where(switch: Any, port: Any) -> str:
    return "%s port %s" % (switch, port)


def _layer(link: Mapping[str, Any]) -> str:
    return link.get("link_layer") or ("ethernet" if link.get("iface") and not link.get("nic") else "infiniband")


def _read(tool: str, text: Optional[str], parser: Any) -> Tuple[Any, str]:
    """``(parsed, "")``, or ``(None, why)`` when the node gave no output or an unreadable one."""
    if text is None:
        return None, "no %s reading from this node" % tool
    try:
        return parser(text), ""
    except ParseError as exc:
        return None, "%s output unreadable: %s" % (tool, exc.message)


def _lldp_index(rows: List[Dict[str, Any]]) -> Dict[str, List[Dict[str, Any]]]:
    index: Dict[str, List[Dict[str, Any]]] = {}
    for row in rows:
        index.setdefault(row["iface"], []).append(row)
    return index


def _ib_index(cas: List[Dict[str, Any]]) -> Dict[Tuple[str, int], Dict[str, Any]]:
    return {(ca["ca"], port["port"]): dict(port, node_guid=ca["node_guid"]) for ca in cas for port in ca["ports"]}


def scan_index(iblinkinfo: Optional[str]) -> Dict[str, Dict[str, Any]]:
    """``iblinkinfo`` CA port lines keyed by port GUID and by ``"<node guid>/<port>"`` (the ``-l`` form);
    ``{}`` without a scan.  Raises :class:`ParseError` on unreadable output."""
    index: Dict[str, Dict[str, Any]] = {}
    for row in parse_iblinkinfo(iblinkinfo) if iblinkinfo else ():
        if row["node_type"] == "Switch":
            continue
        if row["port_guid"]:
            index[row["port_guid"].lower()] = row
        if row["node_guid"]:
            index["%s/%d" % (row["node_guid"].lower(), row["port"])] = row
    return index


def _rated(link: Mapping[str, Any], rated: Mapping[str, Any]) -> Tuple[Optional[str], Optional[str]]:
    return link.get("width") or rated.get("width"), link.get("speed") or rated.get("speed")


def _below(found_width: Optional[str], found_speed: Optional[str], width: Optional[str],
           speed: Optional[str]) -> bool:
    narrow = bool(width and found_width and int(found_width.rstrip("X")) < int(width.rstrip("X")))
    slow = bool(speed and found_speed and SPEED_ORDER.index(found_speed) < SPEED_ORDER.index(speed))
    return narrow or slow


def _ethernet(name: str, link: Mapping[str, Any], lldp: Optional[Dict[str, List[Dict[str, Any]]]],
              lldp_why: str) -> Port:
    iface = link.get("iface")
    if lldp is None:
        return {"status": NOT_RUN, "reason": "%s: %s" % (name, lldp_why)}
    if not iface:
        return {"status": NOT_RUN, "reason": "%s: the plan names no netdev (iface) to read LLDP on" % name}
    heard = lldp.get(iface) or []
    if not heard:
        return {"status": NOT_RUN, "reason": "%s: no LLDP frame heard (the switch sends no LLDP, or the link is down)"
                                             % name}
    if len(heard) > 1:
        names = ", ".join(_where(h["chassis_name"] or h["chassis_id"], h["port_id"]) for h in heard)
        return {"status": FAIL, "reason": "%s hears %d LLDP neighbours (%s): something sits between the port and "
                                          "its leaf" % (name, len(heard), names), "source": "lldp"}
    heard_one = heard[0]
    if not heard_one["chassis_name"]:
        return {"status": NOT_RUN, "reason": "%s: the neighbour sends no system name (chassis id %s)"
                                             % (name, heard_one["chassis_id"])}
    port = heard_one["port_id"]
    if heard_one["port_id_type"] not in ("ifname", "local") and heard_one["port_descr"]:
        port = heard_one["port_descr"]  # lldpd's default port id is the MAC; the description names the port
    return {"status": PASS, "switch": heard_one["chassis_name"], "switch_port": port, "source": "lldp"}


def _infiniband(name: str, link: Mapping[str, Any], ib: Optional[Dict[Tuple[str, int], Dict[str, Any]]],
                ib_why: str, scan: Mapping[str, Dict[str, Any]], scan_why: str, rated: Mapping[str, Any]) -> Port:
    if ib is None:
        return {"status": NOT_RUN, "reason": "%s: %s" % (name, ib_why)}
    local = ib.get((link.get("nic") or "", link.get("hca_port", 1)))
    if local is None:
        return {"status": NOT_RUN, "reason": "%s is not in this node's ibstat (the HCA checks judge a missing HCA)"
                                             % name}
    if local["state"] != "Active" or local["physical_state"] != "LinkUp":
        return {"status": FAIL, "reason": "%s is %s/%s: no link (cable unplugged, bad optic or switch port disabled)"
                                          % (name, local["state"], local["physical_state"]), "source": "ibstat",
                "remediation_kind": "down"}
    guid = (local.get("port_guid") or "").lower()
    row = scan.get(guid) or scan.get("%s/%d" % ((local.get("node_guid") or "").lower(), link.get("hca_port", 1)))
    if row is None:
        return {"status": NOT_RUN, "reason": "%s: %s" % (name, scan_why) if scan_why else
                "%s (port GUID %s) is not in the fabric scan (iblinkinfo)" % (name, guid)}
    out: Port = {"status": PASS, "switch": switch_name(row["peer_desc"] or ""), "switch_port": row["peer_port"],
                 "source": "iblinkinfo", "width": row["width"], "speed": row["speed"]}
    width, speed = _rated(link, rated)
    if _below(row["width"], row["speed"], width, speed):
        reason = "%s trained at %s %s; rated %s %s" % (name, row["width"], row["speed"], width or "", speed or "")
        out.update(status=FAIL, remediation_kind="rate", reason=reason)
    return out


def leaf_rails(plan: Mapping[str, Mapping[str, Any]], switches: Mapping[str, Mapping[str, Any]]) -> Dict[str, int]:
    """Leaf -> rail: the site's declared rail, else the one rail every planned cable on that leaf carries."""
    seen: Dict[str, set] = {}
    for node in plan.values():
        for link in node.get("links") or ():
            seen.setdefault(link["leaf"], set()).add(link["rail"])
    rails = {leaf: next(iter(r)) for leaf, r in seen.items() if len(r) == 1}
    rails.update({name: sw["rail"] for name, sw in switches.items() if sw.get("rail") is not None})
    return rails


def judge_ports(host: str, node: Mapping[str, Any], obs: Mapping[str, Any], scan: Mapping[str, Dict[str, Any]],
                leaf_rails: Mapping[str, int], rail_optimised: bool, rated: Mapping[str, Any],
                scan_why: str = "") -> List[Port]:
    """Judge each planned port of ``host``.

    ``node``: ``{"links": [twin cable dicts]}``; ``obs``: ``{"lldp", "ibstat"}`` texts (None when not read);
    ``scan``: :func:`scan_index`, ``scan_why`` why there is none (InfiniBand ports are then not judged);
    ``rated``: ``{"width", "speed"}`` for links that name none.  Returns one dict per
    link: ``{host, port, status, reason, expected, found, source, rail, width, speed}`` (``found`` a
    ``(switch, port)`` pair or None).
    """
    lldp, lldp_why = _read("lldpcli", obs.get("lldp"), lambda text: _lldp_index(parse_lldp_neighbors(text)))
    ib, ib_why = _read("ibstat", obs.get("ibstat"), lambda text: _ib_index(parse_ibstat(text)))
    out = []
    for index, link in enumerate(node.get("links") or ()):
        name = node_port_name(link) or "fabric[%d]" % index
        seen = (_ethernet(name, link, lldp, lldp_why) if _layer(link) == "ethernet"
                else _infiniband(name, link, ib, ib_why, scan, scan_why, rated))
        port: Port = {"host": host, "port": name, "expected": (link["leaf"], link["port"]), "rail": link["rail"],
                      "found": (seen["switch"], seen["switch_port"]) if "switch" in seen else None,
                      "status": seen["status"], "reason": seen.get("reason", ""), "source": seen.get("source"),
                      "width": seen.get("width"), "speed": seen.get("speed"),
                      "remediation_kind": seen.get("remediation_kind")}
        found = port["found"]
        if found is not None and (found[0] != link["leaf"] or port_key(found[1]) != port_key(link["port"])):
            port["status"], port["remediation_kind"] = FAIL, "move"
            port["reason"] = "%s reaches %s; the plan says %s" % (name, _where(*found), _where(link["leaf"], link["port"]))
            if rail_optimised and link.get("gpu_local", True) and leaf_rails.get(found[0], link["rail"]) != link["rail"]:
                port["reason"] += " (%s is rail %d's leaf; %s is a GPU-local HCA of rail %d)" % (
                    found[0], leaf_rails[found[0]], name, link["rail"])
        elif found is not None and port["status"] == PASS:
            port["reason"] = "%s reaches %s as planned" % (name, _where(*found))
        out.append(port)
    return out


def find_swaps(ports: List[Port]) -> List[Tuple[Port, Port]]:
    """Pairs of misplaced ports that reach each other's planned switch port (one swapped pair each)."""
    planned = {(p["expected"][0], port_key(p["expected"][1])): p for p in ports}
    pairs, used = [], set()
    for a in ports:
        if a["remediation_kind"] != "move" or id(a) in used:
            continue
        b = planned.get((a["found"][0], port_key(a["found"][1])))
        if b is None or b is a or id(b) in used or b["remediation_kind"] != "move":
            continue
        if (b["found"][0], port_key(b["found"][1])) == (a["expected"][0], port_key(a["expected"][1])):
            pairs.append((a, b))
            used.update((id(a), id(b)))
    return pairs


def _owner(p: Port) -> str:
    return "%s %s" % (p["host"], p["port"])


def actions(ports: List[Port], swaps: List[Tuple[Port, Port]]) -> List[Dict[str, Any]]:
    """One technician action per swapped pair and per other failing port: ``{hosts, ports, kind, action}``."""
    out = []
    paired = set()
    for a, b in swaps:
        paired.update((id(a), id(b)))
        ea, eb = _where(*a["expected"]), _where(*b["expected"])
        out.append({"hosts": sorted({a["host"], b["host"]}), "ports": [_owner(a), _owner(b)], "kind": "swap",
                    "action": "swap the cables at %s and %s: %s belongs in %s, %s in %s; rerun the cabling check"
                              % (ea, eb, _owner(a), ea, _owner(b), eb)})
    for p in ports:
        if p["status"] != FAIL or id(p) in paired:
            continue
        if p["remediation_kind"] == "move":
            text = "move the cable of %s from %s to %s" % (_owner(p), _where(*p["found"]), _where(*p["expected"]))
        elif p["remediation_kind"] == "rate":
            text = "reseat or replace the cable/optic of %s (%s): %s" % (_owner(p), _where(*p["expected"]), p["reason"])
        else:
            text = "check the cable and optic of %s at %s: %s" % (_owner(p), _where(*p["expected"]), p["reason"])
        out.append({"hosts": [p["host"]], "ports": [_owner(p)], "kind": p["remediation_kind"] or "check",
                    "action": text + "; rerun the cabling check"})
    return out


def _domain_key(text: Optional[str]) -> Tuple[Optional[Tuple[str, str]], str, str]:
    """``(key, status, reason)`` from ``nvidia-smi -q``: key ``(cluster_uuid, clique_id)`` when every GPU is
    registered and agrees."""
    if text is None:
        return None, NOT_RUN, "no nvidia-smi -q reading from this node"
    try:
        gpus = parse_fabric(text)
    except ParseError as exc:
        return None, NOT_RUN, "nvidia-smi -q unreadable: %s" % exc.message
    for gpu in gpus:
        if gpu["status"] and gpu["status"] != "Success":
            return None, FAIL, "GPU %s fabric state %s, status %s" % (gpu["pci"], gpu["state"], gpu["status"])
        if gpu["state"] != "Completed" or not gpu["cluster_uuid"] or gpu["clique_id"] is None:
            return None, NOT_RUN, "GPU %s has not joined an NVLink domain (fabric state %s)" % (gpu["pci"], gpu["state"])
    keys = {(g["cluster_uuid"], g["clique_id"]) for g in gpus}
    if len(keys) > 1:
        return None, FAIL, "the GPUs of this node sit in %d NVLink domains (%s)" % (
            len(keys), "; ".join("%s clique %s" % k for k in sorted(keys)))
    return keys.pop(), PASS, ""


def judge_domains(plan: Mapping[str, Mapping[str, Any]],
                  observations: Mapping[str, Mapping[str, Any]]) -> Dict[str, Dict[str, Any]]:
    """NVLink domain verdict per planned node: ``{host: {status, reason, key}}``.

    A planned domain is the (ClusterUUID, CliqueId) most of its nodes report; a node reporting another fails, and
    a domain with no majority fails every node in it (which one is misplaced cannot be told).
    """
    keyed: Dict[str, Dict[str, Any]] = {}
    by_domain: Dict[str, List[str]] = {}
    for host, node in plan.items():
        if node.get("nvlink_domain"):
            key, status, reason = _domain_key((observations.get(host) or {}).get("nvidia_smi_q"))
            keyed[host] = {"status": status, "reason": reason, "key": key}
            by_domain.setdefault(node["nvlink_domain"], []).append(host)
    for domain, hosts in by_domain.items():
        votes = Counter(keyed[h]["key"] for h in hosts if keyed[h]["key"] is not None)
        ranked = votes.most_common(2)
        majority = ranked[0][0] if ranked and (len(ranked) == 1 or ranked[0][1] > ranked[1][1]) else None
        members = sorted(h for h in hosts if keyed[h]["key"] == majority)
        for host in hosts:
            mine = keyed[host]
            if mine["key"] is None:
                continue
            if majority is None:
                mine.update(status=FAIL, reason="the nodes the plan puts in NVLink domain %s report %d different "
                                                "domains (%s)" % (domain, len(votes), "; ".join(
                                                    "%s clique %s" % k for k in sorted(votes))))
            elif mine["key"] != majority:
                words = mine["key"] + (domain,) + majority + (", ".join(members),)
                mine.update(status=FAIL, reason="its GPUs are in NVLink domain %s clique %s; the plan says %s (%s "
                                                "clique %s, with %s)" % words)
            else:
                mine["reason"] = "in NVLink domain %s (%s clique %s)" % ((domain,) + majority)
    return keyed
