# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""GPU-tier test kinds: NVIDIA (nvidia-smi health, gpu-burn, dcgmproftester; DCGM diag in :mod:`.dcgm`) and AMD
(rocm-smi health, ROCm Validation Suite, AMD field diagnostics).

Where the profile expects no GPU (or another vendor's) the test is ``not_run`` saying so
(:func:`gpu_expectation`); an absent tool raises :class:`ToolNotFoundError`.
"""

from __future__ import annotations

import os

from ..._core.errors import ParseError
from ..._core.gate import Outcome, failed, not_run, passed
from ..._host.parsers.agfhc import SUCCESS, parse_agfhc_output, parse_agfhc_results
from ..._host.parsers.gpu_burn import parse_gpu_burn
from ..._host.parsers.nvidia_smi import parse_nvidia_smi_xml
from ..._host.parsers.rocm_smi import parse_rocm_smi_json
from ..._host.parsers.rvs import parse_rvs_results
from ..context import TestContext, TestTimeoutError
from .common import gpu_expectation

GIB = 1024.0 ** 3


def check_nvidia_smi_health(ctx: TestContext) -> Outcome:
    """GPU inventory and health from ``nvidia-smi -q -x``.

    Fails on: GPU count ≠ ``bom.gpus.count``; a product name not containing ``bom.gpus.model``;
    ECC not enabled (``thresholds.require_ecc``, default true); volatile uncorrectable ECC errors
    > ``max_ecc_uncorrectable`` (0); retired pages pending or double-bit retired >
    ``max_retired_dbe`` (0); remapped rows pending or failed, uncorrectable remaps >
    ``max_remapped_uncorrectable`` (0); a hardware throttle reason active at idle; reset
    required; current PCIe width below ``bom.gpus.pcie.width``.
    """
    count, gpus = gpu_expectation(ctx, "nvidia")
    count = int(ctx.threshold("gpu_count", count))
    tool = ctx.require("nvidia-smi", why=" (no NVIDIA driver)")
    res = ctx.run([tool, "-q", "-x"], "nvidia-smi", timeout_s=120)
    if res.rc != 0:
        return failed("nvidia-smi exited %s: %s" % (res.rc, (res.stdout + res.stderr).strip()[:300]),
                      "check that the NVIDIA driver is loaded and every GPU is on the bus (lspci); reset or "
                      "power-cycle the node", observed={"rc": res.rc}, expected="%d GPUs" % count)
    parsed = parse_nvidia_smi_xml(res.stdout)
    ctx.save_json("parsed.json", parsed)
    problems = []
    found = parsed["gpus"]
    if len(found) != count:
        problems.append("expected %d GPUs, nvidia-smi lists %d (attached_gpus %s)"
                        % (count, len(found), parsed["attached_gpus"]))
    model = gpus.get("model")
    want_width = (gpus.get("pcie") or {}).get("width")
    for g in found:
        tag = "GPU %s %s" % (g["index"], g["pci_bus_id"])
        if model and model.lower() not in (g["product_name"] or "").lower():
            problems.append("%s is %r, expected %r" % (tag, g["product_name"], model))
        if ctx.threshold("require_ecc", True) and g["ecc"]["mode"] != "Enabled":
            problems.append("%s ECC mode %s" % (tag, g["ecc"]["mode"]))
        if (g["ecc_uncorrectable_volatile"] or 0) > float(ctx.threshold("max_ecc_uncorrectable", 0)):
            problems.append("%s %d uncorrectable ECC errors" % (tag, g["ecc_uncorrectable_volatile"]))
        retired = g["retired_pages"] or {}
        if retired.get("pending") and float(ctx.threshold("max_retired_pages_pending", 0)) < 1:
            problems.append("%s page retirement pending (reset required)" % tag)
        if (retired.get("double_bit") or 0) > float(ctx.threshold("max_retired_dbe", 0)):
            problems.append("%s %d double-bit retired pages" % (tag, retired["double_bit"]))
        remap = g["remapped_rows"] or {}
        if remap.get("failure") and float(ctx.threshold("max_remapped_rows_failure", 0)) < 1:
            problems.append("%s row remapping failed" % tag)
        if remap.get("pending"):
            problems.append("%s row remapping pending (reset required)" % tag)
        if (remap.get("uncorrectable") or 0) > float(ctx.threshold("max_remapped_uncorrectable", 0)):
            problems.append("%s %d rows remapped for uncorrectable errors" % (tag, remap["uncorrectable"]))
        if g["hardware_throttle"]:
            problems.append("%s throttled at idle: %s" % (tag, ", ".join(g["hardware_throttle"])))
        if g["reset_required"]:
            problems.append("%s reports reset required" % tag)
        if want_width and g["pcie"]["width_current"] and g["pcie"]["width_current"] < want_width:
            problems.append("%s PCIe x%d, expected x%d" % (tag, g["pcie"]["width_current"], want_width))
    observed = [{"index": g["index"], "pci_bus_id": g["pci_bus_id"], "serial": g["serial"], "product": g["product_name"],
                 "temp_c": g["temp_c"], "power_w": g["power_draw_w"], "ecc_mode": g["ecc"]["mode"],
                 "ecc_uncorrectable_volatile": g["ecc_uncorrectable_volatile"],
                 "retired_pages": g["retired_pages"], "remapped_rows": g["remapped_rows"],
                 "active_throttle": g["active_throttle"], "pcie": g["pcie"]} for g in found]
    expected = "%d × %s, ECC on, no uncorrectable/remap/retirement problems, no hardware throttle" % (
        count, model or "GPU")
    if problems:
        return failed("; ".join(problems), "reset the GPU(s) named; replace a GPU with a failed row remap, DBEs "
                                           "or a degraded link that persists after reseating",
                      observed=observed, expected=expected)
    return passed(observed=observed, expected=expected,
                  reason="%d GPUs healthy (driver %s)" % (len(found), parsed["driver_version"]))


def check_rocm_smi_health(ctx: TestContext) -> Outcome:
    """AMD GPU inventory and health from ``rocm-smi --json``.

    Fails on GPU count ≠ ``bom.gpus.count``; junction temperature ≥ ``max_temp_c`` (default
    ``bom.gpus.max_operating_temp_c``); PCIe replays > ``max_pcie_replay`` (when set); VRAM below
    ``bom.gpus.memory_gib`` × 0.95.
    """
    count, gpus = gpu_expectation(ctx, "amd")
    count = int(ctx.threshold("gpu_count", count))
    tool = ctx.require("rocm-smi", why=" (ROCm not installed)")
    res = ctx.run([tool, "--showid", "--showtemp", "--showpower", "--showmeminfo", "vram", "--showbus",
                   "--showserial", "--showreplaycount", "--showproductname", "--showclocks", "--showdriverversion",
                   "--json"], "rocm-smi", timeout_s=120)
    parsed = parse_rocm_smi_json(res.stdout)
    ctx.save_json("parsed.json", parsed)
    problems = []
    if len(parsed["gpus"]) != count:
        problems.append("expected %d GPUs, rocm-smi lists %d" % (count, len(parsed["gpus"])))
    max_temp = ctx.threshold("max_temp_c", gpus.get("max_operating_temp_c"))
    max_replay = ctx.threshold("max_pcie_replay")
    for g in parsed["gpus"]:
        tag = "card%d %s" % (g["card"], g["pci_bus"])
        if max_temp is not None and (g["temp_junction_c"] or 0) >= float(max_temp):
            problems.append("%s junction %.0f °C ≥ %g °C" % (tag, g["temp_junction_c"], float(max_temp)))
        if max_replay is not None and (g["pcie_replay_count"] or 0) > float(max_replay):
            problems.append("%s %d PCIe replays" % (tag, g["pcie_replay_count"]))
        if gpus.get("memory_gib") and g["vram_total_bytes"] and g["vram_total_bytes"] / GIB < gpus["memory_gib"] * 0.95:
            problems.append("%s VRAM %.0f GiB < %s GiB" % (tag, g["vram_total_bytes"] / GIB, gpus["memory_gib"]))
    observed = [{k: g[k] for k in ("card", "pci_bus", "serial", "temp_junction_c", "power_w", "pcie_replay_count",
                                   "vram_total_bytes")} for g in parsed["gpus"]]
    if problems:
        return failed("; ".join(problems), "reset the GPU named; replace it if the problem persists",
                      observed=observed, expected="%d healthy AMD GPUs" % count)
    return passed(observed=observed, expected="%d healthy AMD GPUs" % count,
                  reason="%d AMD GPUs healthy (driver %s)" % (len(parsed["gpus"]), parsed["driver_version"]))


def check_amd_field_diag(ctx: TestContext) -> Outcome:
    """AMD field diagnostics (AGFHC): runs ``params.command`` (default the ``all_lvl1`` recipe, ``--simple-output``).

    Judged as AMD's Cluster Validation Suite judges it (:mod:`..._host.parsers.agfhc`): ``return code
    AGFHC_SUCCESS`` is required, any FAIL/ERROR/ABORT line fails quoting it, and the run's ``results.json`` (in the
    ``Log directory:`` it prints) must say ``total_failed`` 0.  No return code at all is ``not_run`` (the tool
    did not finish: nothing was judged).  Per-test detail stays in the evidence: no public AGFHC output sample
    documents more than that summary.
    """
    gpu_expectation(ctx, "amd")
    command = list(ctx.params.get("command") or ["/opt/amd/agfhc/agfhc", "-r", "all_lvl1", "--simple-output"])
    tool = ctx.require(command[0], why=" (AMD field diagnostics not installed)")
    res = ctx.run([tool] + command[1:], "field-diag")
    name = os.path.basename(tool)
    text = res.stdout + "\n" + res.stderr
    parsed = parse_agfhc_output(text) if text.strip() else {"return_code": None, "log_dir": None, "failure_lines": []}
    observed: dict = {"rc": res.rc, "duration_s": res.duration_s, "return_code": parsed["return_code"],
                      "log_dir": parsed["log_dir"]}
    remediation = "open the diagnostic's log (evidence) and follow its recommendation; RMA the GPU it names"
    expected = "return code %s, no FAIL/ERROR/ABORT line, results.json total_failed 0" % SUCCESS
    if parsed["failure_lines"] or (parsed["return_code"] and parsed["return_code"] != SUCCESS):
        quoted = parsed["failure_lines"][:5] or ["return code %s" % parsed["return_code"]]
        return failed("%s (exit %s): %s" % (name, res.rc, " | ".join(quoted)[:400]), remediation, observed=observed,
                      expected=expected)
    if parsed["return_code"] is None:
        tail = text.strip().splitlines()[-3:]
        return not_run("%s printed no AGFHC return code (exit %s): %s" % (name, res.rc, " | ".join(tail)[:300]))
    if res.rc != 0:
        return failed("%s exited %s although it printed %s" % (name, res.rc, SUCCESS), remediation,
                      observed=observed, expected=expected)
    results_path = os.path.join(parsed["log_dir"], "results.json") if parsed["log_dir"] else None
    try:
        with open(results_path or "", encoding="utf-8") as handle:
            summary = parse_agfhc_results(handle.read())
    except (OSError, ParseError) as exc:
        return not_run("%s said %s but its results.json could not be read (%s): %s" % (
            name, SUCCESS, results_path or "no 'Log directory:' line", getattr(exc, "message", None) or exc))
    observed["results"] = summary
    if summary["total_failed"]:
        return failed("%s results.json: total_failed %d" % (name, summary["total_failed"]), remediation,
                      observed=observed, expected=expected)
    return passed(observed=observed, expected=expected, reason="%s: %s, results.json total_failed 0 (%s)" % (
        name, SUCCESS, ", ".join("%s %s" % kv for kv in sorted(summary["totals"].items()))))


def check_rocm_validation_suite(ctx: TestContext) -> Outcome:
    """AMD ROCm Validation Suite: ``rvs -c <conf dir>/<params.suite>.conf`` (default suite ``gst_stress``).

    params: ``suite``, ``conf_dir`` (default ``/opt/rocm/share/rocm-validation-suite/conf``).  Judged per result
    line (:func:`parse_rvs_results`): any ``pass: FALSE`` or ``met: FALSE`` fails quoting it, a non-zero exit fails,
    and a run that printed no result line is ``not_run`` (nothing was judged, never a pass).
    """
    gpu_expectation(ctx, "amd")
    tool = ctx.require("rvs", why=" (ROCm Validation Suite not installed)")
    conf = os.path.join(ctx.params.get("conf_dir", "/opt/rocm/share/rocm-validation-suite/conf"),
                        "%s.conf" % ctx.params.get("suite", "gst_stress"))
    res = ctx.run([tool, "-c", conf], "rvs")
    results = parse_rvs_results(res.stdout + res.stderr) if (res.stdout + res.stderr).strip() else []
    ctx.save_json("parsed.json", results)
    bad = [r["line"] for r in results if not r["ok"]]
    observed = {"rc": res.rc, "results": len(results), "failed_lines": bad[:20],
                "suite": ctx.params.get("suite", "gst_stress")}
    expected = "exit 0, every result pass: TRUE / met: TRUE"
    if res.rc != 0 or bad:
        return failed("rvs %s: exit %s, %d failing result(s): %s"
                      % (observed["suite"], res.rc, len(bad), " | ".join(bad[:3])[:300]),
                      "reset the GPU named and rerun; RMA it if the suite fails again", observed=observed,
                      expected=expected)
    if not results:
        return not_run("rvs %s printed no result line (no pass:/met: verdict): nothing was judged"
                       % observed["suite"])
    return passed(observed=observed, expected=expected,
                  reason="rvs %s: %d results, all TRUE" % (observed["suite"], len(results)))


def check_gpu_burn(ctx: TestContext) -> Outcome:
    """GPU stress with gpu-burn for ``params.duration_s`` (default 60): ``gpu_burn [-d] -tc <duration_s>``.

    params: ``use_doubles`` (``-d``, default false), ``binary``.  Fails when a GPU is FAULTY, a GPU's
    error count exceeds ``thresholds.max_errors`` (default 0), fewer GPUs than ``bom.gpus.count`` were
    tested, or a GPU reached ``thresholds.max_temp_c`` (default ``bom.gpus.max_operating_temp_c``).
    """
    count, gpus = gpu_expectation(ctx, "nvidia")
    tool = ctx.require(ctx.params.get("binary", "gpu_burn"), "gpu-burn", why=" (gpu-burn not installed)")
    duration = int(ctx.params.get("duration_s", 60))
    args = (["-d"] if ctx.params.get("use_doubles") else []) + ["-tc"]
    res = ctx.executor.run([tool] + args + [str(duration)],
                           min(ctx.remaining(), duration + 120), cwd=os.path.dirname(tool))
    ctx.save_text("gpu-burn.stdout.txt", res.stdout + res.stderr)
    if res.timed_out:
        raise TestTimeoutError("gpu-burn did not finish within %.0fs" % res.duration_s, where=ctx.test.name)
    parsed = parse_gpu_burn(res.stdout + res.stderr)
    ctx.save_json("parsed.json", parsed)
    observed = {"tested": parsed["tested"], "results": parsed["results"], "max_temp_c": parsed["max_temp_c"],
                "gflops": parsed["last_gflops"], "max_errors": parsed["max_errors"]}
    problems = []
    if parsed["faulty"]:
        problems.append("GPU %s FAULTY (computation errors)" % ", ".join(map(str, parsed["faulty"])))
    max_errors = float(ctx.threshold("max_errors", 0))
    erring = [i for i, e in enumerate(parsed["max_errors"]) if e > max_errors]
    if erring:
        problems.append("GPU %s counted errors > %g" % (", ".join(map(str, erring)), max_errors))
    if parsed["tested"] < count:
        problems.append("gpu-burn tested %d GPUs, expected %d" % (parsed["tested"], count))
    max_temp = ctx.threshold("max_temp_c", gpus.get("max_operating_temp_c"))
    if max_temp is not None:
        hot = [i for i, t in enumerate(parsed["max_temp_c"]) if t >= float(max_temp)]
        if hot:
            problems.append("GPU %s reached ≥ %g °C" % (", ".join(map(str, hot)), float(max_temp)))
    if problems:
        return failed("; ".join(problems), "replace a GPU that computes wrong results; for heat, check fans, "
                                           "airflow/coolant and the heatsink contact", observed=observed,
                      expected="%d GPUs OK" % count)
    return passed(observed=observed, expected="%d GPUs OK" % count,
                  reason="gpu-burn %ds: %d GPUs OK" % (duration, parsed["tested"]))


def check_dcgmproftester(ctx: TestContext) -> Outcome:
    """GPU stress with dcgmproftester (``-t 1004`` tensor FMA by default) for ``params.duration_s``; exit 0 = pass."""
    gpu_expectation(ctx, "nvidia")
    tool = ctx.require("dcgmproftester12", "dcgmproftester11", "dcgmproftester", why=" (DCGM not installed)")
    duration = int(ctx.params.get("duration_s", 60))
    res = ctx.run([tool, "--no-dcgm-validation", "-t", ctx.params.get("field_id", 1004), "-d", duration],
                  "dcgmproftester")
    if res.rc != 0:
        return failed("%s exited %s: %s" % (os.path.basename(tool), res.rc, (res.stderr or res.stdout)
                                            .strip().splitlines()[-1:]),
                      "reset the GPU and rerun; replace it if the stress fails again", observed={"rc": res.rc},
                      expected="exit 0")
    return passed(observed={"rc": 0}, expected="exit 0", reason="%s %ds completed" % (os.path.basename(tool), duration))
