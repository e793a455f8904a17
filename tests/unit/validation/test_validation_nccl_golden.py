"""The golden-recipe check: what NCCL reports at init (NCCL_DEBUG=INFO) against the SKU's nccl_env.

The lines are NCCL's own init log as printed by NCCL 2.20 (``NCCL version``, ``NET/IB : Using ... ; OOB``,
``Using network``, ``<VAR> set by environment to``), as quoted in public NCCL debugging write-ups; the sweep
output around them is the real superbenchmark capture in shared/fixtures.
"""

import os

from ansible_collections.symphony.cluster.plugins.module_utils._host import nccl_info as _nccl
from ansible_collections.symphony.cluster.plugins.module_utils._fabric import sweep as _sweep

INIT = """gpu-a3:47021:47088 [0] NCCL INFO Bootstrap : Using eth0:10.4.2.31<0>
gpu-a3:47021:47088 [0] NCCL INFO NCCL version 2.20.5+cuda12.4
gpu-a3:47021:47095 [0] NCCL INFO NCCL_IB_HCA set by environment to mlx5_0,mlx5_1
gpu-a3:47021:47095 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [RO]; OOB eth0:10.4.2.31<0>
gpu-a3:47021:47095 [0] NCCL INFO Using network IB
"""
SOCKET = INIT.replace("NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [RO]; OOB eth0:10.4.2.31<0>",
                      "NET/Socket : Using [0]eth0:10.4.2.31<0>").replace("Using network IB", "Using network Socket")
RECIPE = {"NCCL_IB_HCA": "mlx5_0,mlx5_1", "NCCL_SOCKET_IFNAME": "eth0"}


def fixture(name):
    with open(os.path.join(os.environ.get("SYMPHONY_SHARED", "/work/shared"), "fixtures", "tool-outputs", name),
              encoding="utf-8") as handle:
        return handle.read()


def test_parse_debug_info():
    info = _nccl.parse_debug_info(INIT)
    assert info == {"version": "2.20.5+cuda12.4", "transport": "IB", "devices": ["mlx5_0", "mlx5_1"], "oob": "eth0",
                    "network": "IB", "env": {"NCCL_IB_HCA": "mlx5_0,mlx5_1"}}
    assert _nccl.golden_recipe_mismatches(info, RECIPE) == []


def test_golden_recipe_mismatches():
    assert _nccl.golden_recipe_mismatches(_nccl.parse_debug_info(SOCKET), RECIPE) == [
        "NCCL_IB_HCA mlx5_0,mlx5_1 but NCCL used NET/Socket ['eth0']"]
    assert "outside NCCL_IB_HCA mlx5_0" in _nccl.golden_recipe_mismatches(
        _nccl.parse_debug_info(INIT), dict(RECIPE, NCCL_IB_HCA="mlx5_0"))[0]
    assert _nccl.golden_recipe_mismatches(_nccl.parse_debug_info(INIT), dict(RECIPE, NCCL_SOCKET_IFNAME="bond0")) == [
        "OOB interface eth0, not NCCL_SOCKET_IFNAME bond0"]
    assert _nccl.golden_recipe_mismatches({}, RECIPE) == ["no NCCL init lines in the output (run with NCCL_DEBUG=INFO)"]


def test_sweep_fails_a_run_whose_nccl_fell_back_to_sockets():
    table = fixture("nccl-tests-all_reduce_perf-8xA100-superbench.txt")
    good = _sweep.run_nccl_sweep(["n1"], collective="all_reduce", nccl_env=RECIPE, counts=[1],
                                 outputs={1: INIT + table})
    bad = _sweep.run_nccl_sweep(["n1"], collective="all_reduce", nccl_env=RECIPE, counts=[1],
                                outputs={1: SOCKET + table})
    assert good["runs"][0]["analysis"]["golden_recipe"] == []
    assert bad["ok"] is False and "golden recipe: NCCL_IB_HCA mlx5_0,mlx5_1 but NCCL used NET/Socket" in \
        bad["runs"][0]["reason"]
    # A recorded output without init lines is not judged against the recipe.
    plain = _sweep.run_nccl_sweep(["n1"], collective="all_reduce", nccl_env=RECIPE, counts=[1], outputs={1: table})
    assert "golden_recipe" not in plain["runs"][0]["analysis"]
