# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Passive health: what the kernel log and the error counters gained since the node's last audit (pure).

The previous audit's cursor and counters are its ledger rows' ``observed`` values (check ``kernel_log`` observed
``cursor``; ``gpu_counters`` / ``ib_counters`` observed ``counters``), so the deltas are against the ledger.

Kernel log: a record is new when its kmsg ``seq`` is above the cursor's within the same boot
(``/proc/sys/kernel/random/boot_id``); another boot, or a log whose newest seq went below the cursor (the lab's
kernel-log file was replaced), makes every record new.  When the oldest record still held is more than one past
the cursor, the ring buffer dropped records before this audit read them: without a fail among those left the
check is ``not_run`` (a cut-short read is never a pass).  XID severities are the catalog's (``_host.parsers.xid``,
NVIDIA Xid Catalog); MCE, uncorrected AER, EDAC UE, GPU off the bus and NVSwitch fatal lines fail
(``_host.parsers.kmsg.PATTERNS``).

A fatal finding stays ``open`` (carried in ``observed.open`` from audit to audit, the check failing) until the
node passes a re-burn-in after it (``cleared_at``: when its latest ``burn_in`` gate passed): a fault nobody fixed
never turns green at the next audit just because no new line was logged.

An event whose message equals one the exercise injected (``injected`` messages, from the ledger's
``fault_injected`` events) is marked ``injected: true`` in the evidence and in the reason.
"""

from __future__ import annotations

import re
import time
from typing import Any, Dict, List, Mapping, Optional, Sequence

from .._core.gate import Outcome, failed, not_run, passed
from .._host.parsers.kmsg import scan_hardware_errors
from .._host.parsers.xid import classify, events_from_records

FATAL_KINDS = ("mce", "aer_uncorrected", "edac_ue", "gpu_off_bus", "nvswitch_fatal")
KERNEL_REMEDIATION = ("drain the node (the exercise's drain step), read the kernel log lines named, and follow the "
                      "XID's resolution bucket or replace the part the MCE/AER line names; return it to service "
                      "after a quick re-burn-in")


def new_records(records: Sequence[Mapping[str, Any]], boot_id: Optional[str],
                cursor: Optional[Mapping[str, Any]]) -> Dict[str, Any]:
    """``{"records": new records, "cursor": {boot_id, seq}, "notes": [...], "lost": n}`` (module docstring).

    ``records``: kmsg records (``parse_kernel_log``, raw ``/dev/kmsg`` form, with ``seq``); ``cursor``: the last
    audit's, or None for the node's first audit (every record held is judged).
    """
    seqs = [int(r["seq"]) for r in records]
    newest = max(seqs) if seqs else None
    out: Dict[str, Any] = {"cursor": {"boot_id": boot_id, "seq": newest if newest is not None else
                                      (cursor or {}).get("seq", -1) if (cursor or {}).get("boot_id") == boot_id
                                      else -1},
                           "notes": [], "lost": 0}
    if not cursor:
        out["notes"].append("first audit of this node: the whole kernel log held now is judged")
        out["records"] = list(records)
        return out
    last = int(cursor.get("seq", -1))
    if cursor.get("boot_id") != boot_id:
        out["notes"].append("the node booted since the last audit (boot id %s, was %s): every record counts"
                            % (boot_id, cursor.get("boot_id")))
        out["records"] = list(records)
        return out
    if newest is not None and newest < last:
        out["notes"].append("the kernel log restarted (newest seq %d, the last audit read up to %d): every record "
                            "counts" % (newest, last))
        out["records"] = list(records)
        return out
    out["records"] = [r for r in records if int(r["seq"]) > last]
    oldest = min(seqs) if seqs else None
    if oldest is not None and oldest > last + 1:
        out["lost"] = oldest - last - 1
        out["notes"].append("%d records were overwritten in the kernel ring buffer before this audit read them "
                            "(seq %d..%d)" % (out["lost"], last + 1, oldest - 1))
    return out


def kernel_outcome(delta: Mapping[str, Any], injected: Sequence[str] = (),
                   previous_open: Sequence[Mapping[str, Any]] = (), cleared_at: Optional[float] = None,
                   now: Optional[float] = None) -> Outcome:
    """Judge the new records of :func:`new_records` plus the findings still open (module docstring).

    ``observed`` carries the cursor and the open findings (``{what, at (UNIX s), injected}``) for the next audit.
    """
    records = delta["records"]
    marks = set(injected)
    xids = []
    for event in events_from_records(list(records)):
        info = classify(event["xid"])
        message = next((r.get("message") for r in records if r.get("seq") == event["seq"]), "")
        xids.append(dict(event, severity=info["severity"], description=info["description"],
                         remediation=info["remediation"], injected=message in marks))
    hardware = scan_hardware_errors(list(records))
    fatal_hw = {k: v for k, v in hardware.items() if k in FATAL_KINDS}
    bad = [x for x in xids if x["severity"] == "fail"]
    at = time.time() if now is None else now
    still_open = [dict(f) for f in previous_open if cleared_at is None or f.get("at", 0) > cleared_at]
    opened = ["Xid %d (%s) on PCI %s at %s%s" % (x["xid"], x["description"], x["pci"], x["time"],
                                                 " [injected]" if x["injected"] else "") for x in bad]
    opened += ["%d %s line(s), first %s: %s" % (v["count"], k, v["first"], v["sample"]) for k, v in fatal_hw.items()]
    still_open += [{"what": w, "at": at, "injected": "[injected]" in w} for w in opened]
    observed = {"cursor": delta["cursor"], "new_records": len(records), "xids": xids, "hardware": hardware,
                "lost": delta.get("lost", 0), "notes": list(delta.get("notes") or []),
                "injected": any(x["injected"] for x in xids), "open": still_open}
    expected = "no fail-severity XID, MCE or uncorrected PCIe/memory error since the last audit"
    if opened:
        return failed("kernel log since the last audit: %s" % "; ".join(opened),
                      bad[0]["remediation"] if bad else KERNEL_REMEDIATION, observed=observed, expected=expected)
    if still_open:
        # the injected mark up front: a long finding list is shortened, and the mark must survive it
        mark = " [injected]" if any(f.get("injected") for f in still_open) else ""
        return failed("kernel log: %d finding(s) still open since an earlier audit%s (no re-burn-in passed since): %s"
                      % (len(still_open), mark, "; ".join(f["what"] for f in still_open[:3])), KERNEL_REMEDIATION,
                      observed=observed, expected=expected)
    if delta.get("lost"):
        return Outcome("not_run", "kernel log not read completely: %s" % "; ".join(delta["notes"]),
                       expected, observed)
    others = ", ".join("Xid %d" % x["xid"] for x in xids)
    return passed(observed=observed, expected=expected,
                  reason="%d new kernel log records, no hardware error%s" % (
                      len(records), " (non-fatal: %s)" % others if others else ""))


def counter_deltas(now: Mapping[str, Mapping[str, Any]], before: Optional[Mapping[str, Mapping[str, Any]]]
                   ) -> Dict[str, Any]:
    """``{"deltas": {item: {counter: gain}}, "notes": [...]}`` between two counter snapshots.

    ``now``/``before``: ``{item (GPU index, "mlx5_0/1"): {counter: int or None}}``.  A counter that went down was
    reset (driver reload, reboot): its gain is its current value, noted.  None readings are skipped, noted.
    """
    deltas: Dict[str, Dict[str, int]] = {}
    notes: List[str] = []
    for item, counters in now.items():
        prev = (before or {}).get(item) or {}
        for name, value in counters.items():
            if value is None:
                notes.append("%s %s not reported" % (item, name))
                continue
            old = prev.get(name)
            gain = int(value) - int(old) if isinstance(old, int) and value >= old else int(value)
            if isinstance(old, int) and value < old:
                notes.append("%s %s went from %d to %d (reset): counted from zero" % (item, name, old, value))
            if gain:
                deltas.setdefault(item, {})[name] = gain
    return {"deltas": deltas, "notes": notes}


def gpu_counters(smi: Mapping[str, Any]) -> Dict[str, Dict[str, Any]]:
    """``{GPU index: counters}`` from ``parse_nvidia_smi_xml``: aggregate uncorrectable ECC, remapped rows,
    retired pages (nvidia-smi -q fields; NVIDIA "GPU Memory Error Management" guide)."""
    out: Dict[str, Dict[str, Any]] = {}
    for gpu in smi.get("gpus") or []:
        rows = gpu.get("remapped_rows") or {}
        pages = gpu.get("retired_pages") or {}
        out[str(gpu.get("index"))] = {
            "ecc_uncorrectable_aggregate": gpu.get("ecc_uncorrectable_aggregate"),
            "remapped_rows_uncorrectable": rows.get("uncorrectable"),
            "remapped_rows_correctable": rows.get("correctable"),
            "retired_pages_double_bit": pages.get("double_bit"),
            "pcie_replay": (gpu.get("pcie") or {}).get("replay_counter"),
        }
        if rows.get("failure"):
            out[str(gpu.get("index"))]["remapping_failure"] = 1
    return out


# Counters whose any gain fails the check: uncorrectable memory errors and a failed row remap need the GPU
# drained (NVIDIA GPU Memory Error Management, "Row Remapping": a remapping failure requires an RMA), a link that
# went down lost traffic (IBTA PortCounters LinkDownedCounter).  Other gains are reported, not failed.
FAILING_COUNTERS = ("ecc_uncorrectable_aggregate", "remapped_rows_uncorrectable", "retired_pages_double_bit",
                    "remapping_failure", "link_downed", "port_rcv_remote_physical_errors")


def counters_outcome(now: Optional[Mapping[str, Mapping[str, Any]]], before: Optional[Mapping[str, Any]],
                     what: str, absent: str) -> Outcome:
    """Judge the counters' gains; ``observed.counters`` is the snapshot the next audit compares with."""
    if now is None:
        return not_run(absent)
    # an item (GPU, port) with no counter read at all was not judged: never a pass for it
    unread = sorted(item for item, counters in now.items() if all(v is None for v in counters.values()))
    if not now or len(unread) == len(now):
        return not_run("no %s reported%s" % (what, " (none read for %s)" % ", ".join(unread) if unread else ""))
    if unread:
        return not_run("%s not read for %s" % (what, ", ".join(unread)))
    delta = counter_deltas(now, before)
    observed = {"counters": dict(now), "deltas": delta["deltas"], "notes": delta["notes"],
                "baseline": before is None}
    bad = {item: {k: v for k, v in gains.items() if k in FAILING_COUNTERS} for item, gains in delta["deltas"].items()}
    bad = {k: v for k, v in bad.items() if v}
    if bad:
        words = "; ".join("%s %s" % (item, ", ".join("%s +%d" % kv for kv in sorted(g.items())))
                          for item, g in sorted(bad.items()))
        return failed("%s gained since the last audit: %s" % (what, words),
                      "drain the node and replace the part whose counters grew; return it after a re-burn-in",
                      observed=observed, expected="no uncorrectable error or link-down gains")
    if before is None:
        return passed(observed=observed, reason="first audit: %s baseline recorded" % what)
    gains = sum(len(g) for g in delta["deltas"].values())
    return passed(observed=observed, reason="%s: no failing gains since the last audit (%d other counters grew)"
                  % (what, gains))


_DMON_GPU = re.compile(r"^\s*GPU\s+(\d+)\s+(\S+)\s*$", re.M)


def parse_dmon_xid(text: str) -> Dict[str, Optional[int]]:
    """``{GPU index: last XID or None}`` from ``dcgmi dmon -e 230 -c 1`` (field 230 ``DCGM_FI_DEV_XID_ERRORS``:
    the value of the last XID the GPU raised, 0 for none; ``N/A`` when DCGM has no sample)."""
    out: Dict[str, Optional[int]] = {}
    for gpu, value in _DMON_GPU.findall(text):
        out[gpu] = int(value) if value.isdigit() else None
    return out


def dcgm_xid_outcome(now: Optional[Mapping[str, Optional[int]]], before: Optional[Mapping[str, Any]],
                     injected: Sequence[int] = (), error: str = "") -> Outcome:
    """A GPU whose last-XID field changed since the last audit to a fail-severity XID fails (catalog severity).

    This is where DCGM's own injection (``dcgmi test --inject``) shows on a real GPU node: it sets the field, the
    kernel log never sees it.  ``injected``: XIDs the exercise injected on this node (marked in the reason).
    """
    if now is None:
        return not_run("DCGM XID field not read: %s" % error)
    if not now or any(v is None for v in now.values()):
        return not_run("DCGM gave no XID sample for GPU %s" % ", ".join(sorted(k for k, v in now.items() if v is None))
                       if now else "DCGM listed no GPU")
    prev = before or {}
    changed = {gpu: xid for gpu, xid in now.items() if xid and prev.get(gpu) != xid}
    marks = set(injected)
    bad = {gpu: xid for gpu, xid in changed.items() if classify(xid)["severity"] == "fail"}
    observed = {"xid": dict(now), "changed": changed, "injected": any(x in marks for x in bad.values())}
    if bad:
        words = "; ".join("GPU %s Xid %d (%s)%s" % (g, x, classify(x)["description"], " [injected]" if x in marks
                                                    else "") for g, x in sorted(bad.items()))
        first = classify(next(iter(bad.values())))
        return failed("DCGM XID field since the last audit: %s" % words, first["remediation"], observed=observed,
                      expected="no fail-severity XID")
    return passed(observed=observed, reason="no fail-severity XID in DCGM's field (%d GPUs)" % len(now))
