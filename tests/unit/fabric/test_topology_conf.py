"""topology.conf from the verified topology: tree form (leaf sets + planned spines), block form (NVLink domains
found), Slurm hostlists, and the Slurm version that decides whether topology/block can be written."""

import os

from ansible_collections.symphony.cluster.plugins.module_utils._fabric import topology as T


def test_hostlist_compression_in_slurm_syntax():
    assert T.compress_hostlist(["gpu01", "gpu02", "gpu03", "gpu05", "gpu10"]) == "gpu[01-03,05,10]"
    assert T.compress_hostlist(["lab9", "lab10", "lab1"]) == "lab[1,9-10]"
    assert T.compress_hostlist(["login", "n7"]) == "login,n7"


def _found(leaves_by_host):
    return {h: [{"port": "p%d" % i, "switch": leaf, "switch_port": i} for i, leaf in enumerate(leaves)]
            for h, leaves in leaves_by_host.items()}


def test_tree_groups_nodes_by_the_leaves_they_reach_and_spines_from_the_plan():
    found = _found({"n01": ["leaf1", "leaf2"], "n02": ["leaf1", "leaf2"], "n03": ["leaf3"], "n04": []})
    switches = {"leaf1": {"uplinks": ["spine1"]}, "leaf2": {"uplinks": ["spine1"]}, "leaf3": {"uplinks": ["spine1"]}}
    topo = T.tree(found, switches)
    assert topo["leaves"] == {"leaf1+leaf2": {"leaves": ["leaf1", "leaf2"], "nodes": ["n01", "n02"]},
                              "leaf3": {"leaves": ["leaf3"], "nodes": ["n03"]}}
    assert topo["spines"] == {"spine1": {"spines": ["spine1"], "switches": ["leaf1+leaf2", "leaf3"], "source": "planned"}}
    assert topo["unplaced"] == ["n04"]
    assert T.render_tree(topo, "made here") == ("# made here\nSwitchName=leaf1+leaf2 Nodes=n[01-02]\n"
                                                "SwitchName=leaf3 Nodes=n03\nSwitchName=spine1 Switches=leaf1+leaf2,leaf3\n")


def test_blocks_from_found_domains_named_by_the_plan_when_it_agrees():
    domains = {"t1": ["aaaa1111-x", "7"], "t2": ["aaaa1111-x", "7"], "t3": ["bbbb2222-y", "3"]}
    out = T.blocks(domains, {"t1": "nvl72-r01", "t2": "nvl72-r01", "t3": "nvl72-r01"})
    # the found domain holding t3 is not the planned one: named from its UUID, not from a plan it contradicts
    assert out == {"nvl72-r01": ["t1", "t2"], "nvl-bbbb2222-3": ["t3"]}
    assert T.render_blocks(out) == "BlockName=nvl72-r01 Nodes=t[1-2]\nBlockName=nvl-bbbb2222-3 Nodes=t3\n"


def test_slurm_version_decides_the_block_form():
    assert T.slurm_version("slurm 22.05.8\n") == (22, 5) and T.slurm_version("slurm-wlm 23.11.4") == (23, 11)
    assert not T.block_supported((22, 5)) and T.block_supported((23, 11)) and not T.block_supported(None)


def test_run_topology_writes_tree_and_refuses_block_on_old_slurm(tmp_path):
    dest = str(tmp_path / "topology.conf")
    params = {"found": _found({"n1": ["leaf1"], "n2": ["leaf1"]}), "domains": {"n1": ["u", "1"], "n2": ["u", "1"]},
              "form": "auto", "dest": dest, "slurm_version": "slurm 22.05.8"}
    out = T.run_topology(params, check_mode=False)
    assert out["form"] == "tree" and out["changed"] and out["plugin"] == "topology/tree"
    assert "has no topology/block (Slurm 23.11 and later)" in out["message"]
    assert open(dest).read().endswith("SwitchName=leaf1 Nodes=n[1-2]\n")
    assert T.run_topology(params, check_mode=False)["changed"] is False  # a second run changes nothing
    block = T.run_topology(dict(params, form="block"), check_mode=False)
    assert block["supported"] is False and "nothing written" in block["message"] and not block["changed"]
    newer = T.run_topology(dict(params, slurm_version="slurm 24.05.1", dest=dest + ".b"), check_mode=True)
    assert newer["form"] == "block" and newer["content"].endswith("Nodes=n[1-2]\n") and not os.path.exists(dest + ".b")
