# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The CSV cabling sheet a data-centre team hands over, read into the twin's cabling plan.

One row per cable, a header row naming the columns (order free, names case-insensitive):

- required: ``hostname``, ``rail``, ``switch``, ``switch_port``, and per row at least one of ``nic`` (HCA name,
  ``mlx5_3``), ``iface`` (netdev, ``eth2``) or ``pci`` (``0000:1a:00.0``);
- optional: ``hca_port`` (default 1), ``link_layer`` (``infiniband``/``ethernet``), ``gpu_local`` (yes/no),
  ``width`` (``4X``), ``speed`` (``NDR``), ``rack`` (checked against the twin), ``nvlink_domain`` (one per node).

Rows are numbered as a spreadsheet shows them (the header is row 1).  Every error raises :class:`TwinError` naming
the sheet, the row and the column.
"""

from __future__ import annotations

import csv
import io
from typing import Any, Dict, List, Mapping, Optional

from .errors import TwinError
from .twin import CABLE_PROPERTIES

try:
    import jsonschema
    HAS_JSONSCHEMA = True
except ImportError:
    HAS_JSONSCHEMA = False

REQUIRED_COLUMNS = ("hostname", "rail", "switch", "switch_port")
OPTIONAL_COLUMNS = ("nic", "hca_port", "iface", "pci", "link_layer", "gpu_local", "width", "speed", "rack",
                    "nvlink_domain")
# sheet column -> twin cable key
_KEYS = {"switch": "leaf", "switch_port": "port", "rail": "rail", "nic": "nic", "hca_port": "hca_port",
         "iface": "iface", "pci": "pci", "link_layer": "link_layer", "gpu_local": "gpu_local", "width": "width",
         "speed": "speed"}
_COLUMN = {key: column for column, key in _KEYS.items()}
_CABLE_SCHEMA = {"type": "object", "properties": CABLE_PROPERTIES, "additionalProperties": False}
_YES, _NO = ("yes", "y", "true", "1"), ("no", "n", "false", "0")


def _cell(row: Mapping[str, Any], column: str) -> str:
    return (row.get(column) or "").strip()


def _typed(column: str, value: str, where: str) -> Any:
    if column in ("rail", "hca_port"):
        try:
            return int(value)
        except ValueError:
            raise TwinError("%r is not a whole number" % value, where=where)
    if column == "switch_port":
        return int(value) if value.isdigit() else value
    if column == "gpu_local":
        if value.lower() not in _YES + _NO:
            raise TwinError("%r is not yes or no" % value, where=where)
        return value.lower() in _YES
    if column in ("width", "speed"):
        return value.upper()
    if column == "link_layer":
        return value.lower()
    return value


def read_cabling_sheet(text: str, source: str = "cabling.csv") -> Dict[str, Dict[str, Any]]:
    """Parse a cabling sheet.

    Returns ``{hostname: {"links": [twin cable dicts], "rack": str or None, "nvlink_domain": str or None,
    "rows": [row numbers]}}`` in sheet order.  Raises :class:`TwinError` (``where`` = ``"<source> row N, column
    C"``) for a missing column, an empty required cell, a value the twin schema refuses, a row naming no node port,
    and a node given two racks or two NVLink domains.
    """
    if not HAS_JSONSCHEMA:
        raise TwinError("the jsonschema Python library is required", where=source)
    reader = csv.DictReader(io.StringIO(text.lstrip("\ufeff")))  # a spreadsheet's CSV export may start with a BOM
    header = [name.strip().lower() for name in reader.fieldnames or []]
    missing = [name for name in REQUIRED_COLUMNS if name not in header]
    if missing:
        raise TwinError("the header has no column %s (columns: %s)" % (", ".join(missing), ", ".join(header)),
                        where="%s row 1" % source)
    reader.fieldnames = header
    validator = jsonschema.Draft202012Validator(_CABLE_SCHEMA)
    plan: Dict[str, Dict[str, Any]] = {}
    for row in reader:
        number = reader.line_num  # the sheet's own line: csv skips blank lines, a count of rows would drift
        if not any(_cell(row, column) for column in header):
            continue  # a row of empty cells between blocks of a sheet
        where = "%s row %d" % (source, number)
        link: Dict[str, Any] = {}
        for column in REQUIRED_COLUMNS + OPTIONAL_COLUMNS:
            value = _cell(row, column)
            if not value:
                if column in REQUIRED_COLUMNS:
                    raise TwinError("the %s cell is empty" % column, where="%s, column %s" % (where, column))
                continue
            if column in _KEYS:
                link[_KEYS[column]] = _typed(column, value, "%s, column %s" % (where, column))
        if not any(key in link for key in ("nic", "iface", "pci")):
            raise TwinError("the row names no node port: fill nic, iface or pci", where=where + ", column nic")
        for error in validator.iter_errors(link):
            key = error.path[0] if error.path else "nic"
            raise TwinError("%r: %s" % (link.get(key), error.message), where="%s, column %s" % (where, _COLUMN[key]))
        host = _cell(row, "hostname")
        node = plan.setdefault(host, {"links": [], "rack": None, "nvlink_domain": None, "rows": []})
        for column in ("rack", "nvlink_domain"):
            value = _cell(row, column)
            if value and node[column] and value != node[column]:
                raise TwinError("%s says %s %r; an earlier row of %s says %r" % (host, column, value, host, node[column]),
                                where="%s, column %s" % (where, column))
            node[column] = node[column] or value or None
        node["links"].append(link)
        node["rows"].append(number)
    return plan


def apply_cabling(doc: Dict[str, Any], plan: Mapping[str, Mapping[str, Any]], source: str = "cabling.csv",
                  site: Optional[str] = None) -> List[str]:
    """Write ``plan`` (:func:`read_cabling_sheet`) into the twin document ``doc`` in place: each node's
    ``fabric`` list is replaced, its ``nvlink_domain`` set.  ``site``: only that site's nodes (a sheet per site).

    Returns the hostnames written.  Raises :class:`TwinError` naming the sheet row when a hostname is not in the
    twin (or not in ``site``) or a row's rack is not the node's rack.  Validate the result with
    :func:`~.twin.validate_twin` (a switch port cabled twice is found there).
    """
    where_is: Dict[str, tuple[str, Dict[str, Any]]] = {}
    for each in doc.get("sites") or ():
        if site is not None and each.get("name") != site:
            continue
        for rack in each.get("racks") or ():
            for node in rack.get("nodes") or ():
                where_is[node.get("hostname")] = (rack.get("name"), node)
    written = []
    for host, entry in plan.items():
        first = "%s row %d" % (source, entry["rows"][0])
        if host not in where_is:
            raise TwinError("hostname %r is not in the twin%s" % (host, " site %s" % site if site else ""),
                            where=first + ", column hostname")
        rack, node = where_is[host]
        if entry.get("rack") and entry["rack"] != rack:
            raise TwinError("%s is in rack %s in the twin, not %s" % (host, rack, entry["rack"]),
                            where=first + ", column rack")
        node["fabric"] = [dict(link) for link in entry["links"]]
        if entry.get("nvlink_domain"):
            node["nvlink_domain"] = entry["nvlink_domain"]
        written.append(host)
    return written
