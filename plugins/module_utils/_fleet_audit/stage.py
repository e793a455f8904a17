# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Stage 5, ``fleet_audit``: the in-band audit of one handed-off node, and the ledger side of the stage.

The stage's checks (its own gate; the handoff gates are never rewritten):

| check | where | what |
|---|---|---|
| software_drift, tunings_drift, nccl_recipe | node (``fleet_audit_node``) | ``software.py`` |
| kernel_log, dcgm_xid, gpu_counters, ib_counters | node | ``passive.py``: since the last audit |
| firmware_drift, bios_drift | controller over Redfish (``fleet_audit_bmc``) | ``oob.py`` |
| bmc_sel | controller (``bmc_sel_scan``, marked at the previous audit) | ``_burnin.sel_scan`` via the role |
| active_* | Slurm submit host (``fleet_audit_active``) | ``active.py``, not required: opportunistic |

Read-only: nothing here writes to the node; the role records the rows with ``gate_record``.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Dict, List, Mapping, Optional

from .._core.errors import SymphonyError
from .._core.gate import Outcome, not_run
from .._host.kmsg_read import read_kmsg
from .._host.parsers.kmsg import parse_kernel_log
from .._host.process import run
from . import observe
from .passive import counters_outcome, dcgm_xid_outcome, gpu_counters, kernel_outcome, new_records, parse_dmon_xid
from .software import recipe_rows, rows_outcome, software_rows, tuning_rows

STAGE = "fleet_audit"
INBAND_CHECKS = ("software_drift", "tunings_drift", "nccl_recipe", "kernel_log", "dcgm_xid", "gpu_counters",
                 "ib_counters")


def check_dict(name: str, outcome: Outcome, required: bool = True) -> Dict[str, Any]:
    """The ``gate_record`` check dict of an outcome."""
    return {"name": name, "status": outcome.status, "reason": outcome.reason, "expected": outcome.expected,
            "observed": outcome.observed, "remediation": outcome.remediation, "evidence": outcome.evidence,
            "required": required}


def _kernel(params: Mapping[str, Any], previous: Mapping[str, Any], reader: observe.Reader) -> Outcome:
    source = params.get("kernel_log_source") or "/dev/kmsg"
    try:
        text = read_kmsg(source) if source.startswith("/dev/") else reader(source)
    except OSError as exc:
        return not_run("kernel log %s not readable: %s" % (source, exc))
    if source == "/dev/kmsg":
        try:
            boot_id: Optional[str] = reader("/proc/sys/kernel/random/boot_id").strip()
        except OSError:
            boot_id = None
    else:
        boot_id = "file:%s" % source  # a lab host's own kernel-log file stands for its boot
    records = [r for r in parse_kernel_log(text) if r.get("form") == "kmsg"]
    if not records:
        # a kernel log always holds the boot messages: none (or none in the record form) means it was not read
        return not_run("kernel log %s holds no /dev/kmsg records (%d lines in another form)"
                       % (source, len(text.splitlines())))
    prev = previous.get("kernel_log") or {}
    delta = new_records(records, boot_id, prev.get("cursor"))
    return kernel_outcome(delta, params.get("injected") or (), prev.get("open") or (),
                          params.get("cleared_at"))


def audit_node(params: Mapping[str, Any], runner: Callable[..., Any] = run,
               reader: observe.Reader = observe.read_text,
               listdir: Optional[Callable[[str], List[str]]] = None) -> Dict[str, Any]:
    """The ``fleet_audit_node`` module's work: ``{"changed": False, "checks": [check dict], "readings": {...}}``.

    ``params``: ``manifest`` (the SKU), ``not_expected`` (the profile's absent parts), ``previous`` (the state
    module's ``{check: observed}``), ``injected`` (messages the exercise injected), ``cleared_at`` (UNIX s of the
    latest burn_in pass), ``kernel_log_source``, ``nccl_conf``.  Never raises for the node's own state: each
    check that cannot read becomes ``not_run`` with the reason, and an internal error fails that one check.
    """
    manifest = params.get("manifest") or {}
    not_expected = list(params.get("not_expected") or [])
    previous = params.get("previous") or {}
    pins = manifest.get("software") or {}
    tunings = manifest.get("tunings") or {}
    gpus_expected = "gpus" not in not_expected
    smi = observe.read_nvidia_smi(runner) if gpus_expected else {"error": "no GPUs in this profile", "absent": True}
    readings: Dict[str, Any] = {}

    def software() -> Outcome:
        readings["software"] = observe.read_software(list(pins), runner, reader, smi=smi)
        return rows_outcome(software_rows(pins, readings["software"], not_expected), "software")

    def tuning() -> Outcome:
        readings["tunings"] = observe.read_tunings(tunings, reader, smi=smi)
        return rows_outcome(tuning_rows(tunings, readings["tunings"], not_expected), "tunings")

    def recipe() -> Outcome:
        path = params.get("nccl_conf") or "/etc/nccl.conf"
        if "gpus" in not_expected:
            return not_run("this profile's hosts have no GPUs, so the NCCL recipe is not judged")
        try:
            text: Optional[str] = reader(path)
            note = ""
        except OSError as exc:
            text, note = None, str(exc)
        return rows_outcome(recipe_rows(manifest.get("nccl_env") or {}, text, path, note), "NCCL recipe")

    def gpu() -> Outcome:
        if not gpus_expected:
            return not_run("this profile's hosts have no GPUs")
        if smi.get("error"):
            return not_run("GPU counters not read: %s" % smi["error"])
        return counters_outcome(gpu_counters(smi), (previous.get("gpu_counters") or {}).get("counters"),
                                "GPU error counters", "nvidia-smi gave no GPU")

    def ib() -> Outcome:
        if "infiniband" in not_expected:
            return not_run("this profile's hosts have no InfiniBand")
        root = params.get("ib_sysfs") or "/sys/class/infiniband"
        now = observe.read_ib_counters(root, reader, listdir) if listdir else observe.read_ib_counters(root, reader)
        return counters_outcome(now, (previous.get("ib_counters") or {}).get("counters"),
                                "InfiniBand port error counters", "no InfiniBand device under %s" % root)

    def dcgm() -> Outcome:
        if not gpus_expected:
            return not_run("this profile's hosts have no GPUs")
        try:
            res = runner(["dcgmi", "dmon", "-e", "230", "-c", "1"], observe.TIMEOUT_S)
        except SymphonyError as exc:
            return dcgm_xid_outcome(None, None, error=str(exc))
        if res.rc != 0:
            return dcgm_xid_outcome(None, None, error="dcgmi dmon exited %d: %s" % (res.rc, res.stderr.strip()[:200]))
        return dcgm_xid_outcome(parse_dmon_xid(res.stdout), (previous.get("dcgm_xid") or {}).get("xid"),
                                params.get("injected_xids") or ())

    functions = {"software_drift": software, "tunings_drift": tuning, "nccl_recipe": recipe,
                 "kernel_log": lambda: _kernel(params, previous, reader), "dcgm_xid": dcgm, "gpu_counters": gpu,
                 "ib_counters": ib}
    checks = []
    for name in INBAND_CHECKS:
        started = time.time()
        try:
            outcome = functions[name]()
        except Exception as exc:  # pylint: disable=broad-except
            # one check's bad reading or bug must not cost the node its other checks (DESIGN.md verdict rules)
            outcome = Outcome("fail", "internal error in %s: %s: %s" % (name, type(exc).__name__, exc),
                              remediation="report this with the evidence; the other checks stand")
        # DCGM's XID field is judged only where the SKU runs DCGM (its software pins name it)
        required = name != "dcgm_xid" or "dcgm" in pins
        checks.append(dict(check_dict(name, outcome, required), started=started, finished=time.time()))
    return {"changed": False, "checks": checks, "readings": readings}
