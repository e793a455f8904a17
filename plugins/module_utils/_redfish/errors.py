# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The typed errors of the Redfish client, all :class:`RedfishError` (so one ``except`` in a module takes them).

One class per way a BMC exchange fails, so callers branch on the type and not on message text:
unreachable (:class:`RedfishConnectionError`), too slow (:class:`RedfishTimeout`), credentials
(:class:`RedfishAuthError`), an HTTP error answer with its ``@Message.ExtendedInfo``
(:class:`RedfishHTTPError`, :class:`RedfishInvalidResponse`), a failed task
(:class:`RedfishTaskError`) and a resource that lacks what it must hold (:class:`RedfishIncomplete`).
"""

from __future__ import annotations

from typing import Any, Optional

from .._core.errors import RedfishError


class RedfishConnectionError(RedfishError):
    """The BMC could not be reached (refused, reset, DNS, TLS) after the retries."""


class RedfishTimeout(RedfishError):
    """Connect/read timeout after the retries, or a wait (task, service) ran past its deadline."""


class RedfishAuthError(RedfishError):
    """Login refused or the credentials stopped working (HTTP 401/403)."""


class RedfishHTTPError(RedfishError):
    """The BMC answered with an HTTP error (or a body that is not JSON).

    ``status``: HTTP status; ``extended_info``: list of ``{MessageId, Message (resolved),
    MessageArgs, RelatedProperties, Severity, Resolution}``; ``body_excerpt``: the first
    200 characters of a non-JSON body; ``method``/``path``: the request; ``code``: the
    ``error.code`` of the body; ``retry_after_s``: the answer's ``Retry-After`` in seconds.
    """

    def __init__(self, message: str, *, where: Optional[str] = None, status: Optional[int] = None,
                 method: Optional[str] = None, path: Optional[str] = None,
                 extended_info: Optional[list[dict[str, Any]]] = None, body_excerpt: Optional[str] = None,
                 code: Optional[str] = None, retry_after_s: Optional[float] = None) -> None:
        self.status = status
        self.method = method
        self.path = path
        self.extended_info = list(extended_info or [])
        self.body_excerpt = body_excerpt
        self.code = code
        details: dict[str, Any] = {"status": status, "method": method, "path": path,
                                   "extended_info": self.extended_info}
        if body_excerpt is not None:
            details["body_excerpt"] = body_excerpt
        if code:
            details["code"] = code
        if retry_after_s is not None:
            details["retry_after_s"] = retry_after_s
        super().__init__(message, where=where, details=details)

    @property
    def message_ids(self) -> list[str]:
        """The ``MessageId`` of every ExtendedInfo entry that has one, in order."""
        return [e["MessageId"] for e in self.extended_info if e.get("MessageId")]


class RedfishInvalidResponse(RedfishHTTPError):
    """A 2xx answer whose body is not the JSON object the resource must be (bad JSON, HTML)."""


class RedfishTaskError(RedfishError):
    """A Redfish task ended in failure: Exception/Killed/Cancelled, or Completed with a non-OK TaskStatus."""


class RedfishIncomplete(RedfishError):
    """A resource answered but lacks what it must hold (a collection without ``Members``)."""
