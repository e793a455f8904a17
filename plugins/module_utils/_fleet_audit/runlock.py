# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One fleet audit at a time, and an interrupted one finished by the next run without duplicate rows.

The audit runs from a schedule (cron, a systemd timer, an AWX schedule: README "Scheduling the fleet audit"), so two
runs can overlap.  The run takes, for each of its hosts, a lease in the ledger on the pseudo-node
``fleet_audit:run:<host>`` (:data:`RUN_LOCK` + host; the same leases as a stage's node leases, ``_core.leases``:
DESIGN.md "A run owns its nodes", under names of their own so the audit's own node leases are not in the way; AWX
job slices audit disjoint hosts and do not stop each other), held for the playbook: its holder pid is
the ``ansible-playbook`` process (:func:`playbook_pid`), so a killed playbook frees it at once on this host, and one
on another host (an AWX execution node) frees it when its ``ttl_s`` runs out.  A second run while the lock is held
stops with :class:`LeaseError` naming the holder.

Every run is a ``fleet_audit_run`` event (node NULL): ``started`` with its run id, ``finished`` at the end.  A run
that started and never finished was interrupted; the next run that gets the lock resumes it: it keeps its run id,
skips the nodes whose results that run already recorded (``done``) and does not inject again where it injected
(``injected``), so rerunning an interrupted run writes no row twice.  A resumed run with nothing left of this play's
hosts is closed and a new one starts.
"""

from __future__ import annotations

import os
import socket
from typing import Any, Dict, List, Mapping, Optional, Sequence

from .._core.errors import LeaseError
from .._core.gate import new_run_id
from .._core.leases import holder_words
from .._core.ledger import Ledger

STAGE = "fleet_audit"
RUN_LOCK = "fleet_audit:run:"   # + host: the leases' nodes, names no twin hostname can have (RFC 1123: no colon)
RUN_EVENT = "fleet_audit_run"
DEFAULT_LOCK_TTL_S = 3600.0
_PLAYBOOK = ("ansible-playbook",)


def _cmdline(pid: int) -> List[str]:
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as handle:
            return [a.decode("utf-8", "replace") for a in handle.read().split(b"\0") if a]
    except OSError:
        return []


def _ppid(pid: int) -> Optional[int]:
    try:
        with open("/proc/%d/stat" % pid, encoding="ascii", errors="replace") as handle:
            return int(handle.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def playbook_pid(start: Optional[int] = None, levels: int = 12) -> int:
    """The outermost ``ansible-playbook`` process above ``start`` (this process): Ansible's workers are forks of
    it with the same command line, and they end with each task, so the outermost one is the playbook.  Without
    one (a module run outside a playbook), the furthest ancestor within three levels (init left out)."""
    pid = os.getpid() if start is None else start
    found: Optional[int] = None
    seen: List[int] = []
    while pid and pid > 1 and len(seen) < levels:
        seen.append(pid)
        if any(os.path.basename(arg) in _PLAYBOOK for arg in _cmdline(pid)[:2]):
            found = pid
        pid = _ppid(pid) or 0
    if found:
        return found
    return seen[min(3, len(seen) - 1)] if seen else os.getpid()


def _runs(ledger: Ledger) -> List[Dict[str, Any]]:
    return [dict(e["data"] or {}, recorded_at=e["recorded_at"]) for e in ledger.events(kind=RUN_EVENT)]


def interrupted_run(ledger: Ledger, hosts: Sequence[str] = ()) -> Optional[str]:
    """The run id of the last run over any of ``hosts`` (any run when empty) that started and never finished."""
    runs = _runs(ledger)
    finished = {r.get("run_id") for r in runs if r.get("state") == "finished"}
    mine = set(hosts)
    started = [r.get("run_id") for r in runs if r.get("state") == "started"
               and (not mine or mine & set(r.get("hosts") or ()))]
    return next((run for run in reversed(started) if run and run not in finished), None)


def recorded_nodes(ledger: Ledger, run_id: str, hosts: Sequence[str]) -> List[str]:
    """Those of ``hosts`` whose fleet_audit results run ``run_id`` recorded."""
    current = ledger.current_results(stage=STAGE)
    done = {r.node for r in current if r.run_id == run_id}
    return [h for h in hosts if h in done]


def injected_nodes(ledger: Ledger, run_id: str) -> List[str]:
    """The nodes run ``run_id`` injected a fault on (its ``fault_injected`` events)."""
    return sorted({e["node"] for e in ledger.events(kind="fault_injected")
                   if (e["data"] or {}).get("run_id") == run_id})


def lock(ledger: Ledger, hosts: Sequence[str], ttl_s: float = DEFAULT_LOCK_TTL_S,
         holder: Optional[Mapping[str, Any]] = None) -> Dict[str, Any]:
    """Take the run lock for a fleet audit of ``hosts``; LeaseError naming the holder when another run has it.

    Returns ``{run_id, lock_id, resumed, done: [hosts already recorded by the resumed run], injected: [nodes it
    injected on], holder}``; ``holder`` (``{host, pid}``) defaults to this host and :func:`playbook_pid`.
    """
    lock_id = new_run_id("audit-lock")
    who = {"run_id": lock_id, "host": socket.gethostname(), "pid": playbook_pid(), "stage": STAGE}
    who.update({k: v for k, v in (holder or {}).items() if k in ("host", "pid")})
    taken = ledger.acquire_leases([RUN_LOCK + h for h in hosts], who, ttl_s)
    if taken:
        ledger.release_leases(lock_id)   # the hosts granted before the refusal
        first = sorted(taken)[0]
        raise LeaseError("another fleet audit is running: %s, on %d of this run's hosts (%s first); this run "
                         "overlaps it and stops without auditing (it runs again at the next scheduled time)"
                         % (holder_words(taken[first]), len(taken), first[len(RUN_LOCK):]),
                         where=first, details=dict(taken[first]))
    run_id, done, injected, resumed = interrupted_run(ledger, hosts), [], [], False
    if run_id:
        done = recorded_nodes(ledger, run_id, hosts)
        injected = injected_nodes(ledger, run_id)
        if hosts and len(done) == len(set(hosts)):
            # nothing of this play is left to that run: close it, start a new one
            ledger.record_event(None, RUN_EVENT, {"state": "finished", "run_id": run_id, "lock_id": lock_id,
                                                  "note": "closed by the next run: every host was recorded"})
            run_id, done, injected = None, [], []
        else:
            resumed = True
            ledger.record_event(None, RUN_EVENT, {"state": "resumed", "run_id": run_id, "lock_id": lock_id,
                                                  "done": done, "host": who["host"], "pid": who["pid"]})
    if not run_id:
        run_id = new_run_id("audit")
        ledger.record_event(None, RUN_EVENT, {"state": "started", "run_id": run_id, "lock_id": lock_id,
                                              "hosts": list(hosts), "host": who["host"], "pid": who["pid"]})
    return {"run_id": run_id, "lock_id": lock_id, "resumed": resumed, "done": done, "injected": injected,
            "holder": {"host": who["host"], "pid": who["pid"]}}


def unlock(ledger: Ledger, run_id: str, lock_id: str) -> Dict[str, Any]:
    """The run finished: record it and release the lock (only this run's)."""
    ledger.record_event(None, RUN_EVENT, {"state": "finished", "run_id": run_id, "lock_id": lock_id})
    ledger.release_leases(lock_id)
    return {"run_id": run_id, "finished": True}
