# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Writes of the Redfish client: PATCH with ETag/If-Match, POST, DELETE and multipart firmware push.

* PATCH with a fresh GET for ``If-Match`` and exactly one GET+retry on 428 (R-1); on 412 a weak ETag
  is retried strong (R-4), then one fresh GET and retry; a BMC that still refuses fails with its own
  message.  ``If-Match`` is never dropped behind the caller's back (DSP0266 §"ETags");
* where the task of an accepted write is (:func:`task_of`, DSP0266 §"Asynchronous operations");
* 2xx bodies carrying ``SystemResetRequired`` mean "pending reboot" (R-20);
* every write returns the same result dict (:func:`action_result`).
"""

from __future__ import annotations

import json
import re
from typing import Any, Optional

from .errors import RedfishHTTPError
from .registries import message_key
from .session import Session
from .transport import RedfishResponse


# a Task (DSP0268 Task), a Job (DSP0268 Job) or Dell's DellJob (Managers/iDRAC.Embedded.1/Jobs/JID_*)
_TASK_TYPES = ("#Task.", "#Job.", "#DellJob.")
# iDRAC9 names a new job by its id alone (JCP027 "The job %1 is successfully created"); it lives under the manager
_DELL_JOB_ID = re.compile(r"^JID_\d+$")
DELL_JOBS = "/redfish/v1/Managers/iDRAC.Embedded.1/Jobs/"
_TASK_URI = re.compile(r"^(?:https?://[^/]+)?/redfish/v1/\S*/(?:Tasks|Jobs)/[^/\s]+(?:/Monitor)?$")


def task_of(rsp: RedfishResponse) -> tuple[Optional[str], Optional[str]]:
    """``(task or monitor URI, where it was found)`` of an accepted write, or ``(None, None)``.

    In this order (DSP0266 §"Asynchronous operations", then what vendors do instead): the ``Location`` of a
    202 or 303 answer (``"location"``); the body when it is a Task/Job, its ``@odata.id`` (``"body"``:
    Supermicro's multipart 202 carries no Location); a task or job URI among the ``@Message.ExtendedInfo``
    ``MessageArgs`` (``"message_args"``, e.g. ``Task.1.0.New``).
    """
    if rsp.status in (202, 303) and rsp.location:
        return rsp.location, "location"
    body = rsp.body if isinstance(rsp.body, dict) else {}
    kind = str(body.get("@odata.type") or "")
    if body.get("@odata.id") and (any(t in kind for t in _TASK_TYPES) or "TaskState" in body or "JobState" in body):
        return str(body["@odata.id"]), "body"
    for entry in rsp.extended_info:
        for arg in entry.get("MessageArgs") or []:
            if isinstance(arg, str) and _TASK_URI.match(arg.strip()):
                return arg.strip(), "message_args"
            if isinstance(arg, str) and _DELL_JOB_ID.match(arg.strip()):
                return DELL_JOBS + arg.strip(), "message_args"
    return None, None


def action_result(rsp: RedfishResponse, etag: Optional[str]) -> dict[str, Any]:
    """The result of a write: ``{"status", "location", "task_monitor", "task_source", "retry_after_s" (seconds),
    "body", "extended_info", "pending_reboot", "etag"}``; ``task_monitor`` is the task or monitor URI
    :func:`task_of` finds (None when the answer names none), ``task_source`` where it was found."""
    pending = any(message_key(e.get("MessageId")) == "SystemResetRequired" for e in rsp.extended_info)
    task, source = task_of(rsp)
    return {
        "status": rsp.status,
        "location": rsp.location,
        "task_monitor": task,
        "task_source": source,
        "retry_after_s": rsp.retry_after_s,
        "body": rsp.body,
        "extended_info": rsp.extended_info,
        "pending_reboot": pending,
        "etag": etag,
    }


class Writes(Session):
    """PATCH/POST/DELETE on top of the logged-in transport."""

    def etag_of(self, path: str) -> Optional[str]:
        """GET ``path`` and return its ETag (``ETag`` header, else ``@odata.etag``; quoting normalised) or None."""
        rsp = self._send("GET", path, expect_json=True)
        return rsp.etag

    def patch(self, path: str, body: Any, etag: Optional[str] = "auto",
              headers: Optional[dict[str, str]] = None) -> dict[str, Any]:
        """PATCH ``path`` with ``body`` and an ``If-Match`` from a fresh GET.

        ``etag``: ``"auto"`` (GET first; ETag header or ``@odata.etag``), a string, or None
        (no If-Match: the SKU's explicit ``etag_mode: off``).  On 428 Precondition Required: exactly one
        GET + retry with If-Match (R-1).  On 412: a weak ETag is retried once as strong (R-4), then one
        fresh GET and retry; a BMC that still answers 412 raises with its own message: If-Match is
        never dropped (a PATCH without it lands over a change made meanwhile).
        Returns ``{"status", "pending_reboot", "extended_info", "body", "etag", "location"}``;
        ``pending_reboot`` is True when a 2xx body carries ``SystemResetRequired`` (R-20).
        Raises :class:`RedfishHTTPError` (with every ExtendedInfo entry, R-21) and the rest.
        """
        if etag == "auto":
            etag = self.etag_of(path)
        tried: list[Optional[str]] = []
        regot = False
        while True:
            tried.append(etag)
            try:
                rsp = self._send("PATCH", path, body=body, headers=headers, etag=etag)
                return action_result(rsp, etag)
            except RedfishHTTPError as exc:
                if exc.status == 428 and etag is None and len(tried) == 1:
                    etag = self.etag_of(path)
                    if not etag:
                        raise RedfishHTTPError(
                            str(exc.message) + "; the BMC requires If-Match but exposes no ETag on %s" % path,
                            where=exc.where, status=428, method="PATCH", path=path,
                            extended_info=exc.extended_info) from None
                    self._warn("%s PATCH %s: 428 Precondition Required; retried once with If-Match"
                               % (self.host, path))
                    continue
                if exc.status != 412 or etag is None:
                    raise
                if etag.startswith("W/") and etag[2:] not in tried:
                    etag = etag[2:]  # AMI refuses its own weak ETag and takes the strong form
                    continue
                fresh = None if regot else self.etag_of(path)
                regot = True
                if fresh:
                    self._warn("%s PATCH %s: 412 Precondition Failed; re-read the ETag and retried once"
                               % (self.host, path))
                    etag = fresh
                    continue
                exc.message = "%s; If-Match %s refused (sent: %s), not re-sent without it" % (
                    exc.message, etag, ", ".join(str(t) for t in tried))
                raise

    def post(self, path: str, body: Any = None, headers: Optional[dict[str, str]] = None) -> dict[str, Any]:
        """POST ``path`` -> ``{"status", "location", "task_monitor", "retry_after_s", "body",
        "extended_info", "pending_reboot"}``.  ``task_monitor`` is the absolute Location of a 202
        answer (pass it to ``wait_task``)."""
        rsp = self._send("POST", path, body=body, headers=headers)
        return action_result(rsp, None)

    def delete(self, path: str) -> dict[str, Any]:
        """DELETE ``path`` -> ``{"status", ...}`` (same shape as :meth:`post`)."""
        return action_result(self._send("DELETE", path), None)

    def multipart_push(self, uri: str, image_bytes: bytes, params: Optional[dict[str, Any]] = None,
                       filename: str = "image.bin") -> dict[str, Any]:
        """POST a firmware image to ``MultipartHttpPushUri`` (DSP0266 §12.2: parts
        ``UpdateParameters`` (JSON) and ``UpdateFile``).  Returns as :meth:`post`."""
        files = {
            "UpdateParameters": (None, json.dumps(params or {}), "application/json"),
            "UpdateFile": (filename, image_bytes, "application/octet-stream"),
        }
        rsp = self._send("POST", uri, files=files)
        return action_result(rsp, None)
