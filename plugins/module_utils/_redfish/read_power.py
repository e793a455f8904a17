# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Power and thermal in the inventory reader: PSUs, fans, sensor readings, coolant and leak detectors.

``PowerSubsystem``/``ThermalSubsystem`` first, the legacy ``Power``/``Thermal`` resources where those
are missing or thin (Supermicro lists one sensor); a sensor whose ``Status.State`` is ``Absent``
(no transceiver in the port) has no health.  ``ThermalEquipment`` CDUs are chassis entries of kind ``cdu``.
"""

from __future__ import annotations

import math
import re
from typing import Any, Optional

from .model import Component, Reading
from .read_base import ReaderBase, _location, _status, _str, link, normalise_version


class PowerReader(ReaderBase):
    """PSUs, fans and readings of a chassis; coolant distribution units of ``ThermalEquipment``."""

    def read_power(self, ch: dict[str, Any]) -> None:
        ps_uri = None
        if link(ch, "PowerSubsystem"):
            sub = self.get("psu", ch["PowerSubsystem"]["@odata.id"]) or {}
            ps_uri = link(sub, "PowerSupplies")
            if ps_uri:
                for p in self.members("psu", ps_uri):
                    self.add(self.psu(p))
        if not ps_uri and link(ch, "Power"):
            power = self.get("psu", ch["Power"]["@odata.id"]) or {}
            for i, p in enumerate(power.get("PowerSupplies") or []):
                comp = self.psu(p)
                comp.id = comp.id if comp.id not in (None, "None") else str(p.get("MemberId", i))
                comp.uri = comp.uri or "%s#/PowerSupplies/%d" % (ch["Power"]["@odata.id"], i)
                self.add(comp)
            ch["_legacy_power"] = power

    def psu(self, p: dict[str, Any]) -> Component:
        state, health = _status(p)
        return Component(
            kind="psu", id=str(p.get("Id") or p.get("MemberId")), uri=p.get("@odata.id", ""),
            name=p.get("Name") or "", model=_str(p.get("Model")), manufacturer=_str(p.get("Manufacturer")),
            serial=_str(p.get("SerialNumber")), part_number=_str(p.get("PartNumber")),
            firmware_version=normalise_version(p.get("FirmwareVersion")), location=_location(p), state=state,
            health=health, extra={k: p.get(k) for k in ("PowerCapacityWatts", "PowerSupplyType")
                                  if p.get(k) is not None})

    def read_thermal(self, ch: dict[str, Any]) -> None:
        fans_uri = None
        if link(ch, "ThermalSubsystem"):
            sub = self.get("fans", ch["ThermalSubsystem"]["@odata.id"]) or {}
            fans_uri = link(sub, "Fans")
            if fans_uri:
                for f in self.members("fans", fans_uri):
                    comp = self.fan(f)
                    self.add(comp)
            if "readings" in self.sections:
                if link(sub, "CoolantConnectors"):
                    for cc in self.members("readings", sub["CoolantConnectors"]["@odata.id"]):
                        self.coolant(cc)
                leak = link(sub, "LeakDetection")
                if leak:
                    ld = self.get("readings", leak) or {}
                    if link(ld, "LeakDetectors"):
                        for d in self.members("readings", ld["LeakDetectors"]["@odata.id"]):
                            self.inv.readings.append(self.leak(d))
        if not fans_uri and link(ch, "Thermal"):
            thermal = self.get("fans", ch["Thermal"]["@odata.id"]) or {}
            for i, f in enumerate(thermal.get("Fans") or []):
                comp = self.fan(f)
                comp.id = comp.id if comp.id not in (None, "None") else str(f.get("MemberId", i))
                comp.uri = comp.uri or "%s#/Fans/%d" % (ch["Thermal"]["@odata.id"], i)
                self.add(comp)
            ch["_legacy_thermal"] = thermal

    def fan(self, f: dict[str, Any]) -> Component:
        state, health = _status(f)
        return Component(
            kind="fan", id=str(f.get("Id") or f.get("MemberId") or f.get("Name")), uri=f.get("@odata.id", ""),
            name=f.get("Name") or f.get("FanName") or "", model=_str(f.get("Model")),
            manufacturer=_str(f.get("Manufacturer")), serial=_str(f.get("SerialNumber")),
            part_number=_str(f.get("PartNumber")), location=_location(f), state=state, health=health)

    def sensor(self, s: dict[str, Any]) -> Reading:
        rtype = s.get("ReadingType")
        units = s.get("ReadingUnits")
        ctx = s.get("PhysicalContext")
        kind = _reading_kind(rtype, units, ctx, s.get("Id"))
        health = _reading_health(s)
        thr = s.get("Thresholds") or {}
        uc = thr.get("UpperCritical") if isinstance(thr, dict) else None
        uc = uc.get("Reading") if isinstance(uc, dict) else None
        if rtype in _SENSOR_UNITS and units is not None and units != _SENSOR_UNITS[rtype]:
            value = uc = None   # a unit the ReadingType cannot have: the number means nothing known
        else:
            value = s.get("Reading")
        return Reading(id=str(s.get("Id")), kind=kind, value=known_reading(value, kind), units=units,
                       name=s.get("Name") or "", health=health, upper_critical=known_reading(uc, kind),
                       physical_context=ctx)

    def legacy_readings(self, ch: dict[str, Any], kinds: frozenset = frozenset(("temperature", "fan", "power"))
                        ) -> None:
        """The legacy ``Thermal``/``Power`` readings of ``kinds`` (those the ``Sensors`` collection lacks), and the
        ``Power`` resource's voltages when it is read."""
        thermal = ch.get("_legacy_thermal")
        if thermal is None and link(ch, "Thermal") and kinds & {"temperature", "fan"}:
            thermal = self.get("readings", ch["Thermal"]["@odata.id"]) or {}
        for i, t in enumerate((thermal or {}).get("Temperatures") or [] if "temperature" in kinds else []):
            health = _reading_health(t)
            self.inv.readings.append(Reading(
                id=str(t.get("MemberId") or t.get("Name") or i), kind="temperature",
                value=known_reading(t.get("ReadingCelsius"), "temperature"), units="Cel", name=t.get("Name") or "",
                health=health, upper_critical=known_reading(t.get("UpperThresholdCritical"), "temperature"),
                physical_context=t.get("PhysicalContext")))
        for i, f in enumerate((thermal or {}).get("Fans") or [] if "fan" in kinds else []):
            health = _reading_health(f)
            self.inv.readings.append(Reading(
                id=str(f.get("MemberId") or f.get("Name") or i), kind="fan", value=known_reading(f.get("Reading"), "fan"),
                units=f.get("ReadingUnits"), name=f.get("Name") or f.get("FanName") or "", health=health,
                physical_context=f.get("PhysicalContext")))
        power = ch.get("_legacy_power")
        if "power" not in kinds:
            return
        if power is None and link(ch, "Power"):
            power = self.get("readings", ch["Power"]["@odata.id"]) or {}
        for i, pc in enumerate((power or {}).get("PowerControl") or []):
            health = _status(pc)[1]
            self.inv.readings.append(Reading(
                id=str(pc.get("MemberId") or pc.get("Name") or i), kind="power",
                value=known_reading(pc.get("PowerConsumedWatts"), "power"),
                units="W", name=pc.get("Name") or "", health=health, physical_context=pc.get("PhysicalContext")))
        # Voltages ride along in the Power resource already read (Power.v1 ``Voltages[]``): no extra request
        for i, v in enumerate((power or {}).get("Voltages") or []):
            if isinstance(v, dict):
                self.inv.readings.append(Reading(
                    id=str(v.get("MemberId") or v.get("Name") or i), kind="voltage",
                    value=known_reading(v.get("ReadingVolts"), "voltage"), units="V", name=v.get("Name") or "",
                    health=_reading_health(v), upper_critical=known_reading(v.get("UpperThresholdCritical"), "voltage"),
                    physical_context=v.get("PhysicalContext")))

    def coolant(self, cc: dict[str, Any]) -> None:
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
                    id="%s.%s" % (base, key), kind=kind, value=known_reading(v.get("Reading"), kind), units=units,
                    name="%s %s" % (cc.get("Name") or base, key), health=health, physical_context="Liquid"))

    def leak(self, d: dict[str, Any]) -> Reading:
        health = _status(d)[1]
        state = d.get("DetectorState")
        return Reading(id=str(d.get("Id")), kind="leak", value=None, units=None, name=d.get("Name") or "",
                       health=state or health, physical_context=d.get("PhysicalContext"))

    def read_thermal_equipment(self, uri: str) -> None:
        te = self.get("readings", uri) or {}
        for cdu in self.members("readings", te["CDUs"]["@odata.id"]) if link(te, "CDUs") else []:
            state, health = _status(cdu)
            self.inv.chassis.append({"id": cdu.get("Id"), "uri": cdu.get("@odata.id"), "kind": "cdu",
                                     "manufacturer": _str(cdu.get("Manufacturer")), "model": _str(cdu.get("Model")),
                                     "serial": _str(cdu.get("SerialNumber")), "state": state, "health": health})
            for key in ("PrimaryCoolantConnectors", "SecondaryCoolantConnectors"):
                if link(cdu, key):
                    for cc in self.members("readings", cdu[key]["@odata.id"]):
                        self.coolant(cc)
            leak = link(cdu, "LeakDetection")
            if leak:
                ld = self.get("readings", leak) or {}
                if link(ld, "LeakDetectors"):
                    for d in self.members("readings", ld["LeakDetectors"]["@odata.id"]):
                        self.inv.readings.append(self.leak(d))


# The unit each Sensor ReadingType is reported in (Sensor.v1 schema, ReadingType enum descriptions, DSP2064).
_SENSOR_UNITS = {"Temperature": "Cel", "Rotational": "RPM", "Voltage": "V", "Power": "W", "Current": "A",
                 "Humidity": "%", "Percent": "%", "Frequency": "Hz", "LiquidFlowLPM": "L/min",
                 "PressurekPa": "kPa", "EnergyJoules": "J", "EnergykWh": "kW.h", "EnergyWh": "W.h"}
# Values no sensor reads: unset 16/32-bit registers (0xFFFF, 0x7FFF, 0x8000 signed, 0xFFFFFFFF) that IPMI- and
# SMBIOS-fed BMCs pass on as numbers.
_SENTINELS = frozenset([0xFFFF, 0x7FFF, -0x8000, 0xFFFFFFFF])
# Physically possible ranges per kind (inclusive): nothing is colder than absolute zero (-273.15 °C) and no part
# of a server is at 1000 °C; RPM, watts, flow and humidity are not negative; percent and humidity end at 100.
_RANGES: dict[str, tuple[float, float]] = {
    "temperature": (-273.15, 1000.0), "coolant_temperature": (-273.15, 1000.0), "fan": (0.0, float("inf")),
    "power": (0.0, float("inf")), "coolant_flow": (0.0, float("inf")), "humidity": (0.0, 100.0),
    "percent": (0.0, 100.0)}


def known_reading(v: Any, kind: str) -> Optional[float]:
    """A sensor or threshold value as a number, or None where it is unknown.

    Unknown: null, a string (``"N/A"``; the Sensor schema's ``Reading`` is a number), a boolean, NaN or
    infinity, a register sentinel (``65535``...) and a value outside what a ``kind`` can physically read
    (:data:`_RANGES`, units as :data:`_SENSOR_UNITS`: °C, RPM or %, W, L/min, %).
    """
    if isinstance(v, bool) or not isinstance(v, (int, float)) or math.isnan(v) or math.isinf(v) or v in _SENTINELS:
        return None
    low, high = _RANGES.get(kind, (float("-inf"), float("inf")))
    return v if low <= v <= high else None


def _reading_kind(rtype: Any, units: Any, ctx: Any, sid: Any) -> str:
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


def _reading_health(obj: Any) -> Optional[str]:
    """Health of a sensor reading; None when the sensor is ``Absent`` (nothing there to be healthy)."""
    state, health = _status(obj)
    return None if state == "Absent" else health
