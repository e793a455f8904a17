"""Ledger: 8 processes writing at once lose and tear nothing; migrations are versioned."""

import multiprocessing
import sqlite3

import pytest

from ansible_collections.symphony.cluster.plugins.module_utils._core import ledger as _ledger
from ansible_collections.symphony.cluster.plugins.module_utils._core.errors import LedgerError
from ansible_collections.symphony.cluster.plugins.module_utils._core.gate import CheckResult, GateVerdict

WRITERS, BATCHES, ROWS = 8, 25, 6
PAYLOAD = "x" * 2000  # big enough that a torn write would show


def _writer(path, writer, start):
    start.wait()
    ledger = _ledger.open_ledger(path)  # every process opens (and migrates) a brand-new file at once
    for batch in range(BATCHES):
        node = "w%d" % writer
        ledger.record_results([
            CheckResult(node=node, stage="burn_in", check="c%d" % row, status="pass", run_id="%d-%d" % (writer, batch),
                        observed={"writer": writer, "batch": batch, "row": row, "pad": PAYLOAD},
                        evidence={"sha": "%d/%d/%d" % (writer, batch, row)})
            for row in range(ROWS)])
        ledger.record_gate(GateVerdict(node, "burn_in", "pass", "all required checks passed"), "%d-%d" % (writer, batch))
    ledger.close()


def test_eight_processes_write_concurrently(tmp_path):
    path = str(tmp_path / "ledger.sqlite")
    ctx = multiprocessing.get_context("fork")
    start = ctx.Event()
    procs = [ctx.Process(target=_writer, args=(path, w, start)) for w in range(WRITERS)]
    for proc in procs:
        proc.start()
    start.set()
    for proc in procs:
        proc.join(60)
    assert [p.exitcode for p in procs] == [0] * WRITERS
    ledger = _ledger.open_ledger(path)
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
        assert ledger._query("PRAGMA user_version")[0][0] == _ledger.SCHEMA_VERSION
    finally:
        ledger.close()


def test_migration_from_version_1_keeps_rows(tmp_path):
    path = str(tmp_path / "old.sqlite")
    db = sqlite3.connect(path)
    db.executescript(_ledger._MIGRATIONS[0])
    db.execute("PRAGMA user_version = 1")
    db.execute("INSERT INTO results (run_id, node, stage, check_name, status, reason, recorded_at)"
               " VALUES ('r0', 'n1', 'pre_deployment', 'bmc_login', 'fail', '401', 1.0)")
    db.commit()
    db.close()
    ledger = _ledger.open_ledger("sqlite:///" + path)
    try:
        assert ledger._query("PRAGMA user_version")[0][0] == _ledger.SCHEMA_VERSION == 3
        assert [(r.check, r.status, r.reason) for r in ledger.current_results("n1")] == [("bmc_login", "fail", "401")]
        ledger.record_event("n1", "drain", {"reason": "XID 79"})  # the table migration 2 added
        assert ledger.events("n1")[0]["data"] == {"reason": "XID 79"}
    finally:
        ledger.close()


def test_newer_schema_and_unknown_backends_are_refused(tmp_path):
    path = str(tmp_path / "new.sqlite")
    db = sqlite3.connect(path)
    db.execute("PRAGMA user_version = 99")
    db.close()
    with pytest.raises(LedgerError, match="ledger schema version 99 is newer than this collection's 3"):
        _ledger.open_ledger(path)
    with pytest.raises(LedgerError, match="PostgreSQL ledger backend is not available"):
        _ledger.open_ledger("postgresql://ledger.example.internal/symphony")
    with pytest.raises(LedgerError, match="unknown ledger URL scheme"):
        _ledger.open_ledger("mysql://x/y")


def test_default_location(monkeypatch, tmp_path):
    monkeypatch.setenv("SYMPHONY_LEDGER", str(tmp_path / "env.sqlite"))
    assert _ledger.default_ledger_path() == str(tmp_path / "env.sqlite")
    monkeypatch.delenv("SYMPHONY_LEDGER")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert _ledger.default_ledger_path() == str(tmp_path / ".local" / "share" / "symphony" / "ledger.sqlite")
