"""ledger_migrate (issue 19): a SQLite ledger copied into PostgreSQL keeps every row, its id and every gate."""

import pytest

from ansible_collections.symphony.cluster.plugins.module_utils._core import gate_ops as _gate_ops
from ansible_collections.symphony.cluster.plugins.module_utils._core import ledger as _ledger
from ansible_collections.symphony.cluster.plugins.module_utils._core.errors import LedgerError
from ansible_collections.symphony.cluster.plugins.module_utils._core.ledger_copy import copy_ledger


def _fill(location):
    """A ledger as a few stages leave it: a failed then fixed gate, a waiver, an event, a lease."""
    rec = {"ledger": location, "optional": [], "waive": []}
    _gate_ops.gate_record(dict(rec, node="gpu-r01-u02", stage="pre_deployment", run_id="pre-1", checks=[
        {"name": "bmc_login", "status": "fail", "reason": "401 Unauthorized"},
        {"name": "gpu_inventory", "status": "not_run", "depends_on": ["bmc_login"]}]), False)
    _gate_ops.gate_record(dict(rec, node="gpu-r01-u02", stage="pre_deployment", run_id="pre-2", checks=[
        {"name": "bmc_login", "status": "pass"}, {"name": "gpu_inventory", "status": "pass"}]), False)
    _gate_ops.gate_record(dict(rec, node="gpu-r01-u07", stage="burn_in", run_id="bi-1",
                               checks=[{"name": "fio_seq_read", "status": "fail", "reason": "1.1 GB/s < 2.0 GB/s"}],
                               waive=[{"check": "fio_seq_read", "who": "jdoe", "why": "RMA 4411 booked"}]), False)
    led = _ledger.open_ledger(location)
    led.record_event("gpu-r02-u42", "spare_promoted", {"replaces": "gpu-r01-u02", "attempt": 1})
    led.acquire_leases(["gpu-r01-u02"], {"run_id": "old", "host": "controller-1", "pid": 1, "stage": "burn_in"}, 60)
    led.close()


def test_sqlite_into_postgresql_keeps_rows_ids_and_gates(tmp_path, pg_ledger):
    source = str(tmp_path / "ledger.sqlite")
    _fill(source)
    out = copy_ledger(source, pg_ledger)
    assert out["changed"] and out["match"] is True
    assert out["counts"] == {"results": 5, "gates": 3, "waivers": 1, "events": 1}
    src, dst = _ledger.open_ledger(source), _ledger.open_ledger(pg_ledger)
    try:
        assert dst.current_gates() == src.current_gates()
        assert dst.node_position("gpu-r01-u02") == ("pre_deployment", "pass")
        for table in ("results", "gates", "waivers", "events"):
            assert dst.table_rows(table) == src.table_rows(table)  # ids and every column
        assert dst.leases() == []  # ownership is not history: not copied
        # new rows continue after the copied ids
        dst.record_event("gpu-r01-u02", "drain", {"reason": "XID 79"})
        assert dst.table_rows("events")[-1][0] == src.table_rows("events")[-1][0] + 1
    finally:
        src.close()
        dst.close()


def test_a_target_with_rows_is_refused_and_check_mode_writes_nothing(tmp_path, pg_ledger):
    source = str(tmp_path / "ledger.sqlite")
    _fill(source)
    planned = copy_ledger(source, pg_ledger, check_mode=True)
    assert (planned["changed"], planned["match"], planned["gates"]) == (False, None, 2)  # nodes with a gate
    assert not _ledger.ledger_exists(pg_ledger)
    copy_ledger(source, pg_ledger)
    with pytest.raises(LedgerError, match="target ledger is not empty .*gates: 3 rows"):
        copy_ledger(source, pg_ledger)
    with pytest.raises(LedgerError, match="source ledger does not exist"):
        copy_ledger(str(tmp_path / "none.sqlite"), pg_ledger)
