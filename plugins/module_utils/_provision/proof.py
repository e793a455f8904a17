# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Proof of "inherit nothing": in-band, after the runtime boot, the node runs the SKU's pinned RAM-only runtime.

What is checked (one SSH command, :data:`PROBE`, its output parsed by :func:`judge`):

* the root filesystem is RAM-backed: ``findmnt /`` reports ``rootfs`` (the kernel's initramfs root, ramfs or tmpfs:
  Documentation/filesystems/ramfs-rootfs-initramfs.rst), ``tmpfs`` or ``ramfs``;
* no local disk is mounted: no mount's source is a block device of ``lsblk`` type ``disk``/``part``/``lvm``/``raid*``;
* ``/etc/symphony/build-id`` is the SKU's ``runtime.build_id`` and ``/proc/cmdline`` is the SKU's
  ``runtime.kernel_cmdline`` (the boot loader's own ``BOOT_IMAGE=``/``initrd=`` words and the boot-time
  ``symphony.ssh_key=``/``symphony.callback=`` words set aside);
* the disk marker (:data:`DISK_MARKER`, which the installed OS carries and a node's old OS has) is not visible.

Any mismatch fails the node "did not boot the pinned runtime" with what was found. A runtime that does not answer
SSH within the SKU's ``boot_timeout_s`` is ``blocked`` with the BMC's ``BootProgress.LastState`` and the last console
lines (the console log named in ``console_logs``).
"""

from __future__ import annotations

import json
import time
from typing import Any, Callable, Mapping, Optional

from .._core.gate import BLOCKED, CheckResult, Outcome, failed, not_run, passed
from .._host.launchers import Launcher
from .._host.process import CommandTimeoutError, run
from .node import NodeRun

DISK_MARKER = "/var/lib/symphony/disk-marker"
RAM_FSTYPES = ("rootfs", "tmpfs", "ramfs")
_LOADER_WORDS = ("BOOT_IMAGE=", "initrd=", "symphony.ssh_key=", "symphony.callback=")
_DISK_TYPES = ("disk", "part", "lvm", "crypt", "mpath")

# POSIX sh on the runtime; one JSON object per line so a truncated answer is detected, not half-parsed.
PROBE = (
    "echo \"root=$(findmnt -J -o TARGET,SOURCE,FSTYPE / | tr -d '\\n')\"; "
    "echo \"mounts=$(findmnt -J -l -o TARGET,SOURCE,FSTYPE | tr -d '\\n')\"; "
    "echo \"blk=$(lsblk -J -p -o NAME,TYPE | tr -d '\\n')\"; "
    "echo \"build_id=$(cat /etc/symphony/build-id 2>/dev/null)\"; "
    "echo \"cmdline=$(cat /proc/cmdline)\"; "
    "if [ -e %s ]; then echo marker=present; else echo marker=absent; fi; echo end=1" % DISK_MARKER
)


def _fields(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key in ("root", "mounts", "blk", "build_id", "cmdline", "marker", "end"):
            out[key] = value.strip()
    return out


def boot_words(cmdline: str) -> list[str]:
    """The kernel command line's words without the boot loader's and the boot-time configuration's own."""
    return [w for w in cmdline.split() if not w.startswith(_LOADER_WORDS)]


def judge(output: str, runtime: Mapping[str, Any]) -> tuple[list[str], dict[str, Any]]:
    """Compare the probe's ``output`` with the SKU's ``runtime`` section.

    Returns ``(problems, found)``: ``problems`` is empty when the node runs the pinned runtime from RAM; ``found``
    holds what was seen (root mount, disk mounts, build id, cmdline, marker).  An incomplete answer is a problem.
    """
    f = _fields(output)
    if f.get("end") != "1":
        return ["the probe's answer was incomplete (%d bytes)" % len(output)], {"raw": output[-2000:]}
    try:
        root = (json.loads(f["root"]).get("filesystems") or [{}])[0]
        mounts = json.loads(f["mounts"]).get("filesystems") or []
        devices = {d["name"]: d.get("type") for d in _flatten(json.loads(f["blk"]).get("blockdevices") or [])}
    except (KeyError, ValueError, AttributeError, TypeError) as exc:
        return ["the probe's findmnt/lsblk JSON did not parse: %s" % exc], {"raw": output[-2000:]}
    disks = sorted("%s on %s" % (m.get("source"), m.get("target")) for m in mounts
                   if devices.get(str(m.get("source") or "").split("[", maxsplit=1)[0]) in _DISK_TYPES)
    found = {"root": {"source": root.get("source"), "fstype": root.get("fstype")}, "disk_mounts": disks,
             "build_id": f.get("build_id"), "cmdline": f.get("cmdline"), "disk_marker": f.get("marker")}
    problems = []
    if root.get("fstype") not in RAM_FSTYPES:
        problems.append("root is %s (%s), not RAM-backed" % (root.get("source"), root.get("fstype")))
    if disks:
        problems.append("local disk mounted: %s" % ", ".join(disks))
    if f.get("build_id") != str(runtime.get("build_id")):
        problems.append("build id %r, the SKU pins %r" % (f.get("build_id"), runtime.get("build_id")))
    want = str(runtime.get("kernel_cmdline") or "").split()
    if boot_words(f.get("cmdline", "")) != want:
        problems.append("kernel command line %r, the SKU pins %r" % (" ".join(boot_words(f.get("cmdline", ""))),
                                                                     " ".join(want)))
    if f.get("marker") != "absent":
        problems.append("the disk marker %s is visible" % DISK_MARKER)
    return problems, found


def _flatten(devices: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for d in devices:
        out.append(d)
        out.extend(_flatten(d.get("children") or []))
    return out


def _console_tail(path: Optional[str], lines: int = 20) -> list[str]:
    if not path:
        return []
    try:
        with open(path, "rb") as handle:
            data = handle.read()[-65536:]
    except OSError as exc:
        return ["(console log %s: %s)" % (path, exc)]
    return data.decode("utf-8", "replace").replace("\r", "").splitlines()[-lines:]


def no_answer(nd: NodeRun, what: str, timeout: float, last: str, console_log: Optional[str],
              remediation: str) -> Outcome:
    """``blocked``: ``what`` (e.g. "the runtime did not answer SSH") within ``timeout`` seconds, with the BMC's
    ``BootProgress.LastState`` and the last lines of ``console_log`` in the reason and the evidence."""
    system = (nd.inv.systems or [{}])[0] if nd.inv is not None else {}
    progress = ((nd.client.get(system["uri"]) if system.get("uri") else {}).get("BootProgress") or {})
    return Outcome(BLOCKED, "%s within %gs (BootProgress %s; last: %s)"
                   % (what, timeout, progress.get("LastState", "not reported"), last),
                   remediation=remediation,
                   evidence={"boot_progress": progress.get("LastState"), "console_tail": _console_tail(console_log),
                             "console_log": console_log})


def prove_boot(nd: NodeRun, boot: CheckResult) -> Outcome:
    """The ``runtime_proof`` check after ``boot`` (the ``runtime_boot`` result): proven in-band over the settings'
    launcher; not needed when no runtime was booted; ``not_run`` when the run has no in-band path to the node."""
    if not boot.evidence:   # runtime_boot passed without booting (nothing needed a reset or in-band work)
        return passed(reason="not needed: no runtime boot in this run")
    if nd.settings.launcher is None:
        return not_run("runtime_probe %s cannot prove the boot (runtime_probe proof does, in-band)"
                       % nd.settings.runtime_probe)
    return runtime_proof(nd, nd.settings.launcher, (nd.settings.console_logs or {}).get(nd.host))


def runtime_proof(nd: NodeRun, launcher: Launcher, console_log: Optional[str] = None,
                  runner: Callable[..., Any] = run) -> Outcome:
    """Prove in-band that ``nd``'s node booted the SKU's pinned RAM-only runtime and inherited nothing.

    ``launcher``: how to reach the node (:class:`SSHLauncher` with the runtime's address); ``console_log``: the
    node's serial console capture (its last lines go into the evidence when the runtime does not answer);
    ``runner``: :func:`_host.process.run` (injectable for tests).  Waits up to the SKU's ``runtime.boot_timeout_s``
    (or ``runtime_timeout_s``) seconds for SSH.  Returns pass, fail "did not boot the pinned runtime: ..." or
    blocked.
    """
    runtime = nd.manifest.get("runtime") or {}
    if not runtime.get("build_id"):
        return failed("the SKU's runtime pins no build_id, so the boot cannot be proven",
                      "build the runtime (make runtime) and pin runtime.build_id and kernel_cmdline in the SKU")
    timeout = float(nd.settings.runtime_timeout_s or runtime.get("boot_timeout_s") or 900)
    deadline = time.monotonic() + timeout
    argv = launcher.wrap(nd.host, ["sh", "-c", PROBE])
    last = ""
    while True:
        try:
            res = runner(argv, 60)
            if res.ok:
                break
            last = (res.stderr or res.stdout or "exit %s" % res.rc).strip()[-500:]
        except CommandTimeoutError as exc:   # sshd accepted but the probe hung: retried like a refusal
            last = str(exc)
        if time.monotonic() + nd.settings.poll_s > deadline:
            return no_answer(nd, "the runtime did not answer SSH", timeout, last, console_log,
                             "check the node's console: the runtime may not have booted")
        time.sleep(nd.settings.poll_s)
    problems, found = judge(res.stdout, runtime)
    expected = {"build_id": runtime.get("build_id"), "kernel_cmdline": runtime.get("kernel_cmdline"),
                "root_fstype": list(RAM_FSTYPES), "disk_mounts": [], "disk_marker": "absent"}
    if problems:
        return failed("did not boot the pinned runtime: %s" % "; ".join(problems),
                      "check the BMC honours the one-time CD override and the runtime image URL",
                      expected=expected, observed=found, evidence={"probe": found})
    return passed(expected=expected, observed=found,
                  reason="runs runtime %s from RAM (%s), no disk mounted, marker absent"
                  % (found["build_id"], found["root"]["fstype"]))
