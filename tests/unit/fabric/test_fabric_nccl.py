"""nccl-tests parsing (case P-C4), busbw factors, sweep shape checks on real and synthetic curves."""

import json

import pytest

from ansible_collections.symphony.cluster.plugins.module_utils._host import nccl as N
from ansible_collections.symphony.cluster.plugins.module_utils._core.errors import ParseError, ValidationError

A100 = "nccl-tests-all_reduce_perf-8xA100-superbench.txt"


@pytest.fixture(scope="module")
def a100_text(tool_outputs):
    return (tool_outputs / A100).read_text()


def test_p_c4_real_all_reduce_8xa100(a100_text):
    p = N.parse_text(a100_text)
    assert p["nranks"] == 8 and p["ranks"][0]["model"] == "A100-SXM4-40GB"
    assert p["validation"] is False
    assert p["avg_busbw"] == pytest.approx(68.4048)
    assert p["out_of_bounds"] == 0 and p["out_of_bounds_ok"] is True
    # two size-0 rows kept, the 'NCCL INFO Launch mode Parallel' line inside the table skipped
    assert [r["size"] for r in p["rows"][:3]] == [0, 0, 4]
    assert len(p["rows"]) == 34
    last = p["rows"][-1]
    assert last["size"] == 8589934592 and last["root"] is None
    assert last["out_of_place"] == {"time_us": 63896.0, "algbw": 134.44, "busbw": 235.26, "wrong": None}
    assert last["in_place"]["busbw"] == 235.03
    # busbw = algbw x 2(n-1)/n for all_reduce on 8 ranks
    assert last["out_of_place"]["busbw"] == pytest.approx(last["out_of_place"]["algbw"] * N.busbw_factor("all_reduce", 8), rel=1e-3)


def test_real_curve_passes_shape_and_level_but_not_an_h100_floor(a100_text):
    p = N.parse_text(a100_text)
    ok = N.analyse(p, floor_gbps=200.0, nccl_env={"NCCL_IB_HCA": "mlx5"})
    assert ok["ok"] is True and ok["shape"]["dips"] == [] and ok["failing_sizes"] == []
    assert ok["shape"]["plateau_gbps"] == 234.37 and ok["max_busbw"] == 235.26
    assert ok["nccl_env"] == {"NCCL_IB_HCA": "mlx5"}
    # the Avg bus bandwidth line (68 GB/s) is dominated by small sizes; the plateau is what's judged
    bad = N.analyse(p, floor_gbps=475.0)  # 8xH100 NVLS all_reduce level (numbers.md 3.3)
    assert bad["ok"] is False and bad["shape"]["below_floor"] is True
    assert bad["failing_sizes"] == [2147483648, 4294967296, 8589934592]
    assert "plateau 234.37 GB/s is below the SKU floor 475.00 GB/s" in bad["reasons"]


def test_root_column_and_wrong_values_are_corruption(a100_text):
    text = "\n".join([
        "# nThread 1 nGpus 1 minBytes 8 maxBytes 1073741824 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0",
        "#  Rank  0 Group  0 Pid   6899 on ztan-mig-235z device  0 [0000:04:00] NVIDIA H100 80GB HBM3",
        "#  Rank  1 Group  0 Pid   6733 on ztan-mig-gq73 device  0 [0000:04:00] NVIDIA H100 80GB HBM3",
        "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong",
        "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)",
        "   536870912     134217728     float     sum      -1   4700.1  114.23  114.23      0   4690.2  114.47  114.47      0",
        "  1073741824     268435456     float     sum      -1   9306.7  115.37  115.37      3   9291.5  115.56  115.56      0",
        "# Out of bounds values : 1 FAILED",
        "# Avg bus bandwidth    : 115.9",
        "#",
        "# Collective test concluded: all_reduce_perf",
    ])
    p = N.parse_text(text)
    assert p["rows"][1]["root"] == -1 and p["rows"][1]["out_of_place"]["wrong"] == 3.0
    assert p["validation"] is True and p["nranks"] == 2 and p["collective"] == "all_reduce"
    res = N.analyse(p)
    assert res["ok"] is False and res["corruption"]["wrong_sizes"] == [1073741824]
    assert res["reasons"][0] == "out of bounds values: 1 (data corruption)"


def test_truncated_output_is_a_parse_error(a100_text):
    cut = a100_text.split("# Out of bounds")[0]
    with pytest.raises(ParseError, match="did not complete"):
        N.parse_text(cut)
    with pytest.raises(ParseError, match="header"):
        N.parse_text("NCCL WARN something\n")


def test_json_output_from_util_cu_writer(a100_text):
    # The -J document as nccl-tests src/util.cu writes it (bools as strings, nwrong null without
    # validation), filled with the real 8xA100 rows.
    rows = N.parse_text(a100_text)["rows"]
    doc = {"version": 2, "args": ["all_reduce_perf", "-b", "8", "-e", "8G", "-J", "out.json"],
           "env": ["NCCL_IB_HCA=mlx5_0", "AWS_SECRET_ACCESS_KEY=hunter2", "NCCL_ALGO=Ring"], "nccl_version": 22703,
           "config": {"nthreads": 1, "ngpus": 8, "minimum_bytes": 8, "maximum_bytes": 8589934592, "validation": 0,
                      "devices": [{"rank": i, "hostname": "localhost", "device": i, "device_hex": "0x00",
                                   "device_info": "A100-SXM4-40GB"} for i in range(8)]},
           "results": [{"size": r["size"], "count": r["count"], "type": "float", "redop": "sum", "root": "    -1",
                        "out_of_place": {"time": r["out_of_place"]["time_us"], "alg_bw": r["out_of_place"]["algbw"],
                                         "bus_bw": r["out_of_place"]["busbw"], "nwrong": None},
                        "in_place": {"time": r["in_place"]["time_us"], "alg_bw": r["in_place"]["algbw"],
                                     "bus_bw": r["in_place"]["busbw"], "nwrong": None},
                        "actual_iterations": 20, "experiment_name": ""} for r in rows],
           "out_of_bounds": {"count": 0, "okay": "true"},
           "average_bus_bandwidth": {"bandwidth": 68.4048, "okay": "unchecked"}}
    p = N.parse(json.dumps(doc))
    assert p["nranks"] == 8 and p["rows"][-1]["out_of_place"]["busbw"] == 235.26 and p["rows"][-1]["root"] == -1
    assert p["env"] == {"NCCL_IB_HCA": "mlx5_0", "NCCL_ALGO": "Ring"}  # the secret is not kept
    assert N.analyse(p, floor_gbps=200)["ok"] is True


@pytest.mark.parametrize("coll,n,factor", [("all_reduce", 8, 1.75), ("all_reduce_perf", 16, 1.875),
                                           ("reduce_scatter", 8, 0.875), ("all_gather", 8, 0.875),
                                           ("alltoall", 64, 63 / 64), ("sendrecv", 8, 1.0), ("broadcast", 8, 1.0)])
def test_busbw_factors(coll, n, factor):
    assert N.busbw_factor(coll, n) == pytest.approx(factor)


def test_unknown_collective():
    with pytest.raises(ValidationError, match="unknown collective"):
        N.busbw_factor("allsum", 8)


def synthetic(peak=370.0, half=4 * 1024 ** 2, dips=None):
    dips = dips or {}
    return [(s, peak * s / (s + half) * dips.get(s, 1.0)) for s in N.sweep_sizes()]


def test_sweep_sizes_and_node_counts():
    sizes = N.sweep_sizes()
    assert sizes[0] == 8 and sizes[-1] == 8 * 1024 ** 3 and len(sizes) == 31
    assert N.node_counts(12) == [1, 2, 4, 8]


def test_synthetic_dip_at_128_kib_is_flagged_with_its_size():
    res = N.check_sweep(synthetic(dips={131072: 0.5}), floor_gbps=300)
    assert res["ok"] is False and res["failing_sizes"] == [131072]
    assert res["dips"][0]["size_h"] == "128 KiB"
    assert "dips" in res["reasons"][0] and "128 KiB" in res["reasons"][0]
    assert res["below_floor"] is False and res["flat"] is True


def test_synthetic_clean_curve_passes_and_low_plateau_fails():
    assert N.check_sweep(synthetic(), floor_gbps=300)["ok"] is True
    low = N.check_sweep(synthetic(peak=250.0), floor_gbps=300)
    assert low["ok"] is False and low["below_floor"] is True and low["dips"] == []
    assert low["failing_sizes"] == [2147483648, 4294967296, 8589934592]


def test_small_noise_in_latency_regime_is_not_a_dip(a100_text):
    # 0.01 -> 0.00 GB/s at tiny sizes is below noise_gbps; only a real drop counts
    pts = [(8, 0.01), (16, 0.0), (32, 0.02), (1 << 20, 20.0), (1 << 21, 40.0), (1 << 22, 41.0), (1 << 23, 41.5)]
    assert N.check_sweep(pts)["dips"] == []
