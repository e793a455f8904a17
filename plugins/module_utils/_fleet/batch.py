# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Controller-side batched work over many BMCs (DESIGN.md, "Scale").

One Ansible task hands the play's batch of hosts to :func:`run_batch`, which runs
``work(host, item)`` on a bounded pool of threads with a cap on how many items
may talk to one BMC at once, and gives every host its own :class:`HostOutcome`.
An exception in one host's work, including one we did not foresee, ends that
host only: it is reported for that host with its message, never raised, so one
bad BMC cannot crash the run for thousands of others.

Threads because the work is network-bound: 1 000 BMCs at 100 ms per request keep a
few hundred requests in flight.  But their CPU work (TLS, JSON, reading, judging) shares
one core through the GIL, so with ``processes`` above 1 the hosts are split over forked
worker processes (:mod:`.pool`), the threads divided between them: every host's outcome is
the one the single-process path gives, and a dead worker ends its hosts not-ok, never lost.
"""

from __future__ import annotations

import contextlib
import threading
import time
import traceback
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, Hashable, Iterable, Optional

from .._core.errors import SymphonyError, ValidationError
from .._core.leases import DEFAULT_LEASE_WAIT_S, NodeLeases, OrphanWatch
from .._redfish.argspec import bmc_connection_argument_spec
from .pool import WORKER_LOST, can_fork, default_processes, split_by_key, start_shards

__all__ = ["DEFAULT_PER_BMC", "DEFAULT_WORKERS", "WORKER_LOST", "HostOutcome", "default_processes",
           "fleet_argument_spec", "run_batch", "worker_lost"]

DEFAULT_WORKERS = 64
DEFAULT_PER_BMC = 1


@dataclass
class HostOutcome:
    """What :func:`run_batch` returns per host.

    ``ok``: ``work`` returned; ``value``: its return value; ``error``: the error
    dict (``SymphonyError.to_dict()`` shape) when it raised; ``elapsed_s``:
    seconds in ``work``; ``waited_s``: seconds queued before it started.
    """

    host: str
    ok: bool
    value: Any = None
    error: dict[str, Any] = field(default_factory=dict)
    elapsed_s: float = 0.0
    waited_s: float = 0.0


def worker_lost(outcome: HostOutcome) -> bool:
    """True when ``outcome``'s host ended with its worker process (:data:`WORKER_LOST`): nothing is known of it, so
    its stage records it ``blocked`` with ``outcome.error["msg"]`` as the reason."""
    return not outcome.ok and outcome.error.get("error") == WORKER_LOST


def run_batch(items: Iterable[tuple[str, Any]], work: Callable[[str, Any], Any], workers: int = DEFAULT_WORKERS,
              per_key: int = DEFAULT_PER_BMC, key: Optional[Callable[[Any], Hashable]] = None,
              on_done: Optional[Callable[[HostOutcome], None]] = None,
              clock: Callable[[], float] = time.monotonic,
              leases: Optional[NodeLeases] = None, processes: int = 1) -> dict[str, HostOutcome]:
    """Run ``work(host, item)`` for each ``(host, item)`` in ``items``; return ``{host: HostOutcome}``.

    ``workers``: threads in all (bounded, at least 1, at most the number of items);
    ``per_key``: at most this many items with the same ``key(item)`` run at once
    (the per-BMC cap: two hosts behind one BMC endpoint never overload it);
    ``key``: ``callable(item) -> hashable`` (default: each item is its own key);
    ``on_done``: ``callable(HostOutcome)`` called as each host finishes (from a
    worker thread, or the calling thread with processes; keep it short and thread-safe).
    ``leases``: this run's :class:`NodeLeases`: every host is leased in the ledger before any work, kept
    (heartbeat) while the batch runs and released after; a host another run holds gets no ``work`` and a
    not-ok outcome whose ``error`` is the ``LeaseError`` naming the holder.  Once the playbook that started this
    process is gone (:meth:`NodeLeases.orphaned`), no further host is started: each gets a not-ok outcome whose
    ``error`` is ``InterruptedRunError`` and an ``interrupted`` ledger event, and the leases are released.
    ``processes``: worker processes (:mod:`.pool`; see :func:`default_processes`) sharing the ``workers``
    threads, all items of one key in one process; 1, or where ``fork`` is missing, runs everything here.  The
    outcomes are the same either way (``value`` as pickled back), but for a host whose worker process died:
    not ok, ``error["error"]`` :data:`WORKER_LOST` (:func:`worker_lost`).
    Items are started in the given order as far as the per-key cap allows.
    Raises :class:`ValidationError` on duplicate hosts or non-positive limits.
    """
    items = list(items)
    if workers < 1 or per_key < 1 or processes < 1:
        raise ValidationError("workers (%r), per-BMC cap (%r) and processes (%r) must be at least 1"
                              % (workers, per_key, processes), where="fleet")
    hosts = [pair[0] for pair in items]
    if len(set(hosts)) != len(hosts):
        dup = sorted({h for h in hosts if hosts.count(h) > 1})
        raise ValidationError("hosts listed twice: %s" % ", ".join(dup[:10]), where="fleet")
    key_of: Callable[[Any], Hashable] = key or id
    denied = leases.acquire(hosts) if leases is not None else {}
    jobs = [(host, item, key_of(item)) for host, item in items if host not in denied]
    results: dict[str, HostOutcome] = {host: HostOutcome(host, False, error=exc.to_dict())
                                       for host, exc in denied.items()}
    done: Callable[[HostOutcome], None] = on_done or (lambda outcome: None)
    shards = split_by_key(jobs, processes) if processes > 1 and can_fork() else []
    if len(shards) > 1:
        threads = max(1, -(-int(workers) // len(shards)))

        # a child's parent is this module process, not the playbook: it watches both, and stops starting hosts
        # once either is gone (a SIGKILLed module would otherwise leave its children driving BMCs)
        watch = leases.child_watch() if leases is not None else None

        def run_shard(shard: list[tuple[str, Any, Hashable]], send: Callable[[HostOutcome], None]) -> None:
            _run_threads(shard, work, threads, per_key, send, clock, {}, watch)

        # forked before the lease heartbeat starts: a child holds a copy of every lock as it was at the fork
        forked = start_shards(shards, run_shard)
        with leases if leases is not None else contextlib.nullcontext():
            for shard in forked.local:
                _run_threads(shard, work, threads, per_key, done, clock, results, leases)
            forked.collect(results, done, lambda host, error: HostOutcome(host, False, error=error))
            _record_interrupted(leases, results)
    else:
        with leases if leases is not None else contextlib.nullcontext():
            _run_threads(jobs, work, workers, per_key, done, clock, results, leases)
            _record_interrupted(leases, results)
    return {host: results[host] for host in hosts}


def _record_interrupted(leases: Optional[NodeLeases], results: dict[str, HostOutcome]) -> None:
    if leases is not None:
        leases.record_interrupted([h for h, o in results.items() if o.error.get("error") == "InterruptedRunError"])


def _run_threads(jobs: list[tuple[str, Any, Hashable]], work: Callable[[str, Any], Any], workers: int, per_key: int,
                 on_done: Callable[[HostOutcome], None], clock: Callable[[], float],
                 results: dict[str, HostOutcome], leases: Optional[OrphanWatch] = None) -> None:
    """:func:`run_batch`'s thread pool over ``jobs`` (``(host, item, key)``), outcomes into ``results``.

    ``leases`` (a :class:`NodeLeases`, or in a forked shard its :meth:`NodeLeases.child_watch`) is checked for an
    orphaned run between hosts."""
    pending = deque(jobs)
    running: dict[Hashable, int] = {}
    lock = threading.Condition()
    start = clock()

    def take() -> Optional[tuple[str, Any, Hashable]]:
        # Caller holds the lock.  First pending item whose BMC has room.
        for index, (host, item, k) in enumerate(pending):
            if running.get(k, 0) < per_key:
                del pending[index]
                running[k] = running.get(k, 0) + 1
                return host, item, k
        return None

    def worker() -> None:
        while True:
            with lock:
                job = take()
                while job is None:
                    if not pending:
                        return
                    lock.wait()
                    job = take()
            host, item, k = job
            began = clock()
            try:
                if leases is not None and leases.orphaned():
                    # the safe point: between nodes.  The playbook died; start nothing more (a rerun resumes)
                    raise leases.interrupted_error(host)
                outcome = HostOutcome(host, True, work(host, item))
            except SymphonyError as exc:
                outcome = HostOutcome(host, False, error=exc.to_dict())
            except Exception as exc:  # pylint: disable=broad-except
                # A bug for this host must not end the run for the others; it is reported as one.
                outcome = HostOutcome(host, False, error={
                    "error": type(exc).__name__, "msg": "internal error: %s: %s" % (type(exc).__name__, exc),
                    "where": host, "details": {"traceback": traceback.format_exc(limit=6)}})
            outcome.elapsed_s = clock() - began
            outcome.waited_s = began - start
            with lock:
                results[host] = outcome
                running[k] -= 1
                lock.notify_all()
            on_done(outcome)

    count = max(1, min(int(workers), len(pending)))
    threads = [threading.Thread(target=worker, name="symphony-fleet-%d" % i, daemon=True) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


# The modules' side: the fleet options documented in doc_fragments/fleet.py, on top of _redfish.argspec's.
_TWIN_BATCH_SPEC: dict[str, dict[str, Any]] = {
    "nodes": {"type": "list", "elements": "dict"},
    "twin": {"type": "path"},
    "hosts": {"type": "list", "elements": "str"},
    "sku_dir": {"type": "path", "required": True},
    "max_concurrency": {"type": "int", "default": 4},
    "per_bmc": {"type": "int", "default": DEFAULT_PER_BMC},
    "registry_dir": {"type": "path"},
}

# AnsibleModule keyword arguments of the twin-batch modules: nodes from O(nodes) or from O(twin), not both.
TWIN_BATCH_MODULE_KWARGS: dict[str, list[tuple[str, str]]] = {"mutually_exclusive": [("nodes", "twin")], "required_one_of": [("nodes", "twin")]}


def fleet_argument_spec(options=None, twin_batch=False, workers=DEFAULT_WORKERS):
    """The argument spec of a controller-side fleet module (doc fragments ``symphony.cluster.redfish`` and
    ``symphony.cluster.fleet``).

    Returns a new dict: the one BMC connection spec (``_redfish.argspec.bmc_connection_argument_spec``),
    ``bmc_map``, ``workers`` (default ``workers`` threads), ``processes`` (default None: one per core) and
    ``lease_wait_s`` (:data:`_core.leases.DEFAULT_LEASE_WAIT_S`), with ``twin_batch`` also
    ``nodes``/``twin``/``hosts``/``sku_dir``/``max_concurrency``/``per_bmc``/``registry_dir`` (fragment
    ``symphony.cluster.fleet.TWIN_BATCH``), then the module's own ``options`` (name -> spec), which may
    not redefine a shared one.  Raises :class:`ValueError` if one does.
    """
    spec = bmc_connection_argument_spec()
    spec["bmc_map"] = {"type": "path"}
    spec["workers"] = {"type": "int", "default": workers}
    spec["processes"] = {"type": "int"}
    spec["lease_wait_s"] = {"type": "float", "default": DEFAULT_LEASE_WAIT_S}
    if twin_batch:
        spec.update((name, dict(option)) for name, option in _TWIN_BATCH_SPEC.items())
    options = options or {}
    clash = sorted(set(spec) & set(options))
    if clash:
        raise ValueError("module options redefine shared fleet options: %s" % ", ".join(clash))
    spec.update(options)
    return spec
