# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Node-tier test kinds for the node's devices: PCIe links of GPUs and NICs, storage (fio), InfiniBand ports.

Every function takes a :class:`TestContext` and returns an ``Outcome``; an absent tool or a device class the
profile does not expect raises :class:`ToolNotFoundError` (the runner makes the test ``not_run``).
"""

from __future__ import annotations

import os
import re
from typing import Any

from ..._core.errors import ManifestError, ToolNotFoundError
from ..._core.gate import Outcome, failed, passed
from ..._host.parsers import number
from ..._host.parsers.fio import parse_fio_json
from ..._host.parsers.ibstat import parse_ibstat
from ..._host.parsers.lspci import gen_from_gts, parse_lspci_vv
from ..context import TestContext
from .common import read_sysfs, where_in_sku

GPU_VENDOR_IDS: dict[str, tuple[str, ...]] = {"nvidia": ("0x10de",), "amd": ("0x1002",)}
NIC_VENDOR_HINTS = (("connectx", "0x15b3"), ("bluefield", "0x15b3"), ("mellanox", "0x15b3"), ("nvidia", "0x15b3"),
                    ("broadcom", "0x14e4"), ("intel", "0x8086"))


def _pci_devices(sysfs: str) -> list[dict]:
    root = os.path.join(sysfs, "bus", "pci", "devices")
    out = []
    for addr in sorted(os.listdir(root)) if os.path.isdir(root) else []:
        d = os.path.join(root, addr)
        out.append({"address": addr, "vendor": (read_sysfs(os.path.join(d, "vendor")) or "").lower(),
                    "device": (read_sysfs(os.path.join(d, "device")) or "").lower(),
                    "class": (read_sysfs(os.path.join(d, "class")) or "").lower(),
                    "width": number(read_sysfs(os.path.join(d, "current_link_width"))),
                    "width_max": number(read_sysfs(os.path.join(d, "max_link_width"))),
                    "gen": gen_from_gts(number(read_sysfs(os.path.join(d, "current_link_speed")))),
                    "gen_max": gen_from_gts(number(read_sysfs(os.path.join(d, "max_link_speed"))))})
    return out


def _link_class(ctx: TestContext, kind: str) -> tuple | str:
    """``(count, width, gen, vendors, classes, check_current)`` expected for ``gpu``/``nic`` links, or a not_run reason."""
    if kind == "gpu":
        gpus = ctx.bom.get("gpus") or {}
        count = int(gpus.get("count") or 0)
        if not count or gpus.get("vendor") == "none":
            return "no GPU expected (profile %s: inband_bom.gpus.count %d)" % (ctx.profile, count)
        spec = gpus.get("pcie") or {}
        width, gen = ctx.threshold("gpu_min_width", spec.get("width")), ctx.threshold("gpu_min_gen", spec.get("gen"))
        vendors = GPU_VENDOR_IDS.get(gpus.get("vendor") or "", GPU_VENDOR_IDS["nvidia"] + GPU_VENDOR_IDS["amd"])
        return count, width, gen, vendors, ("0x0300", "0x0302", "0x0380", "0x1200"), \
            bool(ctx.params.get("check_gpu_current_speed", False))
    nics = [n for n in (ctx.bom.get("nics") or []) if n.get("pcie") and n.get("count")]
    if not nics:
        return "no NIC with a PCIe link expected (profile %s: inband_bom.nics)" % ctx.profile
    spec = min((n["pcie"] for n in nics), key=lambda s: (s["width"], s["gen"]))
    width, gen = ctx.threshold("nic_min_width", spec["width"]), ctx.threshold("nic_min_gen", spec["gen"])
    vendors = tuple({v for n in nics for hint, v in NIC_VENDOR_HINTS if hint in str(n.get("model") or "").lower()})
    return sum(n["count"] for n in nics), width, gen, vendors or None, ("0x0200", "0x0207"), True


def check_pcie_links(ctx: TestContext) -> Outcome:
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
                                "%s_min_gen)" % (kind.upper(), kind, kind), where=where_in_sku(ctx))
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


def check_fio(ctx: TestContext) -> Outcome:
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
        raise ManifestError("fio directory %s cannot be created: %s" % (directory, exc.strerror), where=where_in_sku(ctx))
    temporary = not p.get("filename")
    filename = p.get("filename") or os.path.join(directory, "symphony-fio-%s-%d.dat" % (ctx.test.name, os.getpid()))
    if not temporary and "write" in rw and not p.get("allow_device_write"):
        raise ManifestError("fio %s on %s would overwrite it; set params.allow_device_write" % (rw, filename),
                            where=where_in_sku(ctx))
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


# infiniband-diags ibstat.c IBPANIC text, printed as "ibpanic: [pid] main: stat of IB device 'mlx5_8' failed: ..."
_IBSTAT_UNREAD = re.compile(r"stat of IB device '([^']+)' failed")


def judge_ibstat(cas: list, rc: int | None, stderr: str, count: int, speed: float, layer: str) -> Outcome:
    """Verdict on ``ibstat``'s adapters ``cas`` (:func:`parse_ibstat`): ``count`` ports of ``layer`` Active/LinkUp
    at >= ``speed`` Gb/s.

    ibstat stops with exit 255 when it cannot read one adapter, after printing the ones before it
    (infiniband-diags ``ibstat.c``: ``IBPANIC("stat of IB device '%s' failed", ca_name)`` inside the loop over
    the adapters): what it printed is judged port by port, and the adapter it could not read is named as a
    failure -- never a pass.
    """
    ports = [dict(port, ca=ca["ca"]) for ca in cas for port in ca["ports"] if port["link_layer"] == layer]
    good = [p for p in ports if p["state"] == "Active" and p["physical_state"] == "LinkUp"
            and (p["rate_gbps"] or 0) >= speed]
    bad = ["%s/%d %s/%s %s Gb/s" % (p["ca"], p["port"], p["state"], p["physical_state"], p["rate_gbps"])
           for p in ports if p not in good]
    expected = "%d %s port(s) Active/LinkUp at ≥ %g Gb/s" % (count, layer, speed)
    observed: dict[str, Any] = {"ports": [{"port": "%s/%d" % (p["ca"], p["port"]), "state": p["state"],
                                           "physical_state": p["physical_state"], "rate_gbps": p["rate_gbps"]}
                                          for p in ports], "rc": rc}
    remediation = "check the cable and transceiver of the ports named, then the switch port; reseat or replace"
    if rc not in (0, None):
        printed = {ca["ca"] for ca in cas}
        unread = sorted(set(_IBSTAT_UNREAD.findall(stderr or "")) - printed)
        observed["unread"] = unread
        return failed("ibstat stopped (exit %s) after %d adapter(s): %s could not be read (%s); judged what it "
                      "printed: %d of %d expected %s ports up%s"
                      % (rc, len(cas), ", ".join(unread) or "the next adapter", (stderr or "").strip()[:200],
                         len(good), count, layer, "; not up: " + ", ".join(bad) if bad else ""),
                      "check the driver and firmware of the adapter named (dmesg mlx5_core), reseat or replace it; "
                      "then " + remediation, observed=observed, expected=expected)
    if len(good) < count:
        down = "; not up: " + ", ".join(bad) if bad else ""
        return failed("%d of %d expected %s ports up at ≥ %g Gb/s%s" % (len(good), count, layer, speed, down),
                      remediation, observed=observed, expected=expected)
    return passed(observed=observed, expected=expected, reason="%d %s ports Active" % (len(good), layer))


def check_ibstat(ctx: TestContext) -> Outcome:
    """InfiniBand/RoCE ports (``ibstat``): every expected fabric port Active/LinkUp at the SKU's rate.

    Expected: ``bom.nics`` entries with ``role: fabric`` (count, speed_gbps).  params:
    ``link_layer`` (default ``InfiniBand``; ``Ethernet`` for RoCE).  Partial output: :func:`judge_ibstat`.
    """
    nics = [n for n in (ctx.bom.get("nics") or []) if n.get("role") == "fabric" and n.get("count")]
    if not nics:
        raise ToolNotFoundError("no fabric NIC expected on this host (profile %s: bom.nics role fabric)" % ctx.profile)
    tool = ctx.require("ibstat", why=" (no InfiniBand stack)")
    res = ctx.run([tool], "ibstat", timeout_s=60)
    if "CA '" not in res.stdout:
        raise ToolNotFoundError("ibstat exited %s without listing an adapter: %s"
                                % (res.rc, (res.stderr or res.stdout).strip()[:200]))
    cas = parse_ibstat(res.stdout)
    ctx.save_json("parsed.json", cas)
    return judge_ibstat(cas, res.rc, res.stderr, sum(n["count"] for n in nics),
                        min(n.get("speed_gbps") or 0 for n in nics), ctx.params.get("link_layer", "InfiniBand"))
