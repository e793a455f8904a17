"""Shared pytest fixtures: where ../shared is, a fresh ledger per test, the suite's time scale (timescale.py)."""

import os
import pathlib

import pytest

from timescale import ENV as TIME_SCALE_ENV, TIME_SCALE

ROOT = pathlib.Path(__file__).resolve().parents[1]
SHARED = pathlib.Path(os.environ.get("SYMPHONY_SHARED", ROOT.parent / "shared")).resolve()


@pytest.fixture(scope="session")
def shared():
    """The read-only ../shared folder (fixtures, cases, reference); tests read it in place."""
    if not SHARED.is_dir():
        pytest.fail("../shared not found at %s (set SYMPHONY_SHARED)" % SHARED)
    return SHARED


@pytest.fixture(scope="session")
def mockups(shared):
    return shared / "fixtures" / "mockups"


@pytest.fixture(scope="session")
def tool_outputs(shared):
    return shared / "fixtures" / "tool-outputs"


@pytest.fixture(scope="session")
def repo_root():
    return ROOT


@pytest.fixture
def ledger_path(tmp_path):
    return str(tmp_path / "ledger.sqlite")


def pytest_report_header(config):
    return "time scale: %g (%s; every timeout and timing bound in tests/ is scaled by it)" % (
        TIME_SCALE, TIME_SCALE_ENV)


@pytest.fixture(autouse=True)
def _one_fleet_process_in_unit_tests(request, monkeypatch):
    """Unit tests run fleet batches in one process unless they ask for more.

    The modules default to one worker process per core (``_fleet.pool``); a unit test whose fake BMC records
    requests in a list would then see only what its own process did, and assertions on those lists would pass
    empty.  tests/unit/fleet/test_fleet_processes.py sets the count itself; integration tests keep the default.
    """
    if "tests/unit/" in str(request.node.fspath).replace("\\", "/"):
        monkeypatch.setenv("SYMPHONY_FLEET_PROCESSES", "1")
