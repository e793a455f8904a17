"""The pulsating-power driver on CPU: a fake GPU load (a busy process stopped and resumed with SIGSTOP/SIGCONT),
a fake NVML reading its state, edges within 50 ms of the schedule.  The 50 ms is a real-clock bound, so like every
timing bound of the suite it is scaled (tests/timescale.py); build/bench/burn_in.json measures the unscaled error."""

import signal
import sys

from ansible_collections.symphony.cluster.plugins.module_utils._burnin.pulse import OFF, ON, PulseDriver
from ansible_collections.symphony.cluster.plugins.module_utils._host import telemetry as T
from ansible_collections.symphony.cluster.plugins.module_utils._host.process import spawn
from timescale import scaled

BUSY = "while True: pass"


class FakeNvml:
    """A GPU whose power follows the fake load: 700 W while the process runs, 90 W while it is stopped (SIGSTOP
    leaves it in state T in /proc/<pid>/stat)."""

    name = "fake-nvml"

    def __init__(self, pid):
        self.pid = pid

    def read(self):
        with open("/proc/%d/stat" % self.pid) as handle:
            state = handle.read().rsplit(")", 1)[1].split()[0]
        return [{"gpu": 0, "power_w": 90.0 if state == "T" else 700.0, "temp_c": 60.0, "sm_clock_mhz": 1980.0,
                 "throttle_mask": 0x4 if state != "T" else 0x0}]

    def close(self):
        pass


def test_plan_square_wave_and_ramp_steps():
    plain = PulseDriver(lambda sig: None, 10, 0.5).plan(30)
    assert plain == [(0.0, ON), (5.0, OFF), (10.0, ON), (15.0, OFF), (20.0, ON), (25.0, OFF), (30.0, ON)]
    ramp = PulseDriver(lambda sig: None, 2, 0.5, ramp_s=0.3, step_s=0.1).plan(2)
    # three 0.1 s steps running 1/3, 2/3, then all of the step, then on until 1.0 s
    assert ramp == [(0.0, ON), (0.033333, OFF), (0.1, ON), (0.166667, OFF), (0.2, ON), (1.0, OFF), (2.0, ON)]


def test_driver_edges_within_50_ms_on_a_fake_gpu_load(tmp_path):
    load = spawn([sys.executable, "-c", BUSY])
    sampler = T.Sampler(FakeNvml(load.proc.pid), 0.05).start()
    try:
        driver = PulseDriver(load.signal, period_s=1.0, duty_cycle=0.5, ramp_s=0.2, step_s=0.1,
                             clock=lambda: sampler.clock() - sampler.started)
        wave = driver.run(3.0)
    finally:
        load.stop(grace_s=2)
        samples = sampler.stop()
    assert len(wave.edges) == len(driver.plan(3.0)) and not wave.stopped_early
    assert wave.max_edge_error_ms <= scaled(50), wave.edges
    assert len(wave.windows) == 3 and all(abs((b - a) - 0.5) < scaled(0.05) for a, b in wave.windows)
    # the fake NVML saw the wave: full power inside each on-phase after its ramp, idle in each off-phase
    for a, b in wave.windows:
        inside = [s.power_w for s in samples if a + 0.3 <= s.t_s < b - 0.05]
        after = [s.power_w for s in samples if b + 0.1 <= s.t_s < b + 0.4]
        assert inside and set(inside) == {700.0}, (a, b, inside)
        assert after and set(after) == {90.0}, (b, after)


def test_driver_stops_when_asked_and_leaves_the_load_running():
    sent = []
    clock = iter(x * 0.1 for x in range(1000))
    driver = PulseDriver(sent.append, 1.0, 0.5, clock=lambda: next(clock), sleep=lambda s: None)
    wave = driver.run(10.0, stop=lambda: len(sent) >= 3)
    assert wave.stopped_early and sent[-1] == signal.SIGCONT
