"""The device check's steps that read and judge (issue 20), run by tests/device/run.sh on the GPU machine.

``nvsmi WORK OUT``: runs ``nvidia-smi -q -x`` and ``--query-gpu`` (through run.sh's read-only guard), keeps both raw
outputs under OUT as fixtures (a ``# SOURCE:`` line, then the bytes as printed), parses them with the collection's
parsers into WORK/nvsmi.json, and writes WORK/vars.json for the burn_in play: the power tests' ``target_w`` is the
card's own default power limit, so the card is judged as found.

``summary WORK OUT``: gathers every step (nvsmi.json, burn_in.json and the power tests' samples, matmul.json, the
smoke logs, steps/*.json) into OUT/validation_gpu.json (shape: validation_gpu.schema.json beside this file), plots
the power traces into OUT/power.png, and prints the short table (also OUT/summary.txt).  A part that did not run is
``not_run`` with its reason; no figure is made up.
"""

import datetime
import glob
import json
import os
import re
import socket
import subprocess
import sys

try:
    import jsonschema
except ImportError:  # setup failed and this runs under a bare python3: the table still comes out
    jsonschema = None
from ansible_collections.symphony.cluster.plugins.module_utils._core.errors import SymphonyError
from ansible_collections.symphony.cluster.plugins.module_utils._host.parsers.nvidia_smi import parse_nvidia_smi_xml
from ansible_collections.symphony.cluster.plugins.module_utils._host.parsers.power_csv import parse_query_csv
from ansible_collections.symphony.cluster.plugins.module_utils._validation import mfu as _mfu
from ansible_collections.symphony.cluster.plugins.module_utils._validation import recipes as _recipes

from power_trace import plot, power_summary

HERE = os.path.dirname(os.path.abspath(__file__))
SCHEMA = os.path.join(HERE, "validation_gpu.schema.json")
# Text fields only where the collection's CSV parser keeps them as text (power_csv.TEXT_FIELDS); the rest are numbers.
QUERY_FIELDS = ("index", "name", "pci.bus_id", "driver_version", "pstate", "persistence_mode", "memory.total",
                "temperature.gpu", "power.draw", "power.limit", "power.default_limit", "power.max_limit", "clocks.sm",
                "clocks.max.sm", "clocks.mem", "clocks_event_reasons.active")
# What the collection's telemetry asks for (telemetry.NvidiaSmiBackend): the query retried with these alone when a
# field above is unknown to the driver.
QUERY_FALLBACK = ("index", "name", "power.draw", "temperature.gpu", "clocks.sm", "clocks_throttle_reasons.active")
SMOKE_PRECISIONS = ("bf16", "fp8")


def _read_json(path, default=None):
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return default


def _write_json(path, data):
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(data, handle, indent=1, sort_keys=True)


def _slug(text):
    return re.sub(r"[^a-z0-9.]+", "-", str(text).lower()).strip("-") or "unknown"


def _run(argv):
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, str(exc)
    return proc, None


def _fixture(out, kind, product, driver, stamp, argv, text):
    """Keep a raw output under OUT as a fixture: one provenance line, then the bytes nvidia-smi printed.

    The line names the host and the nvidia-smi behind run.sh's guard, so a fake one (the tests) shows as such.
    """
    name = "nvidia-smi-%s-%s-%s-%s.txt" % (kind, _slug(product.replace("NVIDIA ", "")), _slug(driver), stamp)
    binary = os.environ.get("SYMPHONY_DEVICE_NVIDIA_SMI", "nvidia-smi")
    with open(os.path.join(out, name), "w", encoding="utf-8") as handle:
        handle.write("# SOURCE: symphony.cluster tests/device/run.sh | %s | %s | driver %s | %s | note: raw output of "
                     "%s on host %s (line 1 is this provenance header; strip it before parsing)\n"
                     % (" ".join(argv), product, driver, stamp, binary, socket.gethostname()))
        handle.write(text)
    return name


def nvsmi(work, out, sku_tdp_w):
    """Step 1: read the card, keep the raw outputs, give the burn_in play its variables."""
    stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%d")
    result = {"status": "not_run", "reason": "", "fixtures": []}
    xml_argv = ["nvidia-smi", "-q", "-x"]
    proc, error = _run(xml_argv)
    if proc is None or proc.returncode != 0:
        result["reason"] = "nvidia-smi -q -x could not run: %s" % (error or "exit %d: %s" % (
            proc.returncode, (proc.stdout + proc.stderr).strip()[:300]))
    else:
        try:
            parsed = parse_nvidia_smi_xml(proc.stdout)
        except SymphonyError as exc:
            result.update(status="error", reason="nvidia-smi -q -x did not parse: %s" % exc)
        else:
            gpu = parsed["gpus"][0] if parsed["gpus"] else {}
            result.update(status="ran" if gpu else "error", reason="" if gpu else "nvidia-smi lists no GPU",
                          parsed=parsed, gpu=gpu, driver_version=parsed["driver_version"],
                          cuda_version=parsed["cuda_version"])
            product = gpu.get("product_name") or "unknown"
            result["fixtures"].append(_fixture(out, "q-x", product, parsed["driver_version"], stamp, xml_argv,
                                               proc.stdout))
            for fields in (QUERY_FIELDS, QUERY_FALLBACK):
                query_argv = ["nvidia-smi", "--query-gpu=" + ",".join(fields), "--format=csv"]
                qproc, qerror = _run(query_argv)
                if qproc is not None and qproc.returncode == 0:
                    break
            if qproc is not None and qproc.returncode == 0:
                result["fixtures"].append(_fixture(out, "query-gpu", product, parsed["driver_version"], stamp,
                                                   query_argv, qproc.stdout))
                try:
                    result["query"] = parse_query_csv(qproc.stdout)["rows"]
                except SymphonyError as exc:
                    result["query_error"] = str(exc)
            else:
                result["query_error"] = qerror or "exit %d: %s" % (qproc.returncode, (qproc.stdout + qproc.stderr)
                                                                   .strip()[:300])
    gpu = result.get("gpu") or {}
    tdp = gpu.get("default_power_limit_w")
    result["tdp_w"], result["tdp_source"] = (tdp, "the card's default power limit (nvidia-smi -q -x)") if tdp else \
        (sku_tdp_w, "the SKU's bom.gpus.tdp_w (the card reported no default power limit)")
    _write_json(os.path.join(work, "nvsmi.json"), result)
    overrides = {name: {"thresholds": {"target_w": result["tdp_w"]}} for name in ("power_sustained", "power_pulsating")}
    _write_json(os.path.join(work, "vars.json"), {
        "burn_in_overrides": overrides, "burn_in_evidence_dir": os.path.join(work, "evidence"),
        "device_results_dir": work, "device_power_limit_w": gpu.get("power_limit_w") or result["tdp_w"]})
    print("nvsmi: %s %s" % (result["status"], result["reason"] or "%s, driver %s" % (
        gpu.get("product_name"), result.get("driver_version"))))
    return 0


def _not_run(reason):
    return {"status": "not_run", "reason": reason}


def _step_reason(steps, name, what):
    """Why a step left no result: it timed out, failed, or never started (run.sh's steps/<name>.json)."""
    step = steps.get(name)
    if step is None:
        return "%s: the step did not run" % what
    if step.get("skipped"):
        return "%s: %s" % (what, step["skipped"])
    if step.get("rc") in (124, 137):
        return "%s: timed out after %ss" % (what, step.get("limit_s"))
    return "%s: the step exited %s (steps/%s.log)" % (what, step.get("rc"), name)


def gpu_part(nv, steps):
    if not nv:
        return dict(_not_run(_step_reason(steps, "nvsmi", "nvidia-smi")), fixtures=[])
    gpu = nv.get("gpu") or {}
    return {"status": nv["status"], "reason": nv["reason"], "model": gpu.get("product_name"),
            "driver_version": nv.get("driver_version"), "cuda_version": nv.get("cuda_version"),
            "vbios_version": gpu.get("vbios_version"), "memory_mib": gpu.get("fb_total_mib"),
            "power_limit_w": gpu.get("power_limit_w"), "default_power_limit_w": gpu.get("default_power_limit_w"),
            "max_power_limit_w": gpu.get("max_power_limit_w"), "temp_c": gpu.get("temp_c"),
            "active_throttle": gpu.get("active_throttle") or [], "tdp_w": nv.get("tdp_w"),
            "tdp_source": nv.get("tdp_source"), "fixtures": nv.get("fixtures", [])}


def burn_in_part(results, steps):
    if not results:
        return dict(_not_run(_step_reason(steps, "burn_in", "the burn_in play")), checks={})
    checks = {c["name"]: {"status": c["status"], "reason": c.get("reason") or ""} for c in results["checks"]}
    return {"status": "ran", "reason": "", "run_id": results.get("run_id"), "checks": checks,
            "host_failed": results.get("host_failed")}


def power_parts(results, steps):
    """``({sustained, pulsating}, traces)`` from the burn_in checks and the samples they kept as evidence."""
    out, traces = {}, {}
    checks = {c["name"]: c for c in (results or {}).get("checks", [])}
    for part, name in (("sustained", "power_sustained"), ("pulsating", "power_pulsating")):
        check = checks.get(name)
        if check is None:
            out[part] = _not_run(_step_reason(steps, "burn_in", name) if not results else "%s not in the results" % name)
            continue
        samples = _read_json((check.get("evidence") or {}).get("samples", ""), None)
        if samples is None:
            out[part] = dict(_not_run(check.get("reason") or "no telemetry kept"), check=check["status"])
            continue
        figures = power_summary(samples, check.get("observed"), pulse=part == "pulsating")
        load = (check.get("observed") or {}).get("load")
        out[part] = dict(figures, status="ran", reason=check.get("reason") or "", check=check["status"], load=load,
                         samples_file=check["evidence"]["samples"])
        traces[part] = {"samples": [s for s in samples["samples"] if s["gpu"] == 0], "tdp_w": samples.get("tdp_w"),
                        "on_windows": [w for w in samples.get("on_windows", []) if None not in w],
                        "title": "%s load, %s, %s Hz, check %s" % (load, samples.get("backend"),
                                                                   figures["achieved_hz"], check["status"])}
    return out, traces


def _peak(model, precision):
    try:
        return _mfu.peak_tflops(model or "", precision)
    except SymphonyError as exc:
        return None, str(exc)


def smoke_part(work, precision, model, matmul, steps):
    """The smoke model's throughput and MFU (torchtitan convention, as the workload counts) by the collection."""
    log = os.path.join(work, "smoke-%s.log" % precision)
    try:
        with open(log, encoding="utf-8") as handle:
            text = handle.read()
    except OSError:
        return _not_run(_step_reason(steps, "smoke_%s" % precision, "smoke model %s" % precision))
    unsupported = re.search(r"smoke_unsupported: (.*)", text)
    if unsupported:
        return _not_run(unsupported.group(1).strip())
    try:
        parsed = _recipes.parse_torchtitan(text, "smoke")
        summary = parsed["summary"] or {}
        tput = _recipes.throughput(parsed, "smoke", warmup=int(summary.get("warmup", 1)))
        shape = _mfu.ModelShape(**_recipes.smoke_shape(summary))
    except SymphonyError as exc:
        return {"status": "error", "reason": "smoke log did not parse: %s" % exc}
    tps = tput["tokens_per_s_per_device"]
    out = {"status": "ran", "reason": "", "tokens_per_s": round(tps, 1), "params": summary.get("params"),
           "shape": shape.to_dict(), "steps_used": tput["steps_used"], "last_loss": tput["last_loss"],
           "convention": "torchtitan"}
    peak, source = _peak(model, precision)
    if peak is None:
        out.update(mfu_pct=None, mfu_reason=source)
    else:
        res = _mfu.compute_mfu(shape, "torchtitan", tps, peak, source)
        out.update(mfu_pct=res["mfu_pct"], peak_tflops=peak, peak_source=source,
                   achieved_tflops=round(res["achieved_tflops_per_device"], 1))
    # The workload's own MFU is against the GEMM peak it timed itself: same peak, so ours must agree with it.
    own_peak = (summary.get("gemm_peak_tflops") or [None])[0]
    if own_peak:
        res = _mfu.compute_mfu(shape, "torchtitan", tps, own_peak, "the workload's own GEMM timing",
                               reported_mfu_pct=tput["reported_mfu_pct"])
        out.update(mfu_pct_vs_own_gemm=res["mfu_pct"], reported_mfu_pct=tput["reported_mfu_pct"],
                   disagrees=res["disagrees"])
    measured = (matmul or {}).get(precision) or {}
    out["mfu_pct_vs_measured"] = None
    if measured.get("tflops"):
        out["mfu_pct_vs_measured"] = _mfu.compute_mfu(shape, "torchtitan", tps, measured["tflops"],
                                                      "gpu_bench.py %s matmul" % precision)["mfu_pct"]
    return out


def matmul_part(work, steps):
    data = _read_json(os.path.join(work, "matmul.json"))
    if data is None:
        return dict(_not_run(_step_reason(steps, "matmul", "matmul")), bf16_tflops=None, fp8_tflops=None)
    out = {"status": data["status"], "reason": data.get("reason", ""), "bf16_tflops": None, "fp8_tflops": None}
    for precision in ("bf16", "fp8"):
        part = data.get(precision) or {}
        out["%s_tflops" % precision] = part.get("tflops")
        if part.get("status") == "not_run":
            out["%s_reason" % precision] = part.get("reason")
    return out


def _fmt(value, pattern="%s"):
    return "-" if value is None else pattern % value


def table(doc):
    gpu, power, smoke, mm = doc["gpu"], doc["power"], doc["smoke"], doc["matmul"]
    sus, pul = power["sustained"], power["pulsating"]

    def why(part):
        return "%s: %s" % (part["status"], part["reason"]) if part["status"] != "ran" else None

    ran = [(k, p) for k, p in (("sustained", sus), ("pulsating", pul)) if p["status"] == "ran"]
    temps = [p["max_temp_c"] for _k, p in ran if p.get("max_temp_c") is not None]

    rows = [
        ("GPU", why(gpu) or "%s, driver %s, CUDA %s, power limit %s W (default %s W)" % (
            gpu["model"], gpu["driver_version"], gpu["cuda_version"], _fmt(gpu.get("power_limit_w")),
            _fmt(gpu.get("default_power_limit_w")))),
        ("sustained power", why(sus) or "%s W mean = %s of TDP %s W (%s), check %s" % (
            _fmt(sus.get("mean_power_w")), _fmt(sus.get("fraction_of_tdp"), "%.2f"), _fmt(sus.get("tdp_w")),
            sus.get("load"), sus.get("check"))),
        ("pulse edges", why(pul) or "%s rising / %s falling seen for %s pulses commanded (rise %s s); on %s W, off "
         "%s W (medians), on-phase mean %s of TDP; check %s"
         % (pul.get("edges_rising"), pul.get("edges_falling"), pul.get("pulses_commanded"), _fmt(pul.get("rise_lag_s")),
            _fmt(pul.get("on_power_w")), _fmt(pul.get("off_power_w")), _fmt(pul.get("fraction_of_tdp"), "%.2f"),
            pul.get("check"))),
        ("peak temperature", "%s °C" % _fmt(max(temps)) if temps else "-"),
        ("throttle reasons", ", ".join("%s (%s %.0f%% of samples)" % (r, k, pct) for k, p in ran
                                       for r, pct in sorted((p.get("throttle_pct") or {}).items())) or
         ("-" if not ran else "not read (no clock-event mask in the telemetry)"
          if not any(p.get("throttle_read_pct") for _k, p in ran) else "none")),
    ]
    burn = doc["burn_in"]
    rows.append(("burn_in checks", why(burn) or ", ".join("%s %s" % (name, c["status"]) for name, c in
                                                          sorted(burn["checks"].items())) +
                 ("; host failed: %s" % burn["host_failed"][:160] if burn.get("host_failed") else "")))
    for precision in SMOKE_PRECISIONS:
        part = smoke[precision]
        rows.append(("smoke %s" % precision, why(part) or "%s tokens/s, MFU %s%% of datasheet %s TFLOP/s, %s%% of "
                     "measured matmul" % (part["tokens_per_s"], _fmt(part.get("mfu_pct")), _fmt(part.get("peak_tflops")),
                                          _fmt(part.get("mfu_pct_vs_measured")))))
    fp8 = "fp8 %s TFLOP/s" % mm["fp8_tflops"] if mm["fp8_tflops"] else "fp8 not_run: %s" % mm.get("fp8_reason", "-")
    rows.append(("matmul", why(mm) or "bf16 %s TFLOP/s, %s" % (_fmt(mm["bf16_tflops"]), fp8)))
    width = max(len(name) for name, _value in rows)
    lines = ["device check %s on %s (%s)" % (doc["date"], doc["host"], "complete" if doc["complete"] else "incomplete")]
    lines += ["%-*s  %s" % (width, name, value) for name, value in rows]
    return "\n".join(lines) + "\n"


def summary(work, out):
    steps = {os.path.basename(p)[:-5]: _read_json(p, {}) for p in glob.glob(os.path.join(work, "steps", "*.json"))}
    nv = _read_json(os.path.join(work, "nvsmi.json"))
    results = _read_json(os.path.join(work, "burn_in.json"))
    gpu = gpu_part(nv, steps)
    matmul = matmul_part(work, steps)
    matmul_raw = _read_json(os.path.join(work, "matmul.json"), {})
    power, traces = power_parts(results, steps)
    doc = {"schema": "symphony.cluster/validation_gpu/1",
           "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
           "host": socket.gethostname(), "gpu": gpu, "burn_in": burn_in_part(results, steps),
           "power": power, "matmul": matmul,
           "smoke": {p: smoke_part(work, p, gpu.get("model"), matmul_raw, steps) for p in SMOKE_PRECISIONS},
           "steps": steps}
    parts = [doc["gpu"], doc["burn_in"], doc["matmul"]] + list(doc["power"].values()) + list(doc["smoke"].values())
    doc["complete"] = all(p["status"] == "ran" for p in parts)
    doc["plot"] = plot(traces, os.path.join(out, "power.png"))
    if jsonschema is not None:
        jsonschema.validate(doc, _read_json(SCHEMA))
    _write_json(os.path.join(out, "validation_gpu.json"), doc)
    text = table(doc)
    if jsonschema is None:
        text += "(validation_gpu.json not checked against its schema: jsonschema is not importable)\n"
    with open(os.path.join(out, "summary.txt"), "w", encoding="utf-8") as handle:
        handle.write(text)
    return 0


def main(argv):
    if len(argv) >= 4 and argv[1] == "nvsmi":
        return nvsmi(argv[2], argv[3], float(argv[4]) if len(argv) > 4 else None)
    if len(argv) == 4 and argv[1] == "summary":
        return summary(argv[2], argv[3])
    print("usage: device_check.py nvsmi WORK OUT [SKU_TDP_W] | summary WORK OUT", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
