"""Benchmark: fleet_audit's out-of-band drift over an emulated fleet, and the lab exercise's timings.

Writes build/bench/fleet_audit.json with ``oob_drift_wall_s`` (the ``fleet_audit_bmc`` engine over N emulated BMCs
with latency_ms on every request; goal <= 60 s for 1,000 at 100 ms, the pre-deployment figure), ``bmcs``,
``latency_ms``, ``drift_found`` (one BMC is downgraded, so exactly one firmware_drift fail is expected), and
``detect_s``, ``drain_s``, ``replace_s``, ``return_s`` from the lab exercise (tests/integration/test_fleet_audit_lab.py
``run_exercise``) on a lab already up in this checkout, else null with ``lab_exercise`` saying why.
Environment: BENCH_FA_BMCS (default 1000), BENCH_FA_LATENCY_MS (100), BENCH_FA_WORKERS (128), BENCH_FA_LAB (1: may
bring a lab up itself; it then tears down any lab another checkout runs on this machine).
"""

import importlib.util
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
OUT = ROOT / "build" / "bench"
WORK = OUT / "fleet_audit"
sys.path[:0] = [str(ROOT / "build" / "collections"), str(ROOT / "tools"), str(ROOT / "tests" / "bench")]

from bench_pre_deployment import PYTHON, stop_emulator, write_twin  # noqa: E402
from ansible_collections.symphony.cluster.plugins.module_utils._fleet_audit.oob import audit_oob  # noqa: E402

BMCS = int(os.environ.get("BENCH_FA_BMCS", "1000"))
LATENCY_MS = float(os.environ.get("BENCH_FA_LATENCY_MS", "100"))
WORKERS = int(os.environ.get("BENCH_FA_WORKERS", "128"))
DOWNGRADED = "bench-0000"


def oob_drift():
    WORK.mkdir(parents=True, exist_ok=True)
    twin, faults, defects = WORK / "bench.twin.yml", WORK / "faults.yml", WORK / "defects.yml"
    bmc_map, pid = WORK / "bmcs.json", WORK / "emulator.pid"
    write_twin(twin, BMCS)
    faults.write_text("faults:\n  '*':\n    latency_ms: %g\n" % LATENCY_MS)
    # the demo's "drift to find": one BMC downgraded
    defects.write_text("defects:\n  %s:\n    - {kind: firmware_drift, component: bmc, version: 01.01.10}\n"
                       % DOWNGRADED)
    subprocess.run([PYTHON, "-m", "symphony_emulator", "serve", "--twin", str(twin), "--faults", str(faults),
                    "--defects", str(defects), "--map", str(bmc_map), "--background", "--pidfile", str(pid)],
                   check=True, env=dict(os.environ, PYTHONPATH="%s:%s" % (ROOT / "build" / "collections",
                                                                          ROOT / "tools")))
    try:
        start = time.monotonic()
        out = audit_oob({"twin": str(twin), "sku_dir": str(ROOT / "skus"), "bmc_map": str(bmc_map),
                         "workers": WORKERS})
        wall = time.monotonic() - start
    finally:
        stop_emulator(pid)
    drift = sorted(h for h, checks in out["checks"].items()
                   if any(c["name"] == "firmware_drift" and c["status"] == "fail" for c in checks))
    return {"oob_drift_wall_s": round(wall, 2), "drift_found": drift, "summary": out["summary"]}


def lab_exercise():
    """The exercise on a lab that is already up in this checkout (``make lab-up``); with BENCH_FA_LAB=1 it may bring
    one up.  Never by default: the lab's namespaces, bridge and /etc/hosts entries are machine-wide, and bringing a
    lab up first tears down whatever lab another checkout runs."""
    empty = {"detect_s": None, "drain_s": None, "replace_s": None, "return_s": None}
    if os.geteuid() != 0:
        return dict(empty, lab_exercise="not run: the lab needs root (network namespaces, sshd, slurmd)")
    try:
        import symphony_lab
    except ImportError as exc:
        return dict(empty, lab_exercise="not run: %s" % exc)
    try:
        lab = symphony_lab.Lab.load()
        up = lab.is_up() and lab.n >= 4
    except symphony_lab.LabError:
        up = False
    if not up and os.environ.get("BENCH_FA_LAB") != "1":
        return dict(empty, lab_exercise="not run: no lab with 4 hosts is up in this checkout (make lab-up, or set "
                                        "BENCH_FA_LAB=1 to let this benchmark bring one up)")
    spec = importlib.util.spec_from_file_location(
        "test_fleet_audit_lab", ROOT / "tests" / "integration" / "test_fleet_audit_lab.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with tempfile.TemporaryDirectory() as work, symphony_lab.running(n=4) as lab:
        timings = module.run_exercise(lab, work, os.path.join(work, "ledger.sqlite"))
    return {k: timings.get(k) for k in empty} | {"lab_exercise": "ran", "missing": timings["missing"]}


def main():
    result = {"bmcs": BMCS, "latency_ms": LATENCY_MS, "workers": WORKERS}
    result.update(oob_drift())
    if result["drift_found"] != [DOWNGRADED]:
        raise SystemExit("expected firmware drift on %s only, found %s" % (DOWNGRADED, result["drift_found"][:10]))
    result.update(lab_exercise())
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "fleet_audit.json").write_text(json.dumps(result, sort_keys=True) + "\n")
    print(json.dumps(result, sort_keys=True))


if __name__ == "__main__":
    main()
