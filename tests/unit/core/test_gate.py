"""Gate computation, blocked derivation and the gate_record / gate_info logic (check mode writes nothing)."""


import pytest

from ansible_collections.symphony.cluster.plugins.module_utils._core import gate as g
from ansible_collections.symphony.cluster.plugins.module_utils._core import gate_ops as _gate_ops
from ansible_collections.symphony.cluster.plugins.module_utils._core.errors import GateError
from ansible_collections.symphony.cluster.plugins.module_utils._core.ledger import ledger_exists, open_ledger

# The pre-deployment chain: reach -> login -> {gpus, firmware}; sel independent of login order-wise.
CHECKS = [
    {"name": "bmc_reachable", "status": "pass"},
    {"name": "bmc_login", "status": "fail", "depends_on": ["bmc_reachable"], "reason": "401 Unauthorized",
     "remediation": "fix the BMC credentials"},
    {"name": "gpu_inventory", "status": "pass", "depends_on": ["bmc_login"]},
    {"name": "firmware_inventory", "status": "not_run", "depends_on": ["bmc_login"], "reason": "skipped"},
    {"name": "power_control", "status": "not_run", "depends_on": ["bmc_reachable"], "reason": "no Reset action"},
]


def test_blocked_is_derived_from_the_graph():
    results, verdict = _gate_ops.evaluate("gpu-r01-u02", "pre_deployment", CHECKS, "run-1")
    status = {r.check: (r.status, r.reason) for r in results}
    # a reported pass whose dependency failed is blocked, naming the dependency
    assert status["gpu_inventory"] == ("blocked", "blocked by bmc_login (fail)")
    assert status["firmware_inventory"] == ("blocked", "blocked by bmc_login (fail)")
    assert status["power_control"] == ("not_run", "no Reset action")
    assert (verdict.status, verdict.failing) == ("fail", ["bmc_login"])
    assert verdict.reason == "bmc_login: 401 Unauthorized"


def test_gate_precedence_fail_blocked_not_run_pass():
    graph = g.CheckGraph("burn_in", [g.CheckSpec("a"), g.CheckSpec("b", ("a",)), g.CheckSpec("c")])

    def gate(sa, sb, sc):
        res = [g.CheckResult("n", "burn_in", "a", sa), g.CheckResult("n", "burn_in", "b", sb),
               g.CheckResult("n", "burn_in", "c", sc, reason="tool absent")]
        return g.compute_gate(graph, g.derive_blocked(graph, res)).status

    assert gate("fail", "pass", "pass") == "fail"
    assert gate("not_run", "pass", "pass") == "blocked"   # b blocked by a (not_run) outranks a's not_run
    assert gate("pass", "pass", "not_run") == "not_run"   # a required check that did not run keeps it closed
    assert gate("pass", "pass", "pass") == "pass"


def test_optional_checks_and_waivers_open_the_gate():
    checks = [{"name": "dcgm_diag", "status": "not_run", "reason": "no GPU on this lab host"},
              {"name": "fio_seq_read", "status": "fail", "reason": "1200 MB/s < 5500 MB/s"},
              {"name": "cpu_stress", "status": "pass"}]
    verdict = _gate_ops.evaluate("n", "burn_in", checks, "r", optional=["dcgm_diag", "gpu_burn"])[1]
    assert (verdict.status, verdict.failing) == ("fail", ["fio_seq_read"])
    verdict = _gate_ops.evaluate("n", "burn_in", checks, "r", optional=["dcgm_diag"], waivers=["fio_seq_read"])[1]
    assert (verdict.status, verdict.waived) == ("pass", ["fio_seq_read"])


def test_inconsistent_graphs_raise():
    with pytest.raises(GateError, match="blocked but all of its dependencies passed"):
        _gate_ops.evaluate("n", "burn_in", [{"name": "a", "status": "pass"},
                                            {"name": "b", "status": "blocked", "depends_on": ["a"]}], "r")
    with pytest.raises(GateError, match="depends on unknown check 'zz'"):
        _gate_ops.evaluate("n", "burn_in", [{"name": "a", "status": "pass", "depends_on": ["zz"]}], "r")
    with pytest.raises(GateError, match="dependency cycle: a -> b -> a"):
        g.CheckGraph("s", [g.CheckSpec("a", ("b",)), g.CheckSpec("b", ("a",))])
    with pytest.raises(GateError, match="unknown stage 'burnin'"):
        _gate_ops.evaluate("n", "burnin", CHECKS, "r")
    with pytest.raises(GateError, match="status 'ok' is not one of"):
        _gate_ops.evaluate("n", "burn_in", [{"name": "a", "status": "ok"}], "r")


def test_graph_run_blocks_without_calling():
    called = []
    graph = g.CheckGraph("pre_deployment", [g.CheckSpec("reach"), g.CheckSpec("login", ("reach",))])
    results = graph.run("n", "r", {"reach": lambda c: g.failed("timed out after 60 s", "check the BMC cable"),
                                   "login": lambda c: called.append(1) or g.passed()})
    assert [r.status for r in results] == ["fail", "blocked"] and not called


def test_gate_record_check_mode_writes_nothing(ledger_url):
    ledger = ledger_url
    params = {"ledger": ledger, "node": "gpu-r01-u02", "stage": "pre_deployment", "checks": CHECKS,
              "run_id": "run-a", "optional": [], "waive": []}
    checked = _gate_ops.gate_record(params, check_mode=True)
    assert checked["changed"] is False and not ledger_exists(ledger)
    real = _gate_ops.gate_record(params, check_mode=False)
    assert real["changed"] is True and real["gate"] == checked["gate"]
    assert [r["status"] for r in real["results"]] == [r["status"] for r in checked["results"]]
    info = _gate_ops.gate_info({"ledger": ledger, "node": None, "stage": None, "history": False, "check": None})
    assert info["positions"] == {"gpu-r01-u02": {"stage": "pre_deployment", "gate": "fail",
                                                 "reason": "bmc_login: 401 Unauthorized"}}
    assert len(info["results"]) == 5


def test_waiver_is_a_new_row_and_history_keeps_everything(ledger_url):
    ledger = ledger_url
    base = {"ledger": ledger, "node": "n1", "stage": "burn_in", "optional": [], "waive": []}
    failing = [{"name": "fio_seq_read", "status": "fail", "reason": "slow drive"}]
    _gate_ops.gate_record(dict(base, run_id="r1", checks=failing), False)
    waive = [{"check": "fio_seq_read", "who": "jdoe", "why": "RMA booked"}]
    out = _gate_ops.gate_record(dict(base, run_id="r2", checks=failing, waive=waive), False)
    assert out["gate"]["status"] == "pass" and out["gate"]["waived"] == ["fio_seq_read"]
    with _closing(open_ledger(ledger)) as led:
        assert led.waivers("n1", "burn_in") == ["fio_seq_read"]
        assert [r.run_id for r in led.history("n1")] == ["r1", "r2"]
    # the waiver stays in the ledger: a third run without `waive` still passes
    out = _gate_ops.gate_record(dict(base, run_id="r3", checks=failing), False)
    assert out["gate"]["status"] == "pass"
    info = _gate_ops.gate_info({"ledger": ledger, "node": "n1", "stage": "burn_in", "history": True,
                                "check": "fio_seq_read"})
    assert [h["run_id"] for h in info["history"]] == ["r1", "r2", "r3"]


def test_gate_info_missing_ledger_is_empty_and_not_created(ledger_url):
    ledger = ledger_url
    info = _gate_ops.gate_info({"ledger": ledger, "node": None, "stage": None, "history": False, "check": None})
    assert info == {"changed": False, "results": [], "gates": {}, "positions": {}}
    assert not ledger_exists(ledger)


class _closing:
    def __init__(self, ledger):
        self.ledger = ledger

    def __enter__(self):
        return self.ledger

    def __exit__(self, *exc):
        self.ledger.close()


def test_to_dict_is_asdict_and_copies_deep():
    """Issue 27: CheckResult/GateVerdict.to_dict skip asdict's recursion for plain values and give what it gives."""
    import collections
    import dataclasses

    Pair = collections.namedtuple("Pair", "a b")

    @dataclasses.dataclass
    class Part:
        slot: str
        sizes: list

    class Tagged(dict):
        pass

    evidence = {"fault": "controller", "parts": [Part("GPU0", [1, 2])], "pair": Pair(1, [3]), "t": (1, "x"),
                "tagged": Tagged(k=[1]), "n": None, 3: 4.5, "nested": {"a": [{"b": True}]}}
    res = g.CheckResult("n1", "pre_deployment", "c", "fail", "why", expected={"x": [1]}, observed=[{"y": 2}],
                        evidence=evidence, started=1.0, finished=2.0, run_id="r")
    out = res.to_dict()
    assert out == dataclasses.asdict(res) and list(out) == list(dataclasses.asdict(res))
    # the exact classes kept (not a base class): a deep copy, not a plain tuple
    assert out["evidence"]["pair"].__class__ is Pair and out["evidence"]["tagged"].__class__ is Tagged
    assert out["evidence"]["parts"] == [{"slot": "GPU0", "sizes": [1, 2]}]
    out["evidence"]["nested"]["a"][0]["b"] = False
    out["observed"][0]["y"] = 3
    assert res.evidence["nested"]["a"][0]["b"] is True and res.observed == [{"y": 2}]
    verdict = g.GateVerdict("n1", "pre_deployment", "fail", "r", failing=["c"], waived=[])
    assert verdict.to_dict() == dataclasses.asdict(verdict)
    assert verdict.to_dict()["failing"] is not verdict.failing
