"""The cabling check for real on three lab hosts: lldpd in every host and "switch" namespace, real LLDP frames over
veth cables.  lab2's two rails are cabled to each other's leaf (a swapped pair), leaf2's port to lab3 sends no
LLDP (a missing neighbour).  The gate rows, the one dispatch action for the swap, and the lab's Slurm loading the
topology.conf written from what was found.  Needs root (the lab); run under the lab lock."""

import os
import subprocess
import time

import pytest
import yaml

from ansible_collections.symphony.cluster.plugins.module_utils._core.dispatch import dispatch_rows
from ansible_collections.symphony.cluster.plugins.module_utils._core.gate_ops import evaluate
from ansible_collections.symphony.cluster.plugins.module_utils._fabric.cabling_gate import run_cabling
from ansible_collections.symphony.cluster.plugins.module_utils._fabric.topology import run_topology
from ansible_collections.symphony.cluster.plugins.module_utils._host.parsers.lldp import parse_lldp_neighbors
from timescale import scaled

symphony_lab = pytest.importorskip("symphony_lab")
from symphony_lab import _lldp  # noqa: E402  (after importorskip)

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the lab needs root (network namespaces, lldpd, slurmd)")
HOSTS = ("lab1", "lab2", "lab3")


@pytest.fixture(scope="module")
def cabled():
    with symphony_lab.running(n=3) as lab:
        plan = lab.lldp_up(leaves=2, swap=["lab2"], silent=[("leaf2", "lab3")])
        try:
            yield lab, plan
        finally:
            lab.lldp_down()


def _twin(tmp_path, plan):
    """A twin of the three lab hosts whose cabling plan is the unswapped wiring, leaves uplinked to one spine."""
    nodes = [{"hostname": h, "u": i + 1, "sku": "lab", "serial": "LAB%d" % i, "bmc_mac": "02:00:00:00:00:%02x" % i,
              "fabric": _lldp.twin_fabric(plan, h)} for i, h in enumerate(HOSTS)]
    doc = {"twin_version": 1, "sites": [{"name": "lab", "fabric": {"switches": [
        {"name": "leaf1", "tier": "leaf", "rail": 0, "uplinks": ["spine1"]},
        {"name": "leaf2", "tier": "leaf", "rail": 1, "uplinks": ["spine1"]}, {"name": "spine1", "tier": "spine"}]},
        "racks": [{"name": "r1", "bmc_subnet": "10.99.0.0/24", "nodes": nodes}]}]}
    path = tmp_path / "lab.twin.yml"
    path.write_text(yaml.safe_dump(doc))
    return str(path), {n["hostname"]: dict(n, site="lab", rack="r1") for n in nodes}


def _heard(lab):
    """Each host's lldpcli output once lab1 and lab2 hear both leaves and lab3 hears leaf1 (frames within seconds
    of lldpd starting; the test waits a TTL-free 30 s at most)."""
    want = {"lab1": 2, "lab2": 2, "lab3": 1}
    deadline = time.monotonic() + scaled(30)
    while True:
        texts = {h: lab.lldp_neighbors(h) for h in HOSTS}
        if all(len(parse_lldp_neighbors(texts[h])) == n for h, n in want.items()) or time.monotonic() > deadline:
            return texts
        time.sleep(0.5)


def test_swapped_pair_and_missing_neighbour_found_from_real_lldp(cabled, tmp_path):
    lab, plan = cabled
    twin_path, twins = _twin(tmp_path, plan)
    texts = _heard(lab)
    out = run_cabling({"nodes": {h: {"twin": twins[h], "required": True, "lldp": texts[h]} for h in HOSTS},
                       "twin": twin_path})
    checks = out["checks"]
    assert checks["lab1"]["status"] == "pass", checks["lab1"]
    assert checks["lab2"]["status"] == "fail"
    assert "rail0 reaches leaf2 port swp2; the plan says leaf1 port 2" in checks["lab2"]["reason"]
    assert "rail1 reaches leaf1 port swp2; the plan says leaf2 port 2" in checks["lab2"]["reason"]
    assert checks["lab3"]["status"] == "not_run"
    assert "rail1: no LLDP frame heard (the switch sends no LLDP, or the link is down)" in checks["lab3"]["reason"]
    assert [a["kind"] for a in out["actions"]] == ["swap"] and out["swaps"] == [["lab2 rail0", "lab2 rail1"]]

    # the gate rows: lab1's gate opens, lab2's closes on the swap, lab3's stays closed on a port not judged
    outcomes = {}
    for host in HOSTS:
        results, verdict = evaluate(host, "burn_in", [checks[host]], run_id="lab-cabling")
        outcomes[host] = {"gate": verdict.to_dict(), "results": [r.to_dict() for r in results]}
    assert [outcomes[h]["gate"]["status"] for h in HOSTS] == ["pass", "fail", "not_run"]
    rows = dispatch_rows(twins, outcomes, "burn_in")
    swap_rows = [r for r in rows if r["remediation"].startswith("swap the cables")]
    assert len(swap_rows) == 1 and swap_rows[0]["hostname"] == "lab2"
    assert swap_rows[0]["remediation"].startswith("swap the cables at leaf1 port 2 and leaf2 port 2")
    assert [r["hostname"] for r in out["dispatch"]] == ["lab2"]

    # topology.conf from what was found: lab3 only reaches leaf1, and the lab's Slurm loads it
    dest = str(lab.slurm_dir / "topology.conf")
    topo = run_topology({"found": out["found"], "domains": out["domains"], "twin": twin_path, "form": "auto",
                         "dest": dest}, check_mode=False)
    assert topo["form"] == "tree" and topo["supported"]
    assert "SwitchName=leaf1+leaf2 Nodes=lab[1-2]" in topo["content"]
    assert "SwitchName=leaf1 Nodes=lab3" in topo["content"]
    assert "SwitchName=spine1 Switches=leaf1,leaf1+leaf2" in topo["content"]
    subprocess.run(["scontrol", "reconfigure"], env=lab.slurm_env, check=True, timeout=scaled(30))
    shown = subprocess.run(["scontrol", "show", "topology"], env=lab.slurm_env, capture_output=True, text=True,
                           check=True, timeout=scaled(30)).stdout
    assert "SwitchName=leaf1+leaf2" in shown and "Nodes=lab[1-2]" in shown, shown
    assert "SwitchName=spine1" in shown, shown


def test_cables_swapped_while_the_lab_runs_are_found(cabled, tmp_path):
    lab, plan = cabled
    twin_path, twins = _twin(tmp_path, plan)
    lab.swap_cables("lab1")
    deadline = time.monotonic() + scaled(30)
    while True:  # the old neighbours age out within lldpd's 4 s TTL
        seen = {(r["iface"], r["chassis_name"]) for r in parse_lldp_neighbors(lab.lldp_neighbors("lab1"))}
        if seen == {("rail0", "leaf2"), ("rail1", "leaf1")} or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert seen == {("rail0", "leaf2"), ("rail1", "leaf1")}
    out = run_cabling({"nodes": {h: {"twin": twins[h], "required": True, "lldp": lab.lldp_neighbors(h)}
                                 for h in HOSTS}, "twin": twin_path})
    assert out["checks"]["lab1"]["status"] == "fail"
    assert sorted(out["swaps"]) == [["lab1 rail0", "lab1 rail1"], ["lab2 rail0", "lab2 rail1"]]
    assert len([a for a in out["actions"] if a["kind"] == "swap"]) == 2
