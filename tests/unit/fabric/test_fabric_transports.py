"""Launchers build the scheduler's/SSH's own command lines; the iperf3 transport measures for real."""

import shutil

import pytest

from ansible_collections.symphony.cluster.plugins.module_utils._fabric import pairs as F
from ansible_collections.symphony.cluster.plugins.module_utils._fabric import rounds as R
from ansible_collections.symphony.cluster.plugins.module_utils._fabric import sweep as W
from ansible_collections.symphony.cluster.plugins.module_utils._fabric import transports as T
from ansible_collections.symphony.cluster.plugins.module_utils._host import launchers as H
from ansible_collections.symphony.cluster.plugins.module_utils._core.errors import ValidationError
from ansible_collections.symphony.cluster.plugins.module_utils._core.ledger import open_ledger
from timescale import scaled


def test_ssh_launcher_argv():
    ssh = H.make_launcher("ssh", config_file="build/lab/ssh_config", identity_file="build/lab/id_ed25519",
                          user="root", connect_timeout=5)
    argv = ssh.wrap("lab1", ["iperf3", "-c", "10.77.0.12", "-J"])
    assert argv[:5] == ["ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=5"]
    assert argv[-3:] == ["lab1", "--", "iperf3 -c 10.77.0.12 -J"]
    assert "-F" in argv and "-i" in argv and "StrictHostKeyChecking=no" not in " ".join(argv)
    with pytest.raises(ValidationError, match="use srun or mpirun"):
        ssh.group(["a", "b"], 8, ["all_reduce_perf"])


def test_srun_and_mpirun_group_argv_carry_the_nccl_env():
    env = {"NCCL_IB_HCA": "mlx5_0,mlx5_1", "NCCL_ALGO": "Ring"}
    srun = H.make_launcher("srun", partition="gpu").group(["n1", "n2"], 8, ["all_reduce_perf", "-b", "8"], env)
    assert srun == ["srun", "-p", "gpu", "-N2", "-w", "n1,n2", "--ntasks-per-node=8",
                    "--export=ALL,NCCL_ALGO=Ring,NCCL_IB_HCA=mlx5_0,mlx5_1", "all_reduce_perf", "-b", "8"]
    mpi = H.make_launcher("mpirun").group(["n1", "n2"], 4, ["all_reduce_perf"], env)
    assert mpi[:5] == ["mpirun", "-np", "8", "-H", "n1:4,n2:4"]
    assert mpi[5:9] == ["-x", "NCCL_ALGO=Ring", "-x", "NCCL_IB_HCA=mlx5_0,mlx5_1"]


def test_unknown_names():
    with pytest.raises(ValidationError, match="unknown launcher"):
        H.make_launcher("pdsh")
    with pytest.raises(ValidationError, match="unknown transport"):
        T.make_transport("netperf", H.LocalLauncher())


def test_missing_tool_is_an_error_test():
    transport = T.make_transport("iperf3", H.LocalLauncher(), binary="iperf3-not-installed", timeout_s=scaled(5))
    test = transport.measure("a", "b")
    assert test.status == F.ERROR and "not found" in test.reason


@pytest.mark.skipif(shutil.which("iperf3") is None, reason="iperf3 is not installed")
def test_iperf3_transport_loopback_and_fabric_test_records(ledger_path):
    transport = T.make_transport("iperf3", H.LocalLauncher(), {"a": "127.0.0.1", "b": "127.0.0.1"},
                                 duration_s=1, port=5401, timeout_s=scaled(20))
    test = transport.measure("a", "b", slot=0)
    assert test.status == F.OK and test.unit == "Gb/s" and test.value > 0.1
    assert test.evidence["forward_gbps"] > 0 and test.evidence["reverse_gbps"] > 0
    # Two loopback "nodes" with a floor no loopback reaches: the pair fails and nothing can be separated.
    ledger = open_ledger(ledger_path)
    out = R.run_fabric_test(["a", "b"], transport, "round_robin", floor=1e6, ledger=ledger, run_id="r-test")
    assert out["rounds"] == 1 and out["bad_interfaces"] == [] and out["ambiguous"]
    statuses = {r.node: (r.status, r.reason) for r in ledger.current_results(stage="burn_in")}
    assert statuses["a"][0] == "fail" and statuses["a"][1].startswith("ambiguous")
    assert [e["data"]["verdict"] for e in ledger.events(kind="fabric_link")] == ["ambiguous", "ambiguous"]


def test_sweep_from_recorded_output(tool_outputs):
    text = (tool_outputs / "nccl-tests-all_reduce_perf-8xA100-superbench.txt").read_text()
    res = W.run_nccl_sweep(["n1"], None, "all_reduce", floors={1: 200.0}, outputs={1: text},
                           nccl_env={"NCCL_ALGO": "Ring"})
    assert res["ok"] is True and res["runs"][0]["status"] == "pass"
    assert res["runs"][0]["analysis"]["nccl_env"] == {"NCCL_ALGO": "Ring"}
    res = W.run_nccl_sweep(["n1", "n2"], H.SSHLauncher(), "all_reduce", outputs={1: text})
    assert res["runs"][1]["status"] == "not_run" and "use srun or mpirun" in res["runs"][1]["reason"]


def test_floor_for_picks_the_most_specific_entry():
    manifest = {"validation": {"nccl_busbw_floors": [
        {"collective": "all_reduce", "min_busbw_gbps": 360.0},
        {"collective": "all_reduce", "nodes": 2, "min_busbw_gbps": 370.0},
        {"collective": "all_gather", "min_busbw_gbps": 250.0}]}}
    assert W.floor_for(manifest, "all_reduce_perf", 2) == 370.0
    assert W.floor_for(manifest, "all_reduce", 4) == 360.0
    assert W.floor_for(manifest, "alltoall", 4) is None
