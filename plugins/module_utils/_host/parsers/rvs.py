# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""ROCm Validation Suite (``rvs -c <conf>``) result lines, one per test result.

RVS modules report each result on a line that ends its verdict with ``pass: TRUE|FALSE`` (pass/fail tests) or
``met: TRUE|FALSE`` (gst/iet/pebb targets: a GFLOPS or power target reached or not); AMD's own MI300X preflight
(AMD-AGI/Primus-SaFE ``preflight/mi300x/rvs_performance.sh``) fails a node on ``met: FALSE`` after
``rvs -c gst_single.conf``.  Lines look like ``[RESULT] [ 1234.5] [action_1] gst 12345 ... met: TRUE``; the bracketed
fields and the GPU id before the verdict are kept as they are printed.
"""

from __future__ import annotations

import re
from typing import Any

from . import require_text

TOOL = "rvs"
_VERDICT = re.compile(r"\b(pass|met):\s*(TRUE|FALSE)\b", re.I)
_BRACKETS = re.compile(r"\[([^\]]*)\]")


def parse_rvs_results(text: str) -> list[dict[str, Any]]:
    """``[{line, kind: pass|met, ok: bool, fields: [bracketed fields], module}]``, one per result line, in order.

    ``module`` is the first word after the bracketed fields (``gst``, ``pebb``, ...), or None.  Empty text raises
    :class:`ParseError`; text without a result line gives ``[]`` (the caller decides: nothing was judged).
    """
    require_text(TOOL, text)
    out = []
    for line in text.splitlines():
        match = _VERDICT.search(line)
        if not match:
            continue
        fields = _BRACKETS.findall(line[:match.start()])
        rest = _BRACKETS.sub(" ", line[:match.start()]).split()
        out.append({"line": line.strip(), "kind": match.group(1).lower(), "ok": match.group(2).upper() == "TRUE",
                    "fields": [f.strip() for f in fields], "module": rest[0] if rest else None})
    return out
