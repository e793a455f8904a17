# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""``rocm-smi ... --json`` output for AMD Instinct GPUs.

One object per ``cardN`` plus ``system``; keys drift between ROCm releases
(``GPU ID`` in 5.7 vs ``Device ID`` in 6.0; ``Average Graphics Package Power (W)`` vs
``Current Socket Graphics Package Power (W)``), values are strings with units inline
(``"(1402Mhz)"``, ``"0 (8.0GT/s x16)"``) or ``"N/A"``.
"""

from __future__ import annotations

import re
from typing import Any

from . import (
    load_json_document,
    number,
    parse_error,
)

TOOL = "rocm-smi"
_PCIE = re.compile(r"([\d.]+)\s*GT/s\s*x(\d+)", re.I)


def _first(card: dict[str, Any], *keys: str) -> float | None:
    for key in keys:
        if key in card and number(card[key]) is not None:
            return number(card[key])
    return None


def _text(card: dict[str, Any], *keys: str) -> str | None:
    for key in keys:
        value = card.get(key)
        if isinstance(value, str) and value.strip() and value.strip().upper() != "N/A":
            return value.strip()
    return None


def parse_rocm_smi_json(text: str) -> dict[str, Any]:
    """Parse rocm-smi JSON.

    Returns ``{driver_version, gpus: [{card, pci_bus, device_id, serial, unique_id, vbios, series,
    temp_edge_c, temp_junction_c, temp_memory_c (°C), power_w, power_max_w (W), vram_total_bytes,
    vram_used_bytes, pcie_replay_count, pcie_gts, pcie_width, sclk_mhz, mclk_mhz}]}`` sorted by
    card number.  Raises :class:`ParseError` on malformed JSON or no ``cardN`` object.
    """
    doc, _preamble, _dups = load_json_document(TOOL, text)
    if not isinstance(doc, dict):
        raise parse_error(TOOL, "top level is not a JSON object")
    cards = sorted((k for k in doc if re.fullmatch(r"card\d+", str(k))), key=lambda k: int(k[4:]))
    if not cards:
        raise parse_error(TOOL, "no 'cardN' object in output (no AMD GPU reported)")
    gpus = []
    for key in cards:
        card = doc[key]
        if not isinstance(card, dict):
            raise parse_error(TOOL, "%s is not an object" % key)
        pcie = _PCIE.search(str(card.get("pcie clock level", card.get("0", ""))))
        gpus.append({
            "card": int(key[4:]),
            "pci_bus": _text(card, "PCI Bus"),
            "device_id": _text(card, "GPU ID", "Device ID"),
            "serial": _text(card, "Serial Number"),
            "unique_id": _text(card, "Unique ID"),
            "vbios": _text(card, "VBIOS version"),
            "series": _text(card, "Card series", "Card Series"),
            "temp_edge_c": _first(card, "Temperature (Sensor edge) (C)"),
            "temp_junction_c": _first(card, "Temperature (Sensor junction) (C)"),
            "temp_memory_c": _first(card, "Temperature (Sensor memory) (C)"),
            "power_w": _first(card, "Average Graphics Package Power (W)",
                              "Current Socket Graphics Package Power (W)"),
            "power_max_w": _first(card, "Max Graphics Package Power (W)"),
            "vram_total_bytes": _first(card, "VRAM Total Memory (B)"),
            "vram_used_bytes": _first(card, "VRAM Total Used Memory (B)"),
            "pcie_replay_count": _first(card, "PCIe Replay Count"),
            "pcie_gts": float(pcie.group(1)) if pcie else None,
            "pcie_width": int(pcie.group(2)) if pcie else None,
            "sclk_mhz": _first(card, "sclk clock speed:"),
            "mclk_mhz": _first(card, "mclk clock speed:"),
        })
    system: dict[str, Any] = doc["system"] if isinstance(doc.get("system"), dict) else {}
    return {"driver_version": _text(system, "Driver version"), "gpus": gpus}
