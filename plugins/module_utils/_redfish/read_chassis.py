# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Chassis in the inventory reader: chassis, NVSwitches, network adapters (NICs, DPUs), drives, GPUs from PCIe.

GPUs when no system lists any (R-31): the PCIe devices/functions whose class is display/accelerator
and whose vendor is NVIDIA (0x10de) or AMD (0x1002) (or whose OEM block names the GPU, Supermicro)
— a null ``Model`` falls back to the PCIe device/function names.  PCIe functions are read only for
devices that are neither a NetworkAdapter's own device nor a GPU by their own properties.
"""

from __future__ import annotations

import re
from typing import Any, Optional

from .model import Component
from .read_base import (
    _GPU_WORDS,
    NOT_A_GPU,
    _links_list,
    _location,
    _norm,
    _status,
    _str,
    known_count,
    link,
    normalise_version,
)
from .read_power import PowerReader
from .read_storage import StorageReader

GPU_VENDOR_IDS = {"0x10de": "NVIDIA", "0x1002": "AMD"}
GPU_CLASSES = ("DisplayController", "ProcessingAccelerators")


class ChassisReader(PowerReader, StorageReader):
    """One ``Chassis`` (with its power, thermal and readings) and the GPU fallback over PCIe devices."""

    def read_chassis(self, ch: dict[str, Any], shared: bool = False) -> None:
        """One chassis; ``shared``: an enclosure that holds several nodes (its summary, power, cooling and
        readings count for each node; its adapters and drives are no one node's)."""
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
        if link(ch, "NetworkAdapters") and not shared:
            # a card that carries its own computer system is a DPU/SmartNIC (DMTF smartnic)
            card_soc = ch.get("ChassisType") == "Card" and bool(_links_list(ch, "ComputerSystems"))
            adapters = self.members("network_adapters", ch["NetworkAdapters"]["@odata.id"])
            # every adapter's port collection in one round, a few at a time
            self.prefetch([(link(na, "Ports") or link(na, "NetworkPorts"), 1) for na in adapters
                           if link(na, "Ports") or link(na, "NetworkPorts")])
            for na in adapters:
                comp = self.adapter(na)
                if card_soc:
                    comp.kind = "dpu"
                self.add(comp)
        if link(ch, "Drives") and not shared:
            for d in self.members("drives", ch["Drives"]["@odata.id"]):
                self.add(self.drive(d))
        self.read_power(ch)
        self.read_thermal(ch)
        if "readings" in self.sections:
            got = []
            if link(ch, "Sensors"):
                got = [self.sensor(sn) for sn in self.members("readings", ch["Sensors"]["@odata.id"])]
                self.inv.readings.extend(got)
            lacking = frozenset(("temperature", "fan", "power")) - {r.kind for r in got}
            if lacking:
                # Sensors missing or thin (Supermicro lists one; some list only power): the legacy Thermal/Power
                # resources hold the kinds it lacks
                self.legacy_readings(ch, lacking)
            if link(ch, "LeakDetectors"):
                for ld in self.members("readings", ch["LeakDetectors"]["@odata.id"]):
                    self.inv.readings.append(self.leak(ld))

    def adapter(self, na: dict[str, Any]) -> Component:
        state, health = _status(na)
        ctrl = (na.get("Controllers") or [{}])[0] or {}
        for c in na.get("Controllers") or []:
            if isinstance(c, dict):
                self.nic_devices.update(_norm(u) for u in _links_list(c, "PCIeDevices"))
        ports = []
        ports_uri = link(na, "Ports") or link(na, "NetworkPorts")
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
        port_count = len(ports) or known_count((ctrl.get("ControllerCapabilities") or {}).get("NetworkPortCount"))
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

    def gpus_from_pcie(self, systems: list[dict[str, Any]], chassis: list[dict[str, Any]]) -> None:
        sources = [s["PCIeDevices"]["@odata.id"] for s in systems if link(s, "PCIeDevices")]
        sources += [c["PCIeDevices"]["@odata.id"] for c in chassis if link(c, "PCIeDevices")]
        for src in sources:
            devices = self.members("pcie", src)
            need = [dev for dev in devices if link(dev, "PCIeFunctions") and not self._known_device(dev)]
            self.prefetch([(link(dev, "PCIeFunctions"), 1) for dev in need])
            for dev in devices:
                funcs = []
                furi = link(dev, "PCIeFunctions")
                if _norm(dev.get("@odata.id")) in self.nic_devices:
                    continue  # a NetworkAdapter's own device (its Controllers link it)
                if furi and not self._known_device(dev):
                    funcs = self.members("pcie", furi)
                if not _is_gpu_device(dev, funcs) or _not_a_gpu(dev):
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
        if not any(c.kind == "gpu" for c in self.inv.components):
            self.gpus_from_oem(chassis)

    def gpus_from_oem(self, chassis: list[dict[str, Any]]) -> None:
        """GPUs a vendor lists only in an OEM device collection: HPE iLO 5/6 ``Chassis/{id}`` ``Oem.Hpe.Links.Devices``
        (``HpeServerDevice``: ``DeviceType``, ``Name``, ``Manufacturer``, ``FirmwareVersion.Current.VersionString``;
        HPE iLO "Chassis resource definitions"), read when the standard Processors and PCIeDevices name none."""
        for ch in chassis:
            for vendor, oem in ((ch.get("Oem") or {}).items()):
                uri = link((oem or {}).get("Links") if isinstance(oem, dict) else None, "Devices")
                if not uri:
                    continue
                for dev in self.members("pcie", uri):
                    text = " ".join(str(dev.get(k) or "") for k in ("Name", "Model", "ProductPartNumber"))
                    dtype = str(dev.get("DeviceType") or "")
                    if not (dtype.upper() == "GPU" or (not dtype and _GPU_WORDS.search(text))) or _not_a_gpu(dev):
                        continue
                    state, health = _status(dev)
                    fw = ((dev.get("FirmwareVersion") or {}).get("Current") or {}) \
                        if isinstance(dev.get("FirmwareVersion"), dict) else {}
                    self.add(Component(
                        kind="gpu", id=str(dev.get("Id")), uri=dev.get("@odata.id", ""), name=dev.get("Name") or "",
                        model=_str(dev.get("Model")) or _str(dev.get("Name")) or _str(dev.get("ProductPartNumber")),
                        manufacturer=_str(dev.get("Manufacturer")), serial=_str(dev.get("SerialNumber")),
                        part_number=_str(dev.get("PartNumber")) or _str(dev.get("ProductPartNumber")),
                        firmware_version=normalise_version(fw.get("VersionString")),
                        location=_str(dev.get("Location")) if isinstance(dev.get("Location"), str) else _location(dev),
                        state=state, health=health, extra={"source": "Oem.%s.Links.Devices" % vendor}))

    def _known_device(self, dev: dict[str, Any]) -> bool:
        """True when the PCIe functions cannot change what the device is read as: a NetworkAdapter's
        own device, or a GPU by its own properties with model, maker and firmware reported."""
        if _norm(dev.get("@odata.id")) in self.nic_devices:
            return True
        return _gpu_by_device(dev) and bool(_str(dev.get("Model")) and _str(dev.get("FirmwareVersion")) and (
            _str(dev.get("Manufacturer")) or _oem_gpu_vendor(dev)))


def _not_a_gpu(dev: dict[str, Any]) -> bool:
    return bool(NOT_A_GPU.search(" ".join(str(dev.get(k) or "") for k in ("Id", "Name", "Model"))))


def _oem_gpu_vendor(dev: dict[str, Any]) -> Optional[str]:
    oem = dev.get("Oem") or {}
    return next((v.get("GPUVendor") for v in oem.values() if isinstance(v, dict) and v.get("GPUVendor")), None)


def _gpu_by_device(dev: dict[str, Any]) -> bool:
    """A PCIe device that names a GPU model and a GPU maker itself (OEM GPUVendor or Manufacturer)."""
    if not _GPU_WORDS.search(" ".join(str(dev.get(k) or "") for k in ("Model", "Name"))):
        return False
    maker = str(dev.get("Manufacturer") or "")
    return bool(_oem_gpu_vendor(dev)) or bool(re.search(r"\b(NVIDIA|AMD|Advanced Micro Devices)\b", maker, re.I))


def _oem_gpu(funcs: list[dict[str, Any]]) -> dict[str, Any]:
    for f in funcs:
        for vendor in ((f.get("Oem") or {}).values()):
            if isinstance(vendor, dict) and isinstance(vendor.get("GPUDevice"), dict):
                return vendor["GPUDevice"]
    return {}


def _is_gpu_device(dev: dict[str, Any], funcs: list[dict[str, Any]]) -> bool:
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
