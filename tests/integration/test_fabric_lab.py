"""Fabric tier for real on four lab hosts, iperf3 over SSH: a degraded interface is blamed on its node, a
degraded path between two hosts on that link, and neither blames a healthy node.  Needs root (the lab)."""

import json
import os
import subprocess
import sys

import pytest

from ansible_collections.symphony.cluster.plugins.module_utils._fabric import rounds as R
from ansible_collections.symphony.cluster.plugins.module_utils._fabric import transports as T
from ansible_collections.symphony.cluster.plugins.module_utils._host import launchers as H
from ansible_collections.symphony.cluster.plugins.module_utils._core.ledger import open_ledger
from timescale import scaled

symphony_lab = pytest.importorskip("symphony_lab")

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the lab needs root (network namespaces, sshd, slurmd)")

# Degraded paths run at 100 Mbit/s; the lab's veths carry Gbit/s even with other work on 2 cores.  The floor sits
# between the two, calibrated to this machine (symphony_lab.pair_floor_gbps), so a busy machine that slows every
# healthy pair does not make one look bad (the relative threshold of _fabric.judge, a fraction of the upper
# quartile of all pairs, is what the unit tests cover).
DEGRADED_MBIT = 100


def _floor(lab):
    return symphony_lab.pair_floor_gbps(lab.calibration, DEGRADED_MBIT)


@pytest.fixture(scope="module")
def lab():
    with symphony_lab.running(n=4) as running_lab:
        running_lab.restore()
        yield running_lab
        running_lab.restore()


@pytest.fixture(scope="module")
def nodes(lab):
    return [h["name"] for h in lab.hosts][:4]


def _transport(lab, port):
    addresses = {h["name"]: h["address"] for h in lab.hosts}
    return T.make_transport("iperf3", H.SSHLauncher(config_file=str(lab.ssh_config)), addresses,
                            duration_s=1, port=port, timeout_s=scaled(30))


def test_fabric_lab_degraded_interface_is_that_node(lab, nodes, ledger_path):
    lab.degrade_interface("lab3", DEGRADED_MBIT)
    try:
        ledger = open_ledger(ledger_path)
        out = R.run_fabric_test(nodes, _transport(lab, 5611), "round_robin",
                                floor=_floor(lab), ledger=ledger, run_id="lab-if")
    finally:
        lab.restore()
    assert out["rounds"] == 3 and len(out["tests"]) == 6
    assert all(t["status"] in ("ok", "fail") for t in out["tests"]), out["tests"]
    assert out["bad_interfaces"] == ["lab3"], out["tests"]
    assert out["bad_links"] == [] and out["ambiguous"] == []
    lab3 = [t for t in out["tests"] if "lab3" in (t["a"], t["b"])]
    assert all(t["status"] == "fail" and t["value"] < DEGRADED_MBIT / 1000 * 1.5 for t in lab3)
    status = {r.node: r.status for r in ledger.current_results(stage="burn_in")}
    assert status == {"lab1": "pass", "lab2": "pass", "lab3": "fail", "lab4": "pass"}
    assert "known-good partners" in ledger.history("lab3", check="fabric_interface")[-1].reason


def test_fabric_lab_degraded_path_is_that_link_via_the_module(lab, nodes, tmp_path, repo_root):
    """The Ansible surface: symphony.cluster.fabric_test over SSH, verdicts read back from the ledger."""
    ledger = str(tmp_path / "ledger.sqlite")
    addresses = {h["name"]: h["address"] for h in lab.hosts}
    playbook = tmp_path / "fabric.yml"
    playbook.write_text(json.dumps([{
        "hosts": "localhost", "gather_facts": False,
        "tasks": [{"name": "fabric tier", "register": "fabric",
                   "symphony.cluster.fabric_test": {
                       "nodes": nodes, "addresses": addresses, "transport": "iperf3", "launcher": "ssh",
                       "ssh_config": str(lab.ssh_config), "schedule": "round_robin", "port": 5631,
                       "floor": _floor(lab), "ledger": ledger, "run_id": "lab-link"}},
                  {"ansible.builtin.copy": {"content": "{{ fabric | to_json }}", "dest": str(tmp_path / "out.json"),
                                            "mode": "0600"}}]}]))
    lab.degrade_link("lab1", "lab2", DEGRADED_MBIT)
    try:
        bindir = os.path.dirname(sys.executable)
        env = dict(os.environ, ANSIBLE_CONFIG=str(repo_root / "ansible.cfg"))
        proc = subprocess.run([os.path.join(bindir, "ansible-playbook"), "-i", "localhost,", "-c", "local",
                               "-e", "ansible_python_interpreter=%s" % sys.executable, str(playbook)],
                              capture_output=True, text=True, timeout=scaled(120), cwd=repo_root, env=env, check=False)
    finally:
        lab.restore()
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    out = json.loads((tmp_path / "out.json").read_text())
    assert out["bad_links"] == ["lab1~lab2"], out["tests"]
    assert out["bad_interfaces"] == [] and out["ambiguous"] == []
    assert out["links"]["lab1~lab2"]["info"]["nodes"] == ["lab1", "lab2"]
    assert {n: v["status"] for n, v in out["interfaces"].items()} == {n: "pass" for n in nodes}
    led = open_ledger(ledger)
    events = led.events(kind="fabric_link")
    assert sorted(e["node"] for e in events) == ["lab1", "lab2"]
    assert {e["data"]["verdict"] for e in events} == {"bad"}
    slow = [t for t in events[0]["data"]["tests"] if t["status"] == "fail"]
    assert len(slow) == 1 and {slow[0]["a"], slow[0]["b"]} == {"lab1", "lab2"}


def test_fabric_lab_adaptive_finds_the_degraded_interface(lab, nodes):
    lab.degrade_interface("lab2", DEGRADED_MBIT)
    try:
        out = R.run_fabric_test(nodes, _transport(lab, 5651), "adaptive", floor=_floor(lab), seed=4)
    finally:
        lab.restore()
    assert out["bad_interfaces"] == ["lab2"], out["tests"]
    assert out["bad_links"] == []
    assert out["rounds"] <= 3
    assert {n for n, v in out["interfaces"].items() if v["status"] == "pass"} == {"lab1", "lab3", "lab4"}
