"""The Redfish resource tree of one generated BMC, as a pure function of its state.

``build_tree(spec, state)`` returns ``{uri: resource dict}`` for everything except the
time-dependent resources (Tasks, Sessions), which the BMC renders on request.  The tree
is rebuilt after every state change (writes are rare; GETs are served from a byte cache).

Shapes follow DMTF DSP0268 and the CSDL in ``../shared/reference/redfish-csdl``; every
``@odata.type`` used here names a namespace that exists there (a unit test checks it).
Ids follow the SKU (``system.system_id`` / ``chassis_id`` / ``manager_id``, firmware
``match.ids``) so the generated BMC looks like the capture the SKU was written from.
"""

from __future__ import annotations

import hashlib
import uuid

T = {
    "ServiceRoot": "#ServiceRoot.v1_20_0.ServiceRoot",
    "ComputerSystem": "#ComputerSystem.v1_27_0.ComputerSystem",
    "Chassis": "#Chassis.v1_28_0.Chassis",
    "Manager": "#Manager.v1_24_0.Manager",
    "Processor": "#Processor.v1_22_0.Processor",
    "Memory": "#Memory.v1_23_0.Memory",
    "Storage": "#Storage.v1_21_0.Storage",
    "Drive": "#Drive.v1_22_0.Drive",
    "EthernetInterface": "#EthernetInterface.v1_12_4.EthernetInterface",
    "Bios": "#Bios.v1_2_3.Bios",
    "PCIeDevice": "#PCIeDevice.v1_21_0.PCIeDevice",
    "PCIeFunction": "#PCIeFunction.v1_6_0.PCIeFunction",
    "NetworkAdapter": "#NetworkAdapter.v1_14_0.NetworkAdapter",
    "Port": "#Port.v1_18_0.Port",
    "Power": "#Power.v1_7_3.Power",
    "Thermal": "#Thermal.v1_7_3.Thermal",
    "PowerSubsystem": "#PowerSubsystem.v1_1_3.PowerSubsystem",
    "PowerSupply": "#PowerSupply.v1_6_0.PowerSupply",
    "ThermalSubsystem": "#ThermalSubsystem.v1_5_0.ThermalSubsystem",
    "Fan": "#Fan.v1_6_0.Fan",
    "Sensor": "#Sensor.v1_12_0.Sensor",
    "VirtualMedia": "#VirtualMedia.v1_6_5.VirtualMedia",
    "LogService": "#LogService.v1_9_0.LogService",
    "LogEntry": "#LogEntry.v1_21_0.LogEntry",
    "UpdateService": "#UpdateService.v1_17_0.UpdateService",
    "SoftwareInventory": "#SoftwareInventory.v1_13_0.SoftwareInventory",
    "TaskService": "#TaskService.v1_3_0.TaskService",
    "Task": "#Task.v1_7_4.Task",
    "SessionService": "#SessionService.v1_2_0.SessionService",
    "Session": "#Session.v1_8_0.Session",
    "MessageRegistryFile": "#MessageRegistryFile.v1_1_5.MessageRegistryFile",
    "AttributeRegistry": "#AttributeRegistry.v1_4_0.AttributeRegistry",
    "Settings": "#Settings.v1_4_0.Settings",
}

ROOT = "/redfish/v1"
RESET_TYPES = ["On", "ForceOff", "GracefulShutdown", "GracefulRestart", "ForceRestart", "PowerCycle", "Nmi"]
# GPU temperature critical threshold (°C) when the SKU names none: H100 max operating 87 °C
# (../shared/reference/numbers.md §7, "NVIDIA thermal limits", H100 PCIe product brief)
DEFAULT_GPU_CRIT_C = 87.0
BOOT_TARGETS = ["None", "Pxe", "Cd", "Hdd", "Usb", "BiosSetup", "UefiHttp"]


def collection_type(name):
    return "#%sCollection.%sCollection" % (name, name)


def link(uri):
    return {"@odata.id": uri}


def ok_status(health="OK", state="Enabled"):
    return {"State": state, "Health": health}


def _collection(uri, type_name, name, members):
    return {"@odata.id": uri, "@odata.type": collection_type(type_name), "Name": name,
            "Members": [link(m) for m in members], "Members@odata.count": len(members)}


def stable_uuid(*parts):
    return str(uuid.UUID(bytes=hashlib.sha256("|".join(parts).encode()).digest()[:16]))


def _serial(node, prefix, index):
    digest = hashlib.sha256(("%s|%s|%s" % (node["serial"], prefix, index)).encode()).hexdigest()
    return "%s%s" % (prefix, int(digest[:10], 16) % 10 ** 12)


def _mac(node, index):
    digest = hashlib.sha256(("%s|mac|%s" % (node["serial"], index)).encode()).digest()
    return "3c:ec:ef:%02x:%02x:%02x" % (digest[0], digest[1], digest[2])


class Spec:
    """What a BMC is built from: twin node, SKU manifest, defects (read-only after start)."""

    def __init__(self, node, sku, defects=()):
        self.node = node
        self.sku = sku
        self.defects = list(defects)
        system = sku.get("system", {})
        self.system_id = system.get("system_id", "1")
        self.chassis_id = system.get("chassis_id", "1")
        self.manager_id = system.get("manager_id", "1")
        self.S = "%s/Systems/%s" % (ROOT, self.system_id)
        self.C = "%s/Chassis/%s" % (ROOT, self.chassis_id)
        self.M = "%s/Managers/%s" % (ROOT, self.manager_id)
        bios = sku.get("bios") or {}
        settings = bios.get("settings_path") or "Settings"
        if not settings.startswith("/"):
            settings = "%s/Bios/%s" % (self.S, settings.strip("/").split("/")[-1])
        self.bios_settings_uri = settings.rstrip("/")
        self.gpu_location = sku["bom"]["gpus"].get("redfish_location", "processors")
        self.by_kind = {}
        for d in self.defects:
            self.by_kind.setdefault(d["kind"], []).append(d)

    def defect(self, kind, index=None):
        """The last defect of ``kind`` (for ``index`` when given), or None."""
        found = None
        for d in self.by_kind.get(kind, []):
            if index is None or d.get("index") == index:
                found = d
        return found

    def firmware_ids(self, comp):
        """FirmwareInventory member ids for a manifest firmware component."""
        ids = (comp.get("match") or {}).get("ids")
        return list(ids) if ids else [comp["id"]]

    def initial_versions(self):
        """Manifest component id -> version the BMC reports at start (target, else first accepted; drift wins)."""
        out = {}
        for comp in self.sku["firmware"]:
            out[comp["id"]] = comp.get("target") or comp["accepted"][0]
        for d in self.by_kind.get("firmware_drift", []):
            out[d["component"]] = d["version"]
        return out

    def initial_bios(self):
        attrs = dict((self.sku.get("bios") or {}).get("attributes") or {})
        for d in self.by_kind.get("bios_drift", []):
            attrs[d["attribute"]] = d["value"]
        return attrs


def _version_of_kind(spec, state, kind):
    for comp in spec.sku["firmware"]:
        if comp["kind"] == kind:
            return state.versions.get(comp["id"])
    return None


def build_tree(spec, state):
    """Every static resource of one BMC: ``{uri: dict}`` (uris without trailing slash)."""
    t = {}
    node, sku, bom = spec.node, spec.sku, spec.sku["bom"]
    S, C, M = spec.S, spec.C, spec.M
    gpus = bom["gpus"]
    gpu_count = gpus["count"]
    gpu_model = gpus.get("model", "GPU")
    gpu_vendor = {"nvidia": "NVIDIA", "amd": "AMD"}.get(gpus.get("vendor", "nvidia"), "NVIDIA")
    gpu_pcie = gpus.get("pcie") or {"width": 16, "gen": 5}
    gpu_fw = _version_of_kind(spec, state, "gpu")
    serial = (spec.defect("serial_mismatch") or {}).get("serial", node["serial"])
    manufacturer = sku["system"].get("manufacturer")
    model = sku["system"].get("model")
    health_rollup = "OK"

    # ---- ServiceRoot and services
    t[ROOT] = {
        "@odata.id": ROOT, "@odata.type": T["ServiceRoot"], "Id": "RootService", "Name": "Root Service",
        "RedfishVersion": "1.20.0", "UUID": stable_uuid(node["hostname"], "service"),
        "Product": model or "symphony emulated BMC", "Vendor": sku["system"].get("bmc_vendor", "symphony"),
        "Systems": link(ROOT + "/Systems"), "Chassis": link(ROOT + "/Chassis"),
        "Managers": link(ROOT + "/Managers"), "SessionService": link(ROOT + "/SessionService"),
        "UpdateService": link(ROOT + "/UpdateService"), "Tasks": link(ROOT + "/TaskService"),
        "Registries": link(ROOT + "/Registries"),
        "Links": {"Sessions": link(ROOT + "/SessionService/Sessions")},
        "ProtocolFeaturesSupported": {"ExpandQuery": _expand_query(state.faults.get("expand_max_levels", 0)),
                                      "FilterQuery": False, "SelectQuery": False, "OnlyMemberQuery": False},
    }
    t[ROOT + "/SessionService"] = {
        "@odata.id": ROOT + "/SessionService", "@odata.type": T["SessionService"], "Id": "SessionService",
        "Name": "Session Service", "ServiceEnabled": True, "SessionTimeout": int(state.faults["session_timeout_s"]),
        "Sessions": link(ROOT + "/SessionService/Sessions"), "Status": ok_status(),
    }
    t[ROOT + "/TaskService"] = {
        "@odata.id": ROOT + "/TaskService", "@odata.type": T["TaskService"], "Id": "TaskService",
        "Name": "Task Service", "ServiceEnabled": True, "CompletedTaskOverWritePolicy": "Oldest",
        "LifeCycleEventOnTaskStateChange": False, "Tasks": link(ROOT + "/TaskService/Tasks"),
        "Status": ok_status(),
    }

    # ---- Systems
    t[ROOT + "/Systems"] = _collection(ROOT + "/Systems", "ComputerSystem", "Computer System Collection", [S])
    cpu = bom["cpus"]
    mem = bom["memory"]
    dimm_size = mem.get("dimm_size_gib") or (mem["total_gib"] / mem["dimm_count"] if mem["dimm_count"] else 0)
    present_dimms = [i for i in range(1, mem["dimm_count"] + 1) if not spec.defect("missing_dimm", i)]
    boot = state.boot
    system = {
        "@odata.id": S, "@odata.type": T["ComputerSystem"], "Id": spec.system_id, "Name": "System",
        "SystemType": "Physical", "Manufacturer": manufacturer, "Model": model, "SerialNumber": serial,
        "SKU": sku["sku"], "HostName": node["hostname"], "UUID": stable_uuid(node["hostname"], "system"),
        "PowerState": state.power, "BiosVersion": _version_of_kind(spec, state, "bios"),
        "Status": ok_status(), "AssetTag": node.get("asset_tag", ""),
        "Boot": {"BootSourceOverrideEnabled": boot["enabled"], "BootSourceOverrideTarget": boot["target"],
                 "BootSourceOverrideMode": "UEFI", "BootSourceOverrideTarget@Redfish.AllowableValues": BOOT_TARGETS},
        "ProcessorSummary": {"Count": cpu["count"], "Model": cpu["model"]},
        "MemorySummary": {"TotalSystemMemoryGiB": round(dimm_size * len(present_dimms), 3)},
        "Processors": link(S + "/Processors"), "Memory": link(S + "/Memory"), "Storage": link(S + "/Storage"),
        "EthernetInterfaces": link(S + "/EthernetInterfaces"), "Bios": link(S + "/Bios"),
        "Links": {"Chassis": [link(C)], "ManagedBy": [link(M)]},
        "Actions": {"#ComputerSystem.Reset": {"target": S + "/Actions/ComputerSystem.Reset",
                                              "ResetType@Redfish.AllowableValues": RESET_TYPES}},
    }
    if manufacturer is None:
        del system["Manufacturer"]
    if model is None:
        del system["Model"]
    t[S] = system

    procs = []
    for i in range(1, cpu["count"] + 1):
        uri = "%s/Processors/CPU%d" % (S, i)
        procs.append(uri)
        t[uri] = {"@odata.id": uri, "@odata.type": T["Processor"], "Id": "CPU%d" % i, "Name": "CPU%d" % i,
                  "ProcessorType": "CPU", "ProcessorArchitecture": "x86", "InstructionSet": "x86-64",
                  "Manufacturer": "Intel(R) Corporation" if "Intel" in cpu["model"] else "AMD",
                  "Model": cpu["model"], "Socket": "CPU%d" % i, "TotalCores": cpu.get("cores", 32),
                  "TotalThreads": cpu.get("cores", 32) * 2, "SerialNumber": _serial(node, "CPU", i),
                  "Status": ok_status()}
    gpu_temps = {}
    for i in range(1, gpu_count + 1):
        hot = spec.defect("gpu_hot", i)
        gpu_temps[i] = float(hot["temp_c"]) if hot else 38.0 + (i % 4)
    if spec.gpu_location in ("processors", "either"):
        for i in range(1, gpu_count + 1):
            uri = "%s/Processors/GPU_SXM_%d" % (S, i)
            procs.append(uri)
            t[uri] = _gpu_processor(spec, uri, i, gpu_model, gpu_vendor, gpus, gpu_fw, gpu_temps[i])
    t[S + "/Processors"] = _collection(S + "/Processors", "Processor", "Processor Collection", procs)

    dimms = []
    for i in range(1, mem["dimm_count"] + 1):
        uri = "%s/Memory/DIMM%d" % (S, i)
        dimms.append(uri)
        if i not in present_dimms:
            t[uri] = {"@odata.id": uri, "@odata.type": T["Memory"], "Id": "DIMM%d" % i, "Name": "DIMM%d" % i,
                      "Location": _slot("DIMM%d" % i), "Status": {"State": "Absent"}}
            continue
        t[uri] = {"@odata.id": uri, "@odata.type": T["Memory"], "Id": "DIMM%d" % i, "Name": "DIMM%d" % i,
                  "Location": _slot("DIMM%d" % i), "CapacityMiB": int(dimm_size * 1024), "MemoryType": "DRAM",
                  "MemoryDeviceType": "DDR5", "OperatingSpeedMhz": 4800, "Manufacturer": "Samsung",
                  "PartNumber": "M321R8GA0BB0-CQKZJ", "SerialNumber": _serial(node, "DIMM", i),
                  "Status": ok_status()}
    t[S + "/Memory"] = _collection(S + "/Memory", "Memory", "Memory Collection", dimms)

    nvme = bom.get("nvme") or {"count": 0}
    drives = []
    for i in range(1, nvme["count"] + 1):
        uri = "%s/Drives/NVMe%d" % (C, i)
        drives.append(uri)
        t[uri] = {"@odata.id": uri, "@odata.type": T["Drive"], "Id": "NVMe%d" % i, "Name": "NVMe drive %d" % i,
                  "Model": nvme.get("model", "NVMe SSD"), "CapacityBytes": int(nvme.get("capacity_gb", 960) * 10 ** 9),
                  "Protocol": "NVMe", "MediaType": "SSD", "SerialNumber": _serial(node, "NVME", i),
                  "Status": ok_status()}
    t[S + "/Storage"] = _collection(S + "/Storage", "Storage", "Storage Collection", [S + "/Storage/NVMe"])
    t[S + "/Storage/NVMe"] = {"@odata.id": S + "/Storage/NVMe", "@odata.type": T["Storage"], "Id": "NVMe",
                              "Name": "NVMe storage", "Drives": [link(d) for d in drives],
                              "Drives@odata.count": len(drives), "Status": ok_status()}
    t[C + "/Drives"] = _collection(C + "/Drives", "Drive", "Drive Collection", drives)
    t[S + "/EthernetInterfaces"] = _collection(S + "/EthernetInterfaces", "EthernetInterface",
                                               "Ethernet Interface Collection", [S + "/EthernetInterfaces/1"])
    t[S + "/EthernetInterfaces/1"] = {
        "@odata.id": S + "/EthernetInterfaces/1", "@odata.type": T["EthernetInterface"], "Id": "1",
        "Name": "Host interface 1", "MACAddress": _mac(node, "host1"), "SpeedMbps": 10000, "InterfaceEnabled": True,
        "LinkStatus": "LinkUp", "Status": ok_status()}

    # ---- Bios, settings object, attribute registry
    etag_hint = hashlib.md5(repr(sorted(state.bios_pending.items())).encode()).hexdigest()[:16]
    t[S + "/Bios"] = {
        "@odata.id": S + "/Bios", "@odata.type": T["Bios"], "Id": "Bios", "Name": "BIOS Configuration Current Settings",
        "AttributeRegistry": "BiosAttributeRegistry.1.0.0", "Attributes": dict(state.bios),
        "@Redfish.Settings": {"@odata.type": T["Settings"], "SettingsObject": link(spec.bios_settings_uri),
                              "SupportedApplyTimes": ["OnReset"], "ETag": etag_hint},
        "Actions": {"#Bios.ResetBios": {"target": S + "/Bios/Actions/Bios.ResetBios"}},
    }
    pending = dict(state.bios)
    pending.update(state.bios_pending)
    t[spec.bios_settings_uri] = {
        "@odata.id": spec.bios_settings_uri, "@odata.type": T["Bios"], "Id": spec.bios_settings_uri.split("/")[-1],
        "Name": "BIOS Configuration Pending Settings", "AttributeRegistry": "BiosAttributeRegistry.1.0.0",
        "Attributes": pending,
    }
    t[ROOT + "/Registries"] = _collection(ROOT + "/Registries", "MessageRegistryFile", "Registry File Collection",
                                          [ROOT + "/Registries/BiosAttributeRegistry"])
    t[ROOT + "/Registries/BiosAttributeRegistry"] = {
        "@odata.id": ROOT + "/Registries/BiosAttributeRegistry", "@odata.type": T["MessageRegistryFile"],
        "Id": "BiosAttributeRegistry", "Name": "BIOS Attribute Registry File", "Languages": ["en"],
        "Registry": "BiosAttributeRegistry.1.0.0",
        "Location": [{"Language": "en", "Uri": ROOT + "/Registries/BiosAttributeRegistry/BiosAttributeRegistry.json"}],
    }
    t[ROOT + "/Registries/BiosAttributeRegistry/BiosAttributeRegistry.json"] = attribute_registry(spec)

    # ---- Chassis
    t[ROOT + "/Chassis"] = _collection(ROOT + "/Chassis", "Chassis", "Chassis Collection", [C])
    pcie = []
    gpu_dev_uris = {}
    if spec.gpu_location in ("pcie_devices", "either"):
        for i in range(1, gpu_count + 1):
            uri = "%s/PCIeDevices/GPU%d" % (C, i)
            gpu_dev_uris[i] = uri
            pcie.append(uri)
            _pcie_device(t, spec, uri, "GPU%d" % i, i, gpu_model, gpu_vendor, gpu_fw, gpu_pcie, gpu=True)
    nic_index = 0
    adapters = []
    nic_fw = _version_of_kind(spec, state, "nic")
    for group in bom.get("nics") or []:
        for _ in range(group["count"]):
            nic_index += 1
            name = "NIC%d" % nic_index
            uri = "%s/PCIeDevices/%s" % (C, name)
            pcie.append(uri)
            _pcie_device(t, spec, uri, name, nic_index, group["model"], "NVIDIA", nic_fw,
                         group.get("pcie") or {"width": 16, "gen": 5}, gpu=False)
            auri = "%s/NetworkAdapters/%s" % (C, name)
            adapters.append(auri)
            _network_adapter(t, spec, auri, name, nic_index, group, nic_fw)
    t[C + "/PCIeDevices"] = _collection(C + "/PCIeDevices", "PCIeDevice", "PCIe Device Collection", pcie)
    t[C + "/NetworkAdapters"] = _collection(C + "/NetworkAdapters", "NetworkAdapter", "Network Adapter Collection",
                                            adapters)
    psus = dict(bom.get("psus") or {"count": 0})
    if "model" not in psus and psus.get("models"):
        psus["model"] = psus["models"][0]
    fans = max((bom.get("fans") or {}).get("min_count", 0), 0)
    psu_failed = {i for i in range(1, psus["count"] + 1) if spec.defect("psu_failed", i)}
    fan_failed = {i for i in range(1, fans + 1) if spec.defect("fan_failed", i)}
    if psu_failed or fan_failed:
        health_rollup = "Critical"
    tdp = gpus.get("tdp_w", 0)
    on = state.power == "On"
    consumed = round((1200 + gpu_count * tdp * 0.1) if on else 35.0, 1)
    crit_temp = gpus.get("max_operating_temp_c", DEFAULT_GPU_CRIT_C)
    for i, temp in gpu_temps.items():
        if temp >= crit_temp:
            health_rollup = "Critical" if health_rollup == "Critical" else "Warning"
    chassis = {
        "@odata.id": C, "@odata.type": T["Chassis"], "Id": spec.chassis_id, "Name": "Chassis",
        "ChassisType": "RackMount", "Manufacturer": manufacturer or "NVIDIA", "Model": model or sku["sku"],
        "SerialNumber": serial, "PowerState": state.power, "UUID": stable_uuid(node["hostname"], "chassis"),
        "Status": {"State": "Enabled", "Health": health_rollup, "HealthRollup": health_rollup},
        "Location": {"Placement": {"Rack": node["rack"], "RackOffset": node["u"], "RackOffsetUnits": "EIA_310"}},
        "PCIeDevices": link(C + "/PCIeDevices"), "NetworkAdapters": link(C + "/NetworkAdapters"),
        "Power": link(C + "/Power"), "Thermal": link(C + "/Thermal"),
        "PowerSubsystem": link(C + "/PowerSubsystem"), "ThermalSubsystem": link(C + "/ThermalSubsystem"),
        "Sensors": link(C + "/Sensors"), "Drives": link(C + "/Drives"),
        "Links": {"ComputerSystems": [link(S)], "ManagedBy": [link(M)]},
    }
    t[C] = chassis

    # legacy Power / Thermal (what most tools, sushy included, still read)
    supplies, ps_uris = [], []
    for i in range(1, psus["count"] + 1):
        failed = i in psu_failed
        status = {"State": "UnavailableOffline", "Health": "Critical"} if failed else ok_status()
        out_w = 0.0 if failed or not on else round(consumed / max(psus["count"] - len(psu_failed), 1), 1)
        supplies.append({"@odata.id": "%s/Power#/PowerSupplies/%d" % (C, i - 1), "MemberId": str(i - 1),
                         "Name": "PSU%d" % i, "Model": psus.get("model", "PSU"), "Manufacturer": "SUPERMICRO",
                         "SerialNumber": _serial(node, "PSU", i), "PowerCapacityWatts": psus.get("capacity_w", 3000),
                         "LastPowerOutputWatts": out_w, "LineInputVoltage": 0.0 if failed else 230.0,
                         "PowerSupplyType": "AC", "Status": status})
        puri = "%s/PowerSubsystem/PowerSupplies/PSU%d" % (C, i)
        ps_uris.append(puri)
        t[puri] = {"@odata.id": puri, "@odata.type": T["PowerSupply"], "Id": "PSU%d" % i, "Name": "PSU%d" % i,
                   "Model": psus.get("model", "PSU"), "Manufacturer": "SUPERMICRO",
                   "SerialNumber": _serial(node, "PSU", i), "PowerCapacityWatts": psus.get("capacity_w", 3000),
                   "PowerSupplyType": "AC", "Status": status}
    t[C + "/Power"] = {
        "@odata.id": C + "/Power", "@odata.type": T["Power"], "Id": "Power", "Name": "Power",
        "PowerControl": [{"@odata.id": C + "/Power#/PowerControl/0", "MemberId": "0", "Name": "System Power Control",
                          "PowerConsumedWatts": consumed,
                          "PowerCapacityWatts": psus.get("capacity_w", 3000) * max(psus["count"], 1),
                          "Status": ok_status()}],
        "PowerSupplies": supplies,
    }
    t[C + "/PowerSubsystem"] = {
        "@odata.id": C + "/PowerSubsystem", "@odata.type": T["PowerSubsystem"], "Id": "PowerSubsystem",
        "Name": "Power Subsystem", "CapacityWatts": psus.get("capacity_w", 3000) * max(psus["count"], 1),
        "PowerSupplies": link(C + "/PowerSubsystem/PowerSupplies"),
        "Status": {"State": "Enabled", "Health": "Critical" if psu_failed else "OK"},
    }
    t[C + "/PowerSubsystem/PowerSupplies"] = _collection(C + "/PowerSubsystem/PowerSupplies", "PowerSupply",
                                                         "Power Supply Collection", ps_uris)

    temps, fan_list, fan_uris, sensors = [], [], [], []

    def sensor(sid, name, reading, rtype, units, context, status=None, upper=None):
        uri = "%s/Sensors/%s" % (C, sid)
        sensors.append(uri)
        body = {"@odata.id": uri, "@odata.type": T["Sensor"], "Id": sid, "Name": name, "Reading": reading,
                "ReadingType": rtype, "ReadingUnits": units, "PhysicalContext": context,
                "Status": status or ok_status()}
        if upper is not None:
            body["Thresholds"] = {"UpperCritical": {"Reading": upper}}
        t[uri] = body
        return uri

    def temp(name, reading, context, upper, health="OK"):
        idx = len(temps)
        sid = name.replace(" ", "_")
        suri = sensor(sid, name, reading, "Temperature", "Cel", context, ok_status(health), upper)
        temps.append({"@odata.id": "%s/Thermal#/Temperatures/%d" % (C, idx), "MemberId": str(idx), "Name": name,
                      "ReadingCelsius": reading, "UpperThresholdCritical": upper, "PhysicalContext": context,
                      "Status": ok_status(health)})

    temp("Inlet Temp", 24.0, "Intake", 45.0)
    for i in range(1, cpu["count"] + 1):
        temp("CPU%d Temp" % i, 45.0 + i, "CPU", 100.0)
    for i, reading in gpu_temps.items():
        if spec.defect("missing_gpu", i):
            continue
        health = "Critical" if reading >= crit_temp else ("Warning" if reading >= crit_temp - 5 else "OK")
        temp("GPU%d Temp" % i, reading, "GPU", float(crit_temp), health)
    for i in range(1, fans + 1):
        failed = i in fan_failed
        rpm = 0.0 if failed or not on else 8400.0 + 40 * i
        status = ok_status("Critical") if failed else ok_status()
        fan_list.append({"@odata.id": "%s/Thermal#/Fans/%d" % (C, i - 1), "MemberId": str(i - 1),
                         "Name": "FAN%d" % i, "Reading": int(rpm), "ReadingUnits": "RPM",
                         "PhysicalContext": "Fan", "Status": status})
        suri = sensor("FAN%d" % i, "FAN%d" % i, rpm, "Rotational", "RPM", "Fan", status)
        furi = "%s/ThermalSubsystem/Fans/FAN%d" % (C, i)
        fan_uris.append(furi)
        t[furi] = {"@odata.id": furi, "@odata.type": T["Fan"], "Id": "FAN%d" % i, "Name": "FAN%d" % i,
                   "SpeedPercent": {"DataSourceUri": suri, "Reading": 0.0 if failed or not on else 55.0,
                                    "SpeedRPM": rpm},
                   "PhysicalContext": "Fan", "Status": status}
    sensor("TotalPower", "Total Power", consumed, "Power", "W", "PowerSupply")
    t[C + "/Thermal"] = {"@odata.id": C + "/Thermal", "@odata.type": T["Thermal"], "Id": "Thermal",
                         "Name": "Thermal", "Temperatures": temps, "Fans": fan_list}
    t[C + "/ThermalSubsystem"] = {
        "@odata.id": C + "/ThermalSubsystem", "@odata.type": T["ThermalSubsystem"], "Id": "ThermalSubsystem",
        "Name": "Thermal Subsystem", "Fans": link(C + "/ThermalSubsystem/Fans"),
        "Status": {"State": "Enabled", "Health": "Critical" if fan_failed else "OK"}}
    t[C + "/ThermalSubsystem/Fans"] = _collection(C + "/ThermalSubsystem/Fans", "Fan", "Fan Collection", fan_uris)
    t[C + "/Sensors"] = _collection(C + "/Sensors", "Sensor", "Sensor Collection", sensors)

    # ---- Manager, VirtualMedia, SEL
    t[ROOT + "/Managers"] = _collection(ROOT + "/Managers", "Manager", "Manager Collection", [M])
    t[M] = {
        "@odata.id": M, "@odata.type": T["Manager"], "Id": spec.manager_id, "Name": "Manager",
        "ManagerType": "BMC", "FirmwareVersion": _version_of_kind(spec, state, "bmc"),
        "Manufacturer": manufacturer or "NVIDIA", "Model": "%s BMC" % sku["system"].get("bmc_vendor", "emulated"),
        "UUID": stable_uuid(node["hostname"], "manager"), "PowerState": "On", "Status": ok_status(),
        "VirtualMedia": link(M + "/VirtualMedia"), "LogServices": link(M + "/LogServices"),
        "Links": {"ManagerForServers": [link(S)], "ManagerForChassis": [link(C)]},
        "Actions": {"#Manager.Reset": {"target": M + "/Actions/Manager.Reset",
                                       "ResetType@Redfish.AllowableValues": ["ForceRestart", "GracefulRestart"]}},
    }
    t[M + "/VirtualMedia"] = _collection(M + "/VirtualMedia", "VirtualMedia", "Virtual Media Collection",
                                         [M + "/VirtualMedia/CD1"])
    vm = state.virtual_media
    t[M + "/VirtualMedia/CD1"] = {
        "@odata.id": M + "/VirtualMedia/CD1", "@odata.type": T["VirtualMedia"], "Id": "CD1", "Name": "Virtual CD",
        "MediaTypes": ["CD", "DVD"], "Image": vm["image"], "ImageName": vm["image"].rsplit("/", 1)[-1] if vm["image"]
        else None, "Inserted": vm["inserted"], "WriteProtected": True,
        "ConnectedVia": "URI" if vm["inserted"] else "NotConnected", "TransferProtocolType": vm["protocol"],
        "Actions": {"#VirtualMedia.InsertMedia": {"target": M + "/VirtualMedia/CD1/Actions/VirtualMedia.InsertMedia"},
                    "#VirtualMedia.EjectMedia": {"target": M + "/VirtualMedia/CD1/Actions/VirtualMedia.EjectMedia"}},
    }
    t[M + "/LogServices"] = _collection(M + "/LogServices", "LogService", "Log Service Collection",
                                        [M + "/LogServices/SEL"])
    t[M + "/LogServices/SEL"] = {
        "@odata.id": M + "/LogServices/SEL", "@odata.type": T["LogService"], "Id": "SEL", "Name": "System Event Log",
        "ServiceEnabled": True, "MaxNumberOfRecords": 1024, "OverWritePolicy": "WrapsWhenFull",
        "LogEntryType": "SEL", "Entries": link(M + "/LogServices/SEL/Entries"), "Status": ok_status(),
        "Actions": {"#LogService.ClearLog": {"target": M + "/LogServices/SEL/Actions/LogService.ClearLog"}},
    }
    entries = []
    for entry in state.sel:
        uri = "%s/LogServices/SEL/Entries/%s" % (M, entry["Id"])
        t[uri] = dict({"@odata.id": uri, "@odata.type": T["LogEntry"], "EntryType": "SEL"}, **entry)
        entries.append(t[uri])
    # LogEntryCollection is AutoExpand in the CSDL: members are sent inline, as real BMCs do
    sel = _collection(M + "/LogServices/SEL/Entries", "LogEntry", "SEL Entries", [])
    sel["Members"] = entries
    sel["Members@odata.count"] = len(entries)
    t[M + "/LogServices/SEL/Entries"] = sel

    # ---- UpdateService / FirmwareInventory
    fw_members = []
    for comp in sku["firmware"]:
        for fid in spec.firmware_ids(comp):
            uri = "%s/UpdateService/FirmwareInventory/%s" % (ROOT, fid)
            fw_members.append(uri)
            t[uri] = {"@odata.id": uri, "@odata.type": T["SoftwareInventory"], "Id": fid,
                      "Name": comp.get("name", fid), "Version": state.versions[comp["id"]], "Updateable": True,
                      "SoftwareId": comp["id"], "Status": ok_status()}
    t[ROOT + "/UpdateService/FirmwareInventory"] = _collection(ROOT + "/UpdateService/FirmwareInventory",
                                                               "SoftwareInventory", "Firmware Inventory Collection",
                                                               fw_members)
    simple = {"target": ROOT + "/UpdateService/Actions/UpdateService.SimpleUpdate",
              "TransferProtocol@Redfish.AllowableValues": ["HTTP", "HTTPS"]}
    t[ROOT + "/UpdateService"] = {
        "@odata.id": ROOT + "/UpdateService", "@odata.type": T["UpdateService"], "Id": "UpdateService",
        "Name": "Update Service", "ServiceEnabled": True, "Status": ok_status(),
        "FirmwareInventory": link(ROOT + "/UpdateService/FirmwareInventory"),
        "MultipartHttpPushUri": ROOT + "/UpdateService/upload",
        "Actions": {"#UpdateService.SimpleUpdate": simple},
    }
    return t


def _expand_query(max_levels):
    """ServiceRoot ``ProtocolFeaturesSupported.ExpandQuery`` for a BMC serving ``$expand`` up to
    ``max_levels`` (0: none).  The Supermicro X13 capture advertises all four forms, MaxLevels 2."""
    if not max_levels:
        return {"ExpandAll": False, "Levels": False, "Links": False, "NoLinks": False}
    return {"ExpandAll": True, "Levels": True, "Links": True, "NoLinks": True, "MaxLevels": int(max_levels)}


def _slot(label):
    return {"PartLocation": {"ServiceLabel": label, "LocationType": "Slot"}}


def _gpu_processor(spec, uri, i, model, vendor, gpus, fw, temp_c):
    base = {"@odata.id": uri, "@odata.type": T["Processor"], "Id": uri.rsplit("/", 1)[-1],
            "Name": "GPU_SXM_%d" % i, "ProcessorType": "GPU", "Socket": "GPU_SXM_%d" % i}
    if spec.defect("missing_gpu", i):
        base["Status"] = {"State": "Absent"}
        return base
    wrong = spec.defect("wrong_gpu_model", i)
    base.update({"Manufacturer": vendor, "Model": wrong["model"] if wrong else model,
                 "SerialNumber": _serial(spec.node, "GPU", i), "PartNumber": "2330-885-A1", "FirmwareVersion": fw,
                 "Status": ok_status("Warning" if temp_c >= gpus.get("max_operating_temp_c", DEFAULT_GPU_CRIT_C) else "OK")})
    if gpus.get("tdp_w"):
        base["MaxTDPWatts"] = int(gpus["tdp_w"])
    if gpus.get("memory_gib"):
        base["ProcessorMemory"] = [{"CapacityMiB": int(gpus["memory_gib"] * 1024), "MemoryType": "HBM3"}]
    down = spec.defect("pcie_downtrain", i)
    pcie = gpus.get("pcie") or {"width": 16, "gen": 5}
    base["SystemInterface"] = {"InterfaceType": "PCIe", "PCIe": {
        "PCIeType": "Gen%d" % (down["gen"] if down else pcie["gen"]), "MaxPCIeType": "Gen%d" % pcie["gen"],
        "LanesInUse": down["width"] if down else pcie["width"], "MaxLanes": pcie["width"]}}
    return base


def _pcie_device(t, spec, uri, name, i, model, vendor, fw, pcie, gpu):
    fn_uri = uri + "/PCIeFunctions"
    if gpu and spec.defect("missing_gpu", i):
        t[uri] = {"@odata.id": uri, "@odata.type": T["PCIeDevice"], "Id": name, "Name": name,
                  "Status": {"State": "Absent"}}
        return
    wrong = spec.defect("wrong_gpu_model", i) if gpu else None
    down = spec.defect("pcie_downtrain", i) if gpu else None
    t[uri] = {
        "@odata.id": uri, "@odata.type": T["PCIeDevice"], "Id": name, "Name": name,
        "Description": "%s device %d" % ("GPU" if gpu else "NIC", i), "Manufacturer": vendor,
        "Model": wrong["model"] if wrong else model, "SerialNumber": _serial(spec.node, name[:3], i),
        "FirmwareVersion": fw, "DeviceType": "SingleFunction",
        "PCIeInterface": {"PCIeType": "Gen%d" % (down["gen"] if down else pcie["gen"]),
                          "MaxPCIeType": "Gen%d" % pcie["gen"],
                          "LanesInUse": down["width"] if down else pcie["width"], "MaxLanes": pcie["width"]},
        "PCIeFunctions": link(fn_uri), "Status": ok_status(),
    }
    t[fn_uri] = _collection(fn_uri, "PCIeFunction", "PCIe Function Collection", [fn_uri + "/1"])
    vendor_id = "0x10de" if vendor == "NVIDIA" and gpu else ("0x1002" if vendor == "AMD" else "0x15b3")
    t[fn_uri + "/1"] = {
        "@odata.id": fn_uri + "/1", "@odata.type": T["PCIeFunction"], "Id": "1", "Name": "%s function 0" % name,
        "FunctionId": 0, "FunctionType": "Physical", "VendorId": vendor_id,
        "DeviceId": "0x2330" if gpu else "0x1021", "ClassCode": "0x030200" if gpu else "0x020700",
        "DeviceClass": "DisplayController" if gpu else "NetworkController", "Status": ok_status(),
        "Links": {"PCIeDevice": link(uri)},
    }


def _network_adapter(t, spec, uri, name, i, group, fw):
    ports = []
    protocol = "InfiniBand" if group.get("role") == "fabric" else "Ethernet"
    for p in range(1, group.get("ports", 1) + 1):
        puri = "%s/Ports/%d" % (uri, p)
        ports.append(puri)
        t[puri] = {"@odata.id": puri, "@odata.type": T["Port"], "Id": str(p), "Name": "%s port %d" % (name, p),
                   "PortId": str(p), "PortProtocol": protocol, "CurrentSpeedGbps": group.get("speed_gbps", 100),
                   "MaxSpeedGbps": group.get("speed_gbps", 100), "LinkStatus": "LinkUp", "LinkState": "Enabled",
                   "Status": ok_status()}
    t[uri + "/Ports"] = _collection(uri + "/Ports", "Port", "Port Collection", ports)
    pcie = group.get("pcie") or {"width": 16, "gen": 5}
    t[uri] = {
        "@odata.id": uri, "@odata.type": T["NetworkAdapter"], "Id": name, "Name": name, "Manufacturer": "NVIDIA",
        "Model": group["model"], "SerialNumber": _serial(spec.node, "MT", i), "Ports": link(uri + "/Ports"),
        "Controllers": [{"FirmwarePackageVersion": fw,
                         "ControllerCapabilities": {"NetworkPortCount": group.get("ports", 1)},
                         # as the Supermicro capture links them (NetworkAdapters/N Controllers[0].Links)
                         "Links": {"PCIeDevices": [link("%s/PCIeDevices/%s" % (spec.C, name))],
                                   "Ports": [link(p) for p in ports]},
                         "PCIeInterface": {"PCIeType": "Gen%d" % pcie["gen"], "MaxPCIeType": "Gen%d" % pcie["gen"],
                                           "LanesInUse": pcie["width"], "MaxLanes": pcie["width"]}}],
        "Status": ok_status(),
    }


def attribute_registry(spec):
    """A BIOS AttributeRegistry generated from the manifest's attributes.

    Values named Enabled/Disabled (or Enable/Disable, On/Off) become Enumerations with
    exactly those spellings (PATCH is case-exact, as on real BMCs, R-21); other strings are
    String, ints Integer, bools Boolean.
    """
    attrs = []
    pairs = ({"Enabled", "Disabled"}, {"Enable", "Disable"}, {"On", "Off"})
    for name, value in sorted(spec.initial_bios().items()):
        entry = {"AttributeName": name, "DisplayName": name, "ReadOnly": False}
        if isinstance(value, bool):
            entry["Type"] = "Boolean"
        elif isinstance(value, int):
            entry["Type"] = "Integer"
        elif isinstance(value, str) and any(value in p for p in pairs):
            pair = next(p for p in pairs if value in p)
            entry["Type"] = "Enumeration"
            entry["Value"] = [{"ValueName": v, "ValueDisplayName": v} for v in sorted(pair)]
        else:
            entry["Type"] = "String"
        attrs.append(entry)
    return {"@odata.id": ROOT + "/Registries/BiosAttributeRegistry/BiosAttributeRegistry.json",
            "@odata.type": T["AttributeRegistry"], "Id": "BiosAttributeRegistry.1.0.0",
            "Name": "BIOS Attribute Registry", "Language": "en", "RegistryVersion": "1.0.0",
            "OwningEntity": "symphony-emulator", "RegistryEntries": {"Attributes": attrs}}


def registry_entries(spec):
    """``{attribute: registry entry}`` for PATCH validation."""
    return {a["AttributeName"]: a for a in attribute_registry(spec)["RegistryEntries"]["Attributes"]}
