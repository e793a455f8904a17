# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Following Redfish tasks and jobs: task monitors, Task and Job resources until they end (or wait for a reset).

Task monitors of any URL shape, 202 on monitor and Task, ``Completed`` with a non-OK
``TaskStatus`` is a failure, 404 after a BMC reboot is "unknown" (R-15/17/18).  Jobs
(DSP0268 ``Job.JobState``, and Dell's ``DellJob`` at ``Managers/iDRAC.Embedded.1/Jobs/JID_*``, whose
``JobState``/``Message`` stand where a Task has ``TaskState``/``Messages``) are followed the same way.
"""

from __future__ import annotations

import re
import time
from typing import Any, Optional

from .errors import RedfishConnectionError, RedfishHTTPError, RedfishTaskError, RedfishTimeout
from .registries import message_key
from .session import Session

TASK_RUNNING = frozenset(["New", "Starting", "Running", "Pending", "Stopping", "Suspended", "Service", "Interrupted",
                          # Dell DellJob.JobState values on the way to Completed
                          "Downloading", "Scheduling", "ReadyForExecution", "Waiting", "Paused", "RebootCompleted"])
TASK_FAILED = frozenset(["Exception", "Killed", "Cancelled", "Cancelling",
                         # Dell: a job that ended with errors did not apply (all or part of) what it carried
                         "Failed", "CompletedWithErrors", "ScheduledWithErrors", "RebootFailed"])
# States that wait for a host reset (DSP0268 TaskState Pending; Dell Scheduled/Downloaded/RebootPending/
# PendingActivation): with until_pending the wait ends there, "staged" with that evidence
TASK_AWAITS_RESET = frozenset(["Pending", "Scheduled", "Downloaded", "RebootPending", "PendingActivation"])
# Update registry messages of a task whose image is staged until an activation (DMTF Update.1.x)
AWAIT_MESSAGES = frozenset(["AwaitToActivate", "AwaitToUpdate"])
# DSP0268 ComputerSystem.Reset ResetType values a Dell job message may ask for ("... PowerCycle ...")
RESET_WORDS = ("PowerCycle", "ForceRestart", "GracefulRestart")


class Tasks(Session):
    """:meth:`wait_task` on top of the logged-in transport."""

    def wait_task(self, location: str, timeout_s: float = 1800, poll_s: float = 5.0,
                  task_uri: Optional[str] = None, until_pending: bool = False) -> dict[str, Any]:
        """Follow a task monitor (or Task URI) until the task ends.

        Accepts any monitor URL shape (absolute or relative, used verbatim), 202 from both
        monitor and Task, ``Retry-After``; learns the Task from the monitor body's
        ``@odata.id``; survives the BMC being unreachable or 503 while it reboots (R-18).

        Returns ``{"state", "status", "percent", "messages", "task_uri", "body", "unknown", "pending",
        "reset_type"}``: ``state`` ``Completed`` with ``status`` ``OK``/None is success; ``pending`` is True when
        the task waits for a reset (``until_pending`` and a :data:`TASK_AWAITS_RESET` state, or Completed with an
        ``AwaitToActivate`` message), ``reset_type`` the ResetType a Dell job message names; ``unknown`` is True
        (state ``Unknown``) when monitor and Task are gone (404), e.g. wiped by a BMC reboot:
        the caller decides by re-reading FirmwareInventory, not by the vanished task.
        Raises :class:`RedfishTaskError` for Exception/Killed/Cancelled or Completed with
        Warning/Critical (R-17), :class:`RedfishTimeout` past ``timeout_s`` (seconds).
        """
        deadline = time.monotonic() + float(timeout_s)
        monitor = self._abs(location)
        task = self._abs(task_uri) if task_uri else None
        current = monitor
        last: dict[str, Any] = {"state": None, "status": None, "percent": None, "messages": [], "task_uri": task,
                                "body": None, "unknown": False, "pending": False, "reset_type": None}
        while True:
            wait = poll_s
            try:
                rsp = self._send("GET", current, ok_statuses=(404, 410))
            except (RedfishConnectionError, RedfishTimeout) as exc:
                self._warn("%s unreachable while following task %s (%s); still waiting"
                           % (self.host, self._rel(monitor), type(exc).__name__))
            except RedfishHTTPError as exc:
                if exc.status not in (500, 502, 503, 504):
                    raise
                self._warn("%s answered HTTP %s while following task %s; still waiting"
                           % (self.host, exc.status, self._rel(monitor)))
            else:
                body = rsp.body if isinstance(rsp.body, dict) else {}
                if rsp.status in (404, 410):
                    if task and current != task:
                        current = task
                        continue
                    last.update(state="Unknown", unknown=True)
                    return last
                state = body.get("TaskState") or body.get("JobState")
                oid = body.get("@odata.id")
                if oid and state and not task:
                    task = self._abs(oid)
                    last["task_uri"] = task
                if state:
                    messages = [self.registries.describe(m) for m in body.get("Messages") or []]
                    if body.get("Message"):  # a Dell job's one message, e.g. "Job completed successfully."
                        messages.append({"MessageId": body.get("MessageId"), "Message": body["Message"]})
                    last.update(state=state, status=body.get("TaskStatus"), body=body, messages=messages,
                                percent=body.get("PercentComplete"))
                    text = " ".join(str(m.get("Message") or "") for m in messages)
                    last["reset_type"] = next((w for w in RESET_WORDS if re.search(r"\b%s\b" % w, text)), None)
                    awaits = any(message_key(m.get("MessageId")) in AWAIT_MESSAGES for m in messages) or \
                        "reboot pending" in text.lower()
                    if state == "Completed":
                        if last["status"] in (None, "OK"):
                            last["pending"] = awaits
                            return last
                        raise self._task_error(last, "completed with TaskStatus %s" % last["status"])
                    if state in TASK_FAILED:
                        raise self._task_error(last, "ended %s" % state)
                    if until_pending and state in TASK_AWAITS_RESET:
                        last["pending"] = True
                        return last
                    if state not in TASK_RUNNING and state not in TASK_AWAITS_RESET:
                        self._warn("%s task %s: unexpected state %r" % (self.host, self._rel(current), state))
                elif rsp.status in (200, 201, 204) and current == monitor:
                    # the monitor answers the operation's own response once it is done
                    last.update(state="Completed", status=last["status"] or "OK", percent=100, body=body or None)
                    return last
                elif rsp.status in (200, 201, 204):
                    self._warn("%s task %s: answer has no TaskState" % (self.host, self._rel(current)))
                if rsp.retry_after_s is not None:
                    wait = min(rsp.retry_after_s, self.settings.max_retry_after_s)
            if time.monotonic() + wait > deadline:
                raise RedfishTimeout("task %s not finished after %gs (last state %s, %s%%)"
                                     % (self._rel(monitor), timeout_s, last["state"], last["percent"]),
                                     where=self.host, details={k: v for k, v in last.items() if k != "body"})
            self._sleep(wait)

    def _task_error(self, last: dict[str, Any], what: str) -> RedfishTaskError:
        msgs = "; ".join("%s%s" % ((m.get("MessageId") + ": ") if m.get("MessageId") else "", m.get("Message") or "")
                         for m in last["messages"])
        text = "task %s %s%s" % (self._rel(last["task_uri"]) if last["task_uri"] else "", what,
                                 (": " + msgs) if msgs else "")
        return RedfishTaskError(text, where=self.host, details={k: v for k, v in last.items() if k != "body"})
