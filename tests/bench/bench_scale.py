"""Benchmark: beyond one controller (issue 19).  Writes build/bench/scale.json.

* Ledger write throughput, rows/s, SQLite and PostgreSQL, 8 writer processes at once (what 8 AWX slices or
  controller processes do): each writer appends BENCH_SCALE_BATCHES batches of 12 check results + 1 gate, as one
  node's stage result; keys ``ledger_rows_per_s_sqlite``, ``ledger_rows_per_s_postgresql`` (server defaults: every
  commit flushed) and ``ledger_rows_per_s_postgresql_async_commit`` (``synchronous_commit=off``, the durability of
  SQLite's WAL + synchronous=NORMAL).  PostgreSQL is the throw-away server of tools/symphony_awx/pg.py on this
  machine (TLS over 127.0.0.1, fsync on).
* With ``--fleet N`` (or BENCH_SCALE_FLEET=N): pre_deployment over N emulated BMCs at BENCH_PD_LATENCY_MS (100)
  per request, through playbooks/pre_deployment.yml, once as one ansible-runner job and once as
  BENCH_SCALE_SLICES (4) slices, both on PostgreSQL: ``wall_s_one``, ``wall_s_sliced``, ``sliced_speedup``
  (one / sliced).  Off by default: N = 10,000 takes this 2-core machine many minutes.
"""

import argparse
import json
import multiprocessing
import os
import pathlib
import shutil
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
OUT = ROOT / "build" / "bench"
WORK = OUT / "scale"
sys.path[:0] = [str(ROOT / "build" / "collections"), str(ROOT / "tools"), str(ROOT / "tests" / "bench")]

from ansible_collections.symphony.cluster.plugins.module_utils._core.gate import CheckResult, GateVerdict  # noqa: E402
from ansible_collections.symphony.cluster.plugins.module_utils._core.ledger import open_ledger  # noqa: E402

import bench_pre_deployment as pd  # noqa: E402  (its fleet twin writer and emulator start/stop)
from symphony_awx.pg import PgServer  # noqa: E402
from symphony_awx.slice import run_sliced  # noqa: E402

WRITERS = 8
CHECKS = 12
BATCHES = int(os.environ.get("BENCH_SCALE_BATCHES", "200"))
SLICES = int(os.environ.get("BENCH_SCALE_SLICES", "4"))
LATENCY_MS = float(os.environ.get("BENCH_PD_LATENCY_MS", "100"))


def _writer(location, writer, start):
    ledger = open_ledger(location)
    start.wait()
    for batch in range(BATCHES):
        node = "bench-%d-%04d" % (writer, batch)
        ledger.record_results([CheckResult(node=node, stage="pre_deployment", check="check_%02d" % c, status="pass",
                                           run_id="bench-%d" % writer, observed={"value": c, "pad": "x" * 200})
                               for c in range(CHECKS)])
        ledger.record_gate(GateVerdict(node, "pre_deployment", "pass", "all required checks passed"), "bench-%d" % writer)
    ledger.close()


def write_throughput(location):
    """Rows per second (results + gates) of 8 processes appending at once to ``location``."""
    open_ledger(location).close()  # created and migrated before the clock starts
    ctx = multiprocessing.get_context("fork")
    start = ctx.Event()
    procs = [ctx.Process(target=_writer, args=(location, w, start)) for w in range(WRITERS)]
    for proc in procs:
        proc.start()
    time.sleep(1.0)  # every writer connected
    began = time.monotonic()
    start.set()
    for proc in procs:
        proc.join()
    elapsed = time.monotonic() - began
    if any(p.exitcode for p in procs):
        raise RuntimeError("a writer failed: exit codes %s" % [p.exitcode for p in procs])
    return WRITERS * BATCHES * (CHECKS + 1) / elapsed


def _start_emulator(twin, faults, bmc_map, pid):
    """The emulator with one loopback address per BMC (127.100.0.1 up, port 8443): 10,000 listeners on ephemeral
    ports of 127.0.0.1 would take a third of the port range that the controller's own connections need."""
    subprocess.run([sys.executable, "-m", "symphony_emulator", "serve", "--twin", str(twin), "--faults", str(faults),
                    "--map", str(bmc_map), "--bind-base", "127.100.0.1", "--port", "8443", "--background",
                    "--pidfile", str(pid)], check=True,
                   env=dict(os.environ, PYTHONPATH="%s:%s" % (ROOT / "build" / "collections", ROOT / "tools")))
    return pid


def fleet(server, n):
    """Wall seconds of pre_deployment over ``n`` emulated BMCs, one job and SLICES slices, each on its own schema."""
    pd.WORK = WORK  # where its emulator pidfile goes
    twin = WORK / "fleet.twin.yml"
    pd.write_twin(twin, n)
    faults = WORK / "faults.yml"
    faults.write_text("faults:\n  '*':\n    latency_ms: %g\n" % LATENCY_MS)
    bmc_map = WORK / "bmcs.json"
    pid = _start_emulator(twin, faults, bmc_map, WORK / "emulator.pid")
    walls = {}
    try:
        for name, slices in (("one", 1), ("sliced", SLICES)):
            source = WORK / ("%s.twin.yml" % name)
            location = server.create_schema("bench_%s_%d" % (name, int(time.time())))
            source.write_text("plugin: symphony.cluster.twin\nprofile: production\nledger: '%s'\n%s" % (
                location, twin.read_text()))
            began = time.monotonic()
            results = run_sliced(ROOT / "playbooks" / "pre_deployment.yml", source, slices, WORK / name, extravars={
                "pre_deployment_bmc_map": str(bmc_map), "pre_deployment_dispatch_dir": str(WORK / name / "d{slice}"),
                "pre_deployment_optional_checks": ["lease_captured", "address_reserved"]})
            walls[name] = time.monotonic() - began
            print("%s: %.1f s, slices %s" % (name, walls[name], [(r.slice, r.status, r.rc) for r in results]))
            failed = [r for r in results if r.status != "successful"]
            if failed:   # a failed job's wall time measures nothing: no figure rather than a wrong one
                raise SystemExit("%s: slice(s) %s did not succeed (see %s)" % (
                    name, ", ".join("%d (%s, rc %s)" % (r.slice, r.status, r.rc) for r in failed), WORK / name))
            ledger = open_ledger(location)
            gated = sum(1 for stages in ledger.current_gates().values() if "pre_deployment" in stages)
            ledger.close()
            if gated != n:   # a play that matched no host "succeeds" in no time
                raise SystemExit("%s: %d of %d nodes have a pre_deployment gate (see %s)" % (name, gated, n, WORK / name))
    finally:
        pd.stop_emulator(pid)
    return {"fleet_bmcs": n, "latency_ms": LATENCY_MS, "slices": SLICES, "wall_s_one": round(walls["one"], 1),
            "wall_s_sliced": round(walls["sliced"], 1), "sliced_speedup": round(walls["one"] / walls["sliced"], 2)}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    parser.add_argument("--fleet", type=int, default=int(os.environ.get("BENCH_SCALE_FLEET", "0")),
                        help="also run pre_deployment over this many emulated BMCs, one job vs sliced")
    args = parser.parse_args(argv)
    shutil.rmtree(WORK, ignore_errors=True)
    WORK.mkdir(parents=True)
    server = PgServer(ROOT / "build" / "pg" / "bench").start()
    os.environ.update(server.env)
    try:
        out = {"writers": WRITERS, "batches_per_writer": BATCHES, "rows_per_batch": CHECKS + 1,
               "ledger_rows_per_s_sqlite": round(write_throughput(str(WORK / "ledger.sqlite"))),
               "ledger_rows_per_s_postgresql": round(write_throughput(server.create_schema("bench_writes"))),
               # what SQLite's WAL + synchronous=NORMAL risks (the last commits on power loss, never corruption):
               # PostgreSQL's synchronous_commit=off, set per connection in the URL (libpq options)
               "ledger_rows_per_s_postgresql_async_commit": round(write_throughput(server.create_schema(
                   "bench_writes_async", settings={"synchronous_commit": "off"})))}
        print("ledger writes, 8 processes: SQLite %(ledger_rows_per_s_sqlite)d rows/s, PostgreSQL "
              "%(ledger_rows_per_s_postgresql)d rows/s (synchronous_commit=off: "
              "%(ledger_rows_per_s_postgresql_async_commit)d rows/s)" % out)
        if args.fleet:
            out.update(fleet(server, args.fleet))
    finally:
        server.stop(remove=True)
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "scale.json").write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
