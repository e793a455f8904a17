# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""BMC discovery: find a BMC's address from its MAC in DHCP leases (``leases``), reserve the planned one.

Reservations for the planned address are emitted as an ISC ``host`` stanza (dhcpd.conf(5)) and a Kea
``reservations`` entry (Kea ARM, "Host Reservations in DHCPv4"); :func:`tcp_reachable` tells whether a BMC answers.
"""

from __future__ import annotations

import json
import os
import socket
from typing import Any, Iterable, Mapping, Optional

from .._core.errors import ValidationError
from .leases import LeaseIndex, normalise_mac, read_leases

try:
    import netaddr
except ImportError:  # normalise_mac reports it (the module checks with missing_required_lib)
    pass


def isc_host_reservation(hostname: str, mac: str, address: str) -> str:
    """ISC dhcpd ``host`` stanza reserving ``address`` for ``mac`` (str, ends with a newline).

    The stanza name is ``<hostname>-bmc``; raises :class:`ValidationError` on a bad MAC/address.
    """
    mac = normalise_mac(mac, where="%s.bmc_mac" % hostname)
    addr = _reservation_address(address, hostname)
    return ("host %s-bmc {\n  hardware ethernet %s;\n  fixed-address %s;\n}\n"
            % (hostname, mac, addr))


def kea_reservation(hostname: str, mac: str, address: str, subnet_id: Optional[int] = None) -> dict[str, Any]:
    """Kea DHCPv4 host reservation for ``subnet4[].reservations`` (or ``reservation-add``).

    Returns ``{"hw-address", "ip-address", "hostname"[, "subnet-id"]}``.
    """
    mac = normalise_mac(mac, where="%s.bmc_mac" % hostname)
    out = {"hw-address": mac, "ip-address": _reservation_address(address, hostname),
           "hostname": "%s-bmc" % hostname}
    if subnet_id is not None:
        out["subnet-id"] = int(subnet_id)
    return out


def _reservation_address(address: Any, hostname: str) -> str:
    try:
        addr = netaddr.IPAddress(address)
    except (netaddr.AddrFormatError, TypeError, ValueError):
        raise ValidationError("planned BMC address %r is not an address" % (address,), where=hostname)
    if addr.version != 4:
        raise ValidationError("planned BMC address %s is not IPv4" % addr, where=hostname)
    return str(addr)


def render_reservations(reservations: Iterable[Mapping[str, Any]], fmt: str) -> str:
    """Render a list of ``{"hostname", "mac", "address", "subnet_id"}`` as one file's text.

    ``fmt`` ``isc``: concatenated ``host`` stanzas; ``kea``: a JSON document
    ``{"reservations": [...]}`` ready to paste into ``subnet4``.
    """
    if fmt == "isc":
        return "".join(isc_host_reservation(r["hostname"], r["mac"], r["address"]) for r in reservations)
    if fmt == "kea":
        return json.dumps({"reservations": [kea_reservation(r["hostname"], r["mac"], r["address"],
                                                            r.get("subnet_id"))
                                            for r in reservations]}, indent=2, sort_keys=True) + "\n"
    raise ValidationError("unknown reservation format %r (isc or kea)" % (fmt,), where="reservation_format")


def discover_node(node: Mapping[str, Any], index: LeaseIndex) -> dict[str, Any]:
    """Discovery of one twin node against a :class:`LeaseIndex`.

    ``node``: twin node dict (``hostname``, ``bmc_mac``, ``bmc_address``,
    ``bmc_subnet``).  Returns ``{"lease": Lease.to_dict() or None, "note": str,
    "leased_address": str or None, "planned_address": str, "conflict": str or None,
    "reservation": {"isc": str, "kea": dict}}``; ``conflict`` names the MAC that
    holds the planned address when it is not this BMC.
    """
    lease, note = index.find(node["bmc_mac"])
    planned = node["bmc_address"]
    holder = index.holder(planned)
    conflict = None
    if holder is not None and holder.mac and holder.mac != normalise_mac(node["bmc_mac"]):
        conflict = holder.mac
    return {
        "lease": lease.to_dict() if lease else None,
        "note": note,
        "leased_address": lease.address if lease else None,
        "planned_address": planned,
        "conflict": conflict,
        "reservation": {
            "isc": isc_host_reservation(node["hostname"], node["bmc_mac"], planned),
            "kea": kea_reservation(node["hostname"], node["bmc_mac"], planned,
                                   lease.subnet_id if lease else None),
        },
    }


def tcp_reachable(host: Any, port: Any, timeout_s: float = 5.0) -> tuple[bool, str]:
    """Open and close a TCP connection to ``host:port``.

    Returns ``(True, "")`` or ``(False, reason)`` where reason is the socket error
    in words (``"connection refused"``, ``"timed out after 5.0 s"``).
    """
    try:
        with socket.create_connection((host, int(port)), timeout=timeout_s):
            return True, ""
    except socket.timeout:
        return False, "TCP connect to %s:%s timed out after %.1f s" % (host, port, timeout_s)
    except OSError as exc:
        return False, "TCP connect to %s:%s failed: %s" % (host, port, (exc.strerror or str(exc)).lower())


def plan_reservations_file(path: str, content: str) -> tuple[bool, dict[str, str]]:
    """Desired-vs-observed for the reservations file: ``(changed, diff)``.

    Pure apart from reading ``path``; ``diff`` is Ansible's ``{"before", "after",
    "before_header", "after_header"}``.
    """
    try:
        with open(path, "r", encoding="utf-8") as handle:
            before = handle.read()
    except FileNotFoundError:
        before = ""
    except OSError as exc:
        raise ValidationError("cannot read reservations file: %s" % exc.strerror, where=path)
    return before != content, {"before": before, "after": content, "before_header": path, "after_header": path}


def module_bmc_discover(params: Mapping[str, Any], check_mode: bool = False) -> dict[str, Any]:
    """The ``bmc_discover`` module's work: find each node's BMC lease, render reservations, optionally probe.

    ``params``: ``lease_file``, ``lease_format``, ``nodes`` (``hostname``, ``bmc_mac``,
    ``bmc_address``), ``reservation_format``, ``reservations_file``, ``probe``, ``port``,
    ``timeout``.  Returns ``{"changed", "hosts": {host: {...discover_node...,
    "reachable", "reachable_reason"}}, "missing": [hosts without a lease],
    "reservations": text, "diff"}``.
    """
    index = LeaseIndex(read_leases(params["lease_file"], params.get("lease_format") or "isc"))
    hosts, missing, rows = {}, [], []
    for i, node in enumerate(params["nodes"]):
        for key in ("hostname", "bmc_mac", "bmc_address"):
            if not node.get(key):
                raise ValidationError("nodes[%d] has no %s" % (i, key), where="nodes")
        out = discover_node(node, index)
        if out["lease"] is None:
            missing.append(node["hostname"])
        if params.get("probe"):
            target = out["leased_address"] or node["bmc_address"]
            probe = tcp_reachable(target, params.get("port") or 443, params.get("timeout") or 5.0)
            out["reachable"], out["reachable_reason"] = probe
        hosts[node["hostname"]] = out
        rows.append({"hostname": node["hostname"], "mac": node["bmc_mac"], "address": node["bmc_address"],
                     "subnet_id": out["lease"]["subnet_id"] if out["lease"] else None})
    text = render_reservations(rows, params.get("reservation_format") or "isc")
    result = {"changed": False, "hosts": hosts, "missing": missing, "reservations": text}
    path = params.get("reservations_file")
    if path:
        changed, diff = plan_reservations_file(path, text)
        result["changed"], result["diff"] = changed, diff
        if changed and not check_mode:
            try:
                tmp = path + ".tmp"
                with open(tmp, "w", encoding="utf-8") as handle:
                    handle.write(text)
                os.replace(tmp, path)
            except OSError as exc:
                raise ValidationError("cannot write reservations file: %s" % exc.strerror, where=path)
    return result
