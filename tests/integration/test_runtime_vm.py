"""The RAM-only runtime booted for real: a VM-backed emulator node (QEMU, TCG) boots the built ISO through the
collection's own Redfish calls (VirtualMedia InsertMedia, a one-time Cd override, ComputerSystem.Reset), and
``runtime_proof`` proves it in-band over SSH; a node whose BMC ignores the override boots its old disk and fails
"did not boot the pinned runtime".

Needs qemu-system-x86_64, qemu-utils, xorriso and the runtime built (``make runtime``; the fixture builds it,
cached). No lab lock: nothing but loopback ports. CPU heavy: one guest per test, never more than two at once.
"""

import json
import os
import shutil
import subprocess

import pytest

from ansible_collections.symphony.cluster.plugins.module_utils._core.sku import load_skus
from ansible_collections.symphony.cluster.plugins.module_utils._host.launchers import SSHLauncher
from ansible_collections.symphony.cluster.plugins.module_utils._provision.proof import DISK_MARKER
from ansible_collections.symphony.cluster.plugins.module_utils._provision.stage import ProvisionSettings, run_stage

from symphony_emulator import Fleet
from timescale import scaled

HOST = "pv-u02"


@pytest.fixture(scope="module")
def runtime(repo_root):
    """The built runtime (``images/runtime/build.sh``, a no-op when build/runtime is up to date).

    ``make test-runtime`` builds it and sets SYMPHONY_TEST_RUNTIME=1; ``make test`` leaves an unbuilt image alone
    (about 7.5 min uncached on 2 cores, beyond CI's budget together with the rest) and says so."""
    out = repo_root / "build" / "runtime"
    if os.environ.get("SYMPHONY_TEST_RUNTIME") != "1" and not (out / "build.json").is_file():
        pytest.skip("not_run: the RAM-only runtime is not built here; `make test-runtime` builds it and boots it")
    for tool in ("qemu-system-x86_64", "qemu-img", "xorriso"):
        if shutil.which(tool) is None:
            pytest.fail("%s is missing: `make runtime` installs it (VM-backed nodes never fall back silently)" % tool)
    subprocess.run([str(repo_root / "images" / "runtime" / "build.sh"), str(out)], check=True, timeout=scaled(1800))
    record = json.loads((out / "build.json").read_text())
    record["path"] = str(out / record["iso"])
    return record


@pytest.fixture
def scenario(repo_root, tmp_path, runtime):
    key = tmp_path / "id_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    config = tmp_path / "config.iso"
    subprocess.run([str(repo_root / "images" / "runtime" / "config-medium.sh"), str(config), str(key) + ".pub"],
                   check=True)
    skus = load_skus(str(repo_root / "skus"))
    # the SKU as pinned to this very build (a rebuild after a Debian point release changes the build id; the
    # shipped SKU's pin is checked in tests/unit/core)
    manifest = dict(skus["hgx_h100_supermicro"], runtime={
        "image_uri": "file://" + runtime["path"], "sha256": runtime["sha256"], "method": "virtual_media",
        "boot_timeout_s": scaled(240), "build_id": runtime["build_id"], "kernel_cmdline": runtime["cmdline"]})
    return {"tmp": tmp_path, "key": key, "config": config, "manifests": dict(skus, hgx_h100_supermicro=manifest),
            "twin": repo_root / "molecule" / "provisioning" / "provisioning.twin.yml"}


def _old_os_disk(runtime, tmp_path):
    """The node's previous OS on its disk: a runtime of another build (its own build id) that also carries the
    disk marker, as an isohybrid image (BIOS boots it from a hard disk). An extra initrd overlays the two files."""
    iso_root = tmp_path / "old-os"
    subprocess.run(["xorriso", "-osirrox", "on", "-indev", runtime["path"], "-extract", "/", str(iso_root)],
                   check=True, capture_output=True)
    overlay = tmp_path / "overlay"
    (overlay / "etc" / "symphony").mkdir(parents=True)
    (overlay / "etc" / "symphony" / "build-id").write_text("rt-previous-os\n")
    marker = overlay / DISK_MARKER.lstrip("/")
    marker.parent.mkdir(parents=True)
    marker.write_text("left by the previous OS\n")
    names = subprocess.run(["find", ".", "-mindepth", "1"], cwd=overlay, check=True, capture_output=True, text=True)
    cpio = subprocess.run(["cpio", "--quiet", "-o", "-H", "newc"], cwd=overlay, input=names.stdout.encode(),
                          check=True, capture_output=True).stdout
    os.chmod(iso_root / "boot", 0o755)
    (iso_root / "boot" / "old.cpio").write_bytes(cpio)
    cfg = iso_root / "isolinux" / "isolinux.cfg"
    os.chmod(cfg.parent, 0o755)
    os.chmod(cfg, 0o644)
    cfg.write_text(cfg.read_text().replace("/boot/initrd.zst", "/boot/initrd.zst,/boot/old.cpio"))
    disk = tmp_path / "old-os.iso"
    subprocess.run(["xorriso", "-as", "mkisofs", "-quiet", "-o", str(disk), "-V", "OLDOS", "-isohybrid-mbr",
                    "/usr/lib/ISOLINUX/isohdpfx.bin", "-c", "isolinux/boot.cat", "-b", "isolinux/isolinux.bin",
                    "-no-emul-boot", "-boot-load-size", "4", "-boot-info-table", str(iso_root)], check=True)
    return str(disk)


def _provision(fleet, sc, runtime):
    port = fleet.map_data()["nodes"][HOST]["inband"]["port"]
    ssh_config = sc["tmp"] / "ssh_config"
    # the runtime makes new host keys at every boot: this test's own known-hosts file, not the operator's
    ssh_config.write_text("Host %s\n  HostName 127.0.0.1\n  Port %d\n  User root\n  IdentityFile %s\n"
                          "  StrictHostKeyChecking no\n  UserKnownHostsFile %s\n  LogLevel ERROR\n"
                          % (HOST, port, sc["key"], sc["tmp"] / "known_hosts"))
    settings = ProvisionSettings(
        bmc_map=str(sc["tmp"] / "bmcs.json"), ledger=str(sc["tmp"] / "ledger.sqlite"), runtime_probe="proof",
        runtime_boot="always", runtime_config_url="file://%s" % sc["config"], poll_s=2.0, retries=1,
        read_timeout=scaled(30), connect_timeout=scaled(5), optional=("tunings",),
        launcher=SSHLauncher(config_file=str(ssh_config), connect_timeout=10),
        console_logs={HOST: fleet.map_data()["nodes"][HOST]["inband"]["console"]})
    oob = run_stage({HOST: fleet.twin.nodes[HOST]}, sc["manifests"], settings, "out_of_band")
    return {c["check"]: c for c in oob["hosts"][HOST]["checks"]}


def test_a_vm_node_boots_the_built_runtime_and_the_proof_passes(scenario, runtime):
    with Fleet(scenario["twin"], http=True, credentials="demo", hosts=[HOST], vm_nodes=[HOST],
               vm_dir=str(scenario["tmp"] / "vm"), map_path=str(scenario["tmp"] / "bmcs.json")) as fleet:
        assert fleet.state(HOST)["power"] == "Off"   # a VM-backed node starts powered off, its guest not started
        checks = _provision(fleet, scenario, runtime)
        assert checks["runtime_boot"]["status"] == "pass", checks["runtime_boot"]
        proof = checks["runtime_proof"]
        assert proof["status"] == "pass", proof
        assert runtime["build_id"] in proof["reason"]
        system = fleet.bmc(HOST).tree[fleet.bmc(HOST).spec.S]
        assert system["PowerState"] == "On" and system["BootProgress"]["LastState"] == "OSRunning"


def test_a_bmc_that_ignores_the_override_boots_the_old_disk_and_fails(scenario, runtime):
    faults = {"faults": {HOST: {"boot_override_ignored": True}}}
    with Fleet(scenario["twin"], http=True, credentials="demo", hosts=[HOST], vm_nodes=[HOST], faults=faults,
               vm_dir=str(scenario["tmp"] / "vm"), vm_disk_seeds={HOST: _old_os_disk(runtime, scenario["tmp"])},
               map_path=str(scenario["tmp"] / "bmcs.json")) as fleet:
        checks = _provision(fleet, scenario, runtime)
        assert checks["runtime_boot"]["status"] == "pass"   # the BMC accepted every request
        proof = checks["runtime_proof"]
        assert proof["status"] == "fail", proof
        assert proof["reason"].startswith("did not boot the pinned runtime: ")
        assert "build id 'rt-previous-os'" in proof["reason"] and "disk marker" in proof["reason"]
