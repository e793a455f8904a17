"""Ledger, on both backends (SQLite and PostgreSQL): 8 processes writing at once lose and tear nothing, each batch
is one contiguous transaction; migrations are versioned and a newer schema is refused."""

import multiprocessing
import sqlite3

import psycopg
import pytest

from ansible_collections.symphony.cluster.plugins.module_utils._core import ledger as _ledger
from ansible_collections.symphony.cluster.plugins.module_utils._core import ledger_pg as _ledger_pg
from ansible_collections.symphony.cluster.plugins.module_utils._core.errors import LedgerError
from ansible_collections.symphony.cluster.plugins.module_utils._core.gate import CheckResult, GateVerdict

WRITERS, BATCHES, ROWS = 8, 25, 6
PAYLOAD = "x" * 2000  # big enough that a torn write would show


def _writer(path, writer, start):
    start.wait()
    ledger = _ledger.open_ledger(path)  # every process opens (and migrates) a brand-new ledger at once
    for batch in range(BATCHES):
        node = "w%d" % writer
        ledger.record_results([
            CheckResult(node=node, stage="burn_in", check="c%d" % row, status="pass", run_id="%d-%d" % (writer, batch),
                        observed={"writer": writer, "batch": batch, "row": row, "pad": PAYLOAD},
                        evidence={"sha": "%d/%d/%d" % (writer, batch, row)})
            for row in range(ROWS)])
        ledger.record_gate(GateVerdict(node, "burn_in", "pass", "all required checks passed"), "%d-%d" % (writer, batch))
    ledger.close()


def test_eight_processes_write_concurrently(ledger_url):
    ctx = multiprocessing.get_context("fork")
    start = ctx.Event()
    procs = [ctx.Process(target=_writer, args=(ledger_url, w, start)) for w in range(WRITERS)]
    for proc in procs:
        proc.start()
    start.set()
    for proc in procs:
        proc.join(60)
    assert [p.exitcode for p in procs] == [0] * WRITERS
    ledger = _ledger.open_ledger(ledger_url)
    try:
        for writer in range(WRITERS):
            history = ledger.history("w%d" % writer)
            assert len(history) == BATCHES * ROWS  # nothing lost
            for res in history:
                batch, row = int(res.run_id.split("-")[1]), int(res.check[1:])
                assert res.observed == {"writer": writer, "batch": batch, "row": row, "pad": PAYLOAD}  # not torn
                assert res.evidence == {"sha": "%d/%d/%d" % (writer, batch, row)}
            # each batch landed as one contiguous transaction
            ids = [r[0] for r in ledger._query("SELECT id FROM results WHERE node = ? ORDER BY id", ("w%d" % writer,))]
            for b in range(BATCHES):
                chunk = ids[b * ROWS:(b + 1) * ROWS]
                assert chunk == list(range(chunk[0], chunk[0] + ROWS))
        gates = ledger._query("SELECT COUNT(*) FROM gates")[0][0]
        assert gates == WRITERS * BATCHES
        assert len(ledger.current_results()) == WRITERS * ROWS
        assert ledger.schema_version() == _ledger.SCHEMA_VERSION
    finally:
        ledger.close()


def _make_old(location, version):
    """A ledger at schema ``version`` made by hand with that backend's first migrations (none for a version from
    the future); returns its location."""
    known = version <= _ledger.SCHEMA_VERSION
    if not _ledger.is_postgres(location):
        db = sqlite3.connect(location)
        for script in _ledger._MIGRATIONS[:version] if known else []:
            db.executescript(script)
        db.execute("PRAGMA user_version = %d" % version)
        if version and known:
            db.execute("INSERT INTO results (run_id, node, stage, check_name, status, reason, recorded_at)"
                       " VALUES ('r0', 'n1', 'pre_deployment', 'bmc_login', 'fail', '401', 1.0)")
        db.commit()
        db.close()
        return "sqlite:///" + location
    params, _password = _ledger_pg.connection_params(location)
    with psycopg.connect(autocommit=True, **params) as conn:
        for script in _ledger_pg.MIGRATIONS[:version] if known else []:
            for statement in script.split(";"):
                if statement.strip():
                    conn.execute(statement)
        conn.execute("CREATE TABLE symphony_schema (version INTEGER NOT NULL)")
        conn.execute("INSERT INTO symphony_schema (version) VALUES (%s)", (version,))
        if version and known:
            conn.execute("INSERT INTO results (run_id, node, stage, check_name, status, reason, recorded_at)"
                         " VALUES ('r0', 'n1', 'pre_deployment', 'bmc_login', 'fail', '401', 1.0)")
    return location


def test_migration_from_version_1_keeps_rows(ledger_url):
    location = _make_old(ledger_url, 1)
    ledger = _ledger.open_ledger(location)
    try:
        assert ledger.schema_version() == _ledger.SCHEMA_VERSION == 3
        assert [(r.check, r.status, r.reason) for r in ledger.current_results("n1")] == [("bmc_login", "fail", "401")]
        ledger.record_event("n1", "drain", {"reason": "XID 79"})  # the table migration 2 added
        assert ledger.events("n1")[0]["data"] == {"reason": "XID 79"}
        ledger.record_results([CheckResult(node="n1", stage="pre_deployment", check="bmc_login", status="pass")])
        assert ledger.current_results("n1")[0].status == "pass"  # the id sequence continues after the old row
    finally:
        ledger.close()


def test_newer_schema_is_refused(ledger_url):
    location = _make_old(ledger_url, 99)
    with pytest.raises(LedgerError, match="ledger schema version 99 is newer than this collection's 3"):
        _ledger.open_ledger(location)


def test_both_backends_have_the_same_schema_versions():
    assert len(_ledger_pg.MIGRATIONS) == len(_ledger._MIGRATIONS) == _ledger.SCHEMA_VERSION


def test_unknown_backends_are_refused():
    with pytest.raises(LedgerError, match="unknown ledger URL scheme"):
        _ledger.open_ledger("mysql://x/y")
    with pytest.raises(LedgerError, match="unknown ledger URL scheme"):
        _ledger.ledger_exists("mysql://x/y")
    # a PostgreSQL URL missing its "//" is refused, not made a SQLite file called "postgresql:host/db"
    for typo in ("postgresql:ledger.example.internal/symphony", "postgres:/x", "sqlite:ledger.sqlite"):
        with pytest.raises(LedgerError, match="unknown ledger URL scheme"):
            _ledger.open_ledger(typo)
        with pytest.raises(LedgerError, match="unknown ledger URL scheme"):
            _ledger.ledger_exists(typo)


def test_a_path_holding_a_colon_is_still_a_sqlite_ledger(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _ledger.open_ledger("./run:1.sqlite").close()
    _ledger.open_ledger(str(tmp_path / "a:b.sqlite")).close()
    assert (tmp_path / "run:1.sqlite").is_file() and (tmp_path / "a:b.sqlite").is_file()


def test_default_location(monkeypatch, tmp_path):
    monkeypatch.setenv("SYMPHONY_LEDGER", str(tmp_path / "env.sqlite"))
    assert _ledger.default_ledger_path() == str(tmp_path / "env.sqlite")
    monkeypatch.delenv("SYMPHONY_LEDGER")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert _ledger.default_ledger_path() == str(tmp_path / ".local" / "share" / "symphony" / "ledger.sqlite")


def test_exists_creates_nothing(ledger_url):
    assert _ledger.ledger_exists(ledger_url) is False
    assert _ledger.ledger_exists(ledger_url) is False  # asking did not create it
    _ledger.open_ledger(ledger_url).close()
    assert _ledger.ledger_exists(ledger_url) is True


def test_table_rows_in_id_order(ledger_url):
    ledger = _ledger.open_ledger(ledger_url)
    try:
        ledger.record_waiver("n1", "burn_in", "fio_seq_read", "alice", "vendor RMA 1234 accepted")
        ledger.record_event("n1", "drain", {"reason": "XID 79"})
        assert [r[1:6] for r in ledger.table_rows("waivers")] == [
            ("n1", "burn_in", "fio_seq_read", "alice", "vendor RMA 1234 accepted")]
        assert [r[1:4] for r in ledger.table_rows("events")] == [("n1", "drain", '{"reason": "XID 79"}')]
        with pytest.raises(LedgerError, match="unknown ledger table 'leases'"):
            ledger.table_rows("leases")
    finally:
        ledger.close()
