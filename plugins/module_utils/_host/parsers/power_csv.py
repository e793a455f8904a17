# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""``nvidia-smi --query-gpu=... --format=csv`` sampling output (parsing case P-C11).

Header ``index, power.draw [W], timestamp``; values carry units (``16.48 W``) unless
``nounits`` was asked; ``[N/A]`` where unsupported.  Aggregated per GPU index.
"""

from __future__ import annotations

import re
from typing import Any

from . import number, parse_error, require_text

TOOL = "nvidia-smi --query-gpu"
_UNIT = re.compile(r"^(.*?)\s*\[(.*)\]\s*$")
TEXT_FIELDS = ("timestamp", "name", "uuid", "pci.bus_id", "serial", "driver_version", "pstate", "persistence_mode")


def _column(name: str) -> tuple[str, str | None]:
    match = _UNIT.match(name.strip())
    if match:
        return match.group(1).strip(), match.group(2).strip()
    return name.strip(), None


def parse_query_csv(text: str, header: list[str] | None = None) -> dict[str, Any]:
    """Parse query CSV; ``header`` gives the field names when ``noheader`` was used.

    Returns ``{columns: [{name, unit}], rows: [{field: float|str|None}], per_gpu: {index:
    {field: {count, min, max, mean}}}}`` (numeric fields only in ``per_gpu``; units as in the header,
    e.g. W for ``power.draw``).  Raises :class:`ParseError` when the header is missing or has no
    ``index`` column, or a row has the wrong number of fields.
    """
    require_text(TOOL, text)
    lines = [ln for ln in text.splitlines() if ln.strip()]
    if header is None:
        header_line, lines = lines[0], lines[1:]
        names = header_line.split(",")
    else:
        names = list(header)
    columns: list[dict[str, Any]] = [dict(zip(("name", "unit"), _column(n))) for n in names]
    fields = [str(c["name"]) for c in columns]
    if "index" not in fields:
        raise parse_error(TOOL, "header has no 'index' column: %s" % ", ".join(fields))
    rows = []
    for lineno, line in enumerate(lines, 2 if header is None else 1):
        values = [v.strip() for v in line.split(",")]
        if len(values) != len(fields):
            raise parse_error(TOOL, "line %d has %d fields, header has %d" % (lineno, len(values), len(fields)))
        row: dict[str, Any] = {}
        for field, value in zip(fields, values):
            if field in TEXT_FIELDS:
                row[field] = value
            elif value.lower().startswith("0x"):  # bitmasks such as clocks_event_reasons.active
                try:
                    row[field] = int(value, 16)
                except ValueError:
                    raise parse_error(TOOL, "line %d: %s %r is not a hex number" % (lineno, field, value))
            else:
                row[field] = number(value)
        if row["index"] is None:
            raise parse_error(TOOL, "line %d: index %r is not a number" % (lineno, values[fields.index("index")]))
        row["index"] = int(row["index"])
        rows.append(row)
    if not rows:
        raise parse_error(TOOL, "no sample rows after the header")
    per_gpu: dict[str, dict[str, Any]] = {}
    for row in rows:
        stats = per_gpu.setdefault(str(row["index"]), {})
        for field, value in row.items():
            if field == "index" or field in TEXT_FIELDS or value is None:
                continue
            entry = stats.setdefault(field, {"count": 0, "min": value, "max": value, "sum": 0.0})
            entry["count"] += 1
            entry["min"] = min(entry["min"], value)
            entry["max"] = max(entry["max"], value)
            entry["sum"] += value
    for stats in per_gpu.values():
        for entry in stats.values():
            entry["mean"] = entry.pop("sum") / entry["count"]
    return {"columns": columns, "rows": rows, "per_gpu": per_gpu}
