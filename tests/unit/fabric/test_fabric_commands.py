"""The fabric's view of a launched command: the shell's codes for the controller's own failures, and the
transports' background servers as process groups (_host.process.spawn)."""

import signal
import time

from ansible_collections.symphony.cluster.plugins.module_utils._fabric.commands import (
    NOT_FOUND_RC,
    TIMEOUT_RC,
    missing_tool,
    run_command,
)
from ansible_collections.symphony.cluster.plugins.module_utils._host.process import spawn


def test_run_command_gives_rc_stdout_stderr():
    assert run_command(["sh", "-c", "echo out; echo err >&2; exit 3"], 10) == (3, "out\n", "err\n")


def test_absent_tool_is_rc_127_and_reads_as_missing():
    rc, out, err = run_command(["no-such-tool-here", "-x"], 10)
    assert (rc, out, err) == (NOT_FOUND_RC, "", "no-such-tool-here: command not found")
    assert missing_tool(rc, err, "no-such-tool-here")


def test_timeout_is_rc_124_with_what_was_printed():
    rc, out, err = run_command(["sh", "-c", "echo partial; sleep 30"], 0.5)
    assert (rc, out, err) == (TIMEOUT_RC, "partial\n", "timed out after 0.5s")


def test_spawned_server_is_stopped_with_its_children():
    start = time.monotonic()
    srv = spawn(["sh", "-c", "sleep 30 & sleep 30"])
    assert srv.poll() is None
    srv.signal(signal.SIGSTOP)          # a paused group still stops (SIGCONT before SIGTERM)
    code = srv.stop(wait_s=0.1, grace_s=5)
    assert code is not None and code != 0 and time.monotonic() - start < 10
