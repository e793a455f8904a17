"""The Redfish vocabulary the generated trees are written in: resource types, links, status, ids.

Every ``@odata.type`` in ``T`` names a namespace of the CSDL in ``../shared/reference/redfish-csdl`` (a unit
test checks it).  Serial numbers, MACs and UUIDs are derived from the twin node, so a BMC is the same on every
start.  Used by the tree builders (``tree``, ``tree_system``, ``tree_chassis``, ``tree_managers``) and by the
request handlers.
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
    """``@odata.type`` of the collection of ``name`` resources."""
    return "#%sCollection.%sCollection" % (name, name)


def link(uri):
    """A hyperlink to ``uri``."""
    return {"@odata.id": uri}


def ok_status(health="OK", state="Enabled"):
    """A ``Status`` object."""
    return {"State": state, "Health": health}


def collection(uri, type_name, name, members):
    """A resource collection at ``uri`` linking ``members`` (uris)."""
    return {"@odata.id": uri, "@odata.type": collection_type(type_name), "Name": name,
            "Members": [link(m) for m in members], "Members@odata.count": len(members)}


def stable_uuid(*parts):
    """A UUID derived from ``parts`` (the same on every start)."""
    return str(uuid.UUID(bytes=hashlib.sha256("|".join(parts).encode()).digest()[:16]))


def serial(node, prefix, index):
    """The serial number of part ``prefix`` ``index`` of ``node``, derived from the node's serial."""
    digest = hashlib.sha256(("%s|%s|%s" % (node["serial"], prefix, index)).encode()).hexdigest()
    return "%s%s" % (prefix, int(digest[:10], 16) % 10 ** 12)


def mac(node, index):
    """MAC address ``index`` of ``node`` (Supermicro OUI), derived from the node's serial."""
    digest = hashlib.sha256(("%s|mac|%s" % (node["serial"], index)).encode()).digest()
    return "3c:ec:ef:%02x:%02x:%02x" % (digest[0], digest[1], digest[2])


def slot(label):
    """A slot ``Location`` labelled ``label``."""
    return {"PartLocation": {"ServiceLabel": label, "LocationType": "Slot"}}


def version_of_kind(spec, state, kind):
    """The running version of the first manifest firmware component of ``kind`` (bmc, bios, gpu, nic...)."""
    for comp in spec.sku["firmware"]:
        if comp["kind"] == kind:
            return state.versions.get(comp["id"])
    return None
