# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Out-of-band firmware steps of the provisioning stage: the image checked against the manifest's sha256, the
upload (SimpleUpdate or a multipart push), the task followed to its end, the BMC's own reboot waited out, and a
fresh read of the version (R-9, R-17, R-18).

Accepted is not done (DSP0266 §"Asynchronous operations"): the step's task is found where the BMC names it
(``RedfishClient.post`` -> ``task_of``), followed to its end, and a step is ``staged`` only with that task in
the ledger row; an update the BMC accepted without a task and without a visible change fails.  Supermicro's
multipart push is two-phase (the capture's UpdateService offers ``#UpdateService.StartUpdate``; DSP0268
UpdateService v1_7_0 StartUpdate, Settings v1_3_0 ``OnStartUpdateRequest``): upload with
``@Redfish.OperationApplyTime: OnStartUpdateRequest``, wait for the verify task, then ``StartUpdate`` and its
task.  HPE iLO shows its update's progress as ``UpdateService.Oem.Hpe.State`` instead of a task.
"""

from __future__ import annotations

import hashlib
import os
import time
from typing import Any, Optional
from urllib.parse import urlsplit

from .._core.errors import ValidationError
from .._core.gate import PASS, Outcome, failed, passed
from .._redfish.client import RedfishConnectionError, RedfishHTTPError, RedfishTaskError, RedfishTimeout
from .._redfish.registries import message_key
from .._core.fwplan import FOLLOWS, MISSING, NO_IMAGE, REFUSE, SKIP, Step
from .node import STAGE, NodeRun, ProvisionSettings

RESET_ACTIVATIONS = ("host_reset", "ac_cycle")
NO_TASK = "the BMC accepted the update but shows no task or pending state"
# SMC.1.0.0 registry (shared/fixtures/mockups/libredfish-supermicro/registries): a push while an earlier upload
# still holds the BMC in update mode; only a BMC cold reset leaves it, a rerun hits it again
UPDATE_MODE_KEYS = ("OemFirmwareAlreadyInUpdateMode", "OemCpldAlreadyInUpdateMode", "OemHgxAlreadyInUpdateMode")
# HPE iLO UpdateService Oem.Hpe.State (iLO 5/6 Redfish reference, "HpeiLOUpdateServiceExt"): where the update is
HPE_DONE, HPE_ERROR = ("Complete",), ("Error",)
HPE_RUNNING = ("Uploading", "Verifying", "Writing", "Updating")


def image_file(settings: ProvisionSettings, step: Step) -> Optional[str]:
    """Path of the local copy of a step's image: ``<image_dir>/<basename of image.uri>``, or None."""
    if not settings.image_dir or not step.image:
        return None
    name = os.path.basename(urlsplit(step.image["uri"]).path)
    path = os.path.join(settings.image_dir, name)
    return path if os.path.isfile(path) else None


def checked_image(settings: ProvisionSettings, step: Step) -> tuple[bytes, str]:
    """``(bytes, sha256)`` of the step's local image after checking its sha256 against the manifest.

    Raises :class:`ValidationError` naming the file when it is absent or its sha256 differs.
    """
    path = image_file(settings, step)
    if path is None:
        raise ValidationError("no local copy of %s in image_dir (%s) to check its sha256 against the manifest"
                              % (os.path.basename(urlsplit(step.image["uri"]).path), settings.image_dir),
                              where="firmware:%s" % step.component)
    with open(path, "rb") as handle:
        data = handle.read()
    digest = hashlib.sha256(data).hexdigest()
    if digest != step.image["sha256"].lower():
        raise ValidationError("image sha256 %s differs from the manifest's %s; not uploaded"
                              % (digest, step.image["sha256"]), where=path)
    return data, digest


# --------------------------------------------------------------------------- firmware
def _member_uris(inv: Any, step: Step) -> list[str]:
    by_id = {i.id: i.uri for i in inv.firmware}
    return [by_id[m] for m in step.observed if by_id.get(m)]


def _read_versions(client: Any, uris: list[str]) -> dict[str, Any]:
    out = {}
    for uri in uris:
        body = client.get(uri)
        out[str(body.get("Id") or uri.rstrip("/").rsplit("/", 1)[-1])] = body.get("Version")
    return out


def _versions_ok(versions: dict[str, Any], step: Step) -> bool:
    return bool(versions) and all(v in step.accepted for v in versions.values())


def _wait_bmc_version(nd: NodeRun, step: Step, uris: list[str], started: float) -> Outcome:
    """Poll until the BMC, back from its own reboot, reports an accepted version (R-18)."""
    client, settings = nd.client, nd.settings
    deadline = started + settings.bmc_reboot_timeout_s
    last, rebooted = None, False
    while True:
        try:
            last = _read_versions(client, uris)
            if _versions_ok(last, step):
                return passed(observed=last, expected=step.target, evidence={"bmc_rebooted": rebooted},
                              reason="updated to %s; the BMC rebooted itself and answers with it after %.1fs"
                              % (step.target, time.monotonic() - started))
        except (RedfishConnectionError, RedfishTimeout, RedfishHTTPError) as exc:
            if isinstance(exc, RedfishHTTPError) and exc.status not in (401, 500, 502, 503, 504):
                raise
            rebooted = True
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            try:
                client.wait_service(timeout_s=remaining, poll_s=settings.poll_s)
            except RedfishTimeout:
                break
            continue
        if time.monotonic() + settings.poll_s > deadline:
            break
        time.sleep(settings.poll_s)
    return failed("the BMC did not answer with %s within %gs after its own update (last read: %s)"
                  % (step.target, settings.bmc_reboot_timeout_s,
                     ", ".join("%s=%s" % kv for kv in sorted((last or {}).items())) or "unreachable"),
                  "wait for the BMC to come back and rerun the stage; if it stays unreachable, AC-cycle the node",
                  observed=last, expected=step.target)


def _staged_earlier(nd: NodeRun, step: Step) -> Any:
    """The ledger's pass for this step from an earlier run that staged ``target`` over the same versions."""
    if nd.ledger is None:
        return None
    history = nd.ledger.history(nd.host, STAGE, step.check)
    if not history:
        return None
    last = history[-1]
    ev = last.evidence or {}
    if last.status == PASS and ev.get("staged") == step.target and ev.get("task") and \
            sorted(ev.get("from") or []) == sorted({str(v) for v in step.observed.values()}):
        return last
    return None


def apply_oob_firmware(nd: NodeRun, step: Step) -> Outcome:
    """One out-of-band firmware step -> :class:`Outcome` (see module docstring)."""
    observed = sorted({str(v) for v in step.observed.values()})
    if step.action == SKIP:
        return passed(observed=step.observed, expected=step.accepted, reason=step.reason)
    if step.action in (MISSING, NO_IMAGE):
        return failed(step.reason, "check the part is installed and the manifest's match/target for it",
                      observed=step.observed, expected=step.accepted)
    if step.action == REFUSE:
        return failed(step.reason, "requalify the manifest or rerun with allow_downgrade",
                      observed=step.observed, expected=step.target)
    if step.action == FOLLOWS:
        if step.updated_with in nd.applied:
            return passed(observed=step.observed, expected=step.accepted,
                          reason="carried by the %s update of this run; verify re-reads it" % step.updated_with)
        return failed(step.reason, "update %s, which carries this component" % (step.updated_with or "its package"),
                      observed=step.observed, expected=step.accepted)
    earlier = _staged_earlier(nd, step)
    if earlier is not None:
        nd.reset_needed.append(step.check)
        nd.applied[step.component] = "staged"
        return passed(observed=step.observed, expected=step.target,
                      evidence={"staged": step.target, "from": observed, "staged_by": earlier.run_id},
                      reason="%s staged by run %s; activates at the runtime boot reset"
                      % (step.target, earlier.run_id))
    data, digest = checked_image(nd.settings, step)
    caps = nd.inv.capabilities
    uris = _member_uris(nd.inv, step)
    started = time.monotonic()
    start = caps.get("start_update")
    # two-phase where StartUpdate exists and the push does not rule OnStartUpdateRequest out (Supermicro lists no
    # OperationApplyTimeSupport; NVIDIA's DPU/GB200 BMCs list only Immediate and have no StartUpdate)
    apply_times = caps.get("multipart_apply_times")
    two_phase = step.method == "redfish_multipart" and bool(start) and (
        apply_times is None or "OnStartUpdateRequest" in apply_times)
    try:
        if step.method == "redfish_multipart":
            push = caps.get("multipart_http_push_uri")
            if not push:
                return failed("the BMC offers no MultipartHttpPushUri for a multipart update",
                              "use redfish_simple_update for this SKU's BMC firmware", expected=step.target)
            params: dict[str, Any] = {"Targets": uris}
            if two_phase:
                params["@Redfish.OperationApplyTime"] = "OnStartUpdateRequest"
            nd.writes += 1
            rsp = nd.client.multipart_push(push, data, params=params,
                                           filename=os.path.basename(urlsplit(step.image["uri"]).path))
        elif step.method == "redfish_simple_update":
            simple = caps.get("simple_update") or {}
            if not simple.get("target"):
                return failed("the BMC offers no UpdateService.SimpleUpdate action", "use redfish_multipart")
            url = step.image["uri"]
            if nd.settings.image_base_url:
                url = nd.settings.image_base_url.rstrip("/") + "/" + os.path.basename(urlsplit(url).path)
            body = {"ImageURI": url, "Targets": uris}
            protocols = simple.get("transfer_protocols")
            scheme = urlsplit(url).scheme.upper()
            if protocols is not None:
                if scheme not in protocols:
                    return failed("image URL scheme %s is not among the BMC's TransferProtocol values %s"
                                  % (scheme, ", ".join(protocols)), "serve the image over one of them")
                body["TransferProtocol"] = scheme
            rsp = nd.post(simple["target"], body)
        else:
            return failed("method %s is not an out-of-band method" % step.method, "fix the manifest")
    except RedfishHTTPError as exc:
        if any(message_key(m) in UPDATE_MODE_KEYS for m in exc.message_ids):
            return failed("the BMC is still in update mode from an earlier upload: %s" % exc.message,
                          "cold-reset the BMC (Manager.Reset ForceRestart) to leave update mode, then rerun; "
                          "a rerun alone hits the same refusal", observed=step.observed, expected=step.target)
        raise
    evidence: dict[str, Any] = {"sha256": digest, "from": observed, "method": step.method}
    staged = step.activation in RESET_ACTIVATIONS
    try:
        if rsp.get("task_monitor"):
            task = _follow(nd, rsp, until_pending=staged and not two_phase)
            evidence["task"] = task
            if two_phase:
                # phase 2: the verified image installs only on StartUpdate (UpdateService v1_7_0)
                rsp = nd.post(start, {})
                if not rsp.get("task_monitor"):
                    return failed("%s after UpdateService.StartUpdate" % NO_TASK,
                                  "read the BMC's update state; cold-reset the BMC if it stays in update mode",
                                  observed=step.observed, expected=step.target, evidence=evidence)
                evidence["verify_task"] = evidence["task"]
                evidence["start_update_task"] = evidence["task"] = _follow(nd, rsp, until_pending=staged)
        elif step.method == "redfish_simple_update" and _hpe_state(nd) is not None:
            evidence["hpe_state"] = _wait_hpe(nd)
            if evidence["hpe_state"] in HPE_ERROR:
                return failed("the BMC's UpdateService Oem.Hpe.State reads Error after the update",
                              "read the iLO event log; reset the iLO and rerun", observed=step.observed,
                              expected=step.target, evidence=evidence)
        elif staged:
            return failed(NO_TASK, "read the BMC's update state and task list; rerun once it is idle",
                          observed=step.observed, expected=step.target, evidence=evidence)
    except RedfishTaskError as exc:
        return failed("firmware task failed: %s" % exc.message, "read the task messages; reset the BMC and "
                      "rerun, or replace the part", observed=step.observed, expected=step.target,
                      evidence=evidence)
    nd.applied[step.component] = "applied"
    if step.activation == "bmc_reset":
        outcome = _wait_bmc_version(nd, step, uris, started)
        outcome.evidence.update(evidence)
        return outcome
    if staged:
        task = evidence.get("task") or {"uri": "UpdateService Oem.Hpe.State", "state": evidence.get("hpe_state")}
        if task.get("state") not in ("Completed",) + HPE_DONE and not task.get("pending"):
            return failed("%s (%s reads %s)" % (NO_TASK, task.get("uri"), task.get("state")),
                          "read the task; rerun once it is idle", observed=step.observed, expected=step.target,
                          evidence=evidence)
        nd.reset_needed.append(step.check)
        if task.get("reset_type"):
            nd.reset_types.append(task["reset_type"])
        evidence["staged"] = step.target
        return passed(observed=step.observed, expected=step.target, evidence=evidence,
                      reason="%s staged (task %s %s); activates at the runtime boot reset (%s)"
                      % (step.target, task.get("uri"), task.get("state"), step.activation))
    now = _read_versions(nd.client, uris)
    if not _versions_ok(now, step):
        why = "after the update the BMC reports %s, expected %s" % (
            ", ".join("%s=%s" % kv for kv in sorted(now.items())), step.target)
        if "task" not in evidence and "hpe_state" not in evidence:
            why = "%s; %s" % (NO_TASK, why)
        return failed(why, "rerun; if it persists the image does not apply to this part", observed=now,
                      expected=step.target, evidence=evidence)
    return passed(observed=now, expected=step.target, evidence=evidence, reason="updated to %s" % step.target)


def _follow(nd: NodeRun, rsp: dict[str, Any], until_pending: bool) -> dict[str, Any]:
    """Follow the task an accepted write names -> the ledger's evidence of it: ``{"uri", "found_in", "state",
    "status", "pending", "reset_type", "messages"}``."""
    task = nd.client.wait_task(rsp["task_monitor"], timeout_s=nd.settings.task_timeout_s, poll_s=nd.settings.poll_s,
                               until_pending=until_pending)
    return {"uri": nd.client._rel(task.get("task_uri") or nd.client._abs(rsp["task_monitor"])),
            "found_in": rsp.get("task_source"), "state": task.get("state"), "status": task.get("status"),
            "pending": bool(task.get("pending")), "reset_type": task.get("reset_type"),
            "messages": [m.get("MessageId") or m.get("Message") for m in task.get("messages") or []]}


def _hpe_state(nd: NodeRun) -> Any:
    """HPE iLO's ``UpdateService.Oem.Hpe.State`` (None on other BMCs, or when the BMC does not answer: a BMC
    rebooting into its new firmware is judged by its version read afterwards)."""
    try:
        body = nd.client.get("/redfish/v1/UpdateService")
    except (RedfishConnectionError, RedfishTimeout, RedfishHTTPError):
        return None
    return ((body.get("Oem") or {}).get("Hpe") or {}).get("State")


def _wait_hpe(nd: NodeRun) -> Any:
    """Poll ``Oem.Hpe.State`` until it leaves the running states or ``task_timeout_s`` (s) passes."""
    deadline = time.monotonic() + nd.settings.task_timeout_s
    while True:
        state = _hpe_state(nd)
        if state not in HPE_RUNNING or time.monotonic() + nd.settings.poll_s > deadline:
            return state
        time.sleep(nd.settings.poll_s)
