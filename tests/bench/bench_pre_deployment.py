"""Benchmark: the pre_deployment stage over an emulated fleet, against community.general.redfish_info per host.

Writes build/bench/pre_deployment.json with keys bmcs, latency_ms, stage_wall_s, requests_per_bmc,
baseline_wall_s, speedup_vs_redfish_info (and the settings used, and where the stage's time went:
stage_controller_cpu_s, stage_emulator_cpu_s, stage_load_average_1m; both run on the same 2 cores).

* Fleet: N nodes of the hgx_h100_supermicro SKU (real Supermicro SYS-821GE-TNHR shapes), served by the
  symphony_emulator in its own process (HTTPS, generated CA), with latency_ms injected on every request.
* Stage: symphony.cluster twin_audit's engine (run_stage) over all N, one controller-side batch, as the role
  runs it: lease checks marked optional (no DHCP server here), ledger and dispatch list written.
* Baseline: ansible-playbook with community.general.redfish_info per host (categories Systems, Chassis,
  Update, Manager: the inventory an operator reaches for today), forks = 50 (ansible.cfg's value; AWX
  guidance calls 25-100 sane, numbers.md 5.3), same fleet, same run.  BENCH_PD_BASELINE_BMCS measures the
  baseline on a subset and extrapolates linearly; the JSON then says so (baseline_bmcs_measured).
Environment: BENCH_PD_BMCS (default 1000), BENCH_PD_LATENCY_MS (100), BENCH_PD_WORKERS (128),
BENCH_PD_FORKS (50), BENCH_PD_BASELINE_BMCS (default: all).
"""

import json
import os
import pathlib
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
OUT = ROOT / "build" / "bench"
WORK = OUT / "pre_deployment"
sys.path[:0] = [str(ROOT / "build" / "collections"), str(ROOT / "tools")]

from ansible_collections.symphony.cluster.plugins.module_utils._predeploy.stage import StageSettings, run_stage  # noqa: E402
from ansible_collections.symphony.cluster.plugins.module_utils._core.sku import load_skus  # noqa: E402
from ansible_collections.symphony.cluster.plugins.module_utils._core.twin import load_twin  # noqa: E402

BMCS = int(os.environ.get("BENCH_PD_BMCS", "1000"))
LATENCY_MS = float(os.environ.get("BENCH_PD_LATENCY_MS", "100"))
WORKERS = int(os.environ.get("BENCH_PD_WORKERS", "128"))
FORKS = int(os.environ.get("BENCH_PD_FORKS", "50"))
BASELINE_BMCS = int(os.environ.get("BENCH_PD_BASELINE_BMCS", str(BMCS)))
PYTHON = sys.executable


def write_twin(path, n):
    lines = ["twin_version: 1", "sku_dir: %s" % (ROOT / "skus"), "sites:", "  - name: bench", "    racks:"]
    per_rack = 40
    for r in range((n + per_rack - 1) // per_rack):
        lines += ["      - name: b%03d" % r, "        bmc_subnet: 10.%d.%d.0/24" % (100 + r // 250, r % 250),
                  "        bmc_first_host: 10", "        nodes:"]
        for i in range(min(per_rack, n - r * per_rack)):
            k = r * per_rack + i
            lines += ["          - {hostname: bench-%04d, u: %d, sku: hgx_h100_supermicro, serial: BENCH%08d, "
                      "bmc_mac: '3c:ec:ef:%02x:%02x:%02x'}" % (k, i + 1, k, k >> 16 & 255, k >> 8 & 255, k & 255)]
    path.write_text("\n".join(lines) + "\n")


def start_emulator(twin, faults, bmc_map):
    pid = WORK / "emulator.pid"
    subprocess.run([PYTHON, "-m", "symphony_emulator", "serve", "--twin", str(twin), "--faults", str(faults),
                    "--map", str(bmc_map), "--background", "--pidfile", str(pid)], check=True,
                   env=dict(os.environ, PYTHONPATH="%s:%s" % (ROOT / "build" / "collections", ROOT / "tools")))
    return pid


def stop_emulator(pid):
    subprocess.run([PYTHON, "-m", "symphony_emulator", "stop", "--pidfile", str(pid)], check=False,
                   env=dict(os.environ, PYTHONPATH="%s:%s" % (ROOT / "build" / "collections", ROOT / "tools")))


def process_cpu_s(pid):
    """utime + stime of a process in seconds (/proc/<pid>/stat fields 14, 15), or None."""
    try:
        with open("/proc/%d/stat" % pid) as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def baseline(bmc_map, hosts):
    """community.general.redfish_info per host; returns wall seconds."""
    data = json.loads(pathlib.Path(bmc_map).read_text())
    inv = {"all": {"hosts": {h: {"bmc_url": data["nodes"][h]["url"].split("://", 1)[1],
                                 "bmc_user": data["nodes"][h]["username"], "bmc_pass": data["nodes"][h]["password"]}
                             for h in hosts}}}
    inv_path = WORK / "baseline_inventory.json"
    inv_path.write_text(json.dumps(inv))
    os.chmod(inv_path, 0o600)
    play = WORK / "baseline.yml"
    play.write_text("""---
- name: Inventory every BMC with community.general.redfish_info (baseline)
  hosts: all
  gather_facts: false
  tasks:
    - name: Redfish inventory
      community.general.redfish_info:
        baseuri: "{{ bmc_url }}"
        username: "{{ bmc_user }}"
        password: "{{ bmc_pass }}"
        validate_certs: true
        ca_path: "%s"
        category: [Systems, Chassis, Update, Manager]
        timeout: 30
      delegate_to: localhost
      no_log: true
""" % data["ca_bundle"])
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_FORKS=str(FORKS),
               ANSIBLE_COLLECTIONS_PATH=str(ROOT / "build" / "collections"),
               ANSIBLE_PYTHON_INTERPRETER=PYTHON, ANSIBLE_STDOUT_CALLBACK="ansible.builtin.null")
    start = time.monotonic()
    rc = subprocess.run([str(pathlib.Path(PYTHON).parent / "ansible-playbook"), "-i", str(inv_path), str(play)],
                        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, check=False)
    wall = time.monotonic() - start
    if rc.returncode != 0:
        raise SystemExit("baseline failed (rc %d): %s" % (rc.returncode, rc.stderr[-2000:]))
    return wall


def main():
    WORK.mkdir(parents=True, exist_ok=True)
    twin_path, faults, bmc_map = WORK / "bench.twin.yml", WORK / "faults.yml", WORK / "bmcs.json"
    write_twin(twin_path, BMCS)
    faults.write_text("faults:\n  '*':\n    latency_ms: %g\n" % LATENCY_MS)
    skus = load_skus(str(ROOT / "skus"))
    twin = load_twin(str(twin_path), skus.keys())
    pid = start_emulator(twin_path, faults, bmc_map)
    try:
        settings = StageSettings(bmc_map=str(bmc_map), workers=WORKERS, optional=("lease_captured", "address_reserved"),
                                 ledger=str(WORK / "ledger.sqlite"), dispatch_dir=str(WORK / "dispatch"))
        emu_pid = int(pid.read_text().strip())
        emu_cpu0 = process_cpu_s(emu_pid)
        cpu0 = time.process_time()
        start = time.monotonic()
        out = run_stage(twin.nodes, skus, settings)
        stage_wall = time.monotonic() - start
        stage_cpu = time.process_time() - cpu0
        emu_cpu1 = process_cpu_s(emu_pid)
        emu_cpu = None if emu_cpu0 is None or emu_cpu1 is None else emu_cpu1 - emu_cpu0
        load = os.getloadavg()[0]
        if out["summary"].get("pass") != BMCS:
            raise SystemExit("stage did not pass every clean BMC: %s" % out["summary"])
        hosts = sorted(twin.nodes)[:BASELINE_BMCS]
        base_measured = baseline(bmc_map, hosts)
    finally:
        stop_emulator(pid)
    base_wall = base_measured * BMCS / len(hosts)
    result = {"bmcs": BMCS, "latency_ms": LATENCY_MS, "stage_wall_s": round(stage_wall, 2),
              "requests_per_bmc": round(out["requests"] / BMCS, 1), "baseline_wall_s": round(base_wall, 2),
              "speedup_vs_redfish_info": round(base_wall / stage_wall, 2), "stage_workers": WORKERS,
              "baseline_forks": FORKS, "baseline_bmcs_measured": len(hosts),
              "baseline_extrapolated": len(hosts) != BMCS,
              # where the stage's time went: controller CPU (this process, all threads), the emulator's CPU
              # (both on the same 2 cores), and the machine's load while the stage ran
              "stage_controller_cpu_s": round(stage_cpu, 2),
              "stage_emulator_cpu_s": round(emu_cpu, 2) if emu_cpu is not None else None,
              "stage_load_average_1m": round(load, 2)}
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "pre_deployment.json").write_text(json.dumps(result, sort_keys=True) + "\n")
    print(json.dumps(result, sort_keys=True))


if __name__ == "__main__":
    main()
