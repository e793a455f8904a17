# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""GPU telemetry sampled on one node while the validation job trains (one srun step per node, --overlap).

Stand-alone (the nodes do not have the collection): writes one JSON line per GPU and sample to
``<out>/<node>.jsonl``::

    {"node": "gpu07", "gpu": 3, "t_s": 1764636000.2, "temp_c": 61.0, "power_w": 690.5, "sm_clock_mhz": 1980,
     "throttle": ["sw_power_cap"], "source": "nvml"}

and ``<out>/<node>.status.json`` naming the source used, or why none could read a GPU.  Sources, first that works:

* ``nvml``: NVML through nvidia-ml-py (``pynvml``): ``nvmlDeviceGetTemperature(NVML_TEMPERATURE_GPU)``,
  ``nvmlDeviceGetPowerUsage`` (mW), ``nvmlDeviceGetClockInfo(NVML_CLOCK_SM)``,
  ``nvmlDeviceGetCurrentClocksThrottleReasons`` (bits of nvml.h ``nvmlClocksThrottleReason*``);
* ``nvidia-smi``: ``nvidia-smi --query-gpu=index,temperature.gpu,power.draw,clocks.sm,
  clocks_throttle_reasons.active --format=csv,noheader,nounits -lms <interval>`` (one CSV line per GPU per
  interval, nvidia-smi(1) "-lms");
* ``amd-smi`` (``amd-smi metric --json``: ``temperature.hotspot``/``edge`` °C, ``power.socket_power`` W,
  ``clock.gfx_0.clk`` MHz) then ``rocm-smi --showtemp --showpower --showgpuclocks --json``, polled;
* ``lab``: with ``--lab-source FILE`` only (lab hosts have no GPUs), the lab's injected GPU readings, re-read
  every interval so a value injected while the job runs is seen: ``{"<node>": [{"gpu", "temp_c", "power_w",
  "sm_clock_mhz", "throttle"?}]}``.  Every sample it gives says ``"source": "lab (injected values from FILE)"``.

Runs until SIGTERM (srun forwards the batch script's kill at the end of training) or ``--duration-s``.
"""

import argparse
import csv
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time

THROTTLE_BITS = {0x1: "gpu_idle", 0x2: "applications_clocks_setting", 0x4: "sw_power_cap", 0x8: "hw_slowdown",
                 0x10: "sync_boost", 0x20: "sw_thermal_slowdown", 0x40: "hw_thermal_slowdown",
                 0x80: "hw_power_brake_slowdown", 0x100: "display_clocks_setting"}
QUERY = "index,temperature.gpu,power.draw,clocks.sm,clocks_throttle_reasons.active"
STOP = []


def throttle(mask):
    return [name for bit, name in sorted(THROTTLE_BITS.items()) if mask is not None and mask & bit]


def number(text):
    match = re.search(r"-?\d+(?:\.\d+)?", str(text))
    return float(match.group(0)) if match and "N/A" not in str(text) else None


def nvml_reader():
    import pynvml
    pynvml.nvmlInit()
    handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
    if not handles:
        raise RuntimeError("NVML sees no GPU")

    def read():
        out = []
        for index, handle in enumerate(handles):
            mask = pynvml.nvmlDeviceGetCurrentClocksThrottleReasons(handle)
            out.append({"gpu": index, "temp_c": float(pynvml.nvmlDeviceGetTemperature(handle, pynvml.NVML_TEMPERATURE_GPU)),
                        "power_w": pynvml.nvmlDeviceGetPowerUsage(handle) / 1000.0,
                        "sm_clock_mhz": float(pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM)),
                        "throttle": throttle(mask)})
        return out
    return "nvml", read


def nvidia_smi_stream(interval_ms, emit):
    """nvidia-smi's own loop (-lms): one line per GPU per interval, until stopped."""
    proc = subprocess.Popen(["nvidia-smi", "--query-gpu=" + QUERY, "--format=csv,noheader,nounits",
                             "-lms", str(interval_ms)], stdout=subprocess.PIPE, text=True)
    STOP.append(proc.terminate)
    for row in csv.reader(proc.stdout):
        if len(row) < 5:
            continue
        mask = int(row[4].strip(), 16) if row[4].strip().startswith("0x") else None
        emit([{"gpu": int(row[0]), "temp_c": number(row[1]), "power_w": number(row[2]),
               "sm_clock_mhz": number(row[3]), "throttle": throttle(mask)}])
    return proc.wait()


def amd_reader():
    if shutil.which("amd-smi"):
        def read():
            text = subprocess.run(["amd-smi", "metric", "--json"], capture_output=True, text=True, timeout=30, check=False).stdout
            doc = json.loads(text[min(i for i in (text.find("["), text.find("{")) if i >= 0):])
            gpus = doc.get("gpu_data", []) if isinstance(doc, dict) else doc

            def pick(section, *keys):
                for key in keys:
                    node = section
                    for part in key.split("."):
                        node = node.get(part) if isinstance(node, dict) else None
                    node = node.get("value") if isinstance(node, dict) else node
                    if node is not None and number(node) is not None:
                        return number(node)
                return None
            return [{"gpu": g["gpu"], "temp_c": pick(g.get("temperature"), "hotspot", "edge"),
                     "power_w": pick(g.get("power"), "socket_power", "average_socket_power"),
                     "sm_clock_mhz": pick(g.get("clock"), "gfx_0.clk", "gfx_clock"), "throttle": []}
                    for g in gpus if isinstance(g, dict)]
        return "amd-smi", read
    if shutil.which("rocm-smi"):
        def read():
            text = subprocess.run(["rocm-smi", "--showtemp", "--showpower", "--showgpuclocks", "--json"],
                                  capture_output=True, text=True, timeout=30, check=False).stdout
            doc = json.loads(text[text.find("{"):])
            out = []
            for card, fields in sorted(doc.items()):
                if not card.startswith("card"):
                    continue
                get = {k.lower(): v for k, v in fields.items()}
                temp = next((number(v) for k, v in get.items() if k.startswith("temperature")), None)
                power = next((number(v) for k, v in get.items() if "power" in k and "(w)" in k), None)
                sclk = next((number(v) for k, v in get.items() if k.startswith("sclk")), None)
                out.append({"gpu": int(card[4:]), "temp_c": temp, "power_w": power, "sm_clock_mhz": sclk,
                            "throttle": []})
            return out
        return "rocm-smi", read
    raise RuntimeError("neither amd-smi nor rocm-smi is installed")


def lab_reader(path, node):
    def read():
        with open(path, encoding="utf-8") as handle:
            rows = json.load(handle).get(node)
        if not rows:
            raise RuntimeError("the lab source %s has no GPU for %s" % (path, node))
        return [dict(row, throttle=row.get("throttle", [])) for row in rows]
    read()
    return "lab (injected values from %s)" % path, read


def _on_sigterm(*_args):
    # the job step ends: stop the streaming tool (nvidia-smi -lms) first, then leave
    for stop in STOP:
        stop()
    sys.exit(0)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--interval-ms", type=int, default=1000)
    parser.add_argument("--duration-s", type=float, default=0)
    parser.add_argument("--lab-source", default="")
    args = parser.parse_args(argv)
    node = os.environ.get("SLURMD_NODENAME") or socket.gethostname()
    os.makedirs(args.out, exist_ok=True)
    signal.signal(signal.SIGTERM, _on_sigterm)
    status_path = os.path.join(args.out, "%s.status.json" % node)
    tried, source, read = [], None, None
    candidates = [lambda: lab_reader(args.lab_source, node)] if args.lab_source else [nvml_reader, amd_reader]
    for make in candidates:
        try:
            source, read = make()
            break
        except Exception as exc:  # every source's failure is a reason in the status file
            tried.append("%s: %s" % (getattr(make, "__name__", "lab"), exc))
    if source is None and not args.lab_source and shutil.which("nvidia-smi"):
        source = "nvidia-smi"
    with open(status_path, "w", encoding="utf-8") as handle:
        json.dump({"node": node, "source": source, "tried": tried}, handle)
    if source is None:
        return 3
    with open(os.path.join(args.out, "%s.jsonl" % node), "a", encoding="utf-8", buffering=1) as samples:
        def emit(rows):
            now = round(time.time(), 3)
            for row in rows:
                samples.write(json.dumps(dict(row, node=node, t_s=now, source=source), sort_keys=True) + "\n")

        if source == "nvidia-smi":
            return nvidia_smi_stream(args.interval_ms, emit)
        start = time.time()
        while not args.duration_s or time.time() - start < args.duration_s:
            try:
                emit(read())
            except (OSError, ValueError, RuntimeError, subprocess.SubprocessError) as exc:
                # one unreadable sample (the lab file being replaced, a tool timing out) is a gap, not the end
                sys.stderr.write("gpu_sampler %s: sample skipped: %s\n" % (node, exc))
            time.sleep(args.interval_ms / 1000.0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
