# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Read a BMC's Redfish tree into the normalised :class:`NodeInventory`.

``read_inventory(client, system_id=None, sections=ALL_SECTIONS)`` walks Systems, Chassis,
Managers and UpdateService with a :class:`RedfishClient` and fills components (cpu, dimm,
gpu, nic, dpu, nvme/drive, psu, fan, nvswitch, pcie), firmware, SEL entries, readings,
BIOS and capabilities.  Vendor differences handled here (``shared/cases/redfish-cases.md``):

* GPUs (R-31): ``Processors[ProcessorType=GPU]`` first; when no system lists any, the
  PCIe devices/functions whose class is display/accelerator and whose vendor is NVIDIA
  (0x10de) or AMD (0x1002) (or whose OEM block names the GPU, Supermicro) — a null
  ``Model`` falls back to the PCIe device/function names;
* GPU memory from the ``HBM`` Memory entries linked to the GPU (HGX baseboard), GPU PCIe
  link width/generation from ``Links.PCIeDevice``;
* firmware (R-27, R-29): Dell ``Previous-*`` ignored, ``Current-*`` dropped when the
  matching ``Installed-*`` exists; versions null/""/"N/A" are ``None`` (unknown);
  ``Disabled`` ``*Pending*`` placeholders skipped;
* a part of the tree that cannot be read (error, collection without Members, R-11) is
  listed in ``NodeInventory.incomplete`` as ``{"part", "uri", "reason"}``, never as empty;
* CPUs whose ``Model`` is null (DGX H100) take it from ``ProcessorId.EffectiveModel`` /
  ``EffectiveFamily`` when that holds a model string (the DGX's says "Intel(R) Xeon(R)
  Platinum 8480CL"), never from a bare family number; ``extra["model_source"]`` says so;
* a sensor whose ``Status.State`` is ``Absent`` (no transceiver in the port) has no health.

Requests: where the service advertises ``$expand`` (``ProtocolFeaturesSupported.ExpandQuery``)
the reader asks for Systems, Chassis and Managers expanded as deep as ``MaxLevels`` allows
(at most 2), then for the collections below them expanded one level, a few at a time (the
client's per-BMC cap), and keeps every resource that came back inline (by ``@odata.id``)
so nothing is fetched twice; what is still a bare link is fetched, again a few at a time.
A service that ignores ``$expand`` gets the same walk member by member.  PCIe functions are
read only for devices that are neither a NetworkAdapter's own device nor a GPU by their own
properties.

Absent parts (``Status.State == "Absent"``: empty DIMM or GPU slots) are kept as
components with ``state="Absent"`` so an audit can name the empty slot; count the
present ones with ``state != "Absent"``.
"""

from __future__ import annotations

import re

from .._core.errors import RedfishError
from .model import (
    Component,
    FirmwareItem,
    NodeInventory,
    Reading,
    SelEntry,
)
from .client import (
    SERVICE_ROOT,
    RedfishHTTPError,
)

ALL_SECTIONS = ("systems", "chassis", "managers", "firmware", "sel", "readings", "bios", "capabilities")
# "firmware_ids" (not in ALL_SECTIONS): the FirmwareInventory member list only (ids and links, one request
# per page instead of one per member) for readers that need to know what is inventoried, not its versions.
SECTIONS = ALL_SECTIONS + ("firmware_ids",)
LINK_KEYS = frozenset(["@odata.id", "@odata.type", "@odata.etag"])
# Collections read below the top-level resources (prefetched together, one level expanded).
_SYSTEM_COLLECTIONS = ("Memory", "Processors", "Storage")
_CHASSIS_COLLECTIONS = ("Drives",)
# Model strings in ProcessorId.EffectiveFamily/EffectiveModel: not a bare family/model number ("0x06", "143").
_NUMERIC_ID = re.compile(r"^(0x)?[0-9a-f]+h?$", re.I)
GPU_VENDOR_IDS = {"0x10de": "NVIDIA", "0x1002": "AMD"}
GPU_CLASSES = ("DisplayController", "ProcessingAccelerators")
UNKNOWN_VERSIONS = {"", "N/A", "NA", "n/a", "na", "Unknown", "unknown", "null", "None"}
SEL_LOG_IDS = {"sel", "eventlog", "log", "log1", "iml"}
SEL_SKIP_IDS = {"journal", "auditlog", "dump", "diagnosticlog", "hostlogger", "postcodes", "debugtokenservice",
                "faultlog", "fdr", "lclog", "decodedlog", "crashdump"}
_GPU_WORDS = re.compile(r"\b(GPU|H100|H200|H800|A100|A800|B100|B200|GB200|L40S?|MI\d{3}X?|INSTINCT|TESLA)\b", re.I)


def _link(obj, key):
    v = (obj or {}).get(key)
    if isinstance(v, dict):
        return v.get("@odata.id")
    return None


def _links_list(obj, key):
    v = ((obj or {}).get("Links") or {}).get(key)
    if isinstance(v, dict):
        return [v.get("@odata.id")] if v.get("@odata.id") else []
    if isinstance(v, list):
        return [x.get("@odata.id") for x in v if isinstance(x, dict) and x.get("@odata.id")]
    return []


def _is_link(obj):
    return isinstance(obj, dict) and "@odata.id" in obj and obj.keys() <= LINK_KEYS


def _norm(uri):
    return uri.rstrip("/") if isinstance(uri, str) and uri != "/" else uri


def _status(obj):
    st = (obj or {}).get("Status") or {}
    if not isinstance(st, dict):
        return None, None
    return st.get("State"), st.get("Health")


def _str(v):
    if v is None:
        return None
    if isinstance(v, str):
        v = v.strip()
        return v or None
    return str(v)


def _pcie_gen(text):
    """``"Gen5"`` -> 5; None when not reported."""
    if not text:
        return None
    m = re.search(r"(\d+)", str(text))
    return int(m.group(1)) if m else None


def _location(obj):
    loc = (obj or {}).get("Location") or {}
    part = loc.get("PartLocation") or {}
    return _str(part.get("ServiceLabel")) or _str(loc.get("Info"))


def normalise_version(version):
    """Firmware version -> str or None (null, "", "N/A" and the like are unknown, R-29)."""
    if version is None:
        return None
    text = str(version).strip()
    if text in UNKNOWN_VERSIONS:
        return None
    return text


class _Reader:
    def __init__(self, client, inv, system_id=None, sections=ALL_SECTIONS):
        self.c = client
        self.inv = inv
        self.system_id = system_id
        self.sections = set(sections)
        self._seen_components = set()
        self._pcie_cache = {}
        self.cache = {}          # @odata.id -> resource body seen inline or fetched during this read
        self.nic_devices = set()  # PCIe devices a NetworkAdapter names as its own (Controllers[].Links)
        levels = getattr(client, "expand_levels", None)
        self.levels = levels() if callable(levels) else 0

    # ------------------------------------------------------------------ helpers
    def incomplete(self, part, uri, exc):
        self.inv.incomplete.append({"part": part, "uri": uri, "reason": str(exc)})

    def remember(self, body):
        """Keep every resource in ``body`` (itself and whatever came back expanded inline)."""
        stack = [body]
        while stack:
            obj = stack.pop()
            if isinstance(obj, dict):
                oid = obj.get("@odata.id")
                if isinstance(oid, str) and "#" not in oid and not obj.keys() <= LINK_KEYS:
                    key = _norm(oid)
                    old = self.cache.get(key)
                    if old is None or len(obj) >= len(old):
                        self.cache[key] = obj
                stack.extend(v for v in obj.values() if isinstance(v, (dict, list)))
            elif isinstance(obj, list):
                stack.extend(v for v in obj if isinstance(v, (dict, list)))
        return body

    def cached(self, uri):
        return self.cache.get(_norm(uri)) if uri else None

    def get(self, part, uri):
        hit = self.cached(uri)
        if hit is not None:
            return hit
        try:
            return self.remember(self.c.get(uri))
        except RedfishError as exc:
            self.incomplete(part, uri, exc)
            return None

    def _from_cache(self, uri):
        """Members of a collection already seen, as bodies, or None when something is missing."""
        coll = self.cached(uri)
        if coll is None or not isinstance(coll.get("Members"), list) or coll.get("Members@odata.nextLink"):
            return None
        out, seen = [], set()
        for m in coll["Members"]:
            if not isinstance(m, dict):
                continue
            oid = _norm(m.get("@odata.id"))
            if oid in seen:
                continue
            seen.add(oid)
            if _is_link(m):
                m = self.cached(oid)
                if m is None:
                    return None
            out.append(m)
        count = coll.get("Members@odata.count")
        if isinstance(count, int) and count != len(out):
            return None   # let the client page and warn
        return out

    def members(self, part, uri, levels=1):
        hit = self._from_cache(uri)
        if hit is not None:
            return hit
        errors = []
        try:
            items = self.c.members(uri, errors=errors, levels=levels)
        except RedfishError as exc:
            self.incomplete(part, uri, exc)
            return []
        for e in errors:
            self.incomplete(part, e["uri"], e["reason"])
        for item in items:
            self.remember(item)
        return items

    def fetch(self, part, uris):
        """Bodies of ``uris`` (cache first, the rest a few at a time); unreadable ones are incomplete."""
        out = {}
        todo = []
        for u in uris:
            hit = self.cached(u)
            if hit is not None:
                out[u] = hit
            elif u not in todo:
                todo.append(u)
        if todo:
            for u, (body, exc) in zip(todo, self._get_many(todo)):
                if exc is not None:
                    self.incomplete(part, u, exc)
                else:
                    out[u] = self.remember(body)
        return [out[u] for u in uris if u in out]

    def _get_many(self, uris):
        many = getattr(self.c, "get_many", None)
        if callable(many):
            return many(uris, errors=[])
        results = []
        for u in uris:
            try:
                results.append((self.c.get(u), None))
            except RedfishError as exc:
                results.append((None, exc))
        return results

    def prefetch(self, wanted):
        """GET ``[(uri, levels[, kind])]`` expanded, a few at a time, and remember what came back.

        Collections already complete in the cache are skipped.  Failures are left to the
        reading that follows (which records them as incomplete with the reason).
        """
        if not self.levels:
            return
        urls = []
        for want in wanted:
            uri = want[0]
            if uri and self._from_cache(uri) is None:
                url = self.c.expand_url(*want)
                if url not in urls:
                    urls.append(url)
        if not urls:
            return
        for body, exc in self._get_many(urls):
            if exc is None and isinstance(body, dict):
                self.remember(body)

    def add(self, comp):
        key = comp.uri or "%s:%s" % (comp.kind, comp.id)
        if key in self._seen_components:
            return None
        self._seen_components.add(key)
        self.inv.components.append(comp)
        return comp

    def pcie_device(self, uri):
        hit = self.cached(uri)
        if hit is not None:
            return hit
        if uri not in self._pcie_cache:
            try:
                self._pcie_cache[uri] = self.c.get(uri)
            except RedfishHTTPError as exc:
                if exc.status != 404:
                    self.incomplete("pcie", uri, exc)
                self._pcie_cache[uri] = None
            except RedfishError as exc:
                self.incomplete("pcie", uri, exc)
                self._pcie_cache[uri] = None
        return self._pcie_cache[uri]

    # ------------------------------------------------------------------ top level
    def run(self):
        root = self.c.service_root or self.get("service", SERVICE_ROOT) or {}
        self.inv.service = {
            "vendor": _str(root.get("Vendor")),
            "product": _str(root.get("Product")),
            "redfish_version": _str(root.get("RedfishVersion")),
            "uuid": _str(root.get("UUID")),
        }
        self.prefetch_tree(root)
        systems = []
        if _link(root, "Systems"):
            systems = self.members("systems", root["Systems"]["@odata.id"])
        if self.system_id:
            systems = [s for s in systems if s.get("Id") == self.system_id]
            if not systems:
                self.incomplete("systems", _link(root, "Systems"), "system %r not found" % self.system_id)
        gpu_memory = {}
        for s in systems:
            self.read_system(s, gpu_memory)
        chassis = self.members("chassis", root["Chassis"]["@odata.id"]) if _link(root, "Chassis") else []
        for ch in chassis:
            self.read_chassis(ch)
        if not self.inv.of_kind("gpu"):
            self.gpus_from_pcie(systems, chassis)
        if "managers" in self.sections and _link(root, "Managers"):
            for m in self.members("managers", root["Managers"]["@odata.id"]):
                self.read_manager(m)
        upd = _link(root, "UpdateService")
        if upd and self.sections & {"firmware", "firmware_ids", "capabilities"}:
            self.read_update_service(upd)
        if "readings" in self.sections and _link(root, "ThermalEquipment"):
            self.read_thermal_equipment(root["ThermalEquipment"]["@odata.id"])
        self.inv.capabilities["expand_query"] = self.c.expand_param()

    def prefetch_tree(self, root):
        """Two rounds of expanded GETs that bring most of the tree the reader walks.

        Round 1: Systems, Chassis, Managers (``$levels`` up to 2), UpdateService (1).  Round 2:
        the collections below each system and chassis (Memory, Processors, Storage with its
        Drives, Drives, Sensors, PowerSupplies, Fans) and the LogServices, one level expanded,
        and NetworkAdapters with ``*`` two levels deep (ports and PCIe devices named by the
        adapters' Controllers come along).  No-op where the service does not advertise ``$expand``.
        """
        if not self.levels:
            return
        top = [(_link(root, "Systems"), 2), (_link(root, "Chassis"), 2)]
        if self.sections & {"managers", "sel", "capabilities"}:
            top.append((_link(root, "Managers"), 2))
        if self.sections & {"firmware", "firmware_ids", "capabilities"}:
            top.append((_link(root, "UpdateService"), 1))
        self.prefetch([t for t in top if t[0]])
        wanted = []
        for s in self._from_cache(_link(root, "Systems")) or []:
            wanted += [(_link(s, k), 2 if k == "Storage" else 1) for k in _SYSTEM_COLLECTIONS]
            if "sel" in self.sections:
                wanted.append((_link(s, "LogServices"), 1))
        for ch in self._from_cache(_link(root, "Chassis")) or []:
            wanted += [(_link(ch, k), 1) for k in _CHASSIS_COLLECTIONS]
            # "*" two levels deep brings each adapter's ports and PCIe device through its
            # Controllers[].Links (as the Supermicro capture links them) in this one request
            wanted.append((_link(ch, "NetworkAdapters"), 2, "*"))
            if "readings" in self.sections:
                wanted.append((_link(ch, "Sensors"), 1))
            for sub, key in (("PowerSubsystem", "PowerSupplies"), ("ThermalSubsystem", "Fans")):
                body = self.cached(_link(ch, sub))
                if body is not None:
                    wanted.append((_link(body, key), 1))
        if "sel" in self.sections:
            for m in self._from_cache(_link(root, "Managers")) or []:
                wanted.append((_link(m, "LogServices"), 1))
        self.prefetch([w for w in wanted if w[0]])

    # ------------------------------------------------------------------ systems
    def read_system(self, s, gpu_memory):
        state, health = _status(s)
        summary = {
            "id": s.get("Id"), "uri": s.get("@odata.id"), "manufacturer": _str(s.get("Manufacturer")),
            "model": _str(s.get("Model")), "serial": _str(s.get("SerialNumber")), "sku": _str(s.get("SKU")),
            "part_number": _str(s.get("PartNumber")), "uuid": _str(s.get("UUID")),
            "power_state": s.get("PowerState"), "state": state, "health": health,
            "health_rollup": ((s.get("Status") or {}).get("HealthRollup")),
            "bios_version": _str(s.get("BiosVersion")),
            "processor_count": (s.get("ProcessorSummary") or {}).get("Count"),
            "memory_gib": (s.get("MemorySummary") or {}).get("TotalSystemMemoryGiB"),
            "chassis": _links_list(s, "Chassis"),
        }
        self.inv.systems.append(summary)
        if re.search(r"bluefield|\bDPU\b|smartnic", " ".join(str(s.get(k) or "") for k in ("Model", "Id")), re.I):
            # the BMC of a DPU (BlueField-3) describes the DPU itself as its system
            self.add(Component(kind="dpu", id=str(s.get("Id")), uri=s.get("@odata.id", ""), name=s.get("Name") or "",
                               model=summary["model"], manufacturer=summary["manufacturer"], serial=summary["serial"],
                               part_number=summary["part_number"], state=state, health=health))
        # memory first: HBM entries belong to GPUs
        memory = self.members("memory", s["Memory"]["@odata.id"]) if _link(s, "Memory") else []
        procs = self.members("processors", s["Processors"]["@odata.id"]) if _link(s, "Processors") else []
        gpu_uris = {p.get("@odata.id") for p in procs if (p.get("ProcessorType") == "GPU")}
        for m in memory:
            linked = set(_links_list(m, "Processors"))
            mtype = str(m.get("MemoryDeviceType") or "")
            if not linked:
                mid = str(m.get("Id") or "")
                linked = {u for u in gpu_uris if u and mid.startswith(u.rstrip("/").rsplit("/", 1)[-1] + "_")}
            if mtype.upper().startswith("HBM") or (linked & gpu_uris):
                for p in linked or [None]:
                    gpu_memory[p] = gpu_memory.get(p, 0) + (m.get("CapacityMiB") or 0)
                continue
            self.add(self.dimm(m))
        for p in procs:
            self.add(self.processor(p, gpu_memory))
        if _link(s, "Storage"):
            for st in self.members("storage", s["Storage"]["@odata.id"]):
                refs = [d for d in (st.get("Drives") or []) if isinstance(d, dict) and d.get("@odata.id")]
                inline = [d for d in refs if not _is_link(d)]
                for d in inline + self.fetch("drives", [d["@odata.id"] for d in refs if _is_link(d)]):
                    self.add(self.drive(d))
        if "bios" in self.sections and _link(s, "Bios") and not self.inv.bios:
            self.read_bios(s, s["Bios"]["@odata.id"])
        if "capabilities" in self.sections:
            self.system_capabilities(s)
        if "sel" in self.sections and _link(s, "LogServices"):
            self.read_logs(s["LogServices"]["@odata.id"])

    def _errs(self, part):
        reader = self

        class _Sink(list):
            def append(self, item):
                reader.incomplete(part, item.get("uri"), item.get("reason"))
        return _Sink()

    def dimm(self, m):
        state, health = _status(m)
        mib = m.get("CapacityMiB")
        return Component(
            kind="dimm", id=str(m.get("Id")), uri=m.get("@odata.id", ""), name=m.get("Name") or "",
            model=_str(m.get("PartNumber")) or _str(m.get("Model")), manufacturer=_str(m.get("Manufacturer")),
            serial=_str(m.get("SerialNumber")), part_number=_str(m.get("PartNumber")),
            location=_location(m) or _str(m.get("DeviceLocator")), state=state, health=health,
            memory_gib=(mib / 1024.0) if isinstance(mib, (int, float)) else None,
            extra={k: m.get(k) for k in ("MemoryDeviceType", "OperatingSpeedMhz", "ErrorCorrection")
                   if m.get(k) is not None})

    def processor(self, p, gpu_memory):
        state, health = _status(p)
        ptype = p.get("ProcessorType")
        kind = "gpu" if ptype == "GPU" else ("cpu" if ptype in ("CPU", None) else "other")
        if ptype is None and _GPU_WORDS.search(str(p.get("Model") or "")):
            kind = "gpu"
        comp = Component(
            kind=kind, id=str(p.get("Id")), uri=p.get("@odata.id", ""), name=p.get("Name") or "",
            model=_str(p.get("Model")), manufacturer=_str(p.get("Manufacturer")),
            serial=_str(p.get("SerialNumber")), part_number=_str(p.get("PartNumber")),
            firmware_version=normalise_version(p.get("FirmwareVersion")), location=_location(p),
            state=state, health=health,
            extra={k: p.get(k) for k in ("ProcessorType", "TotalCores", "TotalThreads", "MaxSpeedMHz",
                                         "InstructionSet") if p.get(k) is not None})
        if kind == "cpu" and not comp.model:
            comp.model, source = _model_from_processor_id(p)
            if source:
                comp.extra["model_source"] = source
        if kind == "gpu":
            mib = gpu_memory.get(p.get("@odata.id"))
            if not mib:
                mib = (p.get("MemorySummary") or {}).get("TotalMemorySizeMiB")
            comp.memory_gib = round(mib / 1024.0, 2) if mib else None
            dev_uri = _links_list(p, "PCIeDevice")
            if dev_uri:
                dev = self.pcie_device(dev_uri[0])
                if dev:
                    self.apply_pcie(comp, dev)
                    if not comp.model:
                        comp.model = _str(dev.get("Model")) or _str(dev.get("Name"))
        return comp

    def apply_pcie(self, comp, dev):
        iface = dev.get("PCIeInterface") or {}
        comp.pcie_width = iface.get("LanesInUse")
        comp.pcie_width_max = iface.get("MaxLanes")
        comp.pcie_gen = _pcie_gen(iface.get("PCIeType"))
        comp.pcie_gen_max = _pcie_gen(iface.get("MaxPCIeType"))
        comp.extra.setdefault("pcie_device", dev.get("@odata.id"))

    def drive(self, d):
        state, health = _status(d)
        proto = d.get("Protocol")
        cap = d.get("CapacityBytes")
        return Component(
            kind="nvme" if proto == "NVMe" else "drive", id=str(d.get("Id")), uri=d.get("@odata.id", ""),
            name=d.get("Name") or "", model=_str(d.get("Model")), manufacturer=_str(d.get("Manufacturer")),
            serial=_str(d.get("SerialNumber")), part_number=_str(d.get("PartNumber")),
            firmware_version=normalise_version(d.get("Revision")), location=_location(d), state=state,
            health=health, capacity_gb=(cap / 1e9) if isinstance(cap, (int, float)) and cap else None,
            extra={k: d.get(k) for k in ("Protocol", "MediaType") if d.get(k) is not None})

    def read_bios(self, s, uri):
        try:
            body, headers = self.c.get_with_headers(uri)
        except RedfishError as exc:
            self.incomplete("bios", uri, exc)
            return
        settings = body.get("@Redfish.Settings") or {}
        settings_obj = (settings.get("SettingsObject") or {}).get("@odata.id") if isinstance(settings, dict) else None
        notes = []
        if isinstance(settings, dict) and settings and not settings_obj:
            notes.append("@Redfish.Settings has no SettingsObject; PATCH the Bios resource itself (R-5)")
        messages = [self.c.registries.describe(m) for m in (settings.get("Messages") or [])] \
            if isinstance(settings, dict) else []
        for m in messages:
            if "SettingsFailed" in str(m.get("MessageId")):
                notes.append("the previous BIOS settings apply failed: %s" % m.get("Message"))
        self.inv.bios = {
            "uri": uri,
            "system": s.get("Id"),
            "attributes": body.get("Attributes") or {},
            "attribute_registry": body.get("AttributeRegistry"),
            "settings_object": settings_obj,
            "settings_etag": settings.get("ETag") if isinstance(settings, dict) else None,
            "etag": headers.get("ETag") or body.get("@odata.etag"),
            "supported_apply_times": list(settings.get("SupportedApplyTimes") or [])
            if isinstance(settings, dict) else [],
            "messages": messages,
            "notes": notes,
        }

    def system_capabilities(self, s):
        caps = self.inv.capabilities
        reset = ((s.get("Actions") or {}).get("#ComputerSystem.Reset") or {})
        if reset and "power_actions" not in caps:
            values = reset.get("ResetType@Redfish.AllowableValues")
            if values is None and reset.get("@Redfish.ActionInfo"):
                info = self.get("capabilities", reset["@Redfish.ActionInfo"]) or {}
                for prm in info.get("Parameters") or []:
                    if prm.get("Name") == "ResetType":
                        values = prm.get("AllowableValues")
            caps["power_actions"] = list(values or [])
            caps["power_target"] = reset.get("target")
            caps["power_system"] = s.get("Id")
        if _link(s, "VirtualMedia") and s["VirtualMedia"]["@odata.id"] not in caps.get("virtual_media", []):
            caps.setdefault("virtual_media", []).append(s["VirtualMedia"]["@odata.id"])
        boot = s.get("Boot") or {}
        if boot.get("BootSourceOverrideTarget@Redfish.AllowableValues") and "boot_override_targets" not in caps:
            caps["boot_override_targets"] = list(boot["BootSourceOverrideTarget@Redfish.AllowableValues"])

    # ------------------------------------------------------------------ logs
    def read_logs(self, uri):
        for svc in self.members("sel", uri):
            sid = str(svc.get("Id") or "").lower()
            etype = svc.get("LogEntryType")
            if sid in SEL_SKIP_IDS:
                continue
            if not (etype in ("SEL", "Event") or (sid in SEL_LOG_IDS and etype not in ("OEM", "Multiple"))):
                continue
            entries = _link(svc, "Entries")
            if not entries:
                continue
            for e in self.members("sel", entries):
                self.inv.sel.append(SelEntry(
                    id=str(e.get("Id")), created=e.get("Created"),
                    severity=e.get("Severity") or e.get("MessageSeverity"),
                    message=e.get("Message") or "", message_id=e.get("MessageId"),
                    sensor_type=e.get("SensorType"), log=svc.get("@odata.id", "")))

    # ------------------------------------------------------------------ chassis
    def read_chassis(self, ch):
        state, health = _status(ch)
        self.inv.chassis.append({
            "id": ch.get("Id"), "uri": ch.get("@odata.id"), "manufacturer": _str(ch.get("Manufacturer")),
            "model": _str(ch.get("Model")), "serial": _str(ch.get("SerialNumber")), "sku": _str(ch.get("SKU")),
            "part_number": _str(ch.get("PartNumber")), "chassis_type": ch.get("ChassisType"),
            "power_state": ch.get("PowerState"), "state": state, "health": health,
        })
        if "nvswitch" in str(ch.get("Model") or "").lower() or re.search(r"NVSwitch_\d+$", str(ch.get("Id"))):
            if not str(ch.get("Id")).startswith(("HGX_ERoT", "ERoT")):
                self.add(Component(kind="nvswitch", id=str(ch.get("Id")), uri=ch.get("@odata.id", ""),
                                   name=ch.get("Name") or "", model=_str(ch.get("Model")),
                                   manufacturer=_str(ch.get("Manufacturer")), serial=_str(ch.get("SerialNumber")),
                                   part_number=_str(ch.get("PartNumber")), state=state, health=health))
        if _link(ch, "NetworkAdapters"):
            # a card that carries its own computer system is a DPU/SmartNIC (DMTF smartnic)
            card_soc = ch.get("ChassisType") == "Card" and bool(_links_list(ch, "ComputerSystems"))
            adapters = self.members("network_adapters", ch["NetworkAdapters"]["@odata.id"])
            # every adapter's port collection in one round, a few at a time
            self.prefetch([(_link(na, "Ports") or _link(na, "NetworkPorts"), 1) for na in adapters
                           if _link(na, "Ports") or _link(na, "NetworkPorts")])
            for na in adapters:
                comp = self.adapter(na)
                if card_soc:
                    comp.kind = "dpu"
                self.add(comp)
        if _link(ch, "Drives"):
            for d in self.members("drives", ch["Drives"]["@odata.id"]):
                self.add(self.drive(d))
        self.read_power(ch)
        self.read_thermal(ch)
        if "readings" in self.sections:
            got = []
            if _link(ch, "Sensors"):
                got = [self.sensor(sn) for sn in self.members("readings", ch["Sensors"]["@odata.id"])]
                self.inv.readings.extend(got)
            if not any(r.kind in ("temperature", "fan", "power") for r in got):
                # Sensors missing or thin (Supermicro lists one): the legacy resources hold them
                self.legacy_readings(ch)
            if _link(ch, "LeakDetectors"):
                for ld in self.members("readings", ch["LeakDetectors"]["@odata.id"]):
                    self.inv.readings.append(self.leak(ld))

    def adapter(self, na):
        state, health = _status(na)
        ctrl = (na.get("Controllers") or [{}])[0] or {}
        for c in na.get("Controllers") or []:
            if isinstance(c, dict):
                self.nic_devices.update(_norm(u) for u in _links_list(c, "PCIeDevices"))
        ports = []
        ports_uri = _link(na, "Ports") or _link(na, "NetworkPorts")
        if ports_uri:
            ports = self.members("network_ports", ports_uri)
        speeds = []
        for p in ports:
            for key in ("CurrentSpeedGbps", "MaxSpeedGbps"):
                if isinstance(p.get(key), (int, float)) and p.get(key):
                    speeds.append(float(p[key]))
                    break
            else:
                mbps = p.get("CurrentLinkSpeedMbps")
                if not mbps:
                    caps = p.get("SupportedLinkCapabilities") or []
                    mbps = max([c.get("LinkSpeedMbps") or 0 for c in caps if isinstance(c, dict)] or [0])
                if mbps:
                    speeds.append(float(mbps) / 1000.0)
        port_count = len(ports) or (ctrl.get("ControllerCapabilities") or {}).get("NetworkPortCount")
        text = " ".join(str(na.get(k) or "") for k in ("Model", "Name", "Id", "PartNumber"))
        kind = "dpu" if re.search(r"bluefield|\bDPU\b|smartnic", text, re.I) else "nic"
        comp = Component(
            kind=kind, id=str(na.get("Id")), uri=na.get("@odata.id", ""), name=na.get("Name") or "",
            model=_str(na.get("Model")), manufacturer=_str(na.get("Manufacturer")),
            serial=_str(na.get("SerialNumber")), part_number=_str(na.get("PartNumber")),
            firmware_version=normalise_version(ctrl.get("FirmwarePackageVersion")),
            location=_location(ctrl) or _location(na), state=state, health=health,
            ports=port_count, speed_gbps=max(speeds) if speeds else None)
        iface = ctrl.get("PCIeInterface")
        if iface:
            self.apply_pcie(comp, {"PCIeInterface": iface})
        return comp

    def read_power(self, ch):
        ps_uri = None
        if _link(ch, "PowerSubsystem"):
            sub = self.get("psu", ch["PowerSubsystem"]["@odata.id"]) or {}
            ps_uri = _link(sub, "PowerSupplies")
            if ps_uri:
                for p in self.members("psu", ps_uri):
                    self.add(self.psu(p))
        if not ps_uri and _link(ch, "Power"):
            power = self.get("psu", ch["Power"]["@odata.id"]) or {}
            for i, p in enumerate(power.get("PowerSupplies") or []):
                comp = self.psu(p)
                comp.id = comp.id if comp.id not in (None, "None") else str(p.get("MemberId", i))
                comp.uri = comp.uri or "%s#/PowerSupplies/%d" % (ch["Power"]["@odata.id"], i)
                self.add(comp)
            ch["_legacy_power"] = power

    def psu(self, p):
        state, health = _status(p)
        return Component(
            kind="psu", id=str(p.get("Id") or p.get("MemberId")), uri=p.get("@odata.id", ""),
            name=p.get("Name") or "", model=_str(p.get("Model")), manufacturer=_str(p.get("Manufacturer")),
            serial=_str(p.get("SerialNumber")), part_number=_str(p.get("PartNumber")),
            firmware_version=normalise_version(p.get("FirmwareVersion")), location=_location(p), state=state,
            health=health, extra={k: p.get(k) for k in ("PowerCapacityWatts", "PowerSupplyType")
                                  if p.get(k) is not None})

    def read_thermal(self, ch):
        fans_uri = None
        if _link(ch, "ThermalSubsystem"):
            sub = self.get("fans", ch["ThermalSubsystem"]["@odata.id"]) or {}
            fans_uri = _link(sub, "Fans")
            if fans_uri:
                for f in self.members("fans", fans_uri):
                    comp = self.fan(f)
                    self.add(comp)
            if "readings" in self.sections:
                if _link(sub, "CoolantConnectors"):
                    for cc in self.members("readings", sub["CoolantConnectors"]["@odata.id"]):
                        self.coolant(cc)
                leak = _link(sub, "LeakDetection")
                if leak:
                    ld = self.get("readings", leak) or {}
                    if _link(ld, "LeakDetectors"):
                        for d in self.members("readings", ld["LeakDetectors"]["@odata.id"]):
                            self.inv.readings.append(self.leak(d))
        if not fans_uri and _link(ch, "Thermal"):
            thermal = self.get("fans", ch["Thermal"]["@odata.id"]) or {}
            for i, f in enumerate(thermal.get("Fans") or []):
                comp = self.fan(f)
                comp.id = comp.id if comp.id not in (None, "None") else str(f.get("MemberId", i))
                comp.uri = comp.uri or "%s#/Fans/%d" % (ch["Thermal"]["@odata.id"], i)
                self.add(comp)
            ch["_legacy_thermal"] = thermal

    def fan(self, f):
        state, health = _status(f)
        return Component(
            kind="fan", id=str(f.get("Id") or f.get("MemberId") or f.get("Name")), uri=f.get("@odata.id", ""),
            name=f.get("Name") or f.get("FanName") or "", model=_str(f.get("Model")),
            manufacturer=_str(f.get("Manufacturer")), serial=_str(f.get("SerialNumber")),
            part_number=_str(f.get("PartNumber")), location=_location(f), state=state, health=health)

    # ------------------------------------------------------------------ readings
    def sensor(self, s):
        rtype = s.get("ReadingType")
        units = s.get("ReadingUnits")
        ctx = s.get("PhysicalContext")
        kind = _reading_kind(rtype, units, ctx, s.get("Id"))
        health = _reading_health(s)
        thr = s.get("Thresholds") or {}
        uc = (thr.get("UpperCritical") or {}).get("Reading") if isinstance(thr, dict) else None
        return Reading(id=str(s.get("Id")), kind=kind, value=s.get("Reading"), units=units,
                       name=s.get("Name") or "", health=health, upper_critical=uc, physical_context=ctx)

    def legacy_readings(self, ch):
        thermal = ch.get("_legacy_thermal")
        if thermal is None and _link(ch, "Thermal"):
            thermal = self.get("readings", ch["Thermal"]["@odata.id"]) or {}
        for i, t in enumerate((thermal or {}).get("Temperatures") or []):
            health = _reading_health(t)
            self.inv.readings.append(Reading(
                id=str(t.get("MemberId") or t.get("Name") or i), kind="temperature", value=t.get("ReadingCelsius"),
                units="Cel", name=t.get("Name") or "", health=health,
                upper_critical=t.get("UpperThresholdCritical"), physical_context=t.get("PhysicalContext")))
        for i, f in enumerate((thermal or {}).get("Fans") or []):
            health = _reading_health(f)
            self.inv.readings.append(Reading(
                id=str(f.get("MemberId") or f.get("Name") or i), kind="fan", value=f.get("Reading"),
                units=f.get("ReadingUnits"), name=f.get("Name") or f.get("FanName") or "", health=health,
                physical_context=f.get("PhysicalContext")))
        power = ch.get("_legacy_power")
        if power is None and _link(ch, "Power"):
            power = self.get("readings", ch["Power"]["@odata.id"]) or {}
        for i, pc in enumerate((power or {}).get("PowerControl") or []):
            health = _status(pc)[1]
            self.inv.readings.append(Reading(
                id=str(pc.get("MemberId") or pc.get("Name") or i), kind="power", value=pc.get("PowerConsumedWatts"),
                units="W", name=pc.get("Name") or "", health=health, physical_context=pc.get("PhysicalContext")))

    def coolant(self, cc):
        health = _status(cc)[1]
        base = str(cc.get("Id"))
        for key, kind, units in (("SupplyTemperatureCelsius", "coolant_temperature", "Cel"),
                                 ("ReturnTemperatureCelsius", "coolant_temperature", "Cel"),
                                 ("DeltaTemperatureCelsius", "coolant_temperature", "Cel"),
                                 ("FlowLitersPerMinute", "coolant_flow", "L/min"),
                                 ("SupplyPressurekPa", "coolant_pressure", "kPa"),
                                 ("ReturnPressurekPa", "coolant_pressure", "kPa"),
                                 ("DeltaPressurekPa", "coolant_pressure", "kPa")):
            v = cc.get(key)
            if isinstance(v, dict) and "Reading" in v:
                self.inv.readings.append(Reading(
                    id="%s.%s" % (base, key), kind=kind, value=v.get("Reading"), units=units,
                    name="%s %s" % (cc.get("Name") or base, key), health=health, physical_context="Liquid"))

    def leak(self, d):
        health = _status(d)[1]
        state = d.get("DetectorState")
        return Reading(id=str(d.get("Id")), kind="leak", value=None, units=None, name=d.get("Name") or "",
                       health=state or health, physical_context=d.get("PhysicalContext"))

    def read_thermal_equipment(self, uri):
        te = self.get("readings", uri) or {}
        for cdu in self.members("readings", te["CDUs"]["@odata.id"]) if _link(te, "CDUs") else []:
            state, health = _status(cdu)
            self.inv.chassis.append({"id": cdu.get("Id"), "uri": cdu.get("@odata.id"), "kind": "cdu",
                                     "manufacturer": _str(cdu.get("Manufacturer")), "model": _str(cdu.get("Model")),
                                     "serial": _str(cdu.get("SerialNumber")), "state": state, "health": health})
            for key in ("PrimaryCoolantConnectors", "SecondaryCoolantConnectors"):
                if _link(cdu, key):
                    for cc in self.members("readings", cdu[key]["@odata.id"]):
                        self.coolant(cc)
            leak = _link(cdu, "LeakDetection")
            if leak:
                ld = self.get("readings", leak) or {}
                if _link(ld, "LeakDetectors"):
                    for d in self.members("readings", ld["LeakDetectors"]["@odata.id"]):
                        self.inv.readings.append(self.leak(d))

    # ------------------------------------------------------------------ GPU fallback
    def gpus_from_pcie(self, systems, chassis):
        sources = [s["PCIeDevices"]["@odata.id"] for s in systems if _link(s, "PCIeDevices")]
        sources += [c["PCIeDevices"]["@odata.id"] for c in chassis if _link(c, "PCIeDevices")]
        for src in sources:
            devices = self.members("pcie", src)
            need = [dev for dev in devices if _link(dev, "PCIeFunctions") and not self._known_device(dev)]
            self.prefetch([(_link(dev, "PCIeFunctions"), 1) for dev in need])
            for dev in devices:
                funcs = []
                furi = _link(dev, "PCIeFunctions")
                if _norm(dev.get("@odata.id")) in self.nic_devices:
                    continue  # a NetworkAdapter's own device (its Controllers link it)
                if furi and not self._known_device(dev):
                    funcs = self.members("pcie", furi)
                if not _is_gpu_device(dev, funcs):
                    continue
                state, health = _status(dev)
                fn_oem = _oem_gpu(funcs)
                model = _str(dev.get("Model")) or _str(fn_oem.get("GPUModel")) or _str(dev.get("Name")) or \
                    next((_str(f.get("Name")) for f in funcs if _str(f.get("Name"))), None)
                vendor = next((GPU_VENDOR_IDS.get(str(f.get("VendorId")).lower()) for f in funcs
                               if GPU_VENDOR_IDS.get(str(f.get("VendorId")).lower())), None)
                smc = (dev.get("Oem") or {}).get("Supermicro") or {}
                maker = _str(dev.get("Manufacturer")) or vendor or _str(fn_oem.get("GPUVendor")) or \
                    _str(smc.get("GPUVendor"))
                comp = Component(
                    kind="gpu", id=str(dev.get("Id")), uri=dev.get("@odata.id", ""), name=dev.get("Name") or "",
                    model=model, manufacturer=maker,
                    serial=_str(dev.get("SerialNumber")), part_number=_str(dev.get("PartNumber")),
                    firmware_version=normalise_version(dev.get("FirmwareVersion") or fn_oem.get("GPUFWRevision")),
                    location=_location(dev), state=state, health=health, extra={"source": "PCIeDevices"})
                self.apply_pcie(comp, dev)
                self.add(comp)

    def _known_device(self, dev):
        """True when the PCIe functions cannot change what the device is read as: a NetworkAdapter's
        own device, or a GPU by its own properties with model, maker and firmware reported."""
        if _norm(dev.get("@odata.id")) in self.nic_devices:
            return True
        return _gpu_by_device(dev) and bool(_str(dev.get("Model")) and _str(dev.get("FirmwareVersion")) and (
            _str(dev.get("Manufacturer")) or _oem_gpu_vendor(dev)))

    # ------------------------------------------------------------------ managers
    def read_manager(self, m):
        state, health = _status(m)
        self.inv.managers.append({
            "id": m.get("Id"), "uri": m.get("@odata.id"), "model": _str(m.get("Model")),
            "manager_type": m.get("ManagerType"), "firmware_version": normalise_version(m.get("FirmwareVersion")),
            "state": state, "health": health, "power_state": m.get("PowerState"),
        })
        if "capabilities" in self.sections:
            caps = self.inv.capabilities
            if _link(m, "VirtualMedia") and m["VirtualMedia"]["@odata.id"] not in caps.get("virtual_media", []):
                caps.setdefault("virtual_media", []).append(m["VirtualMedia"]["@odata.id"])
            reset = (m.get("Actions") or {}).get("#Manager.Reset") or {}
            if reset and "manager_reset" not in caps:
                caps["manager_reset"] = {"manager": m.get("Id"), "target": reset.get("target"),
                                         "types": list(reset.get("ResetType@Redfish.AllowableValues") or [])}
        if "sel" in self.sections and _link(m, "LogServices"):
            self.read_logs(m["LogServices"]["@odata.id"])

    # ------------------------------------------------------------------ update service
    def read_update_service(self, uri):
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
        if "firmware" in self.sections and _link(upd, "FirmwareInventory"):
            items = self.members("firmware", upd["FirmwareInventory"]["@odata.id"])
            self.inv.firmware.extend(normalise_firmware(items))
        elif "firmware_ids" in self.sections and _link(upd, "FirmwareInventory"):
            uri = upd["FirmwareInventory"]["@odata.id"]
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


def normalise_firmware(items):
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


def _reading_kind(rtype, units, ctx, sid):
    ctx_s = str(ctx or "")
    if rtype in ("LiquidFlow", "LiquidFlowLPM") or units in ("L/min", "L/s"):
        return "coolant_flow"
    if rtype in ("PressurePa", "PressurekPa", "Pressure") or units in ("Pa", "kPa"):
        return "coolant_pressure" if ("Liquid" in ctx_s or "Coolant" in ctx_s or "Primary" in str(sid)
                                      or "Secondary" in str(sid)) else "pressure"
    if rtype == "Temperature" or units == "Cel":
        if "Liquid" in ctx_s or "Coolant" in ctx_s or re.search(r"(Supply|Return|Delta)Temp", str(sid)):
            return "coolant_temperature"
        return "temperature"
    if rtype in ("Rotational",) or units in ("RPM", "{rev}/min"):
        return "fan"
    if rtype == "Power" or units == "W":
        return "power"
    if rtype == "Voltage" or units == "V":
        return "voltage"
    if rtype == "Current" or units == "A":
        return "current"
    if rtype in ("EnergyJoules", "EnergykWh", "EnergyWh") or units in ("J", "kW.h", "W.h"):
        return "energy"
    if rtype == "Humidity":
        return "humidity"
    if rtype == "Frequency" or units == "Hz":
        return "frequency"
    if rtype == "Percent" or units == "%":
        return "fan" if "Fan" in ctx_s else "percent"
    return str(rtype or units or "other").lower()


def _reading_health(obj):
    """Health of a sensor reading; None when the sensor is ``Absent`` (nothing there to be healthy)."""
    state, health = _status(obj)
    return None if state == "Absent" else health


def _model_from_processor_id(p):
    """``(model, source)`` from ``ProcessorId.EffectiveModel``/``EffectiveFamily`` when one holds a
    model string (letters, not a bare number such as ``0x06``); ``(None, None)`` otherwise."""
    pid = p.get("ProcessorId") or {}
    if not isinstance(pid, dict):
        return None, None
    for key in ("EffectiveModel", "EffectiveFamily"):
        text = _str(pid.get(key))
        if text and not _NUMERIC_ID.match(text) and re.search(r"[A-Za-z]{2,}", text):
            return text, "ProcessorId.%s" % key
    return None, None


def _oem_gpu_vendor(dev):
    oem = dev.get("Oem") or {}
    return next((v.get("GPUVendor") for v in oem.values() if isinstance(v, dict) and v.get("GPUVendor")), None)


def _gpu_by_device(dev):
    """A PCIe device that names a GPU model and a GPU maker itself (OEM GPUVendor or Manufacturer)."""
    if not _GPU_WORDS.search(" ".join(str(dev.get(k) or "") for k in ("Model", "Name"))):
        return False
    maker = str(dev.get("Manufacturer") or "")
    return bool(_oem_gpu_vendor(dev)) or bool(re.search(r"\b(NVIDIA|AMD|Advanced Micro Devices)\b", maker, re.I))


def _oem_gpu(funcs):
    for f in funcs:
        for vendor in ((f.get("Oem") or {}).values()):
            if isinstance(vendor, dict) and isinstance(vendor.get("GPUDevice"), dict):
                return vendor["GPUDevice"]
    return {}


def _is_gpu_device(dev, funcs):
    for f in funcs:
        vid = str(f.get("VendorId") or "").lower()
        cls = f.get("DeviceClass")
        if cls in GPU_CLASSES and vid in GPU_VENDOR_IDS:
            return True
        if cls in GPU_CLASSES and _oem_gpu([f]):
            return True
    if not funcs and _gpu_by_device(dev):
        return True   # functions not read: the device names the GPU and its maker itself
    if dev.get("DeviceType") and _GPU_WORDS.search(" ".join(str(dev.get(k) or "") for k in ("Model", "Name"))):
        oem = (dev.get("Oem") or {})
        if any(isinstance(v, dict) and v.get("GPUVendor") for v in oem.values()):
            return True
        if any(str(f.get("VendorId") or "").lower() in GPU_VENDOR_IDS for f in funcs):
            return True
    return False


def read_inventory(client, system_id=None, sections=ALL_SECTIONS):
    """Read one BMC into a :class:`NodeInventory`.

    ``client``: an opened :class:`RedfishClient`; ``system_id``: read only this
    ``Systems`` member (default: every system — a DGX exposes the host and the HGX
    baseboard as two); ``sections``: subset of :data:`SECTIONS` (``firmware_ids``: the
    FirmwareInventory member list without the members' bodies).
    Never raises for a part of the tree: unreadable parts go to ``incomplete`` with the
    reason.  Raises :class:`RedfishError` only when the service root itself cannot be read.
    ``requests`` in the result is the number of HTTP requests this read cost.
    """
    start = client.requests
    inv = NodeInventory()
    _Reader(client, inv, system_id=system_id, sections=sections).run()
    inv.requests = client.requests - start
    return inv


RESET_PREFERENCE = ("ForceRestart", "PowerCycle", "GracefulRestart")


def reset_request(inv):
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
    return caps.get("power_target") or system["uri"] + "/Actions/ComputerSystem.Reset", reset
