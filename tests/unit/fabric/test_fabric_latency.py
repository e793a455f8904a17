"""p99 latency per HCA (ib_write_lat, _host/parsers/ib_write_lat.py) judged in the ib_write_bw pair transport
against the SKU's max_p99_lat_us, beside the bidirectional bandwidth floor."""

import pytest

from ansible_collections.symphony.cluster.plugins.module_utils._core import sku as _sku
from ansible_collections.symphony.cluster.plugins.module_utils._core.errors import ParseError
from ansible_collections.symphony.cluster.plugins.module_utils._fabric import declared as FD
from ansible_collections.symphony.cluster.plugins.module_utils._fabric import transports as T
from ansible_collections.symphony.cluster.plugins.module_utils._fabric.pairs import ERROR, OK
from ansible_collections.symphony.cluster.plugins.module_utils._host import launchers as H
from ansible_collections.symphony.cluster.plugins.module_utils._host.parsers.ib_write_lat import parse_ib_write_lat

# The column names are perftest's (linux-rdma/perftest print_report_lat), as imbue-ai/cluster-health
# host_validation/p2p_ib_test.py reads them (it joins "99% percentile[usec]" into one header word and takes the
# row under it; it also strips "Conflicting CPU frequency" lines).  The rows: a public `ib_write_lat -a --iter 20000`
# capture (ConnectX-3, mlx4_0; found in the code index, its repository not identified), header and three rows.
LAT_ALL_SIZES = """---------------------------------------------------------------------------------------
                    RDMA_Write Latency Test
 Dual-port       : OFF          Device         : mlx4_0
 Number of qps   : 1            Transport type : IB
 Connection type : RC           Using SRQ      : OFF
---------------------------------------------------------------------------------------
 #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec]
 2       20000          0.88           6.84         0.98               1.03          0.20            1.21                    5.42
 4       20000          0.88           6.89         0.98               1.03          0.18            1.21                    5.49
 8388608 20000          2296.01        2345.48      2302.01            2304.98       6.43            2327.01                 2335.48
---------------------------------------------------------------------------------------
"""
# Another public capture's shape (an InfiniBand setup walkthrough, `ib_write_lat 192.168.100.1`): tabs between the
# columns and perftest's CPU-frequency warning between the header and the row.
LAT_TABS = (" #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   "
            "99% percentile[usec]   99.9% percentile[usec] \n"
            "Conflicting CPU frequency values detected: 2500.000000 != 4533.369000. CPU Frequency is not max.\n"
            " 2       1000          1.10           2.05         1.11     \t       1.12        \t0.00   \t\t1.19    \t\t2.05   \n")
# perftest RESULT_FMT_LAT_DUR (a -D duration run): the average only.
LAT_DURATION = " #bytes        #iterations       t_avg[usec]  \t\n 2             1846569          1.85\n"
# perftest RESULT_FMT_G (--report_gbits); values ours.
BW_OUT = (" #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]\n"
          " 8388608    5000             781.10             779.92               0.011622\n")


def test_percentiles_from_an_all_sizes_run():
    parsed = parse_ib_write_lat(LAT_ALL_SIZES)
    assert parsed["device"] == "mlx4_0" and len(parsed["rows"]) == 3
    assert parsed["rows"][0] == {"bytes": 2, "iterations": 20000, "min_us": 0.88, "max_us": 6.84, "typical_us": 0.98,
                                 "avg_us": 1.03, "stdev_us": 0.20, "p99_us": 1.21, "p999_us": 5.42}
    assert parsed["p99_us"] == 2327.01  # the largest size


def test_tabs_and_cpu_frequency_warning():
    parsed = parse_ib_write_lat(LAT_TABS)
    assert parsed["p99_us"] == 1.19 and parsed["typical_us"] == 1.11 and parsed["rows"][0]["p999_us"] == 2.05


def test_a_duration_run_has_no_percentile():
    parsed = parse_ib_write_lat(LAT_DURATION)
    assert parsed["p99_us"] is None and parsed["rows"][0]["avg_us"] == 1.85


def test_no_table_is_a_parse_error():
    with pytest.raises(ParseError, match="header"):
        parse_ib_write_lat("Couldn't connect to 10.0.0.2:18516\n")
    with pytest.raises(ParseError, match="no data rows"):
        parse_ib_write_lat(LAT_TABS.splitlines()[0] + "\n")


class _Perftest(H.LocalLauncher):
    """Server side sleeps; the client prints the given outputs per tool (``None``: the tool is absent)."""

    def __init__(self, outputs):
        super().__init__()
        self.outputs, self.seen = outputs, []

    def wrap(self, host, argv):
        self.seen.append(list(argv))
        if argv[0] == "timeout":
            return ["sleep", "3"]
        text = self.outputs[argv[0]]
        if text is None:
            return ["sh", "-c", "echo '%s: command not found' >&2; exit 127" % argv[0]]
        return ["printf", "%s", text]


def _transport(outputs, limit=4.2):
    return T.make_transport("ib_write_bw", _Perftest(outputs), hcas=["mlx5_0", "mlx5_1"], cuda_devices=[0, 1],
                            bidirectional=True, max_p99_lat_us=limit, timeout_s=10)


def test_latency_within_the_limit_keeps_the_bandwidth_value():
    transport = _transport({"ib_write_bw": BW_OUT, "ib_write_lat": LAT_TABS})
    test = transport.measure("a", "b")
    assert test.status == OK and test.value == 779.92
    assert test.evidence["p99_lat_us"] == {"mlx5_0": 1.19, "mlx5_1": 1.19} and test.evidence["latency_over"] == []
    lat_calls = [argv for argv in transport.launcher.seen if argv[0] == "ib_write_lat"]
    assert lat_calls and all("-n" in argv and "-D" not in argv and "--use_cuda=0" not in argv for argv in lat_calls)
    assert any("-b" in argv and "--use_cuda=1" in argv for argv in transport.launcher.seen if argv[0] == "ib_write_bw")


def test_latency_over_the_limit_is_a_failed_link():
    test = _transport({"ib_write_bw": BW_OUT, "ib_write_lat": LAT_TABS}, limit=1.0).measure("a", "b")
    assert test.status == OK and test.value == 0.0 and test.evidence["bandwidth_gbps"] == 779.92
    assert test.evidence["latency_over"] == ["mlx5_0", "mlx5_1"] and "1.19 us" in test.reason


def test_absent_or_percentile_less_latency_tool_is_not_a_measurement():
    test = _transport({"ib_write_bw": BW_OUT, "ib_write_lat": None}).measure("a", "b")
    assert test.status == ERROR and "ib_write_lat not found on a" in test.reason and "4.20 us" in test.reason
    test = _transport({"ib_write_bw": BW_OUT, "ib_write_lat": LAT_DURATION}).measure("a", "b")
    assert test.status == ERROR and "99% percentile" in test.reason


def test_without_a_limit_no_latency_run():
    transport = T.make_transport("ib_write_bw", _Perftest({"ib_write_bw": BW_OUT}), timeout_s=10)
    assert transport.measure("a", "b").value == 779.92
    assert not [argv for argv in transport.launcher.seen if argv[0] == "ib_write_lat"]


def test_the_sku_limit_reaches_the_transport(repo_root):
    manifest = _sku.load_manifest(str(repo_root / "skus" / "dgx_h100.yml"))
    (test,) = [t for tier in manifest["burn_in"]["tiers"] for t in tier["tests"] if t["name"] == "fabric_pairwise"]
    options = FD.test_options(test)
    assert options["max_p99_lat_us"] == 4.2 and options["unmeasured"] == {}
    assert options["hcas"] == ["mlx5_%d" % i for i in range(8)] and options["cuda_devices"] == list(range(8))
    assert FD.gpudirect_gap(options) == {}
