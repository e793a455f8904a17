"""Process helpers for the lab: run a command, start a daemon, stop it by the pid recorded for it."""

from __future__ import annotations

import os
import pathlib
import signal
import subprocess
import time

from ._errors import LabError


def run(argv, check=True, timeout=60, input_text=None, env=None, where=None):
    """Run ``argv``; return the CompletedProcess (text mode).

    Raises LabError naming the command, its exit status and stderr when ``check`` and it fails,
    or when the executable is missing or the command runs past ``timeout`` (seconds).
    """
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, input=input_text,
                              env=env, check=False)
    except FileNotFoundError as exc:
        raise LabError("executable not found: %s" % argv[0], where=where or argv[0]) from exc
    except subprocess.TimeoutExpired as exc:
        raise LabError("%s ran past %ss" % (" ".join(map(str, argv)), timeout), where=where or argv[0]) from exc
    if check and proc.returncode != 0:
        raise LabError("`%s` exited %d: %s" % (" ".join(map(str, argv)), proc.returncode,
                                                (proc.stderr or proc.stdout).strip()[-800:]),
                       where=where or argv[0])
    return proc


def spawn(argv, log_path, env=None):
    """Start ``argv`` as a daemon in its own session, stdout+stderr appended to ``log_path``; return its pid."""
    log_path = pathlib.Path(log_path)
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:
        try:
            proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                    start_new_session=True, env=env, close_fds=True)
        except FileNotFoundError as exc:
            raise LabError("executable not found: %s" % argv[0], where=argv[0]) from exc
    # The Popen object is dropped on purpose: the daemon outlives this process and is stopped by pid.
    proc.returncode = 0  # silence "still running" ResourceWarning on garbage collection
    return proc.pid


def cmdline(pid):
    """Return the argv of ``pid`` as a list of str, or [] when it is gone or unreadable."""
    try:
        raw = pathlib.Path("/proc/%d/cmdline" % int(pid)).read_bytes()
    except (OSError, ValueError):
        return []
    return [part.decode("utf-8", "replace") for part in raw.split(b"\0") if part]


def alive(pid):
    """True when ``pid`` exists and is not a zombie."""
    try:
        stat = pathlib.Path("/proc/%d/stat" % int(pid)).read_text()
    except (OSError, ValueError):
        return False
    return stat.rsplit(")", 1)[-1].split()[0] != "Z"


def _reap(pid):
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def stop_pid(pid, marker=None, timeout=5.0):
    """Stop ``pid`` (SIGTERM, then SIGKILL after ``timeout`` seconds).

    When ``marker`` is given the process is only signalled if its command line still contains it,
    so a recycled pid of someone else's process is never touched. Returns True if it was signalled.
    """
    pid = int(pid)
    argv = cmdline(pid)
    if not argv or not alive(pid):
        _reap(pid)
        return False
    if marker is not None and not any(marker in part for part in argv):
        return False
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return False
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        _reap(pid)
        if not alive(pid):
            return True
        time.sleep(0.05)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    deadline = time.monotonic() + 2.0
    while alive(pid) and time.monotonic() < deadline:
        _reap(pid)
        time.sleep(0.05)
    return True


def pids_with_marker(marker):
    """Pids (other than this process) whose command line contains ``marker`` (a lab path)."""
    found = []
    me = os.getpid()
    for entry in pathlib.Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        argv = cmdline(int(entry.name))
        if argv and any(marker in part for part in argv) and alive(int(entry.name)):
            found.append(int(entry.name))
    return sorted(found)


def wait_for(predicate, timeout, interval=0.1, what="condition"):
    """Poll ``predicate()`` until truthy or ``timeout`` seconds pass; return its value or raise LabError."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise LabError("timed out after %ss waiting for %s" % (timeout, what))
        time.sleep(interval)
