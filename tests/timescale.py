"""The one time scale of the test suite: every timeout, wait and timing bound in tests/ is ``scaled(seconds)``.

``SYMPHONY_TEST_TIME_SCALE`` (a positive number, default 1) stretches them all at once: the literal values were
chosen on the project's 2-core machine, and ``make test-under-load`` runs the suite with a larger factor while
stress-ng keeps that machine busy.  No test asserts how long something took on an absolute clock: where a bound
is needed (a timeout must have cut a run short), it is scaled like the timeout.  The benchmarks (tests/bench)
measure durations; the tests judge behaviour.
"""

import os

ENV = "SYMPHONY_TEST_TIME_SCALE"


def _read():
    raw = os.environ.get(ENV, "1")
    try:
        value = float(raw)
    except ValueError:
        raise SystemExit("%s must be a positive number, got %r" % (ENV, raw)) from None
    if value <= 0:
        raise SystemExit("%s must be a positive number, got %r" % (ENV, raw))
    return value


TIME_SCALE = _read()


def scaled(seconds):
    """``seconds`` times the suite's time scale (a float, for timeouts, waits and timing bounds)."""
    return seconds * TIME_SCALE
