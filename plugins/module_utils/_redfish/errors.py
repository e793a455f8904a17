# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The typed errors of the Redfish client, all :class:`RedfishError` (so one ``except`` in a module takes them).

One class per way a BMC exchange fails, so callers branch on the type and not on message text:
unreachable (:class:`RedfishConnectionError`), too slow (:class:`RedfishTimeout`), credentials
(:class:`RedfishAuthError`), an HTTP error answer with its ``@Message.ExtendedInfo``
(:class:`RedfishHTTPError`, :class:`RedfishInvalidResponse`), a failed task
(:class:`RedfishTaskError`) and a resource that lacks what it must hold (:class:`RedfishIncomplete`).
:class:`RedfishControllerError` is the controller's own fault (TLS trust, a missing CA file, DNS): the BMC never
answered, so it is never the node's ``fail`` nor a technician's dispatch (a missing credential or map file stops
the whole run first).

Every error has a ``fault`` class (:data:`FAULT_CONTROLLER`, :data:`FAULT_UNREACHABLE`, :data:`FAULT_BMC`) that
the stages' judges map to a verdict (:func:`fault_of`, :func:`fault_remedy`): controller -> ``blocked`` with a
controller-side remedy; unreachable (a connection, timeout or 5xx fault that outlived the retries) -> ``blocked``
"BMC unreachable"; bmc (the BMC answered, and what it said is the finding) -> the check's own verdict.
:func:`http_error` turns an HTTP error answer into its typed error, with every ExtendedInfo entry in the message
(as community.crypto's ``_acme/errors.py`` builds its message from the problem document).
"""

from __future__ import annotations

from typing import Any, Optional

from .._core.errors import FAULT_BMC, FAULT_CONTROLLER, FAULT_UNREACHABLE, RedfishError
# The controller-side causes of :class:`RedfishControllerError`, each with the operator's remedy.
CONTROLLER_REMEDIES = {
    "tls_trust": "on the controller: give the BMC's CA bundle with ca_path (or the BMC map's ca_bundle), or set "
                 "validate_certs=false knowingly; nothing to do at the rack",
    "ca_file": "on the controller: the CA bundle named by ca_path (or the BMC map's ca_bundle) does not exist or "
               "cannot be read; fix the path or the file's permissions; nothing to do at the rack",
    "dns": "on the controller: the BMC's name does not resolve; fix the controller's resolver or use the BMC's "
           "address in the twin/BMC map; nothing to do at the rack",
}
# (a missing credential or BMC map file is one run-level ValidationError before any BMC is asked:
# _fleet.settings.require_credentials, _fleet.bmcmap.load_bmc_map)


class RedfishConnectionError(RedfishError):
    """The BMC could not be reached (refused, reset) after the retries: :data:`FAULT_UNREACHABLE`."""

    fault = FAULT_UNREACHABLE


class RedfishControllerError(RedfishConnectionError):
    """The controller could not talk to the BMC for a reason of its own: :data:`FAULT_CONTROLLER`.

    ``cause``: a key of :data:`CONTROLLER_REMEDIES` (``tls_trust``, ``ca_file``, ``dns``); ``remedy``: what the
    operator changes on the controller (default: the cause's remedy).
    Keyword-only, as community.crypto's ``_acme/errors.py`` builds its errors.
    """

    fault = FAULT_CONTROLLER

    def __init__(self, message: str, *, cause: str, where: Optional[str] = None, remedy: Optional[str] = None,
                 details: Optional[dict[str, Any]] = None) -> None:
        self.cause = cause
        self.remedy = remedy or CONTROLLER_REMEDIES.get(cause, "on the controller: " + message)
        super().__init__(message, where=where, details=dict(details or {}, cause=cause, fault=FAULT_CONTROLLER))


class RedfishTimeout(RedfishError):
    """Connect/read timeout after the retries, or a wait (task, service) ran past its deadline:
    :data:`FAULT_UNREACHABLE`."""

    fault = FAULT_UNREACHABLE


class RedfishAuthError(RedfishError):
    """Login refused or the credentials stopped working (HTTP 401/403): the BMC answered, :data:`FAULT_BMC`."""

    fault = FAULT_BMC


class RedfishHTTPError(RedfishError):
    """The BMC answered with an HTTP error (or a body that is not JSON).

    ``status``: HTTP status; ``extended_info``: list of ``{MessageId, Message (resolved),
    MessageArgs, RelatedProperties, Severity, Resolution}``; ``body_excerpt``: the first
    200 characters of a non-JSON body; ``method``/``path``: the request; ``code``: the
    ``error.code`` of the body; ``retry_after_s``: the answer's ``Retry-After`` in seconds.
    ``fault``: :data:`FAULT_UNREACHABLE` for a 408/429/5xx (a BMC that kept answering so after the retries is
    not answering), else :data:`FAULT_BMC`.
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
        self.fault = FAULT_UNREACHABLE if status is not None and (status >= 500 or status in (408, 429)) else FAULT_BMC
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
    """A 2xx answer whose body is not the JSON object the resource must be (bad JSON, HTML), after the retries
    of a GET: a body cut short in transit, :data:`FAULT_UNREACHABLE`."""

    def __init__(self, message: str, **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.fault = FAULT_UNREACHABLE


class RedfishTaskError(RedfishError):
    """A Redfish task ended in failure: Exception/Killed/Cancelled, or Completed with a non-OK TaskStatus."""


class RedfishIncomplete(RedfishError):
    """A resource answered but lacks what it must hold (a collection without ``Members``)."""


# getaddrinfo's words (glibc gai_strerror, musl, macOS, Windows) and libcurl's (error 6) for a name that does not
# resolve on the controller
DNS_FAILURES = ("Name or service not known", "Temporary failure in name resolution", "nodename nor servname",
                "No address associated with hostname", "getaddrinfo failed", "Failed to resolve",
                "Could not resolve host")
# OpenSSL's words for a certificate the controller does not trust (as opposed to a handshake cut short by a reset,
# which is the BMC's transient fault and is retried)
TLS_TRUST_FAILURES = ("CERTIFICATE_VERIFY_FAILED", "certificate verify failed", "doesn't match", "hostname mismatch",
                      "self signed certificate", "self-signed certificate", "unable to get local issuer",
                      # libcurl's codes, which _redfish/curl.py names in its messages (libcurl-errors(3): 60 peer
                      # certificate or host name not verified, 77 the CA file or directory not usable)
                      "libcurl error 60,", "libcurl error 77,")


def controller_cause(cause: Optional[BaseException]) -> Optional[str]:
    """``"tls_trust"`` or ``"dns"`` when a requests connection error is the controller's own (a CA it lacks, a
    name it cannot resolve), else None (refused, reset, a handshake cut short: the BMC's, retried)."""
    if cause is None:
        return None
    text = repr(cause)
    names = {k.__name__ for k in type(cause).__mro__}
    if "SSLError" in names and any(t in text for t in TLS_TRUST_FAILURES):
        return "tls_trust"
    if "ConnectionError" in names and any(d in text for d in DNS_FAILURES):
        return "dns"
    return None


def fault_of(exc: BaseException) -> str:
    """The fault class of an error: ``exc.fault`` where it has one, else :data:`FAULT_BMC` (a task that failed, a
    resource that lacks what it must hold, a check's own error)."""
    return str(getattr(exc, "fault", None) or FAULT_BMC)


def fault_remedy(exc: BaseException) -> str:
    """The remedy of a controller or unreachable fault (for a ``blocked`` verdict), else ``""``."""
    fault = fault_of(exc)
    if fault == FAULT_CONTROLLER:
        return getattr(exc, "remedy", None) or "on the controller: %s" % exc
    if fault == FAULT_UNREACHABLE:
        return ("rerun the stage; the fault outlived the retries: if the BMC stays unreachable, check its "
                "management link and reset it (Manager.Reset or ipmitool mc reset cold)")
    return ""


def extended_info_of(body: Any) -> list[dict[str, Any]]:
    """All ``@Message.ExtendedInfo`` entries of a Redfish body (top level and inside ``error``), raw."""
    out: list[dict[str, Any]] = []
    if not isinstance(body, dict):
        return out
    for holder in (body.get("error"), body):
        if not isinstance(holder, dict):
            continue
        ext = holder.get("@Message.ExtendedInfo")
        if isinstance(ext, list):
            out.extend(ext)
        elif isinstance(ext, dict):
            out.append(ext)
    return out


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
