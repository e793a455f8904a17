"""VM-backed nodes: a BMC whose System is a real QEMU guest, driven over QMP with the ``qemu.qmp`` library.

Opt-in per node (``Fleet(vm_nodes=...)``, ``serve --vm-nodes N``).  The guest is a "powered off" QEMU process
(``-S``: created, not running) with an empty CD drive (the BMC's VirtualMedia CD1), a qcow2 disk and user-mode
networking whose ``hostfwd`` gives the node's in-band SSH address, 127.0.0.1:<port>.  The Redfish actions map to QMP
as ``/work/shared/notes/qemu-guests.md`` verified them:

| Redfish | QMP |
|---|---|
| VirtualMedia.InsertMedia | ``blockdev-change-medium {id: cd0, filename, format: raw}`` |
| VirtualMedia.EjectMedia | ``eject {id: cd0, force: true}`` |
| Reset On / ForceRestart / PowerCycle ... | boot order via ``qom-set bootindex`` (applied at reset), ``system_reset`` + ``cont`` |
| Reset ForceOff / GracefulShutdown | ``stop`` (the process stays, as a powered-off node's BMC stays) |
| VirtualMedia USB1 (config medium) | a second CD drive, ``cfg0``: the runtime reads the label ``SYMCFG`` at boot |
| PowerState | ``query-status``: ``running`` -> On, anything else -> Off |
| BootProgress.LastState | the serial console since the last reset: kernel line -> OSBootStarted, runtime/OS "ready" -> OSRunning |

The accelerator is always TCG: ``/dev/kvm`` on these machines is a paravirtual device that cannot run an ordinary
guest kernel (it hangs or fails with "KVM internal error"; see the note above).  Guests start lazily (at the first
action that needs one) and always stop with the emulator (:meth:`Guest.close`).
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import shutil
import socket
import subprocess
import threading
import time
import urllib.request
from urllib.parse import unquote, urlsplit

from ansible_collections.symphony.cluster.plugins.module_utils._core.errors import ValidationError

from symphony_emulator.replies import Reply, error_body, jreply
from symphony_emulator.resources import T, link

try:
    from qemu.qmp import ConnectError, ExecuteError, QMPClient, QMPError
except ImportError:  # only VM-backed nodes need it: require_qemu() says so at start
    QMPClient = None
    QMPError = ConnectError = ExecuteError = OSError

# A guest that is already gone answers quit/disconnect with one of these; close() reaps the process either way.
_GONE = (QMPError, OSError, TimeoutError, EOFError)

QEMU = "qemu-system-x86_64"
QEMU_IMG = "qemu-img"
# What the runtime's /init (images/runtime/init) and the installed OS print on the console once sshd is up.
READY_MARK = b": ready ("
KERNEL_MARK = b"Linux version "


class GuestError(Exception):
    """A QMP command the guest refused (a locked tray, a medium it cannot open): the BMC answers it as an error."""


def guest_refused(exc):
    """500 GeneralError carrying QEMU's own words (a locked tray, an unreadable image), never swallowed."""
    body = error_body("GeneralError")
    body["error"]["message"] = body["error"]["@Message.ExtendedInfo"][0]["Message"] = str(exc)
    return jreply(500, body)


def require_qemu():
    """Raise :class:`ValidationError` naming what is missing when QEMU cannot run VM-backed nodes."""
    missing = [b for b in (QEMU, QEMU_IMG) if shutil.which(b) is None]
    if missing:
        raise ValidationError("VM-backed nodes need %s (Debian: apt-get install qemu-system-x86 qemu-utils)"
                              % " and ".join(missing), where="vm_nodes")
    if QMPClient is None:
        raise ValidationError("VM-backed nodes need the qemu.qmp library (pip install qemu.qmp)", where="vm_nodes")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Guest:
    """One QEMU guest behind one BMC.

    ``state_dir``: where its disk (``disk.qcow2``), QMP socket, serial log (``serial.log``) and media cache go.
    ``disk_gib``: the qcow2's virtual size; ``disk_seed``: an image (raw or qcow2) the disk starts as (the node's
    "old OS"), else an empty disk; ``memory_mib``: guest RAM (the runtime's root lives in it).
    """

    def __init__(self, hostname, state_dir, memory_mib=2048, disk_gib=4, disk_seed=None, ssh_port=None):
        self.hostname = hostname
        self.dir = os.path.abspath(state_dir)
        self.memory_mib = int(memory_mib)
        self.disk_gib = int(disk_gib)
        self.disk_seed = disk_seed
        self.ssh_port = ssh_port or free_port()
        self.disk = os.path.join(self.dir, "disk.qcow2")
        self.serial = os.path.join(self.dir, "serial.log")
        self.qmp_path = os.path.join(self.dir, "qmp.sock")
        self.proc = None
        self._loop = None
        self._thread = None
        self._qmp = None
        self._serial_mark = 0      # serial.log offset at the last reset (BootProgress reads from there)
        self.config_image = None   # what VirtualMedia USB1 holds (the runtime's boot-time configuration)
        self._lock = threading.Lock()

    # ------------------------------------------------------------------ process
    def _argv(self):
        return [QEMU, "-accel", "tcg", "-m", str(self.memory_mib), "-smp", "1", "-display", "none", "-S",
                "-no-shutdown", "-serial", "file:%s" % self.serial, "-qmp", "unix:%s,server=on,wait=off" % self.qmp_path,
                "-boot", "strict=on",
                # The CD drives sit on an AHCI (SATA) controller, not legacy IDE: SeaBIOS reads an ISO over IDE
                # with port I/O, which under TCG costs 7 s more per boot for the runtime's initramfs. A virtio RNG
                # seeds the guest's entropy pool as a server's RDRAND/TPM would (TCG's CPU has neither).
                "-device", "ahci,id=ahci0", "-device", "virtio-rng-pci",
                "-drive", "if=none,id=cd0,media=cdrom,readonly=on",
                "-device", "ide-cd,drive=cd0,id=cdrom0,bus=ahci0.0,bootindex=1",
                "-drive", "if=none,id=cfg0,media=cdrom,readonly=on", "-device", "ide-cd,drive=cfg0,id=cdrom1,bus=ahci0.1",
                "-drive", "file=%s,if=none,id=disk0,format=qcow2" % self.disk,
                "-device", "virtio-blk-pci,drive=disk0,id=vdisk0,bootindex=0",
                "-nic", "user,model=e1000,hostfwd=tcp:127.0.0.1:%d-:22" % self.ssh_port]

    def start(self):
        """Create the disk and start QEMU paused (a powered-off node); idempotent."""
        with self._lock:
            if self.proc is not None and self.proc.poll() is None:
                return
            os.makedirs(self.dir, exist_ok=True)
            if not os.path.exists(self.disk):
                self._make_disk()
            for path in (self.qmp_path,):
                if os.path.exists(path):
                    os.unlink(path)
            open(self.serial, "wb").close()
            self.proc = subprocess.Popen(self._argv(), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                         stderr=open(os.path.join(self.dir, "qemu.log"), "ab"))
            self._loop = asyncio.new_event_loop()
            self._thread = threading.Thread(target=self._loop.run_forever, name="qmp-%s" % self.hostname, daemon=True)
            self._thread.start()
            self._connect()

    def _make_disk(self):
        if self.disk_seed:
            fmt = "qcow2" if self.disk_seed.endswith(".qcow2") else "raw"
            subprocess.run([QEMU_IMG, "convert", "-q", "-f", fmt, "-O", "qcow2", self.disk_seed, self.disk], check=True)
            subprocess.run([QEMU_IMG, "resize", "-q", self.disk, "%dG" % self.disk_gib], check=True)
        else:
            subprocess.run([QEMU_IMG, "create", "-q", "-f", "qcow2", self.disk, "%dG" % self.disk_gib], check=True)

    def _connect(self):
        self._qmp = QMPClient(self.hostname)
        deadline = time.monotonic() + 30
        while True:
            try:
                self._run(self._qmp.connect(self.qmp_path), timeout=10)
                return
            except (OSError, ConnectError) as exc:  # the socket is not there yet while QEMU starts
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise GuestError("QEMU for %s did not open its QMP socket: %s (see %s)"
                                     % (self.hostname, exc, os.path.join(self.dir, "qemu.log")))
                time.sleep(0.2)
                self._qmp = QMPClient(self.hostname)

    def _run(self, coro, timeout=30):
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout=timeout)

    def qmp(self, command, **arguments):
        """Run one QMP command; raises :class:`GuestError` with QEMU's own message when it refuses."""
        self.start()
        try:
            return self._run(self._qmp.execute(command, arguments or None))
        except ExecuteError as exc:
            raise GuestError("%s: %s" % (command, exc))

    def close(self):
        """Stop QEMU (quit over QMP, then terminate/kill) and the QMP thread; safe to call twice."""
        proc, self.proc = self.proc, None
        if proc is None:
            return
        try:
            if self._qmp is not None:
                self._run(self._qmp.execute("quit"), timeout=5)
        except _GONE:
            pass
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)
        try:
            self._run(self._qmp.disconnect(), timeout=5)
        except _GONE:
            pass
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)
        self._loop.close()

    # ------------------------------------------------------------------ Redfish mapping
    def _local_media(self, image):
        """A local path for a VirtualMedia ``Image``: file:// or a path as is; http(s) fetched once into the cache
        (verified TLS, as a BMC's own client would)."""
        parts = urlsplit(image)
        if parts.scheme in ("", "file"):
            path = unquote(parts.path)
            if not os.path.isfile(path):
                raise GuestError("the image %s is not a readable file" % image)
            return path
        if parts.scheme not in ("http", "https"):
            raise GuestError("unsupported transfer protocol %r for %s" % (parts.scheme, image))
        cache = os.path.join(self.dir, "media", hashlib.sha256(image.encode()).hexdigest()[:16] + ".iso")
        if not os.path.exists(cache):
            os.makedirs(os.path.dirname(cache), exist_ok=True)
            try:
                with urllib.request.urlopen(image, timeout=60) as resp, open(cache + ".part", "wb") as out:
                    shutil.copyfileobj(resp, out)
            except OSError as exc:
                raise GuestError("cannot fetch %s: %s" % (image, exc))
            os.replace(cache + ".part", cache)
        return cache

    def insert(self, image, device="cdrom0"):
        self.qmp("blockdev-change-medium", id=device, filename=self._local_media(image), format="raw",
                 **{"read-only-mode": "read-only"})

    def eject(self, device="cdrom0"):
        self.qmp("eject", id=device, force=True)

    # ------------------------------------------------------------------ the config medium, VirtualMedia USB1
    def add_resources(self, tree, spec):
        """Add VirtualMedia USB1 (the config medium) to ``tree``, the BMC's generated resource tree."""
        uri = spec.M + "/VirtualMedia/USB1"
        coll = tree[spec.M + "/VirtualMedia"]
        coll["Members"] = coll["Members"] + [link(uri)]
        coll["Members@odata.count"] = len(coll["Members"])
        image = self.config_image
        tree[uri] = {
            "@odata.id": uri, "@odata.type": T["VirtualMedia"], "Id": "USB1", "Name": "Virtual USB",
            "MediaTypes": ["USBStick"], "Image": image, "ImageName": image.rsplit("/", 1)[-1] if image else None,
            "Inserted": image is not None, "WriteProtected": True, "ConnectedVia": "URI" if image else "NotConnected",
            "Actions": {"#VirtualMedia.InsertMedia": {"target": uri + "/Actions/VirtualMedia.InsertMedia"},
                        "#VirtualMedia.EjectMedia": {"target": uri + "/Actions/VirtualMedia.EjectMedia"}}}

    def post_routes(self, spec):
        """``{action target: (handler, "json")}`` of USB1, merged into the BMC's POST table."""
        uri = spec.M + "/VirtualMedia/USB1/Actions/VirtualMedia."
        return {uri + "InsertMedia": (self._insert_config, "json"), uri + "EjectMedia": (self._eject_config, "json")}

    def _insert_config(self, data):
        image = data.get("Image")
        if not image:
            return jreply(400, error_body("ActionParameterMissing", "VirtualMedia.InsertMedia", "Image"))
        if self.config_image is not None:
            return jreply(409, error_body("ResourceInUse"))
        try:
            self.insert(image, device="cdrom1")
        except GuestError as exc:
            return guest_refused(exc)
        self.config_image = image
        return Reply(204)

    def _eject_config(self, _data):
        try:
            self.eject(device="cdrom1")
        except GuestError as exc:
            return guest_refused(exc)
        self.config_image = None
        return Reply(204)

    def _boot_order(self, target):
        first, second = ("cdrom0", "vdisk0") if target == "Cd" else ("vdisk0", "cdrom0")
        # QEMU refuses an index any device holds, the device itself included: park both on free ones first
        for device, index in ((second, 9), (first, 8), (first, 0), (second, 1)):
            self.qmp("qom-set", path="/machine/peripheral/%s" % device, property="bootindex", value=index)

    def boot(self, target):
        """Power on or restart into ``target`` (``Cd`` or anything else: the disk) for this boot."""
        self.start()
        self._boot_order(target)
        self._serial_mark = os.path.getsize(self.serial) if os.path.exists(self.serial) else 0
        self.qmp("system_reset")
        if self.qmp("query-status").get("status") != "running":
            self.qmp("cont")

    def power_off(self):
        if self.proc is not None:
            self.qmp("stop")

    def power_state(self):
        if self.proc is None or self.proc.poll() is not None:
            return "Off"
        return "On" if self.qmp("query-status").get("status") == "running" else "Off"

    def boot_progress(self):
        """Redfish ``BootProgress.LastState`` from the serial console since the last reset."""
        if self.power_state() != "On":
            return "None"
        try:
            with open(self.serial, "rb") as handle:
                handle.seek(self._serial_mark)
                seen = handle.read()
        except OSError:
            seen = b""
        if READY_MARK in seen:
            return "OSRunning"
        if KERNEL_MARK in seen:
            return "OSBootStarted"
        return "SystemHardwareInitializationComplete"

    def console_tail(self, lines=20):
        """The last ``lines`` lines of the serial console (text)."""
        try:
            with open(self.serial, "rb") as handle:
                data = handle.read()[-65536:]
        except OSError:
            return ""
        return "\n".join(data.decode("utf-8", "replace").replace("\r", "").splitlines()[-lines:])
