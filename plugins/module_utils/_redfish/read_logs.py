# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Logs in the inventory reader: the SEL/event LogServices of systems and managers into ``NodeInventory.sel``.

:class:`LogReader` on its own reads only logs (``bmc_sel_scan`` marks and judges SELs with it).
"""

from __future__ import annotations

from .model import SelEntry
from .read_base import ReaderBase, known_date, link

SEL_LOG_IDS = {"sel", "eventlog", "log", "log1", "iml"}
SEL_SKIP_IDS = {"journal", "auditlog", "dump", "diagnosticlog", "hostlogger", "postcodes", "debugtokenservice",
                "faultlog", "fdr", "lclog", "decodedlog", "crashdump"}


class LogReader(ReaderBase):
    """The SEL-like logs of a ``LogServices`` collection (vendor debug/audit logs skipped)."""

    def read_logs(self, uri: str) -> None:
        for svc in self.members("sel", uri):
            sid = str(svc.get("Id") or "").lower()
            etype = svc.get("LogEntryType")
            if sid in SEL_SKIP_IDS:
                continue
            if not (etype in ("SEL", "Event") or (sid in SEL_LOG_IDS and etype not in ("OEM", "Multiple"))):
                continue
            entries = link(svc, "Entries")
            if not entries:
                continue
            for e in self.members("sel", entries):
                self.inv.sel.append(SelEntry(
                    id=str(e.get("Id")), created=known_date(e.get("Created")),
                    severity=e.get("Severity") or e.get("MessageSeverity"),
                    message=e.get("Message") or "", message_id=e.get("MessageId"),
                    sensor_type=e.get("SensorType"), log=svc.get("@odata.id", "")))
