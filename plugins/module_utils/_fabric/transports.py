# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fabric transports behind one interface, launched over SSH or the cluster's scheduler.

A *launcher* turns "run argv on host" (and "run argv as one job over these hosts") into the command
the controller executes: ``ssh`` (OpenSSH client, BatchMode, host keys verified unless the operator's
ssh_config says otherwise), ``srun`` (Slurm) or ``mpirun`` (Open MPI); ``local`` runs on the controller
itself (loopback tests).  No home-made launcher: multi-node collectives need ``srun`` or ``mpirun``.

A *pair transport* measures one pair of nodes and returns a :class:`~._fabric.PairTest`:
``iperf3`` (TCP, Gb/s, ``--bidir`` so both directions count), ``ib_write_bw`` (perftest, per HCA, Gb/s,
the pair's value is its slowest HCA), ``nccl-tests``/``rccl-tests`` (``all_reduce_perf`` over the two
nodes, busbw GB/s at the largest size; ``#wrong``/out-of-bounds = corruption = 0).  A test that could
not be measured (unreachable host, tool missing, timeout) is ``error`` with the reason, never a pass
and never a fabric verdict.
"""

from __future__ import annotations

import random
import shlex
import shutil
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from .._core.errors import (
    ParseError,
    ToolNotFoundError,
    ValidationError,
)
from . import pairs as _fabric
from .._host import nccl as _nccl
from .._core.gate import CheckResult, new_run_id
from .._core.ledger import open_ledger
from .._core.sku import load_manifest
from .._core.twin import load_twin
from .._host.parsers.iperf3 import parse_iperf3_json
from .._host.parsers.ib_write_bw import parse_ib_write_bw

LAUNCHERS = ("ssh", "srun", "mpirun", "local")
TRANSPORTS = ("iperf3", "ib_write_bw", "nccl-tests", "rccl-tests")
NOT_FOUND_RC = 127


# ----------------------------------------------------------------------------------------------
# Launchers
# ----------------------------------------------------------------------------------------------

class Launcher:
    """Base launcher: ``wrap(host, argv)`` and ``group(hosts, tasks_per_node, argv, env)`` -> argv."""

    name = "base"
    binary = None

    def wrap(self, host, argv):
        raise NotImplementedError

    def group(self, hosts, tasks_per_node, argv, env=None):
        raise ValidationError("the %s launcher cannot start a multi-node job; use srun or mpirun" % self.name,
                              where="launcher")

    def check(self):
        """Raise :class:`ToolNotFoundError` when the launcher's executable is absent on the controller."""
        if self.binary and shutil.which(self.binary) is None:
            raise ToolNotFoundError("%s not found on the controller's PATH" % self.binary, where="launcher")


class LocalLauncher(Launcher):
    """Runs on the controller itself (every "host" is this machine; loopback tests only)."""

    name = "local"

    def wrap(self, host, argv):
        return list(argv)


class SSHLauncher(Launcher):
    """OpenSSH client.  ``config_file``/``identity_file``/``user``/``port`` map to ``-F``/``-i``/``-l``/``-p``.

    BatchMode is always on (never a password prompt); ``ConnectTimeout`` is ``connect_timeout`` seconds.
    Host keys are verified as the ssh configuration says (``StrictHostKeyChecking`` is not touched).
    """

    name = "ssh"
    binary = "ssh"

    def __init__(self, config_file=None, identity_file=None, user=None, port=None, connect_timeout=10,
                 options=(), hosts=None):
        # node name -> SSH destination (management address); a node not in it is reached by its name.
        self.hosts = dict(hosts or {})
        self.config_file = config_file
        self.identity_file = identity_file
        self.user = user
        self.port = port
        self.connect_timeout = int(connect_timeout)
        self.options = list(options or ())

    def base(self):
        argv = ["ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=%d" % self.connect_timeout]
        if self.config_file:
            argv += ["-F", self.config_file]
        if self.identity_file:
            argv += ["-i", self.identity_file]
        if self.user:
            argv += ["-l", self.user]
        if self.port:
            argv += ["-p", str(self.port)]
        for opt in self.options:
            argv += ["-o", opt]
        return argv

    def wrap(self, host, argv):
        return self.base() + [self.hosts.get(host) or host, "--", shlex.join([str(a) for a in argv])]


class SrunLauncher(Launcher):
    """Slurm ``srun``: one task on one named node, or one job over several (``--ntasks-per-node``)."""

    name = "srun"
    binary = "srun"

    def __init__(self, partition=None, extra_args=()):
        self.partition = partition
        self.extra_args = list(extra_args or ())

    def _common(self):
        argv = ["srun"]
        if self.partition:
            argv += ["-p", self.partition]
        return argv + self.extra_args

    def wrap(self, host, argv):
        return self._common() + ["-N1", "-n1", "-w", host] + [str(a) for a in argv]

    def group(self, hosts, tasks_per_node, argv, env=None):
        export = "ALL" + "".join(",%s=%s" % (k, v) for k, v in sorted((env or {}).items()))
        return self._common() + ["-N%d" % len(hosts), "-w", ",".join(hosts),
                                 "--ntasks-per-node=%d" % int(tasks_per_node), "--export=%s" % export] + \
            [str(a) for a in argv]


class MpirunLauncher(Launcher):
    """Open MPI ``mpirun`` with ``-H host:slots`` and ``-x NAME=VALUE`` for the NCCL environment."""

    name = "mpirun"
    binary = "mpirun"

    def __init__(self, extra_args=()):
        self.extra_args = list(extra_args or ())

    def wrap(self, host, argv):
        return ["mpirun", "-np", "1", "-H", host] + self.extra_args + [str(a) for a in argv]

    def group(self, hosts, tasks_per_node, argv, env=None):
        argv_env = []
        for k, v in sorted((env or {}).items()):
            argv_env += ["-x", "%s=%s" % (k, v)]
        return ["mpirun", "-np", str(len(hosts) * int(tasks_per_node)),
                "-H", ",".join("%s:%d" % (h, int(tasks_per_node)) for h in hosts)] + \
            self.extra_args + argv_env + [str(a) for a in argv]


def make_launcher(name, **options):
    """Launcher by name (``ssh``, ``srun``, ``mpirun``, ``local``); unknown options are ignored."""
    if name == "ssh":
        keys = ("config_file", "identity_file", "user", "port", "connect_timeout", "options", "hosts")
        return SSHLauncher(**{k: options[k] for k in keys if options.get(k) is not None})
    if name == "srun":
        return SrunLauncher(options.get("partition"), options.get("extra_args") or ())
    if name == "mpirun":
        return MpirunLauncher(options.get("extra_args") or ())
    if name == "local":
        return LocalLauncher()
    raise ValidationError("unknown launcher %r (%s)" % (name, ", ".join(LAUNCHERS)), where="launcher")


def run_command(argv, timeout_s):
    """Run ``argv`` on the controller: ``(rc, stdout, stderr)``; rc 124 on timeout, 127 when absent."""
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, check=False,
                              stdin=subprocess.DEVNULL)
    except FileNotFoundError:
        return NOT_FOUND_RC, "", "%s: command not found" % argv[0]
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        return 124, out, "timed out after %ss" % timeout_s
    return proc.returncode, proc.stdout, proc.stderr


def _missing_tool(rc, stderr, tool):
    text = (stderr or "").lower()
    return rc == NOT_FOUND_RC or ("%s: command not found" % tool) in text or \
        ("%s: not found" % tool) in text or "no such file or directory" in text and tool in text


def _tail(text, limit=400):
    text = (text or "").strip()
    return text[-limit:]


# ----------------------------------------------------------------------------------------------
# Pair transports
# ----------------------------------------------------------------------------------------------

class PairTransport:
    """Measures one pair; subclasses implement :meth:`measure`.  ``unit`` names the value's unit."""

    name = "base"
    unit = ""

    def __init__(self, launcher, addresses=None, timeout_s=60):
        self.launcher = launcher
        self.addresses = dict(addresses or {})
        self.timeout_s = timeout_s

    def address(self, node):
        return self.addresses.get(node) or node

    def error(self, a, b, reason, **evidence):
        return _fabric.PairTest(a, b, _fabric.ERROR, None, self.unit, reason=reason, evidence=evidence)

    def measure(self, a, b, slot=0):
        raise NotImplementedError


class Iperf3Transport(PairTransport):
    """iperf3 TCP between two nodes: server on ``b`` (one-off, bounded by coreutils ``timeout``), client
    on ``a`` with ``-J`` and ``--bidir``; value = the slower direction in Gb/s.

    ``duration_s``: test length (``-t``); ``port``: base port (a round's pairs use ``port + slot``);
    ``streams``: ``-P``.
    """

    name = "iperf3"
    unit = "Gb/s"

    def __init__(self, launcher, addresses=None, timeout_s=30, duration_s=1, port=5201, streams=1, bidir=True,
                 binary="iperf3", connect_retries=25):
        super().__init__(launcher, addresses, timeout_s)
        self.duration_s = int(duration_s)
        self.port = int(port)
        self.streams = int(streams)
        self.bidir = bidir
        self.binary = binary
        self.connect_retries = connect_retries

    def measure(self, a, b, slot=0):
        port = self.port + slot
        server = self.launcher.wrap(b, ["timeout", str(int(self.timeout_s)), self.binary, "-s", "-1", "-p", str(port)])
        client_args = [self.binary, "-c", self.address(b), "-p", str(port), "-t", str(self.duration_s), "-J",
                       "-P", str(self.streams)]
        if self.bidir:
            client_args.append("--bidir")
        client = self.launcher.wrap(a, client_args)
        try:
            srv = subprocess.Popen(server, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                   stdin=subprocess.DEVNULL)
        except FileNotFoundError:
            return self.error(a, b, "%s not found on the controller" % server[0])
        started = time.time()
        try:
            parsed, rc, err = None, None, ""
            for _attempt in range(self.connect_retries):
                rc, out, err = run_command(client, self.timeout_s)
                if _missing_tool(rc, err, self.binary):
                    return self.error(a, b, "%s not found on %s" % (self.binary, a), stderr=_tail(err))
                if srv.poll() is not None and srv.returncode not in (0, None):
                    serr = srv.stderr.read() if srv.stderr else ""
                    if _missing_tool(srv.returncode, serr, self.binary):
                        return self.error(a, b, "%s not found on %s" % (self.binary, b), stderr=_tail(serr))
                    return self.error(a, b, "iperf3 server on %s exited %d: %s" % (b, srv.returncode, _tail(serr, 200)))
                if rc == 124:
                    return self.error(a, b, "iperf3 client on %s timed out after %ss" % (a, self.timeout_s))
                try:
                    parsed = parse_iperf3_json(out)
                except ParseError as exc:
                    return self.error(a, b, "iperf3 output from %s unreadable: %s (rc %s, stderr %s)"
                                      % (a, exc, rc, _tail(err, 200)))
                if parsed["error"] and "connect" in parsed["error"] and parsed["gbps"] is None:
                    time.sleep(0.2)  # the server on b is not listening yet
                    continue
                break
            if parsed is None or parsed["gbps"] is None:
                reason = parsed["error"] if parsed else "no result"
                return self.error(a, b, "iperf3 %s -> %s: %s" % (a, b, reason))
            return _fabric.PairTest(a, b, _fabric.OK, parsed["gbps"], self.unit,
                                    evidence={"tool": "iperf3", "forward_gbps": parsed["forward_gbps"],
                                              "reverse_gbps": parsed["reverse_gbps"],
                                              "retransmits": parsed["retransmits"], "port": port,
                                              "seconds": round(time.time() - started, 3)})
        finally:
            try:
                srv.wait(timeout=5)
            except subprocess.TimeoutExpired:
                srv.terminate()
                try:
                    srv.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    srv.kill()
                    srv.wait()


class IbWriteBwTransport(PairTransport):
    """perftest ``ib_write_bw`` per HCA (``-d <hca>``, ``--report_gbits``, ``-s size``, ``-D seconds``);
    the pair's value is its slowest HCA in Gb/s, every HCA's number is evidence."""

    name = "ib_write_bw"
    unit = "Gb/s"

    def __init__(self, launcher, addresses=None, timeout_s=60, hcas=("mlx5_0",), size=8388608, duration_s=5,
                 port=18515, binary="ib_write_bw"):
        super().__init__(launcher, addresses, timeout_s)
        self.hcas = list(hcas)
        self.size = int(size)
        self.duration_s = int(duration_s)
        self.port = int(port)
        self.binary = binary

    def measure(self, a, b, slot=0):
        per_hca = {}
        for i, hca in enumerate(self.hcas):
            port = self.port + slot * len(self.hcas) + i
            common = ["-d", hca, "-p", str(port), "--report_gbits", "-s", str(self.size), "-D", str(self.duration_s), "-F"]
            srv = subprocess.Popen(self.launcher.wrap(b, ["timeout", str(int(self.timeout_s)), self.binary] + common),
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
            try:
                time.sleep(0.5)
                rc, out, err = run_command(self.launcher.wrap(a, [self.binary] + common + [self.address(b)]),
                                           self.timeout_s)
            finally:
                try:
                    srv.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    srv.terminate()
                    srv.wait()
            if _missing_tool(rc, err, self.binary):
                return self.error(a, b, "%s not found on %s" % (self.binary, a))
            if rc != 0:
                return self.error(a, b, "ib_write_bw %s -> %s on %s exited %d: %s" % (a, b, hca, rc, _tail(err, 200)))
            try:
                per_hca[hca] = parse_ib_write_bw(out)["avg_gbps"]
            except ParseError as exc:
                return self.error(a, b, "ib_write_bw output unreadable on %s: %s" % (hca, exc))
        worst = min(per_hca, key=per_hca.get)
        return _fabric.PairTest(a, b, _fabric.OK, per_hca[worst], self.unit,
                                evidence={"tool": "ib_write_bw", "per_hca_gbps": per_hca, "slowest_hca": worst})


class NcclPairTransport(PairTransport):
    """nccl-tests (or rccl-tests) ``all_reduce_perf`` over the two nodes at one large size; value = busbw
    GB/s.  ``#wrong`` > 0 or out-of-bounds values are data corruption: the value is recorded as 0."""

    name = "nccl-tests"
    unit = "GB/s"

    def __init__(self, launcher, addresses=None, timeout_s=300, binary="all_reduce_perf", gpus_per_node=8,
                 size=8 * 1024 ** 3, env=None, tool="nccl-tests"):
        super().__init__(launcher, addresses, timeout_s)
        self.binary = binary
        self.gpus_per_node = int(gpus_per_node)
        self.size = int(size)
        self.env = dict(env or {})
        self.name = tool

    def measure(self, a, b, slot=0):
        argv = self.launcher.group([a, b], self.gpus_per_node,
                                   [self.binary, "-b", str(self.size), "-e", str(self.size), "-g", "1", "-c", "1"],
                                   self.env)
        rc, out, err = run_command(argv, self.timeout_s)
        if _missing_tool(rc, err, self.binary) or _missing_tool(rc, err, argv[0]):
            return self.error(a, b, "%s not found (%s)" % (self.binary, _tail(err, 200)))
        if rc != 0:
            return self.error(a, b, "%s over %s,%s exited %d: %s" % (self.binary, a, b, rc, _tail(err or out, 300)))
        try:
            parsed = _nccl.parse(out)
        except ParseError as exc:
            return self.error(a, b, str(exc))
        corrupt = _nccl.corruption(parsed)
        points = _nccl.curve(parsed)
        value = 0.0 if corrupt["corrupt"] else (points[-1][1] if points else None)
        if value is None:
            return self.error(a, b, "no busbw in nccl-tests output")
        return _fabric.PairTest(a, b, _fabric.OK, value, self.unit,
                                evidence={"tool": self.name, "corruption": corrupt, "nccl_env": self.env,
                                          "size": points[-1][0] if points else None})


def make_transport(name, launcher, addresses=None, **options):
    """Pair transport by name (:data:`TRANSPORTS`); ``options`` are the transport's keyword arguments."""
    options = {k: v for k, v in options.items() if v is not None}
    if name == "iperf3":
        keys = ("timeout_s", "duration_s", "port", "streams", "bidir", "binary")
        return Iperf3Transport(launcher, addresses, **{k: options[k] for k in keys if k in options})
    if name == "ib_write_bw":
        keys = ("timeout_s", "hcas", "size", "duration_s", "port", "binary")
        return IbWriteBwTransport(launcher, addresses, **{k: options[k] for k in keys if k in options})
    if name in ("nccl-tests", "rccl-tests"):
        keys = ("timeout_s", "binary", "gpus_per_node", "size", "env")
        return NcclPairTransport(launcher, addresses, tool=name, **{k: options[k] for k in keys if k in options})
    raise ValidationError("unknown transport %r (%s)" % (name, ", ".join(TRANSPORTS)), where="transport")


def round_runner(transport, floor=None, min_fraction=0.8, workers=8):
    """A ``run_round`` for :func:`~._fabric.run_schedule`: runs a round's disjoint pairs concurrently
    (at most ``workers`` at once), appends the tests, then re-judges every test so far with
    :func:`~._fabric.judge`.  The judge's last verdict is kept in ``runner.threshold``."""
    lock = threading.Lock()

    def run_round(number, pairs, tests):
        def one(item):
            slot, (a, b) = item
            try:
                test = transport.measure(a, b, slot)
            except (OSError, ValueError) as exc:
                test = transport.error(a, b, "%s: %s" % (type(exc).__name__, exc))
            test.round = number
            return test

        with ThreadPoolExecutor(max_workers=max(1, min(workers, len(pairs) or 1))) as pool:
            new = list(pool.map(one, enumerate(pairs)))
        with lock:
            tests = list(tests) + new
            run_round.threshold = _fabric.judge(tests, floor, min_fraction)
        return tests

    run_round.threshold = {"threshold": floor, "reference": None, "basis": "floor" if floor is not None else "relative"}
    return run_round


# ----------------------------------------------------------------------------------------------
# Orchestration used by the fabric_test and nccl_sweep modules
# ----------------------------------------------------------------------------------------------

def cabling_from_twin(twin, nodes, rail=0):
    """``{node: "<leaf>:<port>"}`` for ``nodes`` on ``rail`` from a loaded twin (nodes without cabling
    on that rail are left out)."""
    out = {}
    for node in nodes:
        entry = twin.nodes.get(node)
        if not entry:
            continue
        for link in entry.get("fabric") or []:
            if int(link.get("rail", 0)) == int(rail):
                out[node] = "%s:%s" % (link["leaf"], link["port"])
                break
    return out


def plan(nodes, schedule="adaptive", seed=None):
    """What a run would test, without running (check mode): the full plan for ``round_robin`` and
    ``tri_ring``, the first round for ``adaptive`` (later rounds depend on the results)."""
    if schedule == "round_robin":
        return _fabric.round_robin(nodes)
    if schedule == "tri_ring":
        return _fabric.tri_ring(nodes)
    if schedule == "adaptive":
        return [_fabric.random_matching(nodes, random.Random(seed))[0]]
    raise ValidationError("unknown schedule %r" % schedule, where="schedule")


def run_fabric_test(nodes, transport, schedule="adaptive", floor=None, min_fraction=0.8, seed=None, max_rounds=8,
                    workers=8, cabling=None, stage="burn_in", run_id=None, ledger=None, clock=time.time):
    """Run a schedule with ``transport``, localise, and (when ``ledger`` is given) record the verdicts.

    Per node: a :class:`~._gate.CheckResult` for check ``fabric_interface`` at ``stage``.  Per bad or
    ambiguous link: ``ledger.record_event(node, "fabric_link", data)`` for each endpoint node (see
    :func:`~._fabric.link_events`).  Returns ``{"rounds", "schedule", "threshold", "interfaces":
    {node: status/reason/...}, "bad_interfaces", "bad_links", "links", "ambiguous", "tests", "run_id"}``.
    """
    run_id = run_id or new_run_id("fabric")
    cabling = dict(cabling or {})
    fabric = _fabric.PairPathFabric(cabling)
    started = clock()
    runner = round_runner(transport, floor, min_fraction, workers)
    out = _fabric.run_schedule(nodes, runner, schedule, fabric, seed=seed, max_rounds=max_rounds)
    finished = clock()
    loc = out["localisation"]
    outcomes = _fabric.node_outcomes(loc, out["tests"], runner.threshold, cabling)
    for node, outcome in outcomes.items():
        # The node's own pair measurements travel with its verdict (the report's fabric pair matrix).
        outcome["evidence"] = dict(outcome.get("evidence") or {}, pairs=[
            {"a": t.a, "b": t.b, "value": t.value, "unit": t.unit, "status": t.status, "round": t.round}
            for t in out["tests"] if node in (t.a, t.b)])
    events = _fabric.link_events(loc, run_id)
    if ledger is not None:
        results = [CheckResult(node=node, stage=stage, check=_fabric.CHECK_INTERFACE, status=o["status"],
                               reason=o["reason"], expected=o["expected"], observed=o["observed"],
                               remediation=o["remediation"],
                               evidence=dict(o["evidence"], transport=transport.name, schedule=schedule,
                                             rounds=out["rounds"]),
                               started=started, finished=finished, run_id=run_id)
                   for node, o in outcomes.items()]
        ledger.record_results(results)
        for node, data in events:
            ledger.record_event(node, _fabric.EVENT_LINK, data)
    return {"run_id": run_id, "rounds": out["rounds"], "schedule": schedule, "transport": transport.name,
            "threshold": runner.threshold,
            "interfaces": {n: {k: o[k] for k in ("status", "reason", "remediation", "observed", "evidence")}
                           for n, o in outcomes.items()},
            "bad_interfaces": loc.bad_interfaces(), "bad_links": loc.bad_links(),
            "links": {k: {"verdict": v["verdict"], "info": v["info"]} for k, v in loc.links.items()},
            "ambiguous": loc.ambiguous, "tests": [t.to_dict() for t in out["tests"]]}


def floor_for(manifest, collective, nodes):
    """The SKU's busbw floor (GB/s) for ``collective`` at ``nodes`` nodes from
    ``validation.nccl_busbw_floors`` (an entry without ``nodes`` applies to every count; the most
    specific wins), or None."""
    collective = _nccl.normalise_collective(collective)
    best = None
    for entry in ((manifest or {}).get("validation") or {}).get("nccl_busbw_floors") or []:
        if _nccl.normalise_collective(entry["collective"]) != collective:
            continue
        if entry.get("nodes") not in (None, nodes):
            continue
        if best is None or entry.get("nodes") is not None:
            best = entry
    return float(best["min_busbw_gbps"]) if best else None


def run_nccl_sweep(hosts, launcher=None, collective="all_reduce", gpus_per_node=8, max_bytes=_nccl.DEFAULT_MAX_BYTES,
                   min_bytes=8, floors=None, tolerance=0.10, nccl_env=None, binary_dir="", timeout_s=1800,
                   counts=None, outputs=None):
    """Sweep message sizes (``min_bytes``..``max_bytes`` by powers of two) at power-of-two node counts.

    ``floors``: ``{node_count: GB/s}`` (see :func:`floor_for`); ``outputs``: ``{node_count: text}`` of runs
    already made (analysed instead of launching).  Multi-node counts need ``srun``/``mpirun``; one node
    runs through any launcher as one process driving every GPU (``-g gpus_per_node``).
    Returns ``{"ok": bool|None, "runs": [{"nodes", "hosts", "status": pass|fail|not_run, "reason",
    "analysis", "command"}], "nccl_env": {...}, "collective"}``; ``ok`` is None when nothing ran.
    """
    collective = _nccl.normalise_collective(collective)
    binary = (binary_dir.rstrip("/") + "/" if binary_dir else "") + _nccl.BINARIES[collective]
    counts = counts or _nccl.node_counts(len(hosts))
    env = dict(nccl_env or {})
    runs = []
    for n in counts:
        group = list(hosts[:n])
        run = {"nodes": n, "hosts": group, "command": None, "analysis": None}
        text = (outputs or {}).get(n)
        if text is None:
            args = [binary, "-b", str(min_bytes), "-e", str(max_bytes), "-f", "2", "-c", "1"]
            try:
                if n == 1:
                    argv = launcher.wrap(group[0], ["env"] + ["%s=%s" % kv for kv in sorted(env.items())] +
                                         args + ["-g", str(gpus_per_node)])
                else:
                    argv = launcher.group(group, gpus_per_node, args + ["-g", "1"], env)
            except ValidationError as exc:
                runs.append(dict(run, status="not_run", reason=str(exc)))
                continue
            run["command"] = argv
            rc, text, err = run_command(argv, timeout_s)
            if _missing_tool(rc, err, binary.rsplit("/", 1)[-1]) or _missing_tool(rc, err, argv[0]):
                runs.append(dict(run, status="not_run", reason="%s not found: %s" % (binary, _tail(err, 200))))
                continue
            if rc != 0:
                runs.append(dict(run, status="fail", reason="%s exited %d: %s" % (binary, rc, _tail(err or text, 300))))
                continue
        try:
            parsed = _nccl.parse(text)
        except ParseError as exc:
            runs.append(dict(run, status="fail", reason=str(exc)))
            continue
        analysis = _nccl.analyse(parsed, (floors or {}).get(n), tolerance, env or parsed.get("env"))
        runs.append(dict(run, status="pass" if analysis["ok"] else "fail", analysis=analysis,
                         reason="; ".join(analysis["reasons"]) or "busbw rises monotonically to %.2f GB/s"
                         % analysis["shape"]["plateau_gbps"]))
    statuses = [r["status"] for r in runs]
    ok = None if all(s == "not_run" for s in statuses) else all(s == "pass" for s in statuses if s != "not_run")
    return {"ok": ok, "runs": runs, "nccl_env": env, "collective": collective}


# ----------------------------------------------------------------------------------------------
# Module entry points (the modules are thin wrappers around these)
# ----------------------------------------------------------------------------------------------

def _launcher_from_params(params):
    return make_launcher(params.get("launcher") or "ssh", config_file=params.get("ssh_config"),
                         identity_file=params.get("ssh_identity_file"), user=params.get("ssh_user"),
                         port=params.get("ssh_port"), connect_timeout=params.get("connect_timeout"),
                         hosts=params.get("ssh_hosts"),
                         partition=params.get("partition"), extra_args=params.get("launcher_args"))


def launcher_argument_spec(default="ssh"):
    """The argument spec of the launcher options read by :func:`_launcher_from_params` (doc fragment
    ``symphony.cluster.launcher``): a new dict, ``launcher`` defaulting to ``default``."""
    return {
        "launcher": {"type": "str", "default": default, "choices": list(LAUNCHERS)},
        "partition": {"type": "str"},
        "launcher_args": {"type": "list", "elements": "str", "default": []},
        "ssh_config": {"type": "path"},
        "ssh_hosts": {"type": "dict", "default": {}},
        "ssh_identity_file": {"type": "path"},
        "ssh_user": {"type": "str"},
        "ssh_port": {"type": "int"},
        "connect_timeout": {"type": "int", "default": 10},
    }


def _cabling(params, nodes):
    if not params.get("twin"):
        return {}
    return cabling_from_twin(load_twin(params["twin"]), nodes, params.get("rail") or 0)


def _not_run_everywhere(nodes, reason, stage, run_id, ledger, check):
    now = time.time()
    if ledger is not None:
        ledger.record_results([CheckResult(node=n, stage=stage, check=check, status="not_run", reason=reason,
                                           started=now, finished=now, run_id=run_id) for n in nodes])
    return {n: {"status": "not_run", "reason": reason, "remediation": "", "observed": None} for n in nodes}


def fabric_test_module(params, check_mode=False):
    """Everything ``symphony.cluster.fabric_test`` does; ``params`` are the module's parameters.

    Returns the module result dict.  Raises :class:`SymphonyError` subclasses on bad input (unknown
    schedule/transport, malformed twin, ledger errors).
    """
    nodes = list(params["nodes"])
    _fabric._check_nodes(nodes)
    schedule = params.get("schedule") or "adaptive"
    stage = params.get("stage") or "burn_in"
    run_id = params.get("run_id") or new_run_id("fabric")
    cabling = _cabling(params, nodes)
    launcher = _launcher_from_params(params)
    transport = make_transport(
        params.get("transport") or "iperf3", launcher, params.get("addresses") or {},
        timeout_s=params.get("timeout_s"), duration_s=params.get("duration_s"), port=params.get("port"),
        streams=params.get("streams"), hcas=params.get("hcas"), size=params.get("message_bytes"),
        gpus_per_node=params.get("gpus_per_node"), binary=params.get("binary"), env=params.get("nccl_env"))
    if check_mode:
        return {"changed": False, "run_id": run_id, "schedule": schedule, "transport": transport.name,
                "plan": [[list(p) for p in r] for r in plan(nodes, schedule, params.get("seed"))],
                "cabling": cabling}
    ledger = open_ledger(params.get("ledger")) if params.get("record", True) else None
    try:
        try:
            launcher.check()
        except ToolNotFoundError as exc:
            interfaces = _not_run_everywhere(nodes, str(exc), stage, run_id, ledger, _fabric.CHECK_INTERFACE)
            return {"changed": ledger is not None, "run_id": run_id, "schedule": schedule, "transport": transport.name,
                    "rounds": 0, "interfaces": interfaces, "bad_interfaces": [], "bad_links": [], "links": {},
                    "ambiguous": [], "tests": [], "threshold": None}
        out = run_fabric_test(nodes, transport, schedule, floor=params.get("floor"),
                              min_fraction=params.get("min_fraction") or 0.8, seed=params.get("seed"),
                              max_rounds=params.get("max_rounds") or 8, workers=params.get("workers") or 8,
                              cabling=cabling, stage=stage, run_id=run_id, ledger=ledger)
    finally:
        if ledger is not None:
            ledger.close()
    out.update({"changed": ledger is not None, "cabling": cabling})
    return out


def nccl_sweep_module(params, check_mode=False):
    """Everything ``symphony.cluster.nccl_sweep`` does; ``params`` are the module's parameters.

    The SKU manifest (``sku_manifest``) supplies ``nccl_env`` (the golden recipe), ``validation.nccl_max_bytes``
    and ``validation.nccl_busbw_floors`` unless the parameters override them.  Per node a check result
    ``nccl_sweep_<collective>`` at ``stage`` (pass / fail / not_run) with every run's analysis and the NCCL
    environment as evidence.
    """
    nodes = list(params["nodes"])
    _fabric._check_nodes(nodes)
    collective = _nccl.normalise_collective(params.get("collective") or "all_reduce")
    manifest = None
    if params.get("sku_manifest"):
        manifest = load_manifest(params["sku_manifest"])
    validation = (manifest or {}).get("validation") or {}
    max_bytes = params.get("max_bytes") or validation.get("nccl_max_bytes") or _nccl.DEFAULT_MAX_BYTES
    min_bytes = params.get("min_bytes") or 8
    env = dict((manifest or {}).get("nccl_env") or {})
    env.update(params.get("nccl_env") or {})
    counts = params.get("node_counts") or _nccl.node_counts(len(nodes))
    bad_counts = [c for c in counts if c < 1 or c > len(nodes)]
    if bad_counts:
        raise ValidationError("node counts %s exceed the %d nodes given" % (bad_counts, len(nodes)), where="node_counts")
    floors = {}
    for n in counts:
        floors[n] = params["floor_gbps"] if params.get("floor_gbps") is not None else floor_for(manifest, collective, n)
    outputs = {}
    for item in params.get("results_from") or []:
        try:
            with open(item["path"]) as handle:
                outputs[int(item["nodes"])] = handle.read()
        except OSError as exc:
            raise ValidationError("cannot read recorded nccl-tests output: %s" % exc, where=item["path"])
    run_id = params.get("run_id") or new_run_id("nccl")
    check = "nccl_sweep_%s" % collective
    sizes = _nccl.sweep_sizes(max_bytes, min_bytes)
    if check_mode:
        return {"changed": False, "run_id": run_id, "check": check, "node_counts": counts, "sizes": len(sizes),
                "min_bytes": min_bytes, "max_bytes": max_bytes, "floors": floors, "nccl_env": env}
    launcher = _launcher_from_params(dict(params, launcher=params.get("launcher") or "srun"))
    started = time.time()
    try:
        if len(outputs) < len(counts):
            launcher.check()
        res = run_nccl_sweep(nodes, launcher, collective, params.get("gpus_per_node") or 8, max_bytes, min_bytes,
                             floors, params.get("tolerance") or 0.10, env, params.get("binary_dir") or "",
                             params.get("timeout_s") or 1800, counts, outputs)
    except ToolNotFoundError as exc:
        res = {"ok": None, "runs": [{"nodes": n, "hosts": nodes[:n], "status": "not_run", "reason": str(exc),
                                     "analysis": None, "command": None} for n in counts],
               "nccl_env": env, "collective": collective}
    finished = time.time()
    failing = [r for r in res["runs"] if r["status"] == "fail"]
    if res["ok"] is None:
        status = "not_run"
        reason = "; ".join(sorted({"%d node(s): %s" % (r["nodes"], r["reason"]) for r in res["runs"]}))
    elif res["ok"]:
        status = "pass"
        reason = "; ".join("%d node(s): %s" % (r["nodes"], r["reason"]) for r in res["runs"] if r["status"] == "pass")
    else:
        status = "fail"
        reason = "; ".join("%d node(s): %s" % (r["nodes"], r["reason"]) for r in failing)
    summary = [{"nodes": r["nodes"], "status": r["status"], "reason": r["reason"],
                "plateau_gbps": (r["analysis"] or {}).get("shape", {}).get("plateau_gbps"),
                "failing_sizes": (r["analysis"] or {}).get("failing_sizes", []),
                "dips": [d["size_h"] for d in ((r["analysis"] or {}).get("shape", {}).get("dips") or [])]}
               for r in res["runs"]]
    recorded = False
    if params.get("record", True):
        ledger = open_ledger(params.get("ledger"))
        try:
            ledger.record_results([CheckResult(
                node=n, stage=params.get("stage") or "cluster_validation", check=check, status=status,
                reason=reason, expected={"floors_gbps": floors, "max_bytes": max_bytes},
                observed=summary, remediation=("localise with symphony.cluster.fabric_test, then rerun the sweep"
                                               if status == "fail" else ""),
                evidence={"runs": res["runs"], "nccl_env": env}, started=started, finished=finished, run_id=run_id)
                for n in nodes])
            recorded = True
        finally:
            ledger.close()
    return {"changed": recorded, "run_id": run_id, "check": check, "status": status, "reason": reason,
            "runs": summary, "nccl_env": env, "node_counts": counts}
