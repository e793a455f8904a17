# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Judging one node: every pre-deployment check over its observation, then its gate."""

from __future__ import annotations

import time
from datetime import datetime
from typing import Any, Optional

from .._core.gate import CheckGraph, CheckResult, GateVerdict, compute_gate, mark_unverified
from .checks_access import (
    check_address_reserved,
    check_bmc_reachable,
    check_inventory_read,
    check_lease_captured,
    check_login,
    check_service_root,
)
from .checks_compute import check_chassis_serial, check_cpus, check_memory, check_system_model
from .checks_devices import check_gpu_pcie_links, check_gpus, check_nics, check_nvme
from .checks_health import (
    check_fans_thermal,
    check_firmware_inventory,
    check_health_rollup,
    check_power_control,
    check_psus,
    check_sel_clean,
)
from .graph import AuditContext, Observation, check_graph


CHECK_FUNCTIONS = {
    "lease_captured": check_lease_captured,
    "address_reserved": check_address_reserved,
    "bmc_reachable": check_bmc_reachable,
    "service_root": check_service_root,
    "login": check_login,
    "inventory_read": check_inventory_read,
    "chassis_serial": check_chassis_serial,
    "system_model": check_system_model,
    "cpus": check_cpus,
    "memory": check_memory,
    "gpus": check_gpus,
    "gpu_pcie_links": check_gpu_pcie_links,
    "nics": check_nics,
    "nvme": check_nvme,
    "psus": check_psus,
    "fans_thermal": check_fans_thermal,
    "health_rollup": check_health_rollup,
    "sel_clean": check_sel_clean,
    "firmware_inventory": check_firmware_inventory,
    "power_control": check_power_control,
}


def judge(node: dict[str, Any], manifest: dict[str, Any], obs: Observation, run_id: str,
          graph: Optional[CheckGraph] = None, sel_cutoff: Optional[datetime] = None,
          now: Optional[float] = None) -> tuple[list[CheckResult], GateVerdict]:
    """Run every check for one node; returns ``(results, verdict)``.

    ``results``: list of :class:`CheckResult` in graph order; ``verdict``:
    :class:`GateVerdict` (pass only when every required check passed).  A node read with validate_certs=false
    has ``evidence["tls_unverified"]`` on every result (``_core.gate.TLS_UNVERIFIED``).
    """
    graph = graph or check_graph(manifest)
    ctx = AuditContext(node=node, manifest=manifest, obs=obs, sel_cutoff=sel_cutoff,
                       now=time.time() if now is None else now)
    results = graph.run(node["hostname"], run_id, CHECK_FUNCTIONS, ctx)
    for res in results:
        res.evidence = mark_unverified(res.evidence, obs.tls_verified)
    return results, compute_gate(graph, results)
