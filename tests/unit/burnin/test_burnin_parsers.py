"""Every burn-in tool-output sample in ../shared/fixtures/tool-outputs parsed, asserting what a person reads in it;
every parsing case P-C1..P-C3, P-C5, P-C6, P-C10, P-C11 of ../shared/cases/parsing-cases.md (P-C4 is the fabric
area's)."""

import json

import jsonschema
import pytest

from ansible_collections.symphony.cluster.plugins.module_utils._core.errors import ParseError
from ansible_collections.symphony.cluster.plugins.module_utils._host.parsers import dcgm as _dcgm
from ansible_collections.symphony.cluster.plugins.module_utils._host.parsers import fio as _fio
from ansible_collections.symphony.cluster.plugins.module_utils._host.parsers import gpu_burn as _gpu_burn
from ansible_collections.symphony.cluster.plugins.module_utils._host.parsers import ibstat as _ibstat
from ansible_collections.symphony.cluster.plugins.module_utils._host.parsers import kmsg as _kmsg
from ansible_collections.symphony.cluster.plugins.module_utils._host.parsers import nvidia_smi as _nvidia_smi
from ansible_collections.symphony.cluster.plugins.module_utils._host.parsers import power_csv as _power_csv
from ansible_collections.symphony.cluster.plugins.module_utils._host.parsers import rocm_smi as _rocm_smi
from ansible_collections.symphony.cluster.plugins.module_utils._host.parsers import stress_ng as _stress_ng
from ansible_collections.symphony.cluster.plugins.module_utils._host.parsers import xid as _xid
from ansible_collections.symphony.cluster.plugins.module_utils._host.parsers import lspci as _lspci


# ---------------------------------------------------------------- P-C1 dcgmi diag 3.x
def test_pc1_dcgm_3x_preamble_nulls_and_gpu_ids(tool_text):
    out = _dcgm.parse_dcgm_diag(tool_text("dcgmi-diag-3.1.0-preamble-and-nulls-dcgm.json.txt"))
    assert out["layout"] == "3.x" and out["version"] == "3.1.0"
    assert out["preamble"] == "WARNING: THIS SHOULD NOT HAPPEN"
    names = [t["name"] for t in out["tests"]]
    # 9 Deployment tests (nulls between them skipped) + the Custom "software" test
    assert names[:3] == ["Denylist", "NVML Library", "CUDA Main Library"] and names[-1] == "software"
    assert len(names) == 10 and None not in names
    deployment = out["tests"][0]["results"][0]
    assert deployment["gpu_ids"] == [0, 1, 2, 3, 4, 5, 6, 7] and deployment["status"] == "pass"   # "0,1,...,7"
    software = out["tests"][-1]
    assert [r["gpu_ids"] for r in software["results"]] == [[i] for i in range(8)]                  # int 0..7
    assert out["counts"]["pass"] == 10 and out["verdict"] == "pass"


def test_pc1_status_compared_case_insensitively():
    doc = {"DCGM GPU Diagnostic": {"test_categories": [{"category": "Hardware", "tests": [
        {"name": "memory", "results": [
            {"gpu_ids": "0", "status": "PASS"},
            {"gpu_ids": "1", "status": "FAIL", "warnings": [{"warning": "DBE on GPU 1", "error_id": 83}]}]},
        {"name": "pcie", "results": [{"gpu_ids": "0,1", "status": "SKIP"}]},
        {"name": "diagnostic", "results": [{"gpu_ids": "0,1", "status": "Warn", "warnings": ["SM clocks low"]}]},
    ]}], "version": "3.3.5"}}
    out = _dcgm.parse_dcgm_diag(json.dumps(doc))
    assert {t["name"]: t["status"] for t in out["tests"]} == {"memory": "fail", "pcie": "skip", "diagnostic": "warn"}
    assert out["tests"][0]["results"][1]["warnings"] == [{"message": "DBE on GPU 1", "error_id": 83}]
    assert out["verdict"] == "fail"


# ---------------------------------------------------------------- P-C2 dcgmi diag 4.x
def _v4_document():
    """A DCGM 4.x document (constructed values) in the layout of NVIDIA's dcgm_diag_schema.json."""
    return {
        "DCGM Diagnostic": {"test_categories": [
            {"category": "Deployment", "tests": [
                {"name": "software", "results": [{"entity_group": "GPU", "entity_group_id": 1, "entity_id": 0,
                                                  "status": "Pass"}], "test_summary": {"status": "Pass"}}]},
            {"category": "Hardware", "tests": [
                {"name": "memory", "results": [
                    {"entity_group": "GPU", "entity_group_id": 1, "entity_id": 0, "status": "Pass"},
                    {"entity_group": "GPU", "entity_group_id": 1, "entity_id": 1, "status": "Warn",
                     "warnings": [{"warning": "row remap pending", "error_id": 91, "error_category": 3,
                                   "error_severity": 1}]}],
                 "test_summary": {"status": "Warn"}},
                {"name": "memtest", "results": [], "test_summary": {"status": "Not Run"}}]}]},
        "entity_groups": [{"entity_group": "GPU", "entity_group_id": 1, "entities": [
            {"entity_id": 0, "device_id": "2330", "serial_num": "1650124014249"},
            {"entity_id": 1, "device_id": "2330", "serial_num": "1650124014250"}]}],
        "metadata": {"version": "4.2.3", "Driver Version Detected": "570.124.06"},
    }


def test_pc2_dcgm_4x_layout_follows_the_real_schema(tool_text):
    schema = json.loads(tool_text("dcgmi-diag-4x-json-schema-dcgm.json.txt"))
    # What a person reads in the schema: the 4.x top key and required keys, which the parser relies on.
    assert schema["required"] == ["DCGM Diagnostic"]
    test_schema = schema["properties"]["DCGM Diagnostic"]["properties"]["test_categories"]["items"][
        "properties"]["tests"]["items"]
    assert tuple(test_schema["required"]) == _dcgm.V4_TEST_KEYS
    assert tuple(test_schema["properties"]["results"]["items"]["required"]) == _dcgm.V4_RESULT_KEYS
    doc = _v4_document()
    jsonschema.Draft7Validator(schema).validate(doc)   # the constructed document is a valid 4.x document
    out = _dcgm.parse_dcgm_diag("\n" + json.dumps(doc))
    assert out["layout"] == "4.x" and out["version"] == "4.2.3" and out["driver_version"] == "570.124.06"
    assert {t["name"]: t["status"] for t in out["tests"]} == {"software": "pass", "memory": "warn",
                                                              "memtest": "not_run"}
    assert out["tests"][1]["results"][1]["gpu_ids"] == [1]
    assert out["gpus"][1]["serial"] == "1650124014250"
    assert out["verdict"] == "warn"          # a Warn is a warning, not a failure


def test_pc2_unsupported_gpu_document_without_tests_is_not_run():
    text = ('Error: Unable to run diagnostic on unsupported GPU 0.\n'
            '{"DCGM GPU Diagnostic":{"version":"4.2.3"}}')
    out = _dcgm.parse_dcgm_diag(text)
    assert out["tests"] == [] and out["verdict"] == "not_run"
    assert out["preamble"] == "Error: Unable to run diagnostic on unsupported GPU 0."


def test_pc2_runtime_error_is_captured():
    out = _dcgm.parse_dcgm_diag('{"DCGM Diagnostic": {"runtime_error": "Couldn\'t start the host engine"},'
                                ' "metadata": {"version": "4.1.0"}}')
    assert out["runtime_error"] == "Couldn't start the host engine" and out["verdict"] == "not_run"


@pytest.mark.parametrize("text, missing", [
    ('{"something": {}}', "neither 'DCGM Diagnostic' nor 'DCGM GPU Diagnostic'"),
    ('WARNING only, no json', "no JSON document"),
    ('{"DCGM GPU Diagnostic": {"test_categories": [{"tests": [{"name": "x", "results": '
     '[{"gpu_ids": "0", "status": "MAYBE"}]}]}]}}', "unknown status 'MAYBE'"),
    ('{"DCGM GPU Diagnostic": {"test_categories": [', "malformed or truncated"),
])
def test_dcgm_malformed_raises_typed_error(text, missing):
    with pytest.raises(ParseError) as err:
        _dcgm.parse_dcgm_diag(text)
    assert err.value.where == "dcgmi diag" and missing in err.value.message


# ---------------------------------------------------------------- P-C3 nvidia-smi -q -x
def test_pc3_a100_v12_mig_units_and_na(tool_text):
    out = _nvidia_smi.parse_nvidia_smi_xml(tool_text("nvidia-smi-q-x-a100-sxm4-80gb-mig-v12.xml.txt"))
    assert (out["driver_version"], out["cuda_version"], out["dtd"]) == ("535.54.03", "12.2", "v12")
    assert out["attached_gpus"] == 4 and len(out["gpus"]) == 1          # never assume they agree
    gpu = out["gpus"][0]
    assert gpu["pci_bus_id"] == "00000000:01:00.0" and gpu["product_name"] == "NVIDIA A100-SXM4-80GB"
    assert gpu["serial"] == "1650522003820" and gpu["uuid"] == "GPU-513536b6-7d19-9063-b049-1e69664bb298"
    assert gpu["temp_c"] == 27.0 and gpu["memory_temp_c"] == 44.0 and gpu["temp_shutdown_c"] == 92.0
    assert gpu["power_draw_w"] == 67.03 and gpu["power_limit_w"] == 500.0
    assert gpu["fb_total_mib"] == 81920.0 and gpu["sm_clock_mhz"] == 1275.0 and gpu["max_sm_clock_mhz"] == 1410.0
    assert gpu["pcie"] == {"gen_current": 4, "gen_max": 4, "width_current": 16, "width_max": 16,
                           "replay_counter": 0}
    assert gpu["mig_mode"] == "Enabled" and gpu["mig_devices"] == 4
    assert gpu["remapped_rows"] is None and gpu["retired_pages"] is None      # N/A under MIG
    assert gpu["ecc"]["mode"] == "Enabled" and gpu["ecc_uncorrectable_volatile"] == 0
    assert gpu["throttle_reasons"]["hw_power_brake_slowdown"] is False and gpu["active_throttle"] == []


def test_pc3_rtx4000_v13_instant_power_and_remapped_rows(tool_text):
    out = _nvidia_smi.parse_nvidia_smi_xml(tool_text("nvidia-smi-q-x-rtx4000-ada-v13.xml.txt"))
    assert (out["driver_version"], out["dtd"], out["attached_gpus"]) == ("595.84", "v13", 1)
    gpu = out["gpus"][0]
    assert gpu["product_name"] == "NVIDIA RTX 4000 SFF Ada Generation"
    assert gpu["power_draw_w"] == 8.44 and gpu["power_limit_w"] == 70.0     # instant_power_draw in v13
    assert gpu["temp_c"] == 38.0 and gpu["sm_clock_mhz"] == 210.0
    assert gpu["pcie"]["gen_current"] == 1 and gpu["pcie"]["gen_max"] == 4   # idle link downshift
    assert gpu["remapped_rows"] == {"correctable": 0, "uncorrectable": 0, "pending": False, "failure": False}
    assert gpu["ecc"]["mode"] == "Disabled" and gpu["ecc_uncorrectable_volatile"] is None
    assert gpu["active_throttle"] == ["gpu_idle"] and gpu["hardware_throttle"] == []


def test_pc3_v11_names_are_read():
    xml = """<?xml version="1.0" ?><!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v11.dtd"><nvidia_smi_log>
      <driver_version>515.65.01</driver_version><attached_gpus>1</attached_gpus>
      <gpu id="00000000:00:1E.0"><product_name>Tesla T4</product_name>
      <clocks_throttle_reasons><clocks_throttle_reason_hw_thermal_slowdown>Active</clocks_throttle_reason_hw_thermal_slowdown>
      </clocks_throttle_reasons><power_readings><power_draw>27.03 W</power_draw><power_limit>70.00 W</power_limit>
      </power_readings><ecc_errors><volatile><double_bit><device_memory>2</device_memory><total>2</total></double_bit>
      </volatile></ecc_errors></gpu></nvidia_smi_log>"""
    gpu = _nvidia_smi.parse_nvidia_smi_xml(xml)["gpus"][0]
    assert gpu["power_draw_w"] == 27.03 and gpu["power_limit_w"] == 70.0
    assert gpu["hardware_throttle"] == ["hw_thermal_slowdown"] and gpu["ecc_uncorrectable_volatile"] == 2


def test_nvidia_smi_truncated_xml_is_a_parse_error(tool_text):
    text = tool_text("nvidia-smi-q-x-a100-sxm4-80gb-mig-v12.xml.txt")
    with pytest.raises(ParseError) as err:
        _nvidia_smi.parse_nvidia_smi_xml(text[: len(text) // 2])
    assert err.value.where == "nvidia-smi -q -x" and "malformed or truncated" in err.value.message


# ---------------------------------------------------------------- P-C5 fio JSON
def test_pc5_fio_217_usec_keys_and_duplicate_keys(tool_text):
    out = _fio.parse_fio_json(tool_text("fio-2.17-json-pkb-duplicate-keys.json.txt"))
    assert out["version"] == "fio-2.17"
    assert "filename" in out["duplicate_keys"] and "0.00" in out["duplicate_keys"]
    assert out["global_options"]["filename"] == "/dev/disk/by-id/google-pkb-7fb0c9d8-0-data-0-0"
    read_job, write_job = out["jobs"]
    assert read_job["name"] == "rand_16k_read_100%-io-depth-1-num-jobs-2" and read_job["rw"] == "randread"
    assert read_job["read"]["iops"] == pytest.approx(8086.673998)
    assert read_job["read"]["bw_bytes_s"] == 129386 * 1024            # bw is KiB/s
    assert read_job["read"]["p99_us"] == 1352 and read_job["read"]["percentile_source"] == "clat"   # µs in 2.x
    assert read_job["read"]["clat_mean_us"] == pytest.approx(238.357679)
    assert "0" not in read_job["read"]["percentiles_us"]            # "0.00": 0 padding dropped
    assert read_job["write"]["idle"] is True                          # idle direction present with zeros
    assert write_job["write"]["iops"] == pytest.approx(2457.017193) and write_job["write"]["p99_us"] == 2384


def test_pc5_fio_316_ns_keys_lat_percentiles(tool_text):
    out = _fio.parse_fio_json(tool_text("fio-3.16-json-nvme-randrw-superbench.json.txt"))
    assert out["version"] == "fio-3.16" and out["duplicate_keys"] == []
    job = out["jobs"][0]
    assert job["name"] == "rand_read_write" and job["error"] == 0 and job["rw"] == "randrw"
    assert job["read"]["iops"] == pytest.approx(85138.890741) and job["read"]["bw_bytes_s"] == 348743777
    assert job["read"]["percentile_source"] == "lat_ns"                # lat_percentiles=1
    assert job["read"]["p99_us"] == pytest.approx(2244.608)           # 2244608 ns
    assert job["write"]["iops"] == pytest.approx(85066.128925) and job["write"]["p99_us"] == pytest.approx(2072.576)
    assert job["read"]["clat_mean_us"] == pytest.approx(1444.476063469)


def test_pc5_text_before_json_is_skipped(tool_text):
    text = "fio-3.33\nStarting 1 process\n" + tool_text("fio-3.16-json-nvme-randrw-superbench.json.txt")
    out = _fio.parse_fio_json(text)
    assert out["preamble"] == "fio-3.33\nStarting 1 process" and out["jobs"][0]["read"]["iops"] > 85000


@pytest.mark.parametrize("text, missing", [
    ('{"fio version": "fio-3.33"}', "no 'jobs'"),
    ('{"jobs": [{"jobname": "x", "read": {"iops": 1}}]}', "has no iops/bw"),
    ('{"jobs": [{"jobname": "x", "read": {"io', "malformed or truncated"),
])
def test_fio_malformed_raises_typed_error(text, missing):
    with pytest.raises(ParseError) as err:
        _fio.parse_fio_json(text)
    assert err.value.where == "fio" and missing in err.value.message


# ---------------------------------------------------------------- P-C6 XIDs
def test_pc6_xid_119_repeats_deduplicated(tool_text):
    events = _xid.parse_xid_events(tool_text("dmesg-xid-119-gsp-timeout-xe9680-gpud.log.txt"))
    assert len(events) == 5 and {e["xid"] for e in events} == {119}
    assert events[0]["pci"] == "0000:9b:00" and events[0]["pid"] == 2024380 and events[0]["process"] == "nvidia-smi"
    assert events[0]["time"] == "Sun Feb 23 16:24:18 2025"
    findings = _xid.deduplicate(events, gpu_by_pci={"00000000:9B:00.0": 4})
    assert len(findings) == 1
    f = findings[0]
    assert (f["xid"], f["count"], f["gpu"]) == (119, 5, 4)
    assert f["first"] == "Sun Feb 23 16:24:18 2025" and f["last"] == "Sun Feb 23 16:30:13 2025"
    assert f["processes"] == ["nvidia-smi", "cache_mgr_main", "gpud"]
    assert f["severity"] == "fail" and f["action"] == "RESET_GPU" and f["description"] == "GSP RPC timeout"


def test_pc6_constructed_classic_line_and_pci_domain_is_not_the_xid():
    line = "[ 1234.567890] NVRM: Xid (PCI:0000:3b:00): 79, pid=4242, name=python3, GPU has fallen off the bus."
    (event,) = _xid.parse_xid_events(line)
    assert event["xid"] == 79 and event["pci"] == "0000:3b:00" and event["ts_s"] == pytest.approx(1234.56789)
    assert event["detail"] == "GPU has fallen off the bus."
    assert _xid.classify(79)["severity"] == "fail" and _xid.classify(79)["action"] == "RESTART_BM"


def test_pc6_unknown_pid_and_localised_journald_timestamp():
    text = ("Okt 06 17:59:27 gpu07 kernel: NVRM: Xid (PCI:0000:01:00): 79, pid=1122, GPU has fallen off the bus.\n"
            "[ 99.1] NVRM: Xid (PCI:0000:c1:00): 13, pid='<unknown>', name=<unknown>, Graphics Exception\n")
    first, second = _xid.parse_xid_events(text)
    assert first["time"] == "Okt 06 17:59:27" and first["pid"] == 1122 and first["xid"] == 79
    assert second["pid"] is None and second["xid"] == 13
    assert _xid.classify(13)["severity"] == "warn"


@pytest.mark.parametrize("xid", [79, 74, 48, 63, 64, 94, 95, 119])
def test_pc6_case_listed_xids_fail_burn_in(xid):
    assert _xid.classify(xid)["severity"] == "fail"


def test_kmsg_raw_records(tool_text):
    records = _kmsg.parse_kmsg_records(tool_text("kmsg-raw-records-nvswitch-gpud.txt"))
    assert len(records) == 47 and records[0]["seq"] == 3964 and records[-1]["seq"] == 4010
    assert records[0]["message"] == "nvidia-nvswitch2: open (major=510)" and records[0]["level"] == 6
    assert records[0]["ts_s"] == pytest.approx(206.764307)
    assert sum("nvidia-nvswitch" in r["message"] for r in records) == 13
    generic = _kmsg.parse_kernel_log(tool_text("kmsg-raw-records-nvswitch-gpud.txt"))
    assert [r["seq"] for r in generic] == [r["seq"] for r in records]
    assert _xid.events_from_records(records) == []                     # no XID in this capture


def test_hardware_error_scan_finds_mce_and_aer():
    records = _kmsg.parse_kernel_log(
        "[ 10.0] mce: [Hardware Error]: Machine check events logged\n"
        "[ 11.0] pcieport 0000:00:01.0: AER: Uncorrected (Fatal) error received: 0000:3b:00.0\n"
        "[ 12.0] pcieport 0000:00:01.0: AER: Corrected error received: 0000:3b:00.0\n")
    found = _kmsg.scan_hardware_errors(records)
    assert found["mce"]["count"] == 1 and found["aer_uncorrected"]["count"] == 1
    assert found["aer_corrected"]["count"] == 1 and found["aer_uncorrected"]["first"] == "11.0"


# ---------------------------------------------------------------- P-C10 gpu-burn
def test_pc10_gpu_burn_summary_block(tool_text):
    out = _gpu_burn.parse_gpu_burn(tool_text("gpu-burn-8xA100-superbench.txt"))
    assert out["tested"] == 8 and out["faulty"] == []
    assert out["results"] == {str(i): "OK" for i in range(8)}
    assert out["gpus"][0] == {"index": 0, "name": "NVIDIA A100-SXM4-80GB",
                              "uuid": "GPU-b876c63f-396c-f826-5cd0-6b8409990352"}
    assert out["progress_pct"] == 100.0 and out["max_errors"] == [0] * 8
    assert out["max_temp_c"] == [62, 59, 58, 60, 60, 59, 58, 61]
    assert out["last_gflops"][:2] == [16942.0, 17093.0]


def test_pc10_faulty_and_truncated(tool_text):
    text = tool_text("gpu-burn-8xA100-superbench.txt")
    out = _gpu_burn.parse_gpu_burn(text.replace("GPU 3: OK", "GPU 3: FAULTY"))
    assert out["faulty"] == [3] and out["results"]["3"] == "FAULTY"
    with pytest.raises(ParseError) as err:
        _gpu_burn.parse_gpu_burn(text[: text.index("Tested 8 GPUs")])
    assert err.value.where == "gpu-burn" and "Tested N GPUs" in err.value.message
    with pytest.raises(ParseError):
        _gpu_burn.parse_gpu_burn(text[: text.index("GPU 5: OK")])


# ---------------------------------------------------------------- P-C11 stress-ng and power CSV
def test_pc11_stress_ng_metrics_brief(tool_text):
    out = _stress_ng.parse_stress_ng(tool_text("stress-ng-metrics-brief-pkb.txt"))
    assert out["pid"] == 2566 and out["successful"] is True and out["completed_s"] == 5.0
    assert out["stressors"] == [{"name": "context", "bogo_ops": 22429.0, "real_s": 5.0, "usr_s": 5.49, "sys_s": 4.48,
                                 "bogo_ops_per_s_real": 4485.82, "bogo_ops_per_s_cpu": 2249.65}]


def test_pc11_stress_ng_new_metrc_prefix_and_failures():
    text = ("stress-ng: info:  [9358] dispatching hogs: 1 vm\n"
            "stress-ng: metrc: [9358] stressor       bogo ops real time  usr time  sys time   bogo ops/s     bogo ops/s\n"
            "stress-ng: metrc: [9358]                           (secs)    (secs)    (secs)   (real time) (usr+sys time)\n"
            "stress-ng: metrc: [9358] vm                21504      2.01      0.45      0.75     10681.66       17836.48\n"
            "stress-ng: fail:  [9360] vm: detected memory error at 0x7f00 (verify)\n"
            "stress-ng: info:  [9358] unsuccessful run completed in 2.01s\n")
    out = _stress_ng.parse_stress_ng(text)
    assert out["successful"] is False and out["stressors"][0]["bogo_ops_per_s_real"] == 10681.66
    assert out["failures"] == ["vm: detected memory error at 0x7f00 (verify)"]
    with pytest.raises(ParseError) as err:
        _stress_ng.parse_stress_ng("stress-ng: info:  [1] dispatching hogs: 1 cpu\n")
    assert err.value.where == "stress-ng" and "run completed" in err.value.message


def test_pc11_power_csv_units_and_per_gpu_aggregate(tool_text):
    out = _power_csv.parse_query_csv(tool_text("nvidia-smi-query-power-csv-pkb.txt"))
    assert [c["name"] for c in out["columns"]] == ["index", "power.draw", "timestamp"]
    assert out["columns"][1]["unit"] == "W"
    assert out["rows"][0] == {"index": 0, "power.draw": 16.48, "timestamp": "2022/09/28 15:36:51.68"}
    stats = out["per_gpu"]["0"]["power.draw"]
    assert stats["count"] == 91 and stats["min"] == 16.48 and stats["max"] == 73.24
    assert stats["mean"] == pytest.approx(65.689, abs=1e-3)


def test_power_csv_hex_bitmask_and_na():
    out = _power_csv.parse_query_csv("0, 699.10, 71, 1980, 0x0000000000000004\n1, [N/A], 70, 1980, 0x80\n",
                                     header=["index", "power.draw", "temperature.gpu", "clocks.sm",
                                             "clocks_event_reasons.active"])
    assert out["rows"][0]["clocks_event_reasons.active"] == 4 and out["rows"][1]["power.draw"] is None
    assert out["rows"][1]["clocks_event_reasons.active"] == 0x80


# ---------------------------------------------------------------- rocm-smi, ibstat, lspci
def test_rocm_smi_mi100(tool_text):
    out = _rocm_smi.parse_rocm_smi_json(tool_text("rocm-smi-json-MI100-rocm571.json.txt"))
    assert out["driver_version"] == "6.2.4" and len(out["gpus"]) == 6
    card0 = out["gpus"][0]
    assert card0["pci_bus"] == "0000:1E:00.0" and card0["device_id"] == "0x738c"   # "GPU ID" key in 5.7
    assert card0["series"] == "Arcturus GL-XL [Instinct MI100]"
    assert (card0["temp_edge_c"], card0["temp_junction_c"], card0["temp_memory_c"]) == (31.0, 34.0, 30.0)
    assert card0["power_w"] == 39.0 and card0["power_max_w"] == 290.0
    assert card0["vram_total_bytes"] == 34342961152 and card0["pcie_replay_count"] == 0
    assert (card0["pcie_gts"], card0["pcie_width"]) == (8.0, 16)
    assert card0["sclk_mhz"] == 300.0 and card0["mclk_mhz"] == 1200.0
    assert [g["pci_bus"] for g in out["gpus"]][-1] == "0000:49:00.0"


def test_ibstat_down_polling_port(tool_text):
    cas = _ibstat.parse_ibstat(tool_text("ibstat-h100-some-down-polling-gpud.txt"))
    assert len(cas) == 12 and cas[0]["ca"] == "mlx5_0" and cas[0]["type"] == "MT4129"
    assert cas[0]["firmware"] == "28.39.1002" and cas[0]["ports"][0]["rate_gbps"] == 400
    down = [(c["ca"], p["state"], p["physical_state"], p["rate_gbps"]) for c in cas for p in c["ports"]
            if p["state"] != "Active"]
    assert ("mlx5_11", "Down", "Polling", 40) in down and len(down) == 2
    assert {p["link_layer"] for c in cas for p in c["ports"]} == {"Ethernet"}


def test_lspci_link_status():
    text = ("0000:3b:00.0 3D controller: NVIDIA Corporation GH100 [H100 SXM5 80GB] (rev a1)\n"
            "\t\tLnkCap:\tPort #0, Speed 32GT/s, Width x16, ASPM not supported\n"
            "\t\tLnkSta:\tSpeed 16GT/s (downgraded), Width x8 (downgraded)\n")
    (dev,) = _lspci.parse_lspci_vv(text)
    assert (dev["cap_gen"], dev["cap_width"], dev["sta_gen"], dev["sta_width"]) == (5, 16, 4, 8)


def test_nvidia_smi_xml_with_a_mangled_encoding_declaration_is_a_parse_error(tool_outputs):
    """Found by the fuzz test: ``encoding="AUTF-8"`` made ElementTree raise LookupError, not a ParseError."""
    text = (tool_outputs / "nvidia-smi-q-x-a100-sxm4-80gb-mig-v12.xml.txt").read_text()
    mangled = text.replace('encoding="UTF-8"', 'encoding="AUTF-8"', 1).replace("encoding='UTF-8'", "encoding='AUTF-8'", 1)
    assert mangled != text
    with pytest.raises(ParseError, match="malformed"):
        _nvidia_smi.parse_nvidia_smi_xml(mangled)
