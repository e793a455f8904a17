"""The cabling check: per port verdicts against the twin's plan, one action per swapped pair, rates, rails, NVLink
domains, and never a pass without a reading.

Inputs are built in the shapes of real outputs: lldpcli -f json as lldpd's tests/integration/test_lldpcli.py prints
it (an object for one neighbour, a list of one-key objects for several), iblinkinfo lines as the public QDR sample
in data/ib_qdr_fabric.txt prints them, ibstat as the shared gpud capture, nvidia-smi -q's Fabric block.
"""

import json

from ansible_collections.symphony.cluster.plugins.module_utils._fabric import cabling as C
from ansible_collections.symphony.cluster.plugins.module_utils._fabric.cabling_gate import cabling_checks, rated_from_gbps


def lldp_json(neighbours):
    """``{iface: (sysname, port)}`` -> lldpcli -f json text, in its one-neighbour or several-neighbour shape."""
    items = [{iface: {"via": "LLDP", "rid": "1", "chassis": {name: {"id": {"type": "mac", "value": "c0:ff:ee:00:00:01"}}},
                      "port": {"id": {"type": "ifname", "value": port}, "ttl": "120"}}}
             for iface, (name, port) in neighbours.items()]
    if not items:
        return json.dumps({"lldp": {}})
    return json.dumps({"lldp": {"interface": items[0] if len(items) == 1 else items}})


def eth_node(host, links, site="s1", domain=None):
    return {"hostname": host, "site": site, "fabric": [dict(rail=r, leaf=leaf, port=port, iface=iface, link_layer="ethernet")
                                                       for iface, r, leaf, port in links], "nvlink_domain": domain}


def test_every_port_as_planned_passes():
    twin = eth_node("n1", [("eth0", 0, "leaf-r0", 1), ("eth1", 1, "leaf-r1", 1)])
    out = cabling_checks({"n1": {"twin": twin, "lldp": lldp_json({"eth0": ("leaf-r0", "swp1"), "eth1": ("leaf-r1", "swp1")})}})
    check = out["checks"]["n1"]
    assert check["status"] == "pass" and check["required"] is True
    assert [p["status"] for p in check["evidence"]["ports"]] == ["pass", "pass"]
    assert out["actions"] == [] and out["found"]["n1"][0]["switch"] == "leaf-r0"


def test_swapped_pair_in_one_node_is_one_action_naming_both_sides():
    twin = eth_node("n1", [("eth0", 0, "leaf-r03", 17), ("eth1", 1, "leaf-r05", 17)])
    out = cabling_checks({"n1": {"twin": twin, "lldp": lldp_json({"eth0": ("leaf-r05", "17"), "eth1": ("leaf-r03", "17")})}})
    check = out["checks"]["n1"]
    assert check["status"] == "fail"
    assert "eth0 reaches leaf-r05 port 17; the plan says leaf-r03 port 17" in check["reason"]
    assert "eth1 reaches leaf-r03 port 17; the plan says leaf-r05 port 17" in check["reason"]
    assert len(out["actions"]) == 1 and out["actions"][0]["kind"] == "swap"
    assert out["swaps"] == [["n1 eth0", "n1 eth1"]]
    assert check["remediation"].startswith("swap the cables at leaf-r03 port 17 and leaf-r05 port 17")


def test_swap_across_two_nodes_is_one_action_and_a_lone_misplug_is_a_move():
    a = eth_node("a", [("eth0", 0, "leaf-r0", 1)])
    b = eth_node("b", [("eth0", 0, "leaf-r0", 2)])
    c = eth_node("c", [("eth0", 0, "leaf-r0", 3)])
    out = cabling_checks({"a": {"twin": a, "lldp": lldp_json({"eth0": ("leaf-r0", "swp2")})},
                          "b": {"twin": b, "lldp": lldp_json({"eth0": ("leaf-r0", "swp1")})},
                          "c": {"twin": c, "lldp": lldp_json({"eth0": ("leaf-r0", "swp9")})}})
    kinds = sorted((x["kind"], tuple(x["hosts"])) for x in out["actions"])
    assert kinds == [("move", ("c",)), ("swap", ("a", "b"))]
    assert out["checks"]["c"]["remediation"].startswith("move the cable of c eth0 from leaf-r0 port swp9 to leaf-r0 port 3")


def test_no_lldp_frame_is_not_run_never_pass():
    twin = eth_node("n1", [("eth0", 0, "leaf-r0", 1), ("eth1", 1, "leaf-r1", 1)])
    out = cabling_checks({"n1": {"twin": twin, "lldp": lldp_json({"eth0": ("leaf-r0", "swp1")})}})
    check = out["checks"]["n1"]
    assert check["status"] == "not_run"
    assert "eth1: no LLDP frame heard (the switch sends no LLDP, or the link is down)" in check["reason"]
    # no lldpcli output at all, or an error instead of JSON: not_run too
    for text in (None, "lldpcli: unable to connect to lldpd daemon"):
        assert cabling_checks({"n1": {"twin": twin, "lldp": text}})["checks"]["n1"]["status"] == "not_run"


def test_a_failing_port_outranks_an_unjudged_one():
    twin = eth_node("n1", [("eth0", 0, "leaf-r0", 1), ("eth1", 1, "leaf-r1", 1)])
    out = cabling_checks({"n1": {"twin": twin, "lldp": lldp_json({"eth0": ("leaf-r9", "swp1")})}})
    assert out["checks"]["n1"]["status"] == "fail"


def test_rail_optimised_site_names_the_wrong_rail():
    twin = eth_node("n1", [("eth0", 0, "leaf-rail0", 1), ("eth1", 1, "leaf-rail1", 1)])
    other = eth_node("n2", [("eth0", 0, "leaf-rail0", 2), ("eth1", 1, "leaf-rail1", 2)])
    site = {"s1": {"rail_optimised": True, "switches": {}}}
    seen_1 = lldp_json({"eth0": ("leaf-rail1", "swp3"), "eth1": ("leaf-rail1", "swp1")})
    seen_2 = lldp_json({"eth0": ("leaf-rail0", "swp2"), "eth1": ("leaf-rail1", "swp2")})
    out = cabling_checks({"n1": {"twin": twin, "lldp": seen_1}, "n2": {"twin": other, "lldp": seen_2}}, site_fabric=site)
    reason = out["checks"]["n1"]["reason"]
    assert "eth0 reaches leaf-rail1 port swp3; the plan says leaf-rail0 port 1" in reason
    assert "(leaf-rail1 is rail 1's leaf; eth0 is a GPU-local HCA of rail 0)" in reason
    assert out["checks"]["n2"]["status"] == "pass"


IBSTAT = """CA 'mlx5_{i}'
\tCA type: MT4129
\tNumber of ports: 1
\tFirmware version: 28.39.1002
\tHardware version: 0
\tNode GUID: 0xa088c20300ad{i:04x}
\tSystem image GUID: 0xa088c20300ad{i:04x}
\tPort 1:
\t\tState: {state}
\t\tPhysical state: {phys}
\t\tRate: 400
\t\tBase lid: {lid}
\t\tLMC: 0
\t\tSM lid: 1
\t\tCapability mask: 0x2651e848
\t\tPort GUID: 0xa088c20300ad{i:04x}
\t\tLink layer: InfiniBand
"""
LINK = ('      0xa088c20300ad{i:04x}     {lid}    1[  ] ==( {width}          {lane} Gbps Active/  LinkUp)==>       2   {port}[  ] '
        '"MF0;{leaf}:MQM9700/U1" ( )\n')


def ib_node(host, hcas):
    return {"hostname": host, "site": "s1", "nvlink_domain": None,
            "fabric": [{"rail": i, "leaf": "leaf-r%d" % i, "port": 10 + i, "nic": "mlx5_%d" % i, "hca_port": 1}
                       for i in range(hcas)]}


def test_infiniband_ports_judged_from_ibstat_and_the_fabric_scan():
    ibstat = "".join(IBSTAT.format(i=i, state="Active", phys="LinkUp", lid=10 + i) for i in range(4))
    lines = [LINK.format(i=i, lid=10 + i, width="4X", lane="106.25", port=10 + i, leaf="leaf-r%d" % i) for i in range(3)]
    scan = "CA: n1 HCA:\n" + "".join(lines)
    scan += LINK.format(i=3, lid=13, width="1X", lane="53.125", port=13, leaf="leaf-r3")
    out = cabling_checks({"n1": {"twin": ib_node("n1", 4), "ibstat": ibstat}}, iblinkinfo=scan,
                         rated=rated_from_gbps(400))
    check = out["checks"]["n1"]
    assert check["status"] == "fail"
    assert check["reason"] == "mlx5_3 port 1 trained at 1X HDR; rated 4X NDR"
    assert [p["status"] for p in check["evidence"]["ports"]] == ["pass", "pass", "pass", "fail"]
    assert out["actions"][0]["kind"] == "rate"
    # the plan's own rate wins over the SKU's; a port the scan does not list is not judged
    twin = ib_node("n1", 4)
    twin["fabric"][3]["speed"], twin["fabric"][3]["width"] = "HDR", "1X"
    assert cabling_checks({"n1": {"twin": twin, "ibstat": ibstat}}, iblinkinfo=scan,
                          rated=rated_from_gbps(400))["checks"]["n1"]["status"] == "pass"
    short = "CA: n1 HCA:\n" + LINK.format(i=0, lid=10, width="4X", lane="106.25", port=10, leaf="leaf-r0")
    again = cabling_checks({"n1": {"twin": ib_node("n1", 2), "ibstat": ibstat}}, iblinkinfo=short)["checks"]["n1"]
    assert again["status"] == "not_run" and "mlx5_1 port 1 (port GUID 0xa088c20300ad0001) is not in the fabric scan" in again["reason"]


def test_infiniband_port_down_fails_and_switch_name_comes_from_the_description():
    ibstat = IBSTAT.format(i=0, state="Down", phys="Polling", lid=0) + IBSTAT.format(i=1, state="Active", phys="LinkUp", lid=11)
    scan = "CA: n1 HCA:\n" + LINK.format(i=1, lid=11, width="4X", lane="106.25", port=99, leaf="leaf-r7")
    check = cabling_checks({"n1": {"twin": ib_node("n1", 2), "ibstat": ibstat}}, iblinkinfo=scan)["checks"]["n1"]
    assert "mlx5_0 port 1 is Down/Polling" in check["reason"]
    assert "mlx5_1 port 1 reaches leaf-r7 port 99; the plan says leaf-r1 port 11" in check["reason"]


FABRIC = "GPU 0000000{g}:01:00.0\n    Fabric\n        State : Completed\n        Status : Success\n" \
         "        CliqueId : {clique}\n        ClusterUUID : {uuid}\n"


def smi(uuid, clique, gpus=4):
    return "".join(FABRIC.format(g=g, clique=clique, uuid=uuid) for g in range(gpus))


def test_nvlink_domain_majority_and_the_misplaced_tray():
    nodes = {}
    for i in range(4):
        twin = {"hostname": "t%d" % i, "site": "s1", "fabric": [], "nvlink_domain": "nvl72-r01"}
        uuid = "aaaa1111-0000-0000-0000-000000000001" if i < 3 else "bbbb2222-0000-0000-0000-000000000002"
        nodes["t%d" % i] = {"twin": twin, "nvidia_smi_q": smi(uuid, 7)}
    out = cabling_checks(nodes)
    assert [out["checks"]["t%d" % i]["status"] for i in range(4)] == ["pass", "pass", "pass", "fail"]
    assert "its GPUs are in NVLink domain bbbb2222-0000-0000-0000-000000000002 clique 7; the plan says nvl72-r01 " \
           "(aaaa1111-0000-0000-0000-000000000001 clique 7, with t0, t1, t2)" in out["checks"]["t3"]["reason"]
    assert out["domains"]["t0"] == ["aaaa1111-0000-0000-0000-000000000001", "7"]
    # a tray still registering is not judged; one whose fabric manager failed is
    nodes["t1"]["nvidia_smi_q"] = smi("aaaa1111-0000-0000-0000-000000000001", 7).replace("Completed", "In Progress", 1)
    nodes["t2"]["nvidia_smi_q"] = smi("aaaa1111-0000-0000-0000-000000000001", 7).replace("Success", "Failure", 1)
    out = cabling_checks(nodes)
    assert (out["checks"]["t1"]["status"], out["checks"]["t2"]["status"]) == ("not_run", "fail")


def test_no_plan_is_not_run_and_required_only_where_the_sku_needs_one():
    bare = {"hostname": "n1", "site": "s1", "fabric": [], "nvlink_domain": None}
    out = cabling_checks({"n1": {"twin": bare, "required": False}, "n2": {"twin": dict(bare, hostname="n2"), "required": True}})
    assert out["checks"]["n1"] == {"name": "cabling", "status": "not_run", "reason": "no cabling plan in the twin",
                                   "required": False}
    assert out["checks"]["n2"]["status"] == "not_run" and out["checks"]["n2"]["required"] is True
    assert out["checks"]["n2"]["reason"].startswith("no cabling plan in the twin; the SKU requires one")


def test_port_key_matches_switch_port_spellings():
    assert C.port_key(17) == C.port_key("17") == C.port_key("swp17") == C.port_key("Ethernet1/17") == 17
    assert C.port_key("mgmt") == "mgmt"
    assert rated_from_gbps(200) == {"width": "4X", "speed": "HDR"} and rated_from_gbps(None)["speed"] is None


def test_a_profile_without_the_fabric_records_the_check_without_gating_on_it():
    twin = eth_node("lab1", [("eth0", 0, "leaf-r0", 1)])
    for flag, required in ((False, False), ("False", False), (None, True), ("True", True)):
        check = cabling_checks({"lab1": {"twin": twin, "required": flag, "lldp": None}})["checks"]["lab1"]
        assert (check["status"], check["required"]) == ("not_run", required)
    # but a port that was read and found wrong gates even there (the lab's LLDP cables are real cables)
    swapped = eth_node("lab1", [("eth0", 0, "leaf1", 1), ("eth1", 1, "leaf2", 1)])
    check = cabling_checks({"lab1": {"twin": swapped, "required": False,
                                     "lldp": lldp_json({"eth0": ("leaf2", "swp1"), "eth1": ("leaf1", "swp1")})}})
    assert (check["checks"]["lab1"]["status"], check["checks"]["lab1"]["required"]) == ("fail", True)


def test_a_swap_across_two_nodes_is_one_dispatch_row():
    """Issue 23: both nodes' cabling checks fail on one swapped pair; the technician gets one row ("a <-> b",
    labelled at the first node in rack walk order) for it, and one row per other action."""
    from ansible_collections.symphony.cluster.plugins.module_utils._core.dispatch import dispatch_rows
    a = eth_node("a", [("eth0", 0, "leaf-r0", 1)])
    b = eth_node("b", [("eth0", 0, "leaf-r0", 2), ("eth1", 1, "leaf-r1", 2)])
    c = eth_node("c", [("eth0", 0, "leaf-r0", 3)])
    out = cabling_checks({"a": {"twin": a, "lldp": lldp_json({"eth0": ("leaf-r0", "swp2")})},
                          "b": {"twin": b, "lldp": lldp_json({"eth0": ("leaf-r0", "swp1"), "eth1": ("leaf-r1", "swp7")})},
                          "c": {"twin": c, "lldp": lldp_json({"eth0": ("leaf-r0", "swp9")})}})
    labels = {"a": {"site": "s1", "rack": "r01", "u": 2}, "b": {"site": "s1", "rack": "r01", "u": 6},
              "c": {"site": "s1", "rack": "r02", "u": 2}}
    outcomes = {h: {"gate": {"status": "fail", "failing": ["cabling"]},
                    "results": [dict(check, check="cabling")]} for h, check in out["checks"].items()}
    rows = dispatch_rows(labels, outcomes, "burn_in")
    assert [(r["hostname"], r["reason"].split(":")[0], r["u"]) for r in rows] == [
        ("a <-> b", "swap", 2), ("b", "move", 6), ("c", "move", 2)]
    swap = rows[0]
    assert swap["reason"] == "swap: a eth0, b eth0" and swap["remediation"].startswith("swap the cables at ")
    assert rows[1]["remediation"].startswith("move the cable of b eth1 from leaf-r1 port swp7")
