# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one subprocess runner: every tool the collection runs on a node or the controller goes through here.

One contract: the argument list is never given to a shell; ``timeout_s`` is seconds; an absent executable raises
:class:`ToolNotFoundError` (its check becomes ``not_run``), a command that outlives ``timeout_s`` raises
:class:`CommandTimeoutError` carrying what it printed so far; any exit status is returned, never judged here
(the caller knows what the tool's exit codes mean). Secrets given in ``secrets`` are masked in every message.

Two entry points:

* :func:`run`: run a command to its end (the common case: query tools, Slurm clients, ssh, vendor updaters).
* :func:`spawn`: start a command in its own session (process group) and get a :class:`GroupProcess`, for what
  :func:`run` cannot do: a stress tool whose children must die with it on timeout (:meth:`GroupProcess.communicate`,
  or :func:`run_group` in one call), a load paused and resumed with signals while telemetry is sampled, a server
  left running while its client is measured.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import IO, Any, Iterable, Mapping, Sequence

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


def _argv(argv: Sequence[Any], env: Mapping[str, str] | None) -> tuple[list[str], str]:
    """``(argv as text, resolved executable)``; :class:`ToolNotFoundError` when it cannot be found."""
    args = [str(a) for a in argv]
    if not args:
        raise ToolNotFoundError("empty command line", where="argv")
    exe = args[0] if os.path.sep in args[0] else which(args[0], env)
    if exe is None or not os.path.exists(exe):
        raise ToolNotFoundError("%s not found on PATH" % args[0], where=args[0])
    return args, exe


def _timeout(argv: Sequence[str], timeout_s: float, stdout: object, stderr: object,
             secrets: Sequence[str]) -> CommandTimeoutError:
    shown = scrub(" ".join(argv), secrets)
    return CommandTimeoutError("%s did not finish within %g s" % (shown, timeout_s), where=argv[0],
                               details={"stdout": scrub(_text(stdout), secrets),
                                        "stderr": scrub(_text(stderr), secrets), "timeout_s": timeout_s})


def run(argv: Sequence[Any], timeout_s: float, *, env: Mapping[str, str] | None = None, cwd: str | None = None,
        stdin: str | None = None, stdin_path: str | None = None, secrets: Iterable[str] = ()) -> CommandResult:
    """Run ``argv`` (no shell) for at most ``timeout_s`` seconds and return its :class:`CommandResult`.

    Raises :class:`ToolNotFoundError` when ``argv[0]`` is not found (``where`` is the tool),
    :class:`CommandTimeoutError` past ``timeout_s`` (``details``: ``stdout``, ``stderr``, ``timeout_s``).
    ``stdin`` is text fed to the command, ``stdin_path`` a file streamed to it (a disk image: never read into
    memory); without either the command reads ``/dev/null`` and cannot hang on a prompt.
    """

    hidden = [s for s in secrets if s]
    args, exe = _argv(argv, env)
    started = time.monotonic()
    source: Any = open(stdin_path, "rb") if stdin_path else None  # pylint: disable=consider-using-with
    try:
        proc = subprocess.run([exe] + args[1:], capture_output=True, timeout=timeout_s, check=False,
                              env=dict(env) if env is not None else None, cwd=cwd,
                              input=stdin.encode("utf-8") if stdin is not None else None,
                              stdin=source or (None if stdin is not None else subprocess.DEVNULL))
    except FileNotFoundError:
        raise ToolNotFoundError("%s not found" % args[0], where=args[0])
    except subprocess.TimeoutExpired as exc:
        raise _timeout(args, timeout_s, exc.stdout, exc.stderr, hidden)
    finally:
        if source is not None:
            source.close()
    # Decoded leniently: one stray byte in a tool's output must not turn a reading into a crash.
    return CommandResult(argv=tuple(args), rc=proc.returncode, stdout=_text(proc.stdout), stderr=_text(proc.stderr),
                         duration_s=time.monotonic() - started)


# The orphan guard of a paused load (spawn(..., orphan_guard_s=...)): a sleeping interpreter outside the load's
# process group that, once its parent (the module) is gone, wakes the group (SIGCONT), asks it to end (SIGTERM)
# and kills it after the grace.  A load started in a session of its own is never sent SIGHUP/SIGCONT by the
# kernel when its parent dies (its group was orphaned from the start, POSIX "orphaned process group"), so a
# module killed during a SIGSTOP phase would leave the load stopped on the node, holding its GPU, for good.
# getppid() is polled rather than PR_SET_PDEATHSIG, which fires when the spawning *thread* ends.
_GUARD = """
import os, signal, sys, time
pgid, parent, grace = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
signal.signal(signal.SIGINT, signal.SIG_IGN)

def signal_group(sig):
    try:
        os.killpg(pgid, sig)
    except OSError:  # the group is gone: nothing left to guard
        sys.exit(0)

while os.getppid() == parent:
    signal_group(0)
    time.sleep(0.5)
signal_group(signal.SIGCONT)
signal_group(signal.SIGTERM)
end = time.monotonic() + grace
while time.monotonic() < end:
    signal_group(0)
    time.sleep(0.2)
signal_group(signal.SIGKILL)
"""


class GroupProcess:
    """A command started by :func:`spawn`: it leads its own process group, so signals reach its children too."""

    def __init__(self, proc: subprocess.Popen, argv: Sequence[str], started: float,
                 guard: subprocess.Popen | None = None) -> None:
        self.proc = proc
        self.argv = tuple(argv)
        self.started = started
        self.guard = guard

    def _end_guard(self) -> None:
        # the load ended under our eyes: its guard has nothing left to do
        if self.guard is not None and self.guard.poll() is None:
            self.guard.kill()
            self.guard.wait()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def poll(self) -> int | None:
        """The exit status, or ``None`` while it runs."""
        return self.proc.poll()

    def signal(self, sig: int) -> None:
        """Send ``sig`` to the whole process group; a group that is already gone is ignored."""
        try:
            os.killpg(self.proc.pid, sig)
        except OSError:
            pass

    def communicate(self, timeout_s: float, secrets: Iterable[str] = ()) -> CommandResult:
        """Wait at most ``timeout_s`` seconds for the end and return its :class:`CommandResult`.

        Past ``timeout_s`` the whole group is killed (SIGKILL), what it printed is collected and
        :class:`CommandTimeoutError` is raised with it (``details``: ``stdout``, ``stderr``, ``timeout_s``).
        """
        try:
            out, err = self.proc.communicate(timeout=max(timeout_s, 0.01))
        except subprocess.TimeoutExpired:
            self.signal(signal.SIGKILL)
            out, err = self.proc.communicate()
            self._end_guard()
            raise _timeout(self.argv, timeout_s, out, err, [s for s in secrets if s])
        self._end_guard()
        return CommandResult(argv=self.argv, rc=self.proc.returncode, stdout=_text(out), stderr=_text(err),
                             duration_s=time.monotonic() - self.started)

    def stderr_text(self) -> str:
        """What an ended command wrote to its stderr pipe (``""`` when it had none)."""
        return _text(self.proc.stderr.read()) if self.proc.stderr else ""

    def stop(self, wait_s: float = 0.0, grace_s: float = 30.0) -> int | None:
        """Let it end by itself for ``wait_s`` seconds, then SIGCONT and SIGTERM the group (a paused load must
        wake to die), then SIGKILL it after ``grace_s`` more.  Returns the exit status."""
        try:
            if wait_s > 0:
                try:
                    return self.proc.wait(timeout=wait_s)
                except subprocess.TimeoutExpired:
                    pass
            for sig in (signal.SIGCONT, signal.SIGTERM):
                self.signal(sig)
            try:
                return self.proc.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                self.signal(signal.SIGKILL)
                return self.proc.wait()
        finally:
            self._end_guard()


def spawn(argv: Sequence[Any], *, output: IO[Any] | None = None, env: Mapping[str, str] | None = None,
          cwd: str | None = None, orphan_guard_s: float | None = None) -> GroupProcess:
    """Start ``argv`` (no shell, stdin ``/dev/null``) in its own session and return its :class:`GroupProcess`.

    ``output``: an open file that receives stdout and stderr together (a long load whose output is evidence);
    without it both are pipes, read by :meth:`GroupProcess.communicate`.  ``orphan_guard_s``: for a load this
    process will pause with SIGSTOP, a guard process that ends the group (SIGCONT, SIGTERM, then SIGKILL after
    that many seconds) if this process dies first (see ``_GUARD``).  Raises :class:`ToolNotFoundError` when the
    executable is absent or cannot be executed.
    """
    args, exe = _argv(argv, env)
    started = time.monotonic()
    try:
        proc = subprocess.Popen([exe] + args[1:], stdin=subprocess.DEVNULL,
                                stdout=output if output is not None else subprocess.PIPE,
                                stderr=subprocess.STDOUT if output is not None else subprocess.PIPE,
                                cwd=cwd, env=dict(env) if env is not None else None, start_new_session=True)
    except OSError as exc:
        raise ToolNotFoundError("cannot run %s: %s" % (args[0], exc.strerror or exc), where=args[0])
    guard = None
    if orphan_guard_s is not None:
        guard = subprocess.Popen([sys.executable, "-c", _GUARD, str(proc.pid), str(os.getpid()), str(orphan_guard_s)],
                                 stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                 start_new_session=True)
    return GroupProcess(proc, args, started, guard)


def run_group(argv: Sequence[Any], timeout_s: float, *, env: Mapping[str, str] | None = None,
              cwd: str | None = None, secrets: Iterable[str] = ()) -> CommandResult:
    """:func:`run` for a tool that forks (stress tools, GPU burners): on timeout its whole process group is
    killed, so no child outlives it or holds its output open.  Same result and errors as :func:`run`."""
    return spawn(argv, env=env, cwd=cwd).communicate(timeout_s, secrets)
