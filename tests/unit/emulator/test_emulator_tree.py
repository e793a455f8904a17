"""The generated resource tree matches twin + SKU, and only uses types the DMTF CSDL defines."""

import re

import pytest

from symphony_emulator.odata import metadata_xml
from symphony_emulator.resources import DEFAULT_GPU_CRIT_C, ROOT


@pytest.fixture(scope="module")
def csdl_namespaces(shared):
    names = set()
    for path in (shared / "reference" / "redfish-csdl").glob("*_v1.xml"):
        names.update(re.findall(r'Namespace="([A-Za-z]+(?:\.v\d+_\d+_\d+)?)"', path.read_text()))
    return names


def _sku_of(make_bmc):
    bmc, client = make_bmc()
    return bmc, client, bmc.spec.sku, bmc.spec.node


def test_system_identity_from_twin_and_sku(make_bmc):
    bmc, client, sku, node = _sku_of(make_bmc)
    system = client.get("%s/Systems/%s" % (ROOT, sku["system"]["system_id"])).json()
    assert system["Manufacturer"] == sku["system"]["manufacturer"] == "Supermicro"
    assert system["Model"] == sku["system"]["model"] == "SYS-821GE-TNHR"
    assert system["SerialNumber"] == node["serial"]
    assert system["ProcessorSummary"]["Count"] == sku["bom"]["cpus"]["count"]
    assert system["MemorySummary"]["TotalSystemMemoryGiB"] == sku["bom"]["memory"]["total_gib"]
    chassis = client.get(bmc.spec.C).json()
    assert chassis["SerialNumber"] == node["serial"]
    assert chassis["Location"]["Placement"]["Rack"] == node["rack"]


def test_gpus_follow_redfish_location(make_bmc):
    bmc, client, sku, _node = _sku_of(make_bmc)
    gpus = sku["bom"]["gpus"]
    assert gpus["redfish_location"] == "pcie_devices"   # Supermicro: GPU1..8 under Chassis/1/PCIeDevices
    members = [m["@odata.id"] for m in client.get(bmc.spec.C + "/PCIeDevices").json()["Members"]]
    gpu_uris = [m for m in members if m.rsplit("/", 1)[-1].startswith("GPU")]
    assert len(gpu_uris) == gpus["count"] == 8
    dev = client.get(gpu_uris[0]).json()
    assert dev["Model"] == gpus["model"]
    assert dev["PCIeInterface"] == {"PCIeType": "Gen%d" % gpus["pcie"]["gen"], "MaxPCIeType": "Gen%d" % gpus["pcie"]["gen"],
                                    "LanesInUse": gpus["pcie"]["width"], "MaxLanes": gpus["pcie"]["width"]}
    fn = client.get(gpu_uris[0] + "/PCIeFunctions/1").json()
    assert fn["VendorId"] == "0x10de" and fn["DeviceClass"] == "DisplayController"
    procs = client.get(bmc.spec.S + "/Processors").json()
    assert procs["Members@odata.count"] == sku["bom"]["cpus"]["count"]   # no GPU Processors for this SKU


def test_gpus_as_processors_for_dgx(make_bmc, real_skus, demo_twin):
    node = dict(demo_twin.nodes[sorted(demo_twin.nodes)[0]], sku="dgx_h100")
    twin = type(demo_twin)(demo_twin.path, {node["hostname"]: node}, demo_twin.sites, demo_twin.sku_dir)
    bmc, client = make_bmc(twin=twin, host=node["hostname"])
    members = [m["@odata.id"] for m in client.get("/redfish/v1/Systems/DGX/Processors").json()["Members"]]
    gpus = [client.get(m).json() for m in members if "GPU" in m]
    assert len(gpus) == 8
    assert {g["Model"] for g in gpus} == {"H100 80GB HBM3"}
    assert {g["ProcessorType"] for g in gpus} == {"GPU"}
    assert gpus[0]["SystemInterface"]["PCIe"]["LanesInUse"] == 16


def test_firmware_inventory_uses_literal_match_ids_and_target_versions(make_bmc):
    bmc, client, sku, _node = _sku_of(make_bmc)
    inv = client.get(ROOT + "/UpdateService/FirmwareInventory").json()
    ids = [m["@odata.id"].rsplit("/", 1)[-1] for m in inv["Members"]]
    expected = []
    for comp in sku["firmware"]:
        expected.extend(comp["match"].get("ids") or [comp["id"]])
    assert ids == expected
    for comp in sku["firmware"]:
        fid = (comp["match"].get("ids") or [comp["id"]])[0]
        item = client.get(ROOT + "/UpdateService/FirmwareInventory/" + fid).json()
        assert item["Version"] == comp.get("target", comp["accepted"][0]), fid
    manager = client.get(bmc.spec.M).json()
    bmc_comp = next(c for c in sku["firmware"] if c["id"] == "bmc")
    assert manager["FirmwareVersion"] == bmc_comp.get("target", bmc_comp["accepted"][0])


def test_bios_attributes_and_settings_object(make_bmc):
    bmc, client, sku, _node = _sku_of(make_bmc)
    bios = client.get(bmc.spec.S + "/Bios").json()
    assert bios["Attributes"] == sku["bios"]["attributes"]
    assert bios["@Redfish.Settings"]["SettingsObject"]["@odata.id"] == sku["bios"]["settings_path"]
    pending = client.get(sku["bios"]["settings_path"]).json()
    assert pending["Attributes"] == sku["bios"]["attributes"]
    reg_uri = client.get(ROOT + "/Registries/BiosAttributeRegistry").json()["Location"][0]["Uri"]
    registry = client.get(reg_uri).json()
    names = {a["AttributeName"] for a in registry["RegistryEntries"]["Attributes"]}
    assert names == set(sku["bios"]["attributes"])


def test_nics_psus_fans_sensors_counts(make_bmc):
    bmc, client, sku, _node = _sku_of(make_bmc)
    bom = sku["bom"]
    adapters = client.get(bmc.spec.C + "/NetworkAdapters").json()
    assert adapters["Members@odata.count"] == sum(n["count"] for n in bom["nics"])
    first = client.get(adapters["Members"][0]["@odata.id"]).json()
    port = client.get(first["Ports"]["@odata.id"] + "/1").json()
    assert port["CurrentSpeedGbps"] == bom["nics"][0]["speed_gbps"]
    power = client.get(bmc.spec.C + "/Power").json()
    assert len(power["PowerSupplies"]) == bom["psus"]["count"]
    thermal = client.get(bmc.spec.C + "/Thermal").json()
    assert len(thermal["Fans"]) == bom["fans"]["min_count"]
    gpu_temps = [t for t in thermal["Temperatures"] if t["Name"].startswith("GPU")]
    assert len(gpu_temps) == bom["gpus"]["count"]
    crit = bom["gpus"].get("max_operating_temp_c", DEFAULT_GPU_CRIT_C)
    assert all(t["UpperThresholdCritical"] == crit for t in gpu_temps)
    sensors = client.get(bmc.spec.C + "/Sensors").json()
    assert sensors["Members@odata.count"] == len(thermal["Temperatures"]) + len(thermal["Fans"]) + 1
    drives = client.get(bmc.spec.C + "/Drives").json()
    assert drives["Members@odata.count"] == bom["nvme"]["count"]
    drive = client.get(drives["Members"][0]["@odata.id"]).json()
    assert drive["Model"] == bom["nvme"]["model"] and drive["Protocol"] == "NVMe"


@pytest.mark.parametrize("sku_name", ["hgx_h100_supermicro", "dgx_h100", "gb200_nvl_tray", "cray_ex235a"])
def test_every_type_and_link_exists(make_bmc, real_skus, demo_twin, csdl_namespaces, sku_name):
    node = dict(demo_twin.nodes[sorted(demo_twin.nodes)[0]], sku=sku_name)
    twin = type(demo_twin)(demo_twin.path, {node["hostname"]: node}, demo_twin.sites, demo_twin.sku_dir)
    bmc, client = make_bmc(twin=twin, host=node["hostname"])
    tree = bmc.tree
    assert len(tree) > 50
    for uri, body in tree.items():
        kind = body["@odata.type"][1:]
        namespace = kind.rsplit(".", 1)[0]
        assert namespace in csdl_namespaces, (uri, kind)
        for value in _links(body):
            path = value.split("#", 1)[0]
            if path.startswith(ROOT + "/TaskService/Tasks") or path.startswith(ROOT + "/SessionService/Sessions"):
                continue
            assert path in tree, (uri, value)
    assert "Processor_v1.xml" in metadata_xml(tree)


def _links(node):
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "@odata.id" and isinstance(value, str):
                yield value
            else:
                yield from _links(value)
    elif isinstance(node, list):
        for item in node:
            yield from _links(item)
