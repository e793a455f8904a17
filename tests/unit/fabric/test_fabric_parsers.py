"""ib_write_bw (real interleaved loopback sample) and iperf3 -J (a live loopback run) parsers."""

import shutil
import subprocess
import time

import pytest

from ansible_collections.symphony.cluster.plugins.module_utils._core.errors import ParseError
from ansible_collections.symphony.cluster.plugins.module_utils._host.parsers.ib_write_bw import (
    MBS_TO_GBITS, parse_ib_write_bw)
from ansible_collections.symphony.cluster.plugins.module_utils._host.parsers.iperf3 import parse_iperf3_json
from timescale import scaled


def test_ib_write_bw_interleaved_loopback(tool_outputs):
    p = parse_ib_write_bw((tool_outputs / "ib_write_bw-loopback-all-sizes-interleaved-superbench.txt").read_text())
    assert p["device"] == "ib0" and p["link_type"] == "IB" and p["unit"] == "MB/sec"
    assert [r["bytes"] for r in p["rows"]][:3] == [2, 4, 8]
    assert len(p["rows"]) == 23  # the repeated 8388608 row after the separator collapses
    last = p["rows"][-1]
    assert last["bytes"] == 8388608 and last["iterations"] == 2000
    # 23240.68 MB/sec (2^20 B/s) = 194.96 Gb/s: an HDR 200G port at line rate
    assert p["avg_gbps"] == pytest.approx(23240.68 * MBS_TO_GBITS, abs=1e-3)
    assert p["avg_gbps"] == pytest.approx(194.96, abs=0.01)
    assert p["rows"][12]["bytes"] == 8192 and p["rows"][12]["avg_gbps"] == pytest.approx(12782.56 * MBS_TO_GBITS, abs=1e-3)


def test_ib_write_bw_report_gbits_and_truncation():
    text = ("#bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]\n"
            " 65536      5000             391.20             390.85              0.745491\n")
    assert parse_ib_write_bw(text)["avg_gbps"] == 390.85
    with pytest.raises(ParseError, match="no data rows"):
        parse_ib_write_bw("#bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]\n")
    with pytest.raises(ParseError, match="table header"):
        parse_ib_write_bw("Couldn't connect to 10.0.0.2:18515\n")


@pytest.fixture(scope="module")
def iperf3_pair():
    if shutil.which("iperf3") is None:
        pytest.skip("iperf3 is not installed")
    port = "5391"
    srv = subprocess.Popen(["iperf3", "-s", "-1", "-p", port], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(scaled(0.3))
    out = subprocess.run(["iperf3", "-c", "127.0.0.1", "-p", port, "-n", "20M", "-J", "--bidir"],
                         capture_output=True, text=True, timeout=scaled(30), check=False).stdout
    srv.wait(timeout=scaled(10))
    return out


def test_iperf3_bidir_live_loopback(iperf3_pair):
    p = parse_iperf3_json(iperf3_pair)
    assert p["error"] is None and p["bidir"] is True and p["remote_host"] == "127.0.0.1"
    assert p["forward_gbps"] > 0 and p["reverse_gbps"] > 0
    assert p["gbps"] == min(p["forward_gbps"], p["reverse_gbps"])


def test_iperf3_refused_connection_is_an_error_not_a_number():
    if shutil.which("iperf3") is None:
        pytest.skip("iperf3 is not installed")
    out = subprocess.run(["iperf3", "-c", "127.0.0.1", "-p", "5392", "-t", "1", "-J"],
                         capture_output=True, text=True, timeout=scaled(30), check=False).stdout
    p = parse_iperf3_json(out)
    assert p["gbps"] is None and "unable to connect" in p["error"]
    with pytest.raises(ParseError):
        parse_iperf3_json("iperf3: error - unable to connect\n")
