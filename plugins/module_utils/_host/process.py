# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one subprocess runner: every tool the collection runs on a node or the controller goes through :func:`run`.

One contract: the argument list is never given to a shell; ``timeout_s`` is seconds; an absent executable raises
:class:`ToolNotFoundError` (its check becomes ``not_run``), a command that outlives ``timeout_s`` raises
:class:`CommandTimeoutError` carrying what it printed so far; any exit status is returned, never judged here
(the caller knows what the tool's exit codes mean). Secrets given in ``secrets`` are masked in every message.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

from .._core.errors import SymphonyError, ToolNotFoundError
from .._core.secrets import scrub


class CommandTimeoutError(SymphonyError):
    """A command ran past its ``timeout_s``; ``details`` carries ``stdout``/``stderr`` printed until then."""


@dataclass(frozen=True)
class CommandResult:
    """What a finished command left: exit status, its text output and its wall time (s)."""

    argv: tuple
    rc: int
    stdout: str
    stderr: str
    duration_s: float

    @property
    def ok(self) -> bool:
        return self.rc == 0


def which(tool: str, env: Mapping[str, str] | None = None) -> str | None:
    """Absolute path of ``tool`` on ``env``'s PATH (the process's own PATH by default), or ``None``."""
    return shutil.which(tool, path=(env if env is not None else os.environ).get("PATH"))


def _text(data: object) -> str:
    if isinstance(data, bytes):
        return data.decode("utf-8", "replace")
    return data if isinstance(data, str) else ""


def run(argv: Sequence[str], timeout_s: float, *, env: Mapping[str, str] | None = None, cwd: str | None = None,
        stdin: str | None = None, secrets: Iterable[str] = ()) -> CommandResult:
    """Run ``argv`` (no shell) for at most ``timeout_s`` seconds and return its :class:`CommandResult`.

    Raises :class:`ToolNotFoundError` when ``argv[0]`` is not found (``where`` is the tool),
    :class:`CommandTimeoutError` past ``timeout_s`` (``details``: ``stdout``, ``stderr``, ``timeout_s``).
    ``stdin`` is text fed to the command; without it the command reads ``/dev/null`` and cannot hang on a prompt.
    """

    argv = [str(a) for a in argv]
    secrets = [s for s in secrets if s]
    if not argv:
        raise ToolNotFoundError("empty command line", where="argv")
    exe = argv[0] if os.path.sep in argv[0] else which(argv[0], env)
    if exe is None or not os.path.exists(exe):
        raise ToolNotFoundError("%s not found on PATH" % argv[0], where=argv[0])
    started = time.monotonic()
    try:
        proc = subprocess.run([exe] + argv[1:], capture_output=True, text=True, timeout=timeout_s, check=False,
                              env=dict(env) if env is not None else None, cwd=cwd,
                              input=stdin, stdin=None if stdin is not None else subprocess.DEVNULL)
    except FileNotFoundError:
        raise ToolNotFoundError("%s not found" % argv[0], where=argv[0])
    except subprocess.TimeoutExpired as exc:
        shown = scrub(" ".join(argv), secrets)
        raise CommandTimeoutError("%s did not finish within %g s" % (shown, timeout_s), where=argv[0],
                                  details={"stdout": scrub(_text(exc.stdout), secrets),
                                           "stderr": scrub(_text(exc.stderr), secrets), "timeout_s": timeout_s})
    return CommandResult(argv=tuple(argv), rc=proc.returncode, stdout=proc.stdout, stderr=proc.stderr,
                         duration_s=time.monotonic() - started)
