"""The module entry points: nccl_sweep against a real SKU manifest and the real 8xA100 output; fabric_test
check mode and a missing launcher."""

import pytest

from ansible_collections.symphony.cluster.plugins.module_utils._fabric import rounds as R
from ansible_collections.symphony.cluster.plugins.module_utils._fabric import sweep as W
from ansible_collections.symphony.cluster.plugins.module_utils._core.errors import ValidationError
from ansible_collections.symphony.cluster.plugins.module_utils._core.ledger import open_ledger

A100 = "nccl-tests-all_reduce_perf-8xA100-superbench.txt"


def sweep_params(**kw):
    base = {"nodes": ["gpu-r01-u02"], "collective": "all_reduce", "sku_manifest": None, "floor_gbps": None,
            "max_bytes": None, "min_bytes": 8, "node_counts": None, "tolerance": 0.1, "nccl_env": {},
            "gpus_per_node": 8, "binary_dir": None, "launcher": "srun", "partition": None, "launcher_args": [],
            "ssh_config": None, "ssh_identity_file": None, "ssh_user": None, "ssh_port": None,
            "connect_timeout": 10, "timeout_s": 60, "results_from": [], "stage": "cluster_validation",
            "run_id": None, "record": True, "ledger": None}
    base.update(kw)
    return base


def test_nccl_sweep_sku_floor_and_recipe_recorded(repo_root, tool_outputs, ledger_path):
    params = sweep_params(sku_manifest=str(repo_root / "skus" / "dgx_h100.yml"), ledger=ledger_path, run_id="sweep-1",
                          results_from=[{"nodes": 1, "path": str(tool_outputs / A100)}])
    out = W.nccl_sweep_module(params)
    # an 8xA100 plateau (234 GB/s) does not meet the DGX H100 one-node all_reduce floor (430 GB/s)
    assert out["status"] == "fail" and out["check"] == "nccl_sweep_all_reduce"
    assert out["runs"][0]["plateau_gbps"] == 234.37
    assert out["runs"][0]["failing_sizes"] == [2147483648, 4294967296, 8589934592]
    assert "below the SKU floor 430.00 GB/s" in out["reason"]
    assert out["nccl_env"]["NCCL_NVLS_ENABLE"] == "1"
    row = open_ledger(ledger_path).current_results(node="gpu-r01-u02", stage="cluster_validation")[0]
    assert row.status == "fail" and row.evidence["nccl_env"]["NCCL_IB_HCA"].startswith("=mlx5_0")
    assert row.expected["floors_gbps"] == {"1": 430.0}


def test_nccl_sweep_check_mode_plans_sizes_and_counts(repo_root):
    out = W.nccl_sweep_module(sweep_params(nodes=["a", "b", "c", "d", "e"],
                                           sku_manifest=str(repo_root / "skus" / "dgx_h100.yml")), check_mode=True)
    assert out["node_counts"] == [1, 2, 4] and out["sizes"] == 31 and out["max_bytes"] == 8589934592
    assert out["floors"] == {1: 430.0, 2: 333.0, 4: 298.0}
    with pytest.raises(ValidationError, match="exceed"):
        W.nccl_sweep_module(sweep_params(node_counts=[2]), check_mode=True)


def test_nccl_sweep_without_scheduler_is_not_run(ledger_path, monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    out = W.nccl_sweep_module(sweep_params(nodes=["a", "b"], ledger=ledger_path))
    assert out["status"] == "not_run" and "srun not found" in out["reason"]
    assert {r.status for r in open_ledger(ledger_path).current_results()} == {"not_run"}


def fabric_params(**kw):
    base = {"nodes": ["lab1", "lab2", "lab3", "lab4"], "addresses": {}, "transport": "iperf3", "launcher": "ssh",
            "ssh_config": None, "ssh_identity_file": None, "ssh_user": None, "ssh_port": None, "connect_timeout": 10,
            "partition": None, "launcher_args": [], "schedule": "adaptive", "seed": 3, "max_rounds": 8, "workers": 8,
            "floor": None, "min_fraction": 0.8, "duration_s": 1, "port": None, "streams": 1, "hcas": ["mlx5_0"],
            "message_bytes": None, "gpus_per_node": 8, "binary": None, "nccl_env": {}, "timeout_s": 60, "twin": None,
            "rail": 0, "stage": "burn_in", "run_id": None, "record": True, "ledger": None}
    base.update(kw)
    return base


def test_fabric_test_check_mode_returns_the_plan():
    out = R.fabric_test_module(fabric_params(schedule="round_robin"), check_mode=True)
    assert out["changed"] is False and len(out["plan"]) == 3
    out = R.fabric_test_module(fabric_params(), check_mode=True)
    assert len(out["plan"]) == 1 and sorted(n for p in out["plan"][0] for n in p) == ["lab1", "lab2", "lab3", "lab4"]


def test_fabric_test_without_ssh_client_is_not_run_never_pass(ledger_path, monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    out = R.fabric_test_module(fabric_params(ledger=ledger_path))
    assert {v["status"] for v in out["interfaces"].values()} == {"not_run"}
    assert "ssh not found" in out["interfaces"]["lab1"]["reason"]
    assert {r.status for r in open_ledger(ledger_path).current_results(stage="burn_in")} == {"not_run"}
