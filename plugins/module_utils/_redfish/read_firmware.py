# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Managers and firmware in the inventory reader: the BMCs, the UpdateService and its FirmwareInventory.

Firmware (R-27, R-29): Dell ``Previous-*`` ignored, ``Current-*`` dropped when the matching
``Installed-*`` exists; versions null/""/"N/A" are ``None`` (unknown); ``Disabled`` ``*Pending*``
placeholders skipped.
"""

from __future__ import annotations

from typing import Any

from .._core.errors import RedfishError
from .model import FirmwareItem
from .read_base import _status, _str, link, normalise_version
from .read_logs import LogReader


class FirmwareReader(LogReader):
    """``Managers`` (with their logs and reset capability) and the ``UpdateService``."""

    def read_manager(self, m: dict[str, Any]) -> None:
        state, health = _status(m)
        self.inv.managers.append({
            "id": m.get("Id"), "uri": m.get("@odata.id"), "model": _str(m.get("Model")),
            "manager_type": m.get("ManagerType"), "firmware_version": normalise_version(m.get("FirmwareVersion")),
            "state": state, "health": health, "power_state": m.get("PowerState"),
        })
        if "capabilities" in self.sections:
            caps = self.inv.capabilities
            if link(m, "VirtualMedia") and m["VirtualMedia"]["@odata.id"] not in caps.get("virtual_media", []):
                caps.setdefault("virtual_media", []).append(m["VirtualMedia"]["@odata.id"])
            reset = (m.get("Actions") or {}).get("#Manager.Reset") or {}
            if reset and "manager_reset" not in caps:
                caps["manager_reset"] = {"manager": m.get("Id"), "target": reset.get("target"),
                                         "types": list(reset.get("ResetType@Redfish.AllowableValues") or [])}
        if "sel" in self.sections and link(m, "LogServices"):
            self.read_logs(m["LogServices"]["@odata.id"])

    def read_update_service(self, uri: str) -> None:
        upd = self.get("firmware", uri)
        if upd is None:
            return
        if "capabilities" in self.sections:
            act = (upd.get("Actions") or {}).get("#UpdateService.SimpleUpdate") or {}
            caps = self.inv.capabilities
            protocols = act.get("TransferProtocol@Redfish.AllowableValues")
            if act and protocols is None and act.get("@Redfish.ActionInfo"):
                info = self.get("capabilities", act["@Redfish.ActionInfo"]) or {}
                for prm in info.get("Parameters") or []:
                    if prm.get("Name") == "TransferProtocol":
                        protocols = prm.get("AllowableValues")
            caps["simple_update"] = {
                "target": act.get("target"),
                "transfer_protocols": list(protocols) if protocols is not None else None,
                "action_info": act.get("@Redfish.ActionInfo"),
            } if act else None
            caps["multipart_http_push_uri"] = upd.get("MultipartHttpPushUri")
            caps["http_push_uri"] = upd.get("HttpPushUri")
            # UpdateService v1_7_0 StartUpdate: images pushed OnStartUpdateRequest install only on it (Supermicro)
            caps["start_update"] = ((upd.get("Actions") or {}).get("#UpdateService.StartUpdate") or {}).get("target")
            caps["multipart_apply_times"] = (upd.get("MultipartHttpPushUri@Redfish.OperationApplyTimeSupport")
                                             or {}).get("SupportedValues")
        # SoftwareInventory where a service has no FirmwareInventory (DSP0268 UpdateService: both are
        # SoftwareInventoryCollections); None: the BMC publishes no firmware inventory at all
        inventory = link(upd, "FirmwareInventory") or link(upd, "SoftwareInventory")
        self.inv.capabilities["firmware_inventory"] = inventory
        if not inventory:
            return
        if "firmware" in self.sections:
            items = self.members("firmware", inventory)
            self.inv.firmware.extend(normalise_firmware(items))
        elif "firmware_ids" in self.sections:
            uri = inventory
            coll = self.cached(uri)
            if coll is not None and isinstance(coll.get("Members"), list) and not coll.get("Members@odata.nextLink") \
                    and coll.get("Members@odata.count") in (None, len(coll["Members"])):
                refs = [m for m in coll["Members"] if isinstance(m, dict)]
            else:
                try:
                    refs = self.c.members(uri, expand=False, fetch=False)
                except RedfishError as exc:
                    self.incomplete("firmware", uri, exc)
                    return
            for ref in refs:
                ref_uri = ref.get("@odata.id") or ""
                self.inv.firmware.append(FirmwareItem(id=ref.get("Id") or ref_uri.rstrip("/").rsplit("/", 1)[-1],
                                                      name=ref.get("Name") or "", uri=ref_uri))
            self.inv.capabilities["firmware_ids_only"] = True


def normalise_firmware(items: list[dict[str, Any]]) -> list[FirmwareItem]:
    """FirmwareInventory member bodies -> [FirmwareItem] describing what runs now.

    Dell (R-27): ``Previous-*`` ignored, ``Current-*`` dropped when the same
    ``Installed-*`` exists; R-29: version null/""/"N/A" -> None; ``Disabled`` entries
    whose id names ``Pending`` are placeholders and skipped.
    """
    ids = {str(i.get("Id")) for i in items}
    out = []
    for i in items:
        fid = str(i.get("Id") or "")
        if fid.startswith("Previous-"):
            continue
        if fid.startswith("Current-") and ("Installed-" + fid[len("Current-"):]) in ids:
            continue
        state, health = _status(i)
        if state == "Disabled" and "pending" in fid.lower():
            continue
        if "Version" not in i and fid.lower() == "oem":
            continue
        out.append(FirmwareItem(
            id=fid, name=i.get("Name") or "", version=normalise_version(i.get("Version")),
            uri=i.get("@odata.id", ""), updateable=i.get("Updateable"), state=state, health=health,
            related=[r.get("@odata.id") for r in (i.get("RelatedItem") or []) if isinstance(r, dict)]))
    return out
