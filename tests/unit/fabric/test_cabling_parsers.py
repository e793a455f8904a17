"""Parsers the cabling check reads: lldpcli JSON (every shape lldpd prints), iblinkinfo/ibnetdiscover, and the reuse
of the ibstat and nvidia-smi -q fabric parsers, on public outputs (cited per input)."""

import json
import os

import pytest

from ansible_collections.symphony.cluster.plugins.module_utils._core.errors import ParseError
from ansible_collections.symphony.cluster.plugins.module_utils._host.parsers import ib_fabric as IB
from ansible_collections.symphony.cluster.plugins.module_utils._host.parsers import lldp as L
from ansible_collections.symphony.cluster.plugins.module_utils._host.parsers.ibstat import parse_ibstat
from ansible_collections.symphony.cluster.plugins.module_utils._host.parsers.nvlink import parse_fabric

HERE = os.path.dirname(__file__)
SHARED = os.environ.get("SYMPHONY_SHARED", "/work/shared")

# lldpd's own integration test, tests/integration/test_lldpcli.py (https://github.com/lldpd/lldpd/blob/master/
# tests/integration/test_lldpcli.py), test_json_output "neighbors": -f json with ONE neighbour (interface is an
# object keyed by name, chassis keyed by SysName, port id a MAC).
LLDPD_JSON_ONE = {"lldp": {"interface": {"eth0": {
    "via": "LLDP", "rid": "1",
    "chassis": {"ns-2.example.com": {"id": {"type": "mac", "value": "00:00:00:00:00:02"},
                                     "descr": "Spectacular GNU/Linux 2016", "mgmt-ip": "fe80::200:ff:fe00:2",
                                     "mgmt-iface": "2",
                                     "capability": [{"type": "Bridge", "enabled": False}]}},
    "port": {"id": {"type": "mac", "value": "00:00:00:00:00:02"}, "descr": "eth1", "ttl": "120"}}}}}
# The same test file, test_json0_output "neighbors": -f json0, every value a list.
LLDPD_JSON0_ONE = {"lldp": [{"interface": [{
    "name": "eth0", "via": "LLDP", "rid": "1",
    "chassis": [{"id": [{"type": "mac", "value": "00:00:00:00:00:02"}], "name": [{"value": "ns-2.example.com"}],
                 "descr": [{"value": "Spectacular GNU/Linux 2016"}], "mgmt-ip": [{"value": "fe80::200:ff:fe00:2"}]}],
    "port": [{"id": [{"type": "mac", "value": "00:00:00:00:00:02"}], "descr": [{"value": "eth1"}],
              "ttl": [{"value": "120"}]}]}]}]}
# -f json with SEVERAL neighbours: interface becomes a list of one-key objects (a capture shown in a public Rust
# project's test, "lldpcli 1.0.18 reading lldpd 1.0.19": eno1 -> netlab-leaf2 swp1, eno3 -> netlab-mgmt0 Ethernet2,
# mgmt-ip once a string, once a list).
LLDPD_JSON_MANY = """{
  "lldp": {
    "interface": [
      { "eno1": {
          "via": "LLDP",
          "chassis": { "netlab-leaf2": {
            "id": { "type": "mac", "value": "C0:C9:89:EF:20:D2" },
            "descr": "Arrcus Operating System (ArcOS)",
            "mgmt-ip": "10.22.64.105" } },
          "port": { "id": { "type": "ifname", "value": "swp1" }, "descr": " " } } },
      { "eno3": {
          "via": "LLDP",
          "chassis": { "netlab-mgmt0": {
            "id": { "type": "mac", "value": "dc:da:4d:86:f4:ea" },
            "descr": "SONiC Software Version: 4.0.0",
            "mgmt-ip": ["10.22.64.82", "fe80::1"] } },
          "port": { "id": { "type": "local", "value": "Ethernet2" },
                    "descr": "netlab-server : OS" } } }
    ]
  }
}"""
# lldpd 1.0.x on OpenWrt (a public Go probe's fixture): the name inside the list item.
LLDPD_JSON_NAMED = {"lldp": {"interface": [{
    "name": "lan3", "via": "LLDP", "rid": "2", "age": "0 day, 00:01:12",
    "chassis": {"GS308E": {"id": {"type": "mac", "value": "28:c6:8e:1d:90:44"}}},
    "port": {"id": {"type": "ifname", "value": "ge5"}, "descr": "ge5", "ttl": "120"}}]}}


def test_lldp_one_neighbour_json_and_json0_read_the_same():
    one = L.parse_lldp_neighbors(json.dumps(LLDPD_JSON_ONE))
    zero = L.parse_lldp_neighbors(json.dumps(LLDPD_JSON0_ONE))
    assert one == zero == [{"iface": "eth0", "via": "LLDP", "chassis_name": "ns-2.example.com",
                            "chassis_id": "00:00:00:00:00:02", "chassis_id_type": "mac",
                            "port_id": "00:00:00:00:00:02", "port_id_type": "mac", "port_descr": "eth1"}]


def test_lldp_several_neighbours_list_shape():
    rows = L.parse_lldp_neighbors(LLDPD_JSON_MANY)
    assert [(r["iface"], r["chassis_name"], r["port_id"], r["port_id_type"]) for r in rows] == [
        ("eno1", "netlab-leaf2", "swp1", "ifname"), ("eno3", "netlab-mgmt0", "Ethernet2", "local")]


def test_lldp_name_inside_item_and_empty_outputs():
    rows = L.parse_lldp_neighbors(json.dumps(LLDPD_JSON_NAMED))
    assert [(r["iface"], r["chassis_name"], r["port_id"]) for r in rows] == [("lan3", "GS308E", "ge5")]
    # no neighbour at all is an empty reading, not an error (lldpcli prints an empty lldp object)
    assert L.parse_lldp_neighbors('{"lldp": {}}') == [] == L.parse_lldp_neighbors('{"lldp": [{}]}')


def test_lldp_chassis_without_sysname_and_two_neighbours_on_one_port():
    doc = {"lldp": {"interface": [
        {"eth2": {"via": "LLDP", "chassis": {"id": {"type": "mac", "value": "aa:bb:cc:dd:ee:01"}},
                  "port": {"id": {"type": "ifname", "value": "swp9"}}}},
        {"eth2": {"via": "LLDP", "chassis": {"leaf-b": {"id": {"type": "mac", "value": "aa:bb:cc:dd:ee:02"}}},
                  "port": {"id": {"type": "ifname", "value": "swp10"}}}}]}}
    rows = L.parse_lldp_neighbors(json.dumps(doc))
    assert [(r["iface"], r["chassis_name"], r["chassis_id"], r["port_id"]) for r in rows] == [
        ("eth2", None, "aa:bb:cc:dd:ee:01", "swp9"), ("eth2", "leaf-b", "aa:bb:cc:dd:ee:02", "swp10")]


@pytest.mark.parametrize("text", ["", "lldpcli: unable to connect to socket", '{"neighbors": []}', '{"lldp": [3]}'])
def test_lldp_not_lldpcli_json_raises(text):
    with pytest.raises(ParseError):
        L.parse_lldp_neighbors(text)


def _section(name):
    text = open(os.path.join(HERE, "data", "ib_qdr_fabric.txt"), encoding="utf-8").read()
    return text.split("=== %s\n" % name, 1)[1].split("\n=== ", 1)[0]


def test_iblinkinfo_default_form_ca_and_switch_ports():
    rows = IB.parse_iblinkinfo(_section("iblinkinfo"))
    ca = [r for r in rows if r["node_type"] == "CA"]
    assert {(r["node_desc"], r["port_guid"], r["peer_port"]) for r in ca} == {
        ("ip-160 HCA-1", "0x0002c903000d7aad", 33), ("ip-213 mlx4_0", "0x0002c903005925f1", 16),
        ("ip-212 mlx4_0", "0x0002c90300293ebb", 14), ("ip-211 mlx4_0", "0x0002c90300293e1f", 1),
        ("ip-210 mlx4_0", "0x0002c903000cc89b", 36)}
    assert all((r["width"], r["lane_gbps"], r["speed"], r["state"]) == ("4X", 10.0, "QDR", "Active") for r in ca)
    assert all(r["peer_desc"] == "Infiniscale-IV Mellanox Technologies" for r in ca)
    down = [r for r in rows if r["node_type"] == "Switch" and r["state"] == "Down"]
    assert [r["port"] for r in down] == [2, 3, 15, 34]
    assert all(r["peer_port"] is None and r["width"] is None and r["phys_state"] == "Polling" for r in down)
    switch_up = [r for r in rows if r["node_type"] == "Switch" and r["state"] == "Active"]
    assert {r["node_guid"] for r in switch_up} == {"0x0002c9020046c588"}


def test_iblinkinfo_line_form_and_lane_rates():
    # iblinkinfo -l as a public Go test records it (SwitchX, EDR lanes printed as "25.78 Gbps")
    text = ('0x0002c90200404ad8 "SwitchX -  Mellanox Technologies"      4   17[  ] ==( 4X 25.78 Gbps Active/  LinkUp)==>'
            '  0x0011220300334455      5    1[  ] "exe0001 HCA-1" ( )\n'
            '0x0002c90200404ad8 "SwitchX -  Mellanox Technologies"      4   18[  ] ==(                Down/ Polling)==>'
            '             [  ] "" ( )\n')
    rows = IB.parse_iblinkinfo(text)
    assert (rows[0]["node_guid"], rows[0]["port"], rows[0]["speed"], rows[0]["peer_guid"], rows[0]["peer_lid"],
            rows[0]["peer_port"], rows[0]["peer_desc"]) == ("0x0002c90200404ad8", 17, "EDR", "0x0011220300334455", 5,
                                                            1, "exe0001 HCA-1")
    assert rows[1]["state"] == "Down" and rows[1]["peer_port"] is None
    # NDR 4X prints 106.25 per lane, HDR 53.125 (a public fabric note: "On NDR the same field reads 106.25 Gbps")
    assert [IB.speed_name(x) for x in (106.25, 53.125, 14.0625, 2.5, 7.0)] == ["NDR", "HDR", "FDR", "SDR", None]
    assert IB.switch_name("MF0;SB7700:MSB7700/U1") == "SB7700" and IB.switch_name(" leaf-r03 ") == "leaf-r03"


def test_ibnetdiscover_same_fabric_agrees_with_iblinkinfo():
    rows = IB.parse_ibnetdiscover(_section("ibnetdiscover"))
    switch = [r for r in rows if r["node_type"] == "Switch"]
    assert [(r["port"], r["peer_desc"], r["width"], r["speed"]) for r in switch][:2] == [
        (1, "ip-211 mlx4_0", "4X", "QDR"), (14, "ip-212 mlx4_0", "4X", "QDR")]
    ca = [r for r in rows if r["node_type"] == "CA"]
    assert [(r["node_desc"], r["port_guid"], r["peer_guid"], r["peer_port"]) for r in ca] == [
        ("ip-160 HCA-1", "0x0002c903000d7aad", "0x0002c9020046c588", 33),
        ("ip-210 mlx4_0", "0x0002c903000cc89b", "0x0002c9020046c588", 36)]
    with pytest.raises(ParseError):
        IB.parse_ibnetdiscover("ibwarn: [1234] mad_rpc_open_port: can't open UMAD port ((null):0)\n")


def test_ibstat_port_guids_reused_from_the_shared_capture():
    text = open(os.path.join(SHARED, "fixtures", "tool-outputs", "ibstat-h100-some-down-polling-gpud.txt"),
                encoding="utf-8").read().split("\n", 1)[1]
    cas = {ca["ca"]: ca for ca in parse_ibstat(text)}
    assert cas["mlx5_0"]["ports"][0]["port_guid"] == "0xa288c2fffeadeab8"
    assert cas["mlx5_0"]["ports"][0]["rate_gbps"] == 400.0


def test_fabric_section_of_nvidia_smi_q_placeholders_are_unknown():
    # nvidia-smi -q's Fabric block as public dumps print it on GPUs outside an NVLink domain (every field N/A)
    # and on a registered GB200 tray (State Completed / Status Success), in the documented field names.
    text = ("GPU 00000000:4F:00.0\n    Product Name : NVIDIA A40\n    Fabric\n        State : N/A\n"
            "        Status : N/A\n        CliqueId : N/A\n        ClusterUUID : N/A\n        Health\n"
            "            Bandwidth : N/A\n    Processes : None\n"
            "GPU 00000008:01:00.0\n    Fabric\n        State : Completed\n        Status : Success\n"
            "        CliqueId : 32766\n        ClusterUUID : 7c1f3a2e-1b2c-4d5e-8f90-a1b2c3d4e5f6\n")
    gpus = parse_fabric(text)
    assert gpus[0]["state"] is None and gpus[0]["cluster_uuid"] is None
    assert (gpus[1]["state"], gpus[1]["clique_id"], gpus[1]["cluster_uuid"]) == (
        "Completed", "32766", "7c1f3a2e-1b2c-4d5e-8f90-a1b2c3d4e5f6")


def _recorded(name):
    """Outputs recorded on this project's lab machine: lldpd 1.0.16 (Debian 12) in two network namespaces joined
    by two veth pairs, host ports rail0/rail1, switch ports swp1/swp2, swp2 set ``lldp status rx-only``."""
    return open(os.path.join(HERE, "data", name), encoding="utf-8").read()


def test_lldp_recorded_lldpd_1_0_16_shapes():
    one = L.parse_lldp_neighbors(_recorded("lldpcli-1.0.16-json-one-neighbour.json"))
    zero = L.parse_lldp_neighbors(_recorded("lldpcli-1.0.16-json0-one-neighbour.json"))
    assert one == zero and [(r["iface"], r["chassis_name"], r["port_id"]) for r in one] == [("rail0", "leafX", "swp1")]
    two = L.parse_lldp_neighbors(_recorded("lldpcli-1.0.16-json-two-neighbours.json"))
    assert [(r["iface"], r["chassis_name"], r["port_id_type"]) for r in two] == [("swp1", "hostA", "ifname"),
                                                                                 ("swp2", "hostA", "ifname")]
