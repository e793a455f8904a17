"""Each seeded defect changes exactly what it names, and the files are validated with clear errors."""

import pytest

from ansible_collections.symphony.cluster.plugins.module_utils._core.errors import ValidationError

from symphony_emulator.config import DEFECT_KINDS, faults_for, load_defects, load_faults
from symphony_emulator.resources import ROOT


def test_missing_gpu_slot_reported_absent(make_bmc):
    bmc, c = make_bmc([{"kind": "missing_gpu", "index": 5}])
    dev = c.get(bmc.spec.C + "/PCIeDevices/GPU5").json()
    assert dev["Status"] == {"State": "Absent"} and "Model" not in dev
    assert c.get(bmc.spec.C + "/PCIeDevices/GPU4").json()["Status"]["State"] == "Enabled"
    temps = [t["Name"] for t in c.get(bmc.spec.C + "/Thermal").json()["Temperatures"]]
    assert "GPU5 Temp" not in temps and "GPU4 Temp" in temps


def test_wrong_gpu_model_and_pcie_downtrain(make_bmc):
    bmc, c = make_bmc([{"kind": "wrong_gpu_model", "index": 2, "model": "H100 PCIe"},
                       {"kind": "pcie_downtrain", "index": 3, "width": 8, "gen": 4}])
    assert c.get(bmc.spec.C + "/PCIeDevices/GPU2").json()["Model"] == "H100 PCIe"
    link = c.get(bmc.spec.C + "/PCIeDevices/GPU3").json()["PCIeInterface"]
    assert link == {"PCIeType": "Gen4", "MaxPCIeType": "Gen5", "LanesInUse": 8, "MaxLanes": 16}


def test_missing_dimm(make_bmc):
    bmc, c = make_bmc([{"kind": "missing_dimm", "index": 7}])
    mem = bmc.spec.sku["bom"]["memory"]
    assert c.get(bmc.spec.S + "/Memory/DIMM7").json()["Status"] == {"State": "Absent"}
    total = c.get(bmc.spec.S).json()["MemorySummary"]["TotalSystemMemoryGiB"]
    assert total == mem["total_gib"] - mem["dimm_size_gib"]


def test_serial_mismatch(make_bmc):
    bmc, c = make_bmc([{"kind": "serial_mismatch", "serial": "S000WRONG"}])
    assert c.get(bmc.spec.C).json()["SerialNumber"] == "S000WRONG"
    assert bmc.spec.node["serial"] != "S000WRONG"


def test_firmware_drift_changes_every_member_of_the_component(make_bmc):
    bmc, c = make_bmc([{"kind": "firmware_drift", "component": "bmc", "version": "01.00.26"}])
    assert c.get(ROOT + "/UpdateService/FirmwareInventory/BMC").json()["Version"] == "01.00.26"
    assert c.get(bmc.spec.M).json()["FirmwareVersion"] == "01.00.26"
    nic = next(comp for comp in bmc.spec.sku["firmware"] if comp["kind"] == "nic")
    bmc2, c2 = make_bmc([{"kind": "firmware_drift", "component": nic["id"], "version": "28.36.1010"}])
    for fid in nic["match"]["ids"]:
        assert c2.get(ROOT + "/UpdateService/FirmwareInventory/" + fid).json()["Version"] == "28.36.1010"


def test_bios_drift(make_bmc):
    bmc, c = make_bmc()
    name, value = next(iter(bmc.spec.sku["bios"]["attributes"].items()))
    bmc, c = make_bmc([{"kind": "bios_drift", "attribute": name, "value": "Drifted"}])
    assert c.get(bmc.spec.S + "/Bios").json()["Attributes"][name] == "Drifted" != value


def test_sel_critical_entry(make_bmc):
    bmc, c = make_bmc([{"kind": "sel_critical", "message": "Uncorrectable ECC on DIMM A1"}])
    entries = c.get(bmc.spec.M + "/LogServices/SEL/Entries").json()["Members"]
    crit = [e for e in entries if e["Severity"] == "Critical"]
    assert [e["Message"] for e in crit] == ["Uncorrectable ECC on DIMM A1"]
    assert all(e["EntryType"] == "SEL" for e in entries)


def test_psu_and_fan_failed(make_bmc):
    bmc, c = make_bmc([{"kind": "psu_failed", "index": 2}, {"kind": "fan_failed", "index": 3}])
    power = c.get(bmc.spec.C + "/Power").json()
    psu = power["PowerSupplies"][1]
    assert psu["Status"] == {"State": "UnavailableOffline", "Health": "Critical"} and psu["LastPowerOutputWatts"] == 0
    assert power["PowerSupplies"][0]["Status"]["Health"] == "OK"
    fan = c.get(bmc.spec.C + "/Thermal").json()["Fans"][2]
    assert fan["Reading"] == 0 and fan["Status"]["Health"] == "Critical"
    assert c.get(bmc.spec.C + "/ThermalSubsystem/Fans/FAN3").json()["Status"]["Health"] == "Critical"
    assert c.get(bmc.spec.C + "/PowerSubsystem/PowerSupplies/PSU2").json()["Status"]["Health"] == "Critical"
    assert c.get(bmc.spec.C).json()["Status"]["HealthRollup"] == "Critical"


def test_gpu_hot(make_bmc):
    bmc, c = make_bmc([{"kind": "gpu_hot", "index": 4, "temp_c": 93}])
    temp = next(t for t in c.get(bmc.spec.C + "/Thermal").json()["Temperatures"] if t["Name"] == "GPU4 Temp")
    assert temp["ReadingCelsius"] == 93.0 and temp["Status"]["Health"] == "Critical"
    assert c.get(bmc.spec.C + "/Sensors/GPU4_Temp").json()["Reading"] == 93.0


def test_bmc_unreachable_and_wrong_credentials(make_bmc):
    bmc, c = make_bmc([{"kind": "bmc_unreachable"}])
    assert not bmc.reachable()
    assert c.get(ROOT).abort
    # wrong_credentials is applied by the Fleet (the map says one password, the BMC wants another)
    bmc, c = make_bmc()
    assert c.get(ROOT + "/Systems").status == 200
    assert c.request("GET", ROOT + "/Systems", auth=False,
                     headers={"Authorization": "Basic YWRtaW46d3Jvbmc="}).status == 401


def test_defects_file_errors_name_file_host_and_field(tmp_path, demo_twin, real_skus):
    host = sorted(demo_twin.nodes)[0]
    bad = tmp_path / "defects.yml"
    bad.write_text("defects:\n  %s:\n    - {kind: missing_gpu, index: 9}\n" % host)
    with pytest.raises(ValidationError) as err:
        load_defects(str(bad), demo_twin.nodes, real_skus)
    assert str(bad) in str(err.value) and "$.defects.%s[0]" % host in str(err.value) and "index: 9" in str(err.value)
    bad.write_text("defects:\n  %s:\n    - {kind: gpu_melted}\n" % host)
    with pytest.raises(ValidationError, match=r"\.kind: unknown defect kind 'gpu_melted'"):
        load_defects(str(bad), demo_twin.nodes, real_skus)
    bad.write_text("defects:\n  nosuchhost:\n    - {kind: bmc_unreachable}\n")
    with pytest.raises(ValidationError, match="nosuchhost: host is not in the twin"):
        load_defects(str(bad), demo_twin.nodes, real_skus)
    bad.write_text("defects:\n  %s:\n    - {kind: firmware_drift, component: nope, version: '1'}\n" % host)
    with pytest.raises(ValidationError, match="'nope' is not a firmware id"):
        load_defects(str(bad), demo_twin.nodes, real_skus)
    bad.write_text("defects:\n  %s:\n    - {kind: pcie_downtrain, index: 1, width: 7, gen: 4}\n" % host)
    with pytest.raises(ValidationError, match=r"\$\.width"):
        load_defects(str(bad), demo_twin.nodes, real_skus)


def test_every_defect_kind_loads(demo_twin, real_skus):
    host = sorted(demo_twin.nodes)[0]
    params = {"index": 1, "model": "X", "width": 8, "gen": 4, "serial": "S", "component": "bmc", "version": "1",
              "attribute": "A", "value": "B", "message": "M", "temp_c": 90, "seconds": 5}
    items = [dict({"kind": kind}, **{p: params[p] for p in schema}) for kind, schema in DEFECT_KINDS.items()]
    loaded = load_defects({"defects": {host: items}}, demo_twin.nodes, real_skus)
    assert [d["kind"] for d in loaded[host]] == list(DEFECT_KINDS)


def test_faults_file_merge_and_errors(tmp_path):
    path = tmp_path / "faults.yml"
    path.write_text("faults:\n  '*': {latency_ms: 5, page_size: 10}\n  node-a: {page_size: 3, overlapping_pages: true}\n")
    faults = load_faults(str(path))
    assert faults_for(faults, "node-a")["page_size"] == 3 and faults_for(faults, "node-a")["latency_ms"] == 5
    assert faults_for(faults, "node-b")["page_size"] == 10 and not faults_for(faults, "node-b")["overlapping_pages"]
    path.write_text("faults:\n  node-a: {error_rate: 1.5}\n")
    with pytest.raises(ValidationError, match=r"\$\.faults\.node-a\.error_rate"):
        load_faults(str(path))
    path.write_text("faults:\n  node-a: {etag: sometimes}\n")
    with pytest.raises(ValidationError, match=r"faults\.yml: \$\.faults\.node-a\.etag"):
        load_faults(str(path))
