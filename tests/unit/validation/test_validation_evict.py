"""Evict-replace-rerun decisions and loop (side effects injected), ledger records, handoff certificate."""

import json

import pytest

from ansible_collections.symphony.cluster.plugins.module_utils._validation import cluster_run as _cluster_run
from ansible_collections.symphony.cluster.plugins.module_utils._validation import evict as _evict
from ansible_collections.symphony.cluster.plugins.module_utils._validation import handoff as _handoff
from ansible_collections.symphony.cluster.plugins.module_utils._core import ledger as _ledger
from ansible_collections.symphony.cluster.plugins.module_utils._core import gate as _gate
from ansible_collections.symphony.cluster.plugins.module_utils._core.errors import ValidationError
from ansible_collections.symphony.cluster.plugins.module_utils._validation import mfu as _mfu
from ansible_collections.symphony.cluster.plugins.module_utils._validation import outliers as _outliers

SCALES = [_evict.Scale("smoke", "fp32", 20.0, nodes=2), _evict.Scale("smoke", "fp32", 20.0, nodes=None)]


def _hot(node, delta=20.0):
    return {"node": node, "gpu": 0, "metric": "temp_c", "value": 55.0 + delta, "peer_median": 55.0,
            "delta": delta, "z": 12.0, "rules": ["modified_z", "delta_c"],
            "reason": "%s GPU 0 temp_c %.1f °C vs peer median 55.0 °C" % (node, 55.0 + delta)}


def test_decide_rules():
    ok = {"runs": [{"status": "pass", "reason": "fine"}], "outliers": []}
    assert _evict.decide(ok, 1, 3, 0)["action"] == "pass"
    hot = {"runs": [{"status": "pass", "reason": "fine"}], "outliers": [_hot("lab2"), dict(_hot("lab2"), gpu=1)]}
    assert _evict.decide(hot, 1, 3, 1) == {"action": "evict", "evict": ["lab2"],
                                           "reason": "outliers on lab2: drain, replace from the spare pool, rerun"}
    nospare = _evict.decide(hot, 1, 3, 0)
    assert nospare["action"] == "fail" and nospare["evict"] == ["lab2"] and "only 0 spare(s)" in nospare["reason"]
    assert _evict.decide(hot, 3, 3, 5)["action"] == "fail"
    slow = {"runs": [{"status": "fail", "reason": "MFU 12.00 % below 20.00 %"}], "outliers": []}
    assert _evict.decide(slow, 1, 2, 0)["action"] == "rerun"
    assert _evict.decide(slow, 2, 2, 0) == {"action": "fail", "evict": [],
                                            "reason": "MFU 12.00 % below 20.00 % (after 2 attempt(s))"}


def test_pick_spares_needs_burn_in_pass():
    chosen, skipped = _evict.pick_spares(["s1", "s2", "s3", "s4"], {"s1": "fail", "s3": "pass", "s4": "pass"},
                                         exclude={"s4"}, count=2)
    assert chosen == ["s3"]
    assert skipped == {"s1": "burn_in gate is fail, not pass", "s2": "burn_in gate is not recorded, not pass",
                       "s4": "already in use or evicted"}


class Cluster:
    """Fake side effects: MFU per attempt, one hot node on attempt 1."""

    def __init__(self, hot_node="lab2"):
        self.hot_node = hot_node
        self.launched, self.drained, self.events = [], [], []

    def launch(self, scale, nodes, attempt):
        self.launched.append((attempt, tuple(nodes)))
        shape = _mfu.ModelShape(layers=2, hidden=128, heads=4, head_dim=32, seq_len=64, vocab=512,
                                params=533760, embedding_params=65536)
        mfu = _mfu.compute_mfu(shape, "torchtitan", 2500.0, 0.03, peak_source="measured")
        # One rank per node (the smoke workload), every rank at the same median step time: no straggler.
        ranks = {str(i): {"node": node, "median_s": 0.2, "steps": 3} for i, node in enumerate(nodes)}
        return {"job": {"job_id": str(len(self.launched)), "state": "COMPLETED", "exit_code": 0}, "mfu": mfu,
                "rank_steps": ranks, "stragglers": []}

    def telemetry(self, nodes, attempt):
        return [_hot(self.hot_node)] if self.hot_node in nodes else []

    def drain(self, node, reason):
        self.drained.append((node, reason))

    def on_event(self, kind, node, data):
        self.events.append((kind, node))


def test_loop_evicts_replaces_and_reruns_to_pass(ledger_path):
    cluster = Cluster()
    ledger = _ledger.open_ledger(ledger_path)
    for spare, status in (("lab4", "fail"), ("lab3", "pass")):
        ledger.record_gate(_gate.GateVerdict(spare, "burn_in", status, "x"), "r0")
    result = _evict.run_validation(["lab1", "lab2"], SCALES, cluster.launch, cluster.telemetry, cluster.drain,
                                   _cluster_run.ledger_spares(ledger, ["lab4", "lab3"]), max_attempts=3,
                                   on_event=cluster.on_event)
    assert result["status"] == "pass" and len(result["attempts"]) == 2
    assert result["final_nodes"] == ["lab1", "lab3"] and result["evicted"] == ["lab2"]
    assert cluster.launched == [(1, ("lab1", "lab2")), (1, ("lab1", "lab2")), (2, ("lab1", "lab3")),
                                (2, ("lab1", "lab3"))]
    assert cluster.drained[0][0] == "lab2" and cluster.drained[0][1].startswith("cluster_validation attempt 1: lab2")
    assert cluster.events == [("drain", "lab2"), ("spare_promoted", "lab3")]
    assert result["replacements"] == [{"evicted": "lab2", "spare": "lab3", "attempt": 1}]
    mfu = result["attempts"][-1]["runs"][0]["mfu_pct"]
    assert mfu == pytest.approx(100 * 2500 * 3005952 / 0.03e12, abs=0.01)

    # The NCCL sweep before training passed on every node (the gate requires it since issue 18).
    swept = {n: {"node": n, "check": "nccl_sweep_all_reduce", "status": "pass", "reason": "busbw rises to 400 GB/s"}
             for n in ("lab1", "lab2", "lab3")}
    results, verdicts = _evict.node_results(result, "run-1", nccl=swept)
    gates = {v.node: v.status for v in verdicts}
    assert gates == {"lab1": "pass", "lab2": "fail", "lab3": "pass"}
    lab2 = [r for r in results if r.node == "lab2" and r.check == "telemetry_outliers"][0]
    assert lab2.status == "fail" and "lab2 GPU 0 temp_c 75.0" in lab2.reason
    assert lab2.evidence["outliers"][0]["node"] == "lab2"
    mfu_ev = [r for r in results if r.node == "lab3" and r.check == "mfu_target"][0].evidence["mfu"]
    assert mfu_ev["convention"] == "torchtitan" and mfu_ev["scale_nodes"] == 2

    cert = _handoff.build_certificate(result, "lab", "lab_cpu", "run-1", nccl=[], issued="2026-11-29T00:00:00Z")
    assert [r["met"] for r in cert["mfu"]] == [True, True] and cert["final_nodes"] == ["lab1", "lab3"]
    text = _handoff.render_text(cert)
    assert "RESULT: PASS" in text and "promoted spare lab3 (burn_in pass) to replace lab2" in text
    assert "Final node list (2)\n  lab1, lab3" in text


def test_loop_fails_when_no_eligible_spare_and_still_drains(ledger_path):
    cluster = Cluster()
    ledger = _ledger.open_ledger(ledger_path)
    result = _evict.run_validation(["lab1", "lab2"], SCALES, cluster.launch, cluster.telemetry, cluster.drain,
                                   _cluster_run.ledger_spares(ledger, ["lab3"]), max_attempts=3)
    assert result["status"] == "fail" and "only 0 spare(s) passed burn-in" in result["reason"]
    assert [d[0] for d in cluster.drained] == ["lab2"] and len(result["attempts"]) == 1


def test_scale_larger_than_cluster_is_not_run_and_job_failure_fails():
    cluster = Cluster(hot_node=None)
    result = _evict.run_validation(["lab1"], [_evict.Scale("smoke", "fp32", 20.0, nodes=2)], cluster.launch,
                                   cluster.telemetry, cluster.drain, lambda c, e: [], max_attempts=1)
    assert result["status"] == "fail"
    assert result["attempts"][0]["runs"][0]["status"] == "not_run"

    def broken(scale, nodes, attempt):
        return {"job": {"job_id": "9", "state": "FAILED", "exit_code": 1, "reason": "NonZeroExitCode"}}
    result = _evict.run_validation(["lab1", "lab2"], SCALES[:1], broken, cluster.telemetry, cluster.drain,
                                   lambda c, e: [], max_attempts=2)
    assert result["status"] == "fail" and len(result["attempts"]) == 2
    assert "job 9 at 2 node(s) ended FAILED (exit 1) NonZeroExitCode" in result["reason"]


def test_file_telemetry_compares_only_the_run_nodes(tmp_path):
    path = tmp_path / "telemetry.jsonl"
    rows = [{"node": n, "gpu": 0, "temp_c": t} for n, t in (("lab1", 50.0), ("lab2", 51.0), ("lab3", 50.5),
                                                            ("lab4", 90.0)) for _sample in range(5)]
    path.write_text("\n".join(json.dumps(r) for r in rows))
    telemetry = _cluster_run.file_telemetry(str(path), max_operating_temp_c=85.0)
    assert telemetry(["lab1", "lab2", "lab3"], 1) == []
    assert _outliers.outlier_nodes(telemetry(["lab1", "lab2", "lab3", "lab4"], 1)) == ["lab4"]
    with pytest.raises(Exception, match="does not exist"):
        _cluster_run.file_telemetry(str(tmp_path / "none.jsonl"))(["lab1"], 1)


# `scontrol show node -o` of the lab (Slurm 22.05.8), trimmed to the fields the resolver reads and a few around.
SCONTROL_NODES = "\n".join(
    "NodeName=lab%d Arch=x86_64 CoresPerSocket=2  CPUAlloc=0 CPUEfctv=2 CPUTot=2 CPULoad=11.42 "
    "NodeAddr=10.77.0.1%d NodeHostName=lab%d Version=22.05.8 OS=Linux 6.18.44-fc-v669 #1 SMP PREEMPT_DYNAMIC @0  "
    "RealMemory=24105 State=IDLE ThreadsPerCore=1 Partitions=lab" % (i, i, i) for i in (1, 2, 3, 4)) + "\n"


def _lab_nodes():
    from ansible_collections.symphony.cluster.plugins.module_utils._host import slurm as _slurm
    return _slurm.Slurm(run=lambda argv, env=None, timeout=60: (0, SCONTROL_NODES, "")).node_states()


def test_slurm_names_from_twin_addresses_as_in_the_demo():
    nodes = _lab_nodes()
    assert nodes["lab3"] == {"state": "IDLE", "reason": "", "addr": "10.77.0.13", "hostname": "lab3"}
    addresses = {"gpu-r01-u02": "10.77.0.11", "gpu-r01-u07": "10.77.0.12", "gpu-r02-u02": "10.77.0.14",
                 "gpu-r02-u07": "10.20.2.17"}
    names, skipped = _evict.resolve_slurm_names(["gpu-r01-u02", "gpu-r01-u07"], ["gpu-r02-u07", "gpu-r02-u02"],
                                                nodes, addresses=addresses)
    assert names == {"gpu-r01-u02": "lab1", "gpu-r01-u07": "lab2", "gpu-r02-u02": "lab4"}
    assert skipped == {"gpu-r02-u07": "Slurm has no NodeName gpu-r02-u07 nor a NodeAddr/NodeHostName 10.20.2.17"}
    # Same names as Slurm (a real cluster, the molecule lab inventory): identity; explicit names win.
    assert _evict.resolve_slurm_names(["lab1", "lab2"], [], nodes)[0] == {"lab1": "lab1", "lab2": "lab2"}
    assert _evict.resolve_slurm_names(["n1"], [], nodes, explicit={"n1": "lab3"})[0] == {"n1": "lab3"}
    with pytest.raises(Exception, match="node gpu-r09-u02 is not a Slurm node: Slurm has no NodeName gpu-r09"):
        _evict.resolve_slurm_names(["gpu-r09-u02"], [], nodes, addresses={"gpu-r09-u02": "10.77.0.99"})
    with pytest.raises(Exception, match="node n1 is not a Slurm node: Slurm has no NodeName lab9 \\(slurm_names\\)"):
        _evict.resolve_slurm_names(["n1"], [], nodes, explicit={"n1": "lab9"})


def test_file_telemetry_rows_by_slurm_name_name_the_inventory_node(tmp_path):
    path = tmp_path / "telemetry.jsonl"
    rows = [{"node": n, "gpu": g, "temp_c": 54.0 + g * 0.3 + (20.0 if (n, g) == ("lab2", 0) else 0.0)}
            for n in ("lab1", "lab2", "lab3") for g in range(4) for _sample in range(3)]
    path.write_text("\n".join(json.dumps(r) for r in rows))
    names = {"gpu-r01-u02": "lab1", "gpu-r01-u07": "lab2"}
    found = _cluster_run.file_telemetry(str(path), names=names)(["gpu-r01-u02", "gpu-r01-u07"], 1)
    assert [(o["node"], o["gpu"]) for o in found] == [("gpu-r01-u07", 0)]
    assert found[0]["value"] == pytest.approx(74.0)


def test_drained_slurm_nodes_are_refused_up_front_and_drained_spares_passed_over():
    """A job asking for a drained node would pend until its time-out: name the node and Slurm's reason instead."""
    slurm_nodes = {"lab1": {"state": "IDLE", "addr": "10.77.0.11"},
                   "lab2": {"state": "IDLE+DRAIN", "reason": "GPU 7 hot", "addr": "10.77.0.12"},
                   "lab3": {"state": "DOWN", "reason": "Not responding", "addr": "10.77.0.13"}}
    addresses = {"n1": "10.77.0.11", "n2": "10.77.0.12", "s3": "10.77.0.13"}
    names, skipped = _evict.resolve_slurm_names(["n1"], ["s3"], slurm_nodes, addresses=addresses)
    assert names == {"n1": "lab1"}
    assert skipped == {"s3": "Slurm node lab3 is DOWN (Not responding)"}
    with pytest.raises(ValidationError, match=r"node n2 cannot run: Slurm node lab2 is IDLE\+DRAIN \(GPU 7 hot\)"):
        _evict.resolve_slurm_names(["n1", "n2"], [], slurm_nodes, addresses=addresses)
