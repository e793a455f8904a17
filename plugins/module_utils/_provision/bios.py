# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""BIOS attributes over Redfish: the one PATCH of the settings object, the stage's BIOS step, and the standalone run.

:func:`stage_attributes` is the one place a BIOS PATCH is built.  The provisioning stage calls it from
:func:`apply_bios` inside ``firmware_reconcile`` (pending until its runtime boot reset); :func:`apply_bios_settings`
is the piece a fleet engineer runs alone (read, PATCH, optionally reset, read back), e.g. to flip one attribute on a
rack.  Redfish (DMTF DSP0266, "Settings
resource"): a ``Bios`` resource whose ``@Redfish.Settings.SettingsObject`` names where changes go; they apply at the
``@Redfish.SettingsApplyTime`` the service supports (``SupportedApplyTimes``), usually ``OnReset``.  Only a fresh
read of ``Bios.Attributes`` after the reset says a value took, and only once the BIOS configuration job (or task)
the PATCH answer names is Completed: Dell shows the pending values in ``Bios`` before its job has run (iDRAC9
Redfish API guide, "BIOS configuration jobs"), so an early read reports "applied" falsely.  Dell's ``SYS011``
("Pending configuration values are already committed") is reported with the job that holds the settings.
"""

from __future__ import annotations

import time

from typing import Any, Callable, Mapping, Optional

from .._core.errors import RedfishError, ValidationError
from .._core.gate import Outcome, failed, passed
from .._redfish.errors import RedfishHTTPError, RedfishTaskError
from .._redfish.reader import read_inventory, reset_request
from .._redfish.registries import message_key
from .._core.fwplan import MISSING, Step, attribute_value, bios_changes

SECTIONS = ("bios", "capabilities")
# iDRAC9: jobs live under the manager (Managers/iDRAC.Embedded.1/Jobs); SYS011 = settings committed to a job
DELL_JOBS = "/redfish/v1/Managers/iDRAC.Embedded.1/Jobs"
COMMITTED_KEYS = ("SYS011",)
JOB_DONE = ("Completed", "Failed", "CompletedWithErrors", "Exception", "Cancelled", "Killed")


def _read(client, system_id):
    inv = read_inventory(client, system_id=system_id, sections=SECTIONS)
    # a system_id that names no system is recorded under "systems": say that, not "no Bios resource"
    gaps = [g for g in inv.incomplete if g.get("part") in ("systems", "bios")]
    if gaps or not inv.bios:
        why = gaps[0]["reason"] if gaps else "the system has no Bios resource"
        raise RedfishError("cannot read the BIOS attributes: %s" % why, where=client.host)
    return inv


def stage_attributes(client: Any, bios: Mapping[str, Any], desired: Mapping[str, Any], apply_time: str,
                     target: Optional[str] = None, check_mode: bool = False,
                     patch: Optional[Callable[[str, Any], Any]] = None) -> dict[str, Any]:
    """PATCH ``desired`` (``{name: value}``) into the BIOS settings object, the attributes not already pending there.

    ``bios``: ``NodeInventory.bios``; ``target``: where changes go (default the service's ``SettingsObject``, else
    ``Bios`` itself); the settings object's attributes are what the next reset applies (none when changes go to
    ``Bios``).  The body carries ``@Redfish.SettingsApplyTime`` only when the service lists ``apply_time`` in
    ``SupportedApplyTimes``.  ``patch``: ``callable(path, body)`` (default ``client.patch``; the stage counts its
    writes); with ``check_mode`` nothing is sent.  Returns ``{"target", "pending": names already pending,
    "patched": {name: value} sent (or, in check mode, to send), "apply_time": the one sent or None, "status": the
    PATCH response's status or None, "task": the job or task URI the answer names, or None}``.  Raises
    :class:`RedfishError` naming the blocking job when the BMC says pending settings are already committed.
    """
    target = target or bios.get("settings_object") or bios["uri"]
    pending = (client.get(target).get("Attributes") or {}) if target != bios.get("uri") else {}
    to_patch = {k: v for k, v in desired.items() if attribute_value(pending.get(k)) != v}
    supported = bios.get("supported_apply_times") or []
    out = {"target": target, "pending": sorted(set(desired) - set(to_patch)), "patched": to_patch,
           "apply_time": apply_time if apply_time in supported else None, "status": None, "task": None}
    if to_patch and not check_mode:
        body: dict[str, Any] = {"Attributes": to_patch}
        if out["apply_time"]:
            body["@Redfish.SettingsApplyTime"] = {"ApplyTime": apply_time}
        try:
            rsp = (patch or client.patch)(target, body)
        except RedfishHTTPError as exc:
            if any(message_key(m) in COMMITTED_KEYS for m in exc.message_ids):
                raise RedfishError("%s; held by %s" % (exc.message, _blocking_job(client)), where=exc.where) from None
            raise
        out["status"], out["task"] = rsp.get("status"), rsp.get("task_monitor")
    return out


def _blocking_job(client: Any) -> str:
    """The unfinished job that holds committed settings, in words (``JID_1 (Scheduled: ...)``)."""
    try:
        jobs = client.members(DELL_JOBS)
    except RedfishError as exc:
        return "a configuration job the BMC did not list (%s)" % exc
    open_jobs = [j for j in jobs if j.get("JobState") not in JOB_DONE]
    if not open_jobs:
        return "no unfinished job listed at %s" % DELL_JOBS
    return ", ".join("%s (%s%s)" % (j.get("Id") or j.get("@odata.id"), j.get("JobState"),
                                    (": " + j["Message"]) if j.get("Message") else "") for j in open_jobs)


def wait_job(client: Any, uri: str, timeout_s: float, poll_s: float) -> dict[str, Any]:
    """Wait until the BIOS configuration job/task ``uri`` is Completed (after the host reset); its final state.

    Raises :class:`RedfishError` naming the job and its state when it failed or did not end by ``timeout_s`` (s).
    """
    try:
        return client.wait_task(uri, timeout_s=timeout_s, poll_s=poll_s)
    except RedfishTaskError as exc:
        raise RedfishError("BIOS configuration job %s failed: %s" % (uri, exc.message), where=client.host,
                           details={"changed": True, "job": uri}) from None
    except RedfishError as exc:
        raise RedfishError("BIOS configuration job %s did not complete: %s" % (uri, exc.message), where=client.host,
                           details={"changed": True, "job": uri}) from None


def apply_bios(nd: Any, step: Optional[Step]) -> Outcome:
    """The stage's ``bios_settings`` step (``nd``: its ``NodeRun``): the plan's differing attributes made pending in
    the settings object (the manifest's ``settings_path`` where the service names none), applied at the runtime
    boot reset."""
    if step is None:
        return passed(reason="the SKU sets no BIOS attributes")
    if step.action == MISSING:
        return failed(step.reason, "check the BMC exposes Systems/<id>/Bios")
    if not step.changes:
        return passed(reason=step.reason, observed={})
    bios = nd.inv.bios
    want_bios = nd.manifest.get("bios") or {}
    desired = {k: v[1] for k, v in step.changes.items()}
    # If-Match unless the SKU explicitly turns it off (DSP0266 "ETags"); the row says when it was off
    etag_off = want_bios.get("etag_mode") == "off"
    staged = stage_attributes(nd.client, bios, desired, want_bios.get("apply_time") or "OnReset",
                              target=bios.get("settings_object") or want_bios.get("settings_path"),
                              patch=lambda path, body: nd.patch(path, body, etag=None if etag_off else "auto"))
    target = staged["target"]
    nd.reset_needed.append("bios_settings")
    if not staged["patched"]:
        return passed(observed=step.changes, expected=desired, evidence={"pending": sorted(desired)},
                      reason="%d attributes already pending in %s; applied at the runtime boot reset"
                      % (len(desired), target))
    notes = list(bios.get("notes") or [])
    if etag_off:
        notes.append("sent without If-Match: the SKU's bios.etag_mode is off")
    return passed(observed=step.changes, expected=desired,
                  evidence={"settings_object": target, "status": staged["status"], "apply_time": staged["apply_time"],
                            "notes": notes, "job": staged["task"], "etag_mode": "off" if etag_off else "if_match"},
                  reason="%d attributes pending in %s (%s); applied at the runtime boot reset"
                  % (len(desired), target, ", ".join(sorted(desired))))


def apply_bios_settings(client: Any, attributes: Mapping[str, Any], apply_time: str = "OnReset", reset: bool = False,
                        system_id: Optional[str] = None, timeout_s: float = 900.0, poll_s: float = 10.0,
                        check_mode: bool = False, clock: Callable[[], float] = time.monotonic,
                        sleep: Callable[[float], Any] = time.sleep) -> dict[str, Any]:
    """Bring one system's BIOS ``attributes`` (``{name: value}``) to the values given.

    Reads ``Bios``; PATCHes only the attributes that differ and are not already pending in the settings object,
    with ``If-Match`` and ``@Redfish.SettingsApplyTime`` when the service lists ``apply_time``; with ``reset``,
    resets the system (``ForceRestart``, else ``PowerCycle``/``GracefulRestart``; ``On`` when off) and polls
    ``Bios`` every ``poll_s`` seconds until every value reads back or ``timeout_s`` (s) passes.

    Returns ``{"changed", "state": "at_target"|"pending"|"applied", "changes": {name: [current, wanted]},
    "pending": [names], "diff": {"before", "after"}, "settings_object", "apply_time", "reset", "notes", "job"}``;
    after a reset, ``after`` is the fresh read, taken only once the job the PATCH named (``job``: its final state)
    is Completed.  Raises :class:`ValidationError` for an empty ``attributes``,
    :class:`ValidationError` for a negative ``poll_s`` or a ``timeout_s`` of 0 or less (before anything is written),
    :class:`RedfishError` when the BIOS cannot be read, the reset is refused, or (with ``reset``) a value has not
    read back by ``timeout_s`` (both values named; ``details["changed"]`` True), or no read succeeded after the
    reset (the last read error).  A name the BMC does not report is a change from ``None`` (the PATCH then tells
    whether the BMC knows it).
    """
    if not attributes:
        raise ValidationError("no BIOS attribute given", where="attributes")
    # checked before anything is written: a bad value must not surface after the reset
    if poll_s < 0:
        raise ValidationError("must be 0 or more, got %r" % poll_s, where="poll_s")
    if timeout_s <= 0:
        raise ValidationError("must be more than 0, got %r" % timeout_s, where="timeout_s")
    inv = _read(client, system_id)
    bios = inv.bios
    changes = bios_changes(attributes, bios["attributes"])
    out = {"changed": False, "state": "at_target", "changes": changes, "pending": [],
           "diff": {"before": {k: v[0] for k, v in changes.items()}, "after": {k: v[1] for k, v in changes.items()}},
           "settings_object": bios.get("settings_object") or bios["uri"], "apply_time": None, "reset": None,
           "notes": list(bios.get("notes") or []), "job": None}
    if not changes:
        return out
    staged = stage_attributes(client, bios, {k: v[1] for k, v in changes.items()}, apply_time,
                              check_mode=check_mode)
    out["pending"], out["apply_time"] = staged["pending"], staged["apply_time"]
    if check_mode:
        out.update(changed=bool(staged["patched"]) or reset, state="pending")
        return out
    if staged["patched"]:
        out["changed"] = True
        out["pending"] = sorted(changes)
    out["state"] = "pending"
    if not reset:
        return out
    out["reset"] = _reset(client, inv)
    out["changed"] = True
    deadline = clock() + timeout_s
    if staged["task"]:
        # the job runs during the reboot: /Bios may show the pending values before it has (Dell)
        out["job"] = wait_job(client, staged["task"], timeout_s, poll_s).get("state")
    fresh, read_error = None, None
    while True:
        sleep(poll_s)
        try:
            fresh, read_error = _read(client, system_id).bios["attributes"], None
        except RedfishError as exc:
            read_error = exc  # the BMC is busy while the host reboots: keep polling
        left = bios_changes(attributes, fresh) if fresh is not None else None
        if left == {}:
            out.update(state="applied", pending=[], diff={"before": out["diff"]["before"],
                                                          "after": {k: attribute_value(fresh.get(k))
                                                                    for k in changes}})
            return out
        if clock() >= deadline:
            # only what a read after the reset returned counts; without one, say so (changed: the PATCH and the
            # reset were sent)
            if left is None:
                raise RedfishError("could not read the BIOS in the %gs after %s: %s" % (
                    timeout_s, out["reset"], read_error), where=client.host, details={"changed": True})
            shown = "; ".join("%s reads %r, wanted %r" % (k, v[0], v[1]) for k, v in sorted(left.items()))
            raise RedfishError("BIOS settings not applied %gs after %s: %s" % (timeout_s, out["reset"], shown),
                               where=client.host, details={"changed": True})


def _reset(client, inv):
    """POST ComputerSystem.Reset (:func:`reset_request`); returns the type sent."""
    target, reset = reset_request(inv)
    client.post(target, {"ResetType": reset})
    return reset
