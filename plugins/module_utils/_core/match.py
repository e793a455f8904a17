# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Compiling a SKU firmware component's ``match`` (Id/Name regexes, JMESPath ``query``), once, at SKU load and
wherever members are matched (``_redfish.firmware_match``), so a bad pattern fails the manifest, not a node."""

from __future__ import annotations

import re
from typing import Any, Mapping

from .errors import ManifestError

try:
    import jmespath
    HAS_JMESPATH = True
except ImportError:  # only a SKU that uses match.query needs it
    jmespath = None
    HAS_JMESPATH = False


def compile_match(match: Mapping[str, Any], where: str) -> dict:
    """Compiled regexes and JMESPath of one ``match`` object: ``{"id", "name", "query"}`` (None where absent).

    Raises :class:`ManifestError` naming ``where`` (the SKU file and JSON path) on a bad regex, a JMESPath
    syntax error, or a ``query`` without the jmespath library installed.
    """
    out: dict = {"id": None, "name": None, "query": None}
    for key in ("id", "name"):
        if match.get(key):
            try:
                out[key] = re.compile(match[key])
            except re.error as exc:
                raise ManifestError("match.%s %r is not a valid regex: %s" % (key, match[key], exc), where=where)
    if match.get("query"):
        if not HAS_JMESPATH:
            raise ManifestError("match.query needs the jmespath Python library (requirements.txt)", where=where)
        try:
            out["query"] = jmespath.compile(match["query"])
        except jmespath.exceptions.JMESPathError as exc:
            raise ManifestError("match.query %r is not a valid JMESPath expression: %s" % (match["query"], exc),
                                where=where)
    return out
