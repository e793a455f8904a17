"""The lab hosts for real: SSH + Ansible, the calibration measured at lab-up, iperf3 between every pair, degraded
interface vs degraded link, an sbatch job with one step per lab host, drain and resume. Needs root (CI is root)."""

import itertools
import os
import subprocess
import sys

import pytest
import yaml
from timescale import scaled

symphony_lab = pytest.importorskip("symphony_lab")

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the lab needs root (network namespaces, sshd, slurmd)")

# Undegraded pairs, one at a time, stay above a tenth of what one pair measured alone at lab-up (the calibration:
# 5-16 Gbit/s on this kind of machine, ../shared/notes/lab-hosts.md; 2.4 Gbit/s beside stress-ng on both cores);
# the degradations below (50 and 75 Mbit/s) stay far under that.
UNSHAPED_FRACTION = 0.1
CALIBRATION_FIGURES = {"fio_seq_read.read_bw_mbps", "fio_seq_write.write_bw_mbps", "fio_randread_4k.read_iops",
                       "fio_randread_4k.read_p99_lat_us", "stress_ng_cpu.bogo_ops_per_s",
                       "stress_ng_vm.bogo_ops_per_s", "iperf3.tcp_gbps"}


def _unshaped_floor_mbit(lab):
    return UNSHAPED_FRACTION * lab.calibration["figures"]["iperf3.tcp_gbps"]["value"] * 1000


@pytest.fixture(scope="module")
def lab():
    with symphony_lab.running(n=4) as running_lab:
        running_lab.restore()
        # A lab reused from an earlier run (make demo, cluster validation) may hold a node it drained.
        for node, state in running_lab.node_states().items():
            if state.startswith("drain"):
                running_lab.resume(node)
        yield running_lab
        running_lab.restore()


def test_lab_hosts_reachable_over_ssh_and_ansible(lab, repo_root):
    names = [h["name"] for h in lab.hosts]
    assert names[:4] == ["lab1", "lab2", "lab3", "lab4"]
    for h in lab.hosts:
        out = lab.ssh(h["name"], "hostname; ip -4 -o addr show eth0")
        assert out.returncode == 0, out.stderr
        hostname, addr_line = out.stdout.splitlines()
        assert hostname == h["name"]
        assert " %s/24 " % h["address"] in addr_line
    inv = yaml.safe_load(lab.inventory.read_text())["all"]["children"]["lab"]
    assert {n: v["ansible_host"] for n, v in inv["hosts"].items()} == {h["name"]: h["address"] for h in lab.hosts}
    assert inv["hosts"]["lab1"]["ansible_user"] == "root"
    ansible = os.path.join(os.path.dirname(sys.executable), "ansible")
    out = subprocess.run([ansible, "-i", str(lab.inventory), "lab", "-m", "ansible.builtin.command",
                          "-a", "hostname", "-o"], capture_output=True, text=True, timeout=scaled(120), cwd=repo_root,
                         check=False)
    assert out.returncode == 0, out.stdout + out.stderr
    for name in names:
        assert "%s | CHANGED | rc=0 | (stdout) %s" % (name, name) in out.stdout


def test_lab_calibration_measured_at_lab_up(lab):
    doc = lab.calibration
    assert doc["version"] == 1 and doc["machine"]["cpus"] == os.cpu_count() and doc["measured"].endswith("+00:00")
    assert CALIBRATION_FIGURES <= set(doc["figures"]) and doc["skipped"] == {}
    for name, figure in doc["figures"].items():
        assert figure["value"] > 0 and figure["unit"] and figure["how"].split()[0] in ("fio", "stress-ng", "iperf3")
    assert "calibration.json" in lab.status()["calibration"]
    assert "burn_in_calibration" in yaml.safe_load(lab.inventory.read_text())["all"]["children"]["lab"]["vars"]


def test_lab_iperf3_between_every_pair(lab):
    rates = {}
    for a, b in itertools.combinations([h["name"] for h in lab.hosts], 2):
        rates[(a, b)] = lab.iperf3(a, b, seconds=1)
    assert len(rates) == len(lab.hosts) * (len(lab.hosts) - 1) // 2
    floor = _unshaped_floor_mbit(lab)
    slow = {pair: round(r) for pair, r in rates.items() if r < floor}
    assert not slow, "undegraded pairs below %s Mbit/s: %s" % (floor, slow)


def test_lab_degraded_interface_and_link_measured_slower(lab):
    floor = _unshaped_floor_mbit(lab)
    lab.degrade_interface("lab1", 50)
    lab.degrade_link("lab2", "lab3", 75)
    try:
        assert lab.degradations == {"interfaces": {"lab1": 50.0}, "links": [["lab2", "lab3", 75.0]]}
        measured = {(a, b): lab.iperf3(a, b, seconds=1) for a, b in [
            ("lab1", "lab2"), ("lab4", "lab1"),          # the bad interface: both directions, any peer
            ("lab2", "lab3"), ("lab3", "lab2"),          # the bad link: both directions
            ("lab2", "lab4"), ("lab3", "lab4"), ("lab4", "lab2")]}  # the link's ends are fine elsewhere
        for pair in [("lab1", "lab2"), ("lab4", "lab1")]:
            assert 25 < measured[pair] <= 50 * 1.05, (pair, measured[pair])
        for pair in [("lab2", "lab3"), ("lab3", "lab2")]:
            assert 37.5 < measured[pair] <= 75 * 1.05, (pair, measured[pair])
        for pair in [("lab2", "lab4"), ("lab3", "lab4"), ("lab4", "lab2")]:
            assert measured[pair] > floor, (pair, measured[pair])
    finally:
        lab.restore()
    assert lab.degradations == {"interfaces": {}, "links": []}
    assert lab.iperf3("lab1", "lab2", seconds=1) > floor
    assert lab.iperf3("lab2", "lab3", seconds=1) > floor


def test_lab_sbatch_runs_one_step_on_each_host(lab, tmp_path):
    n = len(lab.hosts)
    out_file = tmp_path / "job.out"
    script = tmp_path / "job.sh"
    script.write_text("#!/bin/bash\nsrun -N %d --ntasks-per-node=1 bash -c "
                      "'echo \"$SLURMD_NODENAME $(hostname) $(ip -4 -o addr show eth0 | awk \"{print \\$4}\")\"'\n" % n)
    out = subprocess.run(["sbatch", "--wait", "-p", lab.slurm, "-N", str(n), "--output", str(out_file),
                          str(script)], capture_output=True, text=True, timeout=scaled(60), env=lab.slurm_env, check=False)
    assert out.returncode == 0, out.stdout + out.stderr + (out_file.read_text() if out_file.exists() else "")
    assert out.stdout.startswith("Submitted batch job ")
    rows = sorted(tuple(line.split()) for line in out_file.read_text().split("\n") if line)
    assert rows == sorted((h["name"], h["name"], h["address"] + "/24") for h in lab.hosts)


def test_lab_drain_and_resume(lab):
    # Other work may be running jobs on the lab, so only lab4's own state and a job pinned to it are asserted.
    node = lab.hosts[-1]["name"]
    assert lab.node_states()[node] in ("idle", "mix", "alloc")
    lab.drain(node, "symphony lab test")
    try:
        assert lab.node_states()[node] in ("drain", "drng")
        show = subprocess.run(["scontrol", "show", "node", node], capture_output=True, text=True,
                              env=lab.slurm_env, check=True).stdout
        assert "Reason=symphony lab test" in show
        blocked = subprocess.run(["srun", "-p", lab.slurm, "-w", node, "--immediate=2", "true"],
                                 capture_output=True, text=True, env=lab.slurm_env, timeout=scaled(30), check=False)
        assert blocked.returncode != 0
    finally:
        lab.resume(node)
    assert lab.node_states()[node] in ("idle", "mix", "alloc")
    ok = subprocess.run(["srun", "-p", lab.slurm, "-w", node, "--immediate=10", "hostname"],
                        capture_output=True, text=True, env=lab.slurm_env, timeout=scaled(30), check=False)
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.split() == [node]
