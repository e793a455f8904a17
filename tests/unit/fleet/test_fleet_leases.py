"""A run owns its nodes: the fleet batch leases each host in the ledger before any work (issue 25).

Before, nothing owned a node: a rerun started while a killed playbook's module still drove the BMCs raced it
(double uploads, double resets, 5-7 of 7 healthy nodes failed).
"""

import os
import socket
import sqlite3
import subprocess
import sys
import threading
import time

from ansible_collections.symphony.cluster.plugins.module_utils._core.leases import NodeLeases
from ansible_collections.symphony.cluster.plugins.module_utils._core.ledger import SCHEMA_VERSION, open_ledger
from ansible_collections.symphony.cluster.plugins.module_utils._core.sku import load_skus
from ansible_collections.symphony.cluster.plugins.module_utils._fleet.batch import run_batch
from ansible_collections.symphony.cluster.plugins.module_utils._predeploy.stage import StageSettings, run_stage

from symphony_emulator.fleet import load_twin

# A second process: run A's batch on node n1 whose work waits for a file, so it holds n1 while the test runs B.
HOLDER = r"""
import os, sys, time
from ansible_collections.symphony.cluster.plugins.module_utils._core.leases import NodeLeases
from ansible_collections.symphony.cluster.plugins.module_utils._fleet.batch import run_batch
ledger, go = sys.argv[1], sys.argv[2]
def work(host, item):
    open(go + ".started", "w").close()
    while not os.path.exists(go):
        time.sleep(0.05)
    return "A did " + host
out = run_batch([("n1", 1)], work, leases=NodeLeases(ledger, "run-A", "pre_deployment", ttl_s=30))
print(out["n1"].ok, out["n1"].value)
"""


def _wait_for(path, timeout=30):
    deadline = time.monotonic() + timeout
    while not os.path.exists(path):
        assert time.monotonic() < deadline, "holder did not start"
        time.sleep(0.05)


def _start_holder(ledger, go):
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, ledger, go], stdout=subprocess.PIPE, text=True,
                            env=dict(os.environ))
    _wait_for(go + ".started")
    return proc


def test_two_concurrent_runs_on_one_node(ledger_url, tmp_path):
    go = str(tmp_path / "go")
    holder = _start_holder(ledger_url, go)
    calls = []
    try:
        out = run_batch([("n1", 1), ("n2", 2)], lambda host, item: calls.append(host) or "B did " + host,
                        leases=NodeLeases(ledger_url, "run-B", "pre_deployment"))
    finally:
        open(go, "w").close()
    assert holder.wait(30) == 0 and holder.stdout.read().split() == ["True", "A", "did", "n1"]
    # B never touched n1, and says who holds it; n2 was free
    assert calls == ["n2"] and out["n2"].ok
    assert not out["n1"].ok and out["n1"].error["error"] == "LeaseError"
    msg = out["n1"].error["msg"]
    assert "node n1 is leased by run run-A on host %s pid %d (stage pre_deployment)" % (
        socket.gethostname(), holder.pid) in msg
    assert out["n1"].error["details"]["run_id"] == "run-A"
    # both runs released what they held
    assert open_ledger(ledger_url).leases() == []


def test_a_second_run_waits_for_the_lease_then_runs(ledger_url):
    started, release = threading.Event(), threading.Event()

    def slow(host, item):
        started.set()
        release.wait(10)
        return "A"

    a = threading.Thread(target=run_batch, args=([("n1", 1)], slow),
                         kwargs={"leases": NodeLeases(ledger_url, "run-A", "burn_in")})
    a.start()
    started.wait(10)
    threading.Timer(0.3, release.set).start()
    out = run_batch([("n1", 1)], lambda host, item: "B",
                    leases=NodeLeases(ledger_url, "run-B", "burn_in", wait_s=20, poll_s=0.05))
    a.join(10)
    assert out["n1"].ok and out["n1"].value == "B"


def test_a_killed_holder_on_this_host_frees_the_node_at_once(ledger_url, tmp_path):
    """kill -9 of the module itself: its pid is gone, so its lease no longer stands (no wait for the expiry)."""
    go = str(tmp_path / "go")
    holder = _start_holder(ledger_url, go)
    holder.kill()
    holder.wait(10)
    assert open_ledger(ledger_url).leases()[0]["run_id"] == "run-A"  # left behind
    out = run_batch([("n1", 1)], lambda host, item: "B", leases=NodeLeases(ledger_url, "run-B", "pre_deployment"))
    assert out["n1"].ok


def test_expiry_heartbeat_and_another_hosts_holder(ledger_url):
    led = open_ledger(ledger_url)
    other = {"run_id": "run-X", "host": "controller-2.example", "pid": 4242, "stage": "provisioning"}
    me = {"run_id": "run-Y", "host": socket.gethostname(), "pid": os.getpid(), "stage": "provisioning"}
    assert led.acquire_leases(["n1"], other, ttl_s=60, now=1000.0) == {}
    # another host's process cannot be looked up: it holds the node until its lease expires
    assert led.acquire_leases(["n1"], me, ttl_s=60, now=1059.0)["n1"]["host"] == "controller-2.example"
    assert led.renew_leases("run-X", ttl_s=60, now=1050.0) == 1  # heartbeat: now expires at 1110
    assert "n1" in led.acquire_leases(["n1"], me, ttl_s=60, now=1100.0)
    assert led.acquire_leases(["n1"], me, ttl_s=60, now=1111.0) == {}
    assert led.leases("n1")[0]["run_id"] == "run-Y"
    # the holder's own run may lease it again (the next phase of the same run)
    assert led.acquire_leases(["n1"], me, ttl_s=60, now=1112.0) == {}


def test_leases_are_a_versioned_migration(ledger_url):
    led = open_ledger(ledger_url)
    assert led.schema_version() == SCHEMA_VERSION == 3
    if "://" in ledger_url:
        columns = [r[0] for r in led._query("SELECT column_name FROM information_schema.columns WHERE table_name ="
                                            " 'leases' AND table_schema = current_schema() ORDER BY ordinal_position")]
    else:
        columns = [r[1] for r in sqlite3.connect(ledger_url).execute("PRAGMA table_info(leases)")]
    assert columns[:4] == ["node", "run_id", "host", "pid"]
    led.close()


def test_the_heartbeat_renews_while_the_batch_runs(ledger_url):
    seen = []

    def work(host, item):
        time.sleep(0.5)
        seen.extend(open_ledger(ledger_url).leases(host))
        return "ok"

    run_batch([("n1", 1)], work, leases=NodeLeases(ledger_url, "run-A", "burn_in", ttl_s=0.3))
    assert seen and seen[0]["heartbeat_at"] > seen[0]["acquired_at"]


def test_pre_deployment_does_not_touch_or_record_a_node_another_run_holds(ledger_url, repo_root):
    """The stage entry: a node leased by a live run elsewhere is blocked naming the holder, its BMC untouched."""
    skus = load_skus(str(repo_root / "skus"))
    twin = load_twin(str(repo_root / "molecule" / "pre_deployment" / "data" / "pre_deployment.twin.yml"), skus.keys())
    holder = {"run_id": "pre-other", "host": "controller-2.example", "pid": 4242, "stage": "pre_deployment"}
    open_ledger(ledger_url).acquire_leases(["pd-u02"], holder, ttl_s=600)

    def touched(*args, **kwargs):
        raise AssertionError("the BMC of a leased node was contacted")

    # lease_wait_s 0: stop for the node at once (by default the stage waits that long for the holder to finish)
    settings = StageSettings(username="admin", password="secret-pw-1234", ledger=ledger_url, retries=0,
                             lease_wait_s=0)
    out = run_stage({"pd-u02": twin.nodes["pd-u02"]}, skus, settings, run_id="pre-mine", client_factory=touched)
    entry = out["hosts"]["pd-u02"]
    assert entry["gate"] == "blocked" and entry["requests"] == 0
    assert "leased by run pre-other on host controller-2.example pid 4242 (stage pre_deployment)" in entry["reason"]
    led = open_ledger(ledger_url)
    assert led.current_gates() == {} and led.current_results() == []
    assert [lease["run_id"] for lease in led.leases()] == ["pre-other"]
