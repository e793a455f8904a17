# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pre-deployment checks of power, cooling and health: PSUs, fans and temperatures, the health roll-up, the SEL
since a cutoff, the FirmwareInventory and out-of-band power control.  Each is ``(AuditContext) -> Outcome``.
"""

from __future__ import annotations

import json
import re
import time
from datetime import datetime, timezone
from typing import Any, Optional

from .._core.errors import ValidationError
from .._core.gate import Outcome, failed, not_run, passed
from .._core.match import describe, firmware_members
from .graph import AuditContext
from .parts import absent_parts, main_system, present_parts, slot_of, tolerate_gaps, unreadable


def check_psus(ctx: AuditContext) -> Outcome:
    want = ctx.bom.get("psus")
    if want and want["count"] == 0:
        return passed(reason="the SKU's power supplies are not managed by this BMC (count 0)")
    gap = unreadable(ctx.inv, ("psu", "chassis"), "power supplies")
    if gap:
        return gap
    psus = ctx.inv.of_kind("psu")
    present = present_parts(psus)
    sick = [p for p in present if p.health in ("Warning", "Critical")]
    observed = {"count": len(present), "unhealthy": {slot_of(p): p.health for p in sick}}
    problems = []
    if want and len(present) < want["count"]:
        empty = [slot_of(p) for p in absent_parts(psus)]
        problems.append("expected %d PSUs, found %d%s" % (want["count"], len(present),
                                                          "; bay %s empty" % ", ".join(empty) if empty else ""))
    if not want and not present:
        problems.append("the BMC reports no power supplies")
    for p in sick:
        problems.append("%s health %s" % (slot_of(p), p.health))
    if problems:
        return failed("; ".join(problems),
                      "check each PSU's AC cord and PDU breaker; replace a PSU that stays unhealthy",
                      expected=want, observed=observed)
    return passed(expected=want, observed=observed)


def _reading_text(r: Any) -> str:
    """``"71 Cel"``, ``"12.1 V"``, or ``"unknown"`` for a reading without a known value."""
    return "unknown" if r.value is None else ("%g %s" % (r.value, r.units or "")).strip()


def check_fans_thermal(ctx: AuditContext) -> Outcome:
    gap = unreadable(ctx.inv, ("fans", "readings", "chassis"), "fans and thermal sensors")
    if gap:
        return gap
    want = ctx.bom.get("fans") or {}
    fans = present_parts(ctx.inv.of_kind("fan"))
    fan_readings = [r for r in ctx.inv.readings if r.kind == "fan"]
    temps = [r for r in ctx.inv.readings if r.kind == "temperature"]
    n_fans = max(len(fans), len(fan_readings))
    problems = []
    if want.get("min_count") and n_fans < want["min_count"]:
        problems.append("expected at least %d fans, found %d" % (want["min_count"], n_fans))
    for f in fans:
        if f.health in ("Warning", "Critical"):
            problems.append("fan %s health %s" % (slot_of(f), f.health))
    for r in fan_readings:
        if r.health in ("Warning", "Critical"):
            problems.append("fan %s health %s" % (r.name or r.id, r.health))
    if not temps:
        problems.append("no temperature sensors reported")
    for r in temps:
        if r.value is not None and r.upper_critical is not None and r.value >= r.upper_critical:
            problems.append("%s at %.0f °C, critical %.0f °C" % (r.name or r.id, r.value, r.upper_critical))
        elif r.health == "Critical" and r.value is not None:
            # A sensor without a reading (State Absent: no transceiver in the port) says nothing about heat.
            problems.append("%s health Critical" % (r.name or r.id))
    for r in ctx.inv.readings:
        if r.kind == "leak" and r.health in ("Warning", "Critical"):
            problems.append("leak detector %s reports a leak" % (r.name or r.id))
    # A sensor the BMC marks Warning while its reading is below critical (a caution threshold crossed) does not
    # fail the gate, but is said, not silenced (issue 16)
    cautions = ["%s health Warning at %s" % (r.name or r.id, _reading_text(r))
                for r in ctx.inv.readings if r.kind not in ("fan", "leak") and r.health == "Warning"]
    observed = {"fans": n_fans, "temperature_sensors": len(temps)}
    if problems:
        return failed("; ".join(dict.fromkeys(problems)),
                      "replace the fans named, check airflow (blanking panels, hot aisle) and rerun",
                      expected=want, observed=observed, evidence={"bmc_warnings": cautions} if cautions else None)
    if cautions:
        return passed(expected=want, observed=observed, evidence={"bmc_warnings": cautions},
                      reason="warning: the BMC marks %d sensor(s) Warning within critical limits: %s"
                      % (len(cautions), "; ".join(cautions[:6])))
    return passed(expected=want, observed=observed)


# Every part whose Status.Health the roll-up reads: one unread may be the Critical one.
HEALTH_PARTS = ("chassis", "processors", "memory", "pcie", "network_adapters", "storage", "drives", "psu", "fans")


def check_health_rollup(ctx: AuditContext) -> Outcome:
    return tolerate_gaps(_check_health_rollup(ctx), ctx.inv, HEALTH_PARTS, "the parts' health")


def _check_health_rollup(ctx: AuditContext) -> Outcome:
    inv = ctx.inv
    worst = inv.health_rollup()
    bad = ["Systems/%s %s" % (s.get("id"), s.get("health")) for s in inv.systems
           if s.get("health") in ("Warning", "Critical")]
    bad += ["Chassis/%s %s" % (c.get("id"), c.get("health")) for c in inv.chassis
            if c.get("health") in ("Warning", "Critical")]
    bad += ["%s %s" % (slot_of(c), c.health) for c in inv.components if c.health in ("Warning", "Critical")]
    if worst in ("Warning", "Critical"):
        more = " (+%d more)" % (len(bad) - 6) if len(bad) > 6 else ""
        return failed("health roll-up %s: %s%s" % (worst, ", ".join(bad[:6]), more),
                      "read the SEL and the named components' status, fix the cause and rerun",
                      expected="OK", observed={"rollup": worst, "unhealthy": bad})
    if worst is None:
        return failed("no component reports a health state", "check the BMC inventory is populated; reset "
                      "the BMC if it stays empty", expected="OK", observed={"rollup": None})
    return passed(expected="OK", observed={"rollup": worst})


def parse_cutoff(value: Any, now: Optional[float] = None) -> Optional[datetime]:
    """SEL cutoff from ``'30d'``/``'12h'``/``'90m'``, an ISO 8601 time, or ``'all'``/None-equivalent.

    Returns an aware :class:`datetime` (UTC) or None for ``'all'`` (every entry counts).
    Raises :class:`ValidationError` on anything else.
    """
    now = time.time() if now is None else now
    if value in (None, "", "all"):
        return None
    text = str(value).strip()
    m = re.match(r"^(\d+(?:\.\d+)?)\s*([dhm])$", text)
    if m:
        seconds = float(m.group(1)) * {"d": 86400, "h": 3600, "m": 60}[m.group(2)]
        return datetime.fromtimestamp(now - seconds, tz=timezone.utc)
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ValidationError("SEL cutoff %r is neither a duration (30d, 12h, 90m) nor an ISO 8601 time" % text,
                              where="sel_since")
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)


def _entry_time(created: Any) -> Optional[datetime]:
    if not created:
        return None
    try:
        parsed = datetime.fromisoformat(str(created).replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)


def check_sel_clean(ctx: AuditContext) -> Outcome:
    gap = unreadable(ctx.inv, ("sel",), "the SEL")
    if gap:
        return gap
    cutoff = ctx.sel_cutoff
    critical = []
    for entry in ctx.inv.sel:
        if entry.severity != "Critical":
            continue
        when = _entry_time(entry.created)
        # An entry without a readable time counts: it may be recent (never a false pass).
        if cutoff is None or when is None or when >= cutoff:
            critical.append((when or datetime.max.replace(tzinfo=timezone.utc), entry))
    since = cutoff.strftime("%Y-%m-%dT%H:%M:%SZ") if cutoff else "the start of the log"
    if critical:
        critical.sort(key=lambda pair: pair[0])
        last = critical[-1][1]
        return failed("%d critical SEL entr%s since %s; latest %s: %s"
                      % (len(critical), "y" if len(critical) == 1 else "ies", since, last.created or "undated",
                         (last.message or last.message_id or "").strip()),
                      "read the SEL entries, fix their cause (replace the part they name), then clear the SEL "
                      "(LogService.ClearLog) and rerun",
                      observed=[{"id": e.id, "created": e.created, "message": e.message, "message_id": e.message_id}
                                for _when, e in critical[-5:]])
    return passed(observed={"entries": len(ctx.inv.sel), "critical_since_cutoff": 0},
                  reason="no critical SEL entries since %s" % since)


# (SKU firmware[] entries, the members' fields, ids_only) -> what is missing: the nodes of a fleet repeat both,
# and matching every entry against every member was ~7% of the audit's CPU per BMC (issue 27 profile)
_GAPS: dict[Any, list[str]] = {}


def _firmware_gaps(components: list[dict[str, Any]], items: list[Any], ids_only: bool) -> list[str]:
    """``"<id> (<match>: <found> of <count>)"`` for each SKU ``firmware[]`` entry with fewer members than it
    needs (:func:`.._core.match.firmware_members`), memoised on what the answer depends on."""
    try:
        key: Any = (json.dumps(components), ids_only,
                    tuple((i.id, i.name, i.version, i.updateable, i.state, i.health, tuple(i.related)) for i in items))
        hit = _GAPS.get(key)
    except (TypeError, ValueError):   # a manifest value JSON cannot encode: not memoised
        key, hit = None, None
    if hit is not None:
        return list(hit)
    missing = []
    for comp in components:
        match = comp.get("match") or {}
        if not (match.get("id") or match.get("name") or match.get("query")):
            continue
        found = firmware_members(comp, items, bodies=not ids_only)
        need = match.get("count", 1)
        if len(found) < need:
            missing.append("%s (%s: %d of %d)" % (comp["id"], describe(match), len(found), need))
    if key is not None:
        if len(_GAPS) >= 1024:   # bounded: a fleet of many SKUs or versions does not grow it without end
            _GAPS.clear()
        _GAPS[key] = list(missing)
    return missing


def check_firmware_inventory(ctx: AuditContext) -> Outcome:
    gap = unreadable(ctx.inv, ("firmware",), "FirmwareInventory")
    if gap:
        return gap
    items = ctx.inv.firmware
    if "firmware_inventory" in ctx.inv.capabilities and not ctx.inv.capabilities["firmware_inventory"]:
        return not_run("this BMC publishes no firmware inventory (UpdateService has neither FirmwareInventory "
                       "nor SoftwareInventory); the firmware versions are read in-band in provisioning")
    if not items:
        return failed("FirmwareInventory lists no members",
                      "the BMC has not populated its firmware inventory: wait after AC power on, reset the BMC "
                      "if it stays empty")
    ids_only = bool(ctx.inv.capabilities.get("firmware_ids_only"))
    missing = _firmware_gaps(ctx.manifest.get("firmware", []), items, ids_only)
    observed: dict = {"items": len(items)}
    queried = [c["id"] for c in ctx.manifest.get("firmware", []) if (c.get("match") or {}).get("query")]
    if ids_only and queried:
        # the member list carries Ids only: presence is judged here, the JMESPath query by the provisioning plan
        observed["query_not_evaluated"] = queried
    if not ids_only:
        observed["version_unknown"] = [i.id for i in items if i.version is None][:10]
    if missing:
        return failed("FirmwareInventory has no member for %s" % ", ".join(missing),
                      "the BMC does not report these components: check they are installed and the BMC firmware "
                      "is recent enough to inventory them", observed=observed)
    return passed(observed=observed, reason="%d FirmwareInventory members" % len(items))


# Reset types that give out-of-band power control: one to power on, one to power off, one to restart.
_ON = ("On", "ForceOn")
_OFF = ("ForceOff", "GracefulShutdown", "PushPowerButton")
_RESTART = ("ForceRestart", "GracefulRestart", "PowerCycle")


def _reset_types(ctx: AuditContext) -> tuple[list[str], Optional[str]]:
    caps = ctx.inv.capabilities or {}
    if caps.get("power_actions"):
        return list(caps["power_actions"]), caps.get("power_target")
    system = main_system(ctx)
    if system:
        for key in ("reset_types", "reset_allowable_values"):
            if system.get(key):
                return list(system[key]), system.get("reset_target")
    return [], None


def check_power_control(ctx: AuditContext) -> Outcome:
    gap = unreadable(ctx.inv, ("capabilities",), "the Reset action's ActionInfo")
    if gap:
        return gap
    types, target = _reset_types(ctx)
    if not types:
        return failed("Systems/%s advertises no ComputerSystem.Reset action" % ((main_system(ctx) or {}).get("id")),
                      "update the BMC firmware; without Redfish power control provisioning cannot boot the node "
                      "into its ephemeral runtime")
    # Restart can be composed from off + on (HPE Cray EX offers On, ForceOff, Off only).
    lacking = [what for what, options in (("power on", _ON), ("power off", _OFF + ("Off",)))
               if not any(t in types for t in options)]
    if lacking:
        return failed("ComputerSystem.Reset offers %s, no way to %s" % (", ".join(types), " or ".join(lacking)),
                      "update the BMC firmware so ComputerSystem.Reset supports On, ForceOff and ForceRestart",
                      observed=types)
    restart = any(t in types for t in _RESTART)
    return passed(observed={"reset_types": types, "target": target},
                  reason="" if restart else "no restart type; a restart is done as power off then on")
