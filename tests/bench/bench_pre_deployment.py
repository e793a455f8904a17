"""Benchmark: the pre_deployment stage over an emulated fleet, against community.general.redfish_info per host.

Writes build/bench/pre_deployment.json (issue 27 "Controller-side speed"; the targets are ratios measured in one
run, since the shared machines' speed varies 2x from day to day):

* ``stage_wall_s``, ``requests_per_bmc``, ``baseline_wall_s``, ``speedup_vs_redfish_info`` (goal >= 20);
* ``floor_ratio`` = stage_wall_s / (requests_per_bmc x latency x bmcs / workers), the network floor of the
  workload (goal <= 2);
* ``cores_used`` = controller CPU seconds / stage_wall_s (goal >= 1.5 on 2 cores);
* ``controller_cpu_ms_per_bmc`` and ``controller_cpu_ms_per_bmc_before`` (the same stage from the commit before
  the change, ``BENCH_PD_BEFORE_COMMIT``, against the same emulator in the same run; goal: now <= before / 3),
  ``cpu_ratio_vs_before``;
* ``profile`` and ``profile_before``: where a BMC's controller CPU goes (py-spy samples of a ``BENCH_PD_PROFILE_BMCS`` run, by layer:
  tls, http, json, sushy, transport, reader, judging, ledger, threads_locks, batch_processes, other), when py-spy
  is installed (test-requirements.txt);
* ``scale_10k_ratio`` = stage_wall_s_10k / stage_wall_s (goal <= 11) with BENCH_PD_10K=1 (a 10,000-BMC emulator
  and stage: slow, so optional).

Controller CPU is the stage's process and its worker processes (``getrusage`` RUSAGE_SELF + RUSAGE_CHILDREN around
``run_stage``, in a process of its own), never the emulator's (``stage_emulator_cpu_s``, reported beside it).

* Fleet: N nodes of the hgx_h100_supermicro SKU (real Supermicro SYS-821GE-TNHR shapes), served by the
  symphony_emulator in its own process (HTTPS, generated CA), with latency_ms injected on every request.
* Stage: symphony.cluster twin_audit's engine (run_stage) over all N, one controller-side batch, as the role
  runs it: lease checks marked optional (no DHCP server here), ledger and dispatch list written.
* Baseline: ansible-playbook with community.general.redfish_info per host (categories Systems, Chassis,
  Update, Manager: the inventory an operator reaches for today), forks = 50 (ansible.cfg's value; AWX
  guidance calls 25-100 sane, numbers.md 5.3), same fleet, same run.  BENCH_PD_BASELINE_BMCS measures the
  baseline on a subset and extrapolates linearly; the JSON then says so (baseline_bmcs_measured); 0 skips it.
Environment: BENCH_PD_BMCS (default 1000), BENCH_PD_LATENCY_MS (100), BENCH_PD_WORKERS (128),
BENCH_PD_PROCESSES (worker processes; default the stage's own, one per core), BENCH_PD_FORKS (50),
BENCH_PD_BASELINE_BMCS (default: all), BENCH_PD_BEFORE_COMMIT (default below; empty: skip),
BENCH_PD_PROFILE_BMCS (200, profiled now and before; 0: skip), BENCH_PD_10K (0).
"""

import json
import os
import pathlib
import resource
import shutil
import subprocess
import sys
import time
from collections import Counter

ROOT = pathlib.Path(__file__).resolve().parents[2]
OUT = ROOT / "build" / "bench"
WORK = OUT / "pre_deployment"
# The tree whose stage a ``--stage`` run imports (the commit before the change, for the "before" figure).
TREE = pathlib.Path(os.environ.get("BENCH_PD_TREE") or ROOT)
sys.path[:0] = [str(TREE / "build" / "collections"), str(ROOT / "tools")]

BMCS = int(os.environ.get("BENCH_PD_BMCS", "1000"))
LATENCY_MS = float(os.environ.get("BENCH_PD_LATENCY_MS", "100"))
WORKERS = int(os.environ.get("BENCH_PD_WORKERS", "128"))
PROCESSES = os.environ.get("BENCH_PD_PROCESSES")
FORKS = int(os.environ.get("BENCH_PD_FORKS", "50"))
BASELINE_BMCS = int(os.environ.get("BENCH_PD_BASELINE_BMCS", str(BMCS)))
# The last commit before issue 27's change: its stage is measured against the same emulator in the same run.
BEFORE_COMMIT = os.environ.get("BENCH_PD_BEFORE_COMMIT", "2621f6bcf55542bfac87b692f3c4aef7128e50e8")
PROFILE_BMCS = int(os.environ.get("BENCH_PD_PROFILE_BMCS", "200"))
SCALE_10K = os.environ.get("BENCH_PD_10K", "0") == "1"
PYTHON = sys.executable
PY_SPY = shutil.which("py-spy", path=str(pathlib.Path(PYTHON).parent) + os.pathsep + os.environ.get("PATH", ""))
PROFILE_RATE_HZ = 200

# py-spy frames -> layer, by file; a sample counts for the frame nearest its leaf that matches (json.loads called
# by the transport is json; an SSL read under urllib3 is tls).
LAYERS = (
    ("tls", ("ssl.py", "_ssl")),
    # file:function for orjson, C underneath
    ("json", ("json/", "orjson", "_redfish/transport.py:_decode", "_redfish/fastpath.py:decode_body")),
    ("ledger", ("_core/ledger", "sqlite3/", "_core/dispatch.py", "_core/leases.py")),
    ("sushy", ("sushy/",)),
    ("http", ("http/client.py", "urllib3/", "requests/", "socket.py", "selectors.py", "email/", "http/cookiejar.py",
              "urllib/parse.py", "_redfish/fastpath.py", "_redfish/curl.py")),
    ("transport", ("_redfish/transport.py", "_redfish/session.py", "_redfish/registries.py", "_redfish/client.py",
                   "_redfish/errors.py", "_redfish/settings.py", "_fleet/client.py")),
    ("reader", ("_redfish/read", "_redfish/paging.py", "_redfish/model.py", "_predeploy/observe.py")),
    ("judging", ("_predeploy/", "_core/gate", "_core/secrets.py", "_core/match.py", "_core/testkinds.py",
                 "dataclasses.py", "copy.py")),
    ("batch_processes", ("_fleet/", "pickle", "multiprocessing/", "copyreg.py")),
    ("threads_locks", ("threading.py", "queue.py")),
)


def _frame_file(frame):
    """``func (path/file.py:123)`` -> ``/path/file.py:func``."""
    return "/%s:%s" % (frame[frame.rfind("(") + 1:frame.rfind(":")], frame.split(" (", 1)[0])


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


def start_emulator(twin, faults, bmc_map, pid):
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


def _cpu_s():
    """CPU seconds (user + system) of this process and of its children that have been waited for."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def stage_only(twin_path, bmc_map, workdir, limit):
    """``--stage``: the stage of TREE over the twin's first ``limit`` nodes; prints its figures as one JSON line."""
    from ansible_collections.symphony.cluster.plugins.module_utils._predeploy.stage import StageSettings, run_stage
    from ansible_collections.symphony.cluster.plugins.module_utils._core.sku import load_skus
    from ansible_collections.symphony.cluster.plugins.module_utils._core.twin import load_twin
    skus = load_skus(str(TREE / "skus"))  # the tree's own SKUs: a later SKU file may use keys its code lacks
    twin = load_twin(str(twin_path), skus.keys())
    nodes = {h: twin.nodes[h] for h in sorted(twin.nodes)[:limit]}
    workdir = pathlib.Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    ledger = workdir / "ledger.sqlite"
    for old in workdir.glob("ledger.sqlite*"):
        old.unlink()
    kwargs = {}
    if "processes" in StageSettings.__dataclass_fields__:
        # the modules' default (one per core), which the dataclass leaves to them
        from ansible_collections.symphony.cluster.plugins.module_utils._fleet.pool import default_processes
        kwargs["processes"] = int(PROCESSES) if PROCESSES else default_processes()
    settings = StageSettings(bmc_map=str(bmc_map), workers=WORKERS, optional=("lease_captured", "address_reserved"),
                             ledger=str(ledger), dispatch_dir=str(workdir / "dispatch"), **kwargs)
    cpu0, start = _cpu_s(), time.monotonic()
    out = run_stage(nodes, skus, settings)
    wall, cpu = time.monotonic() - start, _cpu_s() - cpu0
    print(json.dumps({"bmcs": len(nodes), "wall_s": wall, "cpu_s": cpu, "requests": out["requests"],
                      "summary": out["summary"], "processes": kwargs.get("processes")}))


def run_stage_process(twin_path, bmc_map, workdir, limit, tree=ROOT, profile=None):
    """Run ``--stage`` in a process of its own (optionally under py-spy); returns its figures (dict)."""
    cmd = [PYTHON, str(pathlib.Path(__file__).resolve()), "--stage", str(twin_path), str(bmc_map), str(workdir),
           str(limit)]
    if profile:
        cmd = [PY_SPY, "record", "--gil", "--subprocesses", "--rate", str(PROFILE_RATE_HZ), "--format", "raw",
               "--output", str(profile), "--"] + cmd
    env = dict(os.environ, BENCH_PD_TREE=str(tree))
    done = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit("stage run failed (rc %d, tree %s): %s" % (done.returncode, tree, done.stderr[-3000:]))
    figures = json.loads([line for line in done.stdout.splitlines() if line.startswith("{")][-1])
    if figures["summary"].get("pass") != limit:
        raise SystemExit("stage (tree %s) did not pass every clean BMC: %s" % (tree, figures["summary"]))
    return figures


def layer_of(stack):
    """The layer (``LAYERS`` name, else ``other``) of one py-spy raw stack (frames root;...;leaf)."""
    for frame in reversed(stack.split(";")):
        where = _frame_file(frame)
        for name, marks in LAYERS:
            if any("/" + mark in where for mark in marks):
                return name
    return "other"


def profile_layers(raw_path, bmcs, stage_cpu_s):
    """py-spy raw output -> ``{"ms_per_bmc": {layer: ms}, "share": {layer: fraction}, ...}``.

    Only the samples taken inside ``run_stage`` count (imports and twin loading are not the stage's); the
    shares are scaled to the stage's measured CPU per BMC (samples of threads waiting on the GIL would
    otherwise count as CPU).
    """
    counts = Counter()
    for line in pathlib.Path(raw_path).read_text().splitlines():
        stack, _sep, count = line.rpartition(" ")
        if "run_stage" not in stack and "/_fleet/batch.py" not in stack:
            continue
        counts[layer_of(stack)] += int(count)
    total = sum(counts.values()) or 1
    per_bmc_ms = stage_cpu_s * 1000.0 / bmcs
    return {"bmcs": bmcs, "samples": total, "rate_hz": PROFILE_RATE_HZ,
            "cpu_ms_per_bmc": round(per_bmc_ms, 2),
            "share": {k: round(v / total, 3) for k, v in counts.most_common()},
            "ms_per_bmc": {k: round(per_bmc_ms * v / total, 2) for k, v in counts.most_common()}}


def before_tree(commit):
    """A checkout of ``commit`` under build/bench (``git archive``), with its build/collections link."""
    tree = WORK / ("before-%s" % commit[:12])
    link = tree / "build" / "collections" / "ansible_collections" / "symphony" / "cluster"
    if not link.exists():
        shutil.rmtree(tree, ignore_errors=True)
        tree.mkdir(parents=True)
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", commit], stdout=subprocess.PIPE, check=True)
        subprocess.run(["tar", "-x", "-C", str(tree)], input=archive.stdout, check=True)
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(tree)
    return tree


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


def fleet(n, name):
    """Twin, faults and map paths of an ``n``-BMC bench fleet under WORK/name."""
    base = WORK / name
    base.mkdir(parents=True, exist_ok=True)
    twin_path, faults = base / "bench.twin.yml", base / "faults.yml"
    write_twin(twin_path, n)
    faults.write_text("faults:\n  '*':\n    latency_ms: %g\n" % LATENCY_MS)
    return twin_path, faults, base / "bmcs.json", base / "emulator.pid"


def main():
    WORK.mkdir(parents=True, exist_ok=True)
    twin_path, faults, bmc_map, pid = fleet(BMCS, "fleet")
    start_emulator(twin_path, faults, bmc_map, pid)
    result = {"bmcs": BMCS, "latency_ms": LATENCY_MS, "stage_workers": WORKERS, "baseline_forks": FORKS,
              "cpu_cores": len(os.sched_getaffinity(0))}
    try:
        emu_pid = int(pid.read_text().strip())
        emu_cpu0 = process_cpu_s(emu_pid)
        load0 = os.getloadavg()[0]
        now = run_stage_process(twin_path, bmc_map, WORK / "stage", BMCS)
        emu_cpu1 = process_cpu_s(emu_pid)
        requests_per_bmc = now["requests"] / BMCS
        floor_s = requests_per_bmc * LATENCY_MS / 1000.0 * BMCS / WORKERS
        result.update({
            "stage_wall_s": round(now["wall_s"], 2), "requests_per_bmc": round(requests_per_bmc, 1),
            "stage_processes": now.get("processes"),
            "network_floor_s": round(floor_s, 2), "floor_ratio": round(now["wall_s"] / floor_s, 2),
            "stage_controller_cpu_s": round(now["cpu_s"], 2),
            "cores_used": round(now["cpu_s"] / now["wall_s"], 2),
            "controller_cpu_ms_per_bmc": round(now["cpu_s"] * 1000.0 / BMCS, 2),
            # the emulator's CPU (same cores, not the controller's) and the machine's load while the stage ran
            "stage_emulator_cpu_s": round(emu_cpu1 - emu_cpu0, 2) if None not in (emu_cpu0, emu_cpu1) else None,
            "stage_load_average_1m": round(max(load0, os.getloadavg()[0]), 2)})
        if BEFORE_COMMIT:
            before = run_stage_process(twin_path, bmc_map, WORK / "stage-before", BMCS, tree=before_tree(BEFORE_COMMIT))
            result.update({"before_commit": BEFORE_COMMIT, "stage_wall_s_before": round(before["wall_s"], 2),
                           "controller_cpu_ms_per_bmc_before": round(before["cpu_s"] * 1000.0 / BMCS, 2),
                           "cpu_ratio_vs_before": round(now["cpu_s"] / before["cpu_s"], 3)})
        if PROFILE_BMCS and PY_SPY:
            raw = WORK / "profile.txt"
            limit = min(PROFILE_BMCS, BMCS)
            for name, tree in (("profile", ROOT), ("profile_before", before_tree(BEFORE_COMMIT) if BEFORE_COMMIT else None)):
                if tree is not None:
                    profiled = run_stage_process(twin_path, bmc_map, WORK / "stage-profile", limit, tree=tree, profile=raw)
                    result[name] = profile_layers(raw, limit, profiled["cpu_s"])
        elif PROFILE_BMCS:
            result["profile"] = "not_run: py-spy is not installed (test-requirements.txt)"
        if BASELINE_BMCS:
            hosts = sorted(json.loads(bmc_map.read_text())["nodes"])[:BASELINE_BMCS]
            base_wall = baseline(bmc_map, hosts) * BMCS / len(hosts)
            result.update({"baseline_wall_s": round(base_wall, 2),
                           "speedup_vs_redfish_info": round(base_wall / now["wall_s"], 2),
                           "baseline_bmcs_measured": len(hosts), "baseline_extrapolated": len(hosts) != BMCS})
    finally:
        stop_emulator(pid)
    if SCALE_10K:
        twin_10k, faults_10k, map_10k, pid_10k = fleet(10000, "fleet-10k")
        start_emulator(twin_10k, faults_10k, map_10k, pid_10k)
        try:
            big = run_stage_process(twin_10k, map_10k, WORK / "stage-10k", 10000)
        finally:
            stop_emulator(pid_10k)
        result.update({"stage_wall_s_10k": round(big["wall_s"], 2),
                       "scale_10k_ratio": round(big["wall_s"] / now["wall_s"], 2),
                       "controller_cpu_ms_per_bmc_10k": round(big["cpu_s"] * 1000.0 / 10000, 2)})
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "pre_deployment.json").write_text(json.dumps(result, sort_keys=True) + "\n")
    print(json.dumps(result, sort_keys=True))


if __name__ == "__main__":
    if sys.argv[1:2] == ["--stage"]:
        stage_only(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]))
    else:
        main()
