"""Calibration: measure this machine once when the lab comes up, so the lab profile's floors can be fractions of it.

Lab hosts are network namespaces on one machine: they share its disk and its cores, so what a healthy lab host
measures depends on the machine and on what else runs.  ``measure(lab)`` runs each of the lab profile's heavy
tests once, alone, inside lab host 1 (the disk and cores every lab host uses), a few seconds each, and
returns the calibration document ``build/lab/calibration.json`` holds::

    {"version": 1, "measured": "<UTC ISO time>", "seconds": 14.2, "machine": {"hostname", "cpus", "mem_gib"},
     "figures": {"<test>.<figure>": {"value": 1712.3, "unit": "MB/s", "how": "<the command>"}, ...},
     "skipped": {"iperf3.tcp_gbps": "<why>"}}

The SKU lab profiles name these figures (``{of: fio_randread_4k.read_iops, fraction: 0.02, why: ...}``, resolved
by the collection's ``_burnin/calibration.py``).  The jobs below use the lab profile's parameters (fio 32 MiB,
2 s, QD8, one job, O_DIRECT under /var/tmp; stress-ng one worker), so a floor compares like with like.
"""

from __future__ import annotations

import datetime
import json
import math
import os
import socket
import time

from ansible_collections.symphony.cluster.plugins.module_utils._host.parsers.fio import parse_fio_json
from ansible_collections.symphony.cluster.plugins.module_utils._host.parsers.stress_ng import parse_stress_ng

from ._errors import LabError

VERSION = 1
SECONDS = 2          # each measurement's run time: long enough to settle, short enough for every lab-up
FIO_DIR = "/var/tmp"  # where the burn-in fio check writes its file (checks.check_fio's default directory)

# Healthy lab pairs in a fabric tier: several at once on two cores, on a machine that may be busy.  Measured: two
# pairs beside two stress-ng CPU hogs each got 0.23 of one pair alone; a tenth is taken as their worst case.
HEALTHY_PAIR_FRACTION = 0.1

# name -> (fio --rw, --bs): the three storage tests of the SKU lab profiles.
FIO_JOBS = {"fio_seq_read": ("read", "1M"), "fio_seq_write": ("write", "1M"), "fio_randread_4k": ("randread", "4k")}
# name -> stress-ng arguments after the stressor count: the lab profile's cpu_stress and memory_stress.
STRESS_JOBS = {"stress_ng_cpu": ("cpu", ["--cpu-method", "matrixprod"]),
               "stress_ng_vm": ("vm", ["--vm-bytes", "64M", "--verify"])}


def fio_argv(name, rw, bs, filename, seconds=SECONDS):
    """The fio command of one calibration job (the lab profile's parameters)."""
    return ["fio", "--name=%s" % name, "--filename=%s" % filename, "--rw=%s" % rw, "--bs=%s" % bs, "--size=32M",
            "--iodepth=8", "--numjobs=1", "--direct=1", "--ioengine=libaio", "--group_reporting",
            "--time_based", "--runtime=%ds" % seconds, "--output-format=json"]


def stress_argv(stressor, extra, seconds=SECONDS):
    """The stress-ng command of one calibration job (one worker, the lab profile's method and size)."""
    return ["stress-ng", "--%s" % stressor, "1"] + list(extra) + ["--metrics-brief", "--timeout", "%ds" % seconds]


def fio_figures(name, rw, text, how):
    """Figures of one fio job's JSON output: bandwidth (MB/s), IOPS and p99 completion latency (µs)."""
    job = parse_fio_json(text)["jobs"][0]
    if job["error"]:
        raise LabError("fio job %s reported error %s" % (name, job["error"]), where="calibration")
    data = job["write" if "write" in rw else "read"]
    direction = "write" if "write" in rw else "read"
    out = {"%s.%s_bw_mbps" % (name, direction): (round(data["bw_bytes_s"] / 1e6, 1), "MB/s"),
           "%s.%s_iops" % (name, direction): (round(data["iops"], 1), "IOPS")}
    if data["p99_us"] is not None:
        out["%s.%s_p99_lat_us" % (name, direction)] = (round(data["p99_us"], 1), "µs")
    return {key: {"value": value, "unit": unit, "how": how} for key, (value, unit) in out.items()}


def stress_figures(name, stressor, text, how):
    """The one stressor's bogo ops per second of wall time (what burn-in's stress-ng check observes)."""
    rates = {s["name"]: s["bogo_ops_per_s_real"] for s in parse_stress_ng(text)["stressors"]}
    if not rates.get(stressor):
        raise LabError("stress-ng --%s printed no bogo ops/s" % stressor, where="calibration")
    return {"%s.bogo_ops_per_s" % name: {"value": round(rates[stressor], 1), "unit": "bogo ops/s", "how": how}}


def _machine():
    try:
        with open("/proc/meminfo", encoding="utf-8") as handle:
            kib = next(int(line.split()[1]) for line in handle if line.startswith("MemTotal:"))
    except (OSError, StopIteration, ValueError):
        kib = 0
    return {"hostname": socket.gethostname(), "cpus": os.cpu_count(), "mem_gib": round(kib / 1048576, 1)}


def measure(lab, seconds=SECONDS):
    """Measure the machine through ``lab`` (fio, stress-ng in its first host; iperf3 between its first two).

    Returns the calibration document (see module docstring).  Raises LabError when a tool fails: a lab whose
    own baseline cannot be measured has no floors to offer.
    """
    t0 = time.monotonic()
    host = lab.names[0]
    figures, skipped = {}, {}
    for name, (rw, bs) in FIO_JOBS.items():
        filename = os.path.join(FIO_DIR, "symphony-calibration-%s-%d.dat" % (name, os.getpid()))
        argv = fio_argv(name, rw, bs, filename, seconds)
        try:
            out = lab.exec(host, argv, timeout=seconds + 60)
        finally:
            if os.path.exists(filename):
                os.unlink(filename)
        figures.update(fio_figures(name, rw, out.stdout, " ".join(argv)))
    for name, (stressor, extra) in STRESS_JOBS.items():
        argv = stress_argv(stressor, extra, seconds)
        out = lab.exec(host, argv, timeout=seconds + 60)
        figures.update(stress_figures(name, stressor, out.stdout + "\n" + out.stderr, " ".join(argv)))
    if len(lab.names) >= 2:
        figures["iperf3.tcp_gbps"] = {
            "value": round(lab.iperf3(lab.names[0], lab.names[1], seconds=seconds) / 1000, 2), "unit": "Gbit/s",
            "how": "iperf3 -c <%s> -t %d -J from %s (one TCP stream over the lab bridge, no degradation)"
                   % (lab.names[1], seconds, lab.names[0])}
    else:
        skipped["iperf3.tcp_gbps"] = "a one-host lab has no pair to measure"
    return {"version": VERSION, "measured": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "seconds": round(time.monotonic() - t0, 1), "machine": _machine(), "figures": figures,
            "skipped": skipped}


def pair_floor_gbps(calibration, slow_mbit):
    """The fabric floor (Gbit/s) that tells a path shaped to ``slow_mbit`` from a healthy lab pair.

    The geometric mean of the slow path and the worst a healthy pair gets (``HEALTHY_PAIR_FRACTION`` of the
    calibrated single-pair rate ``iperf3.tcp_gbps``), so the floor is the same factor away from each: the slow
    side is a tc htb rate (measured within 5 %), the healthy side moves with the load.  LabError when the
    calibration has no iperf3 figure.
    """
    figure = ((calibration or {}).get("figures") or {}).get("iperf3.tcp_gbps")
    if not figure:
        raise LabError("the calibration has no iperf3 figure (a lab of two hosts or more measures one; "
                       "python -m symphony_lab calibrate)", where="calibration")
    return round(math.sqrt(slow_mbit / 1000.0 * figure["value"] * HEALTHY_PAIR_FRACTION), 3)


def summary(doc):
    """One line per figure (``name: value unit``) and per skipped one, for the CLI."""
    lines = ["measured %s in %ss on %s (%s CPUs)" % (doc["measured"], doc["seconds"], doc["machine"]["hostname"],
                                                      doc["machine"]["cpus"])]
    lines += ["  %s: %g %s" % (name, fig["value"], fig["unit"]) for name, fig in sorted(doc["figures"].items())]
    lines += ["  %s: skipped (%s)" % item for item in sorted(doc.get("skipped", {}).items())]
    return "\n".join(lines)


def write(path, doc):
    """Write the calibration document atomically (a reader never sees half a file)."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def read(path):
    """The calibration document at ``path``, or None when there is none (LabError when unreadable)."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise LabError("unreadable calibration: %s" % exc, where=str(path)) from exc
