"""The RAM-only runtime booted for real: a VM-backed emulator node (QEMU, TCG) boots the built ISO through the
collection's own Redfish calls (VirtualMedia InsertMedia, a one-time Cd override, ComputerSystem.Reset), and
``runtime_proof`` proves it in-band over SSH; a node whose BMC ignores the override boots its old disk and fails
"did not boot the pinned runtime".  Then the last provisioning step for real: the OS image (images/os) written to
the guest's qcow2 disk from the runtime, a one-time Hdd boot, and the guest verified in-band running from its disk;
a rerun leaves it alone, and an install killed during the image write is redone from the start.

Needs qemu-system-x86_64, qemu-utils, xorriso and the runtime built (``make runtime``; the fixture builds it,
cached). No lab lock: nothing but loopback ports. CPU heavy: one guest per test, never more than two at once.
"""

import json
import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

from ansible_collections.symphony.cluster.plugins.module_utils._core.gate import new_run_id
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


@pytest.fixture(scope="module")
def os_image(repo_root, runtime):
    """The built production OS image (``images/os/build.sh``, cached in build/os like the runtime)."""
    out = repo_root / "build" / "os"
    subprocess.run([str(repo_root / "images" / "os" / "build.sh"), str(out)], check=True, timeout=scaled(1800))
    record = json.loads((out / "build.json").read_text())
    record["path"] = str(out / record["image"])
    versions = dict(line.split()[:2] for line in (out / "manifest.txt").read_text().splitlines())
    record["packages"] = {name: versions[name] for name in ("openssh-server", "python3")}
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
    disk marker, as an isohybrid image (BIOS boots it from a hard disk). The two files overlay the runtime's root."""
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
    # One LZ4 archive holding both: the kernel stops at the end of an LZ4 legacy stream, so a second initrd
    # appended behind it (isolinux's "initrd=a,b") would never be unpacked.
    initrd = iso_root / "boot" / "initrd.lz4"
    os.chmod(initrd.parent, 0o755)
    os.chmod(initrd, 0o644)
    root = subprocess.run(["lz4", "-dc", str(initrd)], check=True, capture_output=True).stdout
    initrd.write_bytes(subprocess.run(["lz4", "-l", "-1", "-q"], input=root + cpio, check=True,
                                      capture_output=True).stdout)
    disk = tmp_path / "old-os.iso"
    subprocess.run(["xorriso", "-as", "mkisofs", "-quiet", "-o", str(disk), "-V", "OLDOS", "-isohybrid-mbr",
                    "/usr/lib/ISOLINUX/isohdpfx.bin", "-c", "isolinux/boot.cat", "-b", "isolinux/isolinux.bin",
                    "-no-emul-boot", "-boot-load-size", "4", "-boot-info-table", str(iso_root)], check=True)
    return str(disk)


def _provision(fleet, sc, runtime, phases=("out_of_band",), run_id=None, **extra):
    port = fleet.map_data()["nodes"][HOST]["inband"]["port"]
    ssh_config = sc["tmp"] / "ssh_config"
    # the runtime makes new host keys at every boot: this test's own known-hosts file, not the operator's
    ssh_config.write_text("Host %s\n  HostName 127.0.0.1\n  Port %d\n  User root\n  IdentityFile %s\n"
                          "  StrictHostKeyChecking no\n  UserKnownHostsFile %s\n  LogLevel ERROR\n"
                          % (HOST, port, sc["key"], sc["tmp"] / "known_hosts"))
    settings = ProvisionSettings(
        bmc_map=str(sc["tmp"] / "bmcs.json"), ledger=str(sc["tmp"] / "ledger.sqlite"), runtime_probe="proof",
        runtime_boot=extra.pop("runtime_boot", "always"), runtime_config_url="file://%s" % sc["config"], poll_s=2.0,
        retries=1, read_timeout=scaled(30), connect_timeout=scaled(5), optional=("tunings",),
        launcher=SSHLauncher(config_file=str(ssh_config), connect_timeout=10),
        console_logs={HOST: fleet.map_data()["nodes"][HOST]["inband"]["console"]}, **extra)
    checks = {}
    run_id = run_id or new_run_id("prov")
    for phase in phases:
        out = run_stage({HOST: fleet.twin.nodes[HOST]}, sc["manifests"], settings, phase, run_id=run_id)
        checks.update({c["check"]: c for c in out["hosts"][HOST]["checks"]})
        checks["gate"] = out["hosts"][HOST].get("gate")
    return checks


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
        # the NVMe host identity is made at this boot (the image carries none: test below)
        nqn = subprocess.run(["ssh", "-F", str(scenario["tmp"] / "ssh_config"), HOST,
                              "cat /etc/nvme/hostnqn /etc/nvme/hostid"], check=True, capture_output=True, text=True,
                             timeout=scaled(60)).stdout.split()
        assert len(nqn) == 2 and re.fullmatch(r"nqn\.2014-08\.org\.nvmexpress:uuid:[0-9a-f-]{36}", nqn[0]), nqn
        assert nqn[0].endswith(":uuid:" + nqn[1])


def test_the_image_carries_no_per_node_identity(runtime):
    """Nothing two nodes must not share is in the image: SSH host keys, the NVMe host NQN and ID (nvme-cli's postinst
    makes a random pair when the root is built), a machine-id; the runtime's init makes each at boot."""
    initrd = pathlib.Path(runtime["path"]).parent / "initrd.lz4"
    root = subprocess.run(["lz4", "-dc", str(initrd)], check=True, capture_output=True).stdout
    names = set(subprocess.run(["cpio", "-it", "--quiet"], input=root, check=True, capture_output=True).stdout
                .decode().split("\n"))
    assert "etc/nvme" in names and "usr/sbin/nvme" in names   # nvme-cli is in the image: the test can fail
    per_node = sorted(n for n in names if n in ("etc/nvme/hostnqn", "etc/nvme/hostid")
                      or n.startswith("etc/ssh/ssh_host_"))
    assert per_node == []
    machine_id = subprocess.run(["cpio", "-i", "--quiet", "--to-stdout", "etc/machine-id"], input=root, check=True,
                                capture_output=True).stdout
    assert machine_id == b""


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


def _with_os(scenario, os_image, **pin):
    """The scenario's SKU with the OS image pinned and without in-band firmware (no vendor tools in a guest)."""
    manifest = dict(scenario["manifests"]["hgx_h100_supermicro"])
    manifest["firmware"] = [c for c in manifest["firmware"] if c["phase"] == "out_of_band"]
    pins = ("sha256", "raw_sha256", "raw_bytes", "build_id", "root_label", "kernel", "os_release", "packages")
    manifest["os"] = dict({k: os_image[k] for k in pins}, image_uri="file://" + os_image["path"],
                          kernel_cmdline=os_image["cmdline"], target_disk="/dev/vda", boot_timeout_s=scaled(300), **pin)
    return dict(scenario, manifests=dict(scenario["manifests"], hgx_h100_supermicro=manifest))


def _guest_ssh(fleet, sc, command):
    port = fleet.map_data()["nodes"][HOST]["inband"]["port"]
    return subprocess.run(["ssh", "-F", str(sc["tmp"] / "ssh_config"), HOST, command], capture_output=True,
                          text=True, timeout=scaled(60), check=True).stdout


def test_the_os_is_written_from_the_runtime_and_the_node_boots_it_from_disk(scenario, runtime, os_image):
    sc = _with_os(scenario, os_image)
    with Fleet(sc["twin"], http=True, credentials="demo", hosts=[HOST], vm_nodes=[HOST],
               vm_dir=str(sc["tmp"] / "vm"), map_path=str(sc["tmp"] / "bmcs.json")) as fleet:
        checks = _provision(fleet, sc, runtime, phases=("out_of_band", "verify"), os_install=True)
        assert checks["runtime_proof"]["status"] == "pass", checks["runtime_proof"]
        assert checks["verify"]["status"] == "pass", checks["verify"]
        assert checks["os_install"]["status"] == "pass", checks["os_install"]
        assert "read back sha256 as pinned" in checks["os_install"]["reason"]
        assert checks["os_boot"]["status"] == "pass", checks["os_boot"]
        assert checks["gate"]["status"] == "pass", checks["gate"]
        # in-band, outside the collection: the guest runs the image from its disk, with this node's name
        seen = _guest_ssh(fleet, sc, "findmnt -no SOURCE /; cat /etc/symphony/os-image-id; hostname; "
                                     "test -e /etc/symphony/build-id && echo runtime-left || echo no-runtime")
        assert seen.split() == ["/dev/vda1", os_image["build_id"], HOST, "no-runtime"]
        system = fleet.bmc(HOST).tree[fleet.bmc(HOST).spec.S]
        assert system["BootProgress"]["LastState"] == "OSRunning"

        # a rerun (runtime_boot auto): the node on the pinned OS is neither rebooted nor rewritten
        again = _provision(fleet, sc, runtime, phases=("out_of_band", "verify"), os_install=True, runtime_boot="auto")
        assert again["runtime_boot"]["reason"].startswith("not needed"), again["runtime_boot"]
        assert again["os_install"]["status"] == "pass"
        assert again["os_install"]["reason"].startswith("already on the pinned OS image"), again["os_install"]
        assert again["os_boot"]["status"] == "pass" and again["gate"]["status"] == "pass"


def test_an_install_killed_during_the_write_is_redone_from_the_start(scenario, runtime, os_image):
    sc = _with_os(scenario, os_image)
    with Fleet(sc["twin"], http=True, credentials="demo", hosts=[HOST], vm_nodes=[HOST],
               vm_dir=str(sc["tmp"] / "vm"), map_path=str(sc["tmp"] / "bmcs.json")) as fleet:
        # the write is cut off after a few seconds (the task timeout): os_install fails, nothing is marked done
        cut = _provision(fleet, sc, runtime, phases=("out_of_band", "verify"), os_install=True, os_install_timeout_s=3)
        assert cut["os_install"]["status"] == "fail", cut["os_install"]
        assert "did not finish" in cut["os_install"]["reason"]
        assert cut["os_boot"]["status"] == "blocked" and cut["gate"]["status"] != "pass"
        # the disk's boot sector is zeroed first and written last: the half-written disk boots nothing
        head = _guest_ssh(fleet, sc, "cmp -s -n 1048576 /dev/vda /dev/zero && echo zeroed || echo written")
        assert head.strip() == "zeroed"
        # the rerun boots the runtime again (the node is not on the pinned OS) and writes the image from the start
        again = _provision(fleet, sc, runtime, phases=("out_of_band", "verify"), os_install=True, runtime_boot="auto")
        assert again["runtime_boot"]["status"] == "pass" and "os_install" in str(again["runtime_boot"]), again
        assert again["os_install"]["status"] == "pass", again["os_install"]
        assert "read back sha256 as pinned" in again["os_install"]["reason"]
        assert again["os_boot"]["status"] == "pass" and again["gate"]["status"] == "pass"


def test_the_demo_provisions_its_vm_backed_nodes_through_ansible(repo_root, runtime, os_image):
    """make demo's last part alone (python -m symphony_demo vm): playbooks/provisioning.yml on two VM-backed nodes,
    runtime boot and proof, tunings in the guest, the OS written and booted; gate rows and consoles in the report."""
    proc = subprocess.run([sys.executable, "-m", "symphony_demo", "vm"], cwd=repo_root, capture_output=True,
                          text=True, timeout=scaled(1500), check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    summary = json.loads((repo_root / "build" / "demo" / "vm" / "summary.json").read_text())
    assert sorted(summary["nodes"]) == ["vm-v01-u02", "vm-v01-u06"]
    for host, node in summary["nodes"].items():
        assert node["gate"] == "pass", (host, node)
        for check in ("runtime_boot", "runtime_proof", "verify", "os_install", "os_boot"):
            assert node["checks"][check]["status"] == "pass", (host, check, node["checks"][check])
        assert node["checks"]["os_boot"]["reason"].startswith("runs OS image %s from /dev/vda1" % os_image["build_id"])
        serial = (repo_root / summary["console"] / ("%s.serial.log" % host)).read_text(errors="replace")
        assert "symphony-os %s: ready" % os_image["build_id"] in serial   # the console evidence of the disk boot
    report = json.loads((repo_root / "build" / "demo" / "vm" / "report" / "report.json").read_text())
    assert "vm-v01-u02" in json.dumps(report)
