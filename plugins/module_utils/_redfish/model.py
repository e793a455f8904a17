# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The normalised hardware inventory: one model for every vendor's Redfish tree.

Producers (the Redfish reader in ``_redfish.reader``, in-band collectors)
fill these; consumers (the twin audit, the firmware plan, the fleet audit)
read only these.  Units are in the field names: ``_gib``, ``_gb``, ``_gbps``,
``_w``, ``_c``.  ``None`` always means "not reported", never zero.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Optional

# Component kinds.  GPUs are GPUs whether the BMC lists them as Processors,
# PCIeDevices or an OEM collection.
KINDS = ("cpu", "dimm", "gpu", "nic", "dpu", "nvme", "drive", "psu", "fan", "pcie", "nvswitch", "other")
HEALTH_ORDER = {"OK": 0, "Warning": 1, "Critical": 2}


@dataclass
class Component:
    """One physical part.

    ``id``: the Redfish ``Id`` (or in-band identifier); ``uri``: its ``@odata.id``;
    ``pcie_width``/``pcie_width_max``: lanes; ``pcie_gen``/``pcie_gen_max``: PCIe
    generation as an int (``Gen5`` -> 5); ``memory_gib``: for DIMMs and GPUs;
    ``speed_gbps``/``ports``: for NICs; ``capacity_gb``: for drives (10^9 bytes).
    ``state``: Redfish ``Status.State`` (``Enabled``, ``Absent``, ...);
    ``health``: ``Status.Health`` (``OK``, ``Warning``, ``Critical`` or None).
    """

    kind: str
    id: str
    uri: str = ""
    name: str = ""
    model: Optional[str] = None
    manufacturer: Optional[str] = None
    serial: Optional[str] = None
    part_number: Optional[str] = None
    firmware_version: Optional[str] = None
    location: Optional[str] = None
    state: Optional[str] = None
    health: Optional[str] = None
    pcie_width: Optional[int] = None
    pcie_width_max: Optional[int] = None
    pcie_gen: Optional[int] = None
    pcie_gen_max: Optional[int] = None
    memory_gib: Optional[float] = None
    speed_gbps: Optional[float] = None
    ports: Optional[int] = None
    capacity_gb: Optional[float] = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class FirmwareItem:
    """One FirmwareInventory member that describes what is running now.

    ``version`` is None when the BMC reports null, ``""`` or ``"N/A"`` (unknown,
    not a mismatch).  ``updateable`` mirrors Redfish ``Updateable``.
    """

    id: str
    name: str = ""
    version: Optional[str] = None
    uri: str = ""
    updateable: Optional[bool] = None
    state: Optional[str] = None
    health: Optional[str] = None
    related: list[Optional[str]] = field(default_factory=list)


@dataclass
class SelEntry:
    """One SEL/event log entry: ``severity`` is Redfish ``Severity`` (OK/Warning/Critical)."""

    id: str
    created: Optional[str] = None
    severity: Optional[str] = None
    message: str = ""
    message_id: Optional[str] = None
    sensor_type: Optional[str] = None
    log: str = ""


@dataclass
class Reading:
    """A sensor reading: temperature (°C), fan (RPM or %), power (W), coolant (°C, L/min), leak."""

    id: str
    kind: str
    value: Optional[float] = None
    units: Optional[str] = None
    name: str = ""
    health: Optional[str] = None
    upper_critical: Optional[float] = None
    physical_context: Optional[str] = None


@dataclass
class NodeInventory:
    """Everything read from one BMC.

    ``systems``/``chassis``/``managers``: summaries ``{id, manufacturer, model,
    serial, sku, power_state, health, firmware_version, ...}``.  ``incomplete``
    lists the parts of the tree that could not be read (with why) so a consumer
    never mistakes "unreadable" for "absent".
    """

    service: dict[str, Any] = field(default_factory=dict)
    systems: list[dict[str, Any]] = field(default_factory=list)
    chassis: list[dict[str, Any]] = field(default_factory=list)
    managers: list[dict[str, Any]] = field(default_factory=list)
    components: list[Component] = field(default_factory=list)
    firmware: list[FirmwareItem] = field(default_factory=list)
    sel: list[SelEntry] = field(default_factory=list)
    readings: list[Reading] = field(default_factory=list)
    bios: dict[str, Any] = field(default_factory=dict)
    capabilities: dict[str, Any] = field(default_factory=dict)
    incomplete: list[dict[str, Any]] = field(default_factory=list)
    requests: int = 0

    def of_kind(self, kind: str) -> list[Component]:
        """Components of ``kind`` (see :data:`KINDS`)."""
        return [c for c in self.components if c.kind == kind]

    def health_rollup(self) -> Optional[str]:
        """Worst ``Status.Health`` over systems, chassis and components: ``OK``/``Warning``/``Critical``/None."""
        worst: Optional[str] = None
        for item in list(self.systems) + list(self.chassis):
            worst = _worse(worst, item.get("health"))
        for comp in self.components:
            worst = _worse(worst, comp.health)
        return worst

    def to_dict(self) -> dict[str, Any]:
        """The inventory as plain dicts and lists (``dataclasses.asdict``)."""
        return asdict(self)


def _worse(a: Optional[str], b: Optional[str]) -> Optional[str]:
    if b not in HEALTH_ORDER:
        return a
    if a not in HEALTH_ORDER or HEALTH_ORDER[b] > HEALTH_ORDER[a]:
        return b
    return a
