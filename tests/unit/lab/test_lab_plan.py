"""Pure parts of the lab: addressing, tc shaping plan, slurm.conf from `slurmd -C`, inventory fragment."""

import pytest
import yaml

symphony_lab = pytest.importorskip("symphony_lab")
from symphony_lab import _net, _slurm, _ssh  # noqa: E402
from symphony_lab import LabError  # noqa: E402

# `slurmd -C` as printed by slurm-wlm 22.05.8 (Debian 12) on the 2-core CI machine.
SLURMD_C = ("NodeName=vm CPUs=2 Boards=1 SocketsPerBoard=1 CoresPerSocket=2 ThreadsPerCore=1 RealMemory=24105\n"
            "UpTime=0-00:07:26\n")


def test_lab_host_plan_addresses_and_limits():
    bridge, hosts = _net.host_plan(4)
    assert bridge == "10.77.0.1"
    assert hosts[0] == {"name": "lab1", "address": "10.77.0.11", "netns": "lab1", "veth": "symlab-lab1"}
    assert [h["address"] for h in hosts] == ["10.77.0.11", "10.77.0.12", "10.77.0.13", "10.77.0.14"]
    assert max(len(h["veth"]) for h in _net.host_plan(16)[1]) <= 15  # IFNAMSIZ - 1
    assert _net.host_plan(16)[1][-1]["address"] == "10.77.0.26"
    with pytest.raises(LabError, match="1..16"):
        _net.host_plan(17)
    with pytest.raises(LabError, match="private /24"):
        _net.host_plan(2, subnet="8.8.8.0/24")


def test_lab_shaping_plan_interface_and_link():
    _bridge, hosts = _net.host_plan(3)
    plan = [" ".join(c) for c in _net.shaping_plan(hosts, {"lab1": 200.0}, [["lab1", "lab2", 500.0],
                                                                            ["lab2", "lab3", 300]])]
    # lab1: whole interface at 200 Mbit/s out (namespace side) and in (bridge side); the lab1-lab2 path
    # gets min(500, 200).
    assert "tc -n lab1 qdisc replace dev eth0 root handle 1: htb default 10" in plan
    assert "tc -n lab1 class add dev eth0 parent 1:1 classid 1:20 htb rate 200mbit ceil 200mbit" in plan
    assert "tc -n lab1 filter add dev eth0 parent 1: protocol ip prio 1 u32 match ip dst 10.77.0.12/32 flowid 1:20" \
        in plan
    assert "tc qdisc replace dev symlab-lab1 root handle 1: htb default 10" in plan
    # lab2: unclassified traffic unshaped (default 0), one class per degraded peer.
    assert "tc -n lab2 qdisc replace dev eth0 root handle 1: htb default 0" in plan
    assert "tc -n lab2 class add dev eth0 parent 1: classid 1:20 htb rate 500mbit ceil 500mbit" in plan
    assert "tc -n lab2 class add dev eth0 parent 1: classid 1:21 htb rate 300mbit ceil 300mbit" in plan
    assert "tc -n lab3 filter add dev eth0 parent 1: protocol ip prio 1 u32 match ip dst 10.77.0.12/32 flowid 1:20" \
        in plan
    assert not any("symlab-lab2" in c or "symlab-lab3" in c for c in plan)
    assert _net.shaping_plan(hosts, {}, []) == []
    with pytest.raises(LabError, match="unknown lab host 'lab9'"):
        _net.shaping_plan(hosts, {}, [["lab1", "lab9", 10]])
    with pytest.raises(LabError, match="> 0"):
        _net.validate_rate(0, "lab1")


def test_lab_slurm_conf_matches_slurmd_c():
    hw = _slurm.parse_slurmd_c(SLURMD_C)
    assert hw == {"CPUs": 2, "Boards": 1, "SocketsPerBoard": 1, "CoresPerSocket": 2, "ThreadsPerCore": 1,
                  "RealMemory": 24105}
    _bridge, hosts = _net.host_plan(2)
    conf = _slurm.render_conf("vm", "10.77.0.1", hosts, hw, "/work/main/build/lab")
    lines = conf.splitlines()
    assert "SlurmctldHost=vm(10.77.0.1)" in lines
    assert "ProctrackType=proctrack/linuxproc" in lines and "TaskPlugin=task/none" in lines
    assert ("NodeName=lab2 NodeAddr=10.77.0.12 CPUs=2 Boards=1 SocketsPerBoard=1 CoresPerSocket=2 "
            "ThreadsPerCore=1 RealMemory=24105 State=UNKNOWN") in lines
    assert "PartitionName=lab Nodes=lab1,lab2 Default=YES MaxTime=INFINITE State=UP PriorityTier=10" in lines
    # The fleet audit's active checks run preemptible in a lower tier (slurm.schedmd.com/preempt.html).
    assert "PreemptType=preempt/partition_prio" in lines and "PreemptMode=CANCEL" in lines
    assert ("PartitionName=audit Nodes=lab1,lab2 Default=NO MaxTime=INFINITE State=UP PriorityTier=1 "
            "PreemptMode=CANCEL") in lines
    assert "SlurmdSpoolDir=/work/main/build/lab/slurm/spool/%n" in lines
    with pytest.raises(LabError, match="RealMemory"):
        _slurm.parse_slurmd_c("NodeName=vm CPUs=2 Boards=1 SocketsPerBoard=1 CoresPerSocket=2 ThreadsPerCore=1\n")
    assert _slurm.parse_sinfo("lab1 idle\nlab2 drain\n") == {"lab1": "idle", "lab2": "drain"}


def test_lab_inventory_and_ssh_files():
    _bridge, hosts = _net.host_plan(2)
    inv = yaml.safe_load(_ssh.render_inventory(hosts, "/k/id_ed25519", "/k/ssh_config", "/v/bin/python", "lab"))
    lab1 = inv["all"]["children"]["lab"]["hosts"]["lab1"]
    assert lab1 == {"ansible_host": "10.77.0.11", "ansible_user": "root",
                    "ansible_ssh_private_key_file": "/k/id_ed25519", "ansible_ssh_common_args": "-F /k/ssh_config",
                    "ansible_python_interpreter": "/v/bin/python", "lab_netns": "lab1"}
    known = _ssh.render_known_hosts(hosts, "ssh-ed25519 AAAAC3Nza symphony-lab-host\n")
    assert known == "lab1,10.77.0.11 ssh-ed25519 AAAAC3Nza\nlab2,10.77.0.12 ssh-ed25519 AAAAC3Nza\n"
    cfg = _ssh.render_ssh_config(hosts, "/k/id", "/k/known")
    assert "Host lab2\n  HostName 10.77.0.12\n  User root\n" in cfg
    assert "StrictHostKeyChecking yes" in cfg
    sshd = _ssh.render_sshd_config("/k/host", "/k/auth")
    assert "PasswordAuthentication no" in sshd and "PermitRootLogin prohibit-password" in sshd
