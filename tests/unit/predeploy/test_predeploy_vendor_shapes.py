"""The audit on minimal Redfish trees built from vendors' documented shapes (issue 15): no false pass, no false
fail, nothing judged on a partial read.

Each tree is written as a "tall" mockup (``<uri>/index.json``), served by the Redfish area's MockupBMC, read by
the real client and reader and judged by the real checks, the same path as a fleet audit.
"""

import copy
import importlib.util
import json
import pathlib

import pytest

from ansible_collections.symphony.cluster.plugins.module_utils._core.gate import FAIL, NOT_RUN, PASS
from ansible_collections.symphony.cluster.plugins.module_utils._predeploy.checks_health import parse_cutoff
from ansible_collections.symphony.cluster.plugins.module_utils._predeploy.graph import check_graph
from ansible_collections.symphony.cluster.plugins.module_utils._predeploy.judge import judge
from ansible_collections.symphony.cluster.plugins.module_utils._predeploy.observe import audit_reader, observe_node
from ansible_collections.symphony.cluster.plugins.module_utils._predeploy.stage import StageSettings

_SERVER = pathlib.Path(__file__).resolve().parents[1] / "redfish" / "redfish_mockserver.py"
PASSWORD = "s3cr3t-Passw0rd"
V1 = "/redfish/v1"
OK = {"State": "Enabled", "Health": "OK"}
ABSENT = {"State": "Absent"}


def _mockserver():
    spec = importlib.util.spec_from_file_location("shapes_redfish_mockserver", _SERVER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SRV = _mockserver()


def ref(uri):
    return {"@odata.id": uri}


def coll(uri, members):
    return {"@odata.id": uri, "Members": [ref(m) for m in members], "Members@odata.count": len(members)}


def blade_tree(nodes=("Node0", "Node1"), gpus=4, absent=()):
    """A blade enclosure: one BMC, ``Systems/<node>`` each with 1 CPU, 2 DIMMs and ``gpus`` GPU processors, its
    own ``Chassis/<node>`` contained by ``Chassis/Enclosure`` (the one serial, the PSUs and fans; DSP0268
    Chassis ``Links.Contains``/``ContainedBy``).  Nodes in ``absent`` have their CPU, DIMMs and GPUs Absent."""
    t = {V1: {"@odata.id": V1 + "/", "RedfishVersion": "1.15.0", "Vendor": "Acme", "Systems": ref(V1 + "/Systems"),
              "Chassis": ref(V1 + "/Chassis"), "Managers": ref(V1 + "/Managers"),
              "UpdateService": ref(V1 + "/UpdateService")}}
    t[V1 + "/Systems"] = coll(V1 + "/Systems", [V1 + "/Systems/" + n for n in nodes])
    t[V1 + "/Chassis"] = coll(V1 + "/Chassis", [V1 + "/Chassis/Enclosure"] + [V1 + "/Chassis/" + n for n in nodes])
    t[V1 + "/Chassis/Enclosure"] = {
        "@odata.id": V1 + "/Chassis/Enclosure", "Id": "Enclosure", "ChassisType": "Enclosure", "SerialNumber": "ENC1",
        "Status": OK, "Thermal": ref(V1 + "/Chassis/Enclosure/Thermal"), "Power": ref(V1 + "/Chassis/Enclosure/Power"),
        "Links": {"Contains": [ref(V1 + "/Chassis/" + n) for n in nodes]}}
    t[V1 + "/Chassis/Enclosure/Thermal"] = {
        "@odata.id": V1 + "/Chassis/Enclosure/Thermal",
        "Temperatures": [{"MemberId": "0", "Name": "Inlet", "ReadingCelsius": 24, "UpperThresholdCritical": 45,
                          "Status": OK}],
        "Fans": [{"MemberId": str(i), "Name": "Fan%d" % i, "Reading": 6000, "ReadingUnits": "RPM", "Status": OK}
                 for i in range(2)]}
    t[V1 + "/Chassis/Enclosure/Power"] = {
        "@odata.id": V1 + "/Chassis/Enclosure/Power",
        "PowerSupplies": [{"MemberId": str(i), "Name": "PSU%d" % i, "Status": OK} for i in range(2)]}
    for n in nodes:
        state = ABSENT if n in absent else OK
        s = V1 + "/Systems/" + n
        t[V1 + "/Chassis/" + n] = {"@odata.id": V1 + "/Chassis/" + n, "Id": n, "ChassisType": "Blade", "Status": OK,
                                   "Links": {"ContainedBy": ref(V1 + "/Chassis/Enclosure")}}
        t[s] = {"@odata.id": s, "Id": n, "Manufacturer": "Acme", "Model": "B2 blade", "PowerState": "On",
                "Status": OK, "Processors": ref(s + "/Processors"), "Memory": ref(s + "/Memory"),
                "Links": {"Chassis": [ref(V1 + "/Chassis/" + n)]},
                "Actions": {"#ComputerSystem.Reset": {
                    "target": s + "/Actions/ComputerSystem.Reset",
                    "ResetType@Redfish.AllowableValues": ["On", "ForceOff", "ForceRestart"]}}}
        procs = [s + "/Processors/CPU0"] + [s + "/Processors/GPU%d" % i for i in range(gpus)]
        t[s + "/Processors"] = coll(s + "/Processors", procs)
        t[s + "/Processors/CPU0"] = {"@odata.id": s + "/Processors/CPU0", "Id": "CPU0", "ProcessorType": "CPU",
                                     "Model": "Xeon 8480", "Status": state}
        for i in range(gpus):
            t[s + "/Processors/GPU%d" % i] = {"@odata.id": s + "/Processors/GPU%d" % i, "Id": "GPU%d" % i,
                                              "ProcessorType": "GPU", "Model": "H100 80GB HBM3", "Status": state}
        dimms = [s + "/Memory/DIMM%d" % i for i in range(2)]
        t[s + "/Memory"] = coll(s + "/Memory", dimms)
        for i, d in enumerate(dimms):
            t[d] = {"@odata.id": d, "Id": "DIMM%d" % i, "CapacityMiB": 32768, "Status": state}
    t[V1 + "/Managers"] = coll(V1 + "/Managers", [V1 + "/Managers/BMC"])
    t[V1 + "/Managers/BMC"] = {"@odata.id": V1 + "/Managers/BMC", "Id": "BMC", "Status": OK}
    t[V1 + "/UpdateService"] = {"@odata.id": V1 + "/UpdateService",
                                "FirmwareInventory": ref(V1 + "/UpdateService/FirmwareInventory")}
    t[V1 + "/UpdateService/FirmwareInventory"] = coll(V1 + "/UpdateService/FirmwareInventory",
                                                      [V1 + "/UpdateService/FirmwareInventory/1"])
    t[V1 + "/UpdateService/FirmwareInventory/1"] = {"@odata.id": V1 + "/UpdateService/FirmwareInventory/1",
                                                    "Id": "1", "Name": "BMC Firmware", "Version": "1.0"}
    return t


MANIFEST = {
    "sku": "acme_b2_node", "schema_version": 1,
    "system": {"manufacturer": "Acme", "model": "B2 blade", "nodes_per_chassis": 2},
    "bom": {"cpus": {"count": 1, "model": "Xeon 8480"}, "memory": {"dimm_count": 2, "total_gib": 64},
            "gpus": {"count": 4, "model": "H100 80GB HBM3"}, "psus": {"count": 2}},
    "firmware": [{"id": "bmc", "match": {"id": "1"}}],
}


def write_tree(root, tree):
    for uri, body in tree.items():
        folder = root / uri.strip("/")
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "index.json").write_text(json.dumps(body))
    return root


def audit(tmp_path, tree, manifest=None, system_id="Node0", script=()):
    """Observe and judge one node on ``tree``; ``script``: ``(method, path, (status, headers, body))`` answers."""
    manifest = MANIFEST if manifest is None else manifest
    node = {"hostname": "n1", "site": "s1", "rack": "r1", "u": 3, "sku": manifest["sku"], "serial": "ENC1",
            "bmc_mac": "aa:bb:cc:dd:ee:ff", "bmc_address": "10.0.0.3"}
    if system_id:
        node["bmc_system_id"] = system_id
    settings = StageSettings(username="admin", password=PASSWORD, retries=0)
    with SRV.MockupBMC(write_tree(tmp_path, tree)) as bmc:
        for method, path, answer in script:
            bmc.set(method, path, answer)
        obs, _warnings = observe_node(node, {"url": SRV.BASE, "source": "map"}, {}, settings,
                                      reader=audit_reader(node, manifest), probe=lambda h, p, t: (True, ""))
    graph = check_graph(manifest, optional=("lease_captured", "address_reserved"))
    results, gate = judge(node, manifest, obs, "run-shapes", graph, parse_cutoff("all"))
    return {r.check: r for r in results}, gate, obs


# 1. several nodes behind one BMC --------------------------------------------------------------------------------

def test_blade_node_with_its_parts_absent_fails_though_the_other_node_is_whole(tmp_path):
    res, gate, _obs = audit(tmp_path, blade_tree(absent=("Node0",)))
    for check in ("cpus", "memory", "gpus"):
        assert res[check].status == FAIL, (check, res[check].reason)
    assert res["gpus"].reason.startswith("expected 4 × H100 80GB HBM3, found 0")
    assert gate.status == FAIL


def test_blade_node_is_counted_on_its_own_system(tmp_path):
    # Node1 is whole and the SKU is per node: 4 GPUs, not the BMC's 8
    res, gate, obs = audit(tmp_path, blade_tree(absent=("Node0",)), system_id="Node1")
    assert [s["id"] for s in obs.inventory.systems] == ["Node1"]
    assert sorted(c["id"] for c in obs.inventory.chassis) == ["Enclosure", "Node1"]
    for check in ("chassis_serial", "system_model", "cpus", "memory", "gpus", "psus", "fans_thermal",
                  "health_rollup", "firmware_inventory", "power_control"):
        assert res[check].status == PASS, (check, res[check].reason)
    assert res["gpus"].observed == {"count": 4, "models": ["H100 80GB HBM3"]}
    assert res["chassis_serial"].reason == "Chassis/Enclosure serial ENC1"


def test_blade_node_named_wrong_is_not_read_as_another(tmp_path):
    res, _gate, _obs = audit(tmp_path, blade_tree(), system_id="Node7")
    assert res["inventory_read"].status == FAIL and "system 'Node7' not found" in res["inventory_read"].reason


# 2. GPUs only through vendor OEM links (HPE iLO 5/6 Chassis Oem.Hpe.Links.Devices -> HpeServerDevice) -----------

def hpe_tree(devices):
    t = blade_tree(nodes=("1",), gpus=0)
    ch = t[V1 + "/Chassis/1"]
    ch["PCIeDevices"] = ref(V1 + "/Chassis/1/PCIeDevices")
    ch["Oem"] = {"Hpe": {"@odata.type": "#HpeServerChassis.v2_3_0.HpeServerChassis",
                         "Links": {"Devices": ref(V1 + "/Chassis/1/Devices")}}}
    t[V1 + "/Chassis/1/PCIeDevices"] = coll(V1 + "/Chassis/1/PCIeDevices", [])
    uris = [V1 + "/Chassis/1/Devices/%d" % i for i in range(len(devices))]
    t[V1 + "/Chassis/1/Devices"] = coll(V1 + "/Chassis/1/Devices", uris)
    for i, (uri, dev) in enumerate(zip(uris, devices)):
        t[uri] = dict({"@odata.id": uri, "@odata.type": "#HpeServerDevice.v2_0_0.HpeServerDevice", "Id": str(i),
                       "Status": OK}, **dev)
    return t


HPE_A100 = {"DeviceType": "GPU", "Name": "NVIDIA A100-PCIE-40GB", "Manufacturer": "NVIDIA",
            "FirmwareVersion": {"Current": {"VersionString": "92.00.25.00.08"}}}
HPE_NIC = {"DeviceType": "Embedded LOM", "Name": "HPE Ethernet 1Gb 4-port 366i Adapter - NIC"}
HPE_BASEBOARD = {"DeviceType": "GPU", "Name": "HGX A100 8-GPU Baseboard"}


def hpe_manifest(count, model=None):
    m = copy.deepcopy(MANIFEST)
    m["system"].pop("nodes_per_chassis")
    m["bom"]["gpus"] = {"count": count, "model": model} if model else {"count": count}
    return m


def test_gpus_found_only_through_the_hpe_oem_device_collection(tmp_path):
    tree = hpe_tree([HPE_A100] * 8 + [HPE_NIC, HPE_BASEBOARD])
    res, _gate, obs = audit(tmp_path, tree, hpe_manifest(8, "A100-PCIE-40GB"), system_id=None)
    assert res["gpus"].status == PASS, res["gpus"].reason
    gpu = obs.inventory.of_kind("gpu")[0]
    assert (gpu.model, gpu.firmware_version, gpu.extra["source"]) == \
        ("NVIDIA A100-PCIE-40GB", "92.00.25.00.08", "Oem.Hpe.Links.Devices")


def test_gpus_present_that_the_sku_does_not_declare_fail(tmp_path):
    res, _gate, _obs = audit(tmp_path, hpe_tree([HPE_A100] * 8), hpe_manifest(0), system_id=None)
    assert res["gpus"].status == FAIL
    assert res["gpus"].reason == "found 8 × NVIDIA A100-PCIE-40GB, SKU declares none"


def test_a_baseboard_typed_gpu_is_no_gpu(tmp_path):
    tree = blade_tree(nodes=("1",), gpus=2)
    tree[V1 + "/Systems/1/Processors/GPU1"]["Model"] = "HGX Baseboard"
    res, _gate, _obs = audit(tmp_path, tree, hpe_manifest(2), system_id=None)
    assert res["gpus"].status == FAIL and res["gpus"].reason.startswith("expected 2 × GPU, found 1")


# 3. placeholders are unknown ------------------------------------------------------------------------------------

def test_placeholder_gpu_model_falls_back_to_the_pcie_device(tmp_path):
    tree = blade_tree(nodes=("1",), gpus=1)
    gpu = tree[V1 + "/Systems/1/Processors/GPU0"]
    gpu["Model"] = "N/A"
    gpu["Links"] = {"PCIeDevice": ref(V1 + "/Chassis/1/PCIeDevices/GPU0")}
    tree[V1 + "/Chassis/1/PCIeDevices/GPU0"] = {"@odata.id": V1 + "/Chassis/1/PCIeDevices/GPU0", "Id": "GPU0",
                                                "Model": "H100 80GB HBM3",
                                                "PCIeInterface": {"LanesInUse": -1, "MaxLanes": 65535}}
    res, _gate, obs = audit(tmp_path, tree, hpe_manifest(1, "H100 80GB HBM3"), system_id=None)
    assert res["gpus"].status == PASS, res["gpus"].reason
    comp = obs.inventory.of_kind("gpu")[0]
    assert (comp.model, comp.pcie_width, comp.pcie_width_max) == ("H100 80GB HBM3", None, None)


def test_placeholder_port_count_and_zero_date_are_unknown():
    from ansible_collections.symphony.cluster.plugins.module_utils._redfish.read_base import (
        _str, known_count, known_date)
    assert [_str(v) for v in ("N/A", "", "Not Available", None, " unknown ", "H100")] == [None] * 5 + ["H100"]
    assert [known_count(v) for v in (-1, 65535, None, "4", True, 4)] == [None] * 5 + [4]
    assert known_date("0000-00-00T00:00:00Z") is None and known_date("2026-01-01T00:00:00Z")


# 4. a partial read is never judged as complete -------------------------------------------------------------------

def test_sel_stopped_by_the_page_cap_is_not_judged(tmp_path):
    tree = blade_tree(nodes=("1",), gpus=0)
    tree[V1 + "/Managers/BMC"]["LogServices"] = ref(V1 + "/Managers/BMC/LogServices")
    tree[V1 + "/Managers/BMC/LogServices"] = coll(V1 + "/Managers/BMC/LogServices", [V1 + "/Managers/BMC/LogServices/SEL"])
    tree[V1 + "/Managers/BMC/LogServices/SEL"] = {"@odata.id": V1 + "/Managers/BMC/LogServices/SEL", "Id": "SEL",
                                                  "LogEntryType": "SEL",
                                                  "Entries": ref(V1 + "/Managers/BMC/LogServices/SEL/Entries")}
    entries = V1 + "/Managers/BMC/LogServices/SEL/Entries"

    def page(n):
        # every page one OK entry and a link to the next: the Critical one would be past the cap
        return (200, {}, {"@odata.id": entries, "Members@odata.count": 500,
                          "Members": [{"@odata.id": "%s/%d" % (entries, n), "Id": str(n), "Severity": "OK"}],
                          "Members@odata.nextLink": "%s?$skip=%d" % (entries, n + 1)})
    script = [("GET", entries, page(0))] + [("GET", "%s?$skip=%d" % (entries, n), page(n)) for n in range(1, 120)]
    res, _gate, _obs = audit(tmp_path, tree, hpe_manifest(0), system_id=None, script=script)
    assert res["sel_clean"].status == NOT_RUN
    assert "more than 100 pages" in res["sel_clean"].reason
    assert res["cpus"].status == PASS   # the SEL feeds only sel_clean


def test_collection_with_an_error_beside_its_members_is_not_judged(tmp_path):
    tree = blade_tree(nodes=("1",), gpus=2)
    tree[V1 + "/Systems/1/Processors"]["error"] = {"code": "Base.1.8.InternalError", "message": "partial list"}
    res, _gate, _obs = audit(tmp_path, tree, hpe_manifest(2), system_id=None)
    assert res["gpus"].status == NOT_RUN and "partial list" in res["gpus"].reason
    assert res["cpus"].status == NOT_RUN
    assert res["memory"].status == PASS


def test_unreadable_secondary_chassis_blocks_only_what_it_feeds(tmp_path):
    tree = blade_tree(nodes=("1",), gpus=0)
    tree[V1 + "/Chassis"] = coll(V1 + "/Chassis", [V1 + "/Chassis/Enclosure", V1 + "/Chassis/1", V1 + "/Chassis/PSU"])
    script = [("GET", V1 + "/Chassis/PSU", (200, {}, {"error": {"code": "Base.1.8.InternalError",
                                                                "message": "sensor bus timeout"}}))]
    res, gate, _obs = audit(tmp_path, tree, hpe_manifest(0), system_id=None, script=script)
    assert res["inventory_read"].status == PASS
    assert res["psus"].status == NOT_RUN and "InternalError" in res["psus"].reason
    for check in ("cpus", "memory", "system_model", "firmware_inventory", "power_control", "chassis_serial"):
        assert res[check].status == PASS, (check, res[check].reason)
    assert gate.status != PASS


# 5. firmware inventory by Id or Name, SoftwareInventory, none -----------------------------------------------------

def test_firmware_matched_by_name_where_ids_are_numbers(tmp_path):
    m = hpe_manifest(0)
    m["firmware"] = [{"id": "bmc", "match": {"name": "BMC Firmware"}}]
    res, _gate, _obs = audit(tmp_path, blade_tree(nodes=("1",), gpus=0), m, system_id=None)
    assert res["firmware_inventory"].status == PASS, res["firmware_inventory"].reason


def test_software_inventory_used_where_there_is_no_firmware_inventory(tmp_path):
    tree = blade_tree(nodes=("1",), gpus=0)
    tree[V1 + "/UpdateService"] = {"@odata.id": V1 + "/UpdateService",
                                   "SoftwareInventory": ref(V1 + "/UpdateService/FirmwareInventory")}
    res, _gate, _obs = audit(tmp_path, tree, hpe_manifest(0), system_id=None)
    assert res["firmware_inventory"].status == PASS, res["firmware_inventory"].reason


def test_no_firmware_inventory_at_all_is_not_run(tmp_path):
    tree = blade_tree(nodes=("1",), gpus=0)
    tree[V1 + "/UpdateService"] = {"@odata.id": V1 + "/UpdateService"}
    res, _gate, _obs = audit(tmp_path, tree, hpe_manifest(0), system_id=None)
    assert res["firmware_inventory"].status == NOT_RUN
    assert res["firmware_inventory"].reason.startswith("this BMC publishes no firmware inventory")


# 6. Sensors with only power readings do not hide the legacy Thermal temperatures ---------------------------------

def test_power_only_sensors_keep_the_legacy_thermal_temperatures(tmp_path):
    tree = blade_tree(nodes=("1",), gpus=0)
    enc = tree[V1 + "/Chassis/Enclosure"]
    enc["Sensors"] = ref(V1 + "/Chassis/Enclosure/Sensors")
    tree[V1 + "/Chassis/Enclosure/Sensors"] = coll(V1 + "/Chassis/Enclosure/Sensors",
                                                   [V1 + "/Chassis/Enclosure/Sensors/PSU0_Input"])
    tree[V1 + "/Chassis/Enclosure/Sensors/PSU0_Input"] = {
        "@odata.id": V1 + "/Chassis/Enclosure/Sensors/PSU0_Input", "Id": "PSU0_Input", "ReadingType": "Power",
        "ReadingUnits": "W", "Reading": 410, "Status": OK}
    tree[V1 + "/Chassis/Enclosure/Thermal"]["Temperatures"][0]["ReadingCelsius"] = 50
    res, _gate, _obs = audit(tmp_path, tree, hpe_manifest(0), system_id=None)
    assert res["fans_thermal"].status == FAIL and res["fans_thermal"].reason == "Inlet at 50 °C, critical 45 °C"


# 7. URIs from links -----------------------------------------------------------------------------------------------

def test_reset_target_without_a_link_is_joined_without_a_double_slash():
    from ansible_collections.symphony.cluster.plugins.module_utils._redfish.model import NodeInventory
    from ansible_collections.symphony.cluster.plugins.module_utils._redfish.reader import reset_request
    inv = NodeInventory(systems=[{"uri": "/redfish/v1/Systems/1/", "power_state": "On"}])
    assert reset_request(inv) == ("/redfish/v1/Systems/1/Actions/ComputerSystem.Reset", "ForceRestart")


def test_links_in_lower_case_with_trailing_slashes_are_requested_as_given(tmp_path):
    tree = blade_tree(nodes=("1",), gpus=1)
    tree[V1 + "/Systems/1"]["Processors"] = ref(V1 + "/systems/1/processors/")
    tree[V1 + "/systems/1/processors"] = tree.pop(V1 + "/Systems/1/Processors")
    settings_tree = write_tree(tmp_path, tree)
    node = {"hostname": "n1", "sku": "x", "serial": "ENC1"}
    with SRV.MockupBMC(settings_tree) as bmc:
        obs, _w = observe_node(node, {"url": SRV.BASE, "source": "map"}, {},
                               StageSettings(username="admin", password=PASSWORD, retries=0),
                               probe=lambda h, p, t: (True, ""))
        asked = [r[1] for r in bmc.requests("GET")]
    assert any(a.startswith(V1 + "/systems/1/processors/") for a in asked)
    assert len(obs.inventory.of_kind("gpu")) == 1


def test_sku_of_several_nodes_needs_the_twin_to_name_the_system():
    from ansible_collections.symphony.cluster.plugins.module_utils._core.errors import ValidationError
    from ansible_collections.symphony.cluster.plugins.module_utils._predeploy.stage import run_stage
    node = {"hostname": "n1", "sku": MANIFEST["sku"], "serial": "ENC1", "bmc_mac": "aa:bb:cc:dd:ee:ff",
            "bmc_address": "10.0.0.3"}
    with pytest.raises(ValidationError, match="bmc_system_id"):
        run_stage({"n1": node}, {MANIFEST["sku"]: MANIFEST}, StageSettings(username="a", password="b"))


def test_gpu_link_state_from_the_processor_system_interface(tmp_path):
    # DSP0268 Processor v1_8 SystemInterface.PCIe: the link state where no PCIeDevice is linked
    tree = blade_tree(nodes=("1",), gpus=1)
    tree[V1 + "/Systems/1/Processors/GPU0"]["SystemInterface"] = {
        "InterfaceType": "PCIe", "PCIe": {"PCIeType": "Gen5", "MaxPCIeType": "Gen5", "LanesInUse": 8, "MaxLanes": 16}}
    res, _gate, _obs = audit(tmp_path, tree, hpe_manifest(1, "H100 80GB HBM3"), system_id=None)
    assert res["gpu_pcie_links"].status == FAIL
    assert res["gpu_pcie_links"].reason == "PCIe link downtrained: GPU0 at x8 Gen5, expected x16 Gen5"
