"""runtime_proof: the in-band proof that a node booted the SKU's pinned RAM-only runtime and inherited nothing.

Inputs are util-linux 2.38 ``findmnt -J``/``lsblk -J -p`` output in the shape the tools print (util-linux
findmnt(8), lsblk(8) ``--json``; the disk-root one captured on a Debian 12 host, the rootfs one from the runtime
guest), joined onto one line as the probe does.
"""

import json
from types import SimpleNamespace

import pytest

from ansible_collections.symphony.cluster.plugins.module_utils._core.gate import BLOCKED, FAIL, NOT_RUN, PASS, CheckResult
from ansible_collections.symphony.cluster.plugins.module_utils._host.launchers import SSHLauncher
from ansible_collections.symphony.cluster.plugins.module_utils._host.process import CommandResult
from ansible_collections.symphony.cluster.plugins.module_utils._provision import proof
from ansible_collections.symphony.cluster.plugins.module_utils._provision.node import ProvisionSettings, check_graph

RUNTIME = {"image_uri": "file:///x.iso", "method": "virtual_media", "boot_timeout_s": 30, "build_id": "rt-0123456789abcdef",
           "kernel_cmdline": "console=tty0 console=ttyS0,115200 panic=30 symphony.runtime=1"}

RAM_ROOT = {"filesystems": [{"target": "/", "source": "rootfs", "fstype": "rootfs"}]}
RAM_MOUNTS = {"filesystems": [{"target": "/", "source": "rootfs", "fstype": "rootfs"},
                              {"target": "/proc", "source": "proc", "fstype": "proc"},
                              {"target": "/run", "source": "run", "fstype": "tmpfs"}]}
DISK_ROOT = {"filesystems": [{"target": "/", "source": "/dev/vda", "fstype": "ext4"}]}
DISK_MOUNTS = {"filesystems": [{"target": "/", "source": "/dev/vda", "fstype": "ext4"},
                               {"target": "/proc", "source": "proc", "fstype": "proc"}]}
BLK = {"blockdevices": [{"name": "/dev/sr0", "type": "rom"},
                        {"name": "/dev/vda", "type": "disk", "children": [{"name": "/dev/vda1", "type": "part"}]}]}
CMDLINE = "BOOT_IMAGE=/boot/vmlinuz console=tty0 console=ttyS0,115200 panic=30 symphony.runtime=1 initrd=/boot/initrd.lz4"


def answer(root=None, mounts=None, blk=None, build_id="rt-0123456789abcdef", cmdline=CMDLINE,
           marker="absent", end=True):
    root, mounts, blk = root or RAM_ROOT, mounts or RAM_MOUNTS, blk or BLK
    lines = ["root=" + json.dumps(root, indent=3).replace("\n", ""), "mounts=" + json.dumps(mounts).replace("\n", ""),
             "blk=" + json.dumps(blk, indent=3).replace("\n", ""), "build_id=" + build_id, "cmdline=" + cmdline,
             "marker=" + marker]
    return "\n".join(lines + (["end=1"] if end else [])) + "\n"


def test_the_pinned_runtime_from_ram_passes():
    problems, found = proof.judge(answer(), RUNTIME)
    assert problems == []
    assert found["root"] == {"source": "rootfs", "fstype": "rootfs"} and found["disk_mounts"] == []


def test_a_node_on_its_old_disk_fails_with_what_was_found():
    problems, found = proof.judge(answer(root=DISK_ROOT, mounts=DISK_MOUNTS, build_id="rt-old", marker="present"),
                                  RUNTIME)
    text = "; ".join(problems)
    assert "root is /dev/vda (ext4), not RAM-backed" in text
    assert "local disk mounted: /dev/vda on /" in text
    assert "build id 'rt-old', the SKU pins 'rt-0123456789abcdef'" in text
    assert "disk marker" in text
    assert found["disk_marker"] == "present"


def test_a_partition_mounted_beside_a_ram_root_fails():
    mounts = {"filesystems": RAM_MOUNTS["filesystems"] + [{"target": "/mnt", "source": "/dev/vda1", "fstype": "ext4"}]}
    problems, _evidence = proof.judge(answer(mounts=mounts), RUNTIME)
    assert problems == ["local disk mounted: /dev/vda1 on /mnt"]


def test_a_different_kernel_command_line_fails_but_loader_and_boot_config_words_do_not():
    ok, _evidence = proof.judge(answer(cmdline=CMDLINE + " symphony.ssh_key=c3NoLWVkMjU1MTkgQUFBQQ== symphony.callback=http://x/"),
                                RUNTIME)
    assert ok == []
    problems, _evidence = proof.judge(answer(cmdline=CMDLINE.replace("panic=30", "panic=30 init=/bin/sh")), RUNTIME)
    assert len(problems) == 1 and problems[0].startswith("kernel command line")


@pytest.mark.parametrize("text", ["", answer(end=False), answer().replace('"filesystems"', '"filesys')])
def test_an_incomplete_or_garbled_answer_is_never_a_pass(text):
    problems, _evidence = proof.judge(text, RUNTIME)
    assert problems


# ---------------------------------------------------------------- the check over a launcher
def _nd(runtime=None, launcher=None, probe="proof"):
    runtime = runtime or RUNTIME
    settings = ProvisionSettings(username="u", password="p", poll_s=0.01, runtime_probe=probe, launcher=launcher)
    client = SimpleNamespace(get=lambda uri: {"BootProgress": {"LastState": "OSBootStarted"}})
    return SimpleNamespace(host="gpu-1", manifest={"runtime": runtime}, settings=settings, client=client,
                           inv=SimpleNamespace(systems=[{"uri": "/redfish/v1/Systems/1"}]))


def _runner(rc, stdout="", stderr=""):
    calls = []

    def run(argv, timeout_s):
        calls.append(argv)
        return CommandResult(tuple(argv), rc, stdout, stderr, 0.01)
    run.calls = calls
    return run


def test_runtime_proof_passes_and_fails_on_what_answers():
    launcher = SSHLauncher(hosts={"gpu-1": "127.0.0.1"}, port=2222)
    out = proof.runtime_proof(_nd(), launcher, runner=_runner(0, answer()))
    assert out.status == PASS
    out = proof.runtime_proof(_nd(), launcher, runner=_runner(0, answer(root=DISK_ROOT, mounts=DISK_MOUNTS)))
    assert out.status == FAIL and out.reason.startswith("did not boot the pinned runtime: root is /dev/vda")


def test_an_unreachable_runtime_is_blocked_with_boot_progress_and_console(tmp_path):
    console = tmp_path / "serial.log"
    console.write_bytes(b"SeaBIOS\r\nBooting from DVD/CD...\r\nLinux version 6.1.0\r\n")
    nd = _nd(runtime=dict(RUNTIME, boot_timeout_s=0.05))
    out = proof.runtime_proof(nd, SSHLauncher(), console_log=str(console),
                              runner=_runner(255, stderr="ssh: connect to host 127.0.0.1 port 2222: Connection refused"))
    assert out.status == BLOCKED
    assert "BootProgress OSBootStarted" in out.reason and "Connection refused" in out.reason
    assert out.evidence["console_tail"][-1] == "Linux version 6.1.0"


def test_a_sku_without_a_pinned_build_id_cannot_pass():
    out = proof.runtime_proof(_nd(runtime={"image_uri": "x", "method": "pxe"}), SSHLauncher(), runner=_runner(0, answer()))
    assert out.status == FAIL


def test_prove_boot_not_needed_and_no_inband_path():
    booted = CheckResult("gpu-1", "provisioning", "runtime_boot", PASS, "booted", evidence={"method": "virtual_media"})
    idle = CheckResult("gpu-1", "provisioning", "runtime_boot", PASS, "not needed")
    assert proof.prove_boot(_nd(), idle).status == PASS
    assert proof.prove_boot(_nd(probe="emulator"), booted).status == NOT_RUN
    assert proof.prove_boot(_nd(probe="ssh"), booted).status == NOT_RUN   # port 22 answering proves nothing


def test_the_graph_puts_the_proof_between_the_boot_and_in_band_firmware():
    manifest = {"firmware": [{"id": "nic", "phase": "in_band"}]}
    graph = check_graph(manifest)
    assert graph.specs["runtime_proof"].required and graph.specs["runtime_proof"].depends_on == ("runtime_boot",)
    assert graph.specs["firmware:nic"].depends_on == ("runtime_proof",)
    assert "runtime_proof" in graph.specs["verify"].depends_on
    relaxed = check_graph(manifest, prove_runtime=False)
    assert not relaxed.specs["runtime_proof"].required
    assert relaxed.specs["firmware:nic"].depends_on == ("runtime_boot",)
