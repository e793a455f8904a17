# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What burn-in left on the lab hosts, read on the hosts themselves with pytest-testinfra (not from the ledger).

Run by verify.yml: ``pytest --hosts=ssh://lab1,ssh://lab2 --ssh-config=build/lab/ssh_config``.  Lab hosts are
network and UTS namespaces of this machine, so the filesystem and the process table are the machine's own: the
checks below therefore also prove burn-in cleaned up after itself on a real node.
"""
from __future__ import annotations

import pytest

# Load generators burn-in starts on a node (fio, stress-ng, iperf3 client/server, gpu_burn); none may outlive the play.
LOAD_TOOLS = ("fio", "stress-ng", "iperf3", "gpu_burn")


def test_host_answers_under_its_own_name(host):
    # One UTS namespace per lab host: the SSH session landed on the host the inventory named.
    assert host.check_output("hostname") == host.backend.get_hostname()


def test_sshd_listens_in_the_hosts_namespace(host):
    assert host.socket("tcp://0.0.0.0:22").is_listening


def test_slurmd_of_the_host_runs(host):
    # The lab's slurmd runs with -N <host>; burn-in must leave the node schedulable for cluster validation.
    names = [p.args for p in host.process.filter(comm="slurmd")]
    assert any("-N %s" % host.backend.get_hostname() in a for a in names), names


@pytest.mark.parametrize("tool", LOAD_TOOLS)
def test_no_load_generator_outlived_the_play(host, tool):
    assert host.process.filter(comm=tool[:15]) == []


def test_fio_scratch_files_were_removed(host):
    # _burnin/checks/devices.py writes symphony-fio-<test>-<pid>.dat under /var/tmp and must remove it.
    left = host.run("find /var/tmp -maxdepth 1 -name 'symphony-fio-*.dat' -print")
    assert left.rc == 0 and left.stdout.strip() == ""
