"""os_install / os_boot: the SKU's OS written to the node's disk from the runtime and verified in-band after the boot.

The probe answers are util-linux 2.38 ``findmnt -J``/``lsblk -J -p`` as the installed Debian 12 image and the runtime
print them (captured from the guests of tests/integration/test_runtime_vm.py), joined onto one line as the probe does.
The booted-for-real path is that integration test; here every branch of the check with a scripted runner.
"""

import hashlib
import json
from types import SimpleNamespace

import pytest

from ansible_collections.symphony.cluster.plugins.module_utils._core.gate import BLOCKED, FAIL, NOT_RUN, PASS
from ansible_collections.symphony.cluster.plugins.module_utils._core.errors import ManifestError
from ansible_collections.symphony.cluster.plugins.module_utils._core.sku import load_manifest, validate_manifest
from ansible_collections.symphony.cluster.plugins.module_utils._host.launchers import SSHLauncher
from ansible_collections.symphony.cluster.plugins.module_utils._host.process import CommandResult, CommandTimeoutError
from ansible_collections.symphony.cluster.plugins.module_utils._provision import os_install
from ansible_collections.symphony.cluster.plugins.module_utils._provision.node import ProvisionSettings, check_graph

RAW = b"\x00" * 4096
RUNTIME = {"image_uri": "file:///x.iso", "method": "virtual_media", "build_id": "rt-0123456789abcdef"}
BLK = {"blockdevices": [{"name": "/dev/sr0", "type": "rom"},
                        {"name": "/dev/vda", "type": "disk", "children": [{"name": "/dev/vda1", "type": "part"}]}]}
OS_ROOT = {"filesystems": [{"target": "/", "source": "/dev/vda1", "fstype": "ext4", "label": "symphony-os"}]}
RAM_ROOT = {"filesystems": [{"target": "/", "source": "rootfs", "fstype": "rootfs", "label": None}]}


OS_CMDLINE = "root=LABEL=symphony-os ro console=ttyS0,115200 iommu=pt intel_iommu=on pci=realloc=off"


def pin(tmp_path, data=b"compressed image"):
    image = tmp_path / "os.img.zst"
    image.write_bytes(data)
    return {"image_uri": "file://%s" % image, "sha256": hashlib.sha256(data).hexdigest(),
            "raw_sha256": hashlib.sha256(RAW).hexdigest(), "raw_bytes": len(RAW), "build_id": "os-8e1bf04105145a1d",
            "target_disk": "/dev/vda", "root_label": "symphony-os", "kernel": "6.1.0-50-amd64",
            "kernel_cmdline": OS_CMDLINE, "os_release": {"ID": "debian", "VERSION_ID": "12"}, "packages": {"openssh-server": "1:9.2p1-2+deb12u10"},
            "boot_timeout_s": 0.05}


def probe_answer(root=None, os_image="os-8e1bf04105145a1d", runtime="", release="ID=debian VERSION_ID=12",
                 kernel="6.1.0-50-amd64", packages="openssh-server=1:9.2p1-2+deb12u10 ", end=True,
                 cmdline="BOOT_IMAGE=/boot/vmlinuz-6.1.0-50-amd64 " + OS_CMDLINE):
    lines = ["root=" + json.dumps(root or OS_ROOT, indent=3).replace("\n", ""),
             "blk=" + json.dumps(BLK, indent=3).replace("\n", ""), "os_image=" + os_image, "runtime=" + runtime,
             "os_release=" + release, "kernel=" + kernel, "cmdline=" + cmdline, "packages=" + packages]
    return "\n".join(lines + (["end=1"] if end else [])) + "\n"


IN_RUNTIME = probe_answer(root=RAM_ROOT, os_image="", runtime="rt-0123456789abcdef", release="ID=debian VERSION_ID=12",
                          packages="")


class Scripted:
    """A runner answering the probe and the write in turn, recording every argv and stdin file."""

    def __init__(self, *answers):
        self.answers = list(answers)
        self.calls = []

    def __call__(self, argv, timeout_s, stdin_path=None):
        self.calls.append((argv, stdin_path))
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        rc, out = answer if isinstance(answer, tuple) else (0, answer)
        return CommandResult(tuple(argv), rc, out, "", 0.01)


def _nd(tmp_path, **over):
    writes = []
    settings = ProvisionSettings(username="u", password="p", poll_s=0.01, os_install=True)
    manifest = {"runtime": RUNTIME, "os": dict(pin(tmp_path), **over)}
    client = SimpleNamespace(get=lambda uri: {"BootProgress": {"LastState": "OSBootStarted"}})
    nd = SimpleNamespace(host="gpu-1", manifest=manifest, settings=settings, client=client,
                         inv=SimpleNamespace(systems=[{"uri": "/redfish/v1/Systems/1", "power_state": "On"}],
                                             capabilities={"power_actions": ["ForceRestart"]}),
                         patch=lambda uri, body: writes.append(("PATCH", uri, body)),
                         post=lambda uri, body: writes.append(("POST", uri, body)))
    return nd, writes


LAUNCHER = SSHLauncher(hosts={"gpu-1": "127.0.0.1"}, port=2222)


def test_the_booted_pinned_os_has_no_problems_and_every_difference_is_named(tmp_path):
    want = pin(tmp_path)
    assert os_install.problems_of(os_install.probe(_nd(tmp_path)[0], LAUNCHER, Scripted(probe_answer())), want) == []
    found = os_install.probe(_nd(tmp_path)[0], LAUNCHER, Scripted(probe_answer(
        os_image="os-old", kernel="6.1.0-49-amd64", release="ID=ubuntu VERSION_ID=22.04", packages="")))
    text = "; ".join(os_install.problems_of(found, want))
    assert "OS image 'os-old', the SKU pins 'os-8e1bf04105145a1d'" in text
    assert "kernel '6.1.0-49-amd64'" in text and "os-release ID 'ubuntu'" in text
    assert "package openssh-server not installed, the SKU pins 1:9.2p1-2+deb12u10" in text


def test_an_os_booted_with_another_kernel_command_line_is_not_the_pinned_os(tmp_path):
    """GRUB's own BOOT_IMAGE= word is set aside (the pass above has it); a token missing or added is named."""
    found = os_install.probe(_nd(tmp_path)[0], LAUNCHER, Scripted(probe_answer(
        cmdline="BOOT_IMAGE=/boot/vmlinuz root=LABEL=symphony-os ro console=ttyS0,115200")))
    assert os_install.problems_of(found, pin(tmp_path)) == [
        "kernel command line 'root=LABEL=symphony-os ro console=ttyS0,115200', the SKU pins %r" % OS_CMDLINE]
    found = os_install.probe(_nd(tmp_path)[0], LAUNCHER, Scripted(probe_answer(cmdline=OS_CMDLINE + " single")))
    assert len(os_install.problems_of(found, pin(tmp_path))) == 1


def test_the_runtime_is_not_the_installed_os(tmp_path):
    found = os_install.probe(_nd(tmp_path)[0], LAUNCHER, Scripted(IN_RUNTIME))
    problems = os_install.problems_of(found, pin(tmp_path))
    assert "root is rootfs (rootfs), not a partition of a disk" in problems
    assert os_install.in_runtime(found, RUNTIME)


@pytest.mark.parametrize("answer", [probe_answer(end=False), probe_answer().replace('"filesystems"', '"filesys'),
                                    (255, "")])
def test_an_incomplete_garbled_or_refused_probe_is_never_the_pinned_os(tmp_path, answer):
    found = os_install.probe(_nd(tmp_path)[0], LAUNCHER, Scripted(answer))
    assert found.get("error") and os_install.problems_of(found, pin(tmp_path))


def test_a_node_on_the_pinned_os_is_not_rewritten(tmp_path):
    nd, writes = _nd(tmp_path)
    runner = Scripted(probe_answer())
    out = os_install.install_os(nd, LAUNCHER, runner)
    assert out.status == PASS and out.reason.startswith("already on the pinned OS image os-8e1bf04105145a1d")
    assert len(runner.calls) == 1 and writes == []


def test_the_image_is_streamed_read_back_and_the_disk_booted_once(tmp_path):
    nd, writes = _nd(tmp_path)
    written = "written=%s\nseconds=12\npart=/dev/vda1\nend=1\n" % hashlib.sha256(RAW).hexdigest()
    runner = Scripted(IN_RUNTIME, written)
    out = os_install.install_os(nd, LAUNCHER, runner)
    assert out.status == PASS, out.reason
    argv, stdin_path = runner.calls[1]
    assert stdin_path == str(tmp_path / "os.img.zst")   # the image goes over SSH from the controller
    assert "/dev/vda" in argv[-1] and hashlib.sha256(RAW).hexdigest() in argv[-1]
    assert writes == [("PATCH", "/redfish/v1/Systems/1",
                       {"Boot": {"BootSourceOverrideTarget": "Hdd", "BootSourceOverrideEnabled": "Once"}}),
                      ("POST", "/redfish/v1/Systems/1/Actions/ComputerSystem.Reset", {"ResetType": "ForceRestart"})]


def test_a_url_is_fetched_once_into_the_cache_checked_and_streamed(tmp_path):
    import functools
    import http.server
    import threading
    served = tmp_path / "www"
    served.mkdir()
    (served / "os.img.zst").write_bytes(b"compressed image")
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(served))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = "http://127.0.0.1:%d/os.img.zst" % server.server_address[1]
        nd, _writes = _nd(tmp_path, image_uri=url)
        nd.settings.image_dir = str(tmp_path / "cache")
        (tmp_path / "cache").mkdir()
        runner = Scripted(IN_RUNTIME, "written=%s\nend=1\n" % hashlib.sha256(RAW).hexdigest())
        assert os_install.install_os(nd, LAUNCHER, runner).status == PASS
        _argv, stdin_path = runner.calls[1]
        assert stdin_path.startswith(str(tmp_path / "cache")) and open(stdin_path, "rb").read() == b"compressed image"
        # another image behind the same URL: fetched, hashed, refused before anything is sent
        (served / "os.img.zst").write_bytes(b"another image")
        nd, writes = _nd(tmp_path, image_uri=url, sha256="e" * 64)
        runner = Scripted(IN_RUNTIME)
        out = os_install.install_os(nd, LAUNCHER, runner)
        assert out.status == FAIL and "the SKU pins " + "e" * 64 in out.reason and len(runner.calls) == 1
        assert writes == []
    finally:
        server.shutdown()


def test_a_read_back_that_differs_fails_and_nothing_is_booted(tmp_path):
    nd, writes = _nd(tmp_path)
    out = os_install.install_os(nd, LAUNCHER, Scripted(IN_RUNTIME, "written=%s\nend=1\n" % ("0" * 64)))
    assert out.status == FAIL and out.reason.startswith("the disk does not hold the image")
    assert writes == []


def test_a_local_image_that_is_not_the_pinned_one_is_never_sent(tmp_path):
    nd, writes = _nd(tmp_path, sha256="f" * 64)
    runner = Scripted(IN_RUNTIME)
    out = os_install.install_os(nd, LAUNCHER, runner)
    assert out.status == FAIL and "the SKU pins " + "f" * 64 in out.reason
    assert len(runner.calls) == 1 and writes == []


@pytest.mark.parametrize("answer, words", [
    (CommandTimeoutError("timed out"), "did not finish"),
    ((3, "error=/dev/vda is mounted\n"), "/dev/vda is mounted"),
    ((0, "written=abc\n"), "failed"),           # no end=1: cut off
])
def test_a_write_that_dies_or_refuses_fails_and_is_not_marked_done(tmp_path, answer, words):
    nd, writes = _nd(tmp_path)
    out = os_install.install_os(nd, LAUNCHER, Scripted(IN_RUNTIME, answer))
    assert out.status == FAIL and words in out.reason
    assert writes == []


def test_no_install_from_anything_but_the_runtime(tmp_path):
    nd, writes = _nd(tmp_path)
    out = os_install.install_os(nd, LAUNCHER, Scripted(probe_answer(os_image="os-old")))
    assert out.status == FAIL and "not in the SKU's runtime" in out.reason and writes == []
    assert os_install.install_os(nd, None).status == NOT_RUN


def test_os_boot_passes_fails_and_blocks(tmp_path):
    nd, _writes = _nd(tmp_path)
    assert os_install.verify_os_boot(nd, LAUNCHER, runner=Scripted(probe_answer())).status == PASS
    bad = os_install.verify_os_boot(nd, LAUNCHER, runner=Scripted(probe_answer(os_image="os-old")))
    assert bad.status == FAIL and bad.reason.startswith("did not boot the installed OS: OS image 'os-old'")
    # still the runtime after the reset until the timeout (the BMC ignored the disk boot): a failure, not a pass
    stuck = os_install.verify_os_boot(nd, LAUNCHER, runner=Scripted(*[IN_RUNTIME] * 50))
    assert stuck.status == FAIL and "the runtime's build id" in stuck.reason
    console = tmp_path / "serial.log"
    console.write_bytes(b"SeaBIOS\r\nBooting from Hard Disk...\r\n")
    gone = os_install.verify_os_boot(nd, LAUNCHER, str(console), runner=Scripted(*[(255, "")] * 50))
    assert gone.status == BLOCKED and "BootProgress OSBootStarted" in gone.reason
    assert gone.evidence["console_tail"][-1] == "Booting from Hard Disk..."


def test_the_graph_puts_the_os_after_verify_and_only_when_asked():
    graph = check_graph({"firmware": []}, install_os=True)
    assert graph.specs["os_install"].depends_on == ("verify",) and graph.specs["os_boot"].depends_on == ("os_install",)
    assert "os_install" not in check_graph({"firmware": []}).specs


def test_the_sku_schema_takes_an_os_pin_and_names_a_missing_field(tmp_path, repo_root):
    manifest = load_manifest(str(repo_root / "skus" / "hgx_h100_supermicro.yml"))
    full = dict(pin(tmp_path), boot_timeout_s=300)
    assert validate_manifest(dict(manifest, os=full), "hgx.yml")["os"]["build_id"] == full["build_id"]
    with pytest.raises(ManifestError) as err:
        validate_manifest(dict(manifest, os={"image_uri": "x"}), "hgx.yml")
    assert "os" in str(err.value) and "hgx.yml" in str(err.value)


@pytest.mark.parametrize("section", ["runtime", "os"])
def test_a_sku_whose_pinned_boot_line_lacks_its_own_tunings_tokens_is_refused(tmp_path, repo_root, section):
    """Such a SKU could never pass tunings (runtime) or would show drift on every node (os): refused at load, naming
    the file, the field and the tokens."""
    manifest = load_manifest(str(repo_root / "skus" / "hgx_h100_supermicro.yml"))
    tokens = manifest["tunings"]["kernel_cmdline"]
    line = " ".join(w for w in manifest[section]["kernel_cmdline"].split() if w not in tokens[1:])
    with pytest.raises(ManifestError) as err:
        validate_manifest(dict(manifest, **{section: dict(manifest[section], kernel_cmdline=line)}), "hgx.yml")
    assert str(err.value).startswith("hgx.yml: $.%s.kernel_cmdline: tunings.kernel_cmdline %s not on"
                                     % (section, " ".join(tokens[1:])))
    # every token present (any order, more words) is accepted
    ok = " ".join(reversed(tokens)) + " quiet"
    assert validate_manifest(dict(manifest, **{section: dict(manifest[section], kernel_cmdline=ok)}), "hgx.yml")
