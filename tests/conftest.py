"""Shared pytest fixtures: where ../shared is, a fresh ledger per test (SQLite, or PostgreSQL on a throw-away
server), the suite's time scale (timescale.py)."""

import os
import pathlib
import uuid

import pytest

from symphony_awx.pg import PgError, PgServer
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


# The PostgreSQL ledger tests run on a throw-away server (tools/symphony_awx/pg.py) under build/pg/<xdist worker>,
# one per xdist worker.  A server that cannot start FAILS those tests: only SYMPHONY_TEST_PG=skip, said out loud,
# skips them.
PG_OPT_OUT = "SYMPHONY_TEST_PG"


@pytest.fixture(scope="session")
def pg_server(worker_id):
    """The session's PostgreSQL server (``symphony_awx.pg.PgServer``), its password exported for every client."""
    if os.environ.get(PG_OPT_OUT) == "skip":
        pytest.skip("PostgreSQL ledger tests skipped: %s=skip" % PG_OPT_OUT)
    try:
        server = PgServer(ROOT / "build" / "pg" / worker_id).start()
    except (PgError, OSError) as exc:
        pytest.fail("the throw-away PostgreSQL server did not start (set %s=skip to run without it): %s"
                    % (PG_OPT_OUT, exc))
    saved = {k: os.environ.get(k) for k in server.env}
    os.environ.update(server.env)
    yield server
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
    server.stop(remove=True)


@pytest.fixture
def pg_ledger(request):
    """A fresh, empty PostgreSQL ledger URL (its own schema in the session's server)."""
    server = request.getfixturevalue("pg_server")
    return server.create_schema("t_" + uuid.uuid4().hex[:12])


@pytest.fixture(params=["sqlite", "postgresql"])
def ledger_url(request, tmp_path):
    """A fresh ledger location on each backend: a SQLite path, then a PostgreSQL URL (``pg_ledger``)."""
    if request.param == "sqlite":
        return str(tmp_path / "ledger.sqlite")
    return request.getfixturevalue("pg_ledger")


def pytest_report_header(config):
    return "time scale: %g (%s; every timeout and timing bound in tests/ is scaled by it)" % (
        TIME_SCALE, TIME_SCALE_ENV)
