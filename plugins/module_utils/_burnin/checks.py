# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Burn-in test kinds: what each SKU ``burn_in.tiers[].tests[].kind`` runs and how it is judged.

Every function takes a :class:`_burnin.TestContext` and returns an ``Outcome``.  A tool
that is absent raises :class:`ToolNotFoundError` (the runner makes the test ``not_run``
with that reason); where the profile expects no GPU the GPU and power tests are
``not_run`` saying so.  Thresholds come from the test's ``thresholds`` (SKU merged with
profile and run-time overrides); defaults are named in each function.

Node tier: ``stress_ng``, ``memory_size``, ``edac``, ``pcie_links``, ``fio``, ``kernel_log``, ``ibstat``.
GPU tier: ``nvidia_smi_health``, ``dcgm_diag``, ``rocm_smi_health``, ``amd_field_diag``, ``gpu_burn``,
``dcgmproftester``.  Power tier: ``power_sustained``, ``power_pulse``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time

from .._core.errors import (
    ManifestError,
    ParseError,
    ToolNotFoundError,
)
from .._core.gate import failed, not_run, passed
from .._host.parsers.dcgm import parse_dcgm_diag
from .._host.parsers.fio import parse_fio_json
from .._host.parsers.gpu_burn import parse_gpu_burn
from .._host.parsers.ibstat import parse_ibstat
from .._host.parsers.lspci import gen_from_gts, parse_lspci_vv
from .._host.parsers.nvidia_smi import parse_nvidia_smi_xml
from .._host.parsers.rocm_smi import parse_rocm_smi_json
from .._host.parsers.stress_ng import parse_stress_ng
from .._host.parsers import number
from .._host import telemetry as telemetry

GIB = 1024.0 ** 3
GPU_VENDOR_IDS = {"nvidia": ("0x10de",), "amd": ("0x1002",)}
NIC_VENDOR_HINTS = (("connectx", "0x15b3"), ("bluefield", "0x15b3"), ("mellanox", "0x15b3"), ("nvidia", "0x15b3"),
                    ("broadcom", "0x14e4"), ("intel", "0x8086"))


def _where(ctx):
    return "%s: burn_in test %s" % (ctx.manifest.get("sku", "manifest"), ctx.test.name)


def _gpu_expectation(ctx, vendor=None):
    """``(count, bom.gpus)``; raises ToolNotFoundError (-> not_run) when no GPU is expected here."""
    gpus = ctx.bom.get("gpus") or {}
    count = gpus.get("count", 0)
    if not count or gpus.get("vendor") == "none":
        raise ToolNotFoundError("no GPU on this host (profile %s: inband_bom.gpus.count %s)" % (ctx.profile, count or 0))
    if vendor and gpus.get("vendor") and gpus["vendor"] != vendor:
        raise ToolNotFoundError("this test is for %s GPUs; the SKU's GPUs are %s" % (vendor, gpus["vendor"]))
    return int(count), gpus


# ------------------------------------------------------------------------------------------ node tier
def _stress_ng(ctx, stressor):
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


def check_stress_ng_cpu(ctx):
    """CPU stress: ``stress-ng --cpu <workers> [--cpu-method <method>] --metrics-brief --timeout <duration_s>``.

    params: ``workers`` (0 = one per CPU), ``method``, ``duration_s`` (default 10), ``verify`` (default false).
    """
    return _stress_ng(ctx, "cpu")


def check_stress_ng_vm(ctx):
    """Memory stress with verification: ``stress-ng --vm <workers> --vm-bytes <vm_bytes> --verify``.

    params: ``workers`` (0 = one per CPU), ``vm_bytes`` (default ``10%``, split among workers),
    ``duration_s`` (default 10), ``verify`` (default true).
    """
    return _stress_ng(ctx, "vm")


def check_memory_size(ctx):
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
                            "thresholds.min_gib", where=_where(ctx))
    need = max(limits)
    exp_words = " and ".join(words)
    if observed < need:
        return failed("MemTotal %.1f GiB, expected %s" % (observed, exp_words),
                      "a DIMM is missing or disabled: compare the DIMM count in the Redfish inventory and the SEL, "
                      "reseat or replace the DIMM", observed={"memtotal_gib": observed}, expected=exp_words)
    return passed(observed={"memtotal_gib": observed}, expected=exp_words,
                  reason="MemTotal %.1f GiB %s" % (observed, exp_words))


def _read(path):
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read().strip()
    except OSError:
        return None


def check_edac(ctx):
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
        entry = {"ce": number(_read(os.path.join(root, mc, "ce_count"))),
                 "ue": number(_read(os.path.join(root, mc, "ue_count"))), "dimms": {}}
        for dimm in sorted(os.listdir(os.path.join(root, mc))):
            if dimm.startswith(("dimm", "rank")):
                d = os.path.join(root, mc, dimm)
                label = _read(os.path.join(d, "dimm_label")) or dimm
                entry["dimms"][label] = {"ce": number(_read(os.path.join(d, "dimm_ce_count"))),
                                         "ue": number(_read(os.path.join(d, "dimm_ue_count")))}
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


def _pci_devices(sysfs):
    root = os.path.join(sysfs, "bus", "pci", "devices")
    out = []
    for addr in sorted(os.listdir(root)) if os.path.isdir(root) else []:
        d = os.path.join(root, addr)
        out.append({"address": addr, "vendor": (_read(os.path.join(d, "vendor")) or "").lower(),
                    "device": (_read(os.path.join(d, "device")) or "").lower(),
                    "class": (_read(os.path.join(d, "class")) or "").lower(),
                    "width": number(_read(os.path.join(d, "current_link_width"))),
                    "width_max": number(_read(os.path.join(d, "max_link_width"))),
                    "gen": gen_from_gts(number(_read(os.path.join(d, "current_link_speed")))),
                    "gen_max": gen_from_gts(number(_read(os.path.join(d, "max_link_speed"))))})
    return out


def _link_class(ctx, kind):
    """``(count, width, gen, vendors, classes, check_current)`` expected for ``gpu``/``nic`` links, or a not_run reason."""
    if kind == "gpu":
        gpus = ctx.bom.get("gpus") or {}
        count = int(gpus.get("count") or 0)
        if not count or gpus.get("vendor") == "none":
            return "no GPU expected (profile %s: inband_bom.gpus.count %d)" % (ctx.profile, count)
        spec = gpus.get("pcie") or {}
        width, gen = ctx.threshold("gpu_min_width", spec.get("width")), ctx.threshold("gpu_min_gen", spec.get("gen"))
        vendors = GPU_VENDOR_IDS.get(gpus.get("vendor"), GPU_VENDOR_IDS["nvidia"] + GPU_VENDOR_IDS["amd"])
        return count, width, gen, vendors, ("0x0300", "0x0302", "0x0380", "0x1200"), \
            bool(ctx.params.get("check_gpu_current_speed", False))
    nics = [n for n in (ctx.bom.get("nics") or []) if n.get("pcie") and n.get("count")]
    if not nics:
        return "no NIC with a PCIe link expected (profile %s: inband_bom.nics)" % ctx.profile
    spec = min((n["pcie"] for n in nics), key=lambda s: (s["width"], s["gen"]))
    width, gen = ctx.threshold("nic_min_width", spec["width"]), ctx.threshold("nic_min_gen", spec["gen"])
    vendors = tuple({v for n in nics for hint, v in NIC_VENDOR_HINTS if hint in str(n.get("model") or "").lower()})
    return sum(n["count"] for n in nics), width, gen, vendors or None, ("0x0200", "0x0207"), True


def check_pcie_links(ctx):
    """PCIe link width/generation of every GPU and NIC against the SKU (what exists is compared).

    thresholds: ``gpu_min_width``/``gpu_min_gen`` (default ``bom.gpus.pcie``), ``nic_min_width``/
    ``nic_min_gen`` (default the narrowest ``bom.nics[*].pcie``).  Devices are PCI function 0 of
    the GPU/NIC classes and vendors (cards, not ports), read from sysfs ``current_link_width``/
    ``current_link_speed``/``max_link_speed``; ``lspci -vv`` is kept as evidence and fills in links
    sysfs lacks.  GPUs drop link speed at idle, so a GPU's generation is its best of current and
    maximum unless ``params.check_gpu_current_speed``; NICs are judged on current width and speed.
    A class the profile does not expect is skipped with its reason; nothing to compare -> not_run.
    """
    devices = _pci_devices(ctx.sysfs)
    lspci = ctx.which("lspci")
    if lspci:
        res = ctx.run([lspci, "-vv", "-D"], "lspci", timeout_s=60)
        if res.rc == 0 and res.stdout.strip():
            by_addr = {d["address"]: d for d in parse_lspci_vv(res.stdout)}
            for dev in devices:
                alt = by_addr.get(dev["address"])
                if alt and dev["width"] is None and alt["sta_width"] is not None:
                    dev.update(width=alt["sta_width"], gen=alt["sta_gen"], width_max=alt["cap_width"],
                               gen_max=alt["cap_gen"])
    ctx.save_json("devices.json", devices)
    skipped, problems, observed, expected, compared = [], [], {}, {}, 0
    for kind in ("gpu", "nic"):
        spec = _link_class(ctx, kind)
        if isinstance(spec, str):
            skipped.append(spec)
            continue
        count, width, gen, vendors, classes, check_current = spec
        if width is None or gen is None:
            raise ManifestError("no PCIe width/gen to compare %s links with (bom pcie or thresholds %s_min_width/"
                                "%s_min_gen)" % (kind.upper(), kind, kind), where=_where(ctx))
        found = [d for d in devices if d["class"][:6] in classes and (vendors is None or d["vendor"] in vendors)
                 and d["address"].endswith(".0")]
        linked = [d for d in found if d["width"] is not None]
        expected[kind] = "%d × ≥ x%d Gen%d" % (count, width, gen)
        if found and not linked:
            skipped.append("%d %s device(s) report no PCIe link (virtual devices: %s)"
                           % (len(found), kind.upper(), ", ".join(d["address"] for d in found)))
            continue
        compared += 1
        observed[kind] = [{"address": d["address"], "width": d["width"], "gen": d["gen"], "gen_max": d["gen_max"]}
                          for d in linked]
        for dev in linked:
            dgen = dev["gen"] if check_current else max(dev["gen"] or 0, dev["gen_max"] or 0)
            if dev["width"] < width or (dgen or 0) < gen:
                problems.append("%s %s x%d Gen%s, expected ≥ x%d Gen%d"
                                % (kind.upper(), dev["address"], dev["width"], dgen, width, gen))
        if len(linked) < count:
            problems.append("expected %d %s(s), found %d with a PCIe link" % (count, kind.upper(), len(linked)))
    if not compared:
        raise ToolNotFoundError("nothing to compare: %s" % "; ".join(skipped))
    note = " (not compared: %s)" % "; ".join(skipped) if skipped else ""
    if problems:
        return failed("; ".join(problems) + note, "reseat the card and its riser/cable; if it trains down again "
                                                  "replace the riser, then the card", observed=observed,
                      expected=expected)
    return passed(observed=observed, expected=expected,
                  reason="; ".join("%d %s link(s) %s" % (len(v), k.upper(), expected[k]) for k, v in observed.items())
                         + note)


def check_fio(ctx):
    """Storage with fio JSON: sequential bandwidth or 4 KiB random IOPS and p99 latency.

    params: ``rw`` (read, write, randread, randwrite, randrw), ``bs`` (default 1M, or 4k for random),
    ``size_mib`` (default 64), ``runtime_s`` (optional: time-based run), ``iodepth`` (16),
    ``numjobs`` (1), ``direct`` (1), ``ioengine`` (libaio), ``directory`` (default /var/tmp).
    thresholds (per direction the job exercises): ``min_bw_mbps`` (MB/s = 1e6 B/s, as drive datasheets
    print it), ``min_iops``, ``max_p99_lat_us`` (µs, completion latency p99).  ``params.filename`` (a file
    or a block device to read) replaces the temporary file in ``directory``; the temporary file is removed.
    """
    tool = ctx.require("fio")
    p = ctx.params
    rw = p.get("rw", "read")
    directory = p.get("directory", "/var/tmp")
    try:
        os.makedirs(directory, exist_ok=True)
    except OSError as exc:
        raise ManifestError("fio directory %s cannot be created: %s" % (directory, exc.strerror), where=_where(ctx))
    temporary = not p.get("filename")
    filename = p.get("filename") or os.path.join(directory, "symphony-fio-%s-%d.dat" % (ctx.test.name, os.getpid()))
    if not temporary and "write" in rw and not p.get("allow_device_write"):
        raise ManifestError("fio %s on %s would overwrite it; set params.allow_device_write" % (rw, filename),
                            where=_where(ctx))
    argv = [tool, "--name=%s" % ctx.test.name, "--filename=%s" % filename, "--rw=%s" % rw,
            "--bs=%s" % p.get("bs", "4k" if rw.startswith("rand") else "1M"),
            "--size=%dM" % int(p.get("size_mib", 64)), "--iodepth=%d" % int(p.get("iodepth", 16)),
            "--numjobs=%d" % int(p.get("numjobs", 1)), "--direct=%d" % int(p.get("direct", 1)),
            "--ioengine=%s" % p.get("ioengine", "libaio"), "--group_reporting", "--output-format=json"]
    if p.get("runtime_s"):
        argv += ["--time_based", "--runtime=%ds" % int(p["runtime_s"])]
    try:
        res = ctx.run(argv, "fio")
    finally:
        if temporary:
            try:
                os.unlink(filename)
            except OSError:
                pass
    if res.rc != 0:
        return failed("fio exited %s: %s" % (res.rc, (res.stderr or res.stdout).strip()[:300]),
                      "check the device's health (smartctl/nvme smart-log) and the fio parameters",
                      observed={"rc": res.rc})
    parsed = parse_fio_json(res.stdout)
    ctx.save_json("parsed.json", parsed)
    job = parsed["jobs"][0]
    if job["error"]:
        return failed("fio job %s reported error %s" % (job["name"], job["error"]),
                      "check the device's health and kernel log", observed={"error": job["error"]})
    directions = [d for d in ("read", "write") if d in job and (d in rw or rw in ("rw", "randrw", "readwrite"))]
    observed, problems, expected = {}, [], {}
    for d in directions:
        data = job[d]
        observed[d] = {"bw_mbps": round(data["bw_bytes_s"] / 1e6, 1), "iops": round(data["iops"], 1),
                       "p99_lat_us": round(data["p99_us"], 1) if data["p99_us"] is not None else None}
        floor_bw, floor_iops, ceil_p99 = (ctx.threshold("min_bw_mbps"), ctx.threshold("min_iops"),
                                          ctx.threshold("max_p99_lat_us"))
        if floor_bw is not None:
            expected["%s_bw_mbps" % d] = ">= %g" % floor_bw
            if observed[d]["bw_mbps"] < float(floor_bw):
                problems.append("%s bandwidth %.1f MB/s < %g MB/s" % (d, observed[d]["bw_mbps"], floor_bw))
        if floor_iops is not None:
            expected["%s_iops" % d] = ">= %g" % floor_iops
            if observed[d]["iops"] < float(floor_iops):
                problems.append("%s %.0f IOPS < %g IOPS" % (d, observed[d]["iops"], floor_iops))
        if ceil_p99 is not None:
            expected["%s_p99_lat_us" % d] = "<= %g" % ceil_p99
            if data["p99_us"] is None:
                problems.append("%s p99 latency not reported by fio" % d)
            elif data["p99_us"] > float(ceil_p99):
                problems.append("%s p99 latency %.0f µs > %g µs" % (d, data["p99_us"], ceil_p99))
    if problems:
        return failed("storage below the SKU thresholds (fio %s, bs %s): %s"
                      % (rw, job["bs"] or p.get("bs"), "; ".join(problems)),
                      "check the drive model/firmware against the SKU, its PCIe link and SMART health; replace "
                      "the drive if it stays below threshold", observed=observed, expected=expected)
    words = ", ".join("%s %.1f MB/s %.0f IOPS p99 %s µs" % (d, o["bw_mbps"], o["iops"],
                                                            "%.0f" % o["p99_lat_us"]
                                                            if o["p99_lat_us"] is not None else "n/a")
                      for d, o in observed.items())
    return passed(observed=observed, expected=expected or "fio completes without error", reason=words)


def check_kernel_log(ctx):
    """Kernel log of the current boot: XIDs, MCE, fatal/uncorrected AER, EDAC UE, GPU off the bus.

    thresholds: ``max_xid`` (XID events of any severity; when unset, only XIDs whose catalog severity
    is ``fail`` count), ``max_mce`` (default 0), ``max_aer_fatal`` (uncorrected AER lines, default 0),
    ``max_aer_corrected`` (optional).
    """
    from .runner import kernel_findings
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


def check_ibstat(ctx):
    """InfiniBand/RoCE ports (``ibstat``): every expected fabric port Active/LinkUp at the SKU's rate.

    Expected: ``bom.nics`` entries with ``role: fabric`` (count, speed_gbps).  params:
    ``link_layer`` (default ``InfiniBand``; ``Ethernet`` for RoCE).
    """
    nics = [n for n in (ctx.bom.get("nics") or []) if n.get("role") == "fabric" and n.get("count")]
    if not nics:
        raise ToolNotFoundError("no fabric NIC expected on this host (profile %s: bom.nics role fabric)" % ctx.profile)
    tool = ctx.require("ibstat", why=" (no InfiniBand stack)")
    res = ctx.run([tool], "ibstat", timeout_s=60)
    if res.rc != 0:
        raise ToolNotFoundError("ibstat exited %s: %s" % (res.rc, (res.stderr or res.stdout).strip()[:200]))
    cas = parse_ibstat(res.stdout)
    ctx.save_json("parsed.json", cas)
    layer = ctx.params.get("link_layer", "InfiniBand")
    speed = min(n.get("speed_gbps") or 0 for n in nics)
    count = sum(n["count"] for n in nics)
    ports = [dict(port, ca=ca["ca"]) for ca in cas for port in ca["ports"] if port["link_layer"] == layer]
    good = [p for p in ports if p["state"] == "Active" and p["physical_state"] == "LinkUp"
            and (p["rate_gbps"] or 0) >= speed]
    bad = ["%s/%d %s/%s %s Gb/s" % (p["ca"], p["port"], p["state"], p["physical_state"], p["rate_gbps"])
           for p in ports if p not in good]
    expected = "%d %s port(s) Active/LinkUp at ≥ %g Gb/s" % (count, layer, speed)
    observed = [{"port": "%s/%d" % (p["ca"], p["port"]), "state": p["state"], "physical_state": p["physical_state"],
                 "rate_gbps": p["rate_gbps"]} for p in ports]
    if len(good) < count:
        down = "; not up: " + ", ".join(bad) if bad else ""
        return failed("%d of %d expected %s ports up at ≥ %g Gb/s%s" % (len(good), count, layer, speed, down),
                      "check the cable and transceiver of the ports named, then the switch port; reseat or replace",
                      observed=observed, expected=expected)
    return passed(observed=observed, expected=expected, reason="%d %s ports Active" % (len(good), layer))


# ------------------------------------------------------------------------------------------- GPU tier
def check_nvidia_smi_health(ctx):
    """GPU inventory and health from ``nvidia-smi -q -x``.

    Fails on: GPU count ≠ ``bom.gpus.count``; a product name not containing ``bom.gpus.model``;
    ECC not enabled (``thresholds.require_ecc``, default true); volatile uncorrectable ECC errors
    > ``max_ecc_uncorrectable`` (0); retired pages pending or double-bit retired >
    ``max_retired_dbe`` (0); remapped rows pending or failed, uncorrectable remaps >
    ``max_remapped_uncorrectable`` (0); a hardware throttle reason active at idle; reset
    required; current PCIe width below ``bom.gpus.pcie.width``.
    """
    count, gpus = _gpu_expectation(ctx, "nvidia")
    count = int(ctx.threshold("gpu_count", count))
    tool = ctx.require("nvidia-smi", why=" (no NVIDIA driver)")
    res = ctx.run([tool, "-q", "-x"], "nvidia-smi", timeout_s=120)
    if res.rc != 0:
        return failed("nvidia-smi exited %s: %s" % (res.rc, (res.stdout + res.stderr).strip()[:300]),
                      "check that the NVIDIA driver is loaded and every GPU is on the bus (lspci); reset or "
                      "power-cycle the node", observed={"rc": res.rc}, expected="%d GPUs" % count)
    parsed = parse_nvidia_smi_xml(res.stdout)
    ctx.save_json("parsed.json", parsed)
    problems = []
    found = parsed["gpus"]
    if len(found) != count:
        problems.append("expected %d GPUs, nvidia-smi lists %d (attached_gpus %s)"
                        % (count, len(found), parsed["attached_gpus"]))
    model = gpus.get("model")
    want_width = (gpus.get("pcie") or {}).get("width")
    for g in found:
        tag = "GPU %s %s" % (g["index"], g["pci_bus_id"])
        if model and model.lower() not in (g["product_name"] or "").lower():
            problems.append("%s is %r, expected %r" % (tag, g["product_name"], model))
        if ctx.threshold("require_ecc", True) and g["ecc"]["mode"] != "Enabled":
            problems.append("%s ECC mode %s" % (tag, g["ecc"]["mode"]))
        if (g["ecc_uncorrectable_volatile"] or 0) > float(ctx.threshold("max_ecc_uncorrectable", 0)):
            problems.append("%s %d uncorrectable ECC errors" % (tag, g["ecc_uncorrectable_volatile"]))
        retired = g["retired_pages"] or {}
        if retired.get("pending") and float(ctx.threshold("max_retired_pages_pending", 0)) < 1:
            problems.append("%s page retirement pending (reset required)" % tag)
        if (retired.get("double_bit") or 0) > float(ctx.threshold("max_retired_dbe", 0)):
            problems.append("%s %d double-bit retired pages" % (tag, retired["double_bit"]))
        remap = g["remapped_rows"] or {}
        if remap.get("failure") and float(ctx.threshold("max_remapped_rows_failure", 0)) < 1:
            problems.append("%s row remapping failed" % tag)
        if remap.get("pending"):
            problems.append("%s row remapping pending (reset required)" % tag)
        if (remap.get("uncorrectable") or 0) > float(ctx.threshold("max_remapped_uncorrectable", 0)):
            problems.append("%s %d rows remapped for uncorrectable errors" % (tag, remap["uncorrectable"]))
        if g["hardware_throttle"]:
            problems.append("%s throttled at idle: %s" % (tag, ", ".join(g["hardware_throttle"])))
        if g["reset_required"]:
            problems.append("%s reports reset required" % tag)
        if want_width and g["pcie"]["width_current"] and g["pcie"]["width_current"] < want_width:
            problems.append("%s PCIe x%d, expected x%d" % (tag, g["pcie"]["width_current"], want_width))
    observed = [{"index": g["index"], "pci_bus_id": g["pci_bus_id"], "serial": g["serial"], "product": g["product_name"],
                 "temp_c": g["temp_c"], "power_w": g["power_draw_w"], "ecc_mode": g["ecc"]["mode"],
                 "ecc_uncorrectable_volatile": g["ecc_uncorrectable_volatile"],
                 "retired_pages": g["retired_pages"], "remapped_rows": g["remapped_rows"],
                 "active_throttle": g["active_throttle"], "pcie": g["pcie"]} for g in found]
    expected = "%d × %s, ECC on, no uncorrectable/remap/retirement problems, no hardware throttle" % (
        count, model or "GPU")
    if problems:
        return failed("; ".join(problems), "reset the GPU(s) named; replace a GPU with a failed row remap, DBEs "
                                           "or a degraded link that persists after reseating",
                      observed=observed, expected=expected)
    return passed(observed=observed, expected=expected,
                  reason="%d GPUs healthy (driver %s)" % (len(found), parsed["driver_version"]))


DCGM_LEVELS = {"quick": 1, "short": 1, "medium": 2, "long": 3, "xlong": 4}


def check_dcgm_diag(ctx):
    """DCGM diagnostic ``dcgmi diag -r <level> -j`` at ``params.level`` (1-4, quick/medium/long/xlong or a test list).

    A ``Fail`` fails, a ``Warn`` passes with the warning in the reason, ``Skip``/``Not Run`` tests
    are listed; a document with no test is ``not_run`` (never pass).  Exit code and JSON are read
    together: a non-zero exit with no failing test in the JSON fails.
    """
    _gpu_expectation(ctx, "nvidia")
    tool = ctx.require("dcgmi", why=" (DCGM not installed)")
    level = ctx.params.get("level", 1)
    level = DCGM_LEVELS.get(str(level).lower(), level)
    res = ctx.run([tool, "diag", "-r", level, "-j"] + list(ctx.params.get("extra") or []), "dcgmi")
    if "{" not in res.stdout:
        raise ToolNotFoundError("dcgmi diag produced no JSON (exit %s): %s"
                                % (res.rc, (res.stdout + res.stderr).strip()[:300]))
    parsed = parse_dcgm_diag(res.stdout)
    ctx.save_json("parsed.json", parsed)
    observed = {"level": level, "version": parsed["version"], "layout": parsed["layout"], "counts": parsed["counts"],
                "tests": {t["name"]: t["status"] for t in parsed["tests"]}, "rc": res.rc}
    expected = "every DCGM level-%s test Pass (Warn reported)" % level

    def messages(status):
        out = []
        for t in parsed["tests"]:
            if t["status"] != status:
                continue
            msgs = [w["message"] for r in t["results"] for w in r["warnings"] if r["status"] == status]
            gpus = sorted({g for r in t["results"] if r["status"] == status for g in r["gpu_ids"]})
            out.append("%s%s%s" % (t["name"], " (GPU %s)" % ",".join(map(str, gpus)) if gpus else "",
                                   ": " + " | ".join(msgs)[:300] if msgs else ""))
        return out

    skipped = [t["name"] for t in parsed["tests"] if t["status"] in ("skip", "not_run")]
    if parsed["verdict"] == "fail":
        return failed("DCGM diag level %s failed: %s" % (level, "; ".join(messages("fail"))),
                      "follow the DCGM error's recommendation; reset the GPU named and rerun; replace it if the "
                      "failure repeats", observed=observed, expected=expected)
    if parsed["verdict"] == "not_run":
        return not_run("DCGM ran no test: %s" % (parsed["runtime_error"] or parsed["preamble"]
                                                 or "the JSON document holds no test result"))
    if res.rc not in (0, None):
        return failed("dcgmi exited %s although no test failed in its JSON" % res.rc,
                      "read the raw output kept as evidence", observed=observed, expected=expected)
    reason = "DCGM diag level %s: %d passed" % (level, parsed["counts"]["pass"])
    if parsed["verdict"] == "warn":
        reason += "; warnings: %s" % "; ".join(messages("warn"))
    if skipped:
        reason += "; skipped/not run: %s" % ", ".join(skipped)
    return passed(observed=observed, expected=expected, reason=reason)


def check_rocm_smi_health(ctx):
    """AMD GPU inventory and health from ``rocm-smi --json``.

    Fails on GPU count ≠ ``bom.gpus.count``; junction temperature ≥ ``max_temp_c`` (default
    ``bom.gpus.max_operating_temp_c``); PCIe replays > ``max_pcie_replay`` (when set); VRAM below
    ``bom.gpus.memory_gib`` × 0.95.
    """
    count, gpus = _gpu_expectation(ctx, "amd")
    count = int(ctx.threshold("gpu_count", count))
    tool = ctx.require("rocm-smi", why=" (ROCm not installed)")
    res = ctx.run([tool, "--showid", "--showtemp", "--showpower", "--showmeminfo", "vram", "--showbus",
                   "--showserial", "--showreplaycount", "--showproductname", "--showclocks", "--showdriverversion",
                   "--json"], "rocm-smi", timeout_s=120)
    parsed = parse_rocm_smi_json(res.stdout)
    ctx.save_json("parsed.json", parsed)
    problems = []
    if len(parsed["gpus"]) != count:
        problems.append("expected %d GPUs, rocm-smi lists %d" % (count, len(parsed["gpus"])))
    max_temp = ctx.threshold("max_temp_c", gpus.get("max_operating_temp_c"))
    max_replay = ctx.threshold("max_pcie_replay")
    for g in parsed["gpus"]:
        tag = "card%d %s" % (g["card"], g["pci_bus"])
        if max_temp is not None and (g["temp_junction_c"] or 0) >= float(max_temp):
            problems.append("%s junction %.0f °C ≥ %g °C" % (tag, g["temp_junction_c"], float(max_temp)))
        if max_replay is not None and (g["pcie_replay_count"] or 0) > float(max_replay):
            problems.append("%s %d PCIe replays" % (tag, g["pcie_replay_count"]))
        if gpus.get("memory_gib") and g["vram_total_bytes"] and g["vram_total_bytes"] / GIB < gpus["memory_gib"] * 0.95:
            problems.append("%s VRAM %.0f GiB < %s GiB" % (tag, g["vram_total_bytes"] / GIB, gpus["memory_gib"]))
    observed = [{k: g[k] for k in ("card", "pci_bus", "serial", "temp_junction_c", "power_w", "pcie_replay_count",
                                   "vram_total_bytes")} for g in parsed["gpus"]]
    if problems:
        return failed("; ".join(problems), "reset the GPU named; replace it if the problem persists",
                      observed=observed, expected="%d healthy AMD GPUs" % count)
    return passed(observed=observed, expected="%d healthy AMD GPUs" % count,
                  reason="%d AMD GPUs healthy (driver %s)" % (len(parsed["gpus"]), parsed["driver_version"]))


def check_amd_field_diag(ctx):
    """AMD field diagnostics adapter: runs ``params.command`` (default AGFHC ``all_lvl1`` recipe).

    Judged on the exit status only (0 = pass); the raw output is kept as evidence.
    """
    _gpu_expectation(ctx, "amd")
    command = list(ctx.params.get("command") or ["/opt/amd/agfhc/agfhc", "-r", "all_lvl1"])
    tool = ctx.require(command[0], why=" (AMD field diagnostics not installed)")
    res = ctx.run([tool] + command[1:], "field-diag")
    observed = {"rc": res.rc, "duration_s": res.duration_s}
    if res.rc != 0:
        tail = (res.stdout + res.stderr).strip().splitlines()[-5:]
        return failed("%s exited %s: %s" % (os.path.basename(tool), res.rc, " | ".join(tail)[:400]),
                      "open the diagnostic's log (evidence) and follow its recommendation; RMA the GPU it names",
                      observed=observed, expected="exit 0")
    return passed(observed=observed, expected="exit 0", reason="%s passed" % os.path.basename(tool))


def check_rocm_validation_suite(ctx):
    """AMD ROCm Validation Suite: ``rvs -c <conf dir>/<params.suite>.conf`` (default suite ``gst_stress``).

    params: ``suite``, ``conf_dir`` (default ``/opt/rocm/share/rocm-validation-suite/conf``).  Pass: exit 0
    and no ``pass: FALSE`` line in the output; the raw output is kept as evidence.
    """
    _gpu_expectation(ctx, "amd")
    tool = ctx.require("rvs", why=" (ROCm Validation Suite not installed)")
    conf = os.path.join(ctx.params.get("conf_dir", "/opt/rocm/share/rocm-validation-suite/conf"),
                        "%s.conf" % ctx.params.get("suite", "gst_stress"))
    res = ctx.run([tool, "-c", conf], "rvs")
    text = res.stdout + res.stderr
    false_lines = [ln.strip() for ln in text.splitlines() if "pass: false" in ln.lower()]
    observed = {"rc": res.rc, "failed_lines": false_lines[:20], "suite": ctx.params.get("suite", "gst_stress")}
    if res.rc != 0 or false_lines:
        return failed("rvs %s: exit %s, %d failing result line(s): %s"
                      % (observed["suite"], res.rc, len(false_lines), " | ".join(false_lines[:3])[:300]),
                      "reset the GPU named and rerun; RMA it if the suite fails again", observed=observed,
                      expected="exit 0, every action pass: TRUE")
    return passed(observed=observed, expected="exit 0, every action pass: TRUE",
                  reason="rvs %s passed" % observed["suite"])


def check_gpu_burn(ctx):
    """GPU stress with gpu-burn for ``params.duration_s`` (default 60): ``gpu_burn [-d] -tc <duration_s>``.

    params: ``use_doubles`` (``-d``, default false), ``binary``.  Fails when a GPU is FAULTY, a GPU's
    error count exceeds ``thresholds.max_errors`` (default 0), fewer GPUs than ``bom.gpus.count`` were
    tested, or a GPU reached ``thresholds.max_temp_c`` (default ``bom.gpus.max_operating_temp_c``).
    """
    count, gpus = _gpu_expectation(ctx, "nvidia")
    tool = ctx.require(ctx.params.get("binary", "gpu_burn"), "gpu-burn", why=" (gpu-burn not installed)")
    duration = int(ctx.params.get("duration_s", 60))
    args = (["-d"] if ctx.params.get("use_doubles") else []) + ["-tc"]
    res = ctx.executor.run([tool] + args + [str(duration)],
                           min(ctx.remaining(), duration + 120), cwd=os.path.dirname(tool))
    ctx.save_text("gpu-burn.stdout.txt", res.stdout + res.stderr)
    if res.timed_out:
        from .runner import TestTimeoutError
        raise TestTimeoutError("gpu-burn did not finish within %.0fs" % res.duration_s, where=ctx.test.name)
    parsed = parse_gpu_burn(res.stdout + res.stderr)
    ctx.save_json("parsed.json", parsed)
    observed = {"tested": parsed["tested"], "results": parsed["results"], "max_temp_c": parsed["max_temp_c"],
                "gflops": parsed["last_gflops"], "max_errors": parsed["max_errors"]}
    problems = []
    if parsed["faulty"]:
        problems.append("GPU %s FAULTY (computation errors)" % ", ".join(map(str, parsed["faulty"])))
    max_errors = float(ctx.threshold("max_errors", 0))
    erring = [i for i, e in enumerate(parsed["max_errors"]) if e > max_errors]
    if erring:
        problems.append("GPU %s counted errors > %g" % (", ".join(map(str, erring)), max_errors))
    if parsed["tested"] < count:
        problems.append("gpu-burn tested %d GPUs, expected %d" % (parsed["tested"], count))
    max_temp = ctx.threshold("max_temp_c", gpus.get("max_operating_temp_c"))
    if max_temp is not None:
        hot = [i for i, t in enumerate(parsed["max_temp_c"]) if t >= float(max_temp)]
        if hot:
            problems.append("GPU %s reached ≥ %g °C" % (", ".join(map(str, hot)), float(max_temp)))
    if problems:
        return failed("; ".join(problems), "replace a GPU that computes wrong results; for heat, check fans, "
                                           "airflow/coolant and the heatsink contact", observed=observed,
                      expected="%d GPUs OK" % count)
    return passed(observed=observed, expected="%d GPUs OK" % count,
                  reason="gpu-burn %ds: %d GPUs OK" % (duration, parsed["tested"]))


def check_dcgmproftester(ctx):
    """GPU stress with dcgmproftester (``-t 1004`` tensor FMA by default) for ``params.duration_s``; exit 0 = pass."""
    _gpu_expectation(ctx, "nvidia")
    tool = ctx.require("dcgmproftester12", "dcgmproftester11", "dcgmproftester", why=" (DCGM not installed)")
    duration = int(ctx.params.get("duration_s", 60))
    res = ctx.run([tool, "--no-dcgm-validation", "-t", ctx.params.get("field_id", 1004), "-d", duration],
                  "dcgmproftester")
    if res.rc != 0:
        return failed("%s exited %s: %s" % (os.path.basename(tool), res.rc, (res.stderr or res.stdout)
                                            .strip().splitlines()[-1:]),
                      "reset the GPU and rerun; replace it if the stress fails again", observed={"rc": res.rc},
                      expected="exit 0")
    return passed(observed={"rc": 0}, expected="exit 0", reason="%s %ds completed" % (os.path.basename(tool), duration))


# ----------------------------------------------------------------------------------------- power tier
def evaluate_power(samples, tdp_w, min_fraction, max_fraction, max_throttle_pct, max_temp_c, warmup_s=0.0,
                   on_windows=None, expected_gpus=None, max_power_brake_events=None):
    """Judge power telemetry (1 Hz samples) against the SKU.

    ``samples``: :class:`telemetry.Sample` list; ``tdp_w`` (W); the mean power of each GPU over the
    load window must lie within ``[min_fraction, max_fraction] × tdp_w``; ``max_throttle_pct``:
    share of load samples with a thermal or power-brake throttle reason (NVML
    ``HwThermalSlowdown``/``SwThermalSlowdown``/``HwSlowdown``/``HwPowerBrakeSlowdown``) must stay
    at or below it (the SW power cap at the limit is expected under TDP load and not counted);
    ``max_temp_c``: every sample below it.  The load window starts after ``warmup_s``; with
    ``on_windows`` (pulsating load, ``[(start_s, end_s)]``) power is judged on on-phase samples
    only (skipping each phase's first second of ramp).  ``max_power_brake_events``: rising edges of
    ``hw_power_brake_slowdown`` per GPU allowed (None: only the throttle share is judged).
    Returns ``(ok, problems, per_gpu)``.
    """
    problems, per_gpu = [], {}
    loaded = [s for s in samples if s.t_s >= warmup_s]
    if not loaded:
        return False, ["no telemetry sample after the %gs warm-up" % warmup_s], per_gpu
    gpus = sorted({s.gpu for s in samples})
    if expected_gpus is not None and len(gpus) < expected_gpus:
        problems.append("telemetry from %d GPUs, expected %d" % (len(gpus), expected_gpus))
    low, high = tdp_w * min_fraction, tdp_w * max_fraction
    for gpu in gpus:
        mine = [s for s in loaded if s.gpu == gpu]
        judged = mine
        if on_windows:
            judged = [s for s in mine if any(a + 1.0 <= s.t_s < b for a, b in on_windows)]
        powers = [s.power_w for s in judged if s.power_w is not None]
        temps = [s.temp_c for s in samples if s.gpu == gpu and s.temp_c is not None]
        throttled = [s for s in mine if set(s.throttle) & set(telemetry.THERMAL_THROTTLE + telemetry.POWER_BRAKE_THROTTLE)]
        entry = {"samples": len(mine), "judged": len(powers),
                 "mean_power_w": round(sum(powers) / len(powers), 1) if powers else None,
                 "min_power_w": min(powers) if powers else None, "max_power_w": max(powers) if powers else None,
                 "max_temp_c": max(temps) if temps else None,
                 "throttle_pct": round(100.0 * len(throttled) / len(mine), 1) if mine else None,
                 "throttle_reasons": sorted({r for s in throttled for r in s.throttle
                                             if r in telemetry.THERMAL_THROTTLE + telemetry.POWER_BRAKE_THROTTLE})}
        brake, edges = False, 0
        for sample in mine:
            now = "hw_power_brake_slowdown" in sample.throttle
            edges += 1 if now and not brake else 0
            brake = now
        entry["power_brake_events"] = edges
        per_gpu[str(gpu)] = entry
        if max_power_brake_events is not None and edges > max_power_brake_events:
            problems.append("GPU %d %d power-brake event(s) > %g" % (gpu, edges, max_power_brake_events))
        if not powers:
            problems.append("GPU %d: no power reading in the load window" % gpu)
        elif not low <= entry["mean_power_w"] <= high:
            problems.append("GPU %d mean %.1f W outside %.1f-%.1f W (%g-%g × TDP %g W)"
                            % (gpu, entry["mean_power_w"], low, high, min_fraction, max_fraction, tdp_w))
        if entry["throttle_pct"] is not None and entry["throttle_pct"] > max_throttle_pct:
            problems.append("GPU %d thermal/power-brake throttled %.1f%% of samples > %g%% (%s)"
                            % (gpu, entry["throttle_pct"], max_throttle_pct, ", ".join(entry["throttle_reasons"])))
        if entry["max_temp_c"] is not None and entry["max_temp_c"] >= max_temp_c:
            problems.append("GPU %d reached %.0f °C ≥ %g °C" % (gpu, entry["max_temp_c"], max_temp_c))
    return not problems, problems, per_gpu


def _load_command(ctx, duration_s):
    load = ctx.params.get("load", "auto")
    if load in ("auto", "gpu_burn"):
        tool = ctx.which("gpu_burn", "gpu-burn")
        if tool:
            return [tool] + [str(a) for a in ctx.params.get("load_args", ["-tc"])] + [str(int(duration_s))], tool
    if load in ("auto", "dcgmproftester"):
        tool = ctx.which("dcgmproftester12", "dcgmproftester11", "dcgmproftester")
        if tool:
            return [tool, "--no-dcgm-validation", "-t", "1004", "-d", str(int(duration_s))], tool
    raise ToolNotFoundError("no GPU load generator (gpu_burn or dcgmproftester) on this node")


def _power_test(ctx, pulse):
    """Shared body of the power tests.

    thresholds: ``target_w`` (default ``bom.gpus.tdp_w``), ``min_fraction_of_tdp`` (0.9),
    ``max_fraction_of_tdp`` (1.05), ``max_throttle_pct`` (5), ``max_temp_c`` (default
    ``bom.gpus.max_operating_temp_c``, else 87), ``max_xid`` (0), ``max_power_brake_events`` (pulsating: 0).
    ``max_sel_critical`` is judged on the controller from the BMC SEL, not here.
    params: ``duration_s`` (300), ``warmup_s`` (10), ``sample_interval_s`` (1), ``period_s`` (10),
    ``duty_cycle`` (0.5), ``load`` (auto|gpu_burn|dcgmproftester).
    """
    count, gpus = _gpu_expectation(ctx)
    tdp = ctx.threshold("target_w", gpus.get("tdp_w"))
    max_temp = ctx.threshold("max_temp_c", gpus.get("max_operating_temp_c") or 87)
    if tdp is None:
        raise ManifestError("power tests need thresholds.target_w or bom.gpus.tdp_w", where=_where(ctx))
    low, high = float(ctx.threshold("min_fraction_of_tdp", 0.9)), float(ctx.threshold("max_fraction_of_tdp", 1.05))
    max_throttle, max_xid = float(ctx.threshold("max_throttle_pct", 5)), float(ctx.threshold("max_xid", 0))
    brakes = ctx.threshold("max_power_brake_events", 0 if pulse else None)
    duration = float(ctx.params.get("duration_s", 300))
    warmup = float(ctx.params.get("warmup_s", 10))
    period, duty = float(ctx.params.get("period_s", 10)), float(ctx.params.get("duty_cycle", 0.5))
    if pulse and not (0 < duty < 1 and period >= 2):
        raise ManifestError("power_pulsating needs params.period_s ≥ 2 and 0 < params.duty_cycle < 1",
                            where=_where(ctx))
    backend = telemetry.open_backend(tuple(ctx.params.get("telemetry", ("nvml", "nvidia-smi", "rocm-smi"))))
    argv, tool = _load_command(ctx, duration)
    xid_note = ""
    try:
        marker = ctx.kernel_log.snapshot()
    except ToolNotFoundError as exc:
        marker, xid_note = None, exc.message
    sampler = telemetry.Sampler(backend, float(ctx.params.get("sample_interval_s", 1.0))).start()
    windows = []
    out_path = os.path.join(ctx.evidence_store.root, ctx.evidence_store.base, ctx.rel_dir, "load.stdout.txt")
    os.makedirs(os.path.dirname(out_path), exist_ok=True)
    with open(out_path, "w", encoding="utf-8") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, cwd=os.path.dirname(tool),
                                start_new_session=True)
        t0 = time.monotonic()
        try:
            while proc.poll() is None:
                now = time.monotonic() - t0
                if now >= duration + 60 or ctx.remaining() <= 5:
                    break
                if pulse:
                    phase = now % period
                    on = phase < duty * period
                    if on and (not windows or windows[-1][1] is not None):
                        os.killpg(proc.pid, signal.SIGCONT)
                        windows.append([sampler.clock() - sampler.started, None])
                    elif not on and windows and windows[-1][1] is None:
                        os.killpg(proc.pid, signal.SIGSTOP)
                        windows[-1][1] = sampler.clock() - sampler.started
                ctx.sleep(0.2)
        finally:
            for sig in (signal.SIGCONT, signal.SIGTERM):
                try:
                    os.killpg(proc.pid, sig)
                except OSError:
                    pass
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            samples = sampler.stop()
            backend.close()
    rel = os.path.relpath(out_path, ctx.evidence_store.root)
    ctx.evidence_store.files.append(rel)
    ctx.evidence["load_output"] = rel
    if windows and windows[-1][1] is None:
        windows[-1][1] = samples[-1].t_s + 1 if samples else 0
    ctx.save_text("samples.csv", telemetry.samples_to_csv(samples))
    ctx.save_json("samples.json", {"backend": backend.name, "interval_s": sampler.interval_s,
                                   "tdp_w": tdp, "on_windows": windows, "errors": sampler.errors,
                                   "samples": [s.to_dict() for s in samples]})
    ok, problems, per_gpu = evaluate_power(samples, float(tdp), low, high, max_throttle, float(max_temp), warmup,
                                           [tuple(w) for w in windows] if pulse else None, count,
                                           None if brakes is None else float(brakes))
    xids = []
    if marker is not None:
        from .runner import kernel_findings
        _text, records = ctx.kernel_log.since(marker)
        xids = kernel_findings(records)["xids"]
        if sum(f["count"] for f in xids) > max_xid:
            problems.append("XID during load: %s" % ", ".join("Xid %d x%d (%s)" % (f["xid"], f["count"], f["description"])
                                                              for f in xids))
    else:
        problems.append("kernel log not readable, XIDs not checked: %s" % xid_note)
    observed = {"per_gpu": per_gpu, "xids": xids, "samples": len(samples), "backend": backend.name,
                "load": os.path.basename(tool)}
    expected = {"mean_power_w": "%g-%g × %g W" % (low, high, tdp), "max_throttle_pct": max_throttle,
                "max_temp_c": max_temp, "max_xid": max_xid}
    if pulse:
        expected.update(period_s=period, duty=duty)
    if problems:
        return failed("; ".join(problems), "check PSUs and power cabling for power-brake events, fans/coolant and "
                                           "heatsink contact for thermal throttling; replace the GPU or PSU that "
                                           "stands out", observed=observed, expected=expected)
    return passed(observed=observed, expected=expected,
                  reason="%s load %gs: %d GPUs within %g-%g × %g W, throttle ≤ %g%%, below %g °C, no XID"
                         % ("pulsating" if pulse else "sustained", duration, len(per_gpu), low, high, tdp,
                            max_throttle, max_temp))


def check_power_sustained(ctx):
    """Sustained TDP load for ``params.duration_s`` sampled at 1 Hz; judged by :func:`evaluate_power` and no XID."""
    return _power_test(ctx, pulse=False)


def check_power_pulsating(ctx):
    """Pulsating load (``params.period_s``, ``params.duty_cycle``) that mimics a training step: the load
    process is stopped (SIGSTOP) and resumed (SIGCONT) on that square wave; same rules on on-phase power,
    plus power-brake events."""
    return _power_test(ctx, pulse=True)


KINDS = {
    "stress_ng_cpu": check_stress_ng_cpu,
    "stress_ng_vm": check_stress_ng_vm,
    "memory_size": check_memory_size,
    "edac": check_edac,
    "pcie_links": check_pcie_links,
    "fio": check_fio,
    "kernel_log_scan": check_kernel_log,
    "ibstat": check_ibstat,
    "nvidia_smi": check_nvidia_smi_health,
    "dcgm_diag": check_dcgm_diag,
    "rocm_smi": check_rocm_smi_health,
    "rocm_validation_suite": check_rocm_validation_suite,
    "amd_field_diag": check_amd_field_diag,
    "gpu_burn": check_gpu_burn,
    "dcgmproftester": check_dcgmproftester,
    "power_sustained": check_power_sustained,
    "power_pulsating": check_power_pulsating,
}
