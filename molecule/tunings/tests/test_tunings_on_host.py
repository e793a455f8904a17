# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Provisioning's in-band tunings as the host itself reports them (pytest-testinfra over SSH, not the ledger).

verify.yml runs this with ``--hosts=ssh://lab1,ssh://lab2``; tunings.yml applied the SKU's tunings to lab1 only.
"""
from __future__ import annotations

import os

SYSCTL = {"net.ipv4.tcp_mtu_probing": 1, "net.ipv4.tcp_slow_start_after_idle": 0}
NCCL_ENV = "NCCL_IB_HCA==mlx5_0,mlx5_1\nNCCL_SOCKET_IFNAME=eth0\n"


def _name(host):
    return host.backend.get_hostname()


def test_sysctl_values_are_the_skus_on_the_tuned_host_only(host):
    for key, value in SYSCTL.items():
        if _name(host) == "lab1":
            assert host.sysctl(key) == value, key
        else:
            # Kernel defaults (Documentation/networking/ip-sysctl.rst): a per-namespace value did not leak to lab2.
            assert host.sysctl(key) == {"net.ipv4.tcp_mtu_probing": 0, "net.ipv4.tcp_slow_start_after_idle": 1}[key], key


def test_nccl_recipe_file_has_the_skus_environment(host):
    path = os.path.join(os.environ["SYMPHONY_TUNINGS_WORK"], "lab1-nccl.conf")
    f = host.file(path)
    assert f.exists and f.mode == 0o644
    assert f.content_string == NCCL_ENV


def test_sysctl_values_persist_in_the_drop_in(host):
    path = os.path.join(os.environ["SYMPHONY_TUNINGS_WORK"], "lab1-sysctl.conf")
    lines = set(host.file(path).content_string.split("\n"))
    assert {"%s=%s" % kv for kv in SYSCTL.items()} <= lines, lines
    assert "net.ipv4.tcp_mtu_probing" not in host.file("/etc/sysctl.conf").content_string


def test_kernel_command_line_read_back_has_the_pinned_token(host):
    assert "console=ttyS0" in host.file("/proc/cmdline").content_string.split()
