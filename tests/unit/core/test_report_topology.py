"""The handoff report's topology section: switch -> nodes from what the cabling check found (not the plan)."""

from ansible_collections.symphony.cluster.plugins.module_utils._core import gate as g
from ansible_collections.symphony.cluster.plugins.module_utils._core import report as _report
from ansible_collections.symphony.cluster.plugins.module_utils._core import report_html as _report_html
from ansible_collections.symphony.cluster.plugins.module_utils._core.ledger import open_ledger
from ansible_collections.symphony.cluster.plugins.module_utils._fabric.topology import run_topology


def _cabling(ledger, node, found):
    ports = [{"port": "rail%d" % i, "expected": ["leaf%d" % (i + 1), 1], "found": f} for i, f in enumerate(found)]
    graph = g.CheckGraph("burn_in", [g.CheckSpec("cabling")])
    results = graph.run(node, "bi1", {"cabling": lambda c: g.passed(evidence={"ports": ports})})
    ledger.record_results(results)
    ledger.record_gate(g.compute_gate(graph, results), "bi1")


def test_topology_section_lists_found_switches(ledger_path):
    ledger = open_ledger(ledger_path)
    _cabling(ledger, "lab1", [["leaf1", "swp1"], ["leaf2", "swp1"]])
    _cabling(ledger, "lab2", [["leaf2", "swp2"], ["leaf1", "swp2"]])  # swapped: found, whatever the plan said
    _cabling(ledger, "lab3", [["leaf1", "swp3"], None])  # a port nothing was heard on places no node
    data = _report.collect(ledger)
    assert data["topology"] == {"leaf1": ["lab1", "lab2", "lab3"], "leaf2": ["lab1", "lab2"]}
    page = _report_html.render_html(data)
    assert "<h2 id='topology'>Topology (verified cabling)</h2>" in page and "lab1, lab2, lab3" in page


def test_slurm_topology_reads_the_same_found_topology_from_the_ledger(ledger_path, tmp_path):
    ledger = open_ledger(ledger_path)
    _cabling(ledger, "lab1", [["leaf1", "swp1"], ["leaf2", "swp1"]])
    _cabling(ledger, "lab2", [["leaf2", "swp2"], ["leaf1", "swp2"]])
    _cabling(ledger, "lab3", [["leaf1", "swp3"], None])
    out = run_topology({"from_ledger": True, "ledger": ledger_path, "dest": str(tmp_path / "topology.conf"),
                        "slurm_version": "slurm 22.05.8"}, check_mode=True)
    assert out["content"].splitlines()[1:] == ["SwitchName=leaf1 Nodes=lab3", "SwitchName=leaf1+leaf2 Nodes=lab[1-2]"]
