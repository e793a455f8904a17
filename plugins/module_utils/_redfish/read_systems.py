# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Systems in the inventory reader: the ComputerSystem summary, processors (CPUs, GPUs), memory, BIOS, capabilities.

* GPUs (R-31): ``Processors[ProcessorType=GPU]`` first (the PCIe fallback is :mod:`.read_chassis`);
  GPU memory from the ``HBM`` Memory entries linked to the GPU (HGX baseboard), GPU PCIe link
  width/generation from ``Links.PCIeDevice``;
* CPUs whose ``Model`` is null (DGX H100) take it from ``ProcessorId.EffectiveModel`` /
  ``EffectiveFamily`` when that holds a model string, never from a bare family number;
  ``extra["model_source"]`` says so;
* a system that is a DPU (BlueField-3 BMC) is a ``dpu`` component.
"""

from __future__ import annotations

import re
from typing import Any, Optional

from .._core.errors import RedfishError
from .model import Component
from .read_base import _GPU_WORDS, NOT_A_GPU, _links_list, _location, _status, _str, link, normalise_version
from .read_logs import LogReader
from .read_storage import StorageReader

# Model strings in ProcessorId.EffectiveFamily/EffectiveModel: not a bare family/model number ("0x06", "143").
_NUMERIC_ID = re.compile(r"^(0x)?[0-9a-f]+h?$", re.I)


class SystemsReader(StorageReader, LogReader):
    """One ``ComputerSystem`` and what hangs below it (Memory, Processors, Storage, Bios, LogServices)."""

    def read_system(self, s: dict[str, Any], gpu_memory: dict[Optional[str], float]) -> None:
        state, health = _status(s)
        summary: dict[str, Any] = {
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
        memory = self.members("memory", s["Memory"]["@odata.id"]) if link(s, "Memory") else []
        procs = self.members("processors", s["Processors"]["@odata.id"]) if link(s, "Processors") else []
        gpu_uris = {p.get("@odata.id") for p in procs if (p.get("ProcessorType") == "GPU")}
        for m in memory:
            linked = set(_links_list(m, "Processors"))
            mtype = str(m.get("MemoryDeviceType") or "")
            if not linked:
                mid = str(m.get("Id") or "")
                linked = {u for u in gpu_uris if u and mid.startswith(u.rstrip("/").rsplit("/", 1)[-1] + "_")}
            if mtype.upper().startswith("HBM") or (linked & gpu_uris):
                for gpu in linked or [None]:
                    gpu_memory[gpu] = gpu_memory.get(gpu, 0) + (m.get("CapacityMiB") or 0)
                continue
            self.add(self.dimm(m))
        for p in procs:
            self.add(self.processor(p, gpu_memory))
        self.read_storage(s)
        if "bios" in self.sections and link(s, "Bios") and not self.inv.bios:
            self.read_bios(s, s["Bios"]["@odata.id"])
        if "capabilities" in self.sections:
            self.system_capabilities(s)
        if "sel" in self.sections and link(s, "LogServices"):
            self.read_logs(s["LogServices"]["@odata.id"])

    def dimm(self, m: dict[str, Any]) -> Component:
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

    def processor(self, p: dict[str, Any], gpu_memory: dict[Optional[str], float]) -> Component:
        state, health = _status(p)
        ptype = p.get("ProcessorType")
        kind = "gpu" if ptype == "GPU" else ("cpu" if ptype in ("CPU", None) else "other")
        if ptype is None and _GPU_WORDS.search(str(p.get("Model") or "")):
            kind = "gpu"
        if kind == "gpu" and NOT_A_GPU.search(" ".join(str(p.get(k) or "") for k in ("Id", "Name", "Model"))):
            # a baseboard or NVSwitch typed GPU is never one of the SKU's GPUs
            kind = "nvswitch" if "nvswitch" in " ".join(str(p.get(k) or "") for k in ("Id", "Name", "Model")).lower() \
                else "other"
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
            iface = (p.get("SystemInterface") or {}).get("PCIe") if isinstance(p.get("SystemInterface"), dict) else None
            if isinstance(iface, dict):
                # Processor.SystemInterface.PCIe (DSP0268 Processor v1_8): the GPU's own link to the host
                self.apply_pcie(comp, {"PCIeInterface": iface})
                comp.extra.pop("pcie_device")   # no device: the link state is the processor's own
            dev_uri = _links_list(p, "PCIeDevice")
            if dev_uri:
                dev = self.pcie_device(dev_uri[0])
                if dev:
                    self.apply_pcie(comp, dev)
                    if not comp.model:
                        comp.model = _str(dev.get("Model")) or _str(dev.get("Name"))
        return comp

    def read_bios(self, s: dict[str, Any], uri: str) -> None:
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

    def system_capabilities(self, s: dict[str, Any]) -> None:
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
        if link(s, "VirtualMedia") and s["VirtualMedia"]["@odata.id"] not in caps.get("virtual_media", []):
            caps.setdefault("virtual_media", []).append(s["VirtualMedia"]["@odata.id"])
        boot = s.get("Boot") or {}
        if boot.get("BootSourceOverrideTarget@Redfish.AllowableValues") and "boot_override_targets" not in caps:
            caps["boot_override_targets"] = list(boot["BootSourceOverrideTarget@Redfish.AllowableValues"])


def _model_from_processor_id(p: dict[str, Any]) -> tuple[Optional[str], Optional[str]]:
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
