"""The Chassis family of a generated BMC's resource tree: PCIe devices, network adapters, power, thermal, sensors.

Each ``add_*`` function adds its resources to the tree ``t`` from the BMC's :class:`symphony_emulator.tree.Spec`
and state; ``tree.build_tree`` calls them in order.  Both the legacy Power/Thermal resources (what most tools,
sushy included, still read) and PowerSubsystem/ThermalSubsystem/Sensors are served, with the same readings.
Defects shown here: missing/wrong GPUs and PCIe downtraining on PCIe devices, failed PSUs and fans, hot GPUs.
"""

from __future__ import annotations

from symphony_emulator.resources import (DEFAULT_GPU_CRIT_C, ROOT, T, collection, link, ok_status, serial,
                                         stable_uuid, version_of_kind)


def _psus(spec):
    """The SKU's PSU group (``count``, ``model``, ``capacity_w``), its first model when it lists several."""
    psus = dict(spec.sku["bom"].get("psus") or {"count": 0})
    if "model" not in psus and psus.get("models"):
        psus["model"] = psus["models"][0]
    return psus


def _fan_count(spec):
    return max((spec.sku["bom"].get("fans") or {}).get("min_count", 0), 0)


def _failed(spec, kind, count):
    """Indices 1..count with a ``kind`` defect (``psu_failed``, ``fan_failed``)."""
    return {i for i in range(1, count + 1) if spec.defect(kind, i)}


def _consumed_w(spec, state):
    """System power draw in W: 1200 W plus 10 % of each GPU's TDP when on, 35 W standby when off."""
    gpus = spec.sku["bom"]["gpus"]
    return round((1200 + gpus["count"] * gpus.get("tdp_w", 0) * 0.1) if state.power == "On" else 35.0, 1)


def _crit_temp_c(spec):
    return spec.sku["bom"]["gpus"].get("max_operating_temp_c", DEFAULT_GPU_CRIT_C)


def add_pcie(t, spec, state):
    """The Chassis collection, PCIe devices (GPUs where the SKU puts them there, NICs) and network adapters."""
    bom, C = spec.sku["bom"], spec.C
    gpu_fw = version_of_kind(spec, state, "gpu")
    t[ROOT + "/Chassis"] = collection(ROOT + "/Chassis", "Chassis", "Chassis Collection", [C])
    pcie = []
    if spec.gpu_location in ("pcie_devices", "either"):
        for i in range(1, bom["gpus"]["count"] + 1):
            uri = "%s/PCIeDevices/GPU%d" % (C, i)
            pcie.append(uri)
            _pcie_device(t, spec, uri, "GPU%d" % i, i, spec.gpu_model, spec.gpu_vendor, gpu_fw, spec.gpu_pcie, gpu=True)
    nic_index = 0
    adapters = []
    nic_fw = version_of_kind(spec, state, "nic")
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
    t[C + "/PCIeDevices"] = collection(C + "/PCIeDevices", "PCIeDevice", "PCIe Device Collection", pcie)
    t[C + "/NetworkAdapters"] = collection(C + "/NetworkAdapters", "NetworkAdapter", "Network Adapter Collection",
                                           adapters)


def add_chassis(t, spec, state):
    """The Chassis: health rolled up from failed PSUs and fans (Critical) and GPUs at their limit (Warning)."""
    node, sku = spec.node, spec.sku
    S, C, M = spec.S, spec.C, spec.M
    manufacturer = sku["system"].get("manufacturer")
    model = sku["system"].get("model")
    health_rollup = "OK"
    if _failed(spec, "psu_failed", _psus(spec)["count"]) or _failed(spec, "fan_failed", _fan_count(spec)):
        health_rollup = "Critical"
    crit_temp = _crit_temp_c(spec)
    for i, temp in spec.gpu_temps().items():
        if temp >= crit_temp:
            health_rollup = "Critical" if health_rollup == "Critical" else "Warning"
    chassis = {
        "@odata.id": C, "@odata.type": T["Chassis"], "Id": spec.chassis_id, "Name": "Chassis",
        "ChassisType": "RackMount", "Manufacturer": manufacturer or "NVIDIA", "Model": model or sku["sku"],
        "SerialNumber": spec.serial_number, "PowerState": state.power, "UUID": stable_uuid(node["hostname"], "chassis"),
        "Status": {"State": "Enabled", "Health": health_rollup, "HealthRollup": health_rollup},
        "Location": {"Placement": {"Rack": node["rack"], "RackOffset": node["u"], "RackOffsetUnits": "EIA_310"}},
        "PCIeDevices": link(C + "/PCIeDevices"), "NetworkAdapters": link(C + "/NetworkAdapters"),
        "Power": link(C + "/Power"), "Thermal": link(C + "/Thermal"),
        "PowerSubsystem": link(C + "/PowerSubsystem"), "ThermalSubsystem": link(C + "/ThermalSubsystem"),
        "Sensors": link(C + "/Sensors"), "Drives": link(C + "/Drives"),
        "Links": {"ComputerSystems": [link(S)], "ManagedBy": [link(M)]},
    }
    t[C] = chassis


def add_power(t, spec, state):
    """Legacy Power (PowerControl, PowerSupplies) and PowerSubsystem with its PowerSupplies."""
    node, C = spec.node, spec.C
    psus = _psus(spec)
    psu_failed = _failed(spec, "psu_failed", psus["count"])
    on = state.power == "On"
    consumed = _consumed_w(spec, state)
    supplies, ps_uris = [], []
    for i in range(1, psus["count"] + 1):
        failed = i in psu_failed
        status = {"State": "UnavailableOffline", "Health": "Critical"} if failed else ok_status()
        out_w = 0.0 if failed or not on else round(consumed / max(psus["count"] - len(psu_failed), 1), 1)
        supplies.append({"@odata.id": "%s/Power#/PowerSupplies/%d" % (C, i - 1), "MemberId": str(i - 1),
                         "Name": "PSU%d" % i, "Model": psus.get("model", "PSU"), "Manufacturer": "SUPERMICRO",
                         "SerialNumber": serial(node, "PSU", i), "PowerCapacityWatts": psus.get("capacity_w", 3000),
                         "LastPowerOutputWatts": out_w, "LineInputVoltage": 0.0 if failed else 230.0,
                         "PowerSupplyType": "AC", "Status": status})
        puri = "%s/PowerSubsystem/PowerSupplies/PSU%d" % (C, i)
        ps_uris.append(puri)
        t[puri] = {"@odata.id": puri, "@odata.type": T["PowerSupply"], "Id": "PSU%d" % i, "Name": "PSU%d" % i,
                   "Model": psus.get("model", "PSU"), "Manufacturer": "SUPERMICRO",
                   "SerialNumber": serial(node, "PSU", i), "PowerCapacityWatts": psus.get("capacity_w", 3000),
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
    t[C + "/PowerSubsystem/PowerSupplies"] = collection(C + "/PowerSubsystem/PowerSupplies", "PowerSupply",
                                                        "Power Supply Collection", ps_uris)


def add_thermal(t, spec, state):
    """Legacy Thermal (Temperatures, Fans), ThermalSubsystem with its Fans, and the Sensors collection."""
    C = spec.C
    fans = _fan_count(spec)
    fan_failed = _failed(spec, "fan_failed", fans)
    on = state.power == "On"
    crit_temp = _crit_temp_c(spec)
    cpu = spec.sku["bom"]["cpus"]
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
    for i, reading in spec.gpu_temps().items():
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
    sensor("TotalPower", "Total Power", _consumed_w(spec, state), "Power", "W", "PowerSupply")
    t[C + "/Thermal"] = {"@odata.id": C + "/Thermal", "@odata.type": T["Thermal"], "Id": "Thermal",
                         "Name": "Thermal", "Temperatures": temps, "Fans": fan_list}
    t[C + "/ThermalSubsystem"] = {
        "@odata.id": C + "/ThermalSubsystem", "@odata.type": T["ThermalSubsystem"], "Id": "ThermalSubsystem",
        "Name": "Thermal Subsystem", "Fans": link(C + "/ThermalSubsystem/Fans"),
        "Status": {"State": "Enabled", "Health": "Critical" if fan_failed else "OK"}}
    t[C + "/ThermalSubsystem/Fans"] = collection(C + "/ThermalSubsystem/Fans", "Fan", "Fan Collection", fan_uris)
    t[C + "/Sensors"] = collection(C + "/Sensors", "Sensor", "Sensor Collection", sensors)


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
        "Model": wrong["model"] if wrong else model, "SerialNumber": serial(spec.node, name[:3], i),
        "FirmwareVersion": fw, "DeviceType": "SingleFunction",
        "PCIeInterface": {"PCIeType": "Gen%d" % (down["gen"] if down else pcie["gen"]),
                          "MaxPCIeType": "Gen%d" % pcie["gen"],
                          "LanesInUse": down["width"] if down else pcie["width"], "MaxLanes": pcie["width"]},
        "PCIeFunctions": link(fn_uri), "Status": ok_status(),
    }
    t[fn_uri] = collection(fn_uri, "PCIeFunction", "PCIe Function Collection", [fn_uri + "/1"])
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
    t[uri + "/Ports"] = collection(uri + "/Ports", "Port", "Port Collection", ports)
    pcie = group.get("pcie") or {"width": 16, "gen": 5}
    t[uri] = {
        "@odata.id": uri, "@odata.type": T["NetworkAdapter"], "Id": name, "Name": name, "Manufacturer": "NVIDIA",
        "Model": group["model"], "SerialNumber": serial(spec.node, "MT", i), "Ports": link(uri + "/Ports"),
        "Controllers": [{"FirmwarePackageVersion": fw,
                         "ControllerCapabilities": {"NetworkPortCount": group.get("ports", 1)},
                         # as the Supermicro capture links them (NetworkAdapters/N Controllers[0].Links)
                         "Links": {"PCIeDevices": [link("%s/PCIeDevices/%s" % (spec.C, name))],
                                   "Ports": [link(p) for p in ports]},
                         "PCIeInterface": {"PCIeType": "Gen%d" % pcie["gen"], "MaxPCIeType": "Gen%d" % pcie["gen"],
                                           "LanesInUse": pcie["width"], "MaxLanes": pcie["width"]}}],
        "Status": ok_status(),
    }
