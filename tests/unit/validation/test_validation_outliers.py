"""Telemetry sources and outliers against peers."""

import json

import pytest

from ansible_collections.symphony.cluster.plugins.module_utils._validation import outliers as ot
from ansible_collections.symphony.cluster.plugins.module_utils._core.errors import ParseError


def test_512_gpu_trace_finds_exactly_node40_gpu7():
    # The same seeded peers without the hot GPU have no outlier of their own (so "exactly" means something).
    assert ot.find_outliers(ot.synthetic_trace(seed=0), max_operating_temp_c=85.0) == []
    trace = ot.synthetic_trace(nodes=64, gpus_per_node=8, samples=3600, seed=0, hot=(40, 7, 20.0))
    assert len(trace.gpus) == 512 and trace.samples == 3600
    found = ot.find_outliers(trace, max_operating_temp_c=85.0)
    assert [(o["node"], o["gpu"], o["metric"]) for o in found] == [("node040", 7, "temp_c")]
    hot = found[0]
    assert set(hot["rules"]) == {"modified_z", "delta_c"}
    assert hot["delta"] == pytest.approx(20.0, abs=3.0)
    assert "node040 GPU 7 temp_c" in hot["reason"] and "above the peer median" in hot["reason"]
    assert ot.outlier_nodes(found) == ["node040"]


def test_no_hot_gpu_no_outlier_and_thresholds_configurable():
    trace = ot.synthetic_trace(nodes=8, gpus_per_node=8, samples=60, seed=4)
    assert ot.find_outliers(trace, max_operating_temp_c=85.0) == []
    warm = ot.synthetic_trace(nodes=8, gpus_per_node=8, samples=60, seed=4, hot=(2, 1, 6.0))
    # 6 °C: below the 10 °C delta; the modified z-score still sees it (peers spread ~1.5 °C).
    found = ot.find_outliers(warm, max_operating_temp_c=85.0)
    assert [(o["node"], o["gpu"], o["rules"]) for o in found] == [("node002", 1, ["modified_z"])]
    assert ot.find_outliers(warm, z_threshold=100.0, delta_c=5.0)[0]["rules"] == ["delta_c"]


def test_max_operating_temperature_rule_uses_hottest_sample():
    records = [{"node": "n%d" % n, "gpu": 0, "temp_c": 70.0 + n * 0.1} for n in range(6) for _sample in range(5)]
    records.append({"node": "n3", "gpu": 0, "temp_c": 82.5})  # one sample within 3 °C of 85
    found = ot.find_outliers(ot.Telemetry.from_records(records), max_operating_temp_c={"n3": 85.0})
    assert [(o["node"], o["rules"]) for o in found] == [("n3", ["max_temp"])]
    assert "82.5 °C within 3.0 °C of the maximum operating 85.0 °C" in found[0]["reason"]


def test_sm_clock_low_side_only():
    records = []
    for n in range(8):
        for _sample in range(4):
            records.append({"node": "n%d" % n, "gpu": 0, "temp_c": 60.0 + n * 0.2,
                            "sm_clock_mhz": 1980.0 + (n % 3) - (400.0 if n == 5 else 0.0)})
    found = ot.find_outliers(ot.Telemetry.from_records(records))
    assert [(o["node"], o["metric"]) for o in found] == [("n5", "sm_clock_mhz")]
    assert found[0]["z"] < -3.5


def test_nvidia_smi_power_csv_fixture(tool_outputs):
    path = tool_outputs / "nvidia-smi-query-power-csv-pkb.txt"
    trace = ot.load_file(str(path), node="pkb-vm")
    assert trace.gpus == [("pkb-vm", 0)]
    power = trace.values["power_w"][0]
    assert power[0] == 16.48 and power[1] == 27.32
    assert "temp_c" not in trace.values
    assert len(power) == sum(1 for line in path.read_text().splitlines()[2:] if line.strip())


def test_jsonl_file_with_injected_hot_reading(tmp_path):
    path = tmp_path / "telemetry.jsonl"
    lines = [{"node": "lab%d" % n, "gpu": 0, "temp_c": 55.0 + n * 0.3, "power_w": 300.0} for n in range(4)
             for _sample in range(10)]
    lines += [{"node": "lab2", "gpu": 0, "temp_c": 80.0}] * 11
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    found = ot.find_outliers(ot.load_file(str(path)))
    assert ot.outlier_nodes(found) == ["lab2"]


def test_dcgm_exporter_scrape():
    # Format of dcgm-exporter's /metrics (default counters: DCGM_FI_DEV_SM_CLOCK, _GPU_TEMP, _POWER_USAGE).
    text = "\n".join([
        "# HELP DCGM_FI_DEV_SM_CLOCK SM clock frequency (in MHz).",
        "# TYPE DCGM_FI_DEV_SM_CLOCK gauge",
        'DCGM_FI_DEV_SM_CLOCK{gpu="0",UUID="GPU-a",device="nvidia0",modelName="NVIDIA H100 80GB HBM3",'
        'Hostname="gpu-017",DCGM_FI_DRIVER_VERSION="550.54.15"} 1980',
        'DCGM_FI_DEV_SM_CLOCK{gpu="1",UUID="GPU-b",device="nvidia1",modelName="NVIDIA H100 80GB HBM3",'
        'Hostname="gpu-017",DCGM_FI_DRIVER_VERSION="550.54.15"} 1755',
        "# HELP DCGM_FI_DEV_GPU_TEMP GPU temperature (in C).",
        "# TYPE DCGM_FI_DEV_GPU_TEMP gauge",
        'DCGM_FI_DEV_GPU_TEMP{gpu="0",UUID="GPU-a",device="nvidia0",Hostname="gpu-017"} 64',
        'DCGM_FI_DEV_GPU_TEMP{gpu="1",UUID="GPU-b",device="nvidia1",Hostname="gpu-017"} 71',
        "# HELP DCGM_FI_DEV_POWER_USAGE Power draw (in W).",
        "# TYPE DCGM_FI_DEV_POWER_USAGE gauge",
        'DCGM_FI_DEV_POWER_USAGE{gpu="0",UUID="GPU-a",device="nvidia0",Hostname="gpu-017"} 512.331',
        'DCGM_FI_DEV_POWER_USAGE{gpu="1",UUID="GPU-b",device="nvidia1",Hostname="gpu-017"} 688.25',
        ""])
    records = ot.parse_dcgm_exporter(text)
    assert records == [
        {"node": "gpu-017", "gpu": 0, "sm_clock_mhz": 1980.0, "temp_c": 64.0, "power_w": 512.331},
        {"node": "gpu-017", "gpu": 1, "sm_clock_mhz": 1755.0, "temp_c": 71.0, "power_w": 688.25}]
    trace = ot.scrape_dcgm(lambda: text, samples=3, interval_s=1, sleep=lambda s: None)
    assert trace.values["temp_c"].shape == (2, 3)
    with pytest.raises(ParseError, match="no DCGM_FI_DEV_GPU_TEMP"):
        ot.parse_dcgm_exporter('DCGM_FI_DEV_SM_CLOCK{gpu="0",Hostname="h"} 1980\n')


def test_no_local_gpu_is_tool_not_found():
    from ansible_collections.symphony.cluster.plugins.module_utils._core.errors import ToolNotFoundError
    with pytest.raises(ToolNotFoundError, match="no GPU telemetry source: nvml"):
        ot.sample_local(1, 0, "lab1")


def test_bad_files_name_the_file_and_line(tmp_path):
    bad = tmp_path / "t.csv"
    bad.write_text("index, temperature.gpu\n0, hot\n")
    with pytest.raises(ParseError, match=r"t.csv line 2: cannot read a number from 'hot'"):
        ot.load_file(str(bad), node="x")
    nogpu = tmp_path / "n.csv"
    nogpu.write_text("temperature.gpu\n50\n")
    with pytest.raises(ParseError, match="no GPU index column"):
        ot.load_file(str(nogpu), node="x")
    with pytest.raises(ParseError, match="cannot read telemetry file"):
        ot.load_file(str(tmp_path / "missing.jsonl"))
