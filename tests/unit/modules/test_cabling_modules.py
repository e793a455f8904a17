"""cabling_check and slurm_topology through their argument specs and run_module, on the lab's recorded lldpcli
output (lldpd 1.0.16, tests/unit/fabric/data)."""

import os

from ansible_collections.symphony.cluster.plugins.modules import cabling_check, slurm_topology

DATA = os.path.join(os.path.dirname(__file__), os.pardir, "fabric", "data")


def _lldp():
    with open(os.path.join(DATA, "lldpcli-1.0.16-json-one-neighbour.json"), encoding="utf-8") as handle:
        return handle.read()


def test_cabling_check_then_slurm_topology(run_main, tmp_path):
    twin = {"hostname": "h1", "site": "s", "rack": "r1", "u": 3,
            "fabric": [{"rail": 0, "leaf": "leafX", "port": 1, "iface": "rail0", "link_layer": "ethernet"},
                       {"rail": 1, "leaf": "leafX", "port": 2, "iface": "rail1", "link_layer": "ethernet"}]}
    ok, res = run_main(cabling_check, {"nodes": {"h1": {"twin": twin, "lldp": _lldp()}}})
    assert ok and res["changed"] is False
    check = res["checks"]["h1"]
    # rail1's switch port ran rx-only when this was recorded: no frame, so not judged, never a pass
    assert check["status"] == "not_run" and "rail1: no LLDP frame heard" in check["reason"]
    assert res["found"] == {"h1": [{"port": "rail0", "switch": "leafX", "switch_port": "swp1", "width": None,
                                    "speed": None}]}
    dest = str(tmp_path / "topology.conf")
    ok, topo = run_main(slurm_topology, {"found": res["found"], "dest": dest, "slurm_version": "slurm 22.05.8"},
                        diff=True)
    assert ok and topo["changed"] and topo["plugin"] == "topology/tree" and topo["diff"]["before"] == ""
    assert open(dest).read().endswith("SwitchName=leafX Nodes=h1\n")


def test_cabling_check_unreadable_scan_leaves_infiniband_ports_unjudged(run_main, tmp_path):
    ok, res = run_main(cabling_check, {"nodes": {}, "iblinkinfo_file": str(tmp_path / "missing.txt")})
    assert not ok and "cannot read the fabric scan" in res["msg"]
    twin = {"hostname": "h1", "site": "s", "fabric": [{"rail": 0, "leaf": "leaf1", "port": 1, "nic": "mlx5_0"}]}
    ibstat = open(os.path.join(os.environ.get("SYMPHONY_SHARED", "/work/shared"), "fixtures", "tool-outputs",
                               "ibstat-h100-some-down-polling-gpud.txt"), encoding="utf-8").read().split("\n", 1)[1]
    ok, res = run_main(cabling_check, {"nodes": {"h1": {"twin": twin, "ibstat": ibstat}},
                                       "iblinkinfo": "ibwarn: can't open UMAD port"})
    assert ok and res["checks"]["h1"]["status"] == "not_run"
    assert res["checks"]["h1"]["reason"].startswith("mlx5_0 port 1: the fabric scan (iblinkinfo) is unreadable")
