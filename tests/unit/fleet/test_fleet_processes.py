"""A fleet batch over worker processes (``_fleet.pool``, issue 27): the same outcomes and ledger rows as one process,
the per-BMC cap kept, and a dead worker's nodes ``blocked`` with the reason (never lost, never passed).

The stage cases run pre_deployment's engine against the Redfish fleet emulator (``symphony_emulator.Fleet``, HTTPS
on free ports, in this process) over the molecule scenario's nodes: clean ones, wrong credentials, 5xx.
"""

import json
import os
import signal
import sqlite3
import threading

import pytest

from ansible_collections.symphony.cluster.plugins.module_utils._core.sku import load_skus
from ansible_collections.symphony.cluster.plugins.module_utils._fleet import pool
from ansible_collections.symphony.cluster.plugins.module_utils._fleet.batch import WORKER_LOST, run_batch, worker_lost
from ansible_collections.symphony.cluster.plugins.module_utils._fleet.settings import fleet_settings_kwargs
from ansible_collections.symphony.cluster.plugins.module_utils._predeploy import stage as pd_stage
from ansible_collections.symphony.cluster.plugins.module_utils._predeploy.stage import StageSettings, run_stage

from emulated_fleet import ROOT, scenario_fleet
# clean, wrong credentials (defects.yml), every request a 500 (faults.yml), and two with the scenario's defects
HOSTS = ["pd-u02", "pd-u22", "pd-u30", "pd-u06", "pd-u10"]


def _work(host, item):
    if item.get("raise"):
        raise ValueError("bad %s" % host)
    return {"host": host, "double": item["n"] * 2, "pid": os.getpid()}


def test_processes_give_the_same_outcomes_and_keep_one_bmc_in_one_process():
    items = [("n%02d" % i, {"n": i, "bmc": "bmc-%d" % (i % 4), "raise": i == 7}) for i in range(24)]
    one = run_batch(items, _work, workers=8, key=lambda it: it["bmc"], processes=1)
    many = run_batch(items, _work, workers=8, key=lambda it: it["bmc"], processes=3)
    assert list(many) == list(one) == [h for h, _item in items]
    for host in one:
        assert many[host].ok == one[host].ok
        assert {k: v for k, v in (many[host].value or {}).items() if k != "pid"} == \
            {k: v for k, v in (one[host].value or {}).items() if k != "pid"}
        assert many[host].error.get("msg") == one[host].error.get("msg")
    assert not many["n07"].ok and "bad n07" in many["n07"].error["msg"]
    pids = {}
    for host, item in items:
        if many[host].ok:
            pids.setdefault(item["bmc"], set()).add(many[host].value["pid"])
    # every node behind one BMC ran in one process (the per-BMC cap holds), and more than one process ran
    assert all(len(p) == 1 for p in pids.values())
    assert len(set().union(*pids.values())) == 3 and os.getpid() not in set().union(*pids.values())


def _switch_interval(host, item):
    import sys
    return {"pid": os.getpid(), "switch_s": sys.getswitchinterval()}


def test_a_worker_process_hands_the_gil_over_less_often_and_the_parent_is_untouched():
    before = __import__("sys").getswitchinterval()
    out = run_batch([("a", {}), ("b", {})], _switch_interval, workers=2, key=id, processes=2)
    assert all(o.value["switch_s"] == pytest.approx(pool.WORKER_SWITCH_INTERVAL_S) for o in out.values())
    assert all(o.value["pid"] != os.getpid() for o in out.values())
    assert __import__("sys").getswitchinterval() == before


def test_split_by_key_keeps_keys_together_and_order():
    jobs = [("h%d" % i, None, "k%d" % (i % 3)) for i in range(10)]
    shards = pool.split_by_key(jobs, 2)
    assert sorted(j for s in shards for j in s) == sorted(jobs)
    for shard in shards:
        assert shard == sorted(shard, key=jobs.index)
    assert all(len({j[2] for j in s} & {j[2] for j in t}) == 0 for s in shards for t in shards if s is not t)
    assert pool.split_by_key(jobs, 8) and len(pool.split_by_key(jobs, 8)) == 3


def _dies_on_n03(host, item):
    if host == "n03":
        os.kill(os.getpid(), signal.SIGKILL)
    return "read " + host


def test_a_killed_worker_ends_its_unfinished_nodes_lost_never_missing():
    items = [("n%02d" % i, i) for i in range(8)]
    done = []
    out = run_batch(items, _dies_on_n03, workers=2, processes=2, on_done=done.append)
    assert list(out) == [h for h, _item in items] and sorted(o.host for o in done) == sorted(out)
    lost = [h for h, o in out.items() if worker_lost(o)]
    assert "n03" in lost
    assert all(o.value == "read " + h for h, o in out.items() if h not in lost)
    assert all(not out[h].ok and "killed by signal SIGKILL" in out[h].error["msg"] for h in lost)


class _Unpicklable:
    def __init__(self, secret):
        self.secret = secret
        self.lock = threading.Lock()

    def __repr__(self):
        return "Unpicklable(%s)" % self.secret


def test_a_result_that_cannot_be_pickled_is_lost_without_its_value_in_the_message():
    out = run_batch([("a", 1), ("b", 2)], lambda h, i: _Unpicklable("hunter2-secret"), processes=2)
    for outcome in out.values():
        assert worker_lost(outcome) and outcome.error["error"] == WORKER_LOST
        assert "hunter2-secret" not in json.dumps(outcome.error)


def test_module_params_default_to_one_process_per_core(monkeypatch):
    monkeypatch.delenv("SYMPHONY_FLEET_PROCESSES", raising=False)
    assert fleet_settings_kwargs({})["processes"] == len(os.sched_getaffinity(0))
    monkeypatch.setenv("SYMPHONY_FLEET_PROCESSES", "3")
    assert fleet_settings_kwargs({})["processes"] == 3
    assert fleet_settings_kwargs({"processes": 5})["processes"] == 5


@pytest.fixture
def emulated(tmp_path):
    skus = load_skus(str(ROOT / "skus"))
    with scenario_fleet(tmp_path, HOSTS, skus) as (twin, bmc_map):
        yield {"skus": skus, "nodes": {h: twin.nodes[h] for h in HOSTS}, "map": bmc_map}


def _stage(emulated, where, processes):
    where.mkdir()
    settings = StageSettings(bmc_map=str(emulated["map"]), optional=("lease_captured", "address_reserved"),
                             retries=1, ledger=str(where / "ledger.sqlite"), dispatch_dir=str(where / "dispatch"),
                             processes=processes, workers=4)
    out = run_stage(emulated["nodes"], emulated["skus"], settings, run_id="run-eq", now=1.8e9, return_details=True)
    with sqlite3.connect(str(where / "ledger.sqlite")) as db:
        rows = {}
        for table in ("results", "gates"):
            cur = db.execute("SELECT * FROM %s" % table)
            names = [d[0] for d in cur.description]
            # when a row was written differs between runs; what it says must not
            rows[table] = sorted(json.dumps({k: v for k, v in zip(names, row) if k not in ("id", "started", "finished", "recorded_at")},
                                            sort_keys=True) for row in cur.fetchall())
    return out, rows


def _timeless(out):
    hosts = json.loads(json.dumps(out["hosts"]))
    for entry in hosts.values():
        entry.pop("elapsed_s")
        for result in entry.get("results", []):
            result.pop("started")
            result.pop("finished")
    return hosts


def test_stage_over_processes_matches_one_process_results_and_ledger_rows(emulated, tmp_path):
    one, one_rows = _stage(emulated, tmp_path / "one", 1)
    many, many_rows = _stage(emulated, tmp_path / "many", 2)
    assert one["summary"] == many["summary"] and one["summary"]["pass"] >= 1 and one["summary"]["fail"] >= 2
    assert _timeless(many) == _timeless(one)
    assert many_rows == one_rows and len(one_rows["results"]) > 20 and len(one_rows["gates"]) == len(HOSTS)
    assert many["requests"] == one["requests"]
    passwords = [n["password"] for n in json.loads(emulated["map"].read_text())["nodes"].values()]
    blob = json.dumps(many) + json.dumps(many_rows)
    assert not any(p in blob for p in passwords)


def test_stage_node_of_a_killed_worker_is_blocked_in_result_and_ledger(emulated, tmp_path, monkeypatch):
    real = pd_stage.observe_node

    def observe(node, *args, **kwargs):
        if node["hostname"] == "pd-u06":
            os.kill(os.getpid(), signal.SIGKILL)
        return real(node, *args, **kwargs)

    monkeypatch.setattr(pd_stage, "observe_node", observe)
    out, rows = _stage(emulated, tmp_path / "killed", 2)
    assert set(out["hosts"]) == set(HOSTS)
    assert out["hosts"]["pd-u06"]["gate"] == "blocked"
    assert "killed by signal SIGKILL" in out["hosts"]["pd-u06"]["reason"]
    gates = {json.loads(g)["node"]: json.loads(g) for g in rows["gates"]}
    assert gates["pd-u06"]["status"] == "blocked" and "worker process" in gates["pd-u06"]["reason"]
    # no node of the dead worker passes; the other process's nodes are judged as ever
    assert all(e["gate"] != "pass" for h, e in out["hosts"].items() if "worker process" in e["reason"])
    assert out["summary"].get("pass", 0) + out["summary"].get("blocked", 0) + out["summary"].get("fail", 0) == 5


def test_each_node_is_scrubbed_with_its_own_credentials_not_every_password_of_the_map(emulated, tmp_path, monkeypatch):
    # scrubbing every string with all N map passwords made the stage O(N^2) (issue 27 profile: a third of the CPU)
    sizes = []
    real = pd_stage.scrub

    def counted(value, secrets):
        sizes.append(len([s for s in secrets if s]))
        return real(value, secrets)

    monkeypatch.setattr(pd_stage, "scrub", counted)
    out, rows = _stage(emulated, tmp_path / "scrub", 1)
    assert sizes and max(sizes) == 1  # the node's map password (no global one in this run)
    passwords = [n["password"] for n in json.loads(emulated["map"].read_text())["nodes"].values()]
    assert not any(p in json.dumps(out) + json.dumps(rows) for p in passwords)
