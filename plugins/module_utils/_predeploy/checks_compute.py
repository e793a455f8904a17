# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pre-deployment checks of the node's identity and compute: chassis serial, system model, CPUs and memory
against the twin and the SKU.  Each is ``(AuditContext) -> Outcome``.
"""

from __future__ import annotations

from .._core.gate import Outcome, failed, passed
from .graph import AuditContext
from .parts import (
    absent_parts,
    fmt_gib,
    main_system,
    missing_slots,
    model_matches,
    per_system,
    present_parts,
    slot_of,
    tolerate_gaps,
    unreadable,
)

# DIMM totals: exact up to rounding of MiB -> GiB.
MEMORY_TOLERANCE = 0.005


def check_chassis_serial(ctx: AuditContext) -> Outcome:
    want = ctx.node["serial"]
    chassis = ctx.inv.chassis
    cid = ctx.manifest.get("system", {}).get("chassis_id")
    candidates = [c for c in chassis if c.get("id") == cid] if cid else []
    if not candidates:
        candidates = list(chassis)
    for c in candidates:
        if (c.get("serial") or "").strip().upper() == want.strip().upper():
            return passed(expected=want, observed=c.get("serial"),
                          reason="Chassis/%s serial %s" % (c.get("id"), c.get("serial")))
    # Some vendors leave Chassis SerialNumber empty and put it on the System.
    for s in ctx.inv.systems:
        if (s.get("serial") or "").strip().upper() == want.strip().upper() and not any(
                c.get("serial") for c in candidates):
            return passed(expected=want, observed=s.get("serial"),
                          reason="Systems/%s serial %s (chassis reports none)" % (s.get("id"), s.get("serial")))
    gap = unreadable(ctx.inv, ("chassis",), "the chassis serial (a chassis)")
    if gap:
        return gap   # the unread chassis may be the one with the twin's serial
    main = candidates[0] if candidates else {}
    seen = ", ".join("Chassis/%s=%s" % (c.get("id"), c.get("serial") or "none") for c in candidates[:4])
    return failed("twin says chassis serial %s at %s U%s, BMC reports %s"
                  % (want, ctx.node.get("rack"), ctx.node.get("u"), seen or "no chassis"),
                  "the server in %s U%s is not the one the twin plans there: compare the serial on the "
                  "pull-out tag with the twin, then swap the server or correct the twin"
                  % (ctx.node.get("rack"), ctx.node.get("u")),
                  expected=want, observed=main.get("serial"))


def check_system_model(ctx: AuditContext) -> Outcome:
    sysdef = ctx.manifest.get("system", {})
    system = main_system(ctx)
    if system is None:
        return failed("the BMC lists no ComputerSystem", "reset the BMC and rerun")
    want_model, want_mfr = sysdef.get("model"), sysdef.get("manufacturer")
    aliases = list(sysdef.get("model_aliases", []))
    observed = {"id": system.get("id"), "manufacturer": system.get("manufacturer"), "model": system.get("model")}
    problems = []
    if want_model is None:
        # The SKU says this vendor leaves Model null on the host system (GB200 System_0); the aliases must
        # then be found on another system (HGX_Baseboard_0 "GB200 NVL").
        if system.get("model") is not None and not any(model_matches(a, system.get("model")) for a in aliases):
            problems.append("model %r, expected none (SKU %s)" % (system.get("model"), ctx.manifest.get("sku")))
        elif aliases and not any(model_matches(a, s.get("model")) for s in ctx.inv.systems for a in aliases):
            problems.append("no system reports model %s" % " or ".join(repr(a) for a in aliases))
    elif not any(model_matches(m, system.get("model")) for m in [want_model] + aliases):
        problems.append("model %r, expected %r" % (system.get("model"), want_model))
    if want_mfr and system.get("manufacturer") and not model_matches(want_mfr, system.get("manufacturer")):
        problems.append("manufacturer %r, expected %r" % (system.get("manufacturer"), want_mfr))
    if problems:
        return failed("Systems/%s reports %s (SKU %s)" % (system.get("id"), " and ".join(problems),
                                                          ctx.manifest.get("sku")),
                      "the server is not the SKU the twin plans (%s): check the twin's SKU for %s or swap "
                      "the server" % (ctx.manifest.get("sku"), ctx.node["hostname"]),
                      expected={"manufacturer": want_mfr, "model": want_model, "aliases": aliases},
                      observed=observed)
    return passed(expected={"manufacturer": want_mfr, "model": want_model}, observed=observed,
                  reason="" if want_model else "Model null on Systems/%s as the SKU says; %s found"
                  % (system.get("id"), " or ".join(aliases) or "no alias required"))


def check_cpus(ctx: AuditContext) -> Outcome:
    want = ctx.bom["cpus"]

    def evaluate(cpus):
        present = present_parts(cpus)
        # A BMC that reports no model (DGX H100 Processors Model null) is not a mismatch: the count is checked.
        wrong = [c for c in present if c.model and not model_matches(want["model"], c.model)]
        unreported = [c for c in present if not c.model]
        observed = {"count": len(present), "models": sorted({c.model or "unreported" for c in present})}
        if len(present) != want["count"] or wrong:
            parts = ["expected %d × %s, found %d" % (want["count"], want["model"], len(present))]
            empty = [slot_of(c) for c in absent_parts(cpus)] or missing_slots([c.id for c in present], want["count"])
            if empty and len(present) < want["count"]:
                parts.append("socket %s empty" % ", ".join(empty))
            if wrong:
                parts.append("%s is %s" % (", ".join(slot_of(c) for c in wrong), wrong[0].model))
            return failed("; ".join(parts), "open the node and check the CPU sockets; the SKU needs %d × %s"
                          % (want["count"], want["model"]), expected=want, observed=observed)
        cores = want.get("cores")
        low = [c for c in present if cores and isinstance(c.extra.get("TotalCores"), int)
               and c.extra["TotalCores"] < cores]
        if low:
            return failed("%s reports %d cores, expected %d" % (slot_of(low[0]), low[0].extra["TotalCores"], cores),
                          "check the BIOS core-disable settings, or replace the CPU", expected=want,
                          observed=observed)
        derived = [c for c in present if c.extra.get("model_source")]
        reason = ""
        if unreported:
            reason = "model not reported by the BMC for %s; count checked" % ", ".join(slot_of(c) for c in unreported)
        elif derived:
            reason = "Model null on %s; model read from %s" % (", ".join(slot_of(c) for c in derived),
                                                               derived[0].extra["model_source"])
        return passed(expected=want, observed=observed, reason=reason)

    return tolerate_gaps(per_system(ctx, ctx.inv.of_kind("cpu"), evaluate), ctx.inv, ("processors",),
                         "Processors")


def check_memory(ctx: AuditContext) -> Outcome:
    want = ctx.bom["memory"]
    size = want.get("dimm_size_gib")

    def evaluate(dimms):
        present = [d for d in present_parts(dimms) if (d.memory_gib or 0) > 0]
        total = sum(d.memory_gib or 0 for d in present)
        observed = {"dimm_count": len(present), "total_gib": round(total, 2)}
        problems = []
        if len(present) != want["dimm_count"]:
            problems.append("expected %d DIMMs, found %d" % (want["dimm_count"], len(present)))
        if abs(total - want["total_gib"]) > MEMORY_TOLERANCE * max(want["total_gib"], 1):
            problems.append("%s GiB total, expected %s GiB" % (fmt_gib(total), fmt_gib(want["total_gib"])))
        if size:
            odd = [d for d in present if abs((d.memory_gib or 0) - size) > MEMORY_TOLERANCE * size]
            if odd:
                problems.append("%s is %s GiB, expected %s GiB"
                                % (slot_of(odd[0]), fmt_gib(odd[0].memory_gib), fmt_gib(size)))
        if problems:
            empty = [slot_of(d) for d in dimms if d not in present]
            if empty and len(present) < want["dimm_count"]:
                more = " (+%d more)" % (len(empty) - 8) if len(empty) > 8 else ""
                problems.append("slot %s empty%s" % (", ".join(empty[:8]), more))
            return failed("; ".join(problems),
                          "reseat or replace the DIMMs named; the SKU needs %d × %s GiB (%s GiB)"
                          % (want["dimm_count"], fmt_gib(size or want["total_gib"] / max(want["dimm_count"], 1)),
                             fmt_gib(want["total_gib"])),
                          expected=want, observed=observed)
        return passed(expected=want, observed=observed)

    return tolerate_gaps(per_system(ctx, ctx.inv.of_kind("dimm"), evaluate), ctx.inv, ("memory",), "Memory")
