# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A launched command as the fabric transports read it: ``(rc, stdout, stderr)`` with the shell's codes.

The transports judge a remote tool by its exit status and stderr whether it ran locally, over ssh or under
srun (where an absent tool is rc 127 or "command not found" printed by the remote shell), so the controller's
own failures are translated to the same codes: 124 for a timeout (coreutils ``timeout``), 127 when absent.
"""

from __future__ import annotations

from typing import Sequence

from .._core.errors import ToolNotFoundError
from .._host.process import CommandTimeoutError, run

NOT_FOUND_RC = 127
TIMEOUT_RC = 124


def run_command(argv: Sequence[str], timeout_s: float) -> tuple[int, str, str]:
    """Run ``argv`` on the controller: ``(rc, stdout, stderr)``; rc 124 on timeout, 127 when absent."""
    try:
        res = run(argv, timeout_s)
    except ToolNotFoundError:
        return NOT_FOUND_RC, "", "%s: command not found" % argv[0]
    except CommandTimeoutError as exc:
        return TIMEOUT_RC, exc.details.get("stdout", ""), "timed out after %ss" % timeout_s
    return res.rc, res.stdout, res.stderr


def missing_tool(rc: int, stderr: str, tool: str) -> bool:
    """True when ``(rc, stderr)`` says ``tool`` is not installed where it was launched."""
    text = (stderr or "").lower()
    return rc == NOT_FOUND_RC or ("%s: command not found" % tool) in text or \
        ("%s: not found" % tool) in text or "no such file or directory" in text and tool in text


def tail(text: str, limit: int = 400) -> str:
    """The last ``limit`` characters of ``text`` (stripped): what a reason quotes of a tool's output."""
    text = (text or "").strip()
    return text[-limit:]
