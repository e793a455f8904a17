# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""NVLink / NVSwitch health (kind ``nvlink``): link state and speed, error counters, the GPU fabric state.

Reads ``nvidia-smi nvlink --status`` and ``nvidia-smi nvlink -e`` (parsers: :mod:`_host.parsers.nvlink`); where
``params.fabric_state`` is set (GB200: GPUs registered with the NVLink fabric by the fabric manager), the
``Fabric`` block of ``nvidia-smi -q`` must read State ``Completed``, Status ``Success``, one CliqueId and
ClusterUUID for every GPU of the node and Bandwidth ``Full`` where reported; where ``params.fabric_manager``
is set (NVSwitch baseboards), ``systemctl is-active nvidia-fabricmanager`` must say ``active``.
"""

from __future__ import annotations

from typing import Any

from ..._core.gate import Outcome, failed, not_run, passed
from ..._host.parsers.nvlink import parse_fabric, parse_nvlink_errors, parse_nvlink_status
from ..context import TestContext
from .common import gpu_expectation

COUNTERS = {"max_replay_errors": ("replay",), "max_recovery_errors": ("recovery",),
            "max_crc_errors": ("crc", "crc_flit", "crc_data")}


def judge_links(status: list[dict[str, Any]], errors: list[dict[str, Any]] | None, gpu_count: int,
                thresholds: dict[str, Any]) -> tuple[list[str], list[str]]:
    """``(problems, unjudged)`` for NVLink ``status``/``errors`` (parsed) against ``thresholds``:
    ``min_active_links`` per GPU, ``min_link_gbps`` (GB/s per link as nvidia-smi reports it), ``max_*_errors``
    (:data:`COUNTERS`).  A counter that reads N/A or is not printed at all, or a GPU missing from ``errors``, is
    unjudged, never zero."""
    problems, unjudged = [], []
    if len(status) < gpu_count:
        problems.append("%d GPU(s) listed by nvlink --status, %d expected" % (len(status), gpu_count))
    want = thresholds.get("min_active_links")
    speed = thresholds.get("min_link_gbps")
    for gpu in status:
        active = {n: r for n, r in gpu["links"].items() if r}
        inactive = sorted(n for n, r in gpu["links"].items() if not r)
        if want is not None and len(active) < int(want):
            problems.append("GPU %d: %d of %s links active (inactive: %s)" % (gpu["index"], len(active), want,
                                                                              ",".join(map(str, inactive)) or "-"))
        slow = sorted(n for n, r in active.items() if speed is not None and r < float(speed))
        if slow:
            problems.append("GPU %d: links %s below %s GB/s" % (gpu["index"], ",".join(map(str, slow)), speed))
    for key, names in COUNTERS.items():
        limit = thresholds.get(key)
        if limit is None or errors is None:
            continue
        if len(errors) < gpu_count:
            unjudged.append("%s: %d GPU(s) in nvlink -e, %d expected" % (key, len(errors), gpu_count))
        for gpu in errors:
            if not gpu["links"]:
                unjudged.append("GPU %d %s: no link counters" % (gpu["index"], key))
            for link, counters in sorted(gpu["links"].items()):
                values = [counters[n] for n in names if n in counters]
                # a declared limit whose counter the driver did not print is unjudged, never a zero
                if not values or any(v is None for v in values):
                    unjudged.append("GPU %d link %d %s" % (gpu["index"], link, key))
                elif sum(values) > int(limit):
                    problems.append("GPU %d link %d: %s %d > %s" % (gpu["index"], link, key[4:], sum(values), limit))
    return problems, unjudged


def judge_fabric(fabric: list[dict[str, Any]], gpu_count: int) -> list[str]:
    """Problems of the GPUs' NVLink fabric registration (``nvidia-smi -q`` Fabric blocks, parsed)."""
    problems = []
    if len(fabric) < gpu_count:
        problems.append("%d GPU(s) in nvidia-smi -q, %d expected" % (len(fabric), gpu_count))
    for gpu in fabric:
        if gpu["state"] != "Completed" or gpu["status"] != "Success":
            problems.append("GPU %s fabric state %s, status %s (fabric manager registration not complete)"
                            % (gpu["pci"], gpu["state"] or "N/A", gpu["status"] or "N/A"))
        if gpu["bandwidth"] not in (None, "Full"):
            problems.append("GPU %s fabric bandwidth %s" % (gpu["pci"], gpu["bandwidth"]))
    cliques = {(g["clique_id"], g["cluster_uuid"]) for g in fabric}
    if len(cliques) > 1 or any(None in c for c in cliques):
        problems.append("GPUs not in one NVLink clique: %s" % ", ".join(sorted("%s/%s" % c for c in cliques)))
    return problems


def check_nvlink_health(ctx: TestContext) -> Outcome:
    """NVLink link state and counters, and the fabric where the SKU has one (see the module docstring)."""
    count, _gpus = gpu_expectation(ctx, "nvidia")
    tool = ctx.require("nvidia-smi", why=" (NVIDIA driver not installed)")
    status = parse_nvlink_status(ctx.run([tool, "nvlink", "--status"], "nvlink_status").stdout)
    errors = parse_nvlink_errors(ctx.run([tool, "nvlink", "-e"], "nvlink_errors").stdout)
    thresholds = dict(ctx.test.thresholds)
    problems, unjudged = judge_links(status, errors, count, thresholds)
    observed: dict[str, Any] = {"active_links": {g["index"]: sum(1 for r in g["links"].values() if r) for g in status}}
    if ctx.params.get("fabric_state"):
        fabric = parse_fabric(ctx.run([tool, "-q"], "nvidia_smi_q").stdout)
        observed["fabric"] = fabric
        problems += judge_fabric(fabric, count)
    if ctx.params.get("fabric_manager"):
        systemctl = ctx.require("systemctl", why=" (cannot read the fabric manager's state)")
        state = ctx.run([systemctl, "is-active", "nvidia-fabricmanager"], "fabricmanager").stdout.strip()
        observed["fabric_manager"] = state
        if state != "active":
            problems.append("nvidia-fabricmanager is %s, not active" % (state or "unknown"))
    ctx.save_json("parsed.json", {"status": status, "errors": errors, "observed": observed})
    expected = dict(thresholds.items())
    if problems:
        return failed("NVLink/fabric: %s" % "; ".join(problems)[:600],
                      "reseat or replace the GPU/baseboard named; check the NVSwitch trays and the fabric manager "
                      "log (/var/log/fabricmanager.log); rerun", observed=observed, expected=expected)
    if unjudged:
        return not_run("NVLink counters read N/A, not judged: %s" % ", ".join(unjudged)[:300])
    return passed(observed=observed, expected=expected,
                  reason="%d GPUs, NVLink links up%s" % (len(status), ", fabric registered" if "fabric" in observed else ""))
