"""Localisation: bad interface vs bad link vs ambiguous, the adaptive scheduler, ledger records."""

import random

from ansible_collections.symphony.cluster.plugins.module_utils._fabric import localise as L
from ansible_collections.symphony.cluster.plugins.module_utils._fabric import pairs as F
from ansible_collections.symphony.cluster.plugins.module_utils._fabric import schedules as S
from ansible_collections.symphony.cluster.plugins.module_utils._core.ledger import open_ledger


def simulate(fabric, bad):
    def run_round(number, pairs, tests):
        for a, b in pairs:
            hit = fabric.components(a, b) & bad
            tests.append(F.PairTest(a, b, F.FAIL if hit else F.OK, 1.0 if hit else 16.0, "Gb/s", number))
        return tests
    return run_round


NODES = ["lab1", "lab2", "lab3", "lab4"]


def test_round_robin_bad_interface_blames_only_that_node():
    fabric = F.PairPathFabric()
    out = S.run_schedule(NODES, simulate(fabric, {(F.INTERFACE, "lab3")}), "round_robin", fabric)
    loc = out["localisation"]
    assert out["rounds"] == 3
    assert loc.bad_interfaces() == ["lab3"]
    assert loc.bad_links() == []
    assert {n: v["verdict"] for n, v in loc.interfaces.items()} == {
        "lab1": "good", "lab2": "good", "lab3": "bad", "lab4": "good"}


def test_round_robin_bad_link_blames_the_link_not_its_nodes():
    fabric = F.PairPathFabric({"lab1": "leaf01:1", "lab2": "leaf01:2"})
    out = S.run_schedule(NODES, simulate(fabric, {(F.LINK, "leaf01:1~leaf01:2")}), "round_robin", fabric)
    loc = out["localisation"]
    assert loc.bad_interfaces() == []
    assert loc.bad_links() == ["leaf01:1~leaf01:2"]
    assert loc.links["leaf01:1~leaf01:2"]["info"]["nodes"] == ["lab1", "lab2"]
    assert all(v["verdict"] == "good" for v in loc.interfaces.values())


def test_tri_ring_separates_interface_from_link():
    fabric = F.PairPathFabric()
    loc = S.run_schedule(["A", "B", "C"], simulate(fabric, {(F.INTERFACE, "A")}), "tri_ring", fabric)["localisation"]
    assert loc.bad_interfaces() == ["A"]
    loc = S.run_schedule(["A", "B", "C"], simulate(fabric, {(F.LINK, "A~B")}), "tri_ring", fabric)["localisation"]
    assert loc.bad_links() == ["A~B"] and loc.bad_interfaces() == []


def test_single_failure_without_other_evidence_is_ambiguous():
    tests = [F.PairTest("a", "b", F.FAIL, 1.0, "Gb/s", 1)]
    loc = L.localise(tests, F.PairPathFabric(), ["a", "b", "c"])
    assert loc.bad == set()
    assert sorted(map(tuple, loc.ambiguous[0]["candidates"])) == [
        ("interface", "a"), ("interface", "b"), ("link", "a~b")]
    assert loc.interfaces["a"]["verdict"] == "ambiguous"
    assert loc.interfaces["c"]["verdict"] == "untested"


def test_error_tests_are_not_evidence():
    tests = [F.PairTest("a", "b", F.ERROR, None, "Gb/s", 1, reason="iperf3 not found on a")]
    loc = L.localise(tests, F.PairPathFabric(), ["a", "b"])
    out = L.node_outcomes(loc, tests)
    assert out["a"]["status"] == "not_run" and "iperf3 not found on a" in out["a"]["reason"]


def test_judge_relative_threshold_uses_upper_quartile():
    tests = [F.PairTest("a", "b", F.OK, v, "Gb/s") for v in (15.0, 16.0, 14.5, 0.9, 1.0, 1.1)]
    verdict = L.judge(tests, min_fraction=0.8)
    assert verdict["basis"] == "relative" and verdict["reference"] == 15.0
    assert [t.status for t in tests] == ["ok", "ok", "ok", "fail", "fail", "fail"]
    assert L.judge(tests, floor=15.5)["threshold"] == 15.5
    assert [t.status for t in tests][:2] == ["fail", "ok"]


def test_adaptive_leaf_spine_localises_interfaces_and_uplinks():
    nodes = ["n%03d" % i for i in range(128)]
    fabric = F.LeafSpineFabric.uniform(nodes, 16, 8)
    rng = random.Random(3)
    truth = {(F.INTERFACE, n) for n in rng.sample(nodes, 3)}
    truth |= {(F.LINK, k) for k in rng.sample(list(fabric.coverage_links()), 3)}
    out = S.run_schedule(nodes, simulate(fabric, truth), "adaptive", fabric, seed=5)
    assert out["localisation"].bad == truth
    assert out["rounds"] <= 4


def test_adaptive_pair_path_retests_suspects_with_known_good_partners():
    nodes = ["n%02d" % i for i in range(16)]
    fabric = F.PairPathFabric()
    out = S.run_schedule(nodes, simulate(fabric, {(F.INTERFACE, "n07")}), "adaptive", fabric, seed=1)
    loc = out["localisation"]
    assert loc.bad_interfaces() == ["n07"]
    assert out["rounds"] == 2
    failing_partners = [t for t in out["tests"] if "n07" in (t.a, t.b)]
    assert len(failing_partners) == 2 and all(t.status == F.FAIL for t in failing_partners)


def test_outcomes_and_link_events_go_to_the_ledger(ledger_path):
    from ansible_collections.symphony.cluster.plugins.module_utils._core.gate import CheckResult
    fabric = F.PairPathFabric({"lab1": "leaf01:1", "lab2": "leaf01:2"})
    truth = {(F.LINK, "leaf01:1~leaf01:2"), (F.INTERFACE, "lab4")}
    out = S.run_schedule(NODES, simulate(fabric, truth), "round_robin", fabric)
    threshold = L.judge(out["tests"])
    outcomes = L.node_outcomes(out["localisation"], out["tests"], threshold, fabric.cabling)
    assert outcomes["lab4"]["status"] == "fail"
    assert "known-good partners" in outcomes["lab4"]["reason"]
    assert outcomes["lab1"]["status"] == "pass"
    ledger = open_ledger(ledger_path)
    ledger.record_results([CheckResult(node=n, stage="burn_in", check=L.CHECK_INTERFACE, status=o["status"],
                                       reason=o["reason"], evidence=o["evidence"], run_id="r1")
                           for n, o in outcomes.items()])
    for node, data in L.link_events(out["localisation"], "r1"):
        ledger.record_event(node, L.EVENT_LINK, data)
    current = {r.node: r.status for r in ledger.current_results(stage="burn_in")}
    assert current == {"lab1": "pass", "lab2": "pass", "lab3": "pass", "lab4": "fail"}
    events = ledger.events(kind=L.EVENT_LINK)
    assert [e["node"] for e in events] == ["lab1", "lab2"]
    assert events[0]["data"]["link"] == "leaf01:1~leaf01:2" and events[0]["data"]["verdict"] == "bad"


def test_links_keyed_by_the_demo_twins_cabling(repo_root):
    from ansible_collections.symphony.cluster.plugins.module_utils._fabric.rounds import cabling_from_twin
    from ansible_collections.symphony.cluster.plugins.module_utils._core.twin import load_twin
    twin = load_twin(str(repo_root / "inventories" / "demo" / "demo.twin.yml"))
    nodes = list(twin.nodes)[:4]
    cabling = cabling_from_twin(twin, nodes, rail=1)
    assert set(cabling.values()) <= set(twin.links())
    assert all(v.startswith("leaf-rail1:") for v in cabling.values())
    fabric = F.PairPathFabric(cabling)
    a, b = nodes[0], nodes[1]
    key = fabric.route(a, b)[0]
    out = S.run_schedule(nodes, simulate(fabric, {(F.LINK, key)}), "round_robin", fabric)
    assert out["localisation"].bad_links() == [key]
    assert key == "~".join(sorted([cabling[a], cabling[b]]))
    assert out["localisation"].links[key]["info"]["cabling"] == {a: cabling[a], b: cabling[b]}
