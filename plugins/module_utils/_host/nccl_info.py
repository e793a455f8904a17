# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What NCCL says about itself at init (``NCCL_DEBUG=INFO``), checked against a SKU's golden recipe (``nccl_env``)."""

from __future__ import annotations

import re
from typing import Any


# NCCL_DEBUG=INFO init lines (NCCL's own log, "<host>:<pid>:<tid> [<dev>] NCCL INFO ..."):
#   NCCL INFO NCCL version 2.20.5+cuda12.4
#   NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [RO]; OOB eth0:10.4.2.31<0>
#   NCCL INFO NET/Socket : Using [0]eth0:10.4.2.17<0>          (no RDMA device: fell back to TCP)
#   NCCL INFO Using network IB                                  (or IBext_v11, AWS Libfabric: a net plugin)
#   NCCL INFO NCCL_IB_HCA set by environment to mlx5_0,mlx5_1
_NCCL_VERSION = re.compile(r"NCCL INFO NCCL version (\S+)")
_NCCL_NET = re.compile(r"NCCL INFO NET/(\w+)\s*:\s*Using (.*?)(?:;\s*OOB (\S+?)(?::[\d.]+<\d+>)?)?\s*$")
_NCCL_NETWORK = re.compile(r"NCCL INFO Using network (\S+)")
_NCCL_SET = re.compile(r"NCCL INFO (NCCL_\w+) set by environment to (.*?)\s*$")
_NCCL_DEV = re.compile(r"\[\d+\]([\w.-]+?)(?=[:/<\s]|$)")


def parse_debug_info(text: str) -> dict[str, Any]:
    """What NCCL said about itself at init (``NCCL_DEBUG=INFO``): ``{version, transport, devices, oob, network,
    env}``; ``transport`` is ``IB`` or ``Socket`` (the ``NET/<x>`` line), ``devices`` its HCAs/interfaces without
    port suffixes, ``env`` the ``NCCL_*`` variables NCCL reports set.  Fields not printed are None / empty."""
    info: dict[str, Any] = {"version": None, "transport": None, "devices": [], "oob": None, "network": None,
                            "env": {}}
    for line in text.splitlines():
        match = _NCCL_VERSION.search(line)
        if match:
            info["version"] = info["version"] or match.group(1)
            continue
        match = _NCCL_NET.search(line)
        if match and info["transport"] is None:
            info["transport"] = match.group(1)
            info["devices"] = _NCCL_DEV.findall(match.group(2))
            info["oob"] = match.group(3)
            continue
        match = _NCCL_NETWORK.search(line)
        if match:
            info["network"] = info["network"] or match.group(1)
            continue
        match = _NCCL_SET.search(line)
        if match:
            info["env"].setdefault(match.group(1), match.group(2))
    return info


def golden_recipe_mismatches(info: dict[str, Any], nccl_env: dict[str, Any]) -> list[str]:
    """Where what NCCL reported (:func:`parse_debug_info`) differs from the SKU's golden recipe (``nccl_env``).

    Checked: ``NCCL_IB_HCA`` (every HCA used is one the recipe names, and NCCL used IB, not the Socket fallback),
    ``NCCL_SOCKET_IFNAME`` (the OOB interface), ``NCCL_NET_PLUGIN``/``NCCL_NET`` (the network NCCL chose), and any
    variable NCCL reports set to a value other than the recipe's.  Empty when nothing differs; an ``info`` with
    no NCCL init lines at all gives one mismatch saying so (a run without NCCL_DEBUG=INFO proves nothing).
    """
    if not info.get("version") and not info.get("transport"):
        return ["no NCCL init lines in the output (run with NCCL_DEBUG=INFO)"]
    out = []
    hca = str(nccl_env.get("NCCL_IB_HCA") or "")
    if hca:
        wanted = {name.split(":")[0] for name in hca.lstrip("=^").split(",") if name}
        if info.get("transport") != "IB":
            out.append("NCCL_IB_HCA %s but NCCL used NET/%s %s" % (hca, info.get("transport"), info.get("devices")))
        elif not hca.startswith("^") and set(info["devices"]) - wanted:
            out.append("NCCL used HCAs %s outside NCCL_IB_HCA %s" % (sorted(set(info["devices"]) - wanted), hca))
    ifname = str(nccl_env.get("NCCL_SOCKET_IFNAME") or "")
    if ifname and info.get("oob") and not any(info["oob"].startswith(p) for p in ifname.lstrip("=^").split(",")):
        out.append("OOB interface %s, not NCCL_SOCKET_IFNAME %s" % (info["oob"], ifname))
    plugin = str(nccl_env.get("NCCL_NET") or nccl_env.get("NCCL_NET_PLUGIN") or "")
    if plugin and info.get("network") and plugin.lower() not in info["network"].lower():
        out.append("NCCL used network %s, not %s" % (info["network"], plugin))
    for key, value in sorted(info.get("env", {}).items()):
        if key in nccl_env and str(nccl_env[key]) != value:
            out.append("%s is %s at run time, the recipe says %s" % (key, value, nccl_env[key]))
    return out
