"""The chaos scenarios of issue 25, shared by tests/integration/test_chaos.py and tests/bench/bench_chaos.py.

Each scenario runs the pre-deployment stage engine (``run_stage``, the ``twin_audit`` module's code) over a small
emulated fleet (symphony_emulator, HTTPS with its generated CA, port 0: no lab lock) of the molecule
pre_deployment twin: ``pd-u02`` (clean), ``pd-u06`` (a missing GPU) and ``pd-u10`` (a downtrained PCIe link),
with emulator faults on top, then scores it against the fault-free baseline:

* ``false_pass``: a node whose gate passed where the baseline's did not (a bad node shipped);
* ``false_fail``: a node whose gate is ``fail`` where the baseline's passed (a healthy node failed; ``blocked``
  by a fault is not a fail: it names the fault and nothing goes to a technician for a controller fault);
* ``lost_rows``: a judged node without one ledger row per declared check of the run, or without its gate row;
* ``duplicate_writes``: more than one gate row per node per run, or any write request to a BMC (the stage
  only reads);
* ``secret_hits``: BMC passwords found in the stage's output, the ledger files, the dispatch list or the report;
* ``injected``: the faults the emulator injected (so a scenario whose faults never fired shows it); ``valid``
  (where a scenario can check it): the situation it stages happened (the kill landed mid-run, the BMC was
  still rebooting at the entry check, the concurrent runs overlapped).

Run as a script (``python chaos_scenarios.py run SPEC.json``) it is one stage run in its own process group, for
the ``kill -9`` and concurrent-run scenarios.
"""

from __future__ import annotations

import json
import os
import pathlib
import signal
import sqlite3
import subprocess
import sys
import threading
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path[:0] = [p for p in (str(ROOT / "build" / "collections"), str(ROOT / "tools")) if p not in sys.path]

from ansible_collections.symphony.cluster.plugins.module_utils._core.errors import SymphonyError  # noqa: E402
from ansible_collections.symphony.cluster.plugins.module_utils._core.ledger import open_ledger  # noqa: E402
from ansible_collections.symphony.cluster.plugins.module_utils._core.report import write_report  # noqa: E402
from ansible_collections.symphony.cluster.plugins.module_utils._core.sku import load_skus  # noqa: E402
from ansible_collections.symphony.cluster.plugins.module_utils._predeploy.graph import check_graph  # noqa: E402
from ansible_collections.symphony.cluster.plugins.module_utils._predeploy.stage import (  # noqa: E402
    StageSettings,
    run_stage,
)

SCENARIO = ROOT / "molecule" / "pre_deployment" / "data"
HOSTS = ["pd-u02", "pd-u06", "pd-u10"]
OPTIONAL = ("lease_captured", "address_reserved")
STAGE = "pre_deployment"


def _skus():
    return load_skus(str(ROOT / "skus"))


def _twin(skus):
    from symphony_emulator.fleet import load_twin  # the tools path is set above  # noqa: E402
    return load_twin(str(SCENARIO / "pre_deployment.twin.yml"), skus.keys())


def settings_for(work, bmc_map, **kw):
    """The stage settings of a scenario: small timeouts so a fault that persists ends in seconds."""
    base = {"bmc_map": str(bmc_map), "optional": OPTIONAL, "ledger": str(work / "ledger.sqlite"),
            "dispatch_dir": str(work / "dispatch"), "connect_timeout": 2.0, "read_timeout": 5.0,
            "bmc_reboot_timeout_s": 15.0}
    base.update(kw)
    return StageSettings(**base)


def run_once(spec):
    """One stage run from a JSON-able spec ``{work, bmc_map, run_id, settings}``; returns the stage's result."""
    skus = _skus()
    twin = _twin(skus)
    work = pathlib.Path(spec["work"])
    settings = settings_for(work, spec["bmc_map"], **spec.get("settings", {}))
    return run_stage({h: twin.nodes[h] for h in spec.get("hosts", HOSTS)}, skus, settings, run_id=spec["run_id"])


class Chaos:
    """One emulated fleet for a scenario, the baseline it is scored against, and the scoring."""

    def __init__(self, work, faults=None, baseline=None):
        from symphony_emulator import Fleet  # noqa: E402
        self.work = pathlib.Path(work)
        self.work.mkdir(parents=True, exist_ok=True)
        self.skus = _skus()
        self.twin = _twin(self.skus)
        self.map = self.work / "bmcs.json"
        self.fleet = Fleet(self.twin, str(ROOT / "skus"), defects=str(SCENARIO / "defects.yml"), faults=faults or {},
                           hosts=HOSTS, map_path=str(self.map), state_dir=str(self.work / "emu"))
        self.baseline = baseline
        self.outputs = []

    def __enter__(self):
        self.fleet.__enter__()
        return self

    def __exit__(self, *exc):
        self.fleet.__exit__(*exc)

    @property
    def passwords(self):
        return [n["password"] for n in json.loads(self.map.read_text())["nodes"].values()]

    def map_with(self, **changes):
        """A copy of the BMC map with top-level ``changes`` (``ca_bundle``) or ``url_host`` swapped in."""
        doc = json.loads(self.map.read_text())
        host = changes.pop("url_host", None)
        if host:
            for node in doc["nodes"].values():
                node["url"] = "https://%s:%s" % (host, node["port"])
        doc.update(changes)
        path = self.work / "bmcs-changed.json"
        path.write_text(json.dumps(doc))
        return path

    def run(self, run_id, bmc_map=None, **kw):
        out = run_stage({h: self.twin.nodes[h] for h in HOSTS}, self.skus,
                        settings_for(self.work, bmc_map or self.map, **kw), run_id=run_id)
        self.outputs.append(out)
        return out

    def reset_manager(self, host):
        """Manager.Reset of ``host``'s BMC (it reboots: connections reset, then 503, R-18)."""
        import requests  # noqa: E402
        node = self.fleet.nodes[host]
        mgr = requests.get(node.url + "/redfish/v1/Managers", auth=(node.username, node.password),
                           verify=self.fleet.ca_bundle, timeout=5).json()["Members"][0]["@odata.id"]
        requests.post(node.url + mgr + "/Actions/Manager.Reset", json={"ResetType": "GracefulRestart"},
                      auth=(node.username, node.password), verify=self.fleet.ca_bundle, timeout=5)
        self.fleet.reset_stats(host)

    # ------------------------------------------------------------------ scoring
    def score(self, name, runs, allow_blocked=True, expect=None):
        """The scenario's counts over ``runs`` (their run ids): see the module docstring.  ``expect``:
        ``{host: gate}`` the last run must show instead of the baseline's (a controller fault blocks all)."""
        ledger_path = self.work / "ledger.sqlite"
        con = sqlite3.connect(str(ledger_path))
        try:
            gates = con.execute("SELECT run_id, node, status FROM gates").fetchall()
            rows = con.execute("SELECT run_id, node, check_name FROM results").fetchall()
        finally:
            con.close()
        graph = check_graph(self.skus[self.twin.nodes[HOSTS[0]]["sku"]], "production", OPTIONAL)
        declared = set(graph.order())
        counts = {"scenario": name, "false_pass": 0, "false_fail": 0, "lost_rows": 0, "duplicate_writes": 0,
                  "secret_hits": 0, "notes": []}
        for run_id in runs:
            for host in HOSTS:
                mine = [s for r, n, s in gates if r == run_id and n == host]
                if len(mine) > 1:
                    counts["duplicate_writes"] += len(mine) - 1
                    counts["notes"].append("%s: %d gate rows in %s" % (host, len(mine), run_id))
                if not mine:
                    continue  # not judged by this run (another run held its lease): nothing to lose
                checks = {c for r, n, c in rows if r == run_id and n == host}
                if checks != declared:
                    counts["lost_rows"] += len(declared - checks)
                    counts["notes"].append("%s in %s: missing rows %s" % (host, run_id, sorted(declared - checks)))
                status, base = mine[0], self.baseline[host]
                if expect and host in expect:
                    base = expect[host]
                if status == "pass" and base != "pass":
                    counts["false_pass"] += 1
                    counts["notes"].append("%s passed in %s; baseline %s" % (host, run_id, base))
                if status == "fail" and base == "pass":
                    counts["false_fail"] += 1
                    counts["notes"].append("%s failed in %s; baseline pass" % (host, run_id))
                if status == "blocked" and not allow_blocked:
                    counts["false_fail"] += 1
                    counts["notes"].append("%s blocked in %s" % (host, run_id))
        counts["injected"] = 0
        for host in HOSTS:
            stats = self.fleet.stats(host)
            counts["injected"] += stats["injected_errors"] + stats["injected_resets"] + stats["injected_malformed"]
            writes = stats["writes"]
            if writes:
                counts["duplicate_writes"] += writes
                counts["notes"].append("%s got %d write requests from a read-only stage" % (host, writes))
        counts["secret_hits"] = self.secret_hits()
        return counts

    def secret_hits(self):
        """BMC passwords found in the stage outputs, the ledger, the dispatch list and the handoff report."""
        ledger = open_ledger(str(self.work / "ledger.sqlite"))
        try:
            write_report(ledger, str(self.work / "report"), {h: self.twin.nodes[h] for h in HOSTS})
        finally:
            ledger.close()
        blobs = [json.dumps(self.outputs, default=str).encode()]
        for sub in ("dispatch", "report"):
            blobs += [p.read_bytes() for p in (self.work / sub).rglob("*") if p.is_file()]
        blobs += [p.read_bytes() for p in self.work.glob("ledger.sqlite*")]
        blobs += [p.read_bytes() for p in self.work.glob("*.log")]
        return sum(blob.count(pw.encode()) for pw in self.passwords for blob in blobs)


def baseline(work):
    """``{host: gate}`` of a fault-free run (pd-u02 pass, pd-u06 and pd-u10 fail on their seeded defects)."""
    with Chaos(work, baseline={h: "?" for h in HOSTS}) as chaos:
        out = chaos.run("chaos-baseline")
    return {h: e["gate"] for h, e in out["hosts"].items()}


def spawn(chaos, run_id, log, **settings):
    """A stage run in its own process group (as Ansible's worker starts a module), writing ``log``."""
    spec = {"work": str(chaos.work), "bmc_map": str(chaos.map), "run_id": run_id, "settings": settings}
    path = chaos.work / ("%s.json" % run_id)
    path.write_text(json.dumps(spec))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    handle = open(chaos.work / log, "w")
    return subprocess.Popen([sys.executable, __file__, "run", str(path)], stdout=handle, stderr=subprocess.STDOUT,
                            env=env, start_new_session=True), handle


# ---------------------------------------------------------------------- the scenarios
def _faulted(name, faults, runs=1, **settings):
    def scenario(work, base):
        with Chaos(work, faults=faults, baseline=base) as chaos:
            ids = ["%s-%d" % (name, i) for i in range(runs)]
            for run_id in ids:
                chaos.run(run_id, **settings)
            return chaos.score(name, ids)
    return scenario


def _controller(name, map_change=None, **settings):
    """A controller-side fault: every node blocked with the controller's remedy, no dispatch row, no fail."""
    def scenario(work, base):
        with Chaos(work, baseline=base) as chaos:
            bmc_map = chaos.map_with(**map_change) if map_change else chaos.map
            try:
                out = chaos.run(name, bmc_map=bmc_map, **settings)
            except SymphonyError as exc:
                # one run-level error is the other right answer: nothing judged, nobody dispatched
                counts = chaos.score(name, [name])
                counts["notes"].append("run-level error: %s" % exc)
                counts["secret_hits"] += sum(str(exc).count(pw) for pw in chaos.passwords)
                return counts
            counts = chaos.score(name, [name], expect={h: "blocked" for h in HOSTS})
            for host, entry in out["hosts"].items():
                if entry["gate"] != "blocked":
                    counts["false_fail" if entry["gate"] == "fail" else "false_pass"] += 1
                    counts["notes"].append("%s: %s under a controller fault" % (host, entry["gate"]))
            if out["dispatch"]["rows"]:
                counts["false_fail"] += out["dispatch"]["rows"]
                counts["notes"].append("controller fault dispatched to technicians: %s" % out["dispatch"]["items"])
            return counts
    return scenario


def _scripted(name, path, kind, method="GET"):
    """One fault on one request path on every BMC (one reset on the login, one 500 on a SEL page)."""
    return _faulted(name, {"*": {"scripted": [{"method": method, "path": path, "kind": kind, "times": 1}]}})


def s_unverified_tls(work, base):
    with Chaos(work, baseline=base) as chaos:
        chaos.run("unverified", validate_certs=False)
        counts = chaos.score("validate_certs_false", ["unverified"])
        ledger = open_ledger(str(chaos.work / "ledger.sqlite"))
        try:
            unmarked = [r for r in ledger.current_results() if not (r.evidence or {}).get("tls_unverified")]
        finally:
            ledger.close()
        page = (chaos.work / "report" / "index.html").read_text(encoding="utf-8")
        if unmarked or "TLS unverified:" not in page:
            counts["lost_rows"] += len(unmarked) or 1
            counts["notes"].append("unverified-TLS not on every row / the report: %d rows" % len(unmarked))
        return counts


def s_reboot_before_run(work, base):
    # a killed run's reset left the BMC rebooting: the entry check waits for it (bmc_reboot_timeout_s)
    # longer than the retries (0.5 + 1 + 2 s of backoff), so only the entry wait bridges it
    with Chaos(work, faults={"*": {"bmc_reboot_s": 5.0, "bmc_warmup_s": 2.0}}, baseline=base) as chaos:
        chaos.reset_manager(HOSTS[0])
        # the BMC goes down 0.05 s after accepting the reset: start the run once it is down, or the service root
        # may still answer (the stage starts within milliseconds since issue 27) and the reboot land mid-read
        deadline = time.monotonic() + 10
        while chaos.fleet.state(HOSTS[0])["rebooting_for_s"] <= 0 and time.monotonic() < deadline:
            time.sleep(0.02)
        out = chaos.run("reboot-before")
        counts = chaos.score("bmc_reboot_before_run", ["reboot-before"], allow_blocked=False)
        counts["valid"] = any("still rebooting" in w for w in out["warnings"])
        return counts


def s_reboot_mid_read(work, base):
    """pd-u02's BMC answers the service root and the login, then resets every Systems request for longer than the
    retries (0.5 + 1 + 2 s), as one that went down mid-read does: before, inventory_read failed the healthy node;
    it is blocked (BMC unreachable) with the cause, never fail.  Scripted, so the timing of the run cannot matter."""
    faults = {HOSTS[0]: {"scripted": [{"method": "GET", "path": "/redfish/v1/Systems", "kind": "reset", "times": 1000}]}}
    with Chaos(work, faults=faults, baseline=base) as chaos:
        out = chaos.run("reboot-mid-read")
        counts = chaos.score("bmc_reboot_mid_read", ["reboot-mid-read"])
        entry = out["hosts"][HOSTS[0]]
        checks = {c["check"]: c for c in entry["checks"]}
        counts["valid"] = checks["service_root"]["status"] == "pass" and checks["login"]["status"] == "pass"
        if entry["gate"] != "blocked" or checks["inventory_read"]["status"] != "blocked":
            counts["false_fail"] += 1
            counts["notes"].append("%s: %s (%s)" % (HOSTS[0], entry["gate"], entry["reason"][:200]))
        return counts


def s_reboot_during_run(work, base):
    with Chaos(work, faults={"*": {"latency_ms": 60, "bmc_reboot_s": 1.5, "bmc_warmup_s": 0.5}},
               baseline=base) as chaos:
        timer = threading.Timer(0.4, chaos.reset_manager, (HOSTS[0],))
        timer.start()
        try:
            chaos.run("reboot-during")
        finally:
            timer.join()
        return chaos.score("bmc_reboot_during_run", ["reboot-during"])


def _leases(chaos, run_id):
    try:
        con = sqlite3.connect(str(chaos.work / "ledger.sqlite"), timeout=1)
        try:
            return con.execute("SELECT COUNT(*) FROM leases WHERE run_id = ?", (run_id,)).fetchone()[0]
        finally:
            con.close()
    except sqlite3.Error:
        return 0


def s_kill9_rerun(work, base):
    with Chaos(work, faults={"*": {"latency_ms": 300}}, baseline=base) as chaos:
        proc, handle = spawn(chaos, "killed", "killed.log")
        # kill it mid-run: once it holds its leases and is reading the BMCs
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None and not _leases(chaos, "killed"):
            time.sleep(0.1)
        time.sleep(0.5)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        handle.close()
        killed_mid_run = _leases(chaos, "killed") > 0   # the dead run's leases, still in the ledger
        out = chaos.run("rerun")
        counts = chaos.score("kill9_then_rerun", ["killed", "rerun"])
        counts["valid"] = killed_mid_run and _leases(chaos, "rerun") == 0
        # the rerun must judge every node (the dead holder's leases free at once) at its baseline verdict
        for host in HOSTS:
            if out["hosts"][host]["gate"] != base[host]:
                counts["false_fail"] += 1
                counts["notes"].append("rerun %s: %s (baseline %s)" % (host, out["hosts"][host]["gate"], base[host]))
        return counts


def s_playbook_dies(work, base):
    """The playbook's side dies, the module lives on (Ansible starts it in its own session): it starts no further
    node (``interrupted`` events), releases its leases, and a rerun judges every node at its baseline."""
    with Chaos(work, faults={"*": {"latency_ms": 150}}, baseline=base) as chaos:
        spec = {"work": str(chaos.work), "bmc_map": str(chaos.map), "run_id": "orphaned", "settings": {"workers": 1}}
        (chaos.work / "orphaned.json").write_text(json.dumps(spec))
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
        with open(chaos.work / "orphaned.log", "w") as handle:
            shell = subprocess.Popen(["/bin/sh", "-c", "%s %s run %s; true" % (sys.executable, __file__,
                                                                               chaos.work / "orphaned.json")],
                                     stdout=handle, stderr=subprocess.STDOUT, env=env, start_new_session=True)
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and not _leases(chaos, "orphaned"):
                time.sleep(0.1)
            time.sleep(0.5)
            os.kill(shell.pid, signal.SIGKILL)
            shell.wait()
            while time.monotonic() < deadline and _leases(chaos, "orphaned"):
                time.sleep(0.1)   # the orphan finishes the node it is on, then stops and releases
        ledger = open_ledger(str(chaos.work / "ledger.sqlite"))
        try:
            interrupted = [e["node"] for e in ledger.events(kind="interrupted") if e["data"]["run_id"] == "orphaned"]
        finally:
            ledger.close()
        out = chaos.run("after-orphan")
        counts = chaos.score("playbook_dies", ["orphaned", "after-orphan"])
        counts["valid"] = bool(interrupted) and _leases(chaos, "orphaned") == 0
        for host in HOSTS:
            if out["hosts"][host]["gate"] != base[host]:
                counts["false_fail"] += 1
                counts["notes"].append("rerun %s: %s (baseline %s)" % (host, out["hosts"][host]["gate"], base[host]))
        return counts


def s_concurrent(work, base):
    with Chaos(work, faults={"*": {"latency_ms": 40}}, baseline=base) as chaos:
        # lease_wait_s 0: a run that finds a node leased stops for it at once (with the default wait the eight
        # runs would take turns, and the scenario is about runs that overlap)
        procs = [spawn(chaos, "conc-%d" % i, "conc-%d.log" % i, lease_wait_s=0) for i in range(8)]
        for proc, handle in procs:
            proc.wait(timeout=300)
            handle.close()
        ids = ["conc-%d" % i for i in range(8)]
        counts = chaos.score("concurrent_8", ids)
        # the runs overlapped: some of them found the nodes leased and stopped for them
        counts["valid"] = any("leased" in (chaos.work / ("conc-%d.log" % i)).read_text() for i in range(8))
        con = sqlite3.connect(str(chaos.work / "ledger.sqlite"))
        try:
            judged = dict(con.execute("SELECT node, COUNT(*) FROM gates GROUP BY node").fetchall())
        finally:
            con.close()
        # every node judged by some run; a run that found a node leased stops for it, never judges it too
        for host in HOSTS:
            if not judged.get(host):
                counts["lost_rows"] += 1
                counts["notes"].append("%s judged by none of the 8 runs" % host)
        return counts


SCENARIOS = {
    "5xx_30pct": _faulted("5xx_30pct", {"*": {"error_rate": 0.3}}),
    "half_bodies_20pct": _faulted("half_bodies_20pct", {"*": {"malformed_json_rate": 0.2}}),
    "resets_20pct": _faulted("resets_20pct", {"*": {"reset_rate": 0.2}}),
    "mixed_10pct": _faulted("mixed_10pct", {"*": {"error_rate": 0.1, "reset_rate": 0.1, "malformed_json_rate": 0.1}}),
    "slow_bmc": _faulted("slow_bmc", {"*": {"latency_ms": 250, "latency_jitter_ms": 250}}),
    "one_reset_on_login": _scripted("one_reset_on_login", "/redfish/v1/SessionService/Sessions", "reset", "POST"),
    "one_500_on_login": _scripted("one_500_on_login", "/redfish/v1/SessionService/Sessions", "500", "POST"),
    "one_500_on_sel_page": _scripted("one_500_on_sel_page", "/redfish/v1/Managers/1/LogServices/SEL/Entries", "500"),
    "one_503_on_service_root": _scripted("one_503_on_service_root", "/redfish/v1", "503"),
    "persistent_resets_one_bmc": _faulted("persistent_resets_one_bmc", {"pd-u02": {"reset_rate": 1.0}},
                                          bmc_reboot_timeout_s=2.0),
    "tls_without_ca": _controller("tls_without_ca", {"ca_bundle": None}),
    "missing_ca_file": _controller("missing_ca_file", {"ca_bundle": "/nonexistent/symphony-chaos/ca.pem"}),
    "dns_failure": _controller("dns_failure", {"url_host": "bmc.symphony-chaos.invalid"}),
    "validate_certs_false": s_unverified_tls,
    "bmc_reboot_before_run": s_reboot_before_run,
    "bmc_reboot_during_run": s_reboot_during_run,
    "bmc_reboot_mid_read": s_reboot_mid_read,
    "kill9_then_rerun": s_kill9_rerun,
    "playbook_dies": s_playbook_dies,
    "concurrent_8": s_concurrent,
}


def run_all(work, names=None):
    """Run the scenarios (all, or ``names``) under ``work``; returns ``(baseline, [counts])``."""
    work = pathlib.Path(work)
    base = baseline(work / "baseline")
    return base, [SCENARIOS[name](work / name, base) for name in (names or SCENARIOS)]


if __name__ == "__main__" and len(sys.argv) == 3 and sys.argv[1] == "run":
    print(json.dumps(run_once(json.loads(pathlib.Path(sys.argv[2]).read_text())), default=str))
