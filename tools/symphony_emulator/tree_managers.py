"""The Managers and UpdateService families of a generated BMC's resource tree.

Each ``add_*`` function adds its resources to the tree ``t`` from the BMC's :class:`symphony_emulator.tree.Spec`
and state; ``tree.build_tree`` calls them in order.  The Manager (the BMC) carries VirtualMedia CD1 (the
ephemeral runtime's boot medium) and the SEL; FirmwareInventory lists the SKU's literal ``match.ids``.
"""

from __future__ import annotations

from symphony_emulator.resources import ROOT, T, collection, link, ok_status, stable_uuid, version_of_kind


def add_manager(t, spec, state):
    """The Manager, its VirtualMedia CD1 and its SEL (entries inline: LogEntryCollection is AutoExpand)."""
    node, sku = spec.node, spec.sku
    S, C, M = spec.S, spec.C, spec.M
    manufacturer = sku["system"].get("manufacturer")
    t[ROOT + "/Managers"] = collection(ROOT + "/Managers", "Manager", "Manager Collection", [M])
    t[M] = {
        "@odata.id": M, "@odata.type": T["Manager"], "Id": spec.manager_id, "Name": "Manager",
        "ManagerType": "BMC", "FirmwareVersion": version_of_kind(spec, state, "bmc"),
        "Manufacturer": manufacturer or "NVIDIA", "Model": "%s BMC" % sku["system"].get("bmc_vendor", "emulated"),
        "UUID": stable_uuid(node["hostname"], "manager"), "PowerState": "On", "Status": ok_status(),
        "VirtualMedia": link(M + "/VirtualMedia"), "LogServices": link(M + "/LogServices"),
        "Links": {"ManagerForServers": [link(S)], "ManagerForChassis": [link(C)]},
        "Actions": {"#Manager.Reset": {"target": M + "/Actions/Manager.Reset",
                                       "ResetType@Redfish.AllowableValues": ["ForceRestart", "GracefulRestart"]}},
    }
    t[M + "/VirtualMedia"] = collection(M + "/VirtualMedia", "VirtualMedia", "Virtual Media Collection",
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
    t[M + "/LogServices"] = collection(M + "/LogServices", "LogService", "Log Service Collection",
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
    sel = collection(M + "/LogServices/SEL/Entries", "LogEntry", "SEL Entries", [])
    sel["Members"] = entries
    sel["Members@odata.count"] = len(entries)
    t[M + "/LogServices/SEL/Entries"] = sel


def add_update_service(t, spec, state):
    """UpdateService with SimpleUpdate and the multipart push URI, and the FirmwareInventory."""
    sku = spec.sku
    fw_members = []
    for comp in sku["firmware"]:
        # match.names: the member Names as the capture gives them, index for index with match.ids
        names = (comp.get("match") or {}).get("names") or []
        for index, fid in enumerate(spec.firmware_ids(comp)):
            uri = "%s/UpdateService/FirmwareInventory/%s" % (ROOT, fid)
            fw_members.append(uri)
            t[uri] = {"@odata.id": uri, "@odata.type": T["SoftwareInventory"], "Id": fid,
                      "Name": names[index] if index < len(names) else comp.get("name", fid), "Version": state.versions[comp["id"]], "Updateable": True,
                      "SoftwareId": comp["id"], "Status": ok_status()}
    t[ROOT + "/UpdateService/FirmwareInventory"] = collection(ROOT + "/UpdateService/FirmwareInventory",
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
    if sku["system"].get("bmc_vendor") == "Supermicro":   # two-phase push, see firmware.py
        t[ROOT + "/UpdateService"]["Actions"]["#UpdateService.StartUpdate"] = {
            "target": ROOT + "/UpdateService/Actions/UpdateService.StartUpdate"}
