# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""In-band readings of what runs on a node, each with the tool the SKU's ``software:`` source names.

Every reader returns ``{"value": str or None, "note": why None, "absent": True when the tool is not installed}``
and never raises for the node's own state: a node in trouble must still be reportable.

| component | read from |
|---|---|
| kernel | ``/proc/sys/kernel/osrelease`` (``uname -r``) |
| gpu_driver, cuda | ``nvidia-smi -q -x`` ``driver_version``/``cuda_version`` |
| gpu_driver (AMD) | ``rocm-smi --showdriverversion --json`` ``Driver version`` |
| dcgm | ``dcgmi --version`` ("dcgmi  version: 3.3.5") |
| nccl | the file ``libnccl.so.2`` resolves to (``ldconfig -p``; ``libnccl.so.2.21.5`` -> ``2.21.5``) |
| ofed | ``ofed_info -s`` ("MLNX_OFED_LINUX-23.10-2.1.3.1:", trailing colon dropped) |
| container_toolkit | ``nvidia-ctk --version`` ("NVIDIA Container Toolkit CLI version 1.14.6") |
"""

from __future__ import annotations

import json
import os
import re
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence

from .._core.errors import SymphonyError, ToolNotFoundError
from .._host.parsers.nvidia_smi import parse_nvidia_smi_xml
from .._host.process import CommandResult, run

Runner = Callable[..., CommandResult]
Reader = Callable[[str], str]
TIMEOUT_S = 60.0


def read_text(path: str) -> str:
    """The text of ``path`` (the default :data:`Reader`)."""
    with open(path, encoding="utf-8", errors="replace") as handle:
        return handle.read()


def _value(value: Optional[str], note: str = "") -> Dict[str, Any]:
    return {"value": value, "note": note}


def _absent(note: str) -> Dict[str, Any]:
    return {"value": None, "note": note, "absent": True}


def _tool(argv: Sequence[str], runner: Runner, pattern: str) -> Dict[str, Any]:
    """Run ``argv`` and take group 1 of ``pattern`` from its output."""
    try:
        res = runner(list(argv), TIMEOUT_S)
    except ToolNotFoundError:
        return _absent("%s not found" % argv[0])
    except SymphonyError as exc:
        return _value(None, "%s: %s" % (argv[0], exc))
    match = re.search(pattern, res.stdout + "\n" + res.stderr, re.M)
    if res.rc != 0 or not match:
        return _value(None, "%s exited %d: %s" % (" ".join(argv), res.rc, (res.stderr or res.stdout).strip()[:200]))
    return _value(match.group(1))


def read_nvidia_smi(runner: Runner = run) -> Dict[str, Any]:
    """``nvidia-smi -q -x`` parsed (``parse_nvidia_smi_xml``), or ``{"error": why, "absent": bool}``."""
    try:
        res = runner(["nvidia-smi", "-q", "-x"], TIMEOUT_S)
    except ToolNotFoundError:
        return {"error": "nvidia-smi not found", "absent": True}
    except SymphonyError as exc:
        return {"error": "nvidia-smi: %s" % exc, "absent": False}
    if res.rc != 0:
        return {"error": "nvidia-smi -q -x exited %d: %s" % (res.rc, res.stderr.strip()[:200]), "absent": False}
    try:
        return parse_nvidia_smi_xml(res.stdout)
    except SymphonyError as exc:
        return {"error": str(exc), "absent": False}


def _nccl(runner: Runner, realpath: Callable[[str], str]) -> Dict[str, Any]:
    try:
        res = runner(["ldconfig", "-p"], TIMEOUT_S)
    except SymphonyError as exc:
        return _value(None, "ldconfig -p: %s" % exc)
    match = re.search(r"libnccl\.so\.2\s.*=>\s*(\S+)", res.stdout)
    if not match:
        return _absent("no libnccl.so.2 in the dynamic linker cache (ldconfig -p)")
    target = os.path.basename(realpath(match.group(1)))
    version = re.fullmatch(r"libnccl\.so\.(\d+\.\d+\.\d+)", target)
    if not version:
        return _value(None, "libnccl.so.2 resolves to %s, which names no version" % target)
    return _value(version.group(1))


def _amd_driver(runner: Runner) -> Dict[str, Any]:
    try:
        res = runner(["rocm-smi", "--showdriverversion", "--json"], TIMEOUT_S)
        data = json.loads(res.stdout[res.stdout.find("{"):]) if "{" in res.stdout else {}
    except ToolNotFoundError:
        return _absent("neither nvidia-smi nor rocm-smi found")
    except (SymphonyError, ValueError) as exc:
        return _value(None, "rocm-smi --showdriverversion: %s" % exc)
    versions = {str(card.get("Driver version")) for card in data.values() if isinstance(card, dict)
                and card.get("Driver version")}
    if len(versions) != 1:
        return _value(None, "rocm-smi reported driver versions %s" % (sorted(versions) or "none"))
    return _value(versions.pop())


def read_software(components: Sequence[str], runner: Runner = run, reader: Reader = read_text,
                  smi: Optional[Mapping[str, Any]] = None,
                  realpath: Callable[[str], str] = os.path.realpath) -> Dict[str, Dict[str, Any]]:
    """``{component: reading}`` for the pinned ``components`` (module docstring); ``smi``: a read already made."""
    out: Dict[str, Dict[str, Any]] = {}
    smi = smi if smi is not None else (read_nvidia_smi(runner) if {"gpu_driver", "cuda"} & set(components) else {})
    for name in components:
        if name == "kernel":
            try:
                out[name] = _value(reader("/proc/sys/kernel/osrelease").strip())
            except OSError as exc:
                out[name] = _value(None, "/proc/sys/kernel/osrelease: %s" % exc)
        elif name in ("gpu_driver", "cuda"):
            key = "driver_version" if name == "gpu_driver" else "cuda_version"
            if smi.get("absent") and name == "gpu_driver":
                out[name] = _amd_driver(runner)
            elif smi.get("error"):
                out[name] = _absent(smi["error"]) if smi.get("absent") else _value(None, smi["error"])
            else:
                out[name] = _value(smi.get(key), "" if smi.get(key) else "nvidia-smi reports no %s" % key)
        elif name == "dcgm":
            out[name] = _tool(["dcgmi", "--version"], runner, r"version:\s*(\S+)")
        elif name == "nccl":
            out[name] = _nccl(runner, realpath)
        elif name == "ofed":
            out[name] = _tool(["ofed_info", "-s"], runner, r"^(\S+?):?\s*$")
        elif name == "container_toolkit":
            out[name] = _tool(["nvidia-ctk", "--version"], runner, r"version\s+(\S+)")
        else:
            out[name] = _value(None, "this collection has no reader for %s" % name)
    return out


def read_tunings(tunings: Mapping[str, Any], reader: Reader = read_text,
                 smi: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
    """What ``software.tuning_rows`` compares: ``/proc/cmdline``, ``/proc/sys/<key>`` per sysctl, the GPUs."""
    out: Dict[str, Any] = {"cmdline": None, "sysctl": {}, "gpus": None}
    try:
        out["cmdline"] = reader("/proc/cmdline")
    except OSError:
        pass
    for key in tunings.get("sysctl") or {}:
        try:
            out["sysctl"][key] = reader("/proc/sys/" + key.replace(".", "/")).strip()
        except OSError:
            out["sysctl"][key] = None
    if smi and not smi.get("error"):
        out["gpus"] = [{"index": g.get("index"), "persistence_mode": g.get("persistence_mode"),
                        "power_limit_w": g.get("power_limit_w")} for g in smi.get("gpus") or []]
    return out


def read_ib_counters(root: str = "/sys/class/infiniband", reader: Reader = read_text,
                     listdir: Callable[[str], List[str]] = os.listdir) -> Optional[Dict[str, Dict[str, int]]]:
    """``{"<device>/<port>": {counter: value}}`` from sysfs ``ports/<n>/counters``, None when there is no IB.

    Counters: the error counters of the IBTA PortCounters attribute as the kernel exports them (Documentation/ABI
    sysfs-class-infiniband): ``symbol_error``, ``link_error_recovery``, ``link_downed``, ``port_rcv_errors``,
    ``port_rcv_remote_physical_errors``, ``port_xmit_discards``, ``local_link_integrity_errors``,
    ``excessive_buffer_overrun_errors``.
    """
    try:
        devices = sorted(listdir(root))
    except OSError:
        return None
    out: Dict[str, Dict[str, int]] = {}
    for dev in devices:
        try:
            ports = sorted(listdir("%s/%s/ports" % (root, dev)))
        except OSError:
            continue
        for port in ports:
            values: Dict[str, int] = {}
            for counter in IB_ERROR_COUNTERS:
                try:
                    values[counter] = int(reader("%s/%s/ports/%s/counters/%s" % (root, dev, port, counter)).strip())
                except (OSError, ValueError):
                    continue
            out["%s/%s" % (dev, port)] = values
    return out


IB_ERROR_COUNTERS = ("symbol_error", "link_error_recovery", "link_downed", "port_rcv_errors",
                     "port_rcv_remote_physical_errors", "port_xmit_discards", "local_link_integrity_errors",
                     "excessive_buffer_overrun_errors")
