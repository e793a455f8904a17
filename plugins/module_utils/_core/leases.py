# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A run owns its nodes (DESIGN.md, "A run owns its nodes"): node leases in the ledger, with a heartbeat.

Two runs on one node (a rerun started while a killed playbook's module still drives the BMC, two operators, two
AWX jobs) double uploads and resets and fail healthy nodes.  So the process that does a node's work leases it in
the ledger first; the lease names the holder (run id, host, pid, stage) and expires unless its heartbeat renews
it, so a holder that vanished (power loss, another host's crash) frees the node after ``ttl_s``.  A holder on this
host whose process is gone frees it at once.  Another run on a leased node waits up to ``wait_s``, then stops for
that node with :class:`LeaseError` naming the holder.

A module whose playbook died keeps running (Ansible starts it in a session of its own, so ``kill -9`` of the
playbook's process group misses it): :meth:`NodeLeases.orphaned` sees its parent processes gone, the fleet batch
starts no further node (``interrupted`` in the ledger, :meth:`NodeLeases.record_interrupted`) and the leases are
released, so a rerun resumes at once.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Sequence

from .errors import InterruptedRunError, LeaseError, LedgerError
from .ledger import Ledger, open_ledger

# Seconds a lease lives without a heartbeat; the heartbeat renews it every third of that.  Long enough that a
# controller busy with a thousand BMCs still renews in time, short enough that a node a dead controller held is
# free again within minutes.
DEFAULT_TTL_S = 120.0

# Seconds a stage waits for a node another run holds before it stops for that node.  A relaunch right after a
# cancel (AWX's cancel, a SIGKILLed playbook) finds the dead job's module still finishing the nodes it was on; it
# stops within one node's work, so the relaunch waits for it instead of leaving the node unjudged.  As long as a
# vanished holder's lease lives (:data:`DEFAULT_TTL_S`).
DEFAULT_LEASE_WAIT_S = DEFAULT_TTL_S


def holder_words(lease: Dict[str, Any], now: Optional[float] = None) -> str:
    """``run R on host H pid P (stage S), heartbeat Ns ago, expires in Ms`` for a lease row."""
    now = time.time() if now is None else now
    return "run %s on host %s pid %s (stage %s), heartbeat %.0f s ago, expires in %.0f s" % (
        lease["run_id"], lease["host"], lease["pid"], lease.get("stage") or "?", now - lease["heartbeat_at"],
        lease["expires_at"] - now)


def ancestors(levels: int = 3) -> List[int]:
    """The pids of this process's parent, grandparent, ... (``levels`` of them, init and the kernel left out), from
    Linux ``/proc/<pid>/stat`` (field 4, ppid; proc(5)); only the parent where /proc is not there."""
    out: List[int] = []
    pid = os.getppid()
    while pid > 1 and len(out) < levels:
        out.append(pid)
        try:
            with open("/proc/%d/stat" % pid, encoding="ascii", errors="replace") as handle:
                # "pid (comm) state ppid ...": comm may hold spaces and parentheses, so split after the last ")"
                pid = int(handle.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
    return out


class OrphanWatch:
    """Tells a process whether the playbook that started its run is gone: :meth:`orphaned`, and the error of a
    node not started because of it, :meth:`interrupted_error`.  ``parent_pid``: the parent this process had when
    the run began; ``ancestors``: further pids that must stay alive (the AnsiballZ shell, Ansible's worker, and
    for a forked worker process the module process itself)."""

    def __init__(self, run_id: str, parent_pid: int, watched: Sequence[int]) -> None:
        self.run_id = run_id
        self.parent_pid = parent_pid
        self.ancestors = list(watched)

    def orphaned(self) -> bool:
        """True once the playbook that started this process is gone: the parent pid changed (the kernel hands an
        orphan to init or a subreaper) or a recorded ancestor (the AnsiballZ shell, Ansible's worker) exited."""
        if os.getppid() != self.parent_pid:
            return True
        for pid in self.ancestors:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return True
            except PermissionError:  # alive, another user's
                continue
        return False

    def interrupted_error(self, node: str) -> InterruptedRunError:
        """The error of a node this run did not start because its playbook died (run id, pid in ``details``)."""
        return InterruptedRunError("run %s (pid %d) stopped before %s: the playbook that started it is gone; rerun "
                                   "the stage" % (self.run_id, os.getpid(), node), where=node,
                                   details={"run_id": self.run_id, "pid": os.getpid()})


class NodeLeases(OrphanWatch):
    """The leases of one run: :meth:`acquire` nodes, a heartbeat thread while in ``with``, release on exit.

    ``location``: the ledger (``open_ledger``'s argument); ``run_id``/``stage``: this run; ``ttl_s``: lease life
    without a heartbeat (seconds); ``wait_s``: how long :meth:`acquire` waits for another run's lease to end;
    ``poll_s``: how often it looks again.
    """

    def __init__(self, location: Optional[str], run_id: str, stage: str, ttl_s: float = DEFAULT_TTL_S,
                 wait_s: float = 0.0, poll_s: float = 2.0, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        self.location = location
        self.run_id = run_id
        self.holder: Dict[str, Any] = {"run_id": run_id, "host": socket.gethostname(), "pid": os.getpid(),
                                       "stage": stage}
        self.ttl_s, self.wait_s, self.poll_s = float(ttl_s), float(wait_s), float(poll_s)
        self.clock, self.sleep = clock, sleep
        super().__init__(run_id, os.getppid(), ancestors())
        self.held: List[str] = []
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None

    def _with_ledger(self, call: Callable[[Ledger], Any]) -> Any:
        # its own connection each time: the heartbeat thread may not share the caller's SQLite connection
        ledger = open_ledger(self.location)
        try:
            return call(ledger)
        finally:
            ledger.close()

    def acquire(self, nodes: Sequence[str]) -> Dict[str, LeaseError]:
        """Lease ``nodes``; returns ``{node: LeaseError}`` for those another run still holds after ``wait_s``."""
        deadline = self.clock() + self.wait_s
        wanted = list(nodes)
        while True:
            taken = self._with_ledger(lambda led: led.acquire_leases(wanted, self.holder, self.ttl_s))
            self.held += [n for n in wanted if n not in taken]
            wanted = [n for n in wanted if n in taken]
            if not wanted or self.clock() >= deadline:
                break
            self.sleep(min(self.poll_s, max(0.0, deadline - self.clock())))
        return {node: LeaseError("node %s is leased by %s; not touched by this run (wait for it, or stop that run)"
                                 % (node, holder_words(taken[node])), where=node, details=dict(taken[node]))
                for node in wanted}

    def child_watch(self) -> OrphanWatch:
        """The :class:`OrphanWatch` for a process this one forks: its parent is this process, which must stay
        alive, and so must this process's parent and ancestors (a worker process of a SIGKILLed module, or of an
        orphaned one, stops starting nodes like the module would)."""
        return OrphanWatch(self.run_id, os.getpid(), [self.parent_pid] + self.ancestors)

    def record_interrupted(self, nodes: Sequence[str]) -> None:
        """Record an ``interrupted`` ledger event for each of ``nodes`` (not started; no result, no gate)."""
        if nodes:
            self._with_ledger(lambda led: [led.record_event(node, "interrupted", {
                "run_id": self.run_id, "stage": self.holder["stage"], "pid": os.getpid(),
                "reason": "the playbook that started the run is gone; the node was not started"}) for node in nodes])

    def _beat(self) -> None:
        while not self._stop.wait(self.ttl_s / 3.0):
            try:
                self._with_ledger(lambda led: led.renew_leases(self.run_id, self.ttl_s))
            except LedgerError:
                pass  # a busy or briefly unreadable ledger: the next beat, well inside ttl_s, tries again

    def __enter__(self) -> "NodeLeases":
        self._thread = threading.Thread(target=self._beat, name="symphony-lease-heartbeat", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        if self.held:
            self._with_ledger(lambda led: led.release_leases(self.run_id, self.held))
            self.held = []
