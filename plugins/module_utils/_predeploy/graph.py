# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The pre-deployment stage's checks as a graph, and what every check reads.

:data:`CHECKS` in the order an operator reads them, with their dependencies (``blocked`` is derived from them);
:class:`Observation` is what was seen of one node over the network, :class:`AuditContext` what a check judges.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Iterable, Mapping, Optional

from .._core.gate import CheckGraph, CheckSpec
from .._redfish.model import NodeInventory


STAGE = "pre_deployment"

# The checks of the stage, in the order an operator reads them, with their dependencies.
CHECKS = (
    CheckSpec("lease_captured", (), True, "the BMC's DHCP lease was found by its MAC"),
    CheckSpec("address_reserved", ("lease_captured",), True,
              "a host reservation for the planned BMC address was emitted and nobody else holds it"),
    CheckSpec("bmc_reachable", (), True, "TCP connection to the BMC's Redfish port"),
    CheckSpec("service_root", ("bmc_reachable",), True, "GET /redfish/v1 returns a valid Redfish service root"),
    CheckSpec("login", ("service_root",), True, "the BMC accepts the credentials (session or Basic)"),
    CheckSpec("inventory_read", ("login",), True, "Systems, Chassis and Managers were read"),
    CheckSpec("chassis_serial", ("inventory_read",), True, "chassis serial equals the twin's"),
    CheckSpec("system_model", ("inventory_read",), True, "system manufacturer/model match the SKU"),
    CheckSpec("cpus", ("inventory_read",), True, "CPU count and model match the SKU"),
    CheckSpec("memory", ("inventory_read",), True, "DIMM count and total capacity match the SKU"),
    CheckSpec("gpus", ("inventory_read",), True, "GPU count, model and memory match the SKU"),
    CheckSpec("gpu_pcie_links", ("gpus",), True, "every GPU's PCIe link trained at the expected width and speed"),
    CheckSpec("nics", ("inventory_read",), True, "NICs/DPUs: model, count, ports and port speed"),
    CheckSpec("nvme", ("inventory_read",), True, "NVMe drives: count, model and capacity"),
    CheckSpec("psus", ("inventory_read",), True, "PSUs present and healthy"),
    CheckSpec("fans_thermal", ("inventory_read",), True, "fans present and healthy, temperatures below critical"),
    CheckSpec("health_rollup", ("inventory_read",), True, "no component reports Warning or Critical health"),
    CheckSpec("sel_clean", ("inventory_read",), True, "no Critical SEL entries since the cutoff"),
    CheckSpec("firmware_inventory", ("inventory_read",), True, "FirmwareInventory readable, SKU components found"),
    CheckSpec("power_control", ("inventory_read",), True, "ComputerSystem.Reset can power the node on and off"),
)
CHECK_NAMES = tuple(spec.name for spec in CHECKS)


def check_graph(manifest: Optional[Mapping[str, Any]] = None, profile: str = "production",
                optional: Iterable[str] = ()) -> CheckGraph:
    """The stage's :class:`CheckGraph`, with the checks the SKU's ``gates.<profile>.pre_deployment.optional``
    and ``optional`` name made not required."""
    graph = CheckGraph(STAGE, CHECKS)
    names = set(optional or ())
    if manifest:
        names.update(manifest.get("gates", {}).get(profile, {}).get(STAGE, {}).get("optional", []))
    return graph.with_required(sorted(names)) if names else graph


@dataclass
class Observation:
    """What was seen for one node.  Each step is ``None`` when not attempted.

    ``discovery``: :func:`discovery.discover_node` output, or None without a lease
    source; ``endpoint``: ``{"url", "source"}`` (``map``, ``lease``, ``twin``);
    ``reachable``: ``(bool, reason)``; ``service_root``: the root body (dict);
    ``errors``: ``{step: message}`` for ``service_root``, ``login``, ``inventory``; ``faults``: ``{step: {"fault",
    "remedy"}}`` for a step whose error was the controller's or a BMC that stayed unreachable (``_redfish.errors``
    fault classes), which the checks judge ``blocked``, never ``fail``; ``tls_verified``: False when the BMC
    was read with validate_certs=false (every result then says so);
    ``inventory``: :class:`NodeInventory`; ``requests``: Redfish requests made;
    ``elapsed_s``: seconds spent on this node.
    """

    endpoint: dict[str, Any] = field(default_factory=dict)
    discovery: Optional[dict[str, Any]] = None
    lease_source: Optional[str] = None
    reachable: Optional[tuple[bool, str]] = None
    service_root: Optional[dict[str, Any]] = None
    login: Optional[bool] = None
    inventory: Optional[NodeInventory] = None
    errors: dict[str, str] = field(default_factory=dict)
    faults: dict[str, dict[str, str]] = field(default_factory=dict)
    tls_verified: bool = True
    requests: int = 0
    elapsed_s: float = 0.0


@dataclass
class AuditContext:
    """Everything a check reads: the twin node, its SKU manifest, the observation, the SEL cutoff."""

    node: dict[str, Any]
    manifest: dict[str, Any]
    obs: Observation
    sel_cutoff: Optional[datetime] = None
    now: float = 0.0

    @property
    def inv(self) -> Any:
        """The :class:`NodeInventory` (typed ``Any``: the checks that read it run only once ``inventory_read``
        passed, so it is there)."""
        return self.obs.inventory

    @property
    def bom(self) -> dict[str, Any]:
        """The SKU's bill of materials."""
        return self.manifest.get("bom", {})
