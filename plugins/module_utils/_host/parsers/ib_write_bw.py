# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""perftest ``ib_write_bw`` text output (per HCA).

The result table is ``#bytes #iterations BW peak[MB/sec] BW average[MB/sec] MsgRate[Mpps]`` (or
``[Gb/sec]`` with ``--report_gbits``).  perftest divides by ``0x100000`` for MB/sec and by
``125000000`` for Gb/sec (``perftest_parameters.c``/``perftest_resources.c`` ``format_factor``), so
1 MB/sec = 2^20 B/s = 0.008388608 Gb/s.  When server and client write to one log (loopback) header
blocks and the table header are duplicated and the last row is repeated after a separator
(../shared/fixtures/tool-outputs/ib_write_bw-loopback-all-sizes-interleaved-superbench.txt); rows are
keyed by size so repeats collapse.
"""

from __future__ import annotations

import re
from typing import Any

from . import parse_error, require_text

TOOL = "ib_write_bw"
MBS_TO_GBITS = 1048576 * 8 / 1e9
_HEADER = re.compile(r"^#bytes\s+#iterations\s+BW peak\[(MB|Gb)/sec\]\s+BW average\[(MB|Gb)/sec\]", re.I)
_ROW = re.compile(r"^(\d+)\s+(\d+)\s+([0-9.]+)\s+([0-9.]+)\s+([0-9.]+)\s*$")
_FIELD = re.compile(r"([A-Za-z][A-Za-z .*_/-]*?)\s*:\s*(\S+)")


def parse_ib_write_bw(text: str) -> dict[str, Any]:
    """Parse ``ib_write_bw`` output.

    Returns ``{"device": str|None, "link_type": str|None, "mtu": str|None, "unit": "MB/sec"|"Gb/sec",
    "rows": [{"bytes": int, "iterations": int, "peak_gbps": Gb/s, "avg_gbps": Gb/s, "msg_rate_mpps": float}],
    "avg_gbps": Gb/s at the largest size, "peak_gbps": Gb/s at the largest size}``.
    Raises :class:`ParseError` when no table header or no data row is found.
    """
    require_text(TOOL, text)
    if text.startswith("# SOURCE:"):
        text = text.split("\n", 1)[1] if "\n" in text else ""
    unit = None
    fields: dict[str, Any] = {}
    rows: dict[int, dict[str, Any]] = {}
    for line in text.splitlines():
        s = line.strip()
        m = _HEADER.match(s)
        if m:
            unit = "Gb/sec" if m.group(2).lower() == "gb" else "MB/sec"
            continue
        if unit is None:
            for key, value in _FIELD.findall(s):
                fields.setdefault(key.strip().lower(), value)
            continue
        m = _ROW.match(s)
        if m:
            factor = 1.0 if unit == "Gb/sec" else MBS_TO_GBITS
            size = int(m.group(1))
            rows[size] = {"bytes": size, "iterations": int(m.group(2)),
                          "peak_gbps": round(float(m.group(3)) * factor, 3),
                          "avg_gbps": round(float(m.group(4)) * factor, 3),
                          "msg_rate_mpps": float(m.group(5))}
    if unit is None:
        raise parse_error(TOOL, "no '#bytes #iterations BW peak ...' table header in output")
    if not rows:
        raise parse_error(TOOL, "result table has no data rows (the test did not run to the end)")
    ordered = [rows[k] for k in sorted(rows)]
    return {"device": fields.get("device"), "link_type": fields.get("link type"), "mtu": fields.get("mtu"),
            "unit": unit, "rows": ordered, "avg_gbps": ordered[-1]["avg_gbps"], "peak_gbps": ordered[-1]["peak_gbps"]}
