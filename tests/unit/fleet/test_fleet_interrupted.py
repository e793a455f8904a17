"""A module whose playbook died stops at its next safe point (issue 25).

Ansible starts a module in a session of its own, so ``kill -9`` of the playbook's process group missed it: it went
on driving BMCs and writing the ledger while a rerun raced it.  Here a shell stands for the playbook's side (as
Ansible's ``/bin/sh -c '... AnsiballZ ... && sleep 0'`` does) and a batch of three nodes runs under it, one at a
time; the shell is killed while the first node works.
"""

import os
import signal
import subprocess
import sys
import time

from ansible_collections.symphony.cluster.plugins.module_utils._core.leases import NodeLeases, ancestors
from ansible_collections.symphony.cluster.plugins.module_utils._core.ledger import open_ledger
from ansible_collections.symphony.cluster.plugins.module_utils._fleet.batch import run_batch

MODULE = r"""
import os, sys, time
from ansible_collections.symphony.cluster.plugins.module_utils._core.leases import NodeLeases
from ansible_collections.symphony.cluster.plugins.module_utils._fleet.batch import run_batch
ledger, marks = sys.argv[1], sys.argv[2]
def work(host, item):
    open(os.path.join(marks, host + ".started"), "w").close()
    time.sleep(1.5)
    open(os.path.join(marks, host + ".done"), "w").close()
out = run_batch([("n1", 1), ("n2", 2), ("n3", 3)], work, workers=1,
                leases=NodeLeases(ledger, "run-orphan", "provisioning", ttl_s=30))
open(os.path.join(marks, "result"), "w").write(repr({h: o.error.get("error") for h, o in out.items()}))
"""


def test_ancestors_start_with_the_parent():
    chain = ancestors()
    assert chain[:1] == [os.getppid()] and len(chain) <= 3 and 1 not in chain


def test_a_module_whose_playbook_died_starts_no_further_node(tmp_path):
    ledger = str(tmp_path / "ledger.sqlite")
    open_ledger(ledger).close()
    (tmp_path / "module.py").write_text(MODULE)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    shell = subprocess.Popen(["/bin/sh", "-c", "%s %s %s %s; true" % (sys.executable, tmp_path / "module.py", ledger,
                                                                      tmp_path)], env=env, start_new_session=True)
    deadline = time.monotonic() + 60
    while not (tmp_path / "n1.started").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    os.kill(shell.pid, signal.SIGKILL)  # the playbook's side dies; the module (its child) lives on
    shell.wait()
    while not (tmp_path / "result").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert eval((tmp_path / "result").read_text()) == {"n1": None, "n2": "InterruptedRunError",
                                                       "n3": "InterruptedRunError"}
    assert (tmp_path / "n1.done").exists() and not (tmp_path / "n2.started").exists()
    led = open_ledger(ledger)
    try:
        events = led.events(kind="interrupted")
        assert sorted(e["node"] for e in events) == ["n2", "n3"]
        assert all(e["data"]["run_id"] == "run-orphan" and e["data"]["stage"] == "provisioning" for e in events)
        assert led.leases() == []   # released: a rerun resumes at once
    finally:
        led.close()


def test_a_living_playbook_is_not_orphaned(tmp_path):
    leases = NodeLeases(str(tmp_path / "ledger.sqlite"), "run-alive", "pre_deployment")
    out = run_batch([("n1", 1), ("n2", 2)], lambda host, item: host, workers=1, leases=leases)
    assert all(o.ok for o in out.values()) and not leases.orphaned()


def test_forked_worker_processes_also_stop_when_the_playbook_dies(tmp_path):
    """processes=2: the forked shard's parent is the module, not the playbook; it watches the playbook's side too
    (before, only the module's own threads stopped, and the forked shard went on to its next node)."""
    ledger = str(tmp_path / "ledger.sqlite")
    open_ledger(ledger).close()
    module = MODULE.replace('[("n1", 1), ("n2", 2), ("n3", 3)], work, workers=1,',
                            '[("n1", 1), ("n2", 2), ("n3", 3), ("n4", 4)], work, workers=2, processes=2,')
    assert module != MODULE
    (tmp_path / "module.py").write_text(module)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    shell = subprocess.Popen(["/bin/sh", "-c", "%s %s %s %s; true" % (sys.executable, tmp_path / "module.py", ledger,
                                                                      tmp_path)], env=env, start_new_session=True)
    deadline = time.monotonic() + 60
    while len(list(tmp_path.glob("*.started"))) < 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    os.kill(shell.pid, signal.SIGKILL)  # one node running in each process: the playbook's side dies
    shell.wait()
    while not (tmp_path / "result").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    result = eval((tmp_path / "result").read_text())
    started = sorted(p.name.split(".")[0] for p in tmp_path.glob("*.started"))
    assert len(started) == 2, started             # neither process started another node
    assert {h: e for h, e in result.items() if h in started} == {h: None for h in started}
    assert sorted(h for h, e in result.items() if e == "InterruptedRunError") == sorted(set(result) - set(started))
    led = open_ledger(ledger)
    try:
        assert sorted(e["node"] for e in led.events(kind="interrupted")) == sorted(set(result) - set(started))
        assert led.leases() == []
    finally:
        led.close()


def test_a_child_watch_sees_the_module_and_its_ancestors(tmp_path):
    leases = NodeLeases(str(tmp_path / "ledger.sqlite"), "run-w", "pre_deployment")
    watch = leases.child_watch()
    # in a forked child, getppid() is this process; the module's parent and ancestors must stay alive as well
    assert watch.parent_pid == os.getpid() and watch.ancestors[0] == os.getppid()
    assert watch.ancestors[1:] == leases.ancestors and watch.run_id == "run-w"
    gone = subprocess.Popen(["true"])
    gone.wait()
    watch.ancestors.append(gone.pid)
    # from this process the parent differs anyway; a dead ancestor alone is enough
    watch.parent_pid = os.getppid()
    assert watch.orphaned() and watch.interrupted_error("n9").to_dict()["where"] == "n9"
