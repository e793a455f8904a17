"""The audit's read of a generated BMC (hgx_h100_supermicro) with and without $expand.

The emulator's BMC answers in-process through requests-mock (no sockets): the real RedfishClient and inventory
reader run against it.  With $expand (MaxLevels 2, as the Supermicro capture advertises) the audit costs 18
requests; member by member it costs 157; the normalised inventory and every check result are the same.
"""


import pytest
import requests_mock

from ansible_collections.symphony.cluster.plugins.module_utils._predeploy.checks_health import parse_cutoff
from ansible_collections.symphony.cluster.plugins.module_utils._predeploy.graph import check_graph
from ansible_collections.symphony.cluster.plugins.module_utils._predeploy.judge import judge
from ansible_collections.symphony.cluster.plugins.module_utils._predeploy.observe import audit_client, observe_node
from ansible_collections.symphony.cluster.plugins.module_utils._predeploy.stage import StageSettings
from ansible_collections.symphony.cluster.plugins.module_utils._redfish.client import RedfishClient
from ansible_collections.symphony.cluster.plugins.module_utils._core.sku import load_skus
from ansible_collections.symphony.cluster.plugins.module_utils._core.twin import load_twin

from symphony_emulator.bmc import BMC
from symphony_emulator.tree import Spec

URL = "https://bmc-expand.test"


@pytest.fixture(scope="module")
def fleet(repo_root):
    skus = load_skus(str(repo_root / "skus"))
    twin = load_twin(str(repo_root / "inventories" / "demo" / "demo.twin.yml"), skus.keys())
    node = twin.nodes[sorted(twin.nodes)[0]]
    return node, skus[node["sku"]]


def _serve(bmc):
    mocker = requests_mock.Mocker()
    log = []

    def match(request):
        from requests_mock.response import create_response
        path, _sep, query = request.path_url.partition("?")
        from urllib.parse import unquote
        log.append((request.method, unquote(request.path_url), request.headers.get("Connection")))
        reply = bmc.handle(request.method, unquote(path), unquote(query), request.headers, request.body or b"")
        return create_response(request, status_code=reply.status, headers=reply.headers, content=reply.body)
    mocker.add_matcher(match)
    return mocker, log


def audit(fleet, faults, defects=()):
    node, sku = fleet
    bmc = BMC(Spec(node, sku, list(defects)), "admin", "pw", {"*": dict(faults)}, wall=lambda: 1.7e9)
    mocker, log = _serve(bmc)
    settings = StageSettings(username="admin", password="pw", retries=0, max_concurrency=1)
    with mocker:
        obs, _warnings = observe_node(node, {"url": URL, "source": "map"}, {}, settings,
                                      probe=lambda host, port, timeout: (True, ""))
    results, gate = judge(node, sku, obs, "run-expand", check_graph(sku, optional=("lease_captured",)),
                          parse_cutoff("all"))
    return obs, {r.check: (r.status, r.reason) for r in results}, gate, log


def _summary(inv):
    return sorted((c.kind, c.id, c.model, c.serial, c.health, c.ports, c.speed_gbps, c.pcie_width, c.pcie_gen,
                   c.memory_gib, c.capacity_gb) for c in inv.components)


def test_expand_reads_the_same_inventory_in_far_fewer_requests(fleet):
    obs, res, gate, log = audit(fleet, {})
    flat, res_flat, gate_flat, log_flat = audit(fleet, {"expand_max_levels": 0})
    assert obs.errors == {} and flat.errors == {}
    assert obs.requests == 18 and flat.requests == 157
    assert len(log) == 18 and not any("$expand" in path for _m, path, _c in log_flat)
    assert ("GET", "/redfish/v1/Chassis/1/NetworkAdapters?$expand=*($levels=2)", None) in log
    assert _summary(obs.inventory) == _summary(flat.inventory)
    assert len(obs.inventory.of_kind("gpu")) == 8 and len(obs.inventory.of_kind("dimm")) == 32
    assert sorted(r.id for r in obs.inventory.readings) == sorted(r.id for r in flat.inventory.readings)
    assert [f.id for f in obs.inventory.firmware] == [f.id for f in flat.inventory.firmware]
    # no lease source here: address_reserved is blocked by lease_captured (not_run), every other check passes
    assert res == res_flat and gate.status == gate_flat.status == "blocked"
    assert [c for c, (status, _r) in res.items() if status != "pass"] == ["lease_captured", "address_reserved"]


def test_expand_sees_seeded_defects(fleet):
    _obs, res, _gate, _log = audit(fleet, {}, defects=[{"kind": "missing_gpu", "index": 3}])
    assert res["gpus"] == ("fail", "expected 8 × H100 80GB HBM3, found 7; slot GPU3 empty")
    _obs, res, _gate, _log = audit(fleet, {}, defects=[{"kind": "pcie_downtrain", "index": 5, "width": 8, "gen": 5}])
    assert res["gpus"][0] == "pass"
    assert res["gpu_pcie_links"] == ("fail", "PCIe link downtrained: GPU5 at x8 Gen5, expected x16 Gen5")


def test_keep_alive_client_drops_connection_close(fleet):
    node, sku = fleet
    bmc = BMC(Spec(node, sku, []), "admin", "pw", {}, wall=lambda: 1.7e9)
    mocker, log = _serve(bmc)
    with mocker:
        with audit_client(URL, "admin", "pw") as c:
            c.get("/redfish/v1/Systems/1")
        with RedfishClient(URL, "admin", "pw") as plain:
            plain.get("/redfish/v1/Systems/1")
    assert c.keep_alive is True and plain.keep_alive is False
    assert [conn for _m, path, conn in log if path == "/redfish/v1/Systems/1"] == [None, "close"]
