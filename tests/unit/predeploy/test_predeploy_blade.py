"""The audit of one node of the emulated blade chassis (skus/blade_h100_2node.yml, issue 15): one BMC serves
Systems/Node0 and Systems/Node1, each node is judged on its own system and parts.

The emulator's BMC answers in-process through requests-mock (no sockets), read by the real client and reader.
"""

import pytest

from ansible_collections.symphony.cluster.plugins.module_utils._core.gate import FAIL, PASS
from ansible_collections.symphony.cluster.plugins.module_utils._core.sku import load_skus
from ansible_collections.symphony.cluster.plugins.module_utils._predeploy.checks_health import parse_cutoff
from ansible_collections.symphony.cluster.plugins.module_utils._predeploy.graph import check_graph
from ansible_collections.symphony.cluster.plugins.module_utils._predeploy.judge import judge
from ansible_collections.symphony.cluster.plugins.module_utils._predeploy.observe import audit_reader, observe_node
from ansible_collections.symphony.cluster.plugins.module_utils._predeploy.stage import StageSettings

from symphony_emulator.bmc import BMC
from symphony_emulator.tree import Spec

from .test_predeploy_expand import URL, _serve

PER_NODE = ("chassis_serial", "system_model", "cpus", "memory", "gpus", "psus", "fans_thermal", "health_rollup",
            "firmware_inventory", "power_control")


@pytest.fixture(scope="module")
def sku(repo_root):
    return load_skus(str(repo_root / "skus"))["blade_h100_2node"]


def _node(system_id):
    return {"hostname": "blade-%s" % system_id.lower(), "site": "s1", "rack": "r1", "u": 5,
            "sku": "blade_h100_2node", "serial": "ENC-0001", "bmc_mac": "aa:bb:cc:dd:ee:05",
            "bmc_address": "10.0.0.5", "bmc_system_id": system_id}


def audit(sku, node, defects=(), bmc_node=None):
    """Judge ``node`` on the BMC built for ``bmc_node`` (default: ``node``) with ``defects``."""
    bmc = BMC(Spec(bmc_node or node, sku, list(defects)), "admin", "pw", {"*": {}}, wall=lambda: 1.7e9)
    mocker, _log = _serve(bmc)
    settings = StageSettings(username="admin", password="pw", retries=0)
    with mocker:
        obs, _warnings = observe_node(node, {"url": URL, "source": "map"}, {}, settings,
                                      reader=audit_reader(node, sku), probe=lambda h, p, t: (True, ""))
    results, gate = judge(node, sku, obs, "run-blade", check_graph(sku, optional=("lease_captured",)),
                          parse_cutoff("all"))
    return {r.check: r for r in results}, gate, obs


@pytest.mark.parametrize("system_id", ["Node0", "Node1"])
def test_each_blade_node_passes_on_its_own_parts(sku, system_id):
    res, _gate, obs = audit(sku, _node(system_id))
    assert [s["id"] for s in obs.inventory.systems] == [system_id]
    for check in PER_NODE + ("gpu_pcie_links",):
        assert res[check].status == PASS, (check, res[check].reason)
    assert res["gpus"].observed["count"] == 4   # per node, not the BMC's 8


def test_a_gpu_missing_on_one_node_fails_that_node_only(sku):
    # the BMC built for Node1 carries Node1's defect; Node0 on the same BMC stays whole
    defects = [{"kind": "missing_gpu", "index": 2}]
    res1, _gate, _obs = audit(sku, _node("Node1"), defects)
    assert res1["gpus"].status == FAIL and res1["gpus"].reason.startswith("expected 4 × H100 80GB HBM3, found 3")
    res0, _gate, _obs = audit(sku, _node("Node0"), defects, bmc_node=_node("Node1"))
    assert res0["gpus"].status == PASS, res0["gpus"].reason
