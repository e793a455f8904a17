# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pre-deployment checks of the devices: GPUs (count, model, memory), their PCIe links, NICs/DPUs and NVMe
drives against the SKU's bill of materials.  Each is ``(AuditContext) -> Outcome``.
"""

from __future__ import annotations

from .._core.gate import Outcome, failed, not_run, passed
from .graph import AuditContext
from .parts import (
    absent_parts,
    fmt_gib,
    missing_slots,
    model_matches,
    models_of,
    present_parts,
    slot_of,
    tolerate_gaps,
    unique_parts,
)

# GPU memory as BMCs report it differs from the marketing size (80 GB HBM3 -> 79.6 GiB, 81559 MiB):
# the check accepts +-8 %, which still tells an 80 GB part from a 94 GB or 141 GB one.
GPU_MEMORY_TOLERANCE = 0.08
# NVMe capacity: vendors round the label (3.84 TB drive reports 3840755982336 bytes).
NVME_CAPACITY_TOLERANCE = 0.02


def check_gpus(ctx: AuditContext) -> Outcome:
    return tolerate_gaps(_check_gpus(ctx), ctx.inv, ("processors", "pcie", "chassis"), "the GPU inventory")


def _check_gpus(ctx: AuditContext) -> Outcome:
    want = ctx.bom.get("gpus") or {"count": 0}
    count = want["count"]
    gpus = ctx.inv.of_kind("gpu")
    present = present_parts(gpus)
    observed = {"count": len(present), "models": sorted({g.model or "unknown" for g in present})}
    if count == 0:
        if present:
            # parts the SKU does not declare are a BOM mismatch, never ignored
            found = ", ".join("%d × %s" % (sum(1 for g in present if (g.model or "unknown") == m), m)
                              for m in observed["models"])
            return failed("found %s, SKU declares none" % found,
                          "the server carries GPUs its SKU does not plan: check the twin's SKU for %s or remove "
                          "the GPUs" % ctx.node["hostname"], expected=want, observed=observed)
        return passed(expected=want, observed=observed, reason="no GPUs in this SKU")
    model = want.get("model")
    label = "%d × %s" % (count, model or "GPU")
    problems = []
    if len(present) != count:
        problems.append("expected %s, found %d" % (label, len(present)))
        if len(present) < count:
            empty = [slot_of(g) for g in absent_parts(gpus)] or missing_slots([g.id for g in present], count)
            if empty:
                problems.append("slot %s empty" % ", ".join(empty))
    wrong = [g for g in present if model and not model_matches(model, g.model)]
    if wrong:
        problems.append("%s is %s, expected %s" % (", ".join(slot_of(g) for g in wrong[:4]),
                                                   wrong[0].model or "unreported", model))
    mem = want.get("memory_gib")
    if mem:
        small = [g for g in present if g.memory_gib is not None
                 and abs(g.memory_gib - mem) > GPU_MEMORY_TOLERANCE * mem]
        if small:
            problems.append("%s reports %s GiB memory, expected %s GiB" % (slot_of(small[0]), fmt_gib(
                small[0].memory_gib), fmt_gib(mem)))
    if problems:
        return failed("; ".join(problems),
                      "reseat or replace the GPU named (check the baseboard/riser and its power cables); the SKU "
                      "needs %s" % label, expected=want, observed=observed)
    return passed(expected=want, observed=observed)


def check_gpu_pcie_links(ctx: AuditContext) -> Outcome:
    want = ctx.bom.get("gpus") or {"count": 0}
    gpus = present_parts(ctx.inv.of_kind("gpu"))
    if want["count"] == 0:
        return passed(reason="no GPUs in this SKU")
    exp = want.get("pcie")
    reported = [g for g in gpus if g.pcie_width is not None or g.pcie_gen is not None]
    if not reported:
        return not_run("the BMC reports no PCIe link state for the GPUs (%s)" % ctx.inv.service.get("vendor", "BMC")
                       if ctx.inv.service else "the BMC reports no PCIe link state for the GPUs")
    bad = []
    for g in reported:
        w_exp = exp["width"] if exp else g.pcie_width_max
        g_exp = exp["gen"] if exp else g.pcie_gen_max
        low_w = w_exp is not None and g.pcie_width is not None and g.pcie_width < w_exp
        low_g = g_exp is not None and g.pcie_gen is not None and g.pcie_gen < g_exp
        if low_w or low_g:
            bad.append("%s at x%s Gen%s, expected x%s Gen%s" % (slot_of(g), g.pcie_width, g.pcie_gen, w_exp, g_exp))
    observed = {g.id: {"width": g.pcie_width, "gen": g.pcie_gen} for g in reported}
    if bad:
        return failed("PCIe link downtrained: %s" % "; ".join(bad),
                      "reseat the GPU/riser and its PCIe cables, check the slot's retimer, then rerun; "
                      "replace the GPU or riser if the link stays degraded",
                      expected=exp, observed=observed)
    return passed(expected=exp, observed=observed,
                  reason="%d GPU links at expected width/speed" % len(reported)
                  + ("" if len(reported) == len(gpus) else "; %d GPUs report no link" % (len(gpus) - len(reported))))


def check_nics(ctx: AuditContext) -> Outcome:
    return tolerate_gaps(_check_nics(ctx), ctx.inv, ("network_adapters", "network_ports", "chassis"),
                         "NetworkAdapters")


def _check_nics(ctx: AuditContext) -> Outcome:
    wanted = ctx.bom.get("nics") or []
    nics = present_parts(ctx.inv.of_kind("nic") + ctx.inv.of_kind("dpu"))
    observed = [{"id": n.id, "model": n.model, "ports": n.ports, "speed_gbps": n.speed_gbps} for n in nics]
    if not wanted:
        return passed(observed=observed, reason="SKU declares no NICs")
    problems = []
    named = [w["model"] for w in wanted if w.get("model")]
    for want in wanted:
        if want.get("model"):
            match = [n for n in nics if model_matches(want["model"], n.model)]
        else:
            # The BMC reports no model for these adapters (DGX H100): count those no other entry claims.
            match = [n for n in nics if not any(model_matches(m, n.model) for m in named)]
        desc = "%d × %s" % (want["count"], want.get("model") or "NIC (model not reported)")
        if len(match) < want["count"]:
            problems.append("expected %s, found %d" % (desc, len(match)))
            continue
        if want.get("ports"):
            few = [n for n in match if n.ports is not None and n.ports < want["ports"]]
            if few:
                problems.append("%s has %d ports, expected %d" % (slot_of(few[0]), few[0].ports, want["ports"]))
        if want.get("speed_gbps"):
            slow = [n for n in match if n.speed_gbps is not None and n.speed_gbps < want["speed_gbps"]]
            if slow:
                problems.append("%s links at %g Gb/s, expected %g Gb/s"
                                % (slot_of(slow[0]), slow[0].speed_gbps, want["speed_gbps"]))
    if problems:
        return failed("; ".join(problems),
                      "check the adapters named are seated in the slots the SKU plans and their transceivers "
                      "and cables are the rated ones", expected=wanted, observed=observed)
    return passed(expected=wanted, observed=observed)


def check_nvme(ctx: AuditContext) -> Outcome:
    return tolerate_gaps(_check_nvme(ctx), ctx.inv, ("storage", "drives", "chassis"), "Storage")


def _check_nvme(ctx: AuditContext) -> Outcome:
    want = ctx.bom.get("nvme")
    models = models_of(want or {})
    # Drives whose protocol the BMC does not report (Supermicro: Protocol null) count when the model is the SKU's.
    drives = unique_parts(present_parts(ctx.inv.of_kind("nvme") + [d for d in ctx.inv.of_kind("drive")
                                                                   if any(model_matches(m, d.model) for m in models)]))
    observed = {"count": len(drives), "models": sorted({d.model or "unreported" for d in drives})}
    if not want:
        return passed(observed=observed, reason="SKU declares no NVMe drives")
    problems = []
    if len(drives) != want["count"]:
        problems.append("expected %d NVMe drives, found %d" % (want["count"], len(drives)))
    if models:
        wrong = [d for d in drives if d.model and not any(model_matches(m, d.model) for m in models)]
        if wrong:
            problems.append("%s is %s, expected %s" % (slot_of(wrong[0]), wrong[0].model, " or ".join(models)))
    if want.get("capacity_gb"):
        # The capacity is the primary model's (GB200: 8 × 3.84 TB data drives; the M.2 boot drive is smaller).
        small = [d for d in drives if d.capacity_gb is not None
                 and (not want.get("model") or model_matches(want["model"], d.model))
                 and d.capacity_gb < want["capacity_gb"] * (1 - NVME_CAPACITY_TOLERANCE)]
        if small:
            problems.append("%s holds %.0f GB, expected %.0f GB"
                            % (slot_of(small[0]), small[0].capacity_gb, want["capacity_gb"]))
    if problems:
        return failed("; ".join(problems), "reseat or replace the drives named; check the drive bay backplane",
                      expected=want, observed=observed)
    return passed(expected=want, observed=observed)
