# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fabric pair transports behind one interface: each measures one pair of nodes through a launcher.

A *pair transport* measures one pair of nodes and returns a :class:`~._fabric.pairs.PairTest`:
``iperf3`` (TCP, Gb/s, ``--bidir`` so both directions count), ``ib_write_bw`` (perftest, per HCA, Gb/s,
the pair's value is its slowest HCA), ``nccl-tests``/``rccl-tests`` (``all_reduce_perf`` over the two
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
    ``--use_cuda=<index>``; one per HCA, in ``hcas`` order."""

    name = "ib_write_bw"
    unit = "Gb/s"

    def __init__(self, launcher, addresses=None, timeout_s=60, hcas=("mlx5_0",), size=8388608, duration_s=5,
                 port=18515, binary="ib_write_bw", bidirectional=False, cuda_devices=None):
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

    def measure(self, a, b, slot=0):
        per_hca = {}
        for i, hca in enumerate(self.hcas):
            port = self.port + slot * len(self.hcas) + i
            common = ["-d", hca, "-p", str(port), "--report_gbits", "-s", str(self.size), "-D", str(self.duration_s), "-F"]
            if self.bidirectional:
                common.append("-b")
            if self.cuda_devices is not None:
                common.append("--use_cuda=%s" % self.cuda_devices[i])
            server = self.launcher.wrap(b, ["timeout", str(int(self.timeout_s)), self.binary] + common)
            try:
                srv = spawn(server)
            except ToolNotFoundError:
                return self.error(a, b, "%s not found on the controller" % server[0])
            try:
                time.sleep(0.5)
                rc, out, err = run_command(self.launcher.wrap(a, [self.binary] + common + [self.address(b)]),
                                           self.timeout_s)
            finally:
                srv.stop(wait_s=10, grace_s=10)
            if missing_tool(rc, err, self.binary):
                return self.error(a, b, "%s not found on %s" % (self.binary, a))
            if rc != 0:
                return self.error(a, b, "ib_write_bw %s -> %s on %s exited %d: %s" % (a, b, hca, rc, tail(err, 200)))
            try:
                per_hca[hca] = parse_ib_write_bw(out)["avg_gbps"]
            except ParseError as exc:
                return self.error(a, b, "ib_write_bw output unreadable on %s: %s" % (hca, exc))
        worst = min(per_hca, key=lambda hca: per_hca[hca])
        return PairTest(a, b, OK, per_hca[worst], self.unit,
                        evidence={"tool": "ib_write_bw", "per_hca_gbps": per_hca, "slowest_hca": worst,
                                  "bidirectional": self.bidirectional, "cuda_devices": self.cuda_devices})


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
        try:
            argv = self.launcher.group([a, b], self.gpus_per_node,
                                       [self.binary, "-b", str(self.size), "-e", str(self.size), "-g", "1", "-c", "1"],
                                       self.env)
        except ValidationError as exc:  # a launcher that cannot start a multi-node job (ssh): no measurement
            return self.error(a, b, exc.message)
        rc, out, err = run_command(argv, self.timeout_s)
        if missing_tool(rc, err, self.binary) or missing_tool(rc, err, argv[0]):
            return self.error(a, b, "%s not found (%s)" % (self.binary, tail(err, 200)))
        if rc != 0:
            return self.error(a, b, "%s over %s,%s exited %d: %s" % (self.binary, a, b, rc, tail(err or out, 300)))
        try:
            parsed = _nccl.parse(out)
        except ParseError as exc:
            return self.error(a, b, str(exc))
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
        keys = ("timeout_s", "hcas", "size", "duration_s", "port", "binary", "bidirectional", "cuda_devices")
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
