"""The lab's cabled fabric plan: switch namespaces, one veth cable per host and rail, swaps, silent switch ports,
and lldpd's per-namespace settings (../shared/notes/lldp-in-netns.md)."""

import pytest

from symphony_lab import _lldp, _net, _slurm
from symphony_lab._errors import LabError


def test_plan_cables_each_rail_to_its_leaf_and_a_swap_exchanges_two():
    _bridge, hosts = _net.host_plan(3)
    plan = _lldp.fabric_plan(hosts, leaves=2, swap=["lab2"], silent=[("leaf1", "lab3")])
    assert [s["netns"] for s in plan["switches"]] == ["symsw-leaf1", "symsw-leaf2"]
    wired = {(c["host"], c["iface"]): (c["leaf"], c["switch_port"]) for c in plan["cables"]}
    assert wired[("lab1", "rail0")] == ("leaf1", "swp1") and wired[("lab1", "rail1")] == ("leaf2", "swp1")
    assert wired[("lab2", "rail0")] == ("leaf2", "swp2") and wired[("lab2", "rail1")] == ("leaf1", "swp2")
    assert plan["silent"] == [("leaf1", "swp3")]
    # the twin keeps the unswapped plan
    assert _lldp.twin_fabric(plan, "lab2") == [
        {"rail": 0, "leaf": "leaf1", "port": 2, "iface": "rail0", "link_layer": "ethernet"},
        {"rail": 1, "leaf": "leaf2", "port": 2, "iface": "rail1", "link_layer": "ethernet"}]
    cmds = _lldp.up_commands(plan)
    assert ["ip", "link", "add", "rail0", "netns", "lab2", "type", "veth", "peer", "name", "swp2", "netns",
            "symsw-leaf2"] in cmds


def test_daemons_get_their_own_socket_name_and_silent_ports():
    _bridge, hosts = _net.host_plan(2)
    plan = _lldp.fabric_plan(hosts, leaves=2, silent=[("leaf2", "lab1")])
    daemons = {d["name"]: d for d in _lldp.daemons(plan, {h["name"]: h["netns"] for h in hosts})}
    assert daemons["lab1"]["interfaces"] == "rail0,rail1" and daemons["leaf1"]["interfaces"] == "swp*"
    assert daemons["lab1"]["socket"] == "/run/lldpd-lab1.sock"
    assert daemons["leaf2"]["config"] == ("configure system hostname leaf2\nconfigure lldp portidsubtype ifname\n"
                                          "configure lldp tx-interval 1\nconfigure lldp tx-hold 4\n"
                                          "configure ports swp1 lldp status rx-only\n")
    argv = _lldp.lldpd_argv("/usr/sbin/lldpd", "/usr/sbin/lldpcli", daemons["leaf2"], "/x/leaf2.conf")
    assert argv == ["/usr/sbin/lldpd", "-d", "-u", "/run/lldpd-leaf2.sock", "-I", "swp*", "-L", "/usr/sbin/lldpcli",
                    "-O", "/x/leaf2.conf"]


def test_plan_refuses_unknown_names():
    _bridge, hosts = _net.host_plan(2)
    for kwargs in ({"swap": ["lab9"]}, {"silent": [("leaf7", "lab1")]}, {"leaves": 1, "swap": ["lab1"]}):
        with pytest.raises(LabError):
            _lldp.fabric_plan(hosts, **dict({"leaves": 2}, **kwargs))


def test_lab_slurm_uses_the_tree_plugin_with_a_flat_start():
    _bridge, hosts = _net.host_plan(2)
    assert _slurm.render_flat_topology(hosts) == "SwitchName=lab-flat Nodes=lab1,lab2\n"
    conf = _slurm.render_conf("vm", "10.77.0.1", hosts, {k: 1 for k in _slurm._NODE_FIELDS}, "/r")
    assert "TopologyPlugin=topology/tree" in conf.splitlines()


def test_swap_at_runtime_replugs_both_cables_and_updates_the_wiring():
    _bridge, hosts = _net.host_plan(2)
    plan = _lldp.fabric_plan(hosts, leaves=2)
    cmds, after = _lldp.swap_commands(plan, "lab1")
    assert cmds[:2] == [["ip", "-n", "lab1", "link", "delete", "rail0"], ["ip", "-n", "lab1", "link", "delete", "rail1"]]
    assert cmds[2] == ["ip", "link", "add", "rail0", "netns", "lab1", "type", "veth", "peer", "name", "swp1", "netns",
                       "symsw-leaf2"]
    wired = {(c["host"], c["iface"]): c["leaf"] for c in after["cables"]}
    assert wired == {("lab1", "rail0"): "leaf2", ("lab1", "rail1"): "leaf1", ("lab2", "rail0"): "leaf1",
                     ("lab2", "rail1"): "leaf2"}
    with pytest.raises(LabError):
        _lldp.swap_commands(_lldp.fabric_plan(hosts, leaves=1), "lab1")
