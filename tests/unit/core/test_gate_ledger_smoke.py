from ansible_collections.symphony.cluster.plugins.module_utils._core import gate as g
from ansible_collections.symphony.cluster.plugins.module_utils._core import ledger as lg


def test_blocked_follows_graph_and_gate_fails(ledger_url):
    graph = g.CheckGraph("pre_deployment", [g.CheckSpec("reach"), g.CheckSpec("login", ("reach",)),
                                            g.CheckSpec("gpus", ("login",))])
    results = graph.run("n1", "r1", {"reach": lambda c: g.passed(),
                                     "login": lambda c: g.failed("401 Unauthorized", "fix credentials")})
    assert [r.status for r in results] == ["pass", "fail", "blocked"]
    assert results[2].reason == "blocked by login (fail)"
    verdict = g.compute_gate(graph, results)
    assert (verdict.status, verdict.failing) == ("fail", ["login"])
    ledger = lg.open_ledger(ledger_url)
    ledger.record_results(results)
    ledger.record_gate(verdict, "r1")
    assert ledger.node_position("n1") == ("pre_deployment", "fail")
