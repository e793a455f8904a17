# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The SKU's in-band GPU tunings: persistence mode and power limit through ``nvidia-smi``, and the kernel command
line read back from ``/proc/cmdline``.  Query -> plan (pure) -> apply -> query again: a setting counts only when the
fresh query reads it, whatever ``nvidia-smi`` exited with.

``nvidia-smi`` usage from its manual page (NVIDIA, nvidia-smi(1), "Device Modification Options"): ``-i <index>``
selects a GPU, ``-pm 1`` enables persistence mode (Linux), ``-pl <watts>`` sets the power limit, which must lie within
``power.min_limit``..``power.max_limit``; ``--query-gpu=<fields> --format=csv,nounits`` reads them back.
"""

from __future__ import annotations

from .._core.errors import (
    ParseError, ToolNotFoundError, ValidationError)
from .inband_fw import run_tool
from .._host.parsers.power_csv import parse_query_csv

QUERY_FIELDS = ("index", "persistence_mode", "power.limit", "power.min_limit", "power.max_limit")
# nvidia-smi prints the limit with two decimals (700.00); a limit within this many W of the target is the target.
POWER_TOLERANCE_W = 0.5


def query_gpus(timeout_s=60.0):
    """Read every GPU's persistence mode and power limits.

    Returns ``{index: {"persistence_mode": bool | None, "power_limit_w", "min_limit_w", "max_limit_w"}}``
    (W; ``None`` where the GPU reports ``[N/A]``).  Raises :class:`ToolNotFoundError` when ``nvidia-smi`` is not on
    PATH, :class:`ParseError` when it fails or prints something else.
    """
    argv = ["nvidia-smi", "--query-gpu=" + ",".join(QUERY_FIELDS), "--format=csv,nounits"]
    rc, out, err = run_tool(argv, timeout_s)
    if rc != 0:
        raise ParseError("%s exited %d: %s" % (" ".join(argv), rc, (err or out).strip()[:300]), where="nvidia-smi")
    gpus = {}
    for row in parse_query_csv(out)["rows"]:
        mode = str(row.get("persistence_mode") or "").strip().lower()
        gpus[row["index"]] = {
            "persistence_mode": {"enabled": True, "disabled": False}.get(mode),
            "power_limit_w": row.get("power.limit"), "min_limit_w": row.get("power.min_limit"),
            "max_limit_w": row.get("power.max_limit")}
    return gpus


def plan(gpus, persistence_mode=None, power_limit_w=None):
    """The ``nvidia-smi`` calls that bring ``gpus`` (:func:`query_gpus`) to the SKU's settings; pure.

    Returns ``[{"gpu", "setting", "before", "after", "argv"}]``, empty when every GPU already reads the target
    (power limit within :data:`POWER_TOLERANCE_W`).  ``None`` leaves a setting alone.  Raises
    :class:`ValidationError` naming the GPU when ``power_limit_w`` (W) is outside that GPU's
    ``power.min_limit``..``power.max_limit`` (``nvidia-smi -pl`` would refuse it).
    """
    changes = []
    for index in sorted(gpus):
        gpu = gpus[index]
        if persistence_mode is not None and gpu["persistence_mode"] is not bool(persistence_mode):
            changes.append({"gpu": index, "setting": "persistence_mode", "before": gpu["persistence_mode"],
                            "after": bool(persistence_mode),
                            "argv": ["nvidia-smi", "-i", str(index), "-pm", "1" if persistence_mode else "0"]})
        if power_limit_w is None:
            continue
        low, high = gpu["min_limit_w"], gpu["max_limit_w"]
        if (low is not None and power_limit_w < low - POWER_TOLERANCE_W) or \
                (high is not None and power_limit_w > high + POWER_TOLERANCE_W):
            raise ValidationError("GPU %d accepts a power limit of %s..%s W, not %g W" % (index, low, high, power_limit_w),
                                  where="power_limit_w")
        current = gpu["power_limit_w"]
        if current is None or abs(current - power_limit_w) > POWER_TOLERANCE_W:
            changes.append({"gpu": index, "setting": "power_limit_w", "before": current, "after": power_limit_w,
                            "argv": ["nvidia-smi", "-i", str(index), "-pl", "%g" % power_limit_w]})
    return changes


def missing_cmdline(expected, cmdline):
    """Tokens of ``expected`` (``["iommu=pt", ...]``) that the kernel command line ``cmdline`` lacks, in order."""
    present = set(cmdline.split())
    return [token for token in expected if token not in present]


def _gpu_part(persistence_mode, power_limit_w, check_mode, timeout_s):
    """``(result, changes)`` for persistence mode and power limit; result ``{"status", "reason", ...}``."""
    if persistence_mode is None and power_limit_w is None:
        return None, []
    wanted = {"persistence_mode": persistence_mode, "power_limit_w": power_limit_w}
    try:
        before = query_gpus(timeout_s)
    except ToolNotFoundError as exc:
        return {"status": "not_run", "reason": "GPU tunings: %s (no NVIDIA driver in this runtime)" % exc}, []
    if not before:
        return {"status": "fail", "reason": "GPU tunings: nvidia-smi lists no GPU",
                "remediation": "check the driver and the GPUs (pre_deployment counts them)"}, []
    changes = plan(before, persistence_mode, power_limit_w)
    if check_mode or not changes:
        reason = "GPU tunings: %d change(s) to make" % len(changes) if changes else \
            "GPU tunings: %d GPU(s) already at %s" % (len(before), _describe(wanted))
        return {"status": "pass" if not changes else "not_run", "reason": reason, "observed": before}, changes
    errors = []
    for change in changes:
        rc, out, err = run_tool(change["argv"], timeout_s)
        if rc != 0:
            errors.append("%s exited %d: %s" % (" ".join(change["argv"]), rc, (err or out).strip()[:200]))
    after = query_gpus(timeout_s)
    # Verify, don't trust: what the fresh query reads decides, not the exit codes above.
    left = plan(after, persistence_mode, power_limit_w)
    if left:
        # nvidia-smi prints [N/A] where a GPU has no value (query_gpus keeps None)
        shown = "; ".join("GPU %d %s reads %s, wanted %s" % (
            c["gpu"], c["setting"], "[N/A]" if c["before"] is None else c["before"], c["after"]) for c in left)
        return {"status": "fail", "reason": "GPU tunings not applied: %s%s" % (
            shown, (" (" + "; ".join(errors) + ")") if errors else ""),
            "remediation": "run nvidia-smi by hand on the node; a power limit needs root and a supported GPU",
            "observed": after}, changes
    return {"status": "pass", "reason": "GPU tunings: %d GPU(s) now at %s" % (len(after), _describe(wanted)),
            "observed": after}, changes


def _describe(wanted):
    parts = []
    if wanted["persistence_mode"] is not None:
        parts.append("persistence mode %s" % ("on" if wanted["persistence_mode"] else "off"))
    if wanted["power_limit_w"] is not None:
        parts.append("power limit %g W" % wanted["power_limit_w"])
    return ", ".join(parts)


def run_tunings(persistence_mode=None, power_limit_w=None, kernel_cmdline=None, cmdline_path="/proc/cmdline",
                check_mode=False, timeout_s=60.0):
    """Apply and verify the GPU tunings; check the kernel command line.

    Returns ``{"status", "reason", "remediation", "parts": {"gpu": {...}, "kernel_cmdline": {...}},
    "changes": [...]}`` (``changes``: the calls made, or in check mode the calls it would make).  ``status``:
    ``fail`` when a part failed, else ``not_run`` when a part could not run (no ``nvidia-smi``; check mode with
    changes to make), else ``pass``.  The kernel command line is the runtime image's
    to set (its boot entry): a missing token fails with the tokens named.  Raises :class:`ValidationError` for a
    power limit outside a GPU's range, :class:`ParseError` when ``nvidia-smi`` or ``cmdline_path`` cannot be read.
    """
    parts = {}
    gpu, changes = _gpu_part(persistence_mode, power_limit_w, check_mode, timeout_s)
    if gpu is not None:
        parts["gpu"] = gpu
    if kernel_cmdline:
        try:
            with open(cmdline_path, encoding="utf-8") as handle:
                cmdline = handle.read()
        except OSError as exc:
            raise ParseError("cannot read the kernel command line: %s" % exc.strerror, where=cmdline_path)
        missing = missing_cmdline(kernel_cmdline, cmdline)
        parts["kernel_cmdline"] = {
            "status": "fail", "reason": "kernel command line lacks %s" % " ".join(missing),
            "remediation": "add them to the runtime image's boot entry (the SKU's tunings.kernel_cmdline)",
            "observed": cmdline.strip()} if missing else {
            "status": "pass", "reason": "kernel command line has %s" % " ".join(kernel_cmdline)}
    statuses = [p["status"] for p in parts.values()]
    status = "fail" if "fail" in statuses else "not_run" if "not_run" in statuses else "pass"
    if not parts:
        status, reasons = "pass", ["no GPU tuning or kernel command line in the SKU"]
    else:
        reasons = [p["reason"] for p in parts.values()]
    remediation = "; ".join(p["remediation"] for p in parts.values() if p.get("remediation"))
    return {"status": status, "reason": "; ".join(reasons), "remediation": remediation, "parts": parts,
            "changes": changes}
