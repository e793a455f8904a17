# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpu-burn output (parsing case P-C10).

The progress part is one huge line of records separated by ``\\r``/spaces
(``50.0%  proc'd: 2261 (7150 Gflop/s) - ...   errors: 0 - 0 ...   temps: 38 C - 36 C ...``);
``Killing processes..`` is glued to the next message.  The verdict comes only
from the final ``Tested N GPUs:`` block of ``GPU n: OK|FAULTY`` lines.
"""

from __future__ import annotations

import re
from typing import Any

from . import parse_error, require_text

TOOL = "gpu-burn"
_HEADER = re.compile(r"^GPU (\d+): (.+?) \(UUID: (GPU-[0-9a-fA-F-]+)\)\s*$", re.M)
_TESTED = re.compile(r"Tested (\d+) GPUs:")
_RESULT = re.compile(r"^\s*GPU (\d+): (OK|FAULTY)\s*$", re.M)
_RECORD = re.compile(r"(\d+(?:\.\d+)?)%\s+proc'd:(.*?)errors:(.*?)temps:(.*?)(?=\d+(?:\.\d+)?%\s+proc'd:|\n|\r|$)",
                     re.S)
_GFLOPS = re.compile(r"\((\d+(?:\.\d+)?) Gflop/s\)")


def _ints(text: str) -> list[int]:
    return [int(x) for x in re.findall(r"-?\d+", text)]


def parse_gpu_burn(text: str) -> dict[str, Any]:
    """Parse gpu-burn output.

    Returns ``{gpus: [{index, name, uuid}], tested, results: {index: "OK"|"FAULTY"}, faulty: [index],
    progress_pct, max_errors: [per GPU], max_temp_c: [per GPU, °C], last_gflops: [per GPU, Gflop/s]}``.
    Raises :class:`ParseError` when the final ``Tested N GPUs`` block is missing (run killed or
    output truncated) or lists fewer GPUs than it announces.
    """
    require_text(TOOL, text)
    gpus = [{"index": int(m.group(1)), "name": m.group(2), "uuid": m.group(3)} for m in _HEADER.finditer(text)]
    tested = _TESTED.search(text)
    if not tested:
        raise parse_error(TOOL, "final 'Tested N GPUs:' summary missing (run killed or output truncated)")
    summary = text[tested.end():]
    results = {int(m.group(1)): m.group(2) for m in _RESULT.finditer(summary)}
    count = int(tested.group(1))
    if len(results) < count:
        raise parse_error(TOOL, "summary announces %d GPUs but lists %d OK/FAULTY lines" % (count, len(results)))
    progress: float | None = None
    max_errors: list[int] = []
    max_temps: list[int] = []
    gflops: list[float] = []
    for rec in _RECORD.finditer(text[:tested.start()].replace("\r", "\n")):
        progress = float(rec.group(1))
        errors = _ints(rec.group(3))
        temps = _ints(rec.group(4))
        gflops = [float(g) for g in _GFLOPS.findall(rec.group(2))]
        max_errors = [max(a, b) for a, b in zip(max_errors, errors)] + errors[len(max_errors):] \
            if max_errors else errors
        max_temps = [max(a, b) for a, b in zip(max_temps, temps)] + temps[len(max_temps):] \
            if max_temps else temps
    return {
        "gpus": gpus,
        "tested": count,
        "results": {str(k): v for k, v in sorted(results.items())},
        "faulty": sorted(k for k, v in results.items() if v == "FAULTY"),
        "progress_pct": progress,
        "max_errors": max_errors,
        "max_temp_c": max_temps,
        "last_gflops": gflops,
    }
