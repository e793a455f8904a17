# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""How burn-in tests run their tools: :class:`Executor` over :func:`_host.process.run_group`.

A burn-in tool that runs past its time is not an error of the runner but a test result: the executor turns
the runner's :class:`CommandTimeoutError` into a :class:`CommandResult` with ``timed_out`` (``rc`` None) and
what the tool printed, so the test keeps that output as evidence before it fails.
"""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass
from typing import Mapping, Sequence

from .._host.process import CommandTimeoutError, run_group


@dataclass
class CommandResult:
    """A finished command: ``rc`` (None when killed on timeout), ``duration_s`` seconds."""

    argv: list
    rc: int | None
    stdout: str
    stderr: str
    duration_s: float
    timed_out: bool = False


class Executor:
    """Runs commands on this host, killing the whole process group on timeout."""

    SEARCH_PATH = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin",
                   "/usr/local/cuda/bin", "/opt/rocm/bin", "/usr/local/gpu-burn")

    def __init__(self, env: Mapping[str, str] | None = None) -> None:
        self.env = env

    def which(self, tool: str) -> str | None:
        """Absolute path of ``tool`` (an absolute path is checked as it is), or None."""
        if os.path.isabs(tool):
            return tool if os.access(tool, os.X_OK) else None
        path = os.pathsep.join([os.environ.get("PATH", "")] + list(self.SEARCH_PATH))
        return shutil.which(tool, path=path)

    def run(self, argv: Sequence[str], timeout_s: float, cwd: str | None = None) -> CommandResult:
        """Run ``argv`` for at most ``timeout_s`` seconds; returns :class:`CommandResult`.

        Raises :class:`ToolNotFoundError` when the executable cannot be run.
        """
        start = time.monotonic()
        try:
            res = run_group(argv, timeout_s, env=self.env, cwd=cwd)
        except CommandTimeoutError as exc:
            return CommandResult(list(argv), None, exc.details["stdout"], exc.details["stderr"],
                                 round(time.monotonic() - start, 3), True)
        return CommandResult(list(argv), res.rc, res.stdout, res.stderr, round(time.monotonic() - start, 3))
