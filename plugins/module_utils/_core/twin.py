# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The digital twin: which servers should exist where.

A twin file (``inventories/<site>/*.twin.yml``) holds sites -> racks (BMC subnet,
location) -> nodes (U position, hostname, SKU, chassis serial, asset tag, BMC MAC,
optional BMC address override, in-band address, the cabling plan: per node port its rail and the leaf switch
port it must reach, the node's NVLink domain) and marks spares; a site may describe its switches (leaf rails,
spine uplinks).  Planned BMC addresses come from the rack subnet and the U position with
netaddr, deterministically: ``subnet.network + bmc_first_host + u``.

Loading is all or nothing: the first inconsistency raises :class:`TwinError`
naming the file, the node and the JSON path.
"""

from __future__ import annotations

import os
import re
from typing import Any, Dict, Iterable, List, Optional, Tuple

from .errors import TwinError
from .schema import (
    load_yaml_file,
    validate_document,
)

try:
    import netaddr
    HAS_NETADDR = True
except ImportError:
    HAS_NETADDR = False

_NAME = {"type": "string", "pattern": "^[A-Za-z0-9][A-Za-z0-9_.-]*$"}
# One cable of the cabling plan: the node port (HCA name and port, netdev, PCI address), its rail, and the switch
# and switch port it must reach.  width/speed: the rate the link must train at (IBTA names: 4X, NDR).
CABLE_PROPERTIES: Dict[str, Any] = {
    "rail": {"type": "integer", "minimum": 0},
    "leaf": _NAME,
    "port": {"type": ["integer", "string"]},
    "nic": {"type": "string", "minLength": 1},
    "hca_port": {"type": "integer", "minimum": 1},
    "iface": {"type": "string", "minLength": 1},
    "pci": {"type": "string", "pattern": "^([0-9a-fA-F]{4,8}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\\.[0-7]$"},
    "link_layer": {"enum": ["infiniband", "ethernet"]},
    "gpu_local": {"type": "boolean"},
    "width": {"enum": ["1X", "2X", "4X", "8X", "12X"]},
    "speed": {"enum": ["SDR", "DDR", "QDR", "FDR10", "FDR", "EDR", "HDR", "NDR", "XDR"]},
}

TWIN_SCHEMA: Dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "symphony.cluster digital twin",
    "type": "object",
    "additionalProperties": False,
    "required": ["twin_version", "sites"],
    "properties": {
        "twin_version": {"const": 1},
        "sku_dir": {"type": "string"},
        "sites": {
            "type": "array", "minItems": 1,
            "items": {
                "type": "object", "additionalProperties": False, "required": ["name", "racks"],
                "properties": {
                    "name": _NAME,
                    "description": {"type": "string"},
                    # the site's switches, where the cabling plan needs more than the node ports name: leaf rails
                    # (rail-optimised fabrics) and leaf -> spine uplinks (Slurm topology/tree)
                    "fabric": {
                        "type": "object", "additionalProperties": False,
                        "properties": {
                            "rail_optimised": {"type": "boolean"},
                            "switches": {
                                "type": "array",
                                "items": {
                                    "type": "object", "additionalProperties": False, "required": ["name", "tier"],
                                    "properties": {"name": _NAME, "tier": {"enum": ["leaf", "spine"]},
                                                   "rail": {"type": "integer", "minimum": 0},
                                                   "uplinks": {"type": "array", "items": _NAME}},
                                },
                            },
                        },
                    },
                    "racks": {
                        "type": "array", "minItems": 1,
                        "items": {
                            "type": "object", "additionalProperties": False,
                            "required": ["name", "bmc_subnet", "nodes"],
                            "properties": {
                                "name": _NAME,
                                "location": {"type": "string"},
                                "bmc_subnet": {"type": "string"},
                                "bmc_first_host": {"type": "integer", "minimum": 0},
                                "nodes": {
                                    "type": "array",
                                    "items": {
                                        "type": "object", "additionalProperties": False,
                                        "required": ["hostname", "u", "sku", "serial", "bmc_mac"],
                                        "properties": {
                                            "hostname": _NAME,
                                            "u": {"type": "integer", "minimum": 1, "maximum": 60},
                                            "sku": {"type": "string"},
                                            "serial": {"type": "string", "minLength": 1},
                                            "asset_tag": {"type": "string"},
                                            "bmc_mac": {"type": "string"},
                                            "bmc_address": {"type": "string"},
                                            # the node's Systems member where one BMC serves several nodes
                                            # (blade chassis); nodes behind one BMC share its u, serial,
                                            # bmc_mac and bmc_address and differ in this
                                            "bmc_system_id": {"type": "string", "minLength": 1},
                                            "inband_address": {"type": "string"},
                                            "spare": {"type": "boolean"},
                                            "fabric": {
                                                "type": "array",
                                                "items": {
                                                    "type": "object", "additionalProperties": False,
                                                    "required": ["rail", "leaf", "port"],
                                                    "properties": CABLE_PROPERTIES,
                                                },
                                            },
                                            # GB200 NVL72 and other NVLink-domain SKUs: the rack-scale NVLink
                                            # domain this node's GPUs must join (its name in the plan)
                                            "nvlink_domain": _NAME,
                                        },
                                    },
                                },
                            },
                        },
                    },
                },
            },
        },
    },
}


class Twin:
    """A validated twin.  ``nodes`` maps hostname to a flat node dict; ``fabric`` maps a site to its switches
    (``{"rail_optimised": bool, "switches": {name: {name, tier, rail, uplinks}}}``)."""

    def __init__(self, path: str, nodes: Dict[str, Dict[str, Any]], sites: Dict[str, Dict[str, Any]],
                 sku_dir: Optional[str]) -> None:
        self.path = path
        self.nodes = nodes
        self.sites = sites
        self.sku_dir = sku_dir
        self.fabric: Dict[str, Dict[str, Any]] = {}

    def spares(self) -> List[str]:
        """Hostnames of the spare pool, in twin order."""
        return [h for h, n in self.nodes.items() if n["spare"]]

    def links(self) -> Dict[str, Dict[str, Any]]:
        """Fabric links keyed ``"<leaf>:<port>"`` -> ``{"node", "rail", "nic"}``."""
        out: Dict[str, Dict[str, Any]] = {}
        for host, node in self.nodes.items():
            for link in node["fabric"]:
                out["%s:%s" % (link["leaf"], link["port"])] = {"node": host, "rail": link["rail"],
                                                               "nic": link.get("nic")}
        return out


_CANONICAL_MAC = re.compile(r"[0-9a-f]{2}(?::[0-9a-f]{2}){5}")


def _mac(value: Any, where: str) -> str:
    if isinstance(value, str) and _CANONICAL_MAC.fullmatch(value):
        return value  # already what netaddr's mac_unix_expanded prints (the common case, 10x faster)
    try:
        return str(netaddr.EUI(value, dialect=netaddr.mac_unix_expanded))
    except (netaddr.AddrFormatError, TypeError, ValueError):
        raise TwinError("malformed MAC address %r" % value, where=where)


def planned_bmc_address(subnet: Any, first_host: int, u: int) -> str:
    """Planned BMC address for U position ``u`` in ``subnet`` (str or IPNetwork), e.g. ``'10.10.1.12'``.

    ``network + first_host + u``; raises :class:`TwinError` when that falls outside
    the subnet's usable hosts.
    """
    net = subnet if isinstance(subnet, netaddr.IPNetwork) else netaddr.IPNetwork(subnet)
    index = first_host + u
    if index <= 0 or index >= net.size - (1 if net.version == 4 and net.prefixlen < 31 else 0):
        raise TwinError("U%d with bmc_first_host %d falls outside %s" % (u, first_host, net), where=subnet)
    return str(net[index])


def validate_twin(data: Dict[str, Any], path: str, known_skus: Optional[Iterable[str]] = None) -> Twin:
    """Validate a parsed twin document and return a :class:`Twin`.

    ``known_skus``: iterable of SKU names, or None to skip the SKU check.
    Raises :class:`TwinError` on: schema errors (with JSON path and hostname), unknown SKU,
    duplicate site/rack name, duplicate hostname/serial/MAC/address, malformed MAC, a BMC subnet
    with host bits set, an address outside its rack's subnet, two nodes in one U, one switch port
    (leaf:port) cabled to two nodes.
    """
    if not HAS_NETADDR:
        raise TwinError("the netaddr Python library is required", where=path)
    validate_document(data, TWIN_SCHEMA, path, TwinError, label_key="hostname")
    skus = set(known_skus) if known_skus is not None else None
    nodes: Dict[str, Dict[str, Any]] = {}
    seen: Dict[str, Dict[str, str]] = {"serial": {}, "bmc_mac": {}, "bmc_address": {}, "inband_address": {}}
    sites: Dict[str, Dict[str, Any]] = {}
    site_fabric: Dict[str, Dict[str, Any]] = {}
    site_paths: Dict[str, str] = {}
    rack_paths: Dict[str, str] = {}
    ports: Dict[str, Tuple[str, str]] = {}
    for si, site in enumerate(data["sites"]):
        if site["name"] in site_paths:
            raise TwinError("site name %r is used twice (also at %s)" % (site["name"], site_paths[site["name"]]),
                            where="%s: $.sites[%d].name" % (path, si))
        site_paths[site["name"]] = "$.sites[%d].name" % si
        sites[site["name"]] = {"racks": []}
        site_fabric[site["name"]] = _site_fabric(site.get("fabric") or {}, "%s: $.sites[%d].fabric" % (path, si))
        for ri, rack in enumerate(site["racks"]):
            rack_path = "$.sites[%d].racks[%d]" % (si, ri)
            # one Ansible group rack_<name> per name, whatever the site: two racks would merge into one
            if rack["name"] in rack_paths:
                raise TwinError("rack name %r is used twice (also at %s; racks are inventory groups rack_<name>, "
                                "so a name must be unique in the twin)" % (rack["name"], rack_paths[rack["name"]]),
                                where="%s: %s.name" % (path, rack_path))
            rack_paths[rack["name"]] = rack_path + ".name"
            try:
                subnet = netaddr.IPNetwork(rack["bmc_subnet"])
            except (netaddr.AddrFormatError, ValueError, TypeError):
                raise TwinError("%s.bmc_subnet: %r is not a network" % (rack_path, rack["bmc_subnet"]), where=path)
            if subnet.ip != subnet.network:
                # 10.10.1.5/24 is a typo for a network or for a host; planning from it would guess which
                raise TwinError("%r has host bits set; the network is %s" % (rack["bmc_subnet"], subnet.cidr),
                                where="%s: %s.bmc_subnet" % (path, rack_path))
            sites[site["name"]]["racks"].append(rack["name"])
            used_u: Dict[int, str] = {}
            for ni, node in enumerate(rack["nodes"]):
                npath = "%s.nodes[%d]" % (rack_path, ni)
                host = node["hostname"]
                where = "%s: %s (%s)" % (path, npath, host)
                if host in nodes:
                    raise TwinError("duplicate hostname %r (also at %s)" % (host, nodes[host]["twin_path"]),
                                    where=where)
                if skus is not None and node["sku"] not in skus:
                    raise TwinError("unknown SKU %r (known: %s)" % (node["sku"], ", ".join(sorted(skus))),
                                    where=where + ".sku")
                mac = _mac(node["bmc_mac"], where + ".bmc_mac")
                if "bmc_address" in node:
                    try:
                        address = netaddr.IPAddress(node["bmc_address"])
                    except (netaddr.AddrFormatError, ValueError):
                        raise TwinError("bmc_address %r is not an address" % node["bmc_address"],
                                        where=where + ".bmc_address")
                    if address not in subnet:
                        raise TwinError("bmc_address %s is outside the rack subnet %s" % (address, subnet),
                                        where=where + ".bmc_address")
                    address, planned = str(address), False
                else:
                    try:
                        address = planned_bmc_address(subnet, rack.get("bmc_first_host", 0), node["u"])
                    except TwinError as exc:
                        raise TwinError(exc.message, where=where + ".u")
                    planned = True
                inband = node.get("inband_address")
                if inband is not None:
                    try:
                        inband = str(netaddr.IPAddress(inband))
                    except (netaddr.AddrFormatError, ValueError):
                        raise TwinError("inband_address %r is not an address" % inband, where=where + ".inband_address")
                me = {"u": node["u"], "serial": node["serial"], "bmc_mac": mac, "bmc_address": address,
                      "bmc_system_id": node.get("bmc_system_id")}
                if node["u"] in used_u and not _same_bmc(me, nodes[used_u[node["u"]]]):
                    raise TwinError("U%d already holds %s%s" % (node["u"], used_u[node["u"]], _sibling_hint(
                        me, nodes[used_u[node["u"]]])), where=where)
                used_u.setdefault(node["u"], host)
                for key, value in (("serial", node["serial"]), ("bmc_mac", mac), ("bmc_address", address),
                                   ("inband_address", inband)):
                    if value is None:
                        continue
                    if value in seen[key] and not (key != "inband_address"
                                                   and _same_bmc(me, nodes[seen[key][value]])):
                        raise TwinError("%s %s is taken twice (also %s)" % (key, value, seen[key][value]),
                                        where=where + "." + key)
                    seen[key][value] = host
                node_ports: Dict[str, int] = {}
                for li, link in enumerate(node.get("fabric", ())):
                    # Twin.links() keys a link by "<leaf>:<port>" (port 7 and "7" alike): one cable per port
                    port = "%s:%s" % (link["leaf"], link["port"])
                    link_path = "%s.fabric[%d]" % (npath, li)
                    if port in ports:
                        raise TwinError("switch port %s is cabled twice (also %s at %s)" % ((port,) + ports[port]),
                                        where="%s.fabric[%d]" % (where, li))
                    ports[port] = (host, link_path)
                    local = node_port_name(link)
                    if local and local in node_ports:
                        raise TwinError("node port %s is cabled twice (also fabric[%d])" % (local, node_ports[local]),
                                        where="%s.fabric[%d]" % (where, li))
                    node_ports[local or link_path] = li
                nodes[host] = {
                    "hostname": host, "site": site["name"], "rack": rack["name"],
                    "rack_location": rack.get("location", ""), "u": node["u"], "sku": node["sku"],
                    "serial": node["serial"], "asset_tag": node.get("asset_tag", ""), "bmc_mac": mac,
                    "bmc_address": address, "bmc_address_planned": planned, "bmc_subnet": str(subnet),
                    "inband_address": inband, "spare": bool(node.get("spare", False)),
                    "fabric": node.get("fabric", []), "twin_path": npath,
                    "nvlink_domain": node.get("nvlink_domain"),
                }
                if node.get("bmc_system_id"):
                    nodes[host]["bmc_system_id"] = node["bmc_system_id"]

    sku_dir = data.get("sku_dir")
    if sku_dir and not os.path.isabs(sku_dir):
        sku_dir = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(path)), sku_dir))
    twin = Twin(path, nodes, sites, sku_dir)
    twin.fabric = site_fabric
    return twin


def node_port_name(link: Dict[str, Any]) -> Optional[str]:
    """How the cabling plan names a node port, as the cabling check reports it: ``"mlx5_3 port 1"`` (HCA and
    port), else the netdev (``"eth2"``) or the PCI address; None when the link names no node port."""
    if link.get("nic"):
        return "%s port %d" % (link["nic"], link.get("hca_port", 1))
    return link.get("iface") or link.get("pci")


def _site_fabric(fabric: Dict[str, Any], where: str) -> Dict[str, Any]:
    """The site's ``fabric`` block checked: unique switch names, uplinks that name one of the site's spines.
    Returns ``{"rail_optimised": bool, "switches": {name: switch dict}}``."""
    switches: Dict[str, Dict[str, Any]] = {}
    for index, switch in enumerate(fabric.get("switches") or ()):
        if switch["name"] in switches:
            raise TwinError("switch %r is listed twice" % switch["name"], where="%s.switches[%d]" % (where, index))
        switches[switch["name"]] = switch
    for index, switch in enumerate(fabric.get("switches") or ()):
        for uplink in switch.get("uplinks") or ():
            if switches.get(uplink, {}).get("tier") != "spine":
                raise TwinError("uplink %r of %s is not a spine switch of this site" % (uplink, switch["name"]),
                                where="%s.switches[%d].uplinks" % (where, index))
    return {"rail_optimised": bool(fabric.get("rail_optimised", False)), "switches": switches}


def _one_chassis(node: Dict[str, Any], other: Dict[str, Any]) -> bool:
    """True when ``node`` and ``other`` have the same U, serial, BMC MAC and address (one blade chassis's BMC)."""
    return all(node[k] == other.get(k) for k in ("u", "serial", "bmc_mac", "bmc_address"))


def _same_bmc(node: Dict[str, Any], other: Dict[str, Any]) -> bool:
    """True when ``node`` and ``other`` are two nodes behind one BMC (a blade chassis): :func:`_one_chassis`, each
    naming its own ``bmc_system_id``."""
    ids = (node.get("bmc_system_id"), other.get("bmc_system_id"))
    return all(ids) and ids[0] != ids[1] and _one_chassis(node, other)


def _sibling_hint(node: Dict[str, Any], other: Dict[str, Any]) -> str:
    """What a U clash between two nodes that share the serial and BMC (blade siblings) lacks: their bmc_system_id."""
    if not _one_chassis(node, other):
        return ""
    mine, theirs = node.get("bmc_system_id"), other.get("bmc_system_id")
    if not mine or not theirs:
        missing = " and ".join(name for name, value in (("this node", mine), (other["hostname"], theirs)) if not value)
        return (" with the same serial and BMC: two nodes behind one BMC each name their own bmc_system_id "
                "(missing on %s)" % missing)
    return " with the same serial, BMC and bmc_system_id %r: each node behind one BMC names its own" % mine


def load_twin(path: Any, known_skus: Optional[Iterable[str]] = None) -> Twin:
    """Read, validate and return the :class:`Twin` in ``path`` (see :func:`validate_twin`).

    ``path`` may also be a twin inventory source (``plugin: symphony.cluster.twin``): its inventory options
    are ignored, and a source that names its twin with ``twin:`` is followed (relative to the source).
    Raises :class:`TwinError` naming the file.
    """
    path = str(path)
    data = load_yaml_file(path, TwinError)
    if "plugin" in data:
        if "sites" not in data and data.get("twin"):
            target = os.path.expanduser(data["twin"])
            if not os.path.isabs(target):
                target = os.path.join(os.path.dirname(os.path.abspath(path)), target)
            return load_twin(target, known_skus)
        data = {k: v for k, v in data.items() if k in TWIN_SCHEMA["properties"]}
    return validate_twin(data, path, known_skus)
