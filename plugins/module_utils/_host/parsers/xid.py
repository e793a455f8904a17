# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""NVIDIA XID events in the kernel log: parse, de-duplicate, classify (parsing case P-C6).

Regex ``NVRM: Xid \\(PCI:<bdf>\\): <xid>,`` so the PCI domain ``0000`` is never
taken for the XID; ``pid=<n>`` or ``pid='<unknown>'``.  Severity and action per
XID follow NVIDIA's Xid Catalog (docs.nvidia.com/deploy/xid-errors,
"Analyzing Xid Errors with the Xid Catalog": resolution buckets RESTART_APP,
RESET_GPU, RESTART_BM, CONTACT_SUPPORT, IGNORE) read for burn-in: an XID whose
immediate action is a GPU reset, a reboot or support is ``fail`` (marginal
hardware under load), an application-level one is ``warn``, bookkeeping ones
``info``.  Case P-C6 names 79/74/48/63/64/94/95/119 as burn-in failures.

Where the line carries the driver's own severity word, it decides: the NVLink5 XIDs 144-150 of GB200/B200
drivers print ``<unit> Nonfatal|Fatal XC0 i0 Link NN (...)`` (e.g. ``NVRM: Xid (PCI:0000:5f:00): 145, RLW_REMAP
Nonfatal XC0 i0 Link 02``, NVIDIA/TensorRT-LLM issue 4816; leptonai/gpud's NVLink XID tests map Nonfatal to a
warning and Fatal to fatal), so a Nonfatal one is ``warn``, a Fatal one ``fail``.

A follow-on XID says so: the driver appends `` caused by previous Xid %d`` to it (open-gpu-kernel-modules,
the Xid print with ``preemptiveRemovalPreviousXid``; typically Xid 45 channel cleanup after an NVLink Xid 149,
``Xid 45 ... "caused by previous Xid 149"`` in public GB200 fault reports).  It is linked to the finding of its
cause on the same GPU (``follow_ons``), not counted again.

A GPU lost from the bus is also reported without an Xid line: the driver (NVIDIA open-gpu-kernel-modules,
``nv.c``) prints ``NVRM: The NVIDIA GPU %04x:%02x:%02x.%x`` / ``NVRM: (PCI ID: ...) installed in this system
has`` / ``NVRM: fallen off the bus and is not responding to commands.`` as three kernel log records (or one,
where a journal keeps it whole): that block is an XID 79 event on the address of its first line.
"""

from __future__ import annotations

import re
from typing import Any

from . import parse_error
from .kmsg import parse_kernel_log

TOOL = "kernel log (XID)"
XID_RE = re.compile(r"NVRM: Xid \(PCI:([0-9a-fA-F:.]+)\): (\d+),\s*(.*)$")
_PID = re.compile(r"^pid=('?<?[\w-]+>?'?),\s*(?:name=([^,]*),\s*)?(.*)$")
_DRIVER_SEVERITY = re.compile(r"\b(Nonfatal|Non-fatal|Fatal)\b")
_GPU_ADDRESS = re.compile(r"NVRM: The NVIDIA GPU ([0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2})(?:\.[0-7])?")
_FALLEN = "fallen off the bus and is not responding"
_CAUSED_BY = re.compile(r"caused by previous Xid (\d+)", re.I)
XID_FALLEN_OFF_BUS = 79
_RANK = {"info": 0, "warn": 1, "fail": 2}

# xid: (severity, action, description)
XID_CATALOG = {
    8: ("warn", "RESTART_APP", "GPU stopped processing (channel idle timeout)"),
    13: ("warn", "RESTART_APP", "Graphics engine exception"),
    31: ("warn", "RESTART_APP", "GPU memory page fault (MMU fault)"),
    32: ("warn", "RESTART_APP", "Invalid or corrupted push buffer stream"),
    38: ("fail", "RESET_GPU", "Driver firmware error"),
    43: ("warn", "RESTART_APP", "GPU stopped processing (reset channel verification error)"),
    45: ("info", "IGNORE", "Preemptive cleanup, due to previous errors"),
    48: ("fail", "RESET_GPU", "Double-bit ECC error (DBE)"),
    56: ("info", "IGNORE", "Display engine error"),
    57: ("fail", "CONTACT_SUPPORT", "Error programming video memory interface"),
    61: ("fail", "RESET_GPU", "Internal micro-controller breakpoint/warning"),
    62: ("fail", "RESET_GPU", "Internal micro-controller halt"),
    63: ("fail", "RESET_GPU", "ECC page retirement or row remapping recording event"),
    64: ("fail", "CONTACT_SUPPORT", "ECC page retirement or row remapper recording failure"),
    68: ("warn", "RESTART_APP", "NVDEC0 exception"),
    69: ("warn", "RESTART_APP", "Graphics engine class error"),
    74: ("fail", "RESET_GPU", "NVLink error"),
    79: ("fail", "RESTART_BM", "GPU has fallen off the bus"),
    92: ("fail", "CONTACT_SUPPORT", "High single-bit ECC error rate"),
    94: ("fail", "RESTART_APP", "Contained ECC error"),
    95: ("fail", "RESET_GPU", "Uncontained ECC error"),
    109: ("warn", "RESTART_APP", "Context switch timeout"),
    119: ("fail", "RESET_GPU", "GSP RPC timeout"),
    120: ("fail", "RESET_GPU", "GSP error"),
    121: ("warn", "IGNORE", "C2C link corrected error"),
    122: ("warn", "RESTART_APP", "SPI PMU RPC read failure"),
    123: ("warn", "RESTART_APP", "SPI PMU RPC write failure"),
    136: ("fail", "RESET_GPU", "Link training failure"),
    137: ("fail", "RESET_GPU", "NVLink FLA privilege error"),
    140: ("fail", "RESET_GPU", "ECC unrecovered error"),
    143: ("fail", "RESET_GPU", "GPU initialization failure"),
    144: ("fail", "RESET_GPU", "NVLink SAW error"),
    145: ("fail", "RESET_GPU", "NVLink RLW error"),
    146: ("fail", "RESET_GPU", "NVLink TLW error"),
    147: ("fail", "RESET_GPU", "NVLink TREX error"),
    148: ("fail", "RESET_GPU", "NVLink NVLPW_CTRL error"),
    149: ("fail", "RESET_GPU", "NVLink NETIR error"),
    150: ("fail", "RESET_GPU", "NVLink MSE error"),
    154: ("fail", "RESET_GPU", "GPU recovery action changed (reset or reboot required)"),
}
UNKNOWN = ("warn", "CONTACT_SUPPORT", "XID not in this collection's table; look it up in NVIDIA's Xid Catalog")
ACTIONS = {
    "RESTART_APP": "restart the application; if it repeats under burn-in, reset the GPU and rerun",
    "RESET_GPU": "drain the node, reset the GPU (nvidia-smi -r or a node reboot) and rerun burn-in; "
                 "if it repeats, replace the GPU/baseboard",
    "RESTART_BM": "drain the node and power-cycle it; if the GPU falls off the bus again, reseat or replace it "
                  "and check its PCIe riser/cabling",
    "CONTACT_SUPPORT": "drain the node and open a hardware case with the vendor (RMA)",
    "IGNORE": "no action needed",
}


def driver_severity(detail: str) -> str | None:
    """``fail``/``warn`` from the driver's own ``Fatal``/``Nonfatal`` word in an XID line's text, or None."""
    match = _DRIVER_SEVERITY.search(detail or "")
    if not match:
        return None
    return "fail" if match.group(1) == "Fatal" else "warn"


def classify(xid: int | str, detail: str = "") -> dict[str, Any]:
    """``{xid, severity: fail|warn|info, action (NVIDIA resolution bucket), description, remediation,
    severity_source: driver|catalog}``; the driver's Fatal/Nonfatal word in ``detail`` wins over the catalog."""
    severity, action, description = XID_CATALOG.get(int(xid), UNKNOWN)
    own = driver_severity(detail)
    return {"xid": int(xid), "severity": own or severity, "action": action, "description": description,
            "remediation": ACTIONS[action], "severity_source": "driver" if own else "catalog"}


def parse_xid_events(text: str) -> list[dict[str, Any]]:
    """XID events in kernel log ``text`` (any form :func:`parse_kernel_log` reads).

    Returns ``[{xid, pci, pid, process, detail, time, ts_s, seq}]`` in log order;
    ``pid`` is an int or None (``'<unknown>'``).  Text without XIDs gives ``[]``.
    """
    if not isinstance(text, str):
        raise parse_error(TOOL, "output is %s, not text" % type(text).__name__)
    return events_from_records(parse_kernel_log(text))


def events_from_records(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """XID events from already-parsed kernel log records (see :func:`parse_xid_events`), the driver's
    "fallen off the bus" block included (XID 79 on the address of its ``The NVIDIA GPU`` line)."""
    events = []
    last_gpu = None
    for rec in records:
        message = rec.get("message") or ""
        address = _GPU_ADDRESS.search(message)
        if address:
            last_gpu = address.group(1).lower()
        if _FALLEN in message and "Xid" not in message:
            events.append({"xid": XID_FALLEN_OFF_BUS, "pci": last_gpu or "unknown", "pid": None, "process": None,
                           "detail": "GPU has fallen off the bus (driver message without an Xid line)",
                           "time": rec.get("time"), "ts_s": rec.get("ts_s"), "seq": rec.get("seq")})
            continue
        match = XID_RE.search(message)
        if not match:
            continue
        pci, xid, rest = match.group(1).lower(), int(match.group(2)), match.group(3)
        pid = process = None
        pmatch = _PID.match(rest)
        if pmatch:
            raw_pid = pmatch.group(1).strip("'")
            pid = int(raw_pid) if raw_pid.isdigit() else None
            process = (pmatch.group(2) or "").strip() or None
            rest = pmatch.group(3)
        events.append({"xid": xid, "pci": pci, "pid": pid, "process": process, "detail": rest.strip(),
                       "time": rec.get("time"), "ts_s": rec.get("ts_s"), "seq": rec.get("seq")})
    return events


def deduplicate(events: list[dict[str, Any]], gpu_by_pci: dict | None = None) -> list[dict[str, Any]]:
    """Collapse repeats of one XID on one GPU into one finding.

    ``gpu_by_pci``: optional ``{pci_bus_id: gpu index/serial}`` from nvidia-smi (bus ids are
    compared on their ``bus:device`` part, lower case).  Returns findings sorted by first
    appearance: ``[{xid, pci, gpu, count, first, last, pids, processes, detail, severity, action,
    description, remediation, follow_ons: {xid: count}, caused_by}]``; a follow-on XID whose cause is among the
    findings is counted in the cause's ``follow_ons`` only (``caused_by`` names a cause outside the window), and
    raises the cause's ``severity`` to its own where that is worse (``severity_source: "follow_on Xid N"``).
    """
    gpu_map: dict[str, Any] = {}
    for bus_id, gpu in (gpu_by_pci or {}).items():
        gpu_map[_short_bdf(bus_id)] = gpu
    findings: dict[tuple[int, str, str | None], dict[str, Any]] = {}
    for event in events:
        cause = _CAUSED_BY.search(event["detail"])
        if cause:
            # the finding of the cause on this GPU (the first seen), when the window holds it
            parent = next((f for (xid, pci, _sev), f in findings.items()
                           if xid == int(cause.group(1)) and pci == event["pci"]), None)
            if parent is not None:
                parent["follow_ons"][event["xid"]] = parent["follow_ons"].get(event["xid"], 0) + 1
                # linked, not counted again, but never hidden: a fail-severity follow-on (e.g. Xid 79 after a
                # Nonfatal NVLink Xid) makes its cause's finding at least as severe
                own = classify(event["xid"], event["detail"])["severity"]
                if _RANK[own] > _RANK[parent["severity"]]:
                    parent["severity"] = own
                    parent["severity_source"] = "follow_on Xid %d" % event["xid"]
                continue
        # a Fatal and a Nonfatal report of one XID on one GPU are two findings
        key = (event["xid"], event["pci"], driver_severity(event["detail"]))
        finding = findings.get(key)
        if finding is None:
            finding = dict(classify(event["xid"], event["detail"]), pci=event["pci"], gpu=gpu_map.get(_short_bdf(event["pci"])),
                           count=0, first=event["time"], last=event["time"], pids=[], processes=[],
                           detail=event["detail"], follow_ons={},
                           caused_by=int(cause.group(1)) if cause else None)
            findings[key] = finding
        finding["count"] += 1
        finding["last"] = event["time"]
        if event["pid"] is not None and event["pid"] not in finding["pids"]:
            finding["pids"].append(event["pid"])
        if event["process"] and event["process"] not in finding["processes"]:
            finding["processes"].append(event["process"])
    return list(findings.values())


def _short_bdf(bus_id: Any) -> str:
    """``00000000:9B:00.0`` / ``0000:9b:00`` -> ``9b:00`` (bus:device)."""
    parts = str(bus_id).lower().split(":")
    if len(parts) >= 2:
        return "%s:%s" % (parts[-2][-2:], parts[-1].split(".")[0])
    return str(bus_id).lower()
