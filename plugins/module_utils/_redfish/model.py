# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The normalised hardware inventory: one model for every vendor's Redfish tree.

Producers (the Redfish reader in ``_redfish_inventory``, in-band collectors)
fill these; consumers (the twin audit, the firmware plan, the fleet audit)
read only these.  Units are in the field names: ``_gib``, ``_gb``, ``_gbps``,
``_w``, ``_c``.  ``None`` always means "not reported", never zero.
"""

from __future__ import annotations

from dataclasses import dataclass, field, asdict

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
    model: str = None
    manufacturer: str = None
    serial: str = None
    part_number: str = None
    firmware_version: str = None
    location: str = None
    state: str = None
    health: str = None
    pcie_width: int = None
    pcie_width_max: int = None
    pcie_gen: int = None
    pcie_gen_max: int = None
    memory_gib: float = None
    speed_gbps: float = None
    ports: int = None
    capacity_gb: float = None
    extra: dict = field(default_factory=dict)


@dataclass
class FirmwareItem:
    """One FirmwareInventory member that describes what is running now.

    ``version`` is None when the BMC reports null, ``""`` or ``"N/A"`` (unknown,
    not a mismatch).  ``updateable`` mirrors Redfish ``Updateable``.
    """

    id: str
    name: str = ""
    version: str = None
    uri: str = ""
    updateable: bool = None
    state: str = None
    health: str = None
    related: list = field(default_factory=list)


@dataclass
class SelEntry:
    """One SEL/event log entry: ``severity`` is Redfish ``Severity`` (OK/Warning/Critical)."""

    id: str
    created: str = None
    severity: str = None
    message: str = ""
    message_id: str = None
    sensor_type: str = None
    log: str = ""


@dataclass
class Reading:
    """A sensor reading: temperature (°C), fan (RPM or %), power (W), coolant (°C, L/min), leak."""

    id: str
    kind: str
    value: float = None
    units: str = None
    name: str = ""
    health: str = None
    upper_critical: float = None
    physical_context: str = None


@dataclass
class NodeInventory:
    """Everything read from one BMC.

    ``systems``/``chassis``/``managers``: summaries ``{id, manufacturer, model,
    serial, sku, power_state, health, firmware_version, ...}``.  ``incomplete``
    lists the parts of the tree that could not be read (with why) so a consumer
    never mistakes "unreadable" for "absent".
    """

    service: dict = field(default_factory=dict)
    systems: list = field(default_factory=list)
    chassis: list = field(default_factory=list)
    managers: list = field(default_factory=list)
    components: list = field(default_factory=list)
    firmware: list = field(default_factory=list)
    sel: list = field(default_factory=list)
    readings: list = field(default_factory=list)
    bios: dict = field(default_factory=dict)
    capabilities: dict = field(default_factory=dict)
    incomplete: list = field(default_factory=list)
    requests: int = 0

    def of_kind(self, kind):
        """Components of ``kind`` (see :data:`KINDS`)."""
        return [c for c in self.components if c.kind == kind]

    def health_rollup(self):
        """Worst ``Status.Health`` over systems, chassis and components: ``OK``/``Warning``/``Critical``/None."""
        worst = None
        for item in list(self.systems) + list(self.chassis):
            worst = _worse(worst, item.get("health"))
        for comp in self.components:
            worst = _worse(worst, comp.health)
        return worst

    def to_dict(self):
        return asdict(self)


def _worse(a, b):
    if b not in HEALTH_ORDER:
        return a
    if a not in HEALTH_ORDER or HEALTH_ORDER[b] > HEALTH_ORDER[a]:
        return b
    return a
