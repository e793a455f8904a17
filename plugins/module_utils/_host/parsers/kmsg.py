# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Kernel log records in the forms burn-in reads them, and the hardware-error scan.

Forms: raw ``/dev/kmsg`` records ``prio,seq,usec,flags;message`` (continuation
lines starting with a space are dictionary properties and are skipped);
``dmesg`` (``[ 1234.567890] msg``), ``dmesg -r`` (``<6>[ 1.2] msg``), ``dmesg --ctime``
(``[Sun Feb 23 16:24:18 2025] msg``) and ``journalctl -k`` (``Okt 06 17:59:27 host kernel: msg``,
month names may be localised).
"""

from __future__ import annotations

import re
from typing import Any

from . import parse_error, require_text

TOOL = "kernel log"
_KMSG = re.compile(r"^(\d+),(\d+),(\d+),([^;]*);(.*)$")
_RAW_PRIO = re.compile(r"^<(\d+)>(.*)$")
_MONO = re.compile(r"^\[\s*(\d+\.\d+)\]\s?(.*)$")
_CTIME = re.compile(r"^\[([A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \d{4})\]\s?(.*)$")
_JOURNAL = re.compile(r"^(\S{3,4}\s+\d{1,2} \d\d:\d\d:\d\d) (\S+) kernel: (.*)$")
_ISO_JOURNAL = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\S*) (\S+) kernel: (.*)$")

# Hardware-error patterns besides XIDs (XIDs: see _xid).
PATTERNS = {
    "mce": re.compile(r"mce: \[Hardware Error\]|Machine check events logged|Machine Check Exception", re.I),
    "aer_uncorrected": re.compile(r"AER:.*(Uncorrected|Fatal|UncorrErr)|PCIe Bus Error: severity=Uncorrected", re.I),
    "aer_corrected": re.compile(r"AER:.*Corrected|PCIe Bus Error: severity=Corrected", re.I),
    "edac_ue": re.compile(r"EDAC.*\bUE\b|EDAC.*Uncorrected", re.I),
    "edac_ce": re.compile(r"EDAC.*\bCE\b|EDAC.*Corrected", re.I),
    "gpu_off_bus": re.compile(r"fallen off the bus", re.I),
    "nvswitch_fatal": re.compile(r"nvidia-nvswitch\d*: .*(fatal|SXid)", re.I),
}


def parse_kmsg_records(text: str) -> list[dict[str, Any]]:
    """Parse raw ``/dev/kmsg`` records: ``[{seq, level, facility, ts_s, flags, message}]``.

    ``ts_s`` is seconds since boot (the record's microseconds / 1e6).  Raises
    :class:`ParseError` when no line is a kmsg record.
    """
    require_text(TOOL, text)
    records = []
    for line in text.splitlines():
        if not line or line.startswith(" "):
            continue
        match = _KMSG.match(line)
        if not match:
            continue
        prio = int(match.group(1))
        records.append({"seq": int(match.group(2)), "level": prio & 7, "facility": prio >> 3,
                        "ts_s": int(match.group(3)) / 1e6, "flags": match.group(4),
                        "message": match.group(5), "time": "%.6f" % (int(match.group(3)) / 1e6)})
    if not records:
        raise parse_error("/dev/kmsg", "no 'prio,seq,usec,flags;message' record found")
    return records


def parse_kernel_log(text: str) -> list[dict[str, Any]]:
    """Parse kernel log text in any of the module's forms into records.

    Returns ``[{seq, level, ts_s, time, host, message}]`` in input order; ``ts_s`` is seconds
    since boot where the form gives it, else None; ``time`` is the timestamp as printed; ``seq``
    is the kmsg sequence number or the line index.  Lines in no known form are kept with
    ``time`` None (continuations of a multi-line message).  Empty text gives ``[]``.
    """
    if not isinstance(text, str):
        raise parse_error(TOOL, "output is %s, not text" % type(text).__name__)
    records: list[dict[str, Any]] = []
    for index, line in enumerate(text.splitlines()):
        if not line.strip():
            continue
        if line.startswith(" ") and records and records[-1].get("form") == "kmsg":
            continue  # kmsg dictionary property line (" SUBSYSTEM=pci")
        rec: dict[str, Any] = {"seq": index, "level": None, "ts_s": None, "time": None, "host": None, "message": line.strip(),
                               "form": None}
        match = _KMSG.match(line)
        if match:
            prio = int(match.group(1))
            rec.update(seq=int(match.group(2)), level=prio & 7, ts_s=int(match.group(3)) / 1e6,
                       time="%.6f" % (int(match.group(3)) / 1e6), message=match.group(5), form="kmsg")
            records.append(rec)
            continue
        body = line
        raw = _RAW_PRIO.match(body)
        if raw:
            rec["level"] = int(raw.group(1)) & 7
            body = raw.group(2)
        for regex, form in ((_MONO, "dmesg"), (_CTIME, "ctime")):
            match = regex.match(body)
            if match:
                rec.update(time=match.group(1), message=match.group(2), form=form)
                if form == "dmesg":
                    rec["ts_s"] = float(match.group(1))
                break
        else:
            for regex in (_JOURNAL, _ISO_JOURNAL):
                match = regex.match(body)
                if match:
                    rec.update(time=match.group(1), host=match.group(2), message=match.group(3), form="journal")
                    break
        records.append(rec)
    return records


def scan_hardware_errors(records: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Count hardware-error lines by kind: ``{kind: {count, first, last, sample}}`` for :data:`PATTERNS`."""
    out: dict[str, dict[str, Any]] = {}
    for rec in records:
        message = rec.get("message") or ""
        for kind, regex in PATTERNS.items():
            if kind == "aer_corrected" and PATTERNS["aer_uncorrected"].search(message):
                continue
            if kind == "edac_ce" and PATTERNS["edac_ue"].search(message):
                continue
            if regex.search(message):
                entry = out.setdefault(kind, {"count": 0, "first": rec.get("time"), "last": None,
                                              "sample": message[:300]})
                entry["count"] += 1
                entry["last"] = rec.get("time")
    return out
