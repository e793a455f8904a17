"""Twin validation: the demo twin, planned addresses, and every error naming file, node and JSON path."""

import copy

import pytest

from ansible_collections.symphony.cluster.plugins.module_utils._core import twin as _twin
from ansible_collections.symphony.cluster.plugins.module_utils._core.errors import TwinError
from ansible_collections.symphony.cluster.plugins.module_utils._core.schema import load_yaml_file
from ansible_collections.symphony.cluster.plugins.module_utils._core.inventory import TWIN_KEYS

SKUS = ("hgx_h100_supermicro", "dgx_h100")


def _node(host, u, serial, mac, **extra):
    return dict({"hostname": host, "u": u, "sku": "hgx_h100_supermicro", "serial": serial, "bmc_mac": mac}, **extra)


@pytest.fixture
def doc():
    return {"twin_version": 1, "sites": [{"name": "s1", "racks": [
        {"name": "r01", "bmc_subnet": "10.10.1.0/24", "bmc_first_host": 10, "nodes": [
            _node("n1", 2, "S1", "3c:ec:ef:11:02:01"),
            _node("n2", 7, "S2", "3C-EC-EF-11-07-01", inband_address="10.20.1.17")]},
        {"name": "r02", "bmc_subnet": "10.10.2.0/28", "nodes": [
            _node("n3", 4, "S3", "3c:ec:ef:12:04:01", spare=True)]}]}]}


def _error(data, path="site.twin.yml"):
    with pytest.raises(TwinError) as err:
        _twin.validate_twin(data, path, known_skus=SKUS)
    return str(err.value)


def test_demo_twin(repo_root):
    """The shipped demo twin validates; its planned BMC addresses are network + bmc_first_host + U."""
    import ipaddress
    path = str(repo_root / "inventories" / "demo" / "demo.twin.yml")
    data = load_yaml_file(path, TwinError)
    twin = _twin.validate_twin({k: data[k] for k in TWIN_KEYS if k in data}, path, known_skus=SKUS)
    racks = {r["name"]: r for site in data["sites"] for r in site["racks"]}
    assert sorted(racks) == ["r01", "r02"] and twin.sku_dir == str(repo_root / "skus")
    for rack in racks.values():
        net = ipaddress.ip_network(rack["bmc_subnet"])
        for node in rack["nodes"]:
            got = twin.nodes[node["hostname"]]
            assert got["bmc_address"] == str(net.network_address + rack.get("bmc_first_host", 0) + node["u"])
            assert got["sku"] == "hgx_h100_supermicro" and got["rack"] == rack["name"]
    assert twin.spares() == [n["hostname"] for r in racks.values() for n in r["nodes"] if n.get("spare")] != []
    assert len(twin.links()) == sum(len(n["fabric"]) for r in racks.values() for n in r["nodes"])


def test_planned_addresses_are_deterministic(doc):
    twin = _twin.validate_twin(doc, "t.twin.yml", known_skus=SKUS)
    assert [twin.nodes[h]["bmc_address"] for h in ("n1", "n2", "n3")] == ["10.10.1.12", "10.10.1.17", "10.10.2.4"]
    assert twin.nodes["n2"]["bmc_mac"] == "3c:ec:ef:11:07:01"  # normalised
    assert _twin.planned_bmc_address("10.0.0.0/24", 0, 1) == "10.0.0.1"
    assert _twin.planned_bmc_address("10.0.0.0/24", 200, 54) == "10.0.0.254"
    with pytest.raises(TwinError, match="U55 with bmc_first_host 200 falls outside 10.0.0.0/24"):
        _twin.planned_bmc_address("10.0.0.0/24", 200, 55)  # would be the broadcast address


def test_unknown_sku(doc):
    doc["sites"][0]["racks"][0]["nodes"][1]["sku"] = "hgx_b300"
    assert _error(doc) == ("site.twin.yml: $.sites[0].racks[0].nodes[1] (n2).sku: unknown SKU 'hgx_b300' "
                           "(known: dgx_h100, hgx_h100_supermicro)")


def test_duplicate_mac_serial_hostname(doc):
    d = copy.deepcopy(doc)
    d["sites"][0]["racks"][1]["nodes"][0]["bmc_mac"] = "3C:EC:EF:11:02:01"
    assert _error(d) == ("site.twin.yml: $.sites[0].racks[1].nodes[0] (n3).bmc_mac: "
                         "bmc_mac 3c:ec:ef:11:02:01 is taken twice (also n1)")
    d = copy.deepcopy(doc)
    d["sites"][0]["racks"][1]["nodes"][0]["serial"] = "S2"
    assert _error(d) == "site.twin.yml: $.sites[0].racks[1].nodes[0] (n3).serial: serial S2 is taken twice (also n2)"
    d = copy.deepcopy(doc)
    d["sites"][0]["racks"][1]["nodes"][0]["hostname"] = "n1"
    assert _error(d) == ("site.twin.yml: $.sites[0].racks[1].nodes[0] (n1): duplicate hostname 'n1' "
                         "(also at $.sites[0].racks[0].nodes[0])")


def test_addresses_outside_subnet_or_taken_twice(doc):
    d = copy.deepcopy(doc)
    d["sites"][0]["racks"][0]["nodes"][0]["bmc_address"] = "10.10.2.12"
    assert _error(d) == ("site.twin.yml: $.sites[0].racks[0].nodes[0] (n1).bmc_address: "
                         "bmc_address 10.10.2.12 is outside the rack subnet 10.10.1.0/24")
    d = copy.deepcopy(doc)
    d["sites"][0]["racks"][0]["nodes"][1]["bmc_address"] = "10.10.1.12"  # n1's planned address
    assert _error(d) == ("site.twin.yml: $.sites[0].racks[0].nodes[1] (n2).bmc_address: "
                         "bmc_address 10.10.1.12 is taken twice (also n1)")
    d = copy.deepcopy(doc)
    d["sites"][0]["racks"][1]["nodes"][0]["u"] = 20  # /28 has 14 hosts
    assert _error(d) == ("site.twin.yml: $.sites[0].racks[1].nodes[0] (n3).u: "
                         "U20 with bmc_first_host 0 falls outside 10.10.2.0/28")


def test_malformed_mac_and_schema_paths(doc):
    d = copy.deepcopy(doc)
    d["sites"][0]["racks"][0]["nodes"][1]["bmc_mac"] = "3c:ec:ef:11:07"
    assert _error(d) == ("site.twin.yml: $.sites[0].racks[0].nodes[1] (n2).bmc_mac: "
                         "malformed MAC address '3c:ec:ef:11:07'")
    d = copy.deepcopy(doc)
    d["sites"][0]["racks"][0]["nodes"][0]["u"] = "two"
    assert _error(d) == "site.twin.yml: $.sites[0].racks[0].nodes[0] (n1).u: 'two' is not of type 'integer'"
    d = copy.deepcopy(doc)
    del d["sites"][0]["racks"][1]["nodes"][0]["serial"]
    assert _error(d) == "site.twin.yml: $.sites[0].racks[1].nodes[0] (n3): 'serial' is a required property"
    d = copy.deepcopy(doc)
    d["sites"][0]["racks"][0]["bmc_subnet"] = "10.10.1.0/33"
    assert _error(d) == "site.twin.yml: $.sites[0].racks[0].bmc_subnet: '10.10.1.0/33' is not a network"


def test_two_nodes_in_one_u(doc):
    doc["sites"][0]["racks"][0]["nodes"][1]["u"] = 2
    assert _error(doc) == "site.twin.yml: $.sites[0].racks[0].nodes[1] (n2): U2 already holds n1"


def test_nodes_behind_one_bmc_share_its_u_serial_and_address(doc):
    # a blade chassis (issue 15): two nodes, one BMC, one chassis serial; each names its Systems member
    rack = doc["sites"][0]["racks"][0]
    rack["nodes"] = [_node("b0", 5, "ENC1", "3c:ec:ef:11:05:01", bmc_system_id="Node0"),
                     _node("b1", 5, "ENC1", "3c:ec:ef:11:05:01", bmc_system_id="Node1")]
    twin = _twin.validate_twin(doc, "t.twin.yml", known_skus=SKUS)
    assert [twin.nodes[h]["bmc_system_id"] for h in ("b0", "b1")] == ["Node0", "Node1"]
    assert twin.nodes["b0"]["bmc_address"] == twin.nodes["b1"]["bmc_address"] == "10.10.1.15"
    rack["nodes"][1]["bmc_system_id"] = "Node0"   # the same system twice is two nodes on one: refused
    assert _error(doc) == ("site.twin.yml: $.sites[0].racks[0].nodes[1] (b1): U5 already holds b0 with the same "
                           "serial, BMC and bmc_system_id 'Node0': each node behind one BMC names its own")
    del rack["nodes"][1]["bmc_system_id"]   # the error names the field that is missing, and where
    assert _error(doc) == ("site.twin.yml: $.sites[0].racks[0].nodes[1] (b1): U5 already holds b0 with the same "
                           "serial and BMC: two nodes behind one BMC each name their own bmc_system_id (missing on "
                           "this node)")
    del rack["nodes"][0]["bmc_system_id"]
    assert _error(doc).endswith("(missing on this node and b0)")
