# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""``amd-smi metric --json`` across ROCm versions: one record per GPU, units stripped, N/A unknown.

The shapes differ between ROCm releases (as public amd-smi consumers record them): a top-level list of GPU
objects or ``{"gpu_data": [...]}``; a value as a number, a ``"500 MHz"`` string or a ``{"value", "unit"}``
object; ``"N/A"`` (also inside arrays) or ``null`` where a GPU does not report it; a ``WARNING: ...`` banner
may precede the JSON.  Power: ``power.socket_power`` (or ``average_socket_power``), W; temperature:
``temperature.hotspot`` (else ``edge``), °C; clock: ``clock.gfx_0.clk`` (or ``gfx_clock``), MHz.
"""

from __future__ import annotations

import re
from typing import Any

from . import load_json_document, parse_error

TOOL = "amd-smi metric"
_QUANTITY = re.compile(r"^\s*(-?[0-9]+(?:\.[0-9]+)?)\s*([A-Za-z%/°]*)\s*$")


def quantity(value: Any) -> float | None:
    """``142`` / ``"142 W"`` / ``{"value": 142, "unit": "W"}`` -> 142.0; ``"N/A"``, ``null``, anything else -> None."""
    if isinstance(value, dict):
        value = value.get("value")
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        match = _QUANTITY.match(value)
        return float(match.group(1)) if match else None
    return None


def _first(section: Any, *paths: str) -> float | None:
    for path in paths:
        node = section
        for key in path.split("."):
            node = node.get(key) if isinstance(node, dict) else None
        found = quantity(node)
        if found is not None:
            return found
    return None


def parse_amd_smi_metric(text: str) -> list[dict[str, Any]]:
    """``[{gpu, power_w, temp_c, sm_clock_mhz}]`` from ``amd-smi metric --json`` (either envelope).

    Raises :class:`ParseError` when no JSON document is found, it is neither a list nor holds ``gpu_data``, or a
    GPU object has no integer ``gpu``.
    """
    doc, _preamble, _dups = load_json_document(TOOL, text, start_markers=("{", "["))
    gpus = doc.get("gpu_data") if isinstance(doc, dict) else doc
    if not isinstance(gpus, list):
        raise parse_error(TOOL, "neither a list of GPUs nor an object with gpu_data")
    out = []
    for item in gpus:
        if not isinstance(item, dict):
            continue  # "N/A" placeholders inside the array
        gpu = item.get("gpu")
        if not isinstance(gpu, int) or isinstance(gpu, bool):
            raise parse_error(TOOL, "a GPU object has no integer 'gpu' (got %r)" % (gpu,))
        out.append({"gpu": gpu,
                    "power_w": _first(item.get("power"), "socket_power", "average_socket_power"),
                    "temp_c": _first(item.get("temperature"), "hotspot", "edge"),
                    "sm_clock_mhz": _first(item.get("clock"), "gfx_0.clk", "gfx_clock")})
    return out
