# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The typed errors of the Redfish client, all :class:`RedfishError` (so one ``except`` in a module takes them).

One class per way a BMC exchange fails, so callers branch on the type and not on message text:
unreachable (:class:`RedfishConnectionError`), too slow (:class:`RedfishTimeout`), credentials
(:class:`RedfishAuthError`), an HTTP error answer with its ``@Message.ExtendedInfo``
(:class:`RedfishHTTPError`, :class:`RedfishInvalidResponse`), a failed task
(:class:`RedfishTaskError`) and a resource that lacks what it must hold (:class:`RedfishIncomplete`).
:func:`http_error` turns an HTTP error answer into its typed error, with every ExtendedInfo entry in the message
(as community.crypto's ``_acme/errors.py`` builds its message from the problem document).
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


def format_extended_info(info: dict[str, Any]) -> str:
    """One resolved ExtendedInfo entry as text: ``MessageId: Message (args a, b) [Prop1, Prop2]``."""
    item = info.get("MessageId") or ""
    if info.get("Message") and info.get("Message") != info.get("MessageId"):
        item = "%s: %s" % (item, info["Message"]) if item else info["Message"]
    if info.get("MessageArgs"):
        item += " (args %s)" % ", ".join(str(a) for a in info["MessageArgs"])
    if info.get("RelatedProperties"):
        item += " [%s]" % ", ".join(str(p) for p in info["RelatedProperties"])
    return item


def http_error(status: Optional[int], *, host: str, method: str, path: str, extended_info: list[dict[str, Any]],
               body_excerpt: Optional[str] = None, code: Optional[str] = None, retry_after_s: Optional[float] = None,
               username: Optional[str] = None, login: bool = False) -> RedfishError:
    """The typed error of an HTTP error answer: 401/403 -> :class:`RedfishAuthError` (``login``: the answer to
    the login, naming ``username``), else :class:`RedfishHTTPError`.

    The message lists every resolved ExtendedInfo entry (R-21), else the body excerpt (R-13), else a
    non-generic ``error.code``; a 5xx says the BMC may need a Manager.Reset.  ``retry_after_s`` in seconds.
    """
    where = "%s %s" % (host, path)
    parts = ["HTTP %s" % status] + [format_extended_info(e) for e in extended_info]
    if not extended_info and body_excerpt:
        parts.append("body: %r" % body_excerpt)
    elif not extended_info and code and code != "Base.1.0.GeneralError":
        parts.append(code)
    msg = "; ".join(p for p in parts if p)
    if status in (401, 403):
        msg = ("login refused for user %r: %s" % (username, msg)) if login else ("access denied: %s" % msg)
        return RedfishAuthError(msg, where=where, details={"status": status, "method": method, "path": path,
                                                           "extended_info": extended_info})
    if status is not None and status >= 500:
        msg += "; repeated 5xx: the BMC may need a Manager.Reset (not done automatically)"
    return RedfishHTTPError(msg, where=where, status=status, method=method, path=path, extended_info=extended_info,
                            body_excerpt=body_excerpt, code=code, retry_after_s=retry_after_s)
