# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one secret scrubber: every value bound for a log, the ledger, evidence or a report passes through it.

DESIGN.md ("Security"): secrets never reach the ledger, evidence or reports, even inside an error message a
tool or a BMC echoed back.
"""

from __future__ import annotations

import json
from typing import Any, Iterable

MASK = "********"


def scrub(value: Any, secrets: Iterable[str | None]) -> Any:
    """Return ``value`` (str, list, tuple, dict, nested) with every occurrence of each secret replaced by ``MASK``.

    Empty and ``None`` secrets are ignored; tuples come back as lists; non-string leaves are returned as they are.
    Longer secrets are replaced first, so a secret that contains another is masked whole.
    """
    wanted = sorted({s for s in secrets if s}, key=len, reverse=True)
    if not wanted:
        return value
    return _scrub(value, wanted)


def _scrub(value: Any, wanted: list) -> Any:
    if isinstance(value, str):
        for secret in wanted:
            value = value.replace(secret, MASK)
        return value
    if isinstance(value, dict):
        return {k: _scrub(v, wanted) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_scrub(v, wanted) for v in value]
    return value


def may_hold_secret(value: Any, secrets: Iterable[str | None]) -> bool:
    """False only when no secret occurs in any string of ``value`` (nested str, list, tuple, dict): then
    :func:`scrub` would return it unchanged.  True when one may (checked on one JSON encoding of ``value``, in C:
    JSON escapes character by character, so a string holding a secret holds its escaped form; a match across
    two strings, a key, or a value that is not JSON only costs a :func:`scrub` that was not needed)."""
    wanted = [s for s in secrets if s]
    if not wanted:
        return False
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return True
    return any(json.dumps(s, ensure_ascii=False)[1:-1] in text for s in wanted)
