# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fabric pair transports behind one interface: each measures one pair of nodes through a launcher.

A *pair transport* measures one pair of nodes and returns a :class:`~._fabric.pairs.PairTest`:
``iperf3`` (TCP, Gb/s, ``--bidir`` so both directions count), ``ib_write_bw`` (perftest, per HCA, Gb/s,
the pair's value is its slowest HCA; with a p99 limit, ``ib_write_lat`` per HCA too), ``nccl-tests``/``rccl-tests`` (``all_reduce_perf`` over the two
nodes, busbw GB/s at the largest size; ``#wrong``/out-of-bounds = corruption = 0).  A test that could
not be measured (unreachable host, tool missing, timeout) is ``error`` with the reason, never a pass
and never a fabric verdict.

:class:`RoundRunner` runs a schedule's round of disjoint pairs concurrently and re-judges every test so far.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from .._core.errors import ParseError, ToolNotFoundError, ValidationError
from .._host import nccl as _nccl
from .._host.launchers import Launcher
from .._host.parsers.ib_write_bw import parse_ib_write_bw
from .._host.parsers.ib_write_lat import parse_ib_write_lat
from .._host.parsers.iperf3 import parse_iperf3_json
from .._host.process import spawn
from .commands import TIMEOUT_RC, missing_tool, run_command, tail
from .localise import judge
from .pairs import ERROR, OK, PairTest

TRANSPORTS = ("iperf3", "ib_write_bw", "nccl-tests", "rccl-tests")


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
        return PairTest(a, b, ERROR, None, self.unit, reason=reason, evidence=evidence)

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
            srv = spawn(server)
        except ToolNotFoundError:
            return self.error(a, b, "%s not found on the controller" % server[0])
        started = time.time()
        try:
            parsed, rc, err = None, None, ""
            for _attempt in range(self.connect_retries):
                rc, out, err = run_command(client, self.timeout_s)
                if missing_tool(rc, err, self.binary):
                    return self.error(a, b, "%s not found on %s" % (self.binary, a), stderr=tail(err))
                code = srv.poll()
                if code not in (0, None):
                    serr = srv.stderr_text()
                    if missing_tool(code, serr, self.binary):
                        return self.error(a, b, "%s not found on %s" % (self.binary, b), stderr=tail(serr))
                    return self.error(a, b, "iperf3 server on %s exited %d: %s" % (b, code, tail(serr, 200)))
                if rc == TIMEOUT_RC:
                    return self.error(a, b, "iperf3 client on %s timed out after %ss" % (a, self.timeout_s))
                try:
                    parsed = parse_iperf3_json(out)
                except ParseError as exc:
                    return self.error(a, b, "iperf3 output from %s unreadable: %s (rc %s, stderr %s)"
                                      % (a, exc, rc, tail(err, 200)))
                if parsed["error"] and "connect" in parsed["error"] and parsed["gbps"] is None:
                    time.sleep(0.2)  # the server on b is not listening yet
                    continue
                break
            if parsed is None or parsed["gbps"] is None:
                reason = parsed["error"] if parsed else "no result"
                return self.error(a, b, "iperf3 %s -> %s: %s" % (a, b, reason))
            return PairTest(a, b, OK, parsed["gbps"], self.unit,
                            evidence={"tool": "iperf3", "forward_gbps": parsed["forward_gbps"],
                                      "reverse_gbps": parsed["reverse_gbps"],
                                      "retransmits": parsed["retransmits"], "port": port,
                                      "seconds": round(time.time() - started, 3)})
        finally:
            # the one-off server ends after its client; one left waiting is stopped
            srv.stop(wait_s=5, grace_s=5)


class IbWriteBwTransport(PairTransport):
    """perftest ``ib_write_bw`` per HCA (``-d <hca>``, ``--report_gbits``, ``-s size``, ``-D seconds``);
    the pair's value is its slowest HCA in Gb/s, every HCA's number is evidence.  ``bidirectional`` adds
    ``-b`` (perftest: both directions at once, the sum reported), what a ``min_bidir_gbps`` floor is about.
    ``cuda_devices`` (GPUDirect RDMA): the GPU index whose memory each HCA's buffers live in, perftest
    ``--use_cuda=<index>``; one per HCA, in ``hcas`` order.

    ``max_p99_lat_us`` (the SKU's limit, µs): each HCA is also measured with ``ib_write_lat -n lat_iters`` (an
    iterations run: only that prints the 99% percentile column) in host memory, as imbue-ai/cluster-health
    ``host_validation/p2p_ib_test.py`` does (perftest has CUDA latency tests for read/send verbs only).  A p99
    above the limit on any HCA is a failed link: the pair's value is recorded as 0 with the latencies as
    evidence, as a failed collective is, so the judge and the localisation treat it like a slow link.  An absent
    ``ib_write_lat`` or a run with no percentile column is ``error`` (the limit cannot be judged)."""

    name = "ib_write_bw"
    unit = "Gb/s"

    def __init__(self, launcher, addresses=None, timeout_s=60, hcas=("mlx5_0",), size=8388608, duration_s=5,
                 port=18515, binary="ib_write_bw", bidirectional=False, cuda_devices=None, max_p99_lat_us=None,
                 lat_binary="ib_write_lat", lat_iters=5000):
        super().__init__(launcher, addresses, timeout_s)
        self.bidirectional = bool(bidirectional)
        self.cuda_devices = list(cuda_devices) if cuda_devices is not None else None
        if self.cuda_devices is not None and len(self.cuda_devices) != len(hcas):
            raise ValidationError("cuda_devices names %d GPUs for %d HCAs" % (len(self.cuda_devices), len(hcas)),
                                  where="ib_write_bw")
        self.hcas = list(hcas)
        self.size = int(size)
        self.duration_s = int(duration_s)
        self.port = int(port)
        self.binary = binary
        self.max_p99_lat_us = None if max_p99_lat_us is None else float(max_p99_lat_us)
        self.lat_binary = lat_binary
        self.lat_iters = int(lat_iters)

    def _run(self, a, b, binary, args):
        """Server on ``b``, client on ``a`` (perftest's pattern): ``(rc, stdout, stderr)`` of the client.
        Raises :class:`ToolNotFoundError` when the launcher itself is absent on the controller."""
        srv = spawn(self.launcher.wrap(b, ["timeout", str(int(self.timeout_s)), binary] + args))
        try:
            time.sleep(0.5)
            return run_command(self.launcher.wrap(a, [binary] + args + [self.address(b)]), self.timeout_s)
        finally:
            srv.stop(wait_s=10, grace_s=10)

    def _perftest(self, a, b, hca, binary, args, parse, key, absent=""):
        """``(parse(client output)[key], None)``, or ``(None, error PairTest)`` when ``binary`` is absent (the
        reason ends with ``absent``), exits non-zero or prints no table."""
        rc, out, err = self._run(a, b, binary, args)
        if missing_tool(rc, err, binary):
            return None, self.error(a, b, "%s not found on %s%s" % (binary, a, absent))
        if rc != 0:
            return None, self.error(a, b, "%s %s -> %s on %s exited %d: %s" % (binary, a, b, hca, rc, tail(err, 200)))
        try:
            return parse(out)[key], None
        except ParseError as exc:
            return None, self.error(a, b, "%s output unreadable on %s: %s" % (binary, hca, exc))

    def measure(self, a, b, slot=0):
        try:
            return self._measure(a, b, slot)
        except ToolNotFoundError as exc:
            return self.error(a, b, "not found on the controller: %s" % exc)

    def _measure(self, a, b, slot):
        per_hca, p99 = {}, {}
        for i, hca in enumerate(self.hcas):
            port = self.port + 2 * (slot * len(self.hcas) + i)
            common = ["-d", hca, "-p", str(port), "--report_gbits", "-s", str(self.size), "-D", str(self.duration_s), "-F"]
            if self.bidirectional:
                common.append("-b")
            if self.cuda_devices is not None:
                common.append("--use_cuda=%s" % self.cuda_devices[i])
            per_hca[hca], error = self._perftest(a, b, hca, self.binary, common, parse_ib_write_bw, "avg_gbps")
            if error is not None:
                return error
            if self.max_p99_lat_us is None:
                continue
            p99[hca], error = self._perftest(a, b, hca, self.lat_binary,
                                             ["-d", hca, "-p", str(port + 1), "-n", str(self.lat_iters), "-F"],
                                             parse_ib_write_lat, "p99_us",
                                             ": the p99 latency limit %.2f us cannot be judged" % self.max_p99_lat_us)
            if error is not None:
                return error
            if p99[hca] is None:
                return self.error(a, b, "ib_write_lat on %s printed no 99%% percentile column (perftest too old?)" % hca)
        worst = min(per_hca, key=lambda hca: per_hca[hca])
        evidence = {"tool": "ib_write_bw", "per_hca_gbps": per_hca, "slowest_hca": worst,
                    "bidirectional": self.bidirectional, "cuda_devices": self.cuda_devices}
        if self.max_p99_lat_us is not None:
            over = {hca: v for hca, v in p99.items() if v > self.max_p99_lat_us}
            evidence.update(p99_lat_us=p99, max_p99_lat_us=self.max_p99_lat_us, latency_over=sorted(over))
            if over:
                return PairTest(a, b, OK, 0.0, self.unit, evidence=dict(evidence, bandwidth_gbps=per_hca[worst]),
                                reason="p99 latency above %.2f us on %s" % (self.max_p99_lat_us, ", ".join(
                                    "%s %.2f us" % kv for kv in sorted(over.items()))))
        return PairTest(a, b, OK, per_hca[worst], self.unit, evidence=evidence)


class NcclPairTransport(PairTransport):
    """nccl-tests (or rccl-tests) ``all_reduce_perf`` over the two nodes at one large size; value = busbw
    GB/s.  ``#wrong`` > 0, out-of-bounds values or ``Test ... failure`` lines are a failed collective: the value is
    recorded as 0.  Fewer ranks than the two nodes' GPUs is an invalid configuration (``error``, not a value)."""

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
        try:
            argv = self.launcher.group([a, b], self.gpus_per_node,
                                       [self.binary, "-b", str(self.size), "-e", str(self.size), "-g", "1", "-c", "1"],
                                       self.env)
        except ValidationError as exc:  # a launcher that cannot start a multi-node job (ssh): no measurement
            return self.error(a, b, exc.message)
        rc, out, err = run_command(argv, self.timeout_s)
        if missing_tool(rc, err, self.binary) or missing_tool(rc, err, argv[0]):
            return self.error(a, b, "%s not found (%s)" % (self.binary, tail(err, 200)))
        failures = _nccl.failure_lines(out + "\n" + err)
        if failures:
            # the collective itself failed between these two nodes: a measurement of 0, quoting nccl-tests
            return PairTest(a, b, OK, 0.0, self.unit, reason="nccl-tests reported: %s" % " | ".join(failures)[:400],
                            evidence={"tool": self.name, "failures": failures[:20], "rc": rc, "nccl_env": self.env})
        if rc != 0:
            return self.error(a, b, "%s over %s,%s exited %d: %s" % (self.binary, a, b, rc, tail(err or out, 300)))
        try:
            parsed = _nccl.parse(out)
        except ParseError as exc:
            return self.error(a, b, str(exc))
        invalid = _nccl.rank_problem(parsed, 2 * self.gpus_per_node)
        if invalid:
            return self.error(a, b, invalid, nranks=parsed.get("nranks"))
        corrupt = _nccl.corruption(parsed)
        points = _nccl.curve(parsed)
        value = 0.0 if corrupt["corrupt"] else (points[-1][1] if points else None)
        if value is None:
            return self.error(a, b, "no busbw in nccl-tests output")
        return PairTest(a, b, OK, value, self.unit,
                        evidence={"tool": self.name, "corruption": corrupt, "nccl_env": self.env,
                                  "size": points[-1][0] if points else None})


def make_transport(name: str, launcher: Launcher, addresses: dict | None = None, **options: Any) -> PairTransport:
    """Pair transport by name (:data:`TRANSPORTS`); ``options`` are the transport's keyword arguments."""
    options = {k: v for k, v in options.items() if v is not None}
    keys: tuple[str, ...]
    if name == "iperf3":
        keys = ("timeout_s", "duration_s", "port", "streams", "bidir", "binary")
        return Iperf3Transport(launcher, addresses, **{k: options[k] for k in keys if k in options})
    if name == "ib_write_bw":
        keys = ("timeout_s", "hcas", "size", "duration_s", "port", "binary", "bidirectional", "cuda_devices",
                "max_p99_lat_us")
        return IbWriteBwTransport(launcher, addresses, **{k: options[k] for k in keys if k in options})
    if name in ("nccl-tests", "rccl-tests"):
        keys = ("timeout_s", "binary", "gpus_per_node", "size", "env")
        return NcclPairTransport(launcher, addresses, tool=name, **{k: options[k] for k in keys if k in options})
    raise ValidationError("unknown transport %r (%s)" % (name, ", ".join(TRANSPORTS)), where="transport")


class RoundRunner:
    """A ``run_round`` for :func:`~._fabric.schedules.run_schedule`: runs a round's disjoint pairs concurrently
    (at most ``workers`` at once), appends the tests, then re-judges every test so far with
    :func:`~._fabric.localise.judge`.  The judge's last verdict is kept in ``threshold``."""

    def __init__(self, transport: PairTransport, floor: float | None = None, min_fraction: float = 0.8,
                 workers: int = 8) -> None:
        self.transport = transport
        self.floor = floor
        self.min_fraction = min_fraction
        self.workers = workers
        self.lock = threading.Lock()
        self.threshold: dict[str, Any] = {"threshold": floor, "reference": None,
                                          "basis": "floor" if floor is not None else "relative"}

    def __call__(self, number: int, pairs: list[tuple[str, str]], tests: list[PairTest]) -> list[PairTest]:
        def one(item: tuple[int, tuple[str, str]]) -> PairTest:
            slot, (a, b) = item
            try:
                test = self.transport.measure(a, b, slot)
            except (OSError, ValueError) as exc:
                test = self.transport.error(a, b, "%s: %s" % (type(exc).__name__, exc))
            test.round = number
            return test

        with ThreadPoolExecutor(max_workers=max(1, min(self.workers, len(pairs) or 1))) as pool:
            new = list(pool.map(one, enumerate(pairs)))
        with self.lock:
            tests = list(tests) + new
            self.threshold = judge(tests, self.floor, self.min_fraction)
        return tests
