# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Node-tier test kinds: CPU and memory stress (stress-ng), memory size, EDAC counters, the kernel log since boot.

Every function takes a :class:`TestContext` and returns an ``Outcome``; an absent tool raises
:class:`ToolNotFoundError` (the runner makes the test ``not_run``).  Thresholds and their defaults are
named in each function.
"""

from __future__ import annotations

import os
from typing import Any

from ..._core.errors import ManifestError, ParseError, ToolNotFoundError
from ..._core.gate import Outcome, failed, passed
from ..._host.parsers import number
from ..._host.parsers.stress_ng import parse_stress_ng
from ..context import TestContext
from ..kernel_log import kernel_findings
from .common import read_sysfs, where_in_sku


def _stress_ng(ctx: TestContext, stressor: str) -> Outcome:
    """stress-ng with one stressor; thresholds ``exit_code`` (default 0), ``max_errors`` (``fail:`` lines, 0),
    ``min_bogo_ops_per_s`` (optional floor, ops/s).  Pass: the exit code, "successful run completed" and no
    more failure lines than allowed (P-C11)."""
    tool = ctx.require("stress-ng")
    p = ctx.params
    argv = [tool, "--%s" % stressor, p.get("workers", 0)]
    if stressor == "cpu" and p.get("method"):
        argv += ["--cpu-method", p["method"]]
    if stressor == "vm":
        argv += ["--vm-bytes", p.get("vm_bytes", "10%")]
    if p.get("verify", stressor == "vm"):
        argv.append("--verify")
    argv += ["--metrics-brief", "--timeout", "%ds" % int(p.get("duration_s", 10))] + list(p.get("extra") or [])
    res = ctx.run(argv, "stress-ng")
    parsed = parse_stress_ng(res.stdout + "\n" + res.stderr)
    ctx.save_json("parsed.json", parsed)
    observed = {"bogo_ops_per_s": {s["name"]: s["bogo_ops_per_s_real"] for s in parsed["stressors"]},
                "completed_s": parsed["completed_s"], "rc": res.rc, "failures": len(parsed["failures"])}
    want_rc, max_errors = int(ctx.threshold("exit_code", 0)), int(ctx.threshold("max_errors", 0))
    expected = "exit %d, successful run, ≤ %d failure lines" % (want_rc, max_errors)
    if res.rc != want_rc or not parsed["successful"] or len(parsed["failures"]) > max_errors:
        detail = "; ".join(parsed["failures"] + parsed["errors"])[:400] or "no failure line printed"
        run = "successful run" if parsed["successful"] else "unsuccessful run"
        return failed("stress-ng --%s exited %s, %s: %s" % (stressor, res.rc, run, detail),
                      "a --verify failure points at memory or CPU: check the DIMM/CPU named in the SEL and EDAC "
                      "counters, reseat or replace it and rerun", observed=observed, expected=expected)
    floor = ctx.threshold("min_bogo_ops_per_s")
    rate = observed["bogo_ops_per_s"].get(stressor)
    if floor is not None and (rate or 0) < float(floor):
        return failed("stress-ng %s %.0f bogo ops/s < SKU floor %g" % (stressor, rate or 0, float(floor)),
                      "check CPU frequency/power settings in BIOS and thermal throttling",
                      observed=observed, expected=expected + ", ≥ %g bogo ops/s" % float(floor))
    return passed(observed=observed, expected=expected,
                  reason="stress-ng --%s %s workers completed in %ss, %.0f bogo ops/s"
                         % (stressor, p.get("workers", 0) or "all", parsed["completed_s"], rate or 0))


def check_stress_ng_cpu(ctx: TestContext) -> Outcome:
    """CPU stress: ``stress-ng --cpu <workers> [--cpu-method <method>] --metrics-brief --timeout <duration_s>``.

    params: ``workers`` (0 = one per CPU), ``method``, ``duration_s`` (default 10), ``verify`` (default false).
    """
    return _stress_ng(ctx, "cpu")


def check_stress_ng_vm(ctx: TestContext) -> Outcome:
    """Memory stress with verification: ``stress-ng --vm <workers> --vm-bytes <vm_bytes> --verify``.

    params: ``workers`` (0 = one per CPU), ``vm_bytes`` (default ``10%``, split among workers),
    ``duration_s`` (default 10), ``verify`` (default true).
    """
    return _stress_ng(ctx, "vm")


def check_memory_size(ctx: TestContext) -> Outcome:
    """Memory the kernel sees (``/proc/meminfo`` MemTotal, GiB) against the SKU/profile.

    thresholds: ``min_fraction_of_bom`` (default 0.95 of ``bom.memory.total_gib``: firmware and the
    kernel reserve a few %) and/or ``min_gib`` (absolute floor); the larger floor applies.
    Raises ManifestError when neither gives a floor.
    """
    path = os.path.join(ctx.procfs, "meminfo")
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except OSError as exc:
        raise ToolNotFoundError("cannot read %s: %s" % (path, exc.strerror))
    ctx.save_text("meminfo.txt", text)
    total_kib = None
    for line in text.splitlines():
        if line.startswith("MemTotal:"):
            total_kib = number(line.split(":", 1)[1])
    if total_kib is None:
        raise ParseError("MemTotal line missing", where=path)
    observed = round(total_kib / 1024.0 / 1024.0, 2)
    bom_gib = (ctx.bom.get("memory") or {}).get("total_gib")
    fraction = float(ctx.threshold("min_fraction_of_bom", 0.95))
    limits, words = [], []
    if ctx.threshold("min_gib") is not None:
        limits.append(float(ctx.threshold("min_gib")))
        words.append("≥ %g GiB" % limits[-1])
    if bom_gib and fraction > 0:
        limits.append(float(bom_gib) * fraction)
        words.append("≥ %.1f GiB (%.0f%% of the BOM's %s GiB)" % (limits[-1], fraction * 100, bom_gib))
    if not limits:
        raise ManifestError("memory_size needs bom.memory.total_gib with thresholds.min_fraction_of_bom, or "
                            "thresholds.min_gib", where=where_in_sku(ctx))
    need = max(limits)
    exp_words = " and ".join(words)
    if observed < need:
        return failed("MemTotal %.1f GiB, expected %s" % (observed, exp_words),
                      "a DIMM is missing or disabled: compare the DIMM count in the Redfish inventory and the SEL, "
                      "reseat or replace the DIMM", observed={"memtotal_gib": observed}, expected=exp_words)
    return passed(observed={"memtotal_gib": observed}, expected=exp_words,
                  reason="MemTotal %.1f GiB %s" % (observed, exp_words))


def check_edac(ctx: TestContext) -> Outcome:
    """EDAC memory-controller error counters (``/sys/devices/system/edac/mc/mc*/{ce,ue}_count``).

    thresholds: ``max_ue`` (default 0), ``max_ce`` (default 0).  Absent EDAC (no driver, virtual
    machine) is ``not_run``.
    """
    root = os.path.join(ctx.sysfs, "devices", "system", "edac", "mc")
    if not os.path.isdir(root):
        raise ToolNotFoundError("EDAC not available: %s missing (no EDAC driver for this memory controller)" % root)
    controllers = {}
    for mc in sorted(os.listdir(root)):
        if not mc.startswith("mc"):
            continue
        entry: dict[str, Any] = {"ce": number(read_sysfs(os.path.join(root, mc, "ce_count"))),
                                 "ue": number(read_sysfs(os.path.join(root, mc, "ue_count"))), "dimms": {}}
        for dimm in sorted(os.listdir(os.path.join(root, mc))):
            if dimm.startswith(("dimm", "rank")):
                d = os.path.join(root, mc, dimm)
                label = read_sysfs(os.path.join(d, "dimm_label")) or dimm
                entry["dimms"][label] = {"ce": number(read_sysfs(os.path.join(d, "dimm_ce_count"))),
                                         "ue": number(read_sysfs(os.path.join(d, "dimm_ue_count")))}
        controllers[mc] = entry
    if not controllers:
        raise ToolNotFoundError("EDAC present but no memory controller registered under %s" % root)
    ctx.save_json("edac.json", controllers)
    max_ue, max_ce = float(ctx.threshold("max_ue", 0)), float(ctx.threshold("max_ce", 0))
    bad = []
    for mc, entry in controllers.items():
        if (entry["ue"] or 0) > max_ue or (entry["ce"] or 0) > max_ce:
            worst = [lbl for lbl, d in entry["dimms"].items() if d["ue"] or d["ce"]]
            where = " on %s" % ", ".join(worst) if worst else ""
            bad.append("%s: %d UE, %d CE%s" % (mc, entry["ue"] or 0, entry["ce"] or 0, where))
    expected = "UE ≤ %g and CE ≤ %g per memory controller" % (max_ue, max_ce)
    if bad:
        return failed("EDAC errors: %s" % "; ".join(bad), "replace the DIMM(s) named above and rerun burn-in",
                      observed=controllers, expected=expected)
    return passed(observed=controllers, expected=expected,
                  reason="%d memory controller(s), no error above threshold" % len(controllers))


def check_kernel_log(ctx: TestContext) -> Outcome:
    """Kernel log of the current boot: XIDs, MCE, fatal/uncorrected AER, EDAC UE, GPU off the bus.

    thresholds: ``max_xid`` (XID events of any severity; when unset, only XIDs whose catalog severity
    is ``fail`` count), ``max_mce`` (default 0), ``max_aer_fatal`` (uncorrected AER lines, default 0),
    ``max_aer_corrected`` (optional).
    """
    source, text, records = ctx.kernel_log.read()
    ctx.save_text("kernel-log.txt", text)
    findings = kernel_findings(records)
    ctx.save_json("findings.json", findings)
    hw = findings["hardware"]
    max_xid = ctx.threshold("max_xid")
    xids = findings["xids"] if max_xid is not None else [f for f in findings["xids"] if f["severity"] == "fail"]
    counts = {"xid": sum(f["count"] for f in xids), "mce": (hw.get("mce") or {}).get("count", 0),
              "aer_fatal": (hw.get("aer_uncorrected") or {}).get("count", 0),
              "aer_corrected": (hw.get("aer_corrected") or {}).get("count", 0),
              "edac_ue": (hw.get("edac_ue") or {}).get("count", 0),
              "gpu_off_bus": (hw.get("gpu_off_bus") or {}).get("count", 0)}
    limits = {"xid": max_xid if max_xid is not None else 0, "mce": ctx.threshold("max_mce", 0),
              "aer_fatal": ctx.threshold("max_aer_fatal", 0), "edac_ue": 0, "gpu_off_bus": 0}
    if ctx.threshold("max_aer_corrected") is not None:
        limits["aer_corrected"] = ctx.threshold("max_aer_corrected")
    over = [k for k, limit in limits.items() if counts[k] > float(limit)]
    observed = {"source": source, "records": len(records), "counts": counts, "xids": findings["xids"],
                "hardware_errors": hw}
    expected = {k: "<= %g" % float(v) for k, v in limits.items()}
    if over:
        parts = []
        for k in over:
            if k == "xid":
                parts.append(", ".join("Xid %d (%s) x%d on PCI %s, first %s"
                                       % (f["xid"], f["description"], f["count"], f["pci"], f["first"])
                                       for f in xids))
            else:
                key = {"aer_fatal": "aer_uncorrected"}.get(k, k)
                parts.append("%d %s line(s), first %s: %s" % (counts[k], k, hw[key]["first"], hw[key]["sample"]))
        remediation = xids[0]["remediation"] if "xid" in over and xids else \
            "find the component in the kernel log lines (evidence) and the SEL; reseat or replace it"
        return failed("kernel log since boot (%s): %s" % (source, "; ".join(parts)), remediation,
                      observed=observed, expected=expected)
    return passed(observed=observed, expected=expected,
                  reason="%d kernel log records (%s), no hardware error above threshold%s"
                         % (len(records), source, "; non-fatal XIDs: %s" % ", ".join(
                             "Xid %d x%d" % (f["xid"], f["count"]) for f in findings["xids"])
                             if findings["xids"] else ""))
