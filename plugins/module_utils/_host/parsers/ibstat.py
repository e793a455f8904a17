# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""``ibstat`` output: channel adapters (CAs) and their ports."""

from __future__ import annotations

import re
from typing import Any

from . import number, parse_error, require_text

TOOL = "ibstat"
_CA = re.compile(r"^CA '([^']+)'\s*$")
_PORT = re.compile(r"^\s+Port (\d+):\s*$")
_KV = re.compile(r"^\s+([^:]+):\s*(.*)$")
# built once: the parser runs over thousands of HCAs in one cabling check (tests/bench/bench_topology.py)
_PORT_FIELDS = {"State": "state", "Physical state": "physical_state", "Link layer": "link_layer",
                "Base lid": "lid", "Port GUID": "port_guid"}
_CA_FIELDS = {"CA type": "type", "Firmware version": "firmware", "Node GUID": "node_guid"}


def parse_ibstat(text: str) -> list[dict[str, Any]]:
    """Parse ``ibstat``.

    Returns ``[{ca, type, ports_count, firmware, node_guid, ports: [{port, state, physical_state,
    rate_gbps, link_layer, lid, port_guid}]}]``.  Raises :class:`ParseError` when no ``CA '...'``
    block is found.
    """
    require_text(TOOL, text)
    cas: list[dict[str, Any]] = []
    ca: dict[str, Any] | None = None
    port: dict[str, Any] | None = None
    for line in text.splitlines():
        match = _CA.match(line) if line.startswith("CA") else None
        if match:
            ca = {"ca": match.group(1), "type": None, "ports_count": None, "firmware": None, "node_guid": None,
                  "ports": []}
            cas.append(ca)
            port = None
            continue
        if ca is None:
            continue
        match = _PORT.match(line) if "Port " in line else None
        if match:
            port = {"port": int(match.group(1)), "state": None, "physical_state": None, "rate_gbps": None,
                    "link_layer": None, "lid": None, "port_guid": None}
            ca["ports"].append(port)
            continue
        match = _KV.match(line)
        if not match:
            continue
        key, value = match.group(1).strip(), match.group(2).strip()
        if port is not None and line[:len(line) - len(line.lstrip())].replace("    ", "\t").count("\t") >= 2:
            field = _PORT_FIELDS.get(key)
            if field:
                port[field] = value
            elif key == "Rate":
                port["rate_gbps"] = number(value)
        else:
            field = _CA_FIELDS.get(key)
            if field:
                ca[field] = value
            elif key == "Number of ports":
                count = number(value)
                ca["ports_count"] = int(count) if count is not None else None
    if not cas:
        raise parse_error(TOOL, "no \"CA '<name>'\" block in output")
    return cas
