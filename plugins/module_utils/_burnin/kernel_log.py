# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The kernel log around burn-in tests: read it, mark where it ends, and judge what was logged since.

Before and after each tier (and around a power test's load) the runner takes a :meth:`KernelLog.snapshot`;
the XIDs, MCE and AER errors logged since become the check ``<tier>_xid_scan`` (:func:`xid_outcome`).
"""

from __future__ import annotations

from typing import Any

from .._core.errors import ToolNotFoundError
from .._core.gate import Outcome, failed, passed
from .._host.kmsg_read import read_kmsg
from .._host.parsers.kmsg import parse_kernel_log, scan_hardware_errors
from .._host.parsers.xid import deduplicate, events_from_records
from .executor import Executor


class KernelLog:
    """Reads the kernel log: ``/dev/kmsg`` (root), else ``dmesg``, else ``journalctl -k -b``.

    :meth:`snapshot` returns a marker; :meth:`since` the records logged after it.
    Raises :class:`ToolNotFoundError` when no source is readable (the scan is ``not_run``).
    """

    def __init__(self, executor: Executor | None = None, source: str = "auto", kmsg_path: str = "/dev/kmsg") -> None:
        self.executor = executor or Executor()
        self.source = source
        self.kmsg_path = kmsg_path
        self.used: str | None = None  # the source the last read came from

    def _read_kmsg(self):
        return read_kmsg(self.kmsg_path)

    def read(self) -> tuple[str, str, list[dict]]:
        """``(source, text, records)`` of the whole current boot's kernel log."""
        reasons = []
        order = ("kmsg", "dmesg", "journalctl") if self.source == "auto" else (self.source,)
        for source in order:
            try:
                if source == "kmsg":
                    text = self._read_kmsg()
                elif source == "dmesg":
                    tool = self.executor.which("dmesg")
                    if not tool:
                        raise ToolNotFoundError("dmesg not found")
                    res = self.executor.run([tool], 60)
                    if res.rc != 0:
                        raise ToolNotFoundError("dmesg exited %s: %s" % (res.rc, res.stderr.strip()[:200]))
                    text = res.stdout
                else:
                    tool = self.executor.which("journalctl")
                    if not tool:
                        raise ToolNotFoundError("journalctl not found")
                    res = self.executor.run([tool, "-k", "-b", "--no-pager", "-o", "short-monotonic"], 60)
                    if res.rc != 0 or "No journal files" in res.stdout + res.stderr:
                        raise ToolNotFoundError("journalctl -k gave no kernel log: %s"
                                                % (res.stderr or res.stdout).strip()[:200])
                    text = res.stdout
            except (OSError, ToolNotFoundError) as exc:
                reasons.append("%s: %s" % (source, getattr(exc, "message", None) or exc))
                continue
            self.used = source
            return source, text, parse_kernel_log(text)
        raise ToolNotFoundError("kernel log not readable (%s)" % "; ".join(reasons), where="kernel log")

    def snapshot(self) -> tuple[str, int]:
        """Marker of the current end of the log: ``(source, last seq or record count)``."""
        source, _text, records = self.read()
        if source == "kmsg":
            return source, max([r["seq"] for r in records] or [-1])
        return source, len(records)

    def since(self, marker: tuple[str, int]) -> tuple[str, list[dict]]:
        """``(text, records)`` logged after ``marker`` (from :meth:`snapshot`)."""
        source, text, records = self.read()
        if source == "kmsg" and marker[0] == "kmsg":
            new = [r for r in records if r["seq"] > marker[1]]
        else:
            new = records[marker[1]:] if marker[0] == source else records
        return "\n".join(_record_line(r) for r in new), new


def _record_line(rec):
    return "[%s] %s" % (rec.get("time"), rec.get("message")) if rec.get("time") else (rec.get("message") or "")


def kernel_findings(records: list[dict], gpu_by_pci: dict | None = None) -> dict[str, Any]:
    """``{xids: [finding], hardware: {kind: {...}}}`` for kernel log records (see _host.parsers.xid, _host.parsers.kmsg)."""
    return {"xids": deduplicate(events_from_records(records), gpu_by_pci),
            "hardware": scan_hardware_errors(records)}


def xid_outcome(findings: dict, window: str, evidence: dict) -> Outcome:
    """Outcome of an XID/hardware-error scan over ``window`` (words for the reason).

    Fails on any XID whose catalog severity is ``fail``, any MCE, uncorrected AER, EDAC UE,
    GPU-off-the-bus or NVSwitch fatal line; other XIDs are reported in ``observed``.
    """
    bad = [f for f in findings["xids"] if f["severity"] == "fail"]
    hw = {k: v for k, v in findings["hardware"].items()
          if k in ("mce", "aer_uncorrected", "edac_ue", "gpu_off_bus", "nvswitch_fatal")}
    observed = {"xids": findings["xids"], "hardware_errors": findings["hardware"]}
    if bad or hw:
        parts = ["Xid %d (%s) x%d on PCI %s%s, first %s" % (f["xid"], f["description"], f["count"], f["pci"],
                                                            " GPU %s" % f["gpu"] if f["gpu"] is not None else "",
                                                            f["first"]) for f in bad]
        parts += ["%d %s line(s), first %s: %s" % (v["count"], k, v["first"], v["sample"]) for k, v in hw.items()]
        remediation = bad[0]["remediation"] if bad else \
            "drain the node and check the SEL/kernel log for the failing component; reseat or replace it"
        return failed("%s: %s" % (window, "; ".join(parts)), remediation, observed=observed,
                      expected="no fail-severity XID, MCE or uncorrected PCIe/memory error", evidence=evidence)
    note = "" if not findings["xids"] else " (non-fatal: %s)" % ", ".join(
        "Xid %d x%d" % (f["xid"], f["count"]) for f in findings["xids"])
    return passed(observed=observed, expected="no fail-severity XID, MCE or uncorrected PCIe/memory error",
                  reason="no hardware error in the kernel log %s%s" % (window, note), evidence=evidence)
