# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""NVLink and GPU fabric state from ``nvidia-smi``: ``nvlink --status``, ``nvlink -e`` and ``-q``'s Fabric section.

Shapes (public samples, e.g. stas00/ml-engineering ``compute/accelerator/nvidia/debug.md`` for an H100 80GB HBM3):
``GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-...)`` then one line per link, ``Link 0: 26.562 GB/s`` or
``Link 4: <inactive>`` (status); ``Link 0: Replay Errors: 0`` / ``Recovery Errors`` / ``CRC Errors`` (``-e``; newer
drivers print ``Link 0:`` and the counters on the lines below it).  ``nvidia-smi -q`` has per GPU a ``Fabric``
block: ``State`` (``Completed`` once the fabric manager has registered the GPU, ``In Progress``, ``Not Started``,
``N/A`` without a fabric), ``Status`` (``Success`` or the error), ``CliqueId``, ``ClusterUUID``, ``Health`` /
``Bandwidth`` (``Full`` ...), as NVIDIA/topograph's clique tests and public ``nvidia-smi -q`` dumps show it.
``N/A`` is unknown, never a value.
"""

from __future__ import annotations

import re
from typing import Any

from . import parse_error, require_text

TOOL = "nvidia-smi nvlink"
_GPU = re.compile(r"^GPU (\d+): (.*?)(?: \(UUID: ([^)]+)\))?\s*$")
# --status: "Link 0: 26.562 GB/s" or "Link 4: <inactive>"
_LINK_STATUS, _RATE = (re.compile(r"^\s*Link (\d+): (.+?)\s*$"), re.compile(r"^([0-9.]+) GB/s$"))
# -e: "Link 0: CRC Errors: 0", or "Link 0:" with "CRC Flit Error: 0" on the lines below
_LINK_COUNTER, _LINK_ONLY, _COUNTER = (re.compile(pattern) for pattern in (
    r"^\s*Link (\d+): ([A-Za-z ]+?) Errors?: (\S+)\s*$", r"^\s*Link (\d+):\s*$", r"^\s*([A-Za-z ]+?) Errors?: (\S+)\s*$"))
# -q: a GPU's section starts at "GPU 00000008:01:00.0"; fields are "Key : value"
_QGPU = re.compile(r"^GPU ([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])\s*$")
_KV = re.compile(r"^\s*([^:]+?)\s*:\s*(.*?)\s*$")
FABRIC_FIELDS = {"State": "state", "Status": "status", "CliqueId": "clique_id", "ClusterUUID": "cluster_uuid",
                 "Bandwidth": "bandwidth"}


def _value(text: str) -> str | None:
    text = text.strip()
    return None if text in ("", "N/A", "n/a") else text


def _gpus(text: str) -> list[dict[str, Any]]:
    gpus: list[dict[str, Any]] = []
    for line in text.splitlines():
        match = _GPU.match(line.strip())
        if match:
            gpus.append({"index": int(match.group(1)), "name": match.group(2).strip(), "uuid": match.group(3),
                         "lines": []})
        elif gpus and line.strip():
            gpus[-1]["lines"].append(line)
    return gpus


def parse_nvlink_status(text: str) -> list[dict[str, Any]]:
    """``nvidia-smi nvlink --status`` -> ``[{index, name, uuid, links: {link: GB/s or None (inactive)}}]``.

    Raises :class:`ParseError` when no ``GPU n:`` line is found.
    """
    require_text(TOOL, text)
    out = []
    for gpu in _gpus(text):
        links: dict[int, float | None] = {}
        for line in gpu.pop("lines"):
            match = _LINK_STATUS.match(line)
            if match:
                rate = _RATE.match(match.group(2))
                links[int(match.group(1))] = float(rate.group(1)) if rate else None
        out.append(dict(gpu, links=links))
    if not out:
        raise parse_error(TOOL, "no 'GPU <n>: <name>' line in nvlink --status output")
    return out


def parse_nvlink_errors(text: str) -> list[dict[str, Any]]:
    """``nvidia-smi nvlink -e`` -> ``[{index, name, uuid, links: {link: {counter: int or None}}}]``; counter names
    lower case with ``_`` (``replay``, ``recovery``, ``crc``, ``crc_flit`` ...).  Raises :class:`ParseError` when
    no ``GPU n:`` line is found."""
    require_text(TOOL, text)
    out = []
    for gpu in _gpus(text):
        links: dict[int, dict[str, int | None]] = {}
        current = None
        for line in gpu.pop("lines"):
            match = _LINK_COUNTER.match(line)
            if match:
                current = int(match.group(1))
                name, value = match.group(2), match.group(3)
            else:
                only = _LINK_ONLY.match(line)
                if only:
                    current = int(only.group(1))
                    links.setdefault(current, {})
                    continue
                counter = _COUNTER.match(line)
                if not counter or current is None:
                    continue
                name, value = counter.group(1), counter.group(2)
            key = "_".join(name.lower().split())
            links.setdefault(current, {})[key] = int(value) if value.isdigit() else None
        out.append(dict(gpu, links=links))
    if not out:
        raise parse_error(TOOL, "no 'GPU <n>: <name>' line in nvlink -e output")
    return out


def parse_fabric(text: str) -> list[dict[str, Any]]:
    """The ``Fabric`` block of each GPU in ``nvidia-smi -q`` -> ``[{pci, state, status, clique_id, cluster_uuid,
    bandwidth}]`` (None for ``N/A`` or absent).  Raises :class:`ParseError` when no ``GPU <bus id>`` header is found."""
    require_text("nvidia-smi -q", text)
    out: list[dict[str, Any]] = []
    gpu: dict[str, Any] | None = None
    fabric_indent = None
    for line in text.splitlines():
        header = _QGPU.match(line.strip())
        if header and not line.startswith(" "):
            gpu = dict(dict.fromkeys(FABRIC_FIELDS.values()), pci=header.group(1).lower())
            out.append(gpu)
            fabric_indent = None
        if gpu is None or header:
            continue
        indent = len(line.expandtabs(4)) - len(line.expandtabs(4).lstrip())
        if line.strip() == "Fabric":  # a section title has no colon
            fabric_indent = indent
            continue
        if fabric_indent is None:
            continue
        match = _KV.match(line)
        if not match:
            if line.strip() and indent <= fabric_indent:
                fabric_indent = None
            continue
        key, value = match.group(1), match.group(2)
        if indent <= fabric_indent:
            fabric_indent = None
            continue
        field = FABRIC_FIELDS.get(key)
        if field:
            gpu[field] = _value(value)
    if not out:
        raise parse_error("nvidia-smi -q", "no 'GPU <bus id>' header")
    return out
