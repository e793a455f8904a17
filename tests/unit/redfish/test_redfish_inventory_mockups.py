"""read_inventory() over every captured tree in shared/fixtures/mockups; values as a person reads them."""

import collections

import pytest

from ansible_collections.symphony.cluster.plugins.module_utils._redfish.client import RedfishClient
from ansible_collections.symphony.cluster.plugins.module_utils._redfish.reader import (
    normalise_firmware,
    read_inventory,
)
from ansible_collections.symphony.cluster.plugins.module_utils._redfish.registries import MessageRegistries

from .redfish_mockserver import BASE, MockupBMC

PW = "s3cr3t-Passw0rd"
_CACHE = {}


@pytest.fixture(scope="module")
def read(mockups, shared):
    regs = MessageRegistries(directory=str(shared / "reference" / "redfish-registries"))

    def _read(name, honour_expand=True):
        key = (name, honour_expand)
        if key not in _CACHE:
            with MockupBMC(mockups / name, honour_expand=honour_expand) as bmc:
                with RedfishClient(BASE, "admin", PW, registries=regs) as c:
                    inv = read_inventory(c)
                _CACHE[key] = (inv, c, bmc)
        return _CACHE[key]
    return _read


def present(inv, kind):
    return [c for c in inv.of_kind(kind) if c.state != "Absent"]


def fw(inv, fid):
    return next(f for f in inv.firmware if f.id == fid)


def test_dgx_h100(read):
    inv, c, bmc = read("libredfish-nvidia_viking")
    assert [s["id"] for s in inv.systems] == ["DGX", "HGX_Baseboard_0"]
    dgx = inv.systems[0]
    assert (dgx["manufacturer"], dgx["model"], dgx["serial"], dgx["sku"]) == \
        ("NVIDIA", "DGXH100", "1662923610124", "920-24387-2540-000")
    gpus = inv.of_kind("gpu")
    assert [g.id for g in gpus] == ["GPU_SXM_%d" % i for i in range(1, 9)]
    assert {g.model for g in gpus} == {"H100 80GB HBM3"}
    assert {g.firmware_version for g in gpus} == {"96.00.89.00.01"}
    g1 = gpus[0]
    assert (g1.serial, g1.pcie_width, g1.pcie_gen, g1.pcie_gen_max) == ("1652923003067", 16, 5, 5)
    assert g1.memory_gib == round(81559 / 1024, 2)  # GPU_SXM_1_DRAM_0 CapacityMiB 81559 (HBM)
    assert len(inv.of_kind("nvswitch")) == 4
    assert len(inv.of_kind("cpu")) == 2
    assert len(inv.firmware) == 66
    assert fw(inv, "HGX_FW_GPU_SXM_1").version == "96.00.89.00.01"
    # Systems/DGX/Storage is captured as a collection without Members: incomplete, not empty
    assert any(i["uri"] == "/redfish/v1/Systems/DGX/Storage" and "INCOMPLETE" in i["reason"] for i in inv.incomplete)
    sel = [e for e in inv.sel if e.log == "/redfish/v1/Managers/BMC/LogServices/SEL"]
    assert len(sel) == 75 and sel[0].sensor_type == "Event Logging Disabled" and sel[0].severity == "OK"
    assert inv.bios["settings_object"] == "/redfish/v1/Systems/DGX/Bios/SD"
    assert len(inv.bios["attributes"]) == 223
    assert inv.capabilities["simple_update"]["target"] == "/redfish/v1/UpdateService/Actions/SimpleUpdate"
    # DGX Sensors: count 264 over overlapping pages, no duplicate ids from that chassis
    assert c.warnings == []


def test_dgx_sensors_264_without_expand(read):
    inv, c, bmc = read("libredfish-nvidia_viking", honour_expand=False)
    gets = [r[1] for r in bmc.requests("GET") if r[1].startswith("/redfish/v1/Chassis/DGX/Sensors/")]
    assert len(gets) == 264 and len(set(gets)) == 264
    # with $expand honoured the same tree costs far fewer requests
    inv_e = read("libredfish-nvidia_viking")[0]
    assert inv_e.requests < inv.requests / 5
    assert len(inv_e.readings) == len(inv.readings)


def test_supermicro_hgx_h100(read):
    inv, c, _bmc = read("libredfish-supermicro")
    s = inv.systems[0]
    assert (s["manufacturer"], s["model"], s["serial"]) == ("Supermicro", "SYS-821GE-TNHR", "S889914X3710910")
    gpus = inv.of_kind("gpu")  # no GPU Processors: found as PCIeDevices GPU1..8
    assert [g.id for g in gpus] == ["GPU%d" % i for i in range(1, 9)]
    assert {g.model for g in gpus} == {"H100 80GB HBM3"}
    assert gpus[0].serial == "1652323019599" and gpus[0].pcie_width == 16 and gpus[0].pcie_gen == 5
    assert gpus[0].manufacturer == "NVIDIA" and gpus[0].extra["source"] == "PCIeDevices"
    assert len(inv.firmware) == 106
    # the same GPU firmware reported twice, by the host BMC and by the HGX manager
    assert fw(inv, "GPU1").version == fw(inv, "HGX_FW_GPU_SXM_1").version == "96.00.61.00.01"
    assert fw(inv, "BMC").version == "11.01.01"
    assert len(present(inv, "dimm")) == 32 and len(inv.of_kind("cpu")) == 2
    assert len(inv.of_kind("nic")) == 10 and len(inv.of_kind("psu")) == 8
    nic1 = next(n for n in inv.of_kind("nic") if n.id == "1")
    assert nic1.model == "MCX75310AAS-NEAT" and nic1.firmware_version == "28.37.10.14" and nic1.ports == 1
    assert inv.bios["settings_object"] == "/redfish/v1/Systems/1/Bios/SD"
    assert inv.capabilities["multipart_http_push_uri"] == "/redfish/v1/UpdateService/upload"
    assert inv.capabilities["simple_update"]["transfer_protocols"] == ["HTTP", "HTTPS", "FTP"]  # from ActionInfo
    assert len([e for e in inv.sel if e.log.endswith("/Systems/1/LogServices/Log1")]) == 82
    assert any(r.kind == "temperature" for r in inv.readings)  # legacy Thermal read when Sensors is thin


def test_gb200_tray(read):
    inv = read("libredfish-nvidia_gb200")[0]
    s0, hgx = inv.systems
    assert s0["id"] == "System_0" and s0["manufacturer"] is None and s0["model"] is None
    assert (hgx["id"], hgx["model"], hgx["serial"]) == ("HGX_Baseboard_0", "GB200 NVL", "1643024000315")
    gpus = inv.of_kind("gpu")
    assert [g.id for g in gpus] == ["GPU_0", "GPU_1", "GPU_2", "GPU_3"]
    assert all(g.uri.startswith("/redfish/v1/Systems/HGX_Baseboard_0/") for g in gpus)
    assert len(inv.firmware) == 30
    assert len(inv.of_kind("nvme")) == 18
    assert len(inv.of_kind("dpu")) == 2  # Riser_Slot1/2 BlueField-3 DPU
    assert len(inv.bios["attributes"]) == 403 and inv.bios["settings_object"].endswith("/Bios/Settings")
    assert [c for c in inv.chassis if c["id"] == "HGX_CPU_0"][0]["health"] == "Critical"
    assert inv.health_rollup() == "Critical"


def test_dell_r750(read):
    inv = read("libredfish-dell")[0]
    s = inv.systems[0]
    assert (s["model"], s["serial"], s["sku"]) == ("PowerEdge R750", "CNIVC0014M0388", "F54P1G3")
    gpus = inv.of_kind("gpu")
    assert [(g.id, g.model, g.manufacturer) for g in gpus] == [("Video.Slot.2-1", "NVIDIA H100 PCIe",
                                                               "NVIDIA Corporation")]
    ids = {f.id for f in inv.firmware}
    assert "Installed-159-1.8.2__BIOS.Setup.1-1" in ids
    assert not any(i.startswith("Previous-") for i in ids)
    assert "Current-159-1.8.2__BIOS.Setup.1-1" not in ids  # duplicate of Installed-
    bios = [f for f in inv.firmware if f.name == "BIOS"]
    assert [f.version for f in bios] == ["1.8.2"]  # never also 1.2.4 (Previous-)
    assert fw(inv, "Installed-25227-6.00.30.00__iDRAC.Embedded.1-1").version == "6.00.30.00"
    assert len(inv.sel) == 5 and inv.sel[0].message == "An OEM diagnostic event occurred."
    assert len(present(inv, "dimm")) == 16
    assert inv.bios["supported_apply_times"] == ["OnReset", "AtMaintenanceWindowStart", "InMaintenanceWindowOnReset"]
    assert len(inv.bios["attributes"]) == 455
    assert "ForceRestart" in inv.capabilities["power_actions"]
    assert inv.capabilities["simple_update"]["transfer_protocols"] == ["HTTP", "NFS", "CIFS", "TFTP", "HTTPS"]


def test_cray_ex235a_mi250x(read):
    inv = read("cray-EX235a")[0]
    s = inv.systems[0]
    assert (s["manufacturer"], s["model"], s["serial"]) == ("HPE", "HPE CRAY EX235a", "GE21100074")
    gpus = inv.of_kind("gpu")
    assert sorted(g.id for g in gpus) == ["GPU%d" % i for i in range(8)]
    assert {g.model for g in gpus} == {"AMD INSTINCT MI200 (MCM) OAM LC"}
    assert {g.manufacturer for g in gpus} == {"AMD"}
    assert len(inv.of_kind("cpu")) == 1 and len(inv.firmware) == 14
    # the capture stored a 404 error body for Mezz NetworkAdapters: reported, not empty
    assert any(i["uri"] == "/redfish/v1/Chassis/Mezz1/NetworkAdapters" and "ResourceMissingAtURI" in i["reason"]
               for i in inv.incomplete)


def test_openbmc_stock(read):
    inv = read("cray-OpenBMC-stock")[0]
    assert [s["id"] for s in inv.systems] == ["system"] and inv.systems[0]["power_state"] == "Off"
    assert inv.components == [] and len(inv.firmware) == 1
    assert inv.managers[0]["model"] == "OpenBmc"
    assert inv.capabilities["expand_query"] is None  # ExpandQuery all false
    assert inv.capabilities["multipart_http_push_uri"] == "/redfish/v1/UpdateService/update"
    assert inv.incomplete == []


def test_dmtf_rackmount1(read):
    inv, c, _bmc = read("dmtf-public-rackmount1")
    assert inv.systems[0]["model"] == "3500" and inv.chassis[0]["model"] == "3500RX"
    assert len(inv.of_kind("cpu")) == 2 and len(inv.of_kind("psu")) == 2 and len(inv.of_kind("fan")) == 4
    assert len(inv.firmware) == 3
    assert any("Members@odata.count is 2 but 3" in w for w in c.warnings)  # the spec mockup's own mismatch


def test_bluefield3(read):
    inv = read("libredfish-nvidia_dpu")[0]
    dpu = [d for d in inv.of_kind("dpu") if d.id == "Bluefield"][0]
    assert dpu.model == "BlueField-3 SmartNIC Main Card" and dpu.serial == "MT2423600ANG"
    assert dpu.manufacturer == "https://www.mellanox.com"
    assert len(inv.firmware) == 14 and len(inv.bios["attributes"]) == 28
    # Chassis/Card1/Sensors/p0_temp, p1_temp: Status State Absent (no transceiver), Health Critical, Reading null:
    # an absent sensor has no health
    absent = {r.id: (r.value, r.health) for r in inv.readings if r.id in ("p0_temp", "p1_temp")}
    assert absent == {"p0_temp": (None, None), "p1_temp": (None, None)}


def test_liquid_cooled_server_coolant(read):
    inv = read("dmtf-public-liquid-cooled-server")[0]
    cool = {r.id: r.value for r in inv.readings if r.kind == "coolant_temperature"}
    assert cool["CPU1.SupplyTemperatureCelsius"] == 14.8 and cool["CPU1.ReturnTemperatureCelsius"] == 38.2
    assert cool["CPU1.DeltaTemperatureCelsius"] == 23.4
    amb = [r for r in inv.readings if r.id == "AmbientTemp"][0]
    assert (amb.kind, amb.value, amb.units) == ("temperature", 22.5, "Cel")


def test_cdu_leak_and_coolant(read):
    inv = read("dmtf-public-cooling-unit")[0]
    assert inv.systems == []
    leaks = [r for r in inv.readings if r.kind == "leak"]
    assert {r.id for r in leaks} >= {"Moisture", "Overflow"} and {r.health for r in leaks} == {"OK"}
    kinds = collections.Counter(r.kind for r in inv.readings)
    assert kinds["coolant_flow"] >= 2 and kinds["coolant_temperature"] >= 6
    assert inv.chassis[0]["model"] == "SuperChill 22"


def test_smartnic(read):
    inv = read("dmtf-public-smartnic")[0]
    assert [s["id"] for s in inv.systems] == ["437XR1138R2", "Card1-SoC"]
    assert len(inv.of_kind("dpu")) == 1 and inv.of_kind("dpu")[0].uri.startswith("/redfish/v1/Chassis/Card1/")


def test_firmware_rules_r27_r29():
    items = [
        {"Id": "Installed-159-2.0.0__BIOS.Setup.1-1", "Name": "BIOS", "Version": "2.0.0", "Status": {"State": "Enabled"}},
        {"Id": "Previous-159-1.0.0__BIOS.Setup.1-1", "Name": "BIOS", "Version": "1.0.0", "Status": {"State": "Enabled"}},
        {"Id": "Current-159-2.0.0__BIOS.Setup.1-1", "Name": "BIOS", "Version": "2.0.0"},
        {"Id": "NIC_A", "Name": "NIC", "Version": None}, {"Id": "NIC_B", "Version": "N/A"},
        {"Id": "NIC_C", "Version": ""}, {"Id": "BIOS-Pending", "Version": "3.0", "Status": {"State": "Disabled"}},
    ]
    out = normalise_firmware(items)
    expected = [("Installed-159-2.0.0__BIOS.Setup.1-1", "2.0.0"), ("NIC_A", None), ("NIC_B", None), ("NIC_C", None)]
    assert [(f.id, f.version) for f in out] == expected


def test_unreachable_part_is_incomplete_not_crash(mockups, shared):
    regs = MessageRegistries(directory=str(shared / "reference" / "redfish-registries"))
    with MockupBMC(mockups / "libredfish-dell") as bmc:
        bmc.set("GET", "/redfish/v1/UpdateService/FirmwareInventory?$expand=.($levels=1)", (500, {}, "<html>x</html>"))
        with RedfishClient(BASE, "admin", PW, registries=regs, sleep=lambda s: None, retries=1) as c:
            inv = read_inventory(c)
    assert inv.firmware == [] and len(inv.of_kind("gpu")) == 1
    assert any(i["part"] == "firmware" and "HTTP 500" in i["reason"] for i in inv.incomplete)


def test_cpu_model_from_processor_id_only_when_it_is_a_model_string(read):
    from ansible_collections.symphony.cluster.plugins.module_utils._redfish.read_systems import _model_from_processor_id
    inv = read("libredfish-nvidia_viking")[0]
    cpus = present(inv, "cpu")
    # Systems/DGX/Processors/DevType1_CPU0..1: Model absent, ProcessorId.EffectiveFamily names the part
    assert [(c.id, c.model, c.extra["model_source"]) for c in cpus if "DGX/" in c.uri] == [
        ("DevType1_CPU0", "Intel(R) Xeon(R) Platinum 8480CL", "ProcessorId.EffectiveFamily"),
        ("DevType1_CPU1", "Intel(R) Xeon(R) Platinum 8480CL", "ProcessorId.EffectiveFamily")]
    # a family/model number is not a model: count-only stays
    assert _model_from_processor_id({"ProcessorId": {"EffectiveFamily": "0x06", "EffectiveModel": "0x8F"}}) == \
        (None, None)
    assert _model_from_processor_id({"ProcessorId": {"EffectiveFamily": "143"}}) == (None, None)
    assert _model_from_processor_id({}) == (None, None)
