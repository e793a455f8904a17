# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one thread-safe ledger: what a stage's worker threads (``_fleet.run_batch``) read and write through.

A SQLite connection belongs to the thread that opened it, so each thread gets its own connection to the same
ledger, opened on first use; the SQLite backend serialises the writes (its busy timeout), and every row is
written the moment it is known, so a run killed half-way keeps what it finished.
"""

from __future__ import annotations

import sqlite3
import threading
from typing import Any, Optional

from .ledger import Ledger, open_ledger


class ThreadLedger(Ledger):
    """A :class:`Ledger` at ``location`` (``open_ledger``'s argument) usable from any thread.

    Every call goes to the calling thread's own connection; :meth:`close` closes all of them (call it once the
    threads are done).
    """

    def __init__(self, location: Optional[str]) -> None:
        self.location = location
        self._local = threading.local()
        self._all: list[Ledger] = []
        self._lock = threading.Lock()

    def _get(self) -> Ledger:
        led = getattr(self._local, "ledger", None)
        if led is None:
            led = self._local.ledger = open_ledger(self.location)
            with self._lock:
                self._all.append(led)
        return led

    def record_results(self, results: Any) -> Any:
        return self._get().record_results(results)

    def record_gate(self, verdict: Any, run_id: str) -> Any:
        return self._get().record_gate(verdict, run_id)

    def record_waiver(self, node: str, stage: str, check: str, who: str, why: str) -> Any:
        return self._get().record_waiver(node, stage, check, who, why)

    def record_event(self, node: Optional[str], kind: str, data: Any) -> Any:
        return self._get().record_event(node, kind, data)

    def current_results(self, node: Optional[str] = None, stage: Optional[str] = None) -> Any:
        return self._get().current_results(node, stage)

    def history(self, node: str, stage: Optional[str] = None, check: Optional[str] = None) -> Any:
        return self._get().history(node, stage, check)

    def current_gates(self, node: Optional[str] = None) -> Any:
        return self._get().current_gates(node)

    def waivers(self, node: str, stage: str) -> Any:
        return self._get().waivers(node, stage)

    def events(self, node: Optional[str] = None, kind: Optional[str] = None) -> Any:
        return self._get().events(node, kind)

    def acquire_leases(self, nodes: Any, holder: Any, ttl_s: float, now: Optional[float] = None) -> Any:
        return self._get().acquire_leases(nodes, holder, ttl_s, now)

    def renew_leases(self, run_id: str, ttl_s: float, now: Optional[float] = None) -> Any:
        return self._get().renew_leases(run_id, ttl_s, now)

    def release_leases(self, run_id: str, nodes: Any = None) -> Any:
        return self._get().release_leases(run_id, nodes)

    def leases(self, node: Optional[str] = None) -> Any:
        return self._get().leases(node)

    def close(self) -> None:
        with self._lock:
            for led in self._all:
                try:
                    led.close()
                except sqlite3.Error:  # a thread's connection already gone: nothing left to release
                    pass
            self._all = []
            self._local = threading.local()
