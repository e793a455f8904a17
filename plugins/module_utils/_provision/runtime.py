# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one-time boot into the SKU's ephemeral runtime (VirtualMedia CD + ``Once`` override + reset, or PXE),
waiting until the runtime answers, and ejecting its media afterwards.
"""

from __future__ import annotations

import socket
import time
from typing import Any, Optional
from urllib.parse import urlsplit

from .._core.gate import Outcome, failed, passed
from .._redfish.reader import reset_request
from .node import NodeRun
from .os_install import needs_install


def _virtual_media(nd: NodeRun, kinds: tuple[str, ...], skip: Optional[str] = None) -> Optional[dict[str, Any]]:
    """The first VirtualMedia member (but ``skip``) whose ``MediaTypes`` holds one of ``kinds`` (upper case)."""
    for coll in nd.inv.capabilities.get("virtual_media") or []:
        for m in nd.client.members(coll):
            if m.get("@odata.id") != skip and set(str(t).upper() for t in m.get("MediaTypes") or []) & set(kinds):
                return m
    return None


def _virtual_cd(nd: NodeRun) -> Optional[dict[str, Any]]:
    return _virtual_media(nd, ("CD", "DVD"))


def _insert(nd: NodeRun, member: dict[str, Any], image: str) -> None:
    """Insert ``image`` into ``member``, ejecting another image first; nothing when it already holds it."""
    actions = member.get("Actions") or {}
    if member.get("Inserted") and member.get("Image") != image:
        nd.post(actions["#VirtualMedia.EjectMedia"]["target"], {})
    if not (member.get("Inserted") and member.get("Image") == image):
        nd.post(actions["#VirtualMedia.InsertMedia"]["target"],
                {"Image": image, "Inserted": True, "WriteProtected": True,
                 "TransferProtocolType": urlsplit(image).scheme.upper() or None})


def _runtime_up(nd: NodeRun, deadline: float) -> tuple[bool, str]:
    probe = nd.settings.runtime_probe
    if probe == "none":
        return True, "not waited for (runtime_probe none)"
    if probe == "proof":
        # runtime_proof waits for SSH itself, over the launcher, and judges what answers (proof.py)
        return True, "SSH is awaited and proven by runtime_proof"
    while True:
        if probe == "emulator":
            state = (nd.client.get("/_emulator/state").get("boot_state") or {})
            if state.get("state") == "ephemeral_runtime":
                return True, "the runtime %s is up" % state.get("image")
            seen = state.get("state")
        else:
            addr = nd.node.get("inband_address")
            if not addr:
                return False, "the twin has no in-band address to reach the runtime at"
            try:
                socket.create_connection((addr, 22), timeout=2).close()
                return True, "the runtime answers SSH at %s" % addr
            except OSError as exc:
                seen = "SSH at %s: %s" % (addr, exc)
        if time.monotonic() + nd.settings.poll_s > deadline:
            return False, "last seen: %s" % seen
        time.sleep(nd.settings.poll_s)


def runtime_boot(nd: NodeRun) -> Outcome:
    """Boot the node once into the SKU's ephemeral runtime, when a reset or in-band work needs it."""
    runtime = nd.manifest.get("runtime") or {}
    inband = [s.check for s in nd.plan.inband_work]
    why = nd.reset_needed + inband
    if "os_install" in nd.graph.specs and needs_install(nd, nd.settings.launcher):
        why.append("os_install")  # the OS is written from the runtime only
    if not why and nd.settings.runtime_boot != "always":
        return passed(reason="not needed: no staged firmware, no pending BIOS setting, no in-band update")
    if not runtime:
        return failed("the SKU names no ephemeral runtime but %s need a reset" % ", ".join(why),
                      "add runtime to the SKU manifest")
    started = time.monotonic()
    image = nd.settings.runtime_image_url or runtime["image_uri"]
    system = (nd.inv.systems or [{}])[0]
    evidence = {"why": why, "method": runtime["method"], "image": image}
    if runtime["method"] == "virtual_media":
        cd = _virtual_cd(nd)
        if cd is None:
            return failed("the BMC has no VirtualMedia CD/DVD device", "use runtime method pxe for this SKU")
        _insert(nd, cd, image)
        config = nd.settings.runtime_config_url
        if config:
            # the controller's SSH key (and callback) for this boot: a second medium, never in the image
            usb = _virtual_media(nd, ("USBSTICK",), skip=cd.get("@odata.id"))
            if usb is None:
                return failed("the BMC has no second VirtualMedia device for the runtime's config medium",
                              "give the key on the kernel command line (PXE) or use a BMC with two media slots")
            _insert(nd, usb, config)
            evidence["config"] = config
        target = "Cd"
    else:
        target = "Pxe"
    nd.patch(system["uri"], {"Boot": {"BootSourceOverrideTarget": target, "BootSourceOverrideEnabled": "Once"}})
    reset_target, reset = reset_request(nd.inv)
    allowed = nd.inv.capabilities.get("power_actions") or []
    asked = next((r for r in nd.reset_types if r in allowed), None)
    if asked and reset != "On":
        reset = asked  # the staged job's own reset (a Dell job pending a PowerCycle does not run on a warm reset)
    nd.post(reset_target, {"ResetType": reset})
    timeout = nd.settings.runtime_timeout_s or runtime.get("boot_timeout_s") or 900
    ok, text = _runtime_up(nd, started + timeout)
    evidence.update(reset=reset, seconds=round(time.monotonic() - started, 3))
    if not ok:
        return failed("the runtime did not come up within %gs after %s with a one-time %s override (%s)"
                      % (timeout, reset, target, text), "check the runtime image URL and the node's console",
                      evidence=evidence)
    return passed(reason="booted %s via %s (one-time %s override, %s) for %s: %s"
                  % (image, runtime["method"], target, reset, ", ".join(why) or "runtime_boot always", text),
                  evidence=evidence)


def eject_runtime(nd: NodeRun) -> Optional[str]:
    """Eject the runtime media if it is still inserted (a write only when there is something to eject)."""
    runtime = nd.manifest.get("runtime") or {}
    if runtime.get("method") != "virtual_media":
        return None
    image = nd.settings.runtime_image_url or runtime.get("image_uri")
    cd = _virtual_cd(nd)
    config = nd.settings.runtime_config_url
    usb = _virtual_media(nd, ("USBSTICK",), skip=(cd or {}).get("@odata.id")) if config else None
    if usb and usb.get("Inserted") and usb.get("Image") == config:
        nd.post(usb["Actions"]["#VirtualMedia.EjectMedia"]["target"], {})
    if cd and cd.get("Inserted") and cd.get("Image") == image:
        nd.post(cd["Actions"]["#VirtualMedia.EjectMedia"]["target"], {})
        return image
    return None
