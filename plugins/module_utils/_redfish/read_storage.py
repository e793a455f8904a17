# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Storage in the inventory reader: a system's Storage controllers and their drives, NVMe or not."""

from __future__ import annotations

from typing import Any

from .model import Component
from .paging import needs_get
from .read_base import ReaderBase, _location, _status, _str, link, normalise_version


class StorageReader(ReaderBase):
    """Drives of a system's ``Storage`` (and of a chassis' ``Drives``, through :meth:`drive`)."""

    def read_storage(self, s: dict[str, Any]) -> None:
        """Every drive of the Storage controllers of system ``s`` (inline ones as they came)."""
        if link(s, "Storage"):
            for st in self.members("storage", s["Storage"]["@odata.id"]):
                refs = [d for d in (st.get("Drives") or []) if isinstance(d, dict) and d.get("@odata.id")]
                inline = [d for d in refs if not needs_get(d)]
                for d in inline + self.fetch("drives", [d["@odata.id"] for d in refs if needs_get(d)]):
                    self.add(self.drive(d))

    def drive(self, d: dict[str, Any]) -> Component:
        state, health = _status(d)
        proto = d.get("Protocol")
        cap = d.get("CapacityBytes")
        return Component(
            kind="nvme" if proto == "NVMe" else "drive", id=str(d.get("Id")), uri=d.get("@odata.id", ""),
            name=d.get("Name") or "", model=_str(d.get("Model")), manufacturer=_str(d.get("Manufacturer")),
            serial=_str(d.get("SerialNumber")), part_number=_str(d.get("PartNumber")),
            firmware_version=normalise_version(d.get("Revision")), location=_location(d), state=state,
            health=health, capacity_gb=(cap / 1e9) if isinstance(cap, (int, float)) and cap else None,
            extra={k: d.get(k) for k in ("Protocol", "MediaType") if d.get(k) is not None})
