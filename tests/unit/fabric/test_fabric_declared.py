"""The SKU's fabric tests run with the SKU's thresholds, under their own names (_fabric/declared.py)."""

import sys

import pytest

from ansible_collections.symphony.cluster.plugins.module_utils._core import sku as _sku
from ansible_collections.symphony.cluster.plugins.module_utils._core.errors import ValidationError
from ansible_collections.symphony.cluster.plugins.module_utils._core.ledger import open_ledger
from ansible_collections.symphony.cluster.plugins.module_utils._fabric import declared as FD
from ansible_collections.symphony.cluster.plugins.module_utils._fabric import rounds as R
from ansible_collections.symphony.cluster.plugins.module_utils._fabric import transports as T
from ansible_collections.symphony.cluster.plugins.module_utils._host import launchers as H

NCCL_8X = "nccl-tests-all_reduce_perf-8xA100-superbench.txt"


def _fabric_tests(repo_root, sku="dgx_h100.yml"):
    manifest = _sku.load_manifest(str(repo_root / "skus" / sku))
    return {t["name"]: t for tier in manifest["burn_in"]["tiers"] if tier["name"] == "fabric" for t in tier["tests"]}


def test_options_come_from_the_sku(repo_root):
    tests = _fabric_tests(repo_root)
    pairwise = FD.test_options(tests["fabric_pairwise"])
    assert pairwise["transport"] == "ib_write_bw" and pairwise["floor"] == 720 and pairwise["bidirectional"]
    assert pairwise["message_bytes"] == 8388608 and pairwise["nodes"] == 2
    assert pairwise["unmeasured"] == {} and pairwise["max_p99_lat_us"] == 4.2  # measured by ib_write_lat
    single = FD.test_options(tests["nccl_single_node"])
    assert single == dict(single, transport="nccl-tests", floor=430, nodes=1, binary="all_reduce_perf",
                          message_bytes=8589934592, unmeasured={})
    gather = FD.test_options(_fabric_tests(repo_root, "gb200_nvl_tray.yml")["nccl_single_node"])
    assert gather["binary"] == "all_gather_perf" and gather["floor"] == 144
    rccl = FD.test_options(_fabric_tests(repo_root, "cray_ex235a.yml")["rccl_single_node"])
    assert rccl["transport"] == "rccl-tests"
    with pytest.raises(ValidationError, match="no implementation"):
        FD.test_options({"name": "x", "kind": "nvlink_magic"})


def test_a_replaced_tool_is_not_judged_against_the_declared_tools_floor():
    """The lab's iperf3 stands in for ib_write_bw: 720 Gb/s bidirectional RDMA is no floor for TCP."""
    test = {"name": "fabric_pairwise", "kind": "ib_write_bw_pairwise",
            "params": {"transport": "iperf3", "floor": 0.5, "size_bytes": 8388608},
            "thresholds": {"min_bidir_gbps": 720, "max_p99_lat_us": 4.2}}
    options = FD.test_options(test)
    assert options["transport"] == "iperf3" and options["floor"] == 0.5 and options["unmeasured"] == {}
    del test["params"]["floor"]
    assert FD.test_options(test)["floor"] is None  # relative to the peers


def test_the_module_floor_sets_only_a_replaced_tools_floor(repo_root):
    """The demo's calibrated lab floor (burn_in_fabric_floor) judges the lab's iperf3, never the SKU's ib_write_bw."""
    sku = FD.test_options(_fabric_tests(repo_root)["fabric_pairwise"])
    assert FD.effective_floor(sku, 0.3) == 720
    lab = FD.test_options({"name": "fabric_pairwise", "kind": "ib_write_bw_pairwise",
                           "params": {"transport": "iperf3", "floor": 0.5}, "thresholds": {"min_bidir_gbps": 720}})
    assert FD.effective_floor(lab, 0.3) == 0.3 and FD.effective_floor(lab, None) == 0.5
    assert FD.effective_floor({}, 0.3) == 0.3


def test_ib_write_bw_bidirectional_adds_b():
    seen = []

    class Recorder(H.LocalLauncher):
        def wrap(self, host, argv):
            seen.append(list(argv))
            return ["false"]

    transport = T.make_transport("ib_write_bw", Recorder(), bidirectional=True, hcas=["mlx5_0"], timeout_s=5)
    transport.measure("a", "b")
    assert all("-b" in argv for argv in seen) and len(seen) == 2


def test_gpudirect_needs_the_gpu_beside_each_hca(repo_root):
    """The SKU declares GPUDirect: without a GPU per HCA host memory would be measured, so a node cannot pass."""
    declared = _fabric_tests(repo_root)["fabric_pairwise"]
    assert FD.gpudirect_gap(FD.test_options(declared)) == {}  # the shipped SKU names the GPU per HCA
    declared = dict(declared, params={k: v for k, v in declared["params"].items() if k != "cuda_devices"})
    options = FD.test_options(declared)
    assert options["gpudirect"] and set(FD.gpudirect_gap(options)) == {"gpudirect"}
    seen = []

    class Recorder(H.LocalLauncher):
        def wrap(self, host, argv):
            seen.append(list(argv))
            return ["false"]

    transport = T.make_transport("ib_write_bw", Recorder(), hcas=["mlx5_0", "mlx5_3"], cuda_devices=[0, 3],
                                 timeout_s=5)
    transport.measure("a", "b")
    assert "--use_cuda=0" in seen[0]
    with pytest.raises(ValidationError, match="2 GPUs for 1 HCAs"):
        T.make_transport("ib_write_bw", Recorder(), hcas=["mlx5_0"], cuda_devices=[0, 1])
    assert FD.gpudirect_gap(dict(options, cuda_devices=[0, 1, 2, 3, 4, 5, 6, 7])) == {}


def test_unmeasured_threshold_holds_a_passing_node():
    interfaces = {"n1": {"status": "pass", "reason": "ok"}, "n2": {"status": "fail", "reason": "slow"}}
    FD.hold_unmeasured(interfaces, {"gpudirect": "host memory was measured"})
    assert interfaces["n1"]["status"] == "not_run" and "host memory" in interfaces["n1"]["reason"]
    assert interfaces["n2"]["status"] == "fail"


def test_single_node_real_8_gpu_run_against_the_floor(tool_outputs):
    """microsoft/superbenchmark tests/data/nccl_allreduce.log: 8 ranks, 235.26 GB/s busbw at 8 GiB."""
    text = (tool_outputs / NCCL_8X).read_text()
    ok = FD.judge_single_node(text, 0, 200, 8, 8589934592)
    assert ok["status"] == "pass" and ok["observed"]["busbw_gbps"] == 235.26 and ok["observed"]["nranks"] == 8
    low = FD.judge_single_node(text, 0, 430, 8, 8589934592)
    assert low["status"] == "fail" and "235.3 GB/s" in low["reason"] and "430.0" in low["reason"]
    assert FD.judge_single_node(text, 0, 200, 8, 12345)["status"] == "fail"  # no point at the declared size
    assert FD.judge_single_node(text, 0, None, 8)["status"] == "not_run"  # never a pass without a floor
    fewer = FD.judge_single_node(text, 0, 200, 16, 8589934592)
    assert fewer["status"] == "not_run" and "invalid configuration" in fewer["reason"]


def test_single_node_one_rank_is_invalid_not_pass_nor_zero_fail(tool_outputs):
    lines = (tool_outputs / NCCL_8X).read_text().splitlines()
    one_rank = "\n".join(line for line in lines if "Rank  " not in line or "Rank  0 " in line)
    verdict = FD.judge_single_node(one_rank, 0, 200, None, 8589934592)
    assert verdict["status"] == "not_run" and "1 rank(s)" in verdict["reason"]


def test_single_node_test_failure_lines_fail_quoting_them():
    text = "# nThread 1 nGpus 8\nnode1: Test NCCL failure common.cu:954 'unhandled cuda error'\n"
    verdict = FD.judge_single_node(text, 1, 430, 8)
    assert verdict["status"] == "fail" and "common.cu:954" in verdict["reason"]


def test_single_node_unreachable_is_not_run_not_a_node_fail():
    verdict = FD.judge_single_node("ssh: connect to host lab9 port 22: No route to host\n", 255, 430, 8)
    assert verdict["status"] == "not_run" and "No route to host" in verdict["reason"]
    started = "# nThread 1 nGpus 8 minBytes 8 maxBytes 8 step: 2(factor) warmup iters: 5 iters: 20 validation: 1\n"
    assert FD.judge_single_node(started + "Segmentation fault\n", 139, 430, 8)["status"] == "fail"


def test_fabric_test_module_runs_a_single_node_test_per_node(tool_outputs, ledger_path, monkeypatch):
    """nodes: 1 runs on each node alone; the rows carry the test's name; an absent tool is not_run."""
    fixture = str(tool_outputs / NCCL_8X)

    def wrap(self, host, argv):
        if host == "n2":
            return ["/nonexistent/all_reduce_perf"] + [str(a) for a in argv[1:]]
        return [sys.executable, "-c", "import sys; sys.stdout.write(open(sys.argv[1]).read().split('\\n', 1)[1])",
                fixture]

    monkeypatch.setattr(H.LocalLauncher, "wrap", wrap)
    test = {"name": "nccl_single_node", "kind": "nccl_all_reduce",
            "params": {"nodes": 1, "max_bytes": 8589934592}, "thresholds": {"min_busbw_gbps": 200}}
    out = R.fabric_test_module({"nodes": ["n1", "n2"], "launcher": "local", "test": test, "ledger": ledger_path,
                                "run_id": "r1", "timeout_s": 30}, check_mode=False)
    assert out["check"] == "nccl_single_node"
    assert out["interfaces"]["n1"]["status"] == "pass"
    assert out["interfaces"]["n2"]["status"] == "not_run" and "not found" in out["interfaces"]["n2"]["reason"]
    rows = {(r.node, r.check): r.status for r in open_ledger(ledger_path).current_results(stage="burn_in")}
    assert rows == {("n1", "nccl_single_node"): "pass", ("n2", "nccl_single_node"): "not_run"}
    plan = R.fabric_test_module({"nodes": ["n1", "n2"], "launcher": "local", "test": test}, check_mode=True)
    assert plan["schedule"] == "per_node" and plan["check"] == "nccl_single_node"


def test_fabric_test_module_pairwise_needs_two_nodes(ledger_path):
    test = {"name": "fabric_pairwise", "kind": "ib_write_bw_pairwise", "params": {}, "thresholds": {}}
    out = R.fabric_test_module({"nodes": ["n1"], "launcher": "local", "test": test, "ledger": ledger_path},
                               check_mode=False)
    assert out["interfaces"]["n1"]["status"] == "not_run" and "at least two" in out["interfaces"]["n1"]["reason"]


def test_multi_node_nccl_over_ssh_is_not_run_with_the_launchers_reason(ledger_path):
    """The lab launches over SSH, which cannot start a multi-node job: nccl_multi_node is not_run, saying so."""
    test = {"name": "nccl_multi_node", "kind": "nccl_all_reduce", "params": {"nodes": 2, "max_bytes": 1024},
            "thresholds": {"min_busbw_gbps": 333}}
    out = R.fabric_test_module({"nodes": ["n1", "n2"], "launcher": "ssh", "test": test, "ledger": ledger_path,
                                "schedule": "round_robin"}, check_mode=False)
    for node in ("n1", "n2"):
        assert out["interfaces"][node]["status"] == "not_run"
        assert "use srun or mpirun" in out["interfaces"][node]["reason"]


def test_a_declared_tool_without_its_floor_cannot_pass():
    """Judged only relative to its peers, a uniformly slow batch would pass: the missing floor holds it."""
    options = FD.test_options({"name": "fabric_pairwise", "kind": "ib_write_bw_pairwise", "thresholds": {}})
    assert options["floor"] is None and "min_bidir_gbps" in options["unmeasured"]
    interfaces = {"n1": {"status": "pass", "reason": "within 0.8 of the upper quartile"}}
    FD.hold_unmeasured(interfaces, options["unmeasured"])
    assert interfaces["n1"]["status"] == "not_run" and "declares no min_bidir_gbps" in interfaces["n1"]["reason"]
