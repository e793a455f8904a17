# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The pulsating-power load driver: a square wave of SIGCONT/SIGSTOP on a GPU load's process group.

Each ``period_s`` the load runs for ``duty_cycle × period_s`` and is stopped for the rest (EDPp-like power
transients, as a training step's compute/communication phases make them).  ``ramp_s`` (from the SKU) spreads
the start of each on-phase over sub-second steps of ``step_s``: in step *k* of *n* the load runs for
``(k+1)/n`` of the step, so the power rises over ``ramp_s`` instead of at once.  Every edge is sent at its
planned time (seconds from the start) and the time it was actually sent is kept, so a test can prove the
wave it applied (:attr:`PulseRun.max_edge_error_ms`).
"""

from __future__ import annotations

import signal
import time
from dataclasses import dataclass, field
from typing import Callable

ON, OFF = signal.SIGCONT, signal.SIGSTOP


@dataclass
class PulseRun:
    """What the driver did: ``edges`` ``[(planned_s, actual_s, signal)]``, main ``windows`` ``[(on_s, off_s)]``
    (actual times, the ramp included), ``stopped_early`` when ``stop()`` ended it."""

    edges: list[tuple[float, float, int]] = field(default_factory=list)
    windows: list[tuple[float, float]] = field(default_factory=list)
    stopped_early: bool = False

    @property
    def max_edge_error_ms(self) -> float | None:
        """Largest |actual - planned| over the edges, milliseconds (None without edges)."""
        if not self.edges:
            return None
        return round(max(abs(actual - planned) for planned, actual, _sig in self.edges) * 1000.0, 3)


class PulseDriver:
    """Square-wave driver.  ``send(sig)`` signals the load; ``period_s``/``duty_cycle``/``ramp_s``/``step_s``
    in seconds (``ramp_s`` ≤ the on-phase); ``clock`` gives seconds (the sampler's time base when the windows
    are to be compared with telemetry), ``sleep`` waits."""

    def __init__(self, send: Callable[[int], None], period_s: float, duty_cycle: float, ramp_s: float = 0.0,
                 step_s: float = 0.1, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep) -> None:
        if not (0 < duty_cycle < 1) or period_s <= 0:
            raise ValueError("need period_s > 0 and 0 < duty_cycle < 1")
        self.send, self.period_s, self.duty_cycle = send, float(period_s), float(duty_cycle)
        self.ramp_s = min(float(ramp_s), self.period_s * self.duty_cycle)
        self.step_s = float(step_s)
        self.clock, self.sleep = clock, sleep

    def plan(self, duration_s: float) -> list[tuple[float, int]]:
        """Planned edges ``[(t_s, signal)]`` from 0 to ``duration_s``, ending with the load running."""
        edges: list[tuple[float, int]] = []
        start = 0.0
        on_s = self.period_s * self.duty_cycle
        while start < duration_s:
            steps = int(round(self.ramp_s / self.step_s)) if self.ramp_s > 0 else 0
            for k in range(steps):
                t = start + k * self.step_s
                edges += [(t, ON), (t + self.step_s * (k + 1) / steps, OFF)]
            # a full-length last ramp step would stop and restart at once: drop that pair
            if steps and edges[-1][0] >= start + steps * self.step_s - 1e-9:
                edges.pop()
            else:
                edges.append((start + steps * self.step_s, ON))
            if start + on_s < duration_s:
                edges.append((start + on_s, OFF))
            start += self.period_s
        edges = [(round(t, 6), sig) for t, sig in edges if t < duration_s]
        if edges and edges[-1][1] == OFF:
            edges.append((round(duration_s, 6), ON))
        return edges

    def run(self, duration_s: float, stop: Callable[[], bool] = lambda: False, poll_s: float = 0.2) -> PulseRun:
        """Send :meth:`plan`'s edges on time; checks ``stop()`` at least every ``poll_s`` seconds.  The load is
        left running (SIGCONT) when it returns."""
        out = PulseRun()
        t0 = self.clock()
        window_start: float | None = None
        try:
            for planned, sig in self.plan(duration_s):
                while True:
                    left = planned - (self.clock() - t0)
                    if left <= 0:
                        break
                    if stop():
                        out.stopped_early = True
                        return out
                    self.sleep(min(left, poll_s))
                self.send(sig)
                actual = self.clock() - t0
                out.edges.append((planned, actual, sig))
                # the closing SIGCONT at duration_s leaves the load running; it opens no on-phase
                if sig == ON and window_start is None and planned < duration_s:
                    window_start = t0 + actual
                elif sig == OFF and window_start is not None and self._is_main_off(planned):
                    out.windows.append((window_start, t0 + actual))
                    window_start = None
        finally:
            if window_start is not None:
                out.windows.append((window_start, self.clock()))
            self.send(ON)
        return out

    def _is_main_off(self, planned: float) -> bool:
        """Whether an OFF edge at ``planned`` ends an on-phase (not a ramp step)."""
        phase = planned % self.period_s
        return abs(phase - self.period_s * self.duty_cycle) < 1e-6
