"""The fleet audit's run lock (runlock): a run that overlaps a running one stops with a message naming the holder;
a run killed after recording some nodes is finished by the next one under the same run id, without a duplicate
row.  The killed run is a real process, SIGKILLed mid-run."""

import os
import signal
import subprocess
import sys
import textwrap

import pytest

from ansible_collections.symphony.cluster.plugins.module_utils._core import gate_ops as _gate_ops
from ansible_collections.symphony.cluster.plugins.module_utils._core.errors import LeaseError
from ansible_collections.symphony.cluster.plugins.module_utils._core.ledger import open_ledger
from ansible_collections.symphony.cluster.plugins.module_utils._fleet_audit import runlock
from ansible_collections.symphony.cluster.plugins.module_utils._fleet_audit import state as _state

HOSTS = ["n1", "n2", "n3", "n4"]


def _lock(ledger_path, hosts=None, pid=None):
    hosts = HOSTS if hosts is None else hosts
    led = open_ledger(ledger_path)
    try:
        return runlock.lock(led, hosts, holder={"pid": pid or os.getpid()})
    finally:
        led.close()


def _dead_pid():
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_a_run_that_overlaps_a_running_one_stops_naming_the_holder(ledger_path):
    first = _lock(ledger_path)
    assert first["resumed"] is False and first["done"] == [] and first["run_id"].startswith("audit-")
    with pytest.raises(LeaseError) as exc:
        _lock(ledger_path)
    msg = str(exc.value)
    assert "another fleet audit is running: run %s on host " % first["lock_id"] in msg, msg
    assert "pid %d (stage fleet_audit)" % os.getpid() in msg and "this run overlaps it and stops" in msg
    # through the module's entry point too, as the role's first task calls it
    with pytest.raises(LeaseError, match="another fleet audit is running"):
        _state.state_module({"ledger": ledger_path, "mode": "lock", "hosts": HOSTS})
    led = open_ledger(ledger_path)
    try:
        runlock.unlock(led, first["run_id"], first["lock_id"])
    finally:
        led.close()
    second = _lock(ledger_path)
    assert second["resumed"] is False and second["run_id"] != first["run_id"]


def test_a_lock_whose_playbook_died_is_free_and_its_run_resumed(ledger_path):
    first = _lock(ledger_path, pid=_dead_pid())
    again = _lock(ledger_path)
    assert again["resumed"] is True and again["run_id"] == first["run_id"] and again["done"] == []


_KILLED_RUN = textwrap.dedent("""
    import os, sys, time
    from ansible_collections.symphony.cluster.plugins.module_utils._core import gate_ops
    from ansible_collections.symphony.cluster.plugins.module_utils._core.ledger import open_ledger
    from ansible_collections.symphony.cluster.plugins.module_utils._fleet_audit import runlock, state
    ledger_path, hosts = sys.argv[1], sys.argv[2:]
    led = open_ledger(ledger_path)
    run = runlock.lock(led, hosts, holder={"pid": os.getpid()})
    led.close()
    state.exercise_module({"ledger": ledger_path, "node": hosts[0], "action": "record_injection",
                           "run_id": run["run_id"], "injection": {"kind": "sel", "message": "PSU 2 failed"}}, False)
    for host in hosts:
        gate_ops.gate_record({"ledger": ledger_path, "node": host, "stage": "fleet_audit", "run_id": run["run_id"],
                              "checks": [{"name": "kernel_log", "status": "pass"}], "optional": [], "waive": []},
                             False)
        print("recorded", host, flush=True)
        if host == hosts[1]:
            time.sleep(600)   # killed here
""")


def test_an_interrupted_run_is_rerun_without_duplicate_rows(ledger_path):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    proc = subprocess.Popen([sys.executable, "-c", _KILLED_RUN, ledger_path] + HOSTS, stdout=subprocess.PIPE,
                            text=True, env=env)
    try:
        assert proc.stdout.readline().split() == ["recorded", "n1"]
        assert proc.stdout.readline().split() == ["recorded", "n2"]
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()

    rerun = _lock(ledger_path)
    assert rerun["resumed"] is True and rerun["done"] == ["n1", "n2"] and rerun["injected"] == ["n1"]
    # what the role does with it: skip the done hosts, inject nowhere it injected, record the rest, unlock
    for host in HOSTS:
        if host not in rerun["done"]:
            _gate_ops.gate_record({"ledger": ledger_path, "node": host, "stage": "fleet_audit",
                                   "run_id": rerun["run_id"], "checks": [{"name": "kernel_log", "status": "pass"}],
                                   "optional": [], "waive": []}, False)
    led = open_ledger(ledger_path)
    try:
        runlock.unlock(led, rerun["run_id"], rerun["lock_id"])
        results = list(led.table_rows("results"))
        gates = list(led.table_rows("gates"))
        injected = led.events(kind="fault_injected")
    finally:
        led.close()
    result_keys = [tuple(r[1:5]) for r in results]     # id, then run_id, node, stage, check
    assert sorted(result_keys) == sorted({(rerun["run_id"], h, "fleet_audit", "kernel_log") for h in HOSTS})
    assert sorted(tuple(g[1:3]) for g in gates) == sorted((rerun["run_id"], h) for h in HOSTS)
    assert len(injected) == 1
    # the run is finished now: the next one is a new run over every host
    nxt = _lock(ledger_path)
    assert nxt["resumed"] is False and nxt["run_id"] != rerun["run_id"] and nxt["done"] == []


def test_a_resumed_run_with_nothing_left_is_closed_and_a_new_one_starts(ledger_path):
    first = _lock(ledger_path, hosts=["n1"], pid=_dead_pid())
    _gate_ops.gate_record({"ledger": ledger_path, "node": "n1", "stage": "fleet_audit", "run_id": first["run_id"],
                           "checks": [{"name": "kernel_log", "status": "pass"}], "optional": [], "waive": []}, False)
    again = _lock(ledger_path, hosts=["n1"])
    assert again["resumed"] is False and again["run_id"] != first["run_id"] and again["done"] == []


def test_this_runs_own_sel_mark_is_not_the_previous_audits(ledger_path):
    led = open_ledger(ledger_path)
    try:
        led.record_event("n1", _state.SEL_MARK, {"marked_at": "earlier", "run_id": "audit-1"})
    finally:
        led.close()
    out = _state.state_module({"ledger": ledger_path, "mode": "mark_sel", "hosts": ["n1"], "run_id": "audit-2",
                               "sel_marks": {"n1": {"marked_at": "now"}}})
    assert out["hosts"] == {"n1": {"marked": True}}
    again = _state.state_module({"ledger": ledger_path, "mode": "mark_sel", "hosts": ["n1"], "run_id": "audit-2",
                                 "sel_marks": {"n1": {"marked_at": "later"}}})
    assert again["hosts"] == {}   # a rerun of audit-2 keeps its first mark
    before = _state.state_module({"ledger": ledger_path, "mode": "before", "hosts": ["n1"], "run_id": "audit-2"})
    assert before["hosts"]["n1"]["sel_mark"]["marked_at"] == "earlier"


def test_the_holder_is_the_outermost_ansible_playbook_process(tmp_path):
    # ansible-playbook -> its worker (a fork, the same command line) -> sh -> the module: the playbook is the
    # outermost process named ansible-playbook
    (tmp_path / "module.py").write_text(
        "from ansible_collections.symphony.cluster.plugins.module_utils._fleet_audit.runlock import playbook_pid\n"
        "print(playbook_pid(), flush=True)\n")
    (tmp_path / "worker.py").write_text(
        "import subprocess, sys\nsubprocess.run(['sh', '-c', '%s %s'])\n" % (sys.executable, tmp_path / "module.py"))
    (tmp_path / "playbook.py").write_text(
        "import subprocess, sys\nsubprocess.run(['bash', '-c', 'exec -a ansible-playbook %s %s'])\n"
        % (sys.executable, tmp_path / "worker.py"))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    outer = "exec -a ansible-playbook %s %s" % (sys.executable, tmp_path / "playbook.py")
    proc = subprocess.Popen(["bash", "-c", outer], stdout=subprocess.PIPE, text=True, env=env)
    out, _err = proc.communicate(timeout=60)
    assert int(out.strip()) == proc.pid


def test_disjoint_runs_do_not_stop_each_other_and_an_overlap_on_one_host_does(ledger_path):
    # AWX job slices audit disjoint hosts at the same time
    a = _lock(ledger_path, hosts=["n1", "n2"])
    b = _lock(ledger_path, hosts=["n3", "n4"])
    assert a["run_id"] != b["run_id"]
    with pytest.raises(LeaseError, match=r"on 1 of this run's hosts \(n2 first\)"):
        _lock(ledger_path, hosts=["n2", "n5"])
    led = open_ledger(ledger_path)
    try:   # the refused run left no lease behind on n5
        assert [lease["node"] for lease in led.leases("fleet_audit:run:n5")] == []
    finally:
        led.close()
