# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""perftest ``ib_write_lat`` text output (per HCA): latency percentiles in microseconds.

An iterations run (``-n``/``--iters``) prints the table ``#bytes #iterations t_min[usec] t_max[usec]
t_typical[usec] t_avg[usec] t_stdev[usec] 99% percentile[usec] 99.9% percentile[usec]`` (perftest
``print_report_lat``; older perftest stops after ``t_typical``, linux-rdma/perftest ``src/perftest_parameters.h``
``RESULT_FMT_LAT``).  ``t_typical`` is the median.  Columns are separated by spaces or tabs, and perftest may
print ``Conflicting CPU frequency values detected ...`` between the header and the rows.  A duration run
(``-D``) prints only ``#bytes #iterations t_avg[usec]`` (``RESULT_FMT_LAT_DUR``) and ``--output=latency`` only
the average: neither has a percentile, so a p99 limit cannot be judged from them (``p99_us`` is None).
"""

from __future__ import annotations

import re
from typing import Any

from . import parse_error, require_text

TOOL = "ib_write_lat"
_HEADER = re.compile(r"^#bytes\s+#iterations\s+t_", re.I)
# header words (percentile names joined) -> row keys
_COLUMNS = {"t_min[usec]": "min_us", "t_max[usec]": "max_us", "t_typical[usec]": "typical_us",
            "t_avg[usec]": "avg_us", "t_stdev[usec]": "stdev_us", "99%percentile[usec]": "p99_us",
            "99.9%percentile[usec]": "p999_us"}


def parse_ib_write_lat(text: str) -> dict[str, Any]:
    """Parse ``ib_write_lat`` output.

    Returns ``{"device": str|None, "columns": [key...], "rows": [{"bytes": int, "iterations": int, "min_us",
    "max_us", "typical_us", "avg_us", "stdev_us", "p99_us", "p999_us"}], "p99_us": µs|None at the largest size,
    "typical_us": µs|None}``; a column the run did not print is None.  Raises :class:`ParseError` when no table
    header or no data row is found.
    """
    require_text(TOOL, text)
    if text.startswith("# SOURCE:"):
        text = text.split("\n", 1)[1] if "\n" in text else ""
    columns: list[str] | None = None
    device = None
    rows: dict[int, dict[str, Any]] = {}
    for line in text.splitlines():
        s = line.strip()
        if columns is None:
            m = re.search(r"Device\s*:\s*(\S+)", s)
            if m and device is None:
                device = m.group(1)
        if _HEADER.match(s):
            words = s.replace("% percentile", "%percentile").split()
            columns = [_COLUMNS.get(w, w) for w in words[2:]]
            continue
        if columns is None:
            continue
        fields = s.split()
        if len(fields) < 2 + len(columns) or not fields[0].isdigit() or not fields[1].isdigit():
            continue  # separators, CPU-frequency warnings
        try:
            values = [float(v) for v in fields[2:2 + len(columns)]]
        except ValueError:
            continue
        row: dict[str, Any] = {"bytes": int(fields[0]), "iterations": int(fields[1])}
        row.update({key: None for key in _COLUMNS.values()})
        row.update(dict(zip(columns, values)))
        rows[row["bytes"]] = row
    if columns is None:
        raise parse_error(TOOL, "no '#bytes #iterations t_...' table header in output")
    if not rows:
        raise parse_error(TOOL, "result table has no data rows (the test did not run to the end)")
    ordered = [rows[k] for k in sorted(rows)]
    return {"device": device, "columns": columns, "rows": ordered, "p99_us": ordered[-1]["p99_us"],
            "typical_us": ordered[-1]["typical_us"]}
