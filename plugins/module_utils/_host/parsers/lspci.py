# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""``lspci -vv`` (``-D`` for domains) PCIe link capability/status, the fallback to sysfs."""

from __future__ import annotations

import re
from typing import Any

from . import number, parse_error, require_text

TOOL = "lspci -vv"
_DEV = re.compile(r"^((?:[0-9a-fA-F]{4}:)?[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]) ([^:]+): (.*)$")
_LNK = re.compile(r"^\s+(LnkCap|LnkSta):.*?Speed ([\d.]+)GT/s[^,]*, Width x(\d+)")
GTS_TO_GEN = {2.5: 1, 5.0: 2, 8.0: 3, 16.0: 4, 32.0: 5, 64.0: 6, 128.0: 7}


def gen_from_gts(gts: float | None) -> int | None:
    """PCIe generation from a transfer rate in GT/s (2.5 -> 1 ... 64 -> 6); None if unknown."""
    if gts is None:
        return None
    return GTS_TO_GEN.get(round(float(gts), 1))


def parse_lspci_vv(text: str) -> list[dict[str, Any]]:
    """Parse ``lspci -vv``: ``[{address, class, description, cap_gen, cap_width, sta_gen, sta_width}]``.

    Devices without a PCIe capability list keep None links.  Raises :class:`ParseError` when no
    device header line is found.
    """
    require_text(TOOL, text)
    devices, dev = [], None
    for line in text.splitlines():
        match = _DEV.match(line)
        if match:
            dev = {"address": match.group(1), "class": match.group(2), "description": match.group(3),
                   "cap_gen": None, "cap_width": None, "sta_gen": None, "sta_width": None}
            devices.append(dev)
            continue
        if dev is None:
            continue
        match = _LNK.match(line)
        if match:
            prefix = "cap" if match.group(1) == "LnkCap" else "sta"
            dev["%s_gen" % prefix] = gen_from_gts(number(match.group(2)))
            dev["%s_width" % prefix] = int(match.group(3))
    if not devices:
        raise parse_error(TOOL, "no device line ('bus:dev.fn class: description') in output")
    return devices
