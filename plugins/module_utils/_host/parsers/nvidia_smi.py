# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""``nvidia-smi -q -x`` XML across DTD versions v11, v12 and v13 (parsing case P-C3).

Values carry units (``27 C``, ``67.03 W``, ``81920 MiB``, ``16x``) and many are
``N/A``; v11 names ``<clocks_throttle_reasons>``/``<power_readings>`` became
``<clocks_event_reasons>``/``<gpu_power_readings>`` in v12, and v13 reports
``<instant_power_draw>``/``<average_power_draw>`` instead of ``<power_draw>``.
``attached_gpus`` may differ from the number of ``<gpu>`` elements; GPUs are
keyed by ``pci_bus_id``.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from typing import Any

from . import (
    NA_VALUES,
    integer,
    number,
    parse_error,
    require_text,
)

TOOL = "nvidia-smi -q -x"
# Throttle (clock event) reasons that mean the hardware slowed the GPU down; the others
# (idle, application clocks, SW power cap at the limit, sync boost) are expected under load.
HARDWARE_THROTTLE = ("hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown", "sw_thermal_slowdown")


def _text(elem: ET.Element, *paths: str) -> str | None:
    """Text of the first path that exists under ``elem`` and is not N/A; None otherwise."""
    for path in paths:
        node = elem.find(path)
        if node is not None and node.text is not None:
            value = node.text.strip()
            if value.lower() not in NA_VALUES:
                return value
    return None


def _num(elem: ET.Element, *paths: str) -> float | None:
    return number(_text(elem, *paths))


def _int(elem: ET.Element, *paths: str) -> int | None:
    return integer(_text(elem, *paths))


def _yes(value: str | None) -> bool | None:
    if value is None:
        return None
    return value.strip().lower() in ("yes", "active", "enabled", "true")


def _throttle(gpu: ET.Element) -> dict[str, bool]:
    """``{reason: bool}`` from clocks_event_reasons (v12+) or clocks_throttle_reasons (v11)."""
    for tag, prefix in (("clocks_event_reasons", "clocks_event_reason_"),
                        ("clocks_throttle_reasons", "clocks_throttle_reason_")):
        node = gpu.find(tag)
        if node is None:
            continue
        out = {}
        for child in node:
            name = child.tag[len(prefix):] if child.tag.startswith(prefix) else child.tag
            value = (child.text or "").strip()
            if value.lower() in NA_VALUES:
                continue
            out[name] = value.lower() == "active"
        return out
    return {}


def _ecc(gpu: ET.Element) -> dict[str, Any]:
    node = gpu.find("ecc_errors")
    out: dict[str, Any] = {"mode": _text(gpu, "ecc_mode/current_ecc"), "volatile": {}, "aggregate": {}}
    if node is None:
        return out
    for scope in ("volatile", "aggregate"):
        sub = node.find(scope)
        if sub is None:
            continue
        for child in sub:
            if len(child):  # v11 nests single_bit/double_bit: flatten with the parent name
                for leaf in child:
                    out[scope]["%s_%s" % (child.tag, leaf.tag)] = integer(leaf.text)
            else:
                out[scope][child.tag] = integer(child.text)
    return out


def _uncorrectable(counts: dict[str, Any]) -> int | None:
    """Sum of the uncorrectable (double-bit) counters of one ECC scope; None when all are N/A.

    v12+: ``sram_uncorrectable``/``dram_uncorrectable`` (v13 splits SRAM into ``_parity``/``_secded``);
    v11: ``double_bit_total``.
    """
    if counts.get("double_bit_total") is not None:
        return counts["double_bit_total"]
    values = [v for k, v in counts.items() if v is not None and "uncorrectable" in k]
    return sum(values) if values else None


def _remapped(gpu: ET.Element) -> dict[str, Any] | None:
    node = gpu.find("remapped_rows")
    if node is None or len(node) == 0:
        return None  # "N/A" (MIG enabled, or not supported)
    return {
        "correctable": _int(node, "remapped_row_corr"),
        "uncorrectable": _int(node, "remapped_row_unc"),
        "pending": _yes(_text(node, "remapped_row_pending")),
        "failure": _yes(_text(node, "remapped_row_failure")),
    }


def _retired(gpu: ET.Element) -> dict[str, Any] | None:
    node = gpu.find("retired_pages")
    if node is None:
        return None
    out = {
        "single_bit": _int(node, "multiple_single_bit_retirement/retired_count"),
        "double_bit": _int(node, "double_bit_retirement/retired_count"),
        "pending": _yes(_text(node, "pending_retirement", "pending_blacklist")),
    }
    if all(v is None for v in out.values()):
        return None
    return out


def _gpu(gpu: ET.Element, index: int) -> dict[str, Any]:
    throttle = _throttle(gpu)
    ecc = _ecc(gpu)
    mig_devices = gpu.find("mig_devices")
    return {
        "index": index,
        "pci_bus_id": _text(gpu, "pci/pci_bus_id") or gpu.get("id"),
        "product_name": _text(gpu, "product_name"),
        "architecture": _text(gpu, "product_architecture"),
        "serial": _text(gpu, "serial"),
        "uuid": _text(gpu, "uuid"),
        "vbios_version": _text(gpu, "vbios_version"),
        "minor_number": _int(gpu, "minor_number"),
        "module_id": _int(gpu, "gpu_module_id"),
        "persistence_mode": _text(gpu, "persistence_mode"),
        "mig_mode": _text(gpu, "mig_mode/current_mig"),
        "mig_devices": len(mig_devices.findall("mig_device")) if mig_devices is not None else 0,
        "reset_required": _yes(_text(gpu, "gpu_reset_status/reset_required")),
        "performance_state": _text(gpu, "performance_state"),
        "pcie": {
            "gen_current": _int(gpu, "pci/pci_gpu_link_info/pcie_gen/current_link_gen"),
            "gen_max": _int(gpu, "pci/pci_gpu_link_info/pcie_gen/max_link_gen"),
            "width_current": _int(gpu, "pci/pci_gpu_link_info/link_widths/current_link_width"),
            "width_max": _int(gpu, "pci/pci_gpu_link_info/link_widths/max_link_width"),
            "replay_counter": _int(gpu, "pci/replay_counter"),
        },
        "fb_total_mib": _num(gpu, "fb_memory_usage/total"),
        "temp_c": _num(gpu, "temperature/gpu_temp"),
        "memory_temp_c": _num(gpu, "temperature/memory_temp"),
        "temp_slowdown_c": _num(gpu, "temperature/gpu_temp_slow_threshold"),
        "temp_shutdown_c": _num(gpu, "temperature/gpu_temp_max_threshold"),
        "power_draw_w": _num(gpu, "gpu_power_readings/power_draw", "gpu_power_readings/instant_power_draw",
                             "gpu_power_readings/average_power_draw", "power_readings/power_draw"),
        "power_limit_w": _num(gpu, "gpu_power_readings/current_power_limit", "power_readings/power_limit",
                              "power_readings/enforced_power_limit"),
        "default_power_limit_w": _num(gpu, "gpu_power_readings/default_power_limit",
                                      "power_readings/default_power_limit"),
        "max_power_limit_w": _num(gpu, "gpu_power_readings/max_power_limit", "power_readings/max_power_limit"),
        "sm_clock_mhz": _num(gpu, "clocks/sm_clock"),
        "max_sm_clock_mhz": _num(gpu, "max_clocks/sm_clock"),
        "ecc": ecc,
        "ecc_uncorrectable_volatile": _uncorrectable(ecc["volatile"]),
        "ecc_uncorrectable_aggregate": _uncorrectable(ecc["aggregate"]),
        "retired_pages": _retired(gpu),
        "remapped_rows": _remapped(gpu),
        "throttle_reasons": throttle,
        "active_throttle": sorted(k for k, v in throttle.items() if v),
        "hardware_throttle": sorted(k for k, v in throttle.items() if v and k in HARDWARE_THROTTLE),
    }


def parse_nvidia_smi_xml(text: str) -> dict[str, Any]:
    """Parse ``nvidia-smi -q -x``.

    Returns ``{driver_version, cuda_version, attached_gpus, dtd, gpus: [...]}``; each GPU has
    ``pci_bus_id, product_name, serial, uuid, pcie{gen_current, gen_max, width_current, width_max,
    replay_counter}, temp_c (°C), power_draw_w/power_limit_w (W), sm_clock_mhz, fb_total_mib,
    ecc{mode, volatile, aggregate}, ecc_uncorrectable_volatile, retired_pages{single_bit, double_bit,
    pending}|None, remapped_rows{correctable, uncorrectable, pending, failure}|None,
    throttle_reasons{name: bool}, active_throttle, hardware_throttle``; None means N/A.
    Raises :class:`ParseError` for malformed XML or a document that is not ``nvidia_smi_log``.
    """
    require_text(TOOL, text)
    start = text.find("<")
    if start < 0:
        raise parse_error(TOOL, "no XML in output")
    body = text[start:]
    dtd = re.search(r"nvsmi_device_(v\d+)\.dtd", body)
    try:
        root = ET.fromstring(body.encode("utf-8", "replace"))
    except (ET.ParseError, ValueError, LookupError) as exc:  # LookupError: a mangled encoding= declaration
        raise parse_error(TOOL, "XML is malformed or truncated: %s" % exc)
    if root.tag != "nvidia_smi_log":
        raise parse_error(TOOL, "root element is <%s>, not <nvidia_smi_log>" % root.tag)
    gpus = [_gpu(g, i) for i, g in enumerate(root.findall("gpu"))]
    return {
        "driver_version": _text(root, "driver_version"),
        "cuda_version": _text(root, "cuda_version"),
        "attached_gpus": _int(root, "attached_gpus"),
        "dtd": dtd.group(1) if dtd else None,
        "gpus": gpus,
    }
