# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Burn-in test kinds: what each SKU ``burn_in.tiers[].tests[].kind`` runs and how it is judged.

Every function takes a :class:`_burnin.context.TestContext` and returns an ``Outcome``.  A tool
that is absent raises :class:`ToolNotFoundError` (the runner makes the test ``not_run``
with that reason); where the profile expects no GPU the GPU and power tests are
``not_run`` saying so.  Thresholds come from the test's ``thresholds`` (SKU merged with
profile and run-time overrides); defaults are named in each function.

Node tier: ``stress_ng``, ``memory_size``, ``edac``, ``pcie_links``, ``fio``, ``kernel_log``, ``ibstat``.
GPU tier: ``nvidia_smi_health``, ``nvlink``, ``dcgm_diag``, ``rocm_smi_health``, ``amd_field_diag``, ``gpu_burn``,
``dcgmproftester``.  Power tier: ``power_sustained``, ``power_pulse``.

One registry, :data:`KINDS` (kind -> function); the runner looks every test up there.  The functions live
per tier: :mod:`.node` and :mod:`.devices` (node tier), :mod:`.gpu`, :mod:`.dcgm` and :mod:`.nvlink`,
:mod:`.power`.
"""

from __future__ import annotations

from typing import Callable

from ..._core.gate import Outcome
from ..context import TestContext
from .dcgm import check_dcgm_diag
from .devices import check_fio, check_ibstat, check_pcie_links
from .gpu import (
    check_amd_field_diag,
    check_dcgmproftester,
    check_gpu_burn,
    check_nvidia_smi_health,
    check_rocm_smi_health,
    check_rocm_validation_suite,
)
from .nvlink import check_nvlink_health
from .node import check_edac, check_kernel_log, check_memory_size, check_stress_ng_cpu, check_stress_ng_vm
from .power import check_power_pulsating, check_power_sustained

KINDS: dict[str, Callable[[TestContext], Outcome]] = {
    "stress_ng_cpu": check_stress_ng_cpu,
    "stress_ng_vm": check_stress_ng_vm,
    "memory_size": check_memory_size,
    "edac": check_edac,
    "pcie_links": check_pcie_links,
    "fio": check_fio,
    "kernel_log_scan": check_kernel_log,
    "ibstat": check_ibstat,
    "nvidia_smi": check_nvidia_smi_health,
    "nvlink": check_nvlink_health,
    "dcgm_diag": check_dcgm_diag,
    "rocm_smi": check_rocm_smi_health,
    "rocm_validation_suite": check_rocm_validation_suite,
    "amd_field_diag": check_amd_field_diag,
    "gpu_burn": check_gpu_burn,
    "dcgmproftester": check_dcgmproftester,
    "power_sustained": check_power_sustained,
    "power_pulsating": check_power_pulsating,
}
