# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""``lldpcli -f json show neighbors`` (and ``-f json0``): what each local port's LLDP neighbour says it is.

lldpd's JSON changes shape with the data (lldpd ``tests/integration/test_lldpcli.py``, the "json" and "json0"
cases, https://github.com/lldpd/lldpd/blob/master/tests/integration/test_lldpcli.py):

- ``-f json``, one neighbour: ``{"lldp": {"interface": {"eth0": {"via", "rid", "chassis": {"<SysName>":
  {"id": {"type", "value"}, ...}}, "port": {"id": {"type", "value"}, "descr", "ttl"}}}}}``;
- ``-f json``, several: ``"interface"`` is a list of one-key objects ``[{"eth0": {...}}, {"eth1": {...}}]``, and
  the same interface name repeats when one port hears two neighbours;
- some 1.0.x builds put the name inside: ``"interface": [{"name": "lan3", "via": ..., "chassis": ...}]``;
- a chassis without a SysName is ``"chassis": {"id": ...}`` (no name key);
- ``-f json0`` (stable): every value is a list, ``{"lldp": [{"interface": [{"name": "eth0", "chassis": [{"id":
  [{"type", "value"}], "name": [{"value"}]}], "port": [{"id": [...], "descr": [{"value"}]}]}]}]}``;
- no neighbour at all: ``{"lldp": {}}`` / ``{"lldp": [{}]}`` (an empty list, not an error).
"""

from __future__ import annotations

from typing import Any

from . import load_json_document, parse_error

TOOL = "lldpcli show neighbors"
_ENTRY_KEYS = ("chassis", "port", "via", "rid")


def _scalar(value: Any) -> Any:
    """json0 wraps scalars as ``[{"value": x}]``; json gives ``x`` (or a list of them: mgmt-ip)."""
    while isinstance(value, list) and value:
        value = value[0]
    if isinstance(value, dict) and "value" in value and len(value) <= 2:
        return value["value"]
    return value if not isinstance(value, (list, dict)) else None


def _typed_id(block: Any) -> tuple[Any, Any]:
    ident = block.get("id") if isinstance(block, dict) else None
    while isinstance(ident, list) and ident:
        ident = ident[0]
    if isinstance(ident, dict):
        return _scalar(ident.get("value")), ident.get("type")
    return _scalar(ident), None


def _chassis(raw: Any) -> dict[str, Any]:
    while isinstance(raw, list) and raw:
        raw = raw[0]
    if not isinstance(raw, dict):
        return {"name": None, "id": None, "id_type": None}
    if "id" in raw or "name" in raw:  # json0, or a json chassis without a SysName
        ident, kind = _typed_id(raw)
        return {"name": _scalar(raw.get("name")), "id": ident, "id_type": kind}
    name, body = next(iter(raw.items())) if raw else (None, {})
    ident, kind = _typed_id(body)
    return {"name": name, "id": ident, "id_type": kind}


def _entries(interfaces: Any) -> list[tuple[str, dict[str, Any]]]:
    """``[(local interface, neighbour object)]`` from any of the shapes in the module docstring."""
    if isinstance(interfaces, dict):
        interfaces = [interfaces]
    out = []
    for item in interfaces or ():
        if not isinstance(item, dict):
            raise parse_error(TOOL, "an interface entry is %s, not an object" % type(item).__name__)
        if "name" in item and any(k in item for k in _ENTRY_KEYS):
            out.append((str(_scalar(item["name"])), item))
            continue
        for name, body in item.items():
            if isinstance(body, dict):
                out.append((name, body))
            elif isinstance(body, list):  # one name, several neighbours
                out.extend((name, each) for each in body if isinstance(each, dict))
    return out


def parse_lldp_neighbors(text: str) -> list[dict[str, Any]]:
    """Parse ``lldpcli -f json|json0 show neighbors [details]``.

    Returns one dict per neighbour heard, in output order: ``{iface, via, chassis_name, chassis_id,
    chassis_id_type, port_id, port_id_type, port_descr}`` (``port_id_type`` ``ifname`` when the switch sends its
    interface name, ``mac``/``local`` otherwise; absent fields None).  ``[]`` when no port hears a neighbour.
    Raises :class:`ParseError` when the text is not lldpcli JSON (no ``lldp`` object).
    """
    doc, _preamble, _dups = load_json_document(TOOL, text)
    if not isinstance(doc, dict) or "lldp" not in doc:
        raise parse_error(TOOL, "no \"lldp\" object: not lldpcli -f json output")
    top = doc["lldp"]
    blocks = top if isinstance(top, list) else [top]
    out = []
    for block in blocks:
        if not isinstance(block, dict):
            raise parse_error(TOOL, "\"lldp\" holds %s, not an object" % type(block).__name__)
        for iface, body in _entries(block.get("interface")):
            chassis = _chassis(body.get("chassis"))
            port = body.get("port")
            while isinstance(port, list) and port:
                port = port[0]
            port = port if isinstance(port, dict) else {}
            port_id, port_type = _typed_id(port)
            out.append({"iface": iface, "via": _scalar(body.get("via")), "chassis_name": chassis["name"],
                        "chassis_id": chassis["id"], "chassis_id_type": chassis["id_type"], "port_id": port_id,
                        "port_id_type": port_type, "port_descr": _scalar(port.get("descr"))})
    return out
