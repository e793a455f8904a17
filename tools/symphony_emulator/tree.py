"""The Redfish resource tree of one generated BMC, as a pure function of its state.

``build_tree(spec, state)`` returns ``{uri: resource dict}`` for everything except the
time-dependent resources (Tasks, Sessions), which the BMC renders on request.  The tree
is rebuilt after every state change (writes are rare; GETs are served from a byte cache).
One function per resource family builds it: ServiceRoot/Systems/BIOS in ``tree_system``,
Chassis in ``tree_chassis``, Managers/UpdateService in ``tree_managers``; the vocabulary
(types, links, ids) is in ``resources``.

Shapes follow DMTF DSP0268 and the CSDL in ``../shared/reference/redfish-csdl``; every
``@odata.type`` used here names a namespace that exists there (a unit test checks it).
Ids follow the SKU (``system.system_id`` / ``chassis_id`` / ``manager_id``, firmware
``match.ids``) so the generated BMC looks like the capture the SKU was written from.
"""

from __future__ import annotations

import re

from symphony_emulator import tree_chassis, tree_managers, tree_nodes, tree_system
from symphony_emulator.resources import ROOT

# In this order: the tree's key order (and so every collection walk) stays what it always was.
_FAMILIES = (
    tree_system.add_services, tree_system.add_system, tree_system.add_processors, tree_system.add_memory,
    tree_system.add_storage, tree_system.add_bios,
    tree_chassis.add_pcie, tree_chassis.add_chassis, tree_chassis.add_power, tree_chassis.add_thermal,
    tree_managers.add_manager, tree_managers.add_update_service,
)


class Spec:
    """What a BMC is built from: twin node, SKU manifest, defects (read-only after start)."""

    def __init__(self, node, sku, defects=(), system_id=None):
        self.node = node
        self.sku = sku
        self.defects = list(defects)
        system = sku.get("system", {})
        # a blade node's own system (the twin's bmc_system_id) carries its defects; the BMC serves its siblings too
        self.system_id = system_id or node.get("bmc_system_id") or system.get("system_id", "1")
        self.node_ids = _node_ids(self.system_id, system.get("nodes_per_chassis", 1))
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
        gpus = sku["bom"]["gpus"]
        self.gpu_location = gpus.get("redfish_location", "processors")
        self.gpu_model = gpus.get("model", "GPU")
        self.gpu_vendor = {"nvidia": "NVIDIA", "amd": "AMD"}.get(gpus.get("vendor", "nvidia"), "NVIDIA")
        self.gpu_pcie = gpus.get("pcie") or {"width": 16, "gen": 5}
        self.by_kind = {}
        for d in self.defects:
            self.by_kind.setdefault(d["kind"], []).append(d)
        # what System and Chassis report (serial_mismatch: the defect's)
        self.serial_number = (self.defect("serial_mismatch") or {}).get("serial", node["serial"])

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

    def gpu_temps(self):
        """GPU index (1-based) -> temperature reading in °C: a ``gpu_hot`` defect's, else 38-41 °C."""
        out = {}
        for i in range(1, self.sku["bom"]["gpus"]["count"] + 1):
            hot = self.defect("gpu_hot", i)
            out[i] = float(hot["temp_c"]) if hot else 38.0 + (i % 4)
        return out


# What a node of a blade chassis has of its own: its ComputerSystem and what hangs below it.
_NODE_FAMILIES = (tree_system.add_system, tree_system.add_processors, tree_system.add_memory,
                  tree_system.add_storage, tree_system.add_bios)


def _node_ids(system_id, count):
    """The Systems ids of a chassis of ``count`` nodes: ``Node0`` -> ``Node0, Node1, ...`` (one: just itself)."""
    if count <= 1:
        return [system_id]
    prefix = re.sub(r"\d+$", "", system_id)
    return ["%s%d" % (prefix, i) for i in range(count)]


def build_tree(spec, state):
    """Every static resource of one BMC: ``{uri: dict}`` (uris without trailing slash).

    A SKU of ``nodes_per_chassis`` > 1 gets one system per node (the siblings without the node's defects), each
    with its own blade chassis in the enclosure (:func:`tree_nodes.add_nodes`).
    """
    t = {}
    for add in _FAMILIES:
        add(t, spec, state)
    siblings = []
    for sid in spec.node_ids:
        if sid != spec.system_id:
            sib = Spec(spec.node, spec.sku, (), system_id=sid)
            part = {}
            for add in _NODE_FAMILIES:
                add(part, sib, state)
            siblings.append((sib, part))
    if len(spec.node_ids) > 1:
        tree_nodes.add_nodes(t, spec, siblings)
    return t
