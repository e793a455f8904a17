# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""stress-ng ``--metrics-brief`` output (parsing case P-C11).

Lines carry a ``stress-ng: <level>:  [pid]`` prefix (``info``; newer releases print the
metrics under ``metrc``); the metrics table starts at the header row containing
``bogo ops``.  A run passed when it printed ``successful run completed`` and the
exit code is 0; ``fail:`` lines (e.g. ``--verify`` memory errors) and
``unsuccessful run completed`` mean it failed.
"""

from __future__ import annotations

import re
from typing import Any

from . import number, parse_error, require_text

TOOL = "stress-ng"
_PREFIX = re.compile(r"^stress-ng:\s*(\w+):\s*\[(\d+)\]\s?(.*)$")
_COMPLETED = re.compile(r"(unsuccessful|successful) run completed in ([\d.]+)\s*s")


def parse_stress_ng(text: str) -> dict[str, Any]:
    """Parse stress-ng output.

    Returns ``{pid, successful: bool|None, completed_s, stressors: [{name, bogo_ops, real_s, usr_s,
    sys_s, bogo_ops_per_s_real, bogo_ops_per_s_cpu}], failures: [line], errors: [line]}``.
    Raises :class:`ParseError` when there is neither a completion line nor a metrics table
    (the run was killed before it finished or the output is truncated).
    """
    require_text(TOOL, text)
    pid, successful, completed, stressors = None, None, None, []
    failures, errors = [], []
    in_table = False
    for line in text.splitlines():
        match = _PREFIX.match(line.strip())
        if not match:
            continue
        level, pid, body = match.group(1), int(match.group(2)), match.group(3)
        done = _COMPLETED.search(body)
        if done:
            successful = done.group(1) == "successful"
            completed = float(done.group(2))
            continue
        if level == "fail":
            failures.append(body)
            continue
        if level == "error":
            errors.append(body)
            continue
        if "bogo ops" in body and "stressor" in body:
            in_table = True
            continue
        if not in_table:
            continue
        fields = body.split()
        if not fields or fields[0].startswith("("):
            continue  # the "(secs)" units row
        if len(fields) >= 7 and all(number(f) is not None for f in fields[1:7]):
            stressors.append({"name": fields[0], "bogo_ops": number(fields[1]), "real_s": number(fields[2]),
                              "usr_s": number(fields[3]), "sys_s": number(fields[4]),
                              "bogo_ops_per_s_real": number(fields[5]), "bogo_ops_per_s_cpu": number(fields[6])})
        else:
            in_table = False
    if successful is None and not stressors:
        raise parse_error(TOOL, "no 'run completed' line and no metrics table (run killed or output truncated)")
    return {"pid": pid, "successful": successful, "completed_s": completed, "stressors": stressors,
            "failures": failures, "errors": errors}
