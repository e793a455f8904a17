# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The Redfish client's transport: one HTTP exchange with the retry policy, TLS and typed errors.

On sushy's connector (``sushy.connector.Connector``: requests session, ``OData-Version`` and
``Accept-Encoding: identity`` headers), this adds (cases in ``shared/cases/redfish-cases.md``):

* ``If-Match`` sent as given, never dropped (sushy's ``patch()`` re-sends a refused PATCH without it; the ETag
  policy is in :mod:`.writes`); entity tags normalised (:func:`normalise_etag`);
* redirects handled here, not by requests (which would re-send a redirected POST as a GET): see
  :meth:`Transport._redirect`;

* retries with exponential backoff for connection errors, read timeouts, 408, 429 and every 5xx,
  honouring ``Retry-After`` (sushy retries 5xx GETs at a fixed delay and never looks at
  ``Retry-After``, 408 or 429); POST/PATCH are re-sent only when the request provably was not
  processed (connect failure, 408, 429, 503);
* error bodies that are HTML, empty or not JSON (R-13): status + first 200 characters;
* HTTP status -> :mod:`.errors` class, ``@Message.ExtendedInfo`` resolved to messages through
  the registries (R-21);
* ``keep_alive``: one requests Session whose connections stay open (sushy sends
  ``Connection: close`` on every request, a TCP+TLS handshake each); the proxy/CA environment
  is read once per client instead of on every request;
* a per-BMC concurrency cap (semaphore) for threaded callers.

:class:`Transport` is the base of ``RedfishClient``; its knobs are a :class:`.settings.ClientSettings`.
"""

from __future__ import annotations

import email.utils
import json
import os
import threading
import time
from typing import Any, Callable, Iterable, Mapping, Optional, Union
from urllib.parse import urljoin, urlparse, urlsplit, urlunsplit

try:
    import requests
    from sushy import exceptions as sushy_exc
    HAS_SUSHY = True
    SUSHY_IMPORT_ERROR: Optional[ImportError] = None
except ImportError as _imp_err:  # reported by the caller with missing_required_lib('sushy')
    HAS_SUSHY = False
    SUSHY_IMPORT_ERROR = _imp_err

from .._core.errors import RedfishError
from .errors import (DNS_FAILURES, FAULT_CONTROLLER, RedfishConnectionError, RedfishControllerError, RedfishHTTPError,
                     RedfishInvalidResponse, RedfishTimeout, controller_cause, extended_info_of, http_error)
from .curl import NotSent
from .fastpath import connector, decode_body
from .registries import MessageRegistries
from .settings import ClientSettings

SERVICE_ROOT = "/redfish/v1"
RETRY_STATUSES = frozenset([408, 429]) | frozenset(range(500, 600))
# Statuses that say "the request was not acted on": safe to re-send a POST/PATCH.
RESEND_SAFE_STATUSES = frozenset([408, 429, 503])
EXCERPT = 200
# RFC 9110 §15.4: 301/302 let a client turn a POST into a GET, 303 names where the answer is (a task monitor
# after an action), 307/308 ask for the same method again.  requests would follow them all, a write as a GET.
REDIRECTS = frozenset([301, 302, 303, 307, 308])
MAX_REDIRECTS = 5


def normalise_etag(value: Any) -> Optional[str]:
    """An entity tag as RFC 9110 §8.8.3 writes it (``"x"`` or ``W/"x"``), or None when there is none.

    BMCs double-quote (``""1234""``) or leave the quotes off (``1234``); the value between the quotes is kept
    as it is.  An empty or whitespace-only value is None.
    """
    if value is None:
        return None
    text = str(value).strip()
    weak = text[:2].upper() == "W/"
    if weak:
        text = text[2:].strip()
    text = text.strip('"')
    if not text:
        return None
    return ('W/"%s"' if weak else '"%s"') % text


def _well_formed_etag(value: Any) -> bool:
    text = str(value or "").strip()
    if text[:2].upper() == "W/":
        text = text[2:]
    return len(text) >= 3 and text[0] == text[-1] == '"' and '"' not in text[1:-1]


def parse_retry_after(value: Any, now: Optional[float] = None) -> Optional[float]:
    """``Retry-After`` header -> seconds (float >= 0) or None (RFC 9110 §10.2.3: delta-seconds or HTTP-date)."""
    if value is None:
        return None
    value = str(value).strip()
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when is None:
        return None
    now = time.time() if now is None else now
    return max(0.0, when.timestamp() - now)


def normalise_base_url(base_url: Any) -> str:
    """``https://10.0.0.5/redfish/v1/`` -> ``https://10.0.0.5``; a bare host gets ``https://``."""
    if not base_url or not isinstance(base_url, str):
        raise RedfishError("bmc url is empty", where="base_url")
    url = base_url.strip()
    if "://" not in url:
        url = "https://" + url
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise RedfishError("not an http(s) URL: %r" % base_url, where="base_url")
    path = parts.path.rstrip("/")
    if path.endswith(SERVICE_ROOT):
        path = path[: -len(SERVICE_ROOT)]
    return urlunsplit((parts.scheme, parts.netloc, path, "", ""))


class RedfishResponse:
    """One HTTP exchange: ``status``, ``headers`` (case-insensitive), ``body`` (dict/list or None),
    ``text_excerpt``, ``location`` (absolute URL or None), ``extended_info`` (resolved),
    ``etag``, ``retry_after_s`` (seconds)."""

    def __init__(self, status: int, headers: Mapping[str, str], body: Any, text_excerpt: Optional[str],
                 location: Optional[str], extended_info: list[dict[str, Any]]) -> None:
        self.status = status
        self.headers = headers
        self.body = body
        self.text_excerpt = text_excerpt
        self.location = location
        self.extended_info = extended_info
        # DSP0266 §"ETags": the header and the body's @odata.etag carry the same tag; a malformed header
        # (""1234"", no quotes) loses to a well-formed body value
        header = headers.get("ETag")
        annotated = body.get("@odata.etag") if isinstance(body, dict) else None
        if header and not _well_formed_etag(header) and _well_formed_etag(annotated):
            header = None
        self.etag: Optional[str] = normalise_etag(header) or normalise_etag(annotated)
        self.retry_after_s = parse_retry_after(headers.get("Retry-After"))

    def __repr__(self) -> str:
        return "RedfishResponse(status=%r, location=%r)" % (self.status, self.location)


def _short(exc: object) -> str:
    text = str(exc)
    return text if len(text) <= 300 else text[:300] + "..."


def _not_sent(cause: Optional[BaseException]) -> bool:
    """True when a connection error happened before the request reached the BMC."""
    if cause is None:
        return False
    if isinstance(cause, (requests.exceptions.ConnectTimeout, NotSent)):
        return True
    if isinstance(cause, requests.exceptions.ConnectionError):
        text = repr(cause)
        return "NewConnectionError" in text or "Connection refused" in text or any(d in text for d in DNS_FAILURES)
    return False


class Transport:
    """The base of ``RedfishClient``: settings, the connector, counters, and :meth:`_send` with the retry policy.

    ``registries``: a :class:`MessageRegistries`, or ``registry_dir`` to load one (both: the
    directory is added to the given registries); ``sleep``: how backoff waits (seconds).
    :attr:`requests` counts HTTP requests sent, :attr:`warnings` collects non-fatal findings
    (strings, no secrets).
    """

    def __init__(self, base_url: str, username: Optional[str], settings: ClientSettings,
                 registries: Optional[MessageRegistries] = None, registry_dir: Optional[str] = None,
                 sleep: Callable[[float], Any] = time.sleep) -> None:
        if not HAS_SUSHY:
            raise RedfishError("the sushy Python library is required: %s" % SUSHY_IMPORT_ERROR, where="sushy")
        self.settings = settings
        self.base_url = normalise_base_url(base_url)
        self.host = urlparse(self.base_url).netloc
        self.username = username
        # turned off for the client's lifetime when the service refuses $expand
        self.use_expand = settings.use_expand
        self._sleep = sleep
        self.requests = 0
        self.warnings: list[str] = []
        self.service_root: Optional[dict[str, Any]] = None
        self._sem = threading.BoundedSemaphore(settings.max_concurrency)
        self._lock = threading.Lock()
        self._tls = threading.local()
        if registries is None:
            registries = MessageRegistries(directory=registry_dir)
        elif registry_dir:
            registries.load_directory(registry_dir)
        self.registries = registries
        tls_verify: Union[bool, str] = settings.ca_path if (settings.ca_path and settings.verify) \
            else bool(settings.verify)
        # recorded on every ledger row read through this client (``_core.gate.TLS_UNVERIFIED``), not only warned
        self.tls_verified = bool(tls_verify)
        if not tls_verify:
            self._warn("TLS certificate verification is disabled for %s (validate_certs=false)" % self.host)
        elif isinstance(tls_verify, str) and not os.access(tls_verify, os.R_OK):
            # requests would raise an OSError at the first request; it is the controller's file, not the BMC
            raise RedfishControllerError("the CA bundle %s does not exist or cannot be read on the controller"
                                         % tls_verify, cause="ca_file", where=self.host)
        # server_side_retries=1 makes sushy try each request exactly once: the retry
        # policy (backoff, Retry-After, which statuses) is ours, see _send().
        self._conn = connector(
            self.base_url, keep_alive=settings.keep_alive, pool_size=settings.max_concurrency, verify=tls_verify,
            response_callback=self._on_response, server_side_retries=1, server_side_retries_delay=0,
            default_request_timeout=settings.read_timeout, connect_timeout=settings.connect_timeout)

    @property
    def max_concurrency(self) -> int:
        """Requests in flight to this BMC at most (``settings.max_concurrency``)."""
        return self.settings.max_concurrency

    @property
    def keep_alive(self) -> bool:
        """Whether HTTP connections are reused (``settings.keep_alive``)."""
        return self.settings.keep_alive

    # ------------------------------------------------------------------ plumbing
    def _warn(self, text: str) -> None:
        with self._lock:
            if text not in self.warnings:
                self.warnings.append(text)

    def _on_response(self, response: Any) -> None:
        self._tls.last = response
        self._count()

    def _count(self) -> None:
        with self._lock:
            self.requests += 1

    def _origin(self) -> str:
        """``scheme://host[:port]`` of :attr:`base_url` (which a redirect to another port may change)."""
        known = self.__dict__.get("_origin_of")
        if known is None or known[0] != self.base_url:
            parts = urlsplit(self.base_url)
            known = self.__dict__["_origin_of"] = (self.base_url, "%s://%s" % (parts.scheme, parts.netloc))
        return known[1]

    def _abs(self, path: Optional[str]) -> str:
        if not path:
            return self.base_url + SERVICE_ROOT
        if path[:1] == "/" and path[1:2] != "/" and "/." not in path and "#" not in path:
            return self._origin() + path   # what urljoin gives for a plain absolute path, without parsing it twice
        if urlparse(path).netloc:
            return path
        if not path.startswith("/"):
            path = "/" + path
        return urljoin(self.base_url + "/", path)

    def _rel(self, url: str) -> str:
        """Absolute URL on this BMC -> path+query (for messages and keys)."""
        origin = self._origin()
        if url.startswith(origin + "/") and "#" not in url and not url.endswith("?"):
            return url[len(origin):]   # what urlsplit gives, without parsing
        p = urlsplit(url)
        return p.path + ("?" + p.query if p.query else "")

    def _wrap_response(self, rsp: Any) -> RedfishResponse:
        body = decode_body(rsp)
        text = ""
        if body is None:
            try:
                text = rsp.text or ""
            except (UnicodeDecodeError, LookupError):  # a body in an undecodable or unknown charset is shown as empty
                text = ""
        location = rsp.headers.get("Location")
        if location:
            location = self._abs(location)
        return RedfishResponse(rsp.status_code, rsp.headers, body, text[:EXCERPT] if body is None else None,
                               location, [self.registries.describe(e) for e in extended_info_of(body)])

    def _map_exception(self, exc: Exception, method: str, path: str, login: bool = False) -> RedfishError:
        """sushy exception (+ the last raw response on this thread) -> our RedfishError."""
        where = "%s %s" % (self.host, path)
        if isinstance(exc, sushy_exc.HTTPError):
            rsp = getattr(self._tls, "last", None)
            status = exc.status_code
            wrapped = self._wrap_response(rsp) if rsp is not None and rsp.status_code == status else None
            if wrapped is not None:
                ext = wrapped.extended_info
                excerpt = wrapped.text_excerpt
                retry_after = wrapped.retry_after_s
            else:
                ext = [self.registries.describe(e) for e in (exc.extended_info or []) if isinstance(e, dict)]
                excerpt = None
                retry_after = None
            return self._http_error(status, method, path, ext, excerpt, getattr(exc, "code", None),
                                    retry_after, login=login)
        if isinstance(exc, sushy_exc.ConnectionError):
            cause = exc.__context__
            controller = controller_cause(cause)
            if controller == "tls_trust":
                return RedfishControllerError(
                    "TLS verification failed (%s); give the BMC's CA with ca_path, or set "
                    "validate_certs=false knowingly" % _short(cause), cause=controller, where=where,
                    details={"method": method, "path": path, "tls": True})
            if controller == "dns":
                return RedfishControllerError("the BMC's name does not resolve on the controller: %s" % _short(cause),
                                              cause=controller, where=where, details={"method": method, "path": path})
            if isinstance(cause, requests.exceptions.Timeout):
                kind = "connect" if isinstance(cause, requests.exceptions.ConnectTimeout) else "read"
                limit = self.settings.connect_timeout if kind == "connect" else self.settings.read_timeout
                return RedfishTimeout("%s timeout after %gs (%d attempts)" % (kind, limit, self.settings.retries + 1),
                                      where=where, details={"method": method, "path": path, "timeout": kind})
            return RedfishConnectionError("cannot connect: %s" % _short(cause or exc), where=where,
                                          details={"method": method, "path": path})
        return RedfishError("%s: %s" % (type(exc).__name__, _short(exc)), where=where)

    def _http_error(self, status: Optional[int], method: str, path: str, ext: list[dict[str, Any]],
                    excerpt: Optional[str], code: Optional[str] = None, retry_after: Optional[float] = None,
                    login: bool = False) -> RedfishError:
        return http_error(status, host=self.host, method=method, path=path, extended_info=ext, body_excerpt=excerpt,
                          code=code, retry_after_s=retry_after, username=self.username, login=login)

    def _delay(self, attempt: int, retry_after: Optional[float]) -> float:
        """Seconds before re-send ``attempt`` (0-based): ``Retry-After`` (capped) or the backoff."""
        cap = self.settings.max_retry_after_s
        if retry_after is not None:
            if retry_after > cap:
                self._warn("%s asked Retry-After %gs; capped at %gs" % (self.host, retry_after, cap))
            return min(retry_after, cap)
        return min(self.settings.backoff_s * (2 ** attempt), self.settings.max_backoff_s)

    def _send(self, method: str, path: str, body: Any = None, headers: Optional[dict[str, str]] = None,
              etag: Optional[str] = None, files: Optional[dict[str, Any]] = None, expect_json: bool = False,
              ok_statuses: Iterable[int] = ()) -> RedfishResponse:
        """Send one request with the retry policy; return a :class:`RedfishResponse`.

        ``ok_statuses``: error statuses returned as responses instead of raised (404 for task
        monitors).  ``expect_json``: a 2xx body must be JSON (else retried, then
        :class:`RedfishInvalidResponse`).
        """
        url = self._abs(path)
        rel = self._rel(url)
        idempotent = method in ("GET", "HEAD", "DELETE", "PUT")
        retries = self.settings.retries
        attempt = hops = 0
        headers = dict(headers or {})
        if etag:
            # sent as given, never dropped: sushy's patch() re-sends without If-Match on 412 and the
            # write then lands over whatever changed meanwhile (DSP0266 §"ETags")
            headers["If-Match"] = etag
        while True:
            retry_after = None
            try:
                self._tls.last = None
                with self._sem:
                    kwargs: dict[str, Any] = {"server_side_retries_left": 0, "allow_redirects": False}
                    if files is not None:
                        kwargs["files"] = files
                    rsp = self._conn._op(method, url, data=body, headers=headers, **kwargs)
            except sushy_exc.HTTPError as exc:
                if exc.status_code in ok_statuses and getattr(self._tls, "last", None) is not None:
                    return self._wrap_response(self._tls.last)
                err = self._map_exception(exc, method, rel)
                status = exc.status_code
                retryable = status in RETRY_STATUSES and (idempotent or status in RESEND_SAFE_STATUSES)
                if not retryable or attempt >= retries:
                    raise err from None
                retry_after = err.details.get("retry_after_s")
            except sushy_exc.ConnectionError as exc:
                self._count()
                err = self._map_exception(exc, method, rel)
                # a controller-side cause (TLS trust, DNS) does not go away by asking again
                if getattr(err, "fault", None) == FAULT_CONTROLLER or attempt >= retries:
                    raise err from None
                if not idempotent and not _not_sent(exc.__context__):
                    raise err from None
            except sushy_exc.SushyError as exc:
                raise self._map_exception(exc, method, rel) from None
            except (AttributeError, TypeError, ValueError) as exc:
                # sushy's HTTPError assumes a JSON *object* error body; a list or other
                # odd JSON trips it.  Build the error from the raw response instead.
                last = getattr(self._tls, "last", None)
                if last is None:
                    raise RedfishError("%s: %s" % (type(exc).__name__, _short(exc)),
                                       where="%s %s" % (self.host, rel)) from None
                w = self._wrap_response(last)
                err = self._http_error(w.status, method, rel, w.extended_info, w.text_excerpt or
                                       json.dumps(w.body)[:EXCERPT], retry_after=w.retry_after_s)
                retryable = w.status in RETRY_STATUSES and (idempotent or w.status in RESEND_SAFE_STATUSES)
                if not retryable or attempt >= retries:
                    raise err from None
                retry_after = w.retry_after_s
            else:
                if rsp.status_code in REDIRECTS and rsp.headers.get("Location"):
                    target = self._redirect(method, url, rsp.status_code, rsp.headers["Location"], hops)
                    if target is not None:
                        url, rel, hops = target, self._rel(target), hops + 1
                        continue
                wrapped = self._wrap_response(rsp)
                if expect_json and not isinstance(wrapped.body, dict):
                    shown = wrapped.text_excerpt if wrapped.body is None else json.dumps(wrapped.body)[:EXCERPT]
                    invalid = RedfishInvalidResponse(
                        "HTTP %s but the body is not a JSON object: %r" % (wrapped.status, shown),
                        where="%s %s" % (self.host, rel), status=wrapped.status, method=method, path=rel,
                        body_excerpt=wrapped.text_excerpt)
                    if not idempotent or attempt >= retries:
                        raise invalid
                else:
                    return wrapped
            self._sleep(self._delay(attempt, retry_after))
            attempt += 1

    def _redirect(self, method: str, url: str, status: int, location: str, hops: int) -> Optional[str]:
        """Where to send ``method`` after a ``status`` redirect to ``location``, or None to keep the answer.

        GET/HEAD follow a redirect on the same host; a port or scheme change becomes this BMC's base URL, once,
        with a warning (its credentials stay with it).  A write keeps a 303 (its Location is the task monitor,
        DSP0266 §"Asynchronous operations") and is re-sent for 307/308 on the same host (RFC 9110 §15.4.8/9);
        301/302 are refused: a client may re-send them as a GET (RFC 9110 §15.4.2/3), so the write was never
        done.  Another host, or more than :data:`MAX_REDIRECTS` hops, is refused too.
        """
        target = urljoin(url, location)
        src, dst = urlsplit(url), urlsplit(target)
        what = "HTTP %s redirect of %s %s to %s" % (status, method, self._rel(url), target)
        if hops >= MAX_REDIRECTS:
            why = "more than %d redirects" % MAX_REDIRECTS
        elif dst.hostname != src.hostname:
            why = "another host; not followed with this BMC's credentials"
        elif method in ("GET", "HEAD") or status in (307, 308):
            if (dst.scheme, dst.netloc) != (src.scheme, src.netloc):
                base = urlunsplit((dst.scheme, dst.netloc, "", "", ""))
                self._warn("%s redirects to %s; using it as the BMC's base URL" % (self.host, base))
                self.base_url = base
            return target
        elif status == 303:
            return None
        else:
            why = "a %s is not re-sent as a GET; the BMC did not act on it" % method
        raise RedfishHTTPError("%s: %s" % (what, why), where="%s %s" % (self.host, self._rel(url)), status=status,
                               method=method, path=self._rel(url))

    # ------------------------------------------------------------------ reads
    def get(self, path: str) -> dict[str, Any]:
        """GET ``path`` -> the JSON object (dict).

        Raises :class:`RedfishHTTPError` (status, resolved ExtendedInfo, body excerpt),
        :class:`RedfishInvalidResponse` when a 2xx body is not a JSON object,
        :class:`RedfishAuthError`, :class:`RedfishConnectionError`, :class:`RedfishTimeout`.
        """
        rsp = self._send("GET", path, expect_json=True)
        self._raise_if_error_body(rsp, path)
        return rsp.body

    def get_with_headers(self, path: str) -> tuple[dict[str, Any], Mapping[str, str]]:
        """GET ``path`` -> ``(body dict, headers)`` (``headers`` is case-insensitive; ``ETag`` etc.)."""
        rsp = self._send("GET", path, expect_json=True)
        self._raise_if_error_body(rsp, path)
        return rsp.body, rsp.headers

    def get_response(self, path: str, ok_statuses: Iterable[int] = ()) -> RedfishResponse:
        """GET ``path`` -> :class:`RedfishResponse` (body may be None); ``ok_statuses`` are not raised."""
        return self._send("GET", path, ok_statuses=ok_statuses)

    def _raise_if_error_body(self, rsp: RedfishResponse, path: str) -> None:
        """A 2xx GET whose body is only a Redfish ``error`` object is an error, not a resource."""
        body = rsp.body
        if isinstance(body, dict) and "error" in body and "@odata.id" not in body and "Members" not in body:
            err = body.get("error")
            raise self._http_error(rsp.status, "GET", path, rsp.extended_info, None,
                                   code=err.get("code") if isinstance(err, dict) else None)
