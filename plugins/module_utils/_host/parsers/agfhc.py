# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""AMD GPU Field Health Check (AGFHC) console output and its ``results.json`` summary.

No public AGFHC output sample exists (AGFHC ships under NDA); what is public is how AMD's own Cluster Validation
Suite judges a run (ROCm/cvs ``cvs/tests/health/agfhc_cvs.py`` and ``csp_qual_agfhc.py``): the console prints
``return code AGFHC_SUCCESS`` when every test passed, a line ``Log directory: <dir>``, and any ``FAIL``, ``ERROR``
or ``ABORT`` word (case-insensitive) marks a failure; ``<dir>/results.json`` carries ``"total_failed": N``
(beside ``journal.log`` and ``error.json``).  That documented summary is what is parsed here, nothing more.
"""

from __future__ import annotations

import json
import re
from typing import Any

from . import parse_error, require_text

TOOL = "agfhc"
_RETURN_CODE = re.compile(r"return code\s+(AGFHC_\w+)", re.I)
_LOG_DIR = re.compile(r"Log directory:\s+(\S+)", re.I)
_FAILURE_WORD = re.compile(r"FAIL|ERROR|ABORT", re.I)
SUCCESS = "AGFHC_SUCCESS"


def parse_agfhc_output(text: str) -> dict[str, Any]:
    """Parse AGFHC's console output.

    Returns ``{"return_code": "AGFHC_..."|None, "log_dir": str|None, "failure_lines": [str]}``; the failure lines
    are those with a FAIL/ERROR/ABORT word (ROCm/cvs's rule), the return-code line excepted.  Raises
    :class:`ParseError` on empty output.
    """
    require_text(TOOL, text)
    code = _RETURN_CODE.search(text)
    log_dir = _LOG_DIR.search(text)
    failures = [line.strip() for line in text.splitlines()
                if _FAILURE_WORD.search(line) and not _RETURN_CODE.search(line)]
    return {"return_code": code.group(1).upper() if code else None, "log_dir": log_dir.group(1) if log_dir else None,
            "failure_lines": failures}


def parse_agfhc_results(text: str) -> dict[str, Any]:
    """Parse ``results.json``: ``{"total_failed": int, "totals": {total_* key: number}}``.

    Raises :class:`ParseError` when it is not a JSON object or has no integer ``total_failed``.
    """
    require_text(TOOL + " results.json", text)
    try:
        doc = json.loads(text)
    except ValueError as exc:
        raise parse_error(TOOL + " results.json", "not JSON: %s" % exc)
    if not isinstance(doc, dict):
        raise parse_error(TOOL + " results.json", "top level is not an object")
    failed = doc.get("total_failed")
    if not isinstance(failed, int) or isinstance(failed, bool):
        raise parse_error(TOOL + " results.json", "no integer total_failed (got %r)" % (failed,))
    totals = {k: v for k, v in doc.items() if k.startswith("total_") and isinstance(v, (int, float))
              and not isinstance(v, bool)}
    return {"total_failed": failed, "totals": totals}
