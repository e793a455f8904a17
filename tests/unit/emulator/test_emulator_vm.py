"""VM-backed nodes (vm.py) without QEMU: the BMC's Redfish actions reach the guest as the QMP mapping says, the
guest's power and console drive PowerState/BootProgress, and a missing QEMU is a startup error, never a fallback.

The QMP side is a recording fake of :class:`symphony_emulator.vm.Guest`; the mapping itself (QMP commands and what
QEMU answered) is the one verified in /work/shared/notes/qemu-guests.md, exercised for real by
tests/integration/test_runtime_vm.py.
"""

import pytest

from ansible_collections.symphony.cluster.plugins.module_utils._core.errors import ValidationError

from symphony_emulator import vm
from symphony_emulator.fleet import Fleet


class FakeGuest(vm.Guest):
    """A Guest whose QMP is a list of calls and whose status is a field."""

    def __init__(self, tmp_path, refuse=None):
        vm.Guest.__init__(self, "n1", str(tmp_path), ssh_port=2222)
        self.calls = []
        self.status = "prelaunch"
        self.refuse = refuse or {}
        self.started = False
        self.bootindex = {"vdisk0": 0, "cdrom0": 1}   # as _argv starts QEMU

    def start(self):
        self.started = True
        self.proc = self

    def poll(self):
        return None

    def _local_media(self, image):
        return image

    def qmp(self, command, **arguments):
        self.start()
        if command in self.refuse:
            raise vm.GuestError("%s: %s" % (command, self.refuse[command]))
        self.calls.append((command, arguments))
        if command == "qom-set":
            # QEMU's check_boot_index: an index any device holds is refused, the device's own included
            if arguments["value"] in self.bootindex.values():
                raise vm.GuestError("qom-set: Boot index %d used by another device" % arguments["value"])
            self.bootindex[arguments["path"].rsplit("/", 1)[-1]] = arguments["value"]
        if command == "query-status":
            return {"status": self.status}
        if command == "cont":
            self.status = "running"
        if command == "stop":
            self.status = "paused"
        return {}


def _vm_bmc(make_bmc, tmp_path, faults=None, refuse=None):
    bmc, c = make_bmc(faults=faults)
    guest = FakeGuest(tmp_path, refuse)
    bmc.attach_vm(guest)
    return bmc, c, guest


def _cd(bmc):
    return bmc.spec.M + "/VirtualMedia/CD1/Actions/VirtualMedia."


def test_insert_override_once_and_reset_boot_the_cd_then_the_disk(make_bmc, tmp_path):
    bmc, c, guest = _vm_bmc(make_bmc, tmp_path)
    assert bmc.tree[bmc.spec.S]["PowerState"] == "Off" and not guest.started   # lazy: nothing started by a GET
    assert c.post(_cd(bmc) + "InsertMedia", {"Image": "/srv/runtime.iso"}).status == 204
    assert guest.calls[-1] == ("blockdev-change-medium", {"id": "cdrom0", "filename": "/srv/runtime.iso",
                                                          "format": "raw", "read-only-mode": "read-only"})
    assert c.patch(bmc.spec.S, {"Boot": {"BootSourceOverrideTarget": "Cd",
                                         "BootSourceOverrideEnabled": "Once"}}).status in (200, 204)
    assert c.post(bmc.spec.S + "/Actions/ComputerSystem.Reset", {"ResetType": "On"}).status == 204
    sets = [(a["path"].rsplit("/", 1)[-1], a["value"]) for cmd, a in guest.calls if cmd == "qom-set"]
    assert sets == [("vdisk0", 9), ("cdrom0", 8), ("cdrom0", 0), ("vdisk0", 1)]   # the CD first for this boot
    assert [cmd for cmd, _args in guest.calls][-3:] == ["system_reset", "query-status", "cont"]
    assert bmc.tree[bmc.spec.S]["PowerState"] == "On"
    # Once: the next reset boots the disk again
    guest.calls.clear()
    assert c.post(bmc.spec.S + "/Actions/ComputerSystem.Reset", {"ResetType": "ForceRestart"}).status == 204
    sets = [(a["path"].rsplit("/", 1)[-1], a["value"]) for cmd, a in guest.calls if cmd == "qom-set"]
    assert sets[-2:] == [("vdisk0", 0), ("cdrom0", 1)] and guest.bootindex == {"vdisk0": 0, "cdrom0": 1}
    assert c.post(bmc.spec.S + "/Actions/ComputerSystem.Reset", {"ResetType": "ForceOff"}).status == 204
    assert guest.calls[-1][0] == "stop" and bmc.tree[bmc.spec.S]["PowerState"] == "Off"


def test_boot_override_ignored_boots_the_disk(make_bmc, tmp_path):
    bmc, c, guest = _vm_bmc(make_bmc, tmp_path, faults={"boot_override_ignored": True})
    c.patch(bmc.spec.S, {"Boot": {"BootSourceOverrideTarget": "Cd", "BootSourceOverrideEnabled": "Once"}})
    assert c.post(bmc.spec.S + "/Actions/ComputerSystem.Reset", {"ResetType": "On"}).status == 204
    sets = [(a["path"].rsplit("/", 1)[-1], a["value"]) for cmd, a in guest.calls if cmd == "qom-set"]
    assert sets[-2:] == [("vdisk0", 0), ("cdrom0", 1)]


def test_a_refused_medium_change_is_a_redfish_error_not_swallowed(make_bmc, tmp_path):
    bmc, c, guest = _vm_bmc(make_bmc, tmp_path, refuse={"blockdev-change-medium": "Tray of device 'cdrom0' is not open"})
    reply = c.post(_cd(bmc) + "InsertMedia", {"Image": "/srv/runtime.iso"})
    assert reply.status == 500
    assert "Tray of device 'cdrom0' is not open" in reply.json()["error"]["message"]
    assert bmc.describe()["virtual_media"]["inserted"] is False


def test_the_config_medium_is_a_second_virtual_media_device(make_bmc, tmp_path):
    bmc, c, guest = _vm_bmc(make_bmc, tmp_path)
    coll = bmc.tree[bmc.spec.M + "/VirtualMedia"]
    assert [m["@odata.id"].rsplit("/", 1)[-1] for m in coll["Members"]] == ["CD1", "USB1"]
    usb = bmc.spec.M + "/VirtualMedia/USB1"
    assert bmc.tree[usb]["MediaTypes"] == ["USBStick"] and bmc.tree[usb]["Inserted"] is False
    assert c.post(usb + "/Actions/VirtualMedia.InsertMedia", {"Image": "/srv/cfg.iso"}).status == 204
    assert guest.calls[-1][1]["id"] == "cdrom1" and bmc.tree[usb]["Image"] == "/srv/cfg.iso"
    assert c.post(usb + "/Actions/VirtualMedia.EjectMedia", {}).status == 204
    assert guest.calls[-1] == ("eject", {"id": "cdrom1", "force": True}) and bmc.tree[usb]["Inserted"] is False


def test_boot_progress_follows_the_console_since_the_last_reset(make_bmc, tmp_path):
    bmc, c, guest = _vm_bmc(make_bmc, tmp_path)
    serial = tmp_path / "serial.log"
    serial.write_bytes(b"old boot\nsymphony-runtime rt-1: ready (10.0.2.15/24)\n")
    c.post(bmc.spec.S + "/Actions/ComputerSystem.Reset", {"ResetType": "On"})
    assert bmc.tree[bmc.spec.S]["BootProgress"]["LastState"] == "SystemHardwareInitializationComplete"
    with open(serial, "ab") as f:
        f.write(b"[    0.000000] Linux version 6.1.0-57-amd64\n")
    assert bmc.tree[bmc.spec.S]["BootProgress"]["LastState"] == "OSBootStarted"
    with open(serial, "ab") as f:
        f.write(b"symphony-runtime rt-2: ready (10.0.2.15/24 )\n")
    assert bmc.tree[bmc.spec.S]["BootProgress"]["LastState"] == "OSRunning"


def test_missing_qemu_is_a_startup_error(monkeypatch, repo_root):
    monkeypatch.setattr(vm.shutil, "which", lambda name: None)
    with pytest.raises(ValidationError, match="qemu-system-x86_64"):
        Fleet(repo_root / "molecule" / "provisioning" / "provisioning.twin.yml", vm_nodes=1, http=True)
