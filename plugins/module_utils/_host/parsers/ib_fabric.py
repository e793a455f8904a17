# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""InfiniBand fabric scans: ``iblinkinfo`` (default and ``-l``) and ``ibnetdiscover``: who each port reaches, at
what width and speed.

``iblinkinfo`` (infiniband-diags, man page iblinkinfo(8)): a ``CA: <node description>:`` or ``Switch: 0x<guid>
<description>:`` header, then one line per port, ``0x<port guid>  <lid>  <port>[  ] ==( 4X  25.78125 Gbps Active/
LinkUp)==>  <peer lid>  <peer port>[  ] "<peer description>" ( )`` (switch ports have no GUID column); a port
with no link reads ``==(   Down/ Polling)==>   [  ] "" ( )``.  ``-l`` prints the node's GUID and description on
every line, and the peer's GUID before its LID.  The speed column is the per-lane signalling rate: the IBTA
lane rates are SDR 2.5, DDR 5.0, QDR 10.0, FDR10 10.3125, FDR 14.0625, EDR 25.78125, HDR 53.125, NDR 106.25,
XDR 212.5 Gb/s (InfiniBand Architecture Specification Vol. 2, Physical Layer; an NDR 4X port prints
``4X 106.25 Gbps``).

``ibnetdiscover``: ``Switch  36 "S-<guid>"  # "<description>" ...`` / ``Ca  1 "H-<guid>"  # "<description>"``
blocks, one line per connected port: ``[1](<port guid>)  "S-<peer guid>"[33]  # lid 5 lmc 0 "<peer
description>" lid 2 4xQDR`` (width and speed at the end).
"""

from __future__ import annotations

import re
from typing import Any

from . import parse_error, require_text

TOOL = "iblinkinfo"
# IBTA per-lane signalling rate (Gb/s) -> speed name; see the module docstring
LANE_GBPS = {"SDR": 2.5, "DDR": 5.0, "QDR": 10.0, "FDR10": 10.3125, "FDR": 14.0625, "EDR": 25.78125,
             "HDR": 53.125, "NDR": 106.25, "XDR": 212.5}
SPEED_ORDER = ("SDR", "DDR", "QDR", "FDR10", "FDR", "EDR", "HDR", "NDR", "XDR")

_HEADER = re.compile(r"^(CA|Switch):\s+(?:(0x[0-9a-fA-F]+)\s+)?(.*?):\s*$")
_LINK = re.compile(
    r"^\s*(?:(0x[0-9a-fA-F]+)\s+(?:\"([^\"]*)\"\s+)?)?(\d+)\s+(\d+)\[[^\]]*\]\s*"
    r"==\(\s*(?:(\d+X)\s+([0-9.]+)\s*Gbps\s+)?(\w+)\s*/\s*(\w+)\s*\)==>\s*"
    r"(?:(0x[0-9a-fA-F]+)\s+)?(?:(\d+)\s+)?(\d+)?\[[^\]]*\]\s*\"([^\"]*)\"")


def speed_name(lane_gbps: float | None) -> str | None:
    """IBTA speed name of a per-lane rate in Gb/s (``106.25`` -> ``"NDR"``; ``25.78`` -> ``"EDR"``, the -l form
    rounds); None when no rate is within 1 %."""
    if lane_gbps is None:
        return None
    for name, rate in LANE_GBPS.items():
        if abs(lane_gbps - rate) <= rate * 0.01:
            return name
    return None


def switch_name(description: str) -> str:
    """The switch's name in its node description: NVIDIA/Mellanox managed switches say ``MF0;<hostname>:<model>
    /U1`` (``MF0;leaf01:MQM9700/U1`` -> ``leaf01``); any other description is returned stripped."""
    match = re.match(r"^MF0;([^:]+):", description.strip())
    return match.group(1) if match else description.strip()


def parse_iblinkinfo(text: str) -> list[dict[str, Any]]:
    """Parse ``iblinkinfo`` or ``iblinkinfo -l``.

    Returns one dict per port line: ``{node_type ("CA"|"Switch"; None in ``-l`` form), node_desc, node_guid, port_guid, lid, port,
    width ("4X" or None when down), lane_gbps, speed ("NDR"...), state ("Active", "Down"...), phys_state
    ("LinkUp", "Polling"...), peer_guid, peer_lid, peer_port, peer_desc}`` (absent fields None).  Raises
    :class:`ParseError` when no port line is found.
    """
    require_text(TOOL, text)
    out: list[dict[str, Any]] = []
    node_type, node_desc, node_guid = None, None, None
    for line in text.splitlines():
        header = _HEADER.match(line)
        if header:
            node_type, node_guid, node_desc = header.group(1), header.group(2), header.group(3).strip()
            continue
        match = _LINK.match(line)
        if not match:
            continue
        (guid, desc, lid, port, width, lane, state, phys, peer_guid, peer_lid, peer_port, peer_desc) = match.groups()
        lane_gbps = float(lane) if lane else None
        if desc is not None:  # -l: the node's GUID and description on the line itself, its type nowhere
            out.append(_port(None, desc.strip(), guid, None, lid, port, width, lane_gbps, state, phys,
                             peer_guid, peer_lid, peer_port, peer_desc))
            continue
        is_switch = node_type == "Switch"
        out.append(_port(node_type, node_desc, node_guid if is_switch else None, None if is_switch else guid, lid,
                         port, width, lane_gbps, state, phys, peer_guid, peer_lid, peer_port, peer_desc))
    if not out:
        raise parse_error(TOOL, "no port line ('<lid> <port>[ ] ==( ... )==> ...') in output")
    return out


def _port(node_type: str | None, desc: str | None, node_guid: str | None, port_guid: str | None, lid: str,
          port: str, width: str | None, lane_gbps: float | None, state: str, phys: str, peer_guid: str | None,
          peer_lid: str | None, peer_port: str | None, peer_desc: str) -> dict[str, Any]:
    linked = peer_port is not None and peer_port != ""
    return {"node_type": node_type, "node_desc": desc, "node_guid": node_guid, "port_guid": port_guid,
            "lid": int(lid), "port": int(port), "width": width, "lane_gbps": lane_gbps, "speed": speed_name(lane_gbps),
            "state": state, "phys_state": phys, "peer_guid": peer_guid if linked else None,
            "peer_lid": int(peer_lid) if linked and peer_lid else None, "peer_port": int(peer_port) if peer_port else None,
            "peer_desc": peer_desc if linked else None}


_NET_NODE = re.compile(r"^(Switch|Ca)\s+(\d+)\s+\"([SH])-([0-9a-fA-F]+)\"\s*#\s*\"([^\"]*)\"")
_NET_PORT = re.compile(r"^\[(\d+)\](?:\(([0-9a-fA-F]+)\))?\s+\"([SH])-([0-9a-fA-F]+)\"\[(\d+)\](?:\(([0-9a-fA-F]+)\))?"
                       r"\s*(?:#\s*(.*))?$")
_NET_RATE = re.compile(r"\b(\d+)x(SDR|DDR|QDR|FDR10|FDR|EDR|HDR|NDR|XDR)\b")
_NET_DESC = re.compile(r"\"([^\"]*)\"")


def parse_ibnetdiscover(text: str) -> list[dict[str, Any]]:
    """Parse ``ibnetdiscover`` topology output.

    Returns one dict per connected port: ``{node_type ("Switch"|"CA"), node_guid ("0x..."), node_desc, port,
    port_guid, peer_type, peer_guid, peer_port, peer_desc (None where the line does not say), width ("4X"),
    speed ("QDR")}``.  Raises :class:`ParseError` when no ``Switch``/``Ca`` block is found.
    """
    require_text("ibnetdiscover", text)
    out: list[dict[str, Any]] = []
    node: dict[str, Any] | None = None
    for raw in text.splitlines():
        line = raw.strip()
        head = _NET_NODE.match(line)
        if head:
            node = {"node_type": "Switch" if head.group(1) == "Switch" else "CA",
                    "node_guid": "0x" + head.group(4).lower(), "node_desc": head.group(5)}
            continue
        match = _NET_PORT.match(line)
        if not match or node is None:
            continue
        port, own_guid, peer_kind, peer_guid, peer_port, peer_port_guid, comment = match.groups()
        comment = comment or ""
        rate = _NET_RATE.search(comment)
        descs = _NET_DESC.findall(comment)
        out.append(dict(node, port=int(port), port_guid=("0x%016x" % int(own_guid, 16)) if own_guid else None,
                        peer_type="Switch" if peer_kind == "S" else "CA", peer_guid="0x" + peer_guid.lower(),
                        peer_port=int(peer_port), peer_desc=descs[-1] if descs else None,
                        width=("%sX" % rate.group(1)) if rate else None, speed=rate.group(2) if rate else None))
    if node is None:
        raise parse_error("ibnetdiscover", "no 'Switch'/'Ca' block in output")
    return out
