"""The ServiceRoot, Systems and BIOS families of a generated BMC's resource tree.

Each ``add_*`` function adds one family's resources to the tree ``t`` (``{uri: dict}``) from the BMC's
:class:`symphony_emulator.tree.Spec` and state; ``tree.build_tree`` calls them in order.  Shapes follow
DSP0268 (ServiceRoot, SessionService, TaskService, ComputerSystem, Processor, Memory, Storage, Drive,
EthernetInterface, Bios, AttributeRegistry); ids follow the SKU.
"""

from __future__ import annotations

import hashlib

from symphony_emulator.resources import (BOOT_TARGETS, DEFAULT_GPU_CRIT_C, RESET_TYPES, ROOT, T, collection, link,
                                         mac, ok_status, serial, slot, stable_uuid, version_of_kind)


def add_services(t, spec, state):
    """ServiceRoot, SessionService and TaskService (Sessions and Tasks are rendered on request)."""
    node, sku = spec.node, spec.sku
    model = sku["system"].get("model")
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


def _dimms(spec):
    """``(DIMM size in GiB, indices of the DIMMs present)`` (``missing_dimm`` defects are absent)."""
    mem = spec.sku["bom"]["memory"]
    dimm_size = mem.get("dimm_size_gib") or (mem["total_gib"] / mem["dimm_count"] if mem["dimm_count"] else 0)
    return dimm_size, [i for i in range(1, mem["dimm_count"] + 1) if not spec.defect("missing_dimm", i)]


def add_system(t, spec, state):
    """The Systems collection and the ComputerSystem."""
    node, sku = spec.node, spec.sku
    S, C, M = spec.S, spec.C, spec.M
    manufacturer = sku["system"].get("manufacturer")
    model = sku["system"].get("model")
    t[ROOT + "/Systems"] = collection(ROOT + "/Systems", "ComputerSystem", "Computer System Collection", [S])
    cpu = sku["bom"]["cpus"]
    dimm_size, present_dimms = _dimms(spec)
    boot = state.boot
    system = {
        "@odata.id": S, "@odata.type": T["ComputerSystem"], "Id": spec.system_id, "Name": "System",
        "SystemType": "Physical", "Manufacturer": manufacturer, "Model": model, "SerialNumber": spec.serial_number,
        "SKU": sku["sku"], "HostName": node["hostname"], "UUID": stable_uuid(node["hostname"], "system"),
        "PowerState": state.power, "BiosVersion": version_of_kind(spec, state, "bios"),
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
    if state.boot_progress is not None:
        system["BootProgress"] = {"LastState": state.boot_progress}
    if manufacturer is None:
        del system["Manufacturer"]
    if model is None:
        del system["Model"]
    t[S] = system


def add_processors(t, spec, state):
    """CPUs, and the GPUs where the SKU's ``bom.gpus.redfish_location`` puts them under Processors."""
    node, S = spec.node, spec.S
    cpu = spec.sku["bom"]["cpus"]
    gpus = spec.sku["bom"]["gpus"]
    gpu_fw = version_of_kind(spec, state, "gpu")
    gpu_temps = spec.gpu_temps()
    procs = []
    for i in range(1, cpu["count"] + 1):
        uri = "%s/Processors/CPU%d" % (S, i)
        procs.append(uri)
        t[uri] = {"@odata.id": uri, "@odata.type": T["Processor"], "Id": "CPU%d" % i, "Name": "CPU%d" % i,
                  "ProcessorType": "CPU", "ProcessorArchitecture": "x86", "InstructionSet": "x86-64",
                  "Manufacturer": "Intel(R) Corporation" if "Intel" in cpu["model"] else "AMD",
                  "Model": cpu["model"], "Socket": "CPU%d" % i, "TotalCores": cpu.get("cores", 32),
                  "TotalThreads": cpu.get("cores", 32) * 2, "SerialNumber": serial(node, "CPU", i),
                  "Status": ok_status()}
    if spec.gpu_location in ("processors", "either"):
        for i in range(1, gpus["count"] + 1):
            uri = "%s/Processors/GPU_SXM_%d" % (S, i)
            procs.append(uri)
            t[uri] = _gpu_processor(spec, uri, i, gpus, gpu_fw, gpu_temps[i])
    t[S + "/Processors"] = collection(S + "/Processors", "Processor", "Processor Collection", procs)


def add_memory(t, spec, state):
    """The DIMMs (``missing_dimm``: Absent)."""
    node, S = spec.node, spec.S
    mem = spec.sku["bom"]["memory"]
    dimm_size, present_dimms = _dimms(spec)
    dimms = []
    for i in range(1, mem["dimm_count"] + 1):
        uri = "%s/Memory/DIMM%d" % (S, i)
        dimms.append(uri)
        if i not in present_dimms:
            t[uri] = {"@odata.id": uri, "@odata.type": T["Memory"], "Id": "DIMM%d" % i, "Name": "DIMM%d" % i,
                      "Location": slot("DIMM%d" % i), "Status": {"State": "Absent"}}
            continue
        t[uri] = {"@odata.id": uri, "@odata.type": T["Memory"], "Id": "DIMM%d" % i, "Name": "DIMM%d" % i,
                  "Location": slot("DIMM%d" % i), "CapacityMiB": int(dimm_size * 1024), "MemoryType": "DRAM",
                  "MemoryDeviceType": "DDR5", "OperatingSpeedMhz": 4800, "Manufacturer": "Samsung",
                  "PartNumber": "M321R8GA0BB0-CQKZJ", "SerialNumber": serial(node, "DIMM", i),
                  "Status": ok_status()}
    t[S + "/Memory"] = collection(S + "/Memory", "Memory", "Memory Collection", dimms)


def add_storage(t, spec, state):
    """NVMe storage, its drives (under the Chassis) and the host Ethernet interface."""
    node, S, C = spec.node, spec.S, spec.C
    nvme = spec.sku["bom"].get("nvme") or {"count": 0}
    drives = []
    for i in range(1, nvme["count"] + 1):
        uri = "%s/Drives/NVMe%d" % (C, i)
        drives.append(uri)
        t[uri] = {"@odata.id": uri, "@odata.type": T["Drive"], "Id": "NVMe%d" % i, "Name": "NVMe drive %d" % i,
                  "Model": nvme.get("model", "NVMe SSD"), "CapacityBytes": int(nvme.get("capacity_gb", 960) * 10 ** 9),
                  "Protocol": "NVMe", "MediaType": "SSD", "SerialNumber": serial(node, "NVME", i),
                  "Status": ok_status()}
    t[S + "/Storage"] = collection(S + "/Storage", "Storage", "Storage Collection", [S + "/Storage/NVMe"])
    t[S + "/Storage/NVMe"] = {"@odata.id": S + "/Storage/NVMe", "@odata.type": T["Storage"], "Id": "NVMe",
                              "Name": "NVMe storage", "Drives": [link(d) for d in drives],
                              "Drives@odata.count": len(drives), "Status": ok_status()}
    t[C + "/Drives"] = collection(C + "/Drives", "Drive", "Drive Collection", drives)
    t[S + "/EthernetInterfaces"] = collection(S + "/EthernetInterfaces", "EthernetInterface",
                                              "Ethernet Interface Collection", [S + "/EthernetInterfaces/1"])
    t[S + "/EthernetInterfaces/1"] = {
        "@odata.id": S + "/EthernetInterfaces/1", "@odata.type": T["EthernetInterface"], "Id": "1",
        "Name": "Host interface 1", "MACAddress": mac(node, "host1"), "SpeedMbps": 10000, "InterfaceEnabled": True,
        "LinkStatus": "LinkUp", "Status": ok_status()}


def add_bios(t, spec, state):
    """Bios (current), its settings object (pending), and the BIOS attribute registry."""
    S = spec.S
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
    t[ROOT + "/Registries"] = collection(ROOT + "/Registries", "MessageRegistryFile", "Registry File Collection",
                                         [ROOT + "/Registries/BiosAttributeRegistry"])
    t[ROOT + "/Registries/BiosAttributeRegistry"] = {
        "@odata.id": ROOT + "/Registries/BiosAttributeRegistry", "@odata.type": T["MessageRegistryFile"],
        "Id": "BiosAttributeRegistry", "Name": "BIOS Attribute Registry File", "Languages": ["en"],
        "Registry": "BiosAttributeRegistry.1.0.0",
        "Location": [{"Language": "en", "Uri": ROOT + "/Registries/BiosAttributeRegistry/BiosAttributeRegistry.json"}],
    }
    t[ROOT + "/Registries/BiosAttributeRegistry/BiosAttributeRegistry.json"] = attribute_registry(spec)


def _expand_query(max_levels):
    """ServiceRoot ``ProtocolFeaturesSupported.ExpandQuery`` for a BMC serving ``$expand`` up to
    ``max_levels`` (0: none).  The Supermicro X13 capture advertises all four forms, MaxLevels 2."""
    if not max_levels:
        return {"ExpandAll": False, "Levels": False, "Links": False, "NoLinks": False}
    return {"ExpandAll": True, "Levels": True, "Links": True, "NoLinks": True, "MaxLevels": int(max_levels)}


def _gpu_processor(spec, uri, i, gpus, fw, temp_c):
    base = {"@odata.id": uri, "@odata.type": T["Processor"], "Id": uri.rsplit("/", 1)[-1],
            "Name": "GPU_SXM_%d" % i, "ProcessorType": "GPU", "Socket": "GPU_SXM_%d" % i}
    if spec.defect("missing_gpu", i):
        base["Status"] = {"State": "Absent"}
        return base
    wrong = spec.defect("wrong_gpu_model", i)
    base.update({"Manufacturer": spec.gpu_vendor, "Model": wrong["model"] if wrong else spec.gpu_model,
                 "SerialNumber": serial(spec.node, "GPU", i), "PartNumber": "2330-885-A1", "FirmwareVersion": fw,
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
