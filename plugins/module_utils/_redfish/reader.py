# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Read a BMC's Redfish tree into the normalised :class:`NodeInventory`: :func:`read_inventory`.

``read_inventory(client, system_id=None, sections=ALL_SECTIONS)`` walks Systems, Chassis,
Managers and UpdateService with a :class:`RedfishClient` and fills components (cpu, dimm,
gpu, nic, dpu, nvme/drive, psu, fan, nvswitch, pcie), firmware, SEL entries, readings,
BIOS and capabilities.  :class:`InventoryReader` composes one reader per resource family
(vendor differences in each, ``shared/cases/redfish-cases.md``):

* :mod:`.read_systems`: systems, processors (CPUs, GPUs), memory, BIOS, capabilities;
* :mod:`.read_chassis`: chassis, NVSwitches, network adapters, GPUs from PCIe devices;
* :mod:`.read_storage`: storage controllers and drives (NVMe);
* :mod:`.read_power`: PSUs, fans, sensors, coolant and leak detection;
* :mod:`.read_logs`: SEL/event logs;  :mod:`.read_firmware`: managers, UpdateService, firmware;
* :mod:`.read_base`: the resource cache and the reads that record what is incomplete.

Requests: where the service advertises ``$expand`` (``ProtocolFeaturesSupported.ExpandQuery``)
the reader asks for Systems, Chassis and Managers expanded as deep as ``MaxLevels`` allows
(at most 2), then for the collections below them expanded one level, a few at a time (the
client's per-BMC cap), and keeps every resource that came back inline (by ``@odata.id``)
so nothing is fetched twice; what is still a bare link is fetched, again a few at a time.
A service that ignores ``$expand`` gets the same walk member by member.

Absent parts (``Status.State == "Absent"``: empty DIMM or GPU slots) are kept as
components with ``state="Absent"`` so an audit can name the empty slot; count the
present ones with ``state != "Absent"``.
"""

from __future__ import annotations

from typing import Any, Iterable, Optional

from .client import SERVICE_ROOT, RedfishClient
from .model import NodeInventory
from .read_base import ALL_SECTIONS, SECTIONS, _links_list, _norm, _str, child_uri, link
from .read_chassis import ChassisReader
from .read_firmware import FirmwareReader, normalise_firmware
from .read_systems import SystemsReader

__all__ = ["ALL_SECTIONS", "SECTIONS", "InventoryReader", "normalise_firmware", "read_inventory", "reset_request"]

# Collections read below the top-level resources (prefetched together, one level expanded).
_SYSTEM_COLLECTIONS = ("Memory", "Processors", "Storage")
_CHASSIS_COLLECTIONS = ("Drives",)
RESET_PREFERENCE = ("ForceRestart", "PowerCycle", "GracefulRestart")


class InventoryReader(SystemsReader, ChassisReader, FirmwareReader):
    """One read of a whole BMC tree (:meth:`run`); ``read_inventory`` is the way to use it."""

    def run(self) -> None:
        root = self.c.service_root or self.get("service", SERVICE_ROOT) or {}
        self.inv.service = {
            "vendor": _str(root.get("Vendor")),
            "product": _str(root.get("Product")),
            "redfish_version": _str(root.get("RedfishVersion")),
            "uuid": _str(root.get("UUID")),
        }
        self.prefetch_tree(root)
        systems = []
        if link(root, "Systems"):
            systems = self.members("systems", root["Systems"]["@odata.id"])
        if self.system_id:
            systems = [s for s in systems if s.get("Id") == self.system_id]
            if not systems:
                self.incomplete("systems", link(root, "Systems"), "system %r not found" % self.system_id)
        gpu_memory: dict[Optional[str], float] = {}
        for s in systems:
            self.read_system(s, gpu_memory)
        chassis = self.members("chassis", root["Chassis"]["@odata.id"]) if link(root, "Chassis") else []
        own, shared = node_chassis(systems, chassis) if self.system_id else (chassis, [])
        for ch in own:
            self.read_chassis(ch)
        for ch in shared:
            self.read_chassis(ch, shared=True)
        if not self.inv.of_kind("gpu"):
            self.gpus_from_pcie(systems, own)
        if "managers" in self.sections and link(root, "Managers"):
            for m in self.members("managers", root["Managers"]["@odata.id"]):
                self.read_manager(m)
        upd = link(root, "UpdateService")
        if upd and self.sections & {"firmware", "firmware_ids", "capabilities"}:
            self.read_update_service(upd)
        elif not upd:
            self.inv.capabilities["firmware_inventory"] = None   # no UpdateService: no firmware inventory
        if "readings" in self.sections and link(root, "ThermalEquipment"):
            self.read_thermal_equipment(root["ThermalEquipment"]["@odata.id"])
        self.inv.capabilities["expand_query"] = self.c.expand_param()

    def prefetch_tree(self, root: dict[str, Any]) -> None:
        """Two rounds of expanded GETs that bring most of the tree the reader walks.

        Round 1: Systems, Chassis, Managers (``$levels`` up to 2), UpdateService (1).  Round 2:
        the collections below each system and chassis (Memory, Processors, Storage with its
        Drives, Drives, Sensors, PowerSupplies, Fans) and the LogServices, one level expanded,
        and NetworkAdapters with ``*`` two levels deep (ports and PCIe devices named by the
        adapters' Controllers come along).  No-op where the service does not advertise ``$expand``.
        """
        if not self.levels:
            return
        top = [(link(root, "Systems"), 2), (link(root, "Chassis"), 2)]
        if self.sections & {"managers", "sel", "capabilities"}:
            top.append((link(root, "Managers"), 2))
        if self.sections & {"firmware", "firmware_ids", "capabilities"}:
            top.append((link(root, "UpdateService"), 1))
        self.prefetch([t for t in top if t[0]])
        wanted: list[tuple[Any, ...]] = []
        for s in self._from_cache(link(root, "Systems")) or []:
            wanted += [(link(s, k), 2 if k == "Storage" else 1) for k in _SYSTEM_COLLECTIONS]
            if "sel" in self.sections:
                wanted.append((link(s, "LogServices"), 1))
        for ch in self._from_cache(link(root, "Chassis")) or []:
            wanted += [(link(ch, k), 1) for k in _CHASSIS_COLLECTIONS]
            # "*" two levels deep brings each adapter's ports and PCIe device through its
            # Controllers[].Links (as the Supermicro capture links them) in this one request
            wanted.append((link(ch, "NetworkAdapters"), 2, "*"))
            if "readings" in self.sections:
                wanted.append((link(ch, "Sensors"), 1))
            for sub, key in (("PowerSubsystem", "PowerSupplies"), ("ThermalSubsystem", "Fans")):
                body = self.cached(link(ch, sub))
                if body is not None:
                    wanted.append((link(body, key), 1))
        if "sel" in self.sections:
            for m in self._from_cache(link(root, "Managers")) or []:
                wanted.append((link(m, "LogServices"), 1))
        self.prefetch([w for w in wanted if w[0]])


def node_chassis(systems: list[dict[str, Any]], chassis: list[dict[str, Any]]
                 ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``(own, shared)``: the chassis of one node behind a BMC that serves several (DESIGN.md "Per node").

    ``own``: the chassis its system links (``Links.Chassis``) and those they contain (``Links.Contains`` /
    ``ContainedBy``): the node's parts.  ``shared``: the chassis that contain those (the enclosure: its
    serial, PSUs and fans serve every node).  Other nodes' chassis are in neither.  A system that links no
    chassis gives ``(chassis, [])``: nothing tells which parts are its own.
    """
    by_uri = {_norm(c.get("@odata.id")): c for c in chassis}
    own = {_norm(u) for s in systems for u in _links_list(s, "Chassis")} & set(by_uri)
    if not own:
        return chassis, []
    todo = list(own)
    while todo:   # below: what the node's chassis contain
        uri = todo.pop()
        for c in chassis:
            below = _norm(c.get("@odata.id"))
            if below not in own and (uri in {_norm(u) for u in _links_list(c, "ContainedBy")}
                                     or below in {_norm(u) for u in _links_list(by_uri[uri], "Contains")}):
                own.add(below)
                todo.append(below)
    shared: set[Any] = set()
    todo = list(own)
    while todo:   # above: the enclosures that hold the node
        uri = todo.pop()
        for up in _links_list(by_uri.get(uri), "ContainedBy"):
            up = _norm(up)
            if up in by_uri and up not in own | shared:
                shared.add(up)
                todo.append(up)
        for c in chassis:
            cu = _norm(c.get("@odata.id"))
            if cu not in own | shared and uri in {_norm(u) for u in _links_list(c, "Contains")}:
                shared.add(cu)
                todo.append(cu)
    return ([c for c in chassis if _norm(c.get("@odata.id")) in own],
            [c for c in chassis if _norm(c.get("@odata.id")) in shared])


def read_inventory(client: RedfishClient, system_id: Optional[str] = None,
                   sections: Iterable[str] = ALL_SECTIONS) -> NodeInventory:
    """Read one BMC into a :class:`NodeInventory`.

    ``client``: an opened :class:`RedfishClient`; ``system_id``: read only this
    ``Systems`` member and the chassis it links (:func:`node_chassis`: one node of a blade
    chassis whose BMC serves several; default: every system — a DGX exposes the host and
    the HGX baseboard as two); ``sections``: subset of :data:`SECTIONS` (``firmware_ids``: the
    FirmwareInventory member list without the members' bodies).
    Never raises for a part of the tree: unreadable parts go to ``incomplete`` with the
    reason.  Raises :class:`RedfishError` only when the service root itself cannot be read.
    ``requests`` in the result is the number of HTTP requests this read cost.
    """
    start = client.requests
    inv = NodeInventory()
    InventoryReader(client, inv, system_id=system_id, sections=sections).run()
    inv.requests = client.requests - start
    return inv


def reset_request(inv: NodeInventory) -> tuple[str, str]:
    """``(target URI, ResetType)`` of the ``ComputerSystem.Reset`` that restarts ``inv``'s first system.

    ``On`` when the system is off, else the first of :data:`RESET_PREFERENCE` the service allows
    (``ResetType@Redfish.AllowableValues`` or its ActionInfo), else ``ForceRestart``; the target is the action's own
    ``target``, else ``<system>/Actions/ComputerSystem.Reset`` (DSP0268 ComputerSystem schema).
    """
    caps = inv.capabilities
    system = (inv.systems or [{}])[0]
    actions = caps.get("power_actions") or []
    reset = "On" if system.get("power_state") == "Off" else next(
        (a for a in RESET_PREFERENCE if a in actions), "ForceRestart")
    return caps.get("power_target") or child_uri(system["uri"], "Actions", "ComputerSystem.Reset"), reset
