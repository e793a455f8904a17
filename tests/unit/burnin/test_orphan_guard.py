"""A paused (SIGSTOPped) load whose module is SIGKILLed is ended by its orphan guard, not left stopped on the node."""

import os
import signal
import subprocess
import sys
import textwrap
import time

from timescale import scaled

from ansible_collections.symphony.cluster.plugins.module_utils._host.process import spawn

MODULE = textwrap.dedent("""
    import signal, sys, time
    from ansible_collections.symphony.cluster.plugins.module_utils._host.process import spawn
    load = spawn([sys.executable, "-c", "import time\\nwhile True: time.sleep(0.1)"], orphan_guard_s=%s)
    load.signal(signal.SIGSTOP)
    print(load.pid, load.guard.pid if load.guard else 0, flush=True)
    time.sleep(600)
""")


def _alive(pid):
    try:
        with open("/proc/%d/stat" % pid) as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


def _state(pid):
    with open("/proc/%d/stat" % pid) as handle:
        return handle.read().rsplit(")", 1)[1].split()[0]


def _module(guard):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    proc = subprocess.Popen([sys.executable, "-c", MODULE % guard], stdout=subprocess.PIPE, text=True, env=env)
    load_pid, guard_pid = (int(x) for x in proc.stdout.readline().split())
    deadline = time.monotonic() + scaled(10)
    while _state(load_pid) != "T" and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _state(load_pid) == "T"   # paused, as the pulse driver leaves it in an off phase
    return proc, load_pid, guard_pid


def _wait_gone(pid, timeout_s):
    deadline = time.monotonic() + timeout_s
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    return not _alive(pid)


def test_a_paused_load_outliving_its_module_is_ended_by_the_guard():
    proc, load_pid, guard_pid = _module("5")
    proc.kill()
    proc.wait()
    assert _wait_gone(load_pid, scaled(20)), "the paused load outlived its module"
    assert _wait_gone(guard_pid, scaled(10))


def test_without_a_guard_the_paused_load_stays_stopped():
    """The defect the guard exists for: nothing else wakes or ends the load (its session is its own)."""
    proc, load_pid, _guard = _module("None")
    proc.kill()
    proc.wait()
    try:
        time.sleep(scaled(2))
        assert _alive(load_pid) and _state(load_pid) == "T"
    finally:
        os.killpg(load_pid, signal.SIGKILL)


def test_the_guard_ends_with_the_load_and_never_touches_a_live_module():
    load = spawn([sys.executable, "-c", "import time; time.sleep(1.0)"], orphan_guard_s=5)
    guard = load.guard
    assert load.stop(wait_s=scaled(10)) == 0      # ended by itself, not signalled
    assert guard.poll() is not None               # and its guard went with it
