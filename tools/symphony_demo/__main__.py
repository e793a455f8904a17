"""``make demo``: the main job, end to end, on the emulated fleet and the lab hosts.

1. start (or reuse) the Redfish fleet emulator for ``inventories/demo/demo.twin.yml`` with the seeded
   defects in ``inventories/demo/defects.yml`` (HTTPS with a generated CA, verified by the client);
2. bring up (or reuse) the lab hosts: each node's in-band side is the lab host at its twin in-band address;
3. run ``playbooks/site.yml`` through all four stages with the twin inventory plugin, with the lab's calibration
   (``build/lab/calibration.json``: the lab profile's floors are fractions of it) and the fabric floor derived
   from it and the seeded slow link (``build/demo/calibrated-vars.json``, given as extra vars);
4. print a per-node table of gates, write ``build/demo/summary.json`` and the handoff report.

The emulator and the lab stay up afterwards so a second ``make demo`` reuses them: provisioning then finds
every node at its manifest and changes nothing.  ``python -m symphony_demo down`` stops both.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "build" / "demo"
INVENTORY = ROOT / "inventories" / "demo" / "demo.twin.yml"
DEFECTS = ROOT / "inventories" / "demo" / "defects.yml"
LAB_DEFECTS = ROOT / "inventories" / "demo" / "lab-defects.yml"
IMAGES = ROOT / "build" / "demo" / "images"
LAB_GPUS = ROOT / "build" / "demo" / "lab_gpus.json"
PIDFILE = DEMO / "emulator.pid"
BMC_MAP = DEMO / "bmcs.json"
LEDGER = DEMO / "ledger.sqlite"
REPORT = DEMO / "report"
SUMMARY = DEMO / "summary.json"
LOG = DEMO / "ansible.log"
CALIBRATED_VARS = DEMO / "calibrated-vars.json"
FLEET_AUDIT_VARS = DEMO / "fleet-audit-vars.json"
KMSG = DEMO / "kmsg"

# Lines of ansible-playbook output worth showing live; the whole log goes to build/demo/ansible.log.
_PROGRESS = re.compile(r"^(PLAY \[|fatal:|failed:|PLAY RECAP|\S+\s+: ok=|\s+msg: )")


class DemoError(Exception):
    """A demo input or step that is wrong; printed as one line, no traceback."""


def _console():
    from rich.console import Console
    # Wide enough for the gate table when the output is a pipe or a CI log (rich falls back to 80 columns).
    return Console(highlight=False, width=None if sys.stdout.isatty() else 200)


def _emulator_running():
    try:
        pid = int(PIDFILE.read_text().strip())
        os.kill(pid, 0)
    except (OSError, ValueError):
        return False
    return BMC_MAP.exists()


def start_emulator(console):
    """Start the emulated fleet in the background unless it already runs."""
    if _emulator_running():
        console.print("[dim]emulated fleet already running (pid file %s): reusing it[/]" % PIDFILE)
        return
    DEMO.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "symphony_emulator", "serve", "--twin", str(INVENTORY),
                    "--defects", str(DEFECTS), "--bind-base", "127.31.0.1", "--port", "8443",
                    "--credentials", "demo", "--map", str(BMC_MAP), "--state-dir", str(DEMO / "emulator"),
                    "--background", "--pidfile", str(PIDFILE)], check=True, cwd=ROOT)


def stop_emulator():
    if PIDFILE.exists():
        subprocess.run([sys.executable, "-m", "symphony_emulator", "stop", "--pidfile", str(PIDFILE)],
                       check=False, cwd=ROOT)


def _twin():
    from ansible_collections.symphony.cluster.plugins.module_utils._core.twin import load_twin
    return load_twin(str(INVENTORY))


def start_lab(console, n):
    from symphony_lab import Lab
    lab, started = Lab.ensure(n, root=str(ROOT / "build" / "lab"))
    console.print("lab hosts %s (%s)" % (", ".join(h["name"] for h in lab.hosts[:n]),
                                         "started" if started else "reused"))
    return lab


def write_images(twin):
    """The demo's firmware images: the bytes whose sha256 each manifest names (the emulator's image rule)."""
    from urllib.parse import urlsplit
    from ansible_collections.symphony.cluster.plugins.module_utils._core.sku import load_skus
    from symphony_emulator import demo_image_bytes
    IMAGES.mkdir(parents=True, exist_ok=True)
    skus = {n["sku"] for n in twin.nodes.values()}
    for sku, manifest in load_skus(twin.sku_dir).items():
        if sku not in skus:
            continue
        for comp in manifest["firmware"]:
            if comp.get("image") and comp.get("target"):
                path = IMAGES / os.path.basename(urlsplit(comp["image"]["uri"]).path)
                path.write_bytes(demo_image_bytes(sku, comp["id"], comp["target"]))


def apply_lab_defects(console, lab, twin):
    """The in-band defects: a slow path between two nodes' lab hosts; the lab's GPU readings, all healthy.

    The lab has no GPUs: the sampler inside the validation job reads the lab's GPU source (named as such in the
    evidence).  Returns the hot GPU to inject once the job runs (``inject_hot_gpu_while_validating``), or None.
    """
    import yaml
    spec = yaml.safe_load(LAB_DEFECTS.read_text())
    by_address = {h["address"]: h["name"] for h in lab.hosts}
    lab_of = {host: by_address.get(node["inband_address"]) for host, node in twin.nodes.items()}
    link = spec.get("degraded_link")
    for node in list(link["nodes"] if link else []) + ([spec["hot_gpu"]["node"]] if spec.get("hot_gpu") else []):
        if not lab_of.get(node):
            raise DemoError("%s: %r is not a node of the demo twin with a lab host (%s)" % (
                os.path.relpath(LAB_DEFECTS, ROOT), node, ", ".join(sorted(lab_of))))
    lab.restore()
    if link:
        a, b = (lab_of[n] for n in link["nodes"])
        lab.degrade_link(a, b, link["rate_mbit"])
        console.print("lab: path %s (%s) <-> %s (%s) limited to %d Mbit/s" % (
            link["nodes"][0], a, link["nodes"][1], b, link["rate_mbit"]))
    swapped = (spec.get("swapped_cables") or {}).get("node")
    if swapped and not lab_of.get(swapped):
        raise DemoError("%s: swapped_cables node %r is not a node of the demo twin with a lab host" % (
            os.path.relpath(LAB_DEFECTS, ROOT), swapped))
    # the lab's LLDP fabric, cabled afresh each run (a reused lab may hold another run's wiring)
    lab.lldp_down()
    lab.lldp_up(leaves=2, swap=[lab_of[swapped]] if swapped else [])
    if swapped:
        console.print("lab: %s (%s) has its rail0 and rail1 cables swapped (leaf1 <-> leaf2)" % (
            swapped, lab_of[swapped]))
    lab_hosts = {lab_of[host]: host for host in twin.nodes if lab_of.get(host)}
    write_lab_gpus(lab_hosts)
    hot = spec.get("hot_gpu") or {}
    return dict(hot, lab_host=lab_of[hot["node"]], lab_hosts=lab_hosts) if hot else None


def write_lab_gpus(lab_hosts, hot=None):
    """The lab's GPU readings, which the job's sampler (gpu_sampler.py --lab-source) reads each second: every lab
    host's 8 GPUs near their peers, and ``hot`` (``{lab_host, gpu, temp_c}``) once injected.  Replaced
    atomically, so a sampler never reads half a file."""
    rows = {}
    for lab_host in lab_hosts:
        rows[lab_host] = [{"gpu": gpu, "temp_c": 55.0 + 0.4 * gpu, "power_w": 690.0 + gpu, "sm_clock_mhz": 1980.0}
                          for gpu in range(8)]
    if hot:
        rows[hot["lab_host"]][hot["gpu"]].update(temp_c=float(hot["temp_c"]), throttle=["sw_thermal_slowdown"])
    tmp = LAB_GPUS.with_suffix(".tmp")
    tmp.write_text(json.dumps(rows, indent=1, sort_keys=True) + "\n")
    os.replace(tmp, LAB_GPUS)


def inject_hot_gpu_while_validating(console, lab, hot, stop):
    """Wait for the first cluster_validation job to run, then inject the hot GPU into the lab's GPU readings:
    the samples taken during the job show it, nothing was written before the job started."""
    while not stop.wait(1.0):
        out = subprocess.run(["squeue", "-h", "-t", "RUNNING", "-o", "%j %N"], env=lab.slurm_env,
                             capture_output=True, text=True, timeout=15, check=False).stdout
        running = [line for line in out.splitlines() if line.startswith("cluster-validation-")]
        if running:
            write_lab_gpus(hot["lab_hosts"], hot)
            console.print("telemetry: injected %s (%s) GPU%d at %.0f °C into the lab GPU source while %s runs" % (
                hot["node"], hot["lab_host"], hot["gpu"], hot["temp_c"], running[0].split()[0]))
            return


def write_calibrated_vars(console, lab, lab_hosts=None):
    """Extra vars for the run: the lab's calibration (burn-in resolves the lab profile's relative floors against
    it), the fabric floor between the seeded link and a healthy pair (``symphony_lab`` ``pair_floor_gbps``) and
    ``lab_hosts`` (``{node: lab host}``) as ``demo_lab_hosts``.
    DemoError when the lab has no calibration or it cannot tell the seeded link from a healthy pair."""
    import yaml
    from symphony_lab import HEALTHY_PAIR_FRACTION, pair_floor_gbps
    calibration = lab.calibration
    figure = (calibration or {}).get("figures", {}).get("iperf3.tcp_gbps")
    if not figure:
        raise DemoError("the lab has no iperf3 calibration (%s); run python -m symphony_lab calibrate"
                        % os.path.relpath(lab.calibration_file, ROOT))
    link = yaml.safe_load(LAB_DEFECTS.read_text()).get("degraded_link")
    extra = {"burn_in_calibration": calibration}
    if lab_hosts:
        # each lab host's lldpd has its own control socket (the namespaces share /run): the cabling check asks it
        extra["demo_lab_hosts"] = dict(lab_hosts)
    if link:
        floor = pair_floor_gbps(calibration, link["rate_mbit"])
        # The geometric mean puts the floor as far above the seeded link as below a healthy pair's worst:
        # less than 1.2 times on either side and a healthy pair could look bad (or the seeded link good).
        if floor < 1.2 * link["rate_mbit"] / 1000.0:
            raise DemoError("this machine's lab pairs (%s Gbit/s alone, %s) are too slow to tell from the seeded "
                            "%s Mbit/s link; lower rate_mbit in %s" % (figure["value"], calibration["measured"],
                                                                       link["rate_mbit"],
                                                                       os.path.relpath(LAB_DEFECTS, ROOT)))
        extra["burn_in_fabric_floor"] = floor
        console.print("fabric floor %.3f Gbit/s: between the seeded %s Mbit/s link and %.2f Gbit/s (a tenth of "
                      "one lab pair alone, calibrated %s)" % (floor, link["rate_mbit"],
                                                             figure["value"] * HEALTHY_PAIR_FRACTION,
                                                             calibration["measured"]))
    CALIBRATED_VARS.write_text(json.dumps(extra, indent=1, sort_keys=True, ensure_ascii=False) + "\n")
    return CALIBRATED_VARS


def run_site(console, extra_args):
    return run_playbook(console, "site.yml", [CALIBRATED_VARS], extra_args, LOG)


def run_playbook(console, playbook, var_files, extra_args, log_path, append=False, inventory=INVENTORY,
                 ledger=LEDGER):
    """ansible-playbook playbooks/<playbook> on the demo inventory (or ``inventory``, its ``ledger``) with
    ``var_files`` as extra vars, its output in ``log_path`` (appended with ``append``) and its progress lines on the
    console; returns its exit status."""
    env = dict(os.environ, SYMPHONY_LEDGER=str(ledger), ANSIBLE_FORCE_COLOR="0",
               ANSIBLE_LOG_PATH="", ANSIBLE_NOCOLOR="1")
    cmd = [str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(inventory),
           str(ROOT / "playbooks" / playbook)]
    for path in var_files:
        cmd += ["-e", "@%s" % path]
    cmd += extra_args
    console.print("[bold]$ %s[/]" % " ".join(os.path.relpath(c, ROOT) if c.startswith(str(ROOT)) else c
                                              for c in cmd))
    # line-buffered: after a kill the log ends where the console did
    with open(log_path, "a" if append else "w", encoding="utf-8", buffering=1) as log:
        proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, bufsize=1)
        for line in proc.stdout:
            log.write(line)
            if _PROGRESS.match(line):
                console.print(line.rstrip(), markup=False, overflow="ellipsis", no_wrap=True)
        return proc.wait()


def run_vm(console, count):
    """The VM-backed nodes (symphony_demo.vm): provisioned for real after the main job; ``(rc, summary)``."""
    from symphony_demo import vm
    if not 0 < count <= 2:
        raise DemoError("--vm-nodes takes 1 or 2 (inventories/demo-vm has two nodes), not %d" % count)
    missing = vm.qemu_missing()
    if missing:
        raise DemoError("VM-backed nodes need %s: make runtime installs them (or run without --vm-nodes)"
                        % ", ".join(missing))
    return vm.run_vm_nodes(console, run_playbook, count)


def prepare_fleet_audit(lab_hosts):
    """Each lab host's own kernel-log source for the fleet audit (network namespaces share one kernel): a file in
    /dev/kmsg's record format under build/demo/kmsg, started with a boot record where it is missing."""
    from ansible_collections.symphony.cluster.plugins.module_utils._fleet_audit.exercise import kmsg_record
    KMSG.mkdir(parents=True, exist_ok=True)
    for lab_host in sorted(set(lab_hosts.values())):
        path = KMSG / ("%s.kmsg" % lab_host)
        if not path.exists():
            path.write_text(kmsg_record(0, 1000, "Linux version (%s, symphony lab host)" % lab_host))


def fleet_audit_pass(console, spec):
    """Stage 5 after handoff, as a schedule would run it: a first audit of the handed-off nodes sets where each
    one's SEL and kernel log stand; then the emulator flashes one node's BMC firmware out of band
    (``fleet_audit.drift`` of lab-defects.yml), and the next audit injects one XID on another (``fleet_audit.xid``:
    the exercise, in that lab host's kernel-log file) and must find both.  Read-only but for the audit's own gate.
    Returns ansible-playbook's exit status (2 when a node's fleet_audit gate failed: the demo working)."""
    import requests
    FLEET_AUDIT_VARS.write_text(json.dumps({"fleet_audit_exercise_node": ""}) + "\n")
    rc = run_playbook(console, "fleet_audit.yml", [CALIBRATED_VARS, FLEET_AUDIT_VARS], [], LOG, append=True)
    if rc not in (0, 2):
        return rc
    drift = (spec or {}).get("drift") or {}
    if drift:
        bmc_map = json.loads(BMC_MAP.read_text())
        reply = requests.put(bmc_map["nodes"][drift["node"]]["url"] + "/_emulator/firmware",
                             json={"component": drift["component"], "version": drift["version"]},
                             verify=bmc_map.get("ca_bundle") or True, timeout=10)
        if reply.status_code != 200:
            raise DemoError("emulator: could not set %s's %s firmware: %s" % (drift["node"], drift["component"],
                                                                           reply.text[:200]))
        console.print("emulator: %s's %s firmware flashed to %s out of band (drift for the fleet audit)" % (
            drift["node"], drift["component"], drift["version"]))
    xid = (spec or {}).get("xid") or {}
    FLEET_AUDIT_VARS.write_text(json.dumps({"fleet_audit_exercise_node": xid.get("node", ""),
                                            "fleet_audit_exercise_xid": xid.get("xid", 79)}, indent=1) + "\n")
    rc = run_playbook(console, "fleet_audit.yml", [CALIBRATED_VARS, FLEET_AUDIT_VARS], [], LOG, append=True)
    if rc not in (0, 2) or not xid.get("node"):
        return rc
    # the rest of the exercise, on the XID node alone: drain + spare, quick re-burn-in, return to service
    from symphony_demo.exercise import return_to_service
    back = return_to_service(console, xid["node"], run_playbook, [CALIBRATED_VARS, FLEET_AUDIT_VARS], LOG)
    return back if back not in (0, 2) else rc


def summarise(console, wall_s, rc, exercise_node=None):
    from ansible_collections.symphony.cluster.plugins.module_utils._core.ledger import open_ledger
    from ansible_collections.symphony.cluster.plugins.module_utils._core.report import write_report
    from ansible_collections.symphony.cluster.plugins.module_utils._core.gate import STAGES
    from ansible_collections.symphony.cluster.plugins.module_utils._core.inventory import promoted_spares
    from rich.table import Table

    twin = _twin()
    ledger = open_ledger(str(LEDGER))
    gates = ledger.current_gates()
    # spares in service now, as the inventory reads them: a spare_returned after its promotion puts it back
    promoted = promoted_spares(ledger)
    table = Table(title="symphony.cluster demo: gates per node")
    for col in ("node", "rack", "U", "spare", "1 pre_deploy", "2 provision", "3 burn_in", "4 validation",
                "5 fleet_audit"):
        table.add_column(col, no_wrap=True)
    table.add_column("reason (first failing check; full text in the report)", overflow="fold")
    colours = {"pass": "green", "fail": "red", "blocked": "yellow", "not_run": "bright_black"}
    nodes = {}
    for host, node in twin.nodes.items():
        node_gates = gates.get(host, {})
        stage, gate = ledger.node_position(host)
        reason = node_gates[stage].reason if stage else "not audited"
        nodes[host] = {"last_stage": stage, "gate": gate, "reason": reason,
                       "gates": {s: v.status for s, v in node_gates.items()}}
        cells = []
        for s in STAGES:
            st = node_gates[s].status if s in node_gates else "—"
            cells.append("[%s]%s[/]" % (colours.get(st, "white"), st))
        spare = ("in for %s" % promoted[host]) if host in promoted else ("yes" if node["spare"] else "")
        table.add_row(host, node["rack"], str(node["u"]), spare, *cells,
                      reason if gate != "pass" else "")
    console.print(table)
    latest = {}  # the last verdict per link: the ledger keeps every run's
    for event in ledger.events(kind="fabric_link"):
        data = event["data"] or {}
        if data.get("link"):
            latest[data["link"]] = data
    for link, data in sorted(latest.items()):
        if data.get("verdict") == "bad":
            values = ", ".join("%s %s" % (t.get("value"), t.get("unit")) for t in data.get("tests", []))
            console.print("[yellow]bad fabric link[/] %s between %s (measured %s): on the dispatch list" % (
                link, " and ".join(data["info"]["nodes"]), values))
    written = write_report(ledger, str(REPORT), twin.nodes)
    summary = {"wall_s": round(wall_s, 1), "ansible_rc": rc, "nodes": nodes,
               "report": os.path.relpath(written["paths"]["html"], ROOT), "ledger": os.path.relpath(LEDGER, ROOT)}
    if exercise_node:
        from symphony_demo.exercise import exercise_timings, timing_cells
        timings = exercise_timings(ledger, exercise_node)
        summary["fleet_audit_exercise"] = timings
        exercise = Table(title="fleet_audit exercise: seconds after the injected XID (from the ledger)")
        for col in ("node", "detect", "drain", "replace", "return", "spare"):
            exercise.add_column(col, no_wrap=True)
        exercise.add_row(exercise_node, *timing_cells(timings), timings["spare"] or "—")
        console.print(exercise)
    SUMMARY.write_text(json.dumps(summary, indent=1, sort_keys=True) + "\n")
    console.print("summary: %s   report: %s   ansible log: %s   (%.0f s)" % (
        os.path.relpath(SUMMARY, ROOT), summary["report"], os.path.relpath(LOG, ROOT), wall_s))
    return summary


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m symphony_demo", description=__doc__.splitlines()[0])
    parser.add_argument("command", nargs="?", default="run", choices=["run", "down", "vm"],
                        help="run: the main job; vm: only the VM-backed nodes (--vm-nodes, default 2); down: stop all")
    parser.add_argument("--fresh", action="store_true", help="restart the emulator and start a new ledger")
    parser.add_argument("--vm-nodes", type=int, default=0, metavar="N",
                        help="also provision N (0-2) VM-backed nodes for real: QEMU guests booting the built runtime "
                             "and getting the built OS image on their disks (make demo passes 2)")
    parser.add_argument("ansible_args", nargs=argparse.REMAINDER, help="extra ansible-playbook arguments")
    args = parser.parse_args(argv)
    console = _console()
    if args.command == "down":
        console.print("emulator: %s" % ("stopping" if PIDFILE.exists() else "not running"))
        stop_emulator()
        from symphony_lab import Lab
        Lab(root=str(ROOT / "build" / "lab")).down()
        console.print("lab: down (namespaces, bridge, sshd and Slurm of %s removed)" % os.path.relpath(
            ROOT / "build" / "lab", ROOT))
        return 0
    if args.command == "vm":
        vm_rc, vm_summary = run_vm(console, args.vm_nodes or 2)
        return 0 if vm_rc == 0 and all(n["gate"] == "pass" for n in vm_summary["nodes"].values()) else 1
    start = time.monotonic()
    DEMO.mkdir(parents=True, exist_ok=True)
    if args.fresh:
        stop_emulator()
        for path in (LEDGER, Path(str(LEDGER) + "-wal"), Path(str(LEDGER) + "-shm")):
            if path.exists():
                path.unlink()
    twin = _twin()
    console.rule("symphony.cluster demo: %d nodes (%d spares) from %s" % (
        len(twin.nodes), len(twin.spares()), os.path.relpath(INVENTORY, ROOT)))
    write_images(twin)
    start_emulator(console)
    lab = start_lab(console, len(twin.nodes))
    if args.fresh:
        # A fresh rehearsal starts from an idle cluster: nodes an earlier run drained go back into service
        # (a rerun without --fresh keeps them drained, as an operator's cluster would).
        for node, state in sorted(lab.node_states().items()):
            if state.startswith("drain"):
                lab.resume(node)
                console.print("slurm: resumed %s (drained by an earlier run)" % node)
    hot = apply_lab_defects(console, lab, twin)
    by_address = {h["address"]: h["name"] for h in lab.hosts}
    lab_hosts = {host: by_address[node["inband_address"]] for host, node in twin.nodes.items()
                 if node["inband_address"] in by_address}
    write_calibrated_vars(console, lab, lab_hosts)
    prepare_fleet_audit(lab_hosts)
    stop = threading.Event()
    injector = threading.Thread(target=inject_hot_gpu_while_validating, args=(console, lab, hot, stop), daemon=True)
    if hot:
        injector.start()
    try:
        rc = run_site(console, args.ansible_args)
    finally:
        stop.set()
    import yaml
    audit_spec = yaml.safe_load(LAB_DEFECTS.read_text()).get("fleet_audit")
    if audit_spec and rc in (0, 2) and not args.ansible_args:
        # stage 5 after handoff: one pass over the handed-off nodes, with a drift and an XID to find
        audit_rc = fleet_audit_pass(console, audit_spec)
        if audit_rc not in (0, 2):
            rc = audit_rc
    exercise_node = ((audit_spec or {}).get("xid") or {}).get("node") if audit_spec and not args.ansible_args \
        else None
    summary = summarise(console, time.monotonic() - start, rc, exercise_node)
    if args.vm_nodes and not args.ansible_args:
        vm_rc, vm_summary = run_vm(console, args.vm_nodes)
        summary["vm_nodes"] = vm_summary
        SUMMARY.write_text(json.dumps(summary, indent=1, sort_keys=True) + "\n")
        broken = sorted(h for h, n in vm_summary["nodes"].items() if n["gate"] != "pass")
        if vm_rc != 0 or broken:
            console.print("[red]demo failed: the VM-backed nodes' provisioning exited %d; not passed: %s; see %s[/]"
                          % (vm_rc, ", ".join(broken) or "none", os.path.relpath(DEMO / "vm" / "ansible.log", ROOT)))
            return 1
    # ansible-playbook exits 2 when some hosts failed their gate: that is the demo working. Anything else
    # (syntax error, unreachable controller, a crash) or a node no stage looked at is a broken demo.
    unaudited = [h for h, n in summary["nodes"].items() if n["last_stage"] is None]
    if rc not in (0, 2) or unaudited:
        console.print("[red]demo failed: ansible-playbook exit %d; nodes never audited: %s; see %s[/]" % (
            rc, ", ".join(unaudited) or "none", os.path.relpath(LOG, ROOT)))
        return 1
    return 0


def _main():
    from ansible_collections.symphony.cluster.plugins.module_utils._core.errors import SymphonyError
    try:
        return main()
    except (DemoError, SymphonyError) as exc:
        print("demo: %s" % exc, file=sys.stderr)
    except subprocess.CalledProcessError as exc:
        print("demo: %s exited %d (its output is above)" % (" ".join(map(str, exc.cmd[:4])), exc.returncode),
              file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(_main())
