# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Worker processes for a controller-side batch: one share of the hosts per process, threads inside each.

The threads of one Python process share one core (the GIL): parsing, judging and TLS record work of 1,000 BMCs
kept one core busy while the other idled (issue 27: wall time equal to CPU time).  So :func:`start_shards` forks
one process per share; each runs its hosts on its own threads and sends every host's outcome back as it ends.

* fork, not spawn: a child inherits the work function, the settings and the registries as they are, so nothing
  (no password) is pickled on the way in; only outcomes are pickled, on the way back;
* all hosts behind one BMC endpoint go to the same process, so the per-BMC cap holds across processes;
* a child that dies (killed, out of memory, a crash in C) ends its unfinished hosts with a :data:`WORKER_LOST`
  error naming how it ended; never a lost host, never a pass;
* a child ends with ``os._exit``: it never runs the parent's atexit handlers or flushes the parent's buffered
  stdout (the module's JSON) a second time.
"""

from __future__ import annotations

import multiprocessing
import multiprocessing.connection
import os
import pickle
import signal
import sys
import threading
import traceback
from dataclasses import dataclass
from typing import Any, Callable, Hashable, Optional, Sequence

# ``HostOutcome.error["error"]`` of a host whose worker process died before the host finished.
WORKER_LOST = "WorkerProcessLost"
PROCESSES_ENV = "SYMPHONY_FLEET_PROCESSES"
# A worker's GIL switch interval, seconds.  CPython makes the thread holding the GIL hand it over every 5 ms
# (sys.getswitchinterval()) when another asks; with dozens of I/O threads per worker that forced hand-over cost
# ~45% more context switches and ~10% more CPU per BMC (tests/bench/README.md, issue 27).  The threads still
# hand over at every blocking call (every request), so no BMC waits on it.
WORKER_SWITCH_INTERVAL_S = 0.05

Job = tuple[str, Any, Hashable]


def default_processes() -> int:
    """Worker processes of a batch: ``$SYMPHONY_FLEET_PROCESSES`` when set, else the cores this process may run on
    (``os.sched_getaffinity``, so a container's or taskset's limit counts), at least 1."""
    value = os.environ.get(PROCESSES_ENV)
    if value:
        try:
            return max(1, int(value))
        except ValueError:
            pass  # a typo must not stop the run: fall back to the cores
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def can_fork() -> bool:
    """Whether worker processes can be forked here (POSIX; not Windows)."""
    return hasattr(os, "fork") and "fork" in multiprocessing.get_all_start_methods()


def split_by_key(jobs: Sequence[Job], shards: int) -> list[list[Job]]:
    """``jobs`` (``(host, item, key)``) in at most ``shards`` lists, every job of one key in the same list.

    Keys go, largest group first, to the list with the fewest jobs; each list keeps the jobs' given order.
    Returns only non-empty lists.
    """
    groups: dict[Hashable, list[int]] = {}
    for index, job in enumerate(jobs):
        groups.setdefault(job[2], []).append(index)
    count = max(1, min(int(shards), len(groups)))
    owner: dict[Hashable, int] = {}
    sizes = [0] * count
    for k, members in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[1][0])):
        target = sizes.index(min(sizes))
        owner[k] = target
        sizes[target] += len(members)
    out: list[list[Job]] = [[] for _index in range(count)]
    for job in jobs:
        out[owner[job[2]]].append(job)
    return [shard for shard in out if shard]


def _lost_error(host: str, pid: int, status: Optional[int]) -> dict[str, Any]:
    if status is None:
        how = "could not be waited for"
    else:
        code = os.waitstatus_to_exitcode(status)
        how = "was killed by signal %s" % signal.Signals(-code).name if code < 0 else "exited with code %d" % code
    return {"error": WORKER_LOST, "where": host, "details": {"pid": pid},
            "msg": "the worker process running this node (pid %d) %s before the node finished; its result is "
                   "unknown, nothing was judged" % (pid, how)}


def _child(shard: list[Job], run_shard: Callable[[list[Job], Callable[[Any], None]], None],
           writer: Any) -> None:
    """The child's whole life: run ``shard``, send each outcome, ``os._exit``; never returns."""
    code = 1
    try:
        sys.setswitchinterval(WORKER_SWITCH_INTERVAL_S)
        lock = threading.Lock()

        def send(outcome: Any) -> None:
            try:
                data = pickle.dumps(outcome, protocol=pickle.HIGHEST_PROTOCOL)
            except (pickle.PicklingError, TypeError, AttributeError) as exc:
                # what pickle raises for a value it cannot serialise; the message names the type that would not pickle, never the value (it may hold a secret)
                data = pickle.dumps(type(outcome)(outcome.host, False, error={
                    "error": WORKER_LOST, "where": outcome.host,
                    "msg": "the node's result could not be passed back from its worker process (%s)"
                           % type(exc).__name__}))
            with lock:
                writer.send_bytes(data)

        run_shard(shard, send)
        code = 0
    except BaseException:  # pylint: disable=broad-except
        # whatever happened, the parent sees the pipe close and ends this shard's unsent hosts as lost; the
        # traceback goes to the child's stderr (the module's), so what failed is not lost
        traceback.print_exc()
        code = 70
    finally:
        os._exit(code)


@dataclass
class _Shard:
    pid: int
    reader: Any
    hosts: list[str]


class Shards:
    """Forked workers of one batch (:func:`start_shards`); :meth:`collect` gathers their outcomes."""

    def __init__(self) -> None:
        self.children: list[_Shard] = []
        self.local: list[list[Job]] = []

    def collect(self, results: dict[str, Any], on_done: Callable[[Any], None],
                lost: Callable[[str, dict[str, Any]], Any]) -> None:
        """Receive every child's outcomes into ``results`` (``{host: outcome}``), calling ``on_done(outcome)`` for
        each; the hosts of a child that ended without sending theirs get ``lost(host, error dict)``."""
        open_ = {child.reader: child for child in self.children}
        while open_:
            for ready in multiprocessing.connection.wait(list(open_)):
                child = open_[ready]
                reader = child.reader
                try:
                    outcome = pickle.loads(reader.recv_bytes())  # nosec: from our own forked child
                except (EOFError, OSError, pickle.UnpicklingError, ValueError):
                    del open_[reader]
                    reader.close()
                    status = _wait(child.pid)
                    for host in child.hosts:
                        if host not in results:
                            results[host] = lost(host, _lost_error(host, child.pid, status))
                            on_done(results[host])
                    continue
                results[outcome.host] = outcome
                on_done(outcome)


def _wait(pid: int) -> Optional[int]:
    try:
        return os.waitpid(pid, 0)[1]
    except ChildProcessError:
        return None


def start_shards(shards: list[list[Job]], run_shard: Callable[[list[Job], Callable[[Any], None]], None]) -> Shards:
    """Fork one child per shard running ``run_shard(shard, send)``; returns the :class:`Shards` to collect.

    A shard whose fork fails (no memory, process limit) is kept in ``Shards.local`` for the caller to run on
    its own threads.  Call it before starting threads of your own: a forked child holds a copy of every lock
    as it was.
    """
    out = Shards()
    for shard in shards:
        reader, writer = multiprocessing.Pipe(duplex=False)
        try:
            pid = os.fork()
        except OSError:
            reader.close()
            writer.close()
            out.local.append(shard)
            continue
        if pid == 0:
            reader.close()
            for earlier in out.children:
                earlier.reader.close()
            _child(shard, run_shard, writer)
        writer.close()
        out.children.append(_Shard(pid, reader, [job[0] for job in shard]))
    return out
