# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Parsers for the text and JSON that burn-in tools print.

Every parser takes the tool's output as ``str`` and returns plain JSON-ready
dicts/lists (they are written as evidence).  Malformed or truncated output
raises :class:`ParseError` whose ``where`` names the tool and whose message
says what was missing; no parser raises anything else.  Sample outputs and the
cases each parser handles: ``../shared/fixtures/tool-outputs`` and
``../shared/cases/parsing-cases.md``.
"""

from __future__ import annotations

import json
import re
from typing import Any, Sequence

from ..._core.errors import ParseError

NA_VALUES = ("", "n/a", "[n/a]", "na", "none", "not supported", "[not supported]", "unknown", "[unknown error]",
             "requested functionality has been deprecated")
_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")


def parse_error(tool: str, what: str) -> ParseError:
    """Build the typed error: ``ParseError(what, where=tool)``."""
    return ParseError(what, where=tool)


def require_text(tool: str, text: Any) -> str:
    """Return ``text`` if it is a non-blank ``str``; else raise :class:`ParseError`."""
    if not isinstance(text, str):
        raise parse_error(tool, "output is %s, not text" % type(text).__name__)
    if not text.strip():
        raise parse_error(tool, "output is empty")
    return text


def number(value: Any) -> float | None:
    """First number in ``value`` as float (``'27 C'`` -> 27.0, ``'16x'`` -> 16.0); None for N/A or no number."""
    if value is None:
        return None
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    text = str(value).strip()
    if text.lower() in NA_VALUES:
        return None
    match = _NUMBER.search(text)
    if not match:
        return None
    try:
        return float(match.group(0))
    except ValueError:  # pragma: no cover - the regex only matches floats
        return None


def integer(value: Any) -> int | None:
    """Like :func:`number` but an ``int`` (truncated); None for N/A."""
    num = number(value)
    return int(num) if num is not None else None


def load_json_document(tool: str, text: Any, start_markers: Sequence[str] = ("{",)) -> tuple[Any, str, list[str]]:
    """Decode the first JSON document in ``text``, ignoring text before and after it.

    Returns ``(document, preamble, duplicate_keys)``: ``preamble`` is the stripped text
    before the document (``WARNING: ...`` lines, fio's ``Starting 1 process``);
    ``duplicate_keys`` lists keys that appeared twice in one object (the last value
    wins, as in Python's json).  Raises :class:`ParseError` when no document decodes.
    """
    require_text(tool, text)
    duplicates = []

    def pairs_hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        out = {}
        for key, value in pairs:
            if key in out and key not in duplicates:
                duplicates.append(key)
            out[key] = value
        return out

    decoder = json.JSONDecoder(object_pairs_hook=pairs_hook)
    positions = sorted({m.start() for marker in start_markers for m in re.finditer(re.escape(marker), text)})
    if not positions:
        raise parse_error(tool, "no JSON document in output (no %s found)" % " or ".join(repr(m) for m in start_markers))
    last_error = None
    for pos in positions[:50]:
        try:
            doc, _end = decoder.raw_decode(text, pos)
        except (ValueError, RecursionError) as exc:
            last_error = exc
            duplicates[:] = []
            continue
        return doc, text[:pos].strip(), list(duplicates)
    raise parse_error(tool, "JSON document is malformed or truncated: %s" % last_error)
