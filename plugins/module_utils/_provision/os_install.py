# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The last provisioning step: the SKU's production OS written to the node's disk from the RAM-only runtime, the next
boot set to that disk, and the boot verified in-band (the talk's order: firmware and BIOS at the baseline from a
runtime that inherits nothing, then the OS).

Two checks, after ``verify`` passed (every firmware version and BIOS attribute at the SKU's baseline):

* ``os_install``: in-band, from the proven runtime (:func:`install_os`): the image (the SKU's ``os.image_uri``,
  pinned by ``sha256``; a URL is first fetched once into the controller's image cache with TLS verified) is checked
  against the pin on the controller, streamed over SSH and decompressed onto ``os.target_disk``.  Its first MiB
  (MBR and boot loader) is zeroed first and written last, only after the rest read back from the disk hashes to
  the pinned ``raw_sha256``: a write that dies half-way leaves a disk that boots nothing, never a half-written OS
  that looks installed.  Then the controller's SSH key (the
  one the runtime was given at boot, never in the image) and the hostname go onto the new root, and the BMC sets a
  one-time ``Hdd`` boot and resets the node.
* ``os_boot``: in-band, after the reset (:func:`verify_os_boot`): root is the pinned image's partition on the target
  disk (not RAM), ``/etc/symphony/os-image-id`` is the pinned ``build_id``, os-release, kernel, kernel command line
  and the pinned packages are as the SKU says, and the runtime's build id is gone.  Any mismatch fails "did not boot
  the installed OS".

Idempotent: a node that already runs the pinned OS from its disk is not rewritten (``os_install`` passes "already on
the pinned OS image", ``os_boot`` still verifies it); the ledger never holds an ``os_install`` pass for a write that
did not finish, so a killed install is redone from the start of the image write.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from typing import Any, Callable, Mapping, Optional
from urllib.error import HTTPError, URLError
from urllib.parse import unquote, urlsplit

from ansible.module_utils.urls import open_url

from .._core.gate import Outcome, failed, not_run, passed
from .._host.launchers import Launcher
from .._host.process import CommandTimeoutError, run
from .._redfish.reader import reset_request
from .inband_fw import file_sha256
from .node import NodeRun
from .proof import RAM_FSTYPES, _flatten, boot_words, no_answer

MIB = 1048576

# POSIX sh on the runtime and on the installed OS alike: what runs, from where; one field a line, ``end=1`` last.
OS_PROBE = (
    "echo \"root=$(findmnt -J -o TARGET,SOURCE,FSTYPE,LABEL / | tr -d '\\n')\"; "
    "echo \"blk=$(lsblk -J -p -o NAME,TYPE | tr -d '\\n')\"; "
    "echo \"os_image=$(cat /etc/symphony/os-image-id 2>/dev/null)\"; "
    "echo \"runtime=$(cat /etc/symphony/build-id 2>/dev/null)\"; "
    "echo \"os_release=$(. /etc/os-release 2>/dev/null; echo \"ID=$ID VERSION_ID=$VERSION_ID\")\"; "
    "echo \"kernel=$(uname -r)\"; "
    "echo \"cmdline=$(cat /proc/cmdline)\"; "
    "echo \"packages=$(dpkg-query -W -f='${Package}=${Version} ' \"$@\" 2>/dev/null)\"; "
    "echo end=1"
)

# bash on the runtime, the zstd image on stdin: $1 disk, $2 raw bytes, $3 root label, $4 hostname, $5 raw sha256.
WRITE = r"""set -euo pipefail
disk=$1 raw=$2 label=$3 name=$4 want=$5
[ -b "$disk" ] || { echo "error=$disk is not a block device"; exit 3; }
if findmnt -rno SOURCE | grep -q "^$disk"; then echo "error=$disk is mounted"; exit 3; fi
[ "$(blockdev --getsize64 "$disk")" -ge "$raw" ] || { echo "error=$disk is smaller than the image ($raw bytes)"; exit 3; }
start=$(date +%s)
# the boot sector first: from here until the end nothing on this disk boots
dd if=/dev/zero of="$disk" bs=1M count=1 conv=fsync,notrunc status=none
zstd -dc | { dd of=/run/os-head.bin bs=1M count=1 iflag=fullblock status=none;
                     dd of="$disk" bs=4M seek=1M oflag=seek_bytes iflag=fullblock conv=fsync,notrunc status=none; }
sync; echo 3 > /proc/sys/vm/drop_caches
sum=$( { cat /run/os-head.bin; dd if="$disk" bs=4M skip=1M count=$((raw - 1048576)) iflag=skip_bytes,count_bytes status=none; } | sha256sum | cut -c1-64)
echo "written=$sum"
echo "seconds=$(( $(date +%s) - start ))"
if [ "$sum" != "$want" ]; then echo end=1; exit 0; fi
dd if=/run/os-head.bin of="$disk" bs=1M count=1 conv=fsync,notrunc status=none
blockdev --rereadpt "$disk"; udevadm settle --timeout=30 || true
part=$(blkid -L "$label" || true)
[ -n "$part" ] || { echo "error=no partition labelled $label on $disk after the write"; exit 4; }
mkdir -p /run/os-root && mount "$part" /run/os-root
install -d -m 0700 /run/os-root/root/.ssh
install -m 0600 /root/.ssh/authorized_keys /run/os-root/root/.ssh/authorized_keys
echo "$name" > /run/os-root/etc/hostname
umount /run/os-root; sync
echo "part=$part"
echo end=1
"""


def _fields(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key.isidentifier():
            out[key] = value.strip()
    return out


def _pin(nd: NodeRun) -> dict[str, Any]:
    return nd.manifest.get("os") or {}


def probe(nd: NodeRun, launcher: Launcher, runner: Callable[..., Any] = run, timeout_s: float = 60) -> dict[str, Any]:
    """What the node runs, in-band: ``{"root": {source, fstype, label}, "disk": the root's disk, "os_image",
    "runtime", "os_release": {ID, VERSION_ID}, "kernel", "cmdline": /proc/cmdline, "packages": {name: version}}``.

    Raises :class:`CommandTimeoutError` (a hung command); a refused or failed SSH gives ``{"error": text}``.
    """
    pin = _pin(nd)
    res = runner(launcher.wrap(nd.host, ["sh", "-c", OS_PROBE, "probe"] + sorted(pin.get("packages") or {})), timeout_s)
    if not res.ok:
        return {"error": (res.stderr or res.stdout or "exit %s" % res.rc).strip()[-500:]}
    f = _fields(res.stdout)
    if f.get("end") != "1":
        return {"error": "the probe's answer was incomplete (%d bytes)" % len(res.stdout)}
    try:
        root = (json.loads(f["root"]).get("filesystems") or [{}])[0]
        blk = json.loads(f["blk"]).get("blockdevices") or []
    except (KeyError, ValueError, AttributeError, TypeError) as exc:
        return {"error": "the probe's findmnt/lsblk JSON did not parse: %s" % exc}
    disk = None
    for d in blk:
        if any(c.get("name") == root.get("source") for c in _flatten([d])):
            disk = d.get("name")
    release = dict(w.split("=", 1) for w in f.get("os_release", "").split() if "=" in w)
    packages = dict(w.split("=", 1) for w in f.get("packages", "").split() if "=" in w)
    return {"root": {"source": root.get("source"), "fstype": root.get("fstype"), "label": root.get("label")},
            "disk": disk, "os_image": f.get("os_image") or None, "runtime": f.get("runtime") or None,
            "os_release": release, "kernel": f.get("kernel"), "cmdline": f.get("cmdline"), "packages": packages}


def problems_of(found: Mapping[str, Any], pin: Mapping[str, Any]) -> list[str]:
    """Why ``found`` (:func:`probe`) is not the node booted from its disk into the pinned OS ``pin`` (the SKU's
    ``os`` section); empty when it is."""
    if found.get("error"):
        return [str(found["error"])]
    root = found.get("root") or {}
    out = []
    if root.get("fstype") in RAM_FSTYPES or found.get("disk") is None:
        out.append("root is %s (%s), not a partition of a disk" % (root.get("source"), root.get("fstype")))
    elif found["disk"] != pin.get("target_disk"):
        out.append("root %s is on %s, the SKU installs to %s" % (root.get("source"), found["disk"], pin.get("target_disk")))
    if pin.get("root_label") and root.get("label") != pin["root_label"]:
        out.append("root label %r, the image's is %r" % (root.get("label"), pin["root_label"]))
    if found.get("os_image") != pin.get("build_id"):
        out.append("OS image %r, the SKU pins %r" % (found.get("os_image"), pin.get("build_id")))
    if found.get("runtime"):
        out.append("the runtime's build id %r is present" % found["runtime"])
    for key, want in (pin.get("os_release") or {}).items():
        if (found.get("os_release") or {}).get(key) != want:
            out.append("os-release %s %r, the SKU pins %r" % (key, (found.get("os_release") or {}).get(key), want))
    if pin.get("kernel") and found.get("kernel") != pin["kernel"]:
        out.append("kernel %r, the SKU pins %r" % (found.get("kernel"), pin["kernel"]))
    # the image's boot entry, compared as runtime_proof compares the runtime's (GRUB adds BOOT_IMAGE=)
    words = boot_words(found.get("cmdline") or "")
    if pin.get("kernel_cmdline") and words != pin["kernel_cmdline"].split():
        out.append("kernel command line %r, the SKU pins %r" % (" ".join(words), pin["kernel_cmdline"]))
    for name, want in sorted((pin.get("packages") or {}).items()):
        got = (found.get("packages") or {}).get(name)
        if got != want:
            out.append("package %s %s, the SKU pins %s" % (name, got or "not installed", want))
    return out


def in_runtime(found: Mapping[str, Any], runtime: Mapping[str, Any]) -> bool:
    """True when ``found`` is the SKU's RAM-only runtime (its build id, a RAM root): the only place the OS is
    written from."""
    return bool(found.get("runtime")) and found.get("runtime") == runtime.get("build_id") and \
        (found.get("root") or {}).get("fstype") in RAM_FSTYPES


def local_image(uri: str, sha256: str, cache_dir: Optional[str] = None, timeout_s: float = 60) -> str:
    """A local path of the image ``uri``: a path or ``file://`` as is; ``http(s)://`` fetched once (TLS verified,
    ``ansible.module_utils.urls.open_url``) into ``cache_dir`` (default the system temp dir) as
    ``symphony-os-<sha256>.img.zst`` and reused while its bytes still hash to ``sha256``.

    Raises ``OSError`` (unreadable, unreachable, or an unsupported scheme).
    """
    parts = urlsplit(uri)
    if parts.scheme in ("", "file"):
        return unquote(parts.path)
    if parts.scheme not in ("http", "https"):
        raise OSError("unsupported scheme %r for the OS image %s" % (parts.scheme, uri))
    path = os.path.join(cache_dir or tempfile.gettempdir(), "symphony-os-%s.img.zst" % sha256)
    if os.path.exists(path) and file_sha256(path) == sha256:
        return path
    part = path + ".part"
    try:
        with open_url(uri, timeout=timeout_s, validate_certs=True) as response, open(part, "wb") as out:
            shutil.copyfileobj(response, out, MIB)
    except (HTTPError, URLError) as exc:   # subclasses of OSError but for the message
        raise OSError("cannot fetch the OS image %s: %s" % (uri, exc)) from exc
    os.replace(part, path)
    return path


def needs_install(nd: NodeRun, launcher: Optional[Launcher], runner: Callable[..., Any] = run) -> bool:
    """Whether the node must boot the runtime for ``os_install``: anything but the pinned OS answering in-band
    (an unreachable node, another OS, the runtime itself) needs it."""
    if launcher is None or not _pin(nd):
        return False
    try:
        return bool(problems_of(probe(nd, launcher, runner, timeout_s=30), _pin(nd)))
    except CommandTimeoutError:
        return True


def install_os(nd: NodeRun, launcher: Optional[Launcher], runner: Callable[..., Any] = run) -> Outcome:
    """The ``os_install`` check: write the SKU's OS image to ``os.target_disk`` from the runtime and set the next boot
    to that disk (see the module docstring).

    ``launcher``: how the node is reached in-band (None: ``not_run``); ``runner``: :func:`_host.process.run`.
    Returns pass (written and read back, or already on the pinned OS), fail (the image's sha256 on the controller,
    the read-back hash, a write error) or ``not_run``.
    """
    pin = _pin(nd)
    if launcher is None:
        return not_run("no in-band path to the node (runtime_probe proof gives one over SSH)")
    image = nd.settings.os_image_url or pin["image_uri"]
    started = time.monotonic()
    found = probe(nd, launcher, runner)
    if not problems_of(found, pin):
        return passed(expected={"build_id": pin["build_id"]}, observed=found,
                      reason="already on the pinned OS image %s (root %s): not rewritten"
                      % (pin["build_id"], found["root"]["source"]), evidence={"skipped": True})
    if not in_runtime(found, nd.manifest.get("runtime") or {}):
        return failed("the node is not in the SKU's runtime, so the OS is not written (found: %s)"
                      % (found.get("error") or "root %s, build id %r, OS image %r" % (
                          (found.get("root") or {}).get("source"), found.get("runtime"), found.get("os_image"))),
                      "rerun provisioning: the node boots the runtime first when it is not on the pinned OS")
    try:
        local = local_image(image, pin["sha256"], nd.settings.image_dir)
        digest = file_sha256(local)
    except OSError as exc:
        return failed("cannot read the OS image %s: %s" % (image, exc), "build it (make runtime) or fix os_image_url")
    if digest != pin["sha256"]:
        return failed("the OS image %s has sha256 %s, the SKU pins %s" % (local, digest, pin["sha256"]),
                      "rebuild the image or pin the one you mean to install", expected=pin["sha256"],
                      observed=digest)
    argv = launcher.wrap(nd.host, ["bash", "-c", WRITE, "install", pin["target_disk"], pin["raw_bytes"],
                                   pin.get("root_label") or "symphony-os", nd.host, pin["raw_sha256"]])
    try:
        res = runner(argv, nd.settings.os_install_timeout_s, stdin_path=local)
    except CommandTimeoutError as exc:
        return failed("the image write did not finish within %gs: %s" % (nd.settings.os_install_timeout_s, exc),
                      "rerun: the install starts again from the image write")
    f = _fields(res.stdout)
    evidence = {"image": image, "target_disk": pin["target_disk"], "write_s": f.get("seconds"),
                "written_sha256": f.get("written")}
    if not res.ok or f.get("error") or f.get("end") != "1":
        return failed("the image write on %s failed: %s" % (pin["target_disk"], f.get("error") or (
            res.stderr or res.stdout or "exit %s" % res.rc).strip()[-500:]),
            "check the target disk and the runtime's console; rerun", evidence=evidence)
    if f.get("written") != pin["raw_sha256"]:
        return failed("the disk does not hold the image: read back sha256 %s, the image's is %s (the boot sector "
                      "was left zeroed)" % (f.get("written"), pin["raw_sha256"]),
                      "check the disk (SMART, nvme error-log) and rerun", expected=pin["raw_sha256"],
                      observed=f.get("written"), evidence=evidence)
    system = (nd.inv.systems or [{}])[0]
    nd.patch(system["uri"], {"Boot": {"BootSourceOverrideTarget": "Hdd", "BootSourceOverrideEnabled": "Once"}})
    target, reset = reset_request(nd.inv)
    nd.post(target, {"ResetType": "ForceRestart" if reset == "On" else reset})
    evidence.update(partition=f.get("part"), seconds=round(time.monotonic() - started, 3))
    return passed(expected={"raw_sha256": pin["raw_sha256"]}, observed={"raw_sha256": f.get("written")},
                  reason="wrote %s (%d MiB) to %s, read back sha256 as pinned; next boot: the disk (one-time Hdd, %s)"
                  % (pin["build_id"], int(pin["raw_bytes"]) // MIB, pin["target_disk"], reset), evidence=evidence)


def verify_os_boot(nd: NodeRun, launcher: Optional[Launcher], console_log: Optional[str] = None,
                   runner: Callable[..., Any] = run) -> Outcome:
    """The ``os_boot`` check: wait up to ``os.boot_timeout_s`` (default ``runtime.boot_timeout_s``, 900 s) for the
    node to answer in-band, then verify it booted its disk into the pinned OS (:func:`problems_of`).

    Returns pass, fail "did not boot the installed OS: ..." or blocked (no answer in time: the BMC's
    ``BootProgress.LastState`` and the console's last lines in the evidence).
    """
    pin = _pin(nd)
    if launcher is None:
        return not_run("no in-band path to the node (runtime_probe proof gives one over SSH)")
    timeout = float(pin.get("boot_timeout_s") or nd.settings.runtime_timeout_s or
                    (nd.manifest.get("runtime") or {}).get("boot_timeout_s") or 900)
    deadline = time.monotonic() + timeout
    found: dict[str, Any] = {}
    while True:
        try:
            found = probe(nd, launcher, runner)
        except CommandTimeoutError as exc:
            found = {"error": str(exc)}
        # the runtime still answering right after the reset is the old boot, not this one: wait for the disk's OS
        if not found.get("error") and not found.get("runtime"):
            break
        if time.monotonic() + nd.settings.poll_s > deadline:
            if not found.get("error"):
                break   # it answers, but as the runtime: judged below (the BMC ignored the disk boot)
            return no_answer(nd, "the installed OS did not answer", timeout, str(found["error"]), console_log,
                             "check the node's console: the OS may not have booted from its disk")
        time.sleep(nd.settings.poll_s)
    problems = problems_of(found, pin)
    expected = {k: pin.get(k) for k in ("build_id", "target_disk", "root_label", "kernel", "kernel_cmdline",
                                        "os_release", "packages") if pin.get(k)}
    if problems:
        return failed("did not boot the installed OS: %s" % "; ".join(problems),
                      "check the BMC honours the one-time Hdd override and the disk's boot loader",
                      expected=expected, observed=found, evidence={"probe": found})
    return passed(expected=expected, observed=found,
                  reason="runs OS image %s from %s (%s %s, kernel %s)"
                  % (found["os_image"], found["root"]["source"], found["os_release"].get("ID"),
                     found["os_release"].get("VERSION_ID"), found["kernel"]))
