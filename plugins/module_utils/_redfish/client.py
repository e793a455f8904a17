# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A small, robust Redfish client on sushy's connector and auth classes.

What sushy (5.x) gives us and we use as is: the HTTP connector (``sushy.connector.Connector``:
requests session, ``OData-Version``/``Accept-Encoding: identity`` headers, weak->strong->no
ETag retry on 412 for PATCH, re-login once on 401 with a session), the auth classes
(``SessionAuth``, ``BasicAuth``, ``SessionOrBasicAuth``: the login POST carries no
Authorization header, fallback to Basic when a session cannot be created, e.g.
``SessionLimitExceeded``), and its exception classes (``HTTPError`` with
``@Message.ExtendedInfo``).

What sushy does not do and this module adds around it (cases in
``shared/cases/redfish-cases.md``):

* retries with exponential backoff for connection errors, read timeouts, 408, 429 and
  every 5xx, honouring ``Retry-After`` (sushy retries 5xx GETs at a fixed delay and never
  looks at ``Retry-After``, 408 or 429); POST/PATCH are re-sent only when the request
  provably was not processed (connect failure, 408, 429, 503);
* error bodies that are HTML, empty or not JSON (R-13): status + first 200 characters;
* ``@Message.ExtendedInfo`` resolved to messages through the registries (R-21);
* ``Members@odata.nextLink`` paging with a page cap, loop detection, de-duplication by
  ``@odata.id`` and a stop at ``Members@odata.count`` (R-7, R-26) — sushy's resource
  classes never follow nextLink, so we page on the connector's raw responses;
* a 200 collection without ``Members`` is :class:`RedfishIncomplete` (R-11);
* ``$expand`` when ``ProtocolFeaturesSupported.ExpandQuery`` advertises it, falling
  back to member GETs when the service ignores or refuses it;
* PATCH with a fresh GET for ``If-Match`` and exactly one GET+retry on 428 (R-1, R-4);
  2xx bodies carrying ``SystemResetRequired`` mean "pending reboot" (R-20);
* task monitors of any URL shape, 202 on monitor and Task, ``Completed`` with a
  non-OK ``TaskStatus`` is a failure, 404 after a BMC reboot is "unknown" (R-15/17/18);
* the session is always DELETEd when the client closes (R-23);
* a per-BMC concurrency cap (semaphore) for threaded callers, and :meth:`RedfishClient.get_many`
  running up to that many GETs at once;
* ``keep_alive=True``: one requests Session whose connections stay open (sushy sends
  ``Connection: close`` on every request, a TCP+TLS handshake each); the proxy/CA
  environment is read once per client instead of on every request.

Secrets: the password is kept only in sushy's auth object and never appears in an
exception, a warning or ``repr``; the session token is never reported.
"""

from __future__ import annotations

import email.utils
import json
import os
import threading
import time
from urllib.parse import urljoin, urlparse, urlsplit, urlunsplit

try:
    import requests
    from sushy import auth as sushy_auth
    from sushy import connector as sushy_connector
    from sushy import exceptions as sushy_exc
    HAS_SUSHY = True
    SUSHY_IMPORT_ERROR = None
except ImportError as _imp_err:  # reported by the caller with missing_required_lib('sushy')
    HAS_SUSHY = False
    SUSHY_IMPORT_ERROR = _imp_err

from .._core.errors import RedfishError
from .registries import (
    MessageRegistries,
    message_key,
)

SERVICE_ROOT = "/redfish/v1"
RETRY_STATUSES = frozenset([408, 429]) | frozenset(range(500, 600))
# Statuses that say "the request was not acted on": safe to re-send a POST/PATCH.
RESEND_SAFE_STATUSES = frozenset([408, 429, 503])
TASK_RUNNING = frozenset(["New", "Starting", "Running", "Pending", "Stopping", "Suspended", "Service", "Interrupted"])
TASK_FAILED = frozenset(["Exception", "Killed", "Cancelled", "Cancelling"])
EXCERPT = 200


# --------------------------------------------------------------------------- errors
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
    200 characters of a non-JSON body; ``method``/``path``: the request.
    """

    def __init__(self, message, where=None, status=None, method=None, path=None, extended_info=None,
                 body_excerpt=None, code=None, retry_after_s=None):
        self.status = status
        self.method = method
        self.path = path
        self.extended_info = list(extended_info or [])
        self.body_excerpt = body_excerpt
        self.code = code
        details = {"status": status, "method": method, "path": path, "extended_info": self.extended_info}
        if body_excerpt is not None:
            details["body_excerpt"] = body_excerpt
        if code:
            details["code"] = code
        if retry_after_s is not None:
            details["retry_after_s"] = retry_after_s
        super().__init__(message, where=where, details=details)

    @property
    def message_ids(self):
        return [e.get("MessageId") for e in self.extended_info if e.get("MessageId")]


class RedfishInvalidResponse(RedfishHTTPError):
    """A 2xx answer whose body is not the JSON object the resource must be (bad JSON, HTML)."""


class RedfishTaskError(RedfishError):
    """A Redfish task ended in failure: Exception/Killed/Cancelled, or Completed with a non-OK TaskStatus."""


class RedfishIncomplete(RedfishError):
    """A resource answered but lacks what it must hold (a collection without ``Members``)."""


# --------------------------------------------------------------------------- helpers
def extended_info_of(body):
    """All ``@Message.ExtendedInfo`` entries of a Redfish body (top level and inside ``error``), raw."""
    out = []
    if not isinstance(body, dict):
        return out
    err = body.get("error")
    if isinstance(err, dict):
        ext = err.get("@Message.ExtendedInfo")
        if isinstance(ext, list):
            out.extend(ext)
        elif isinstance(ext, dict):
            out.append(ext)
    ext = body.get("@Message.ExtendedInfo")
    if isinstance(ext, list):
        out.extend(ext)
    elif isinstance(ext, dict):
        out.append(ext)
    return out


def parse_retry_after(value, now=None):
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


def normalise_base_url(base_url):
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
    ``etag``, ``retry_after_s``."""

    def __init__(self, status, headers, body, text_excerpt, location, extended_info):
        self.status = status
        self.headers = headers
        self.body = body
        self.text_excerpt = text_excerpt
        self.location = location
        self.extended_info = extended_info
        self.etag = headers.get("ETag") or (body.get("@odata.etag") if isinstance(body, dict) else None)
        self.retry_after_s = parse_retry_after(headers.get("Retry-After"))

    def __repr__(self):
        return "RedfishResponse(status=%r, location=%r)" % (self.status, self.location)


if HAS_SUSHY:
    class _Connector(sushy_connector.Connector):
        """sushy's connector with connection reuse as an option and the environment read once.

        ``keep_alive``: drop sushy's ``Connection: close`` default so the session's pooled
        connections are reused (up to ``pool_size`` per BMC).  requests re-reads the proxy
        and CA-bundle environment on every request (``trust_env``); here it is read once:
        the proxies for this BMC's URL (``no_proxy`` honoured) go into the session and
        ``REQUESTS_CA_BUNDLE``/``CURL_CA_BUNDLE`` apply when ``verify`` is plain True,
        as requests would do.
        """

        def __init__(self, url, keep_alive=False, pool_size=4, **kwargs):
            verify = kwargs.get("verify", True)
            if verify is True:
                kwargs["verify"] = os.environ.get("REQUESTS_CA_BUNDLE") or os.environ.get("CURL_CA_BUNDLE") or True
            super().__init__(url, **kwargs)
            session = self._session
            session.proxies.update(requests.utils.get_environ_proxies(url))
            session.trust_env = False
            if keep_alive:
                session.headers.pop("Connection", None)
                adapter = requests.adapters.HTTPAdapter(pool_connections=1, pool_maxsize=max(1, int(pool_size)))
                session.mount("https://", adapter)
                session.mount("http://", adapter)
else:  # pragma: no cover - the client refuses to start without sushy
    _Connector = None


class _RootShim:
    """The 'root resource' sushy's auth classes expect: only ``create_session``.

    sushy's ``Sushy`` object would GET the service root and build resource objects on
    construction; we already hold the root, so this shim creates the session on the
    connector directly (no Authorization header on the POST, R-23).
    """

    def __init__(self, client):
        self._client = client
        self.last_error = None

    def create_session(self, username=None, password=None):
        conn = self._client._conn
        conn._session.auth = None
        conn._session.headers.pop("X-Auth-Token", None)
        path = self._client.sessions_path
        conn._sessions_uri = self._client._abs(path)
        try:
            rsp = conn.post(self._client._abs(path), data={"UserName": username, "Password": password},
                            allow_reauth=False, server_side_retries_left=0)
        except sushy_exc.SushyError as exc:
            self.last_error = exc
            raise
        token = rsp.headers.get("X-Auth-Token")
        if not token:
            self.last_error = "no X-Auth-Token in the login answer"
            raise sushy_exc.MissingXAuthToken(method="POST", url=path, response=rsp)
        location = rsp.headers.get("Location")
        if not location:
            try:
                location = (rsp.json() or {}).get("@odata.id")
            except ValueError:
                location = None
        if not location:
            self._client._warn("session created without a Location; it cannot be deleted at logout")
        return token, location


# --------------------------------------------------------------------------- client
class RedfishClient:
    """A Redfish client for one BMC.

    ``RedfishClient(base_url, username, password, verify=True, ca_path=None,
    connect_timeout=5, read_timeout=30, retries=3, backoff_s=0.5, max_backoff_s=30,
    max_retry_after_s=120, max_concurrency=4, auth="auto", registries=None,
    registry_dir=None, use_expand=True, page_cap=100, sleep=time.sleep, keep_alive=False)``.

    * ``base_url``: ``https://host[:port]`` (a trailing ``/redfish/v1`` is accepted).
    * ``verify``/``ca_path``: TLS verification is on by default; ``ca_path`` is a CA bundle
      file or directory; ``verify=False`` adds a warning to :attr:`warnings`.
    * ``connect_timeout``/``read_timeout``: seconds, per request.
    * ``retries``: re-sends after the first attempt; backoff ``backoff_s * 2**n`` seconds
      capped at ``max_backoff_s``, or the server's ``Retry-After`` (capped at
      ``max_retry_after_s``).
    * ``max_concurrency``: at most this many requests in flight to this BMC at once.
    * ``auth``: ``session`` (X-Auth-Token, DELETEd at close), ``basic``, or ``auto``
      (session, falling back to Basic if a session cannot be created).
    * ``registries``: a :class:`MessageRegistries`; or ``registry_dir`` to load one.
    * ``keep_alive``: reuse HTTP connections (up to ``max_concurrency`` per BMC) for the
      client's lifetime instead of sushy's ``Connection: close`` per request; meant for
      bursts of reads (an audit lasts seconds).  Off by default: some older BMCs (HPE iLO)
      choke on long-lived connections (reference/numbers.md, "Round-trips").

    Use as a context manager (``with RedfishClient(...) as c:``): it logs in on entry and
    always DELETEs the session on exit.  :attr:`requests` counts HTTP requests sent,
    :attr:`warnings` collects non-fatal findings (strings, no secrets).

    Raises :class:`RedfishConnectionError`, :class:`RedfishTimeout`,
    :class:`RedfishAuthError`, :class:`RedfishHTTPError`, :class:`RedfishTaskError`,
    :class:`RedfishIncomplete` (all :class:`RedfishError`).
    """

    def __init__(self, base_url, username=None, password=None, verify=True, ca_path=None,
                 connect_timeout=5, read_timeout=30, retries=3, backoff_s=0.5, max_backoff_s=30.0,
                 max_retry_after_s=120.0, max_concurrency=4, auth="auto", registries=None,
                 registry_dir=None, use_expand=True, page_cap=100, sleep=time.sleep, keep_alive=False):
        if not HAS_SUSHY:
            raise RedfishError("the sushy Python library is required: %s" % SUSHY_IMPORT_ERROR, where="sushy")
        if auth not in ("session", "basic", "auto"):
            raise RedfishError("auth must be session, basic or auto, not %r" % (auth,), where="auth")
        self.base_url = normalise_base_url(base_url)
        self.host = urlparse(self.base_url).netloc
        self.username = username
        self.auth_mode = auth
        self.connect_timeout = float(connect_timeout)
        self.read_timeout = float(read_timeout)
        self.retries = max(0, int(retries))
        self.backoff_s = float(backoff_s)
        self.max_backoff_s = float(max_backoff_s)
        self.max_retry_after_s = float(max_retry_after_s)
        self.max_concurrency = max(1, int(max_concurrency))
        self.use_expand = bool(use_expand)
        self.page_cap = max(1, int(page_cap))
        self.keep_alive = bool(keep_alive)
        self._sleep = sleep
        self.requests = 0
        self.warnings = []
        self.service_root = None
        self.sessions_path = SERVICE_ROOT + "/SessionService/Sessions"
        self.session_timeout_s = None
        self.used_auth = None
        self._sem = threading.BoundedSemaphore(self.max_concurrency)
        self._lock = threading.Lock()
        self._tls = threading.local()
        self._pool = None
        self._in_pool = threading.local()
        self._opened = False
        if registries is None:
            registries = MessageRegistries(directory=registry_dir)
        elif registry_dir:
            registries.load_directory(registry_dir)
        self.registries = registries
        if ca_path and verify:
            tls_verify = ca_path
        else:
            tls_verify = bool(verify)
        if not tls_verify:
            self._warn("TLS certificate verification is disabled for %s (validate_certs=false)" % self.host)
        # server_side_retries=1 makes sushy try each request exactly once: the retry
        # policy (backoff, Retry-After, which statuses) is ours, see _send().
        self._conn = _Connector(
            self.base_url, keep_alive=self.keep_alive, pool_size=self.max_concurrency, verify=tls_verify,
            response_callback=self._on_response, server_side_retries=1, server_side_retries_delay=0,
            default_request_timeout=self.read_timeout, connect_timeout=self.connect_timeout)
        self._root_shim = _RootShim(self)
        self._password = password
        self._auth = None

    def __repr__(self):
        return "RedfishClient(%r, username=%r, auth=%r)" % (self.base_url, self.username, self.auth_mode)

    # ------------------------------------------------------------------ lifecycle
    def __enter__(self):
        self.open()
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def open(self):
        """GET the service root (unauthenticated) and log in.  Returns the service root dict.

        Raises :class:`RedfishAuthError` when the credentials are refused.
        """
        self._opened = True
        try:
            self.service_root = self._get_root()
            links = (self.service_root or {}).get("Links") or {}
            sessions = (links.get("Sessions") or {}).get("@odata.id")
            if sessions:
                self.sessions_path = sessions
            self._login()
        except BaseException:
            self.close()
            raise
        return self.service_root

    def _get_root(self):
        try:
            return self.get(SERVICE_ROOT)
        except RedfishAuthError:
            # a few BMCs protect the service root; log in with the standard paths then read it
            self._warn("service root requires authentication on %s" % self.host)
            return None

    def _login(self):
        if self.auth_mode == "basic":
            self._auth = sushy_auth.BasicAuth(self.username, self._password)
        elif self.auth_mode == "session":
            self._auth = sushy_auth.SessionAuth(self.username, self._password)
        else:
            self._auth = sushy_auth.SessionOrBasicAuth(self.username, self._password)
        self._auth.set_context(self._root_shim, self._conn)
        try:
            self._auth.authenticate()
        except sushy_exc.SushyError as exc:
            raise self._map_exception(exc, "POST", self.sessions_path, login=True) from None
        if isinstance(self._auth, sushy_auth.SessionAuth) and self._auth.get_session_key():
            self.used_auth = "session"
        else:
            self.used_auth = "basic"
            if self.auth_mode == "auto":
                why = self._root_shim.last_error
                self._warn("Redfish session could not be created on %s (%s); using Basic authentication"
                           % (self.host, self._describe_login_error(why)))
        if self.used_auth == "basic":
            # Basic is not checked until the first request: check it now, so a wrong
            # password is a login failure and not a later inventory error.
            try:
                svc = self.get(SERVICE_ROOT + "/SessionService")
                self.session_timeout_s = svc.get("SessionTimeout")
            except RedfishAuthError as exc:
                if self.auth_mode == "auto":
                    exc.message = "%s (session login failed before: %s)" % (
                        exc.message, self._describe_login_error(self._root_shim.last_error))
                raise
            except RedfishHTTPError as exc:
                if exc.status not in (404, 405):
                    raise
        if self.service_root is None:
            self.service_root = self.get(SERVICE_ROOT)

    def _describe_login_error(self, err):
        if isinstance(err, sushy_exc.HTTPError):
            ext = [self.registries.describe(e) for e in (err.extended_info or []) if isinstance(e, dict)]
            ids = ", ".join(e["MessageId"] or e["Message"] for e in ext) if ext else ""
            return "HTTP %s%s" % (err.status_code, (" " + ids) if ids else "")
        return str(err) if err else "unknown reason"

    def close(self):
        """DELETE the session (if any) and close the connection.  Never raises; a failed
        DELETE becomes a warning (the BMC's session slot may stay taken until it times out)."""
        auth = self._auth
        self._auth = None
        if auth is not None and isinstance(auth, sushy_auth.SessionAuth):
            uri = auth.get_session_resource_id()
            if uri:
                try:
                    with self._sem:
                        self._conn.delete(self._abs(uri), allow_reauth=False, server_side_retries_left=0)
                except sushy_exc.SushyError as exc:
                    status = getattr(exc, "status_code", None)
                    if status != 404:
                        self._warn("could not delete Redfish session on %s (%s)"
                                   % (self.host, "HTTP %s" % status if status else type(exc).__name__))
                except Exception as exc:  # noqa: BLE001 - closing must never raise
                    self._warn("could not delete Redfish session on %s (%s)" % (self.host, type(exc).__name__))
            try:
                auth.reset_session_attrs()
            except Exception:  # noqa: BLE001
                pass
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)
        try:
            self._conn.close()
        except Exception:  # noqa: BLE001
            pass

    # ------------------------------------------------------------------ plumbing
    def _warn(self, text):
        with self._lock:
            if text not in self.warnings:
                self.warnings.append(text)

    def _on_response(self, response):
        self._tls.last = response
        self._count()

    def _count(self):
        with self._lock:
            self.requests += 1

    def _abs(self, path):
        if not path:
            return self.base_url + SERVICE_ROOT
        if urlparse(path).netloc:
            return path
        if not path.startswith("/"):
            path = "/" + path
        return urljoin(self.base_url + "/", path)

    def _rel(self, url):
        """Absolute URL on this BMC -> path+query (for messages and keys)."""
        p = urlsplit(url)
        return p.path + ("?" + p.query if p.query else "")

    def _resolved_ext(self, body):
        return [self.registries.describe(e) for e in extended_info_of(body)]

    def _wrap_response(self, rsp):
        text = ""
        body = None
        try:
            text = rsp.text or ""
        except Exception:  # noqa: BLE001
            text = ""
        if text.strip():
            try:
                body = json.loads(text)
            except ValueError:
                body = None
        location = rsp.headers.get("Location")
        if location:
            location = self._abs(location)
        return RedfishResponse(rsp.status_code, rsp.headers, body, text[:EXCERPT] if body is None else None,
                               location, self._resolved_ext(body))

    def _map_exception(self, exc, method, path, login=False):
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
            if requests is not None and isinstance(cause, requests.exceptions.SSLError):
                return RedfishConnectionError(
                    "TLS handshake/verification failed (%s); give the BMC's CA with ca_path, or set "
                    "validate_certs=false knowingly" % _short(cause), where=where,
                    details={"method": method, "path": path, "tls": True})
            if requests is not None and isinstance(cause, requests.exceptions.Timeout):
                kind = "connect" if isinstance(cause, requests.exceptions.ConnectTimeout) else "read"
                limit = self.connect_timeout if kind == "connect" else self.read_timeout
                return RedfishTimeout("%s timeout after %gs (%d attempts)" % (kind, limit, self.retries + 1),
                                      where=where, details={"method": method, "path": path, "timeout": kind})
            return RedfishConnectionError("cannot connect: %s" % _short(cause or exc), where=where,
                                          details={"method": method, "path": path})
        return RedfishError("%s: %s" % (type(exc).__name__, _short(exc)), where=where)

    def _http_error(self, status, method, path, ext, excerpt, code=None, retry_after=None, login=False):
        where = "%s %s" % (self.host, path)
        parts = ["HTTP %s" % status]
        for e in ext:
            item = e.get("MessageId") or ""
            if e.get("Message") and e.get("Message") != e.get("MessageId"):
                item = "%s: %s" % (item, e["Message"]) if item else e["Message"]
            if e.get("MessageArgs"):
                item += " (args %s)" % ", ".join(str(a) for a in e["MessageArgs"])
            if e.get("RelatedProperties"):
                item += " [%s]" % ", ".join(str(p) for p in e["RelatedProperties"])
            parts.append(item)
        if not ext and excerpt:
            parts.append("body: %r" % excerpt)
        elif not ext and code and code != "Base.1.0.GeneralError":
            parts.append(code)
        msg = "; ".join(p for p in parts if p)
        if status in (401, 403):
            msg = ("login refused for user %r: %s" % (self.username, msg)) if login else \
                ("access denied: %s" % msg)
            return RedfishAuthError(msg, where=where, details={"status": status, "method": method, "path": path,
                                                               "extended_info": ext})
        if status is not None and status >= 500:
            msg += "; repeated 5xx: the BMC may need a Manager.Reset (not done automatically)"
        return RedfishHTTPError(msg, where=where, status=status, method=method, path=path, extended_info=ext,
                                body_excerpt=excerpt, code=code, retry_after_s=retry_after)

    def _delay(self, attempt, retry_after):
        if retry_after is not None:
            if retry_after > self.max_retry_after_s:
                self._warn("%s asked Retry-After %gs; capped at %gs" % (self.host, retry_after,
                                                                        self.max_retry_after_s))
            return min(retry_after, self.max_retry_after_s)
        return min(self.backoff_s * (2 ** attempt), self.max_backoff_s)

    def _send(self, method, path, body=None, headers=None, etag=None, files=None, expect_json=False,
              ok_statuses=()):
        """Send one request with the retry policy; return a :class:`RedfishResponse`.

        ``ok_statuses``: error statuses returned as responses instead of raised (404 for task
        monitors).  ``expect_json``: a 2xx body must be JSON (else retried, then
        :class:`RedfishInvalidResponse`).
        """
        url = self._abs(path)
        rel = self._rel(url)
        idempotent = method in ("GET", "HEAD", "DELETE", "PUT")
        attempt = 0
        while True:
            retry_after = None
            try:
                self._tls.last = None
                with self._sem:
                    kwargs = {"server_side_retries_left": 0}
                    if files is not None:
                        kwargs["files"] = files
                    if method == "PATCH":
                        rsp = self._conn.patch(url, data=body, headers=dict(headers or {}), etag=etag, **kwargs)
                    else:
                        rsp = self._conn._op(method, url, data=body, headers=headers, **kwargs)
            except sushy_exc.HTTPError as exc:
                if exc.status_code in ok_statuses and getattr(self._tls, "last", None) is not None:
                    return self._wrap_response(self._tls.last)
                err = self._map_exception(exc, method, rel)
                status = exc.status_code
                retryable = status in RETRY_STATUSES and (idempotent or status in RESEND_SAFE_STATUSES)
                if not retryable or attempt >= self.retries:
                    raise err from None
                retry_after = err.details.get("retry_after_s")
            except sushy_exc.ConnectionError as exc:
                self._count()
                err = self._map_exception(exc, method, rel)
                if err.details.get("tls") or attempt >= self.retries:
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
                if not retryable or attempt >= self.retries:
                    raise err from None
                retry_after = w.retry_after_s
            else:
                wrapped = self._wrap_response(rsp)
                if expect_json and not isinstance(wrapped.body, dict):
                    shown = wrapped.text_excerpt if wrapped.body is None else json.dumps(wrapped.body)[:EXCERPT]
                    err = RedfishInvalidResponse(
                        "HTTP %s but the body is not a JSON object: %r" % (wrapped.status, shown),
                        where="%s %s" % (self.host, rel), status=wrapped.status, method=method, path=rel,
                        body_excerpt=wrapped.text_excerpt)
                    if not idempotent or attempt >= self.retries:
                        raise err
                else:
                    return wrapped
            self._sleep(self._delay(attempt, retry_after))
            attempt += 1

    # ------------------------------------------------------------------ public API
    def get(self, path):
        """GET ``path`` -> the JSON object (dict).

        Raises :class:`RedfishHTTPError` (status, resolved ExtendedInfo, body excerpt),
        :class:`RedfishInvalidResponse` when a 2xx body is not a JSON object,
        :class:`RedfishAuthError`, :class:`RedfishConnectionError`, :class:`RedfishTimeout`.
        """
        rsp = self._send("GET", path, expect_json=True)
        _raise_if_error_body(self, rsp, path)
        return rsp.body

    def get_with_headers(self, path):
        """GET ``path`` -> ``(body dict, headers)`` (``headers`` is case-insensitive; ``ETag`` etc.)."""
        rsp = self._send("GET", path, expect_json=True)
        _raise_if_error_body(self, rsp, path)
        return rsp.body, rsp.headers

    def get_response(self, path, ok_statuses=()):
        """GET ``path`` -> :class:`RedfishResponse` (body may be None); ``ok_statuses`` are not raised."""
        return self._send("GET", path, ok_statuses=ok_statuses)

    def expand_param(self, levels=1, kind="."):
        """The ``$expand`` query this service advertises (``.($levels=n)``, ``*``...) or None.

        From ``ProtocolFeaturesSupported.ExpandQuery`` of the service root (DSP0266 §7.3):
        ``kind`` ``.`` (NoLinks: hyperlinks outside ``Links``) falls back to ``*`` (ExpandAll)
        and back; ``*`` asks for every hyperlink, ``Links`` included; ``$levels`` only when
        ``Levels`` is advertised, ``levels`` capped at ``MaxLevels``.
        """
        if not self.use_expand or not isinstance(self.service_root, dict):
            return None
        eq = ((self.service_root.get("ProtocolFeaturesSupported") or {}).get("ExpandQuery") or {})
        if not isinstance(eq, dict):
            return None
        if kind == "*" and eq.get("ExpandAll"):
            kind = "*"
        elif eq.get("NoLinks"):
            kind = "."
        elif eq.get("ExpandAll"):
            kind = "*"
        else:
            return None
        if not eq.get("Levels"):
            return kind
        return "%s($levels=%d)" % (kind, min(max(1, int(levels)), self.expand_levels()))

    def expand_levels(self):
        """How many ``$levels`` of ``$expand`` this service takes: 0 (no ``$expand``), 1, or
        ``MaxLevels`` when ``Levels`` is advertised (1 when MaxLevels is missing)."""
        if not self.use_expand or not isinstance(self.service_root, dict):
            return 0
        eq = ((self.service_root.get("ProtocolFeaturesSupported") or {}).get("ExpandQuery") or {})
        if not isinstance(eq, dict) or not (eq.get("NoLinks") or eq.get("ExpandAll")):
            return 0
        if not eq.get("Levels"):
            return 1
        top = eq.get("MaxLevels")
        return top if isinstance(top, int) and top >= 1 else 1

    def expand_url(self, path, levels=1, kind="."):
        """``path`` with this service's ``$expand`` query appended (``path`` itself without one);
        ``levels``/``kind`` as in :meth:`expand_param`."""
        param = self.expand_param(levels, kind)
        if not param:
            return path
        return path + ("&" if "?" in path else "?") + "$expand=" + param

    def members(self, collection_path, expand=True, errors=None, fetch=True, levels=1):
        """All members of a Redfish collection, as bodies, in service order, without duplicates.

        Follows ``Members@odata.nextLink`` (page cap :attr:`page_cap`, loop detection),
        de-duplicates by ``@odata.id`` (R-26: pages that overlap), stops once the unique
        count reaches ``Members@odata.count`` and warns when the final count differs.
        Uses ``$expand`` when the service advertises it (``expand=True``; ``levels`` deep,
        capped at the service's ``MaxLevels``); members that come back as bare links are
        fetched, up to :attr:`max_concurrency` at once (``fetch=False`` returns the links).

        ``errors``: a list to which ``{"uri", "reason"}`` is appended for members that could
        not be read (they are skipped); without it the first such error is raised.

        Raises :class:`RedfishIncomplete` when the collection has no ``Members`` (R-11),
        and any :class:`RedfishError` of :meth:`get` for the collection itself.
        """
        param = self.expand_param(levels) if (expand and fetch) else None
        first = None
        if param:
            sep = "&" if "?" in collection_path else "?"
            try:
                first = self.get(collection_path + sep + "$expand=" + param)
            except RedfishHTTPError as exc:
                if exc.status not in (400, 404, 405, 406, 501):
                    raise
                first = self.get(collection_path)  # raises for a collection that is not there
                self._warn("%s refused $expand (HTTP %s); reading members one by one"
                           % (self.host, exc.status))
                self.use_expand = False
        if first is None:
            first = self.get(collection_path)
        if not isinstance(first.get("Members"), list):
            raise RedfishIncomplete(
                "collection answered without Members (BMC in a bad state?); inventory of this part is "
                "INCOMPLETE, not empty — retry later, consider a BMC reset if it persists",
                where="%s %s" % (self.host, collection_path), details={"path": collection_path})
        count = first.get("Members@odata.count")
        if not isinstance(count, int):
            count = None
        seen = {}
        order = []
        pages = 1
        visited = {self._rel(self._abs(collection_path))}
        page = first
        while True:
            for m in page.get("Members") or []:
                if not isinstance(m, dict):
                    continue
                oid = m.get("@odata.id")
                key = _norm_id(oid) if oid else "#%d" % len(order)
                if key in seen:
                    if len(m) > len(seen[key]):
                        seen[key] = m
                    continue
                seen[key] = m
                order.append(key)
            if count is not None and len(order) >= count:
                break
            nxt = page.get("Members@odata.nextLink")
            if not nxt:
                break
            nrel = self._rel(self._abs(nxt))
            if nrel in visited:
                self._warn("%s %s: nextLink loop at %s; stopped paging" % (self.host, collection_path, nxt))
                break
            if pages >= self.page_cap:
                self._warn("%s %s: more than %d pages; stopped paging" % (self.host, collection_path,
                                                                          self.page_cap))
                break
            visited.add(nrel)
            pages += 1
            page = self.get(nxt)
            if not isinstance(page.get("Members"), list):
                self._warn("%s %s: page without Members" % (self.host, nxt))
                break
        if count is not None and len(order) != count:
            self._warn("%s %s: Members@odata.count is %d but %d unique members were read"
                       % (self.host, collection_path, count, len(order)))
        items = [seen[k] for k in order]
        if not fetch:
            return items
        return self.fetch_all(items, errors=errors)

    def fetch_all(self, refs, errors=None):
        """GET the body of every ``{"@odata.id": ...}`` ref that is only a link; keep expanded ones.

        Runs up to :attr:`max_concurrency` GETs at once.  ``errors`` as in :meth:`members`.
        """
        todo = [i for i, m in enumerate(refs) if _is_link(m)]
        out = list(refs)
        if not todo:
            return out
        bodies = self.get_many([refs[i]["@odata.id"] for i in todo], errors=[] if errors is not None else None)
        failed = set()
        for i, (body, exc) in zip(todo, bodies):
            if exc is not None:
                errors.append({"uri": refs[i]["@odata.id"], "reason": str(exc)})
                failed.add(i)
            else:
                out[i] = body
        return [m for i, m in enumerate(out) if i not in failed]

    def get_many(self, paths, errors=None):
        """GET every path, up to :attr:`max_concurrency` at once -> ``[(body dict, None) or
        (None, RedfishError)]`` in the order given.

        ``errors``: a list means "collect": each failure is returned as its error; None
        means the first failure (in the order given) is raised.  The worker threads live
        as long as the client (closed by :meth:`close`); a call made from one of them runs
        its GETs one after the other.
        """
        paths = list(paths)

        def one(path):
            try:
                return self.get(path), None
            except RedfishError as exc:
                return None, exc

        if len(paths) > 1 and self.max_concurrency > 1 and not getattr(self._in_pool, "flag", False):
            results = list(self._executor().map(one, paths))
        else:
            results = [one(p) for p in paths]
        if errors is None:
            for _body, exc in results:
                if exc is not None:
                    raise exc
        return results

    def _executor(self):
        with self._lock:
            if self._pool is None:
                from concurrent.futures import ThreadPoolExecutor

                def mark():
                    self._in_pool.flag = True
                self._pool = ThreadPoolExecutor(max_workers=self.max_concurrency, initializer=mark,
                                                thread_name_prefix="redfish-%s" % self.host)
            return self._pool

    def etag_of(self, path):
        """GET ``path`` and return its ETag (``ETag`` header, else ``@odata.etag``) or None."""
        rsp = self._send("GET", path, expect_json=True)
        return rsp.etag

    def patch(self, path, body, etag="auto", headers=None):
        """PATCH ``path`` with ``body`` and an ``If-Match`` from a fresh GET.

        ``etag``: ``"auto"`` (GET first; ETag header or ``@odata.etag``), a string, or None
        (no If-Match).  On 428 Precondition Required: exactly one GET + retry with If-Match
        (R-1).  On 412 sushy retries a weak ETag as strong, then without If-Match (R-4).
        Returns ``{"status", "pending_reboot", "extended_info", "body", "etag", "location"}``;
        ``pending_reboot`` is True when a 2xx body carries ``SystemResetRequired`` (R-20).
        Raises :class:`RedfishHTTPError` (with every ExtendedInfo entry, R-21) and the rest.
        """
        if etag == "auto":
            etag = self.etag_of(path)
        try:
            rsp = self._send("PATCH", path, body=body, headers=headers, etag=etag)
        except RedfishHTTPError as exc:
            if exc.status != 428:
                raise
            fresh = self.etag_of(path)
            if not fresh:
                raise RedfishHTTPError(
                    str(exc.message) + "; the BMC requires If-Match but exposes no ETag on %s" % path,
                    where=exc.where, status=428, method="PATCH", path=path, extended_info=exc.extended_info) \
                    from None
            self._warn("%s PATCH %s: 428 Precondition Required; retried once with If-Match" % (self.host, path))
            etag = fresh
            rsp = self._send("PATCH", path, body=body, headers=headers, etag=etag)
        return _action_result(rsp, etag)

    def post(self, path, body=None, headers=None):
        """POST ``path`` -> ``{"status", "location", "task_monitor", "retry_after_s", "body",
        "extended_info", "pending_reboot"}``.  ``task_monitor`` is the absolute Location of a 202
        answer (pass it to :meth:`wait_task`)."""
        rsp = self._send("POST", path, body=body, headers=headers)
        return _action_result(rsp, None)

    def delete(self, path):
        """DELETE ``path`` -> ``{"status", ...}`` (same shape as :meth:`post`)."""
        return _action_result(self._send("DELETE", path), None)

    def multipart_push(self, uri, image_bytes, params=None, filename="image.bin"):
        """POST a firmware image to ``MultipartHttpPushUri`` (DSP0266 §12.2: parts
        ``UpdateParameters`` (JSON) and ``UpdateFile``).  Returns as :meth:`post`."""
        files = {
            "UpdateParameters": (None, json.dumps(params or {}), "application/json"),
            "UpdateFile": (filename, image_bytes, "application/octet-stream"),
        }
        rsp = self._send("POST", uri, files=files)
        return _action_result(rsp, None)

    def wait_task(self, location, timeout_s=1800, poll_s=5.0, task_uri=None):
        """Follow a task monitor (or Task URI) until the task ends.

        Accepts any monitor URL shape (absolute or relative, used verbatim), 202 from both
        monitor and Task, ``Retry-After``; learns the Task from the monitor body's
        ``@odata.id``; survives the BMC being unreachable or 503 while it reboots (R-18).

        Returns ``{"state", "status", "percent", "messages", "task_uri", "body", "unknown"}``:
        ``state`` ``Completed`` with ``status`` ``OK``/None is success; ``unknown`` is True
        (state ``Unknown``) when monitor and Task are gone (404), e.g. wiped by a BMC reboot:
        the caller decides by re-reading FirmwareInventory, not by the vanished task.
        Raises :class:`RedfishTaskError` for Exception/Killed/Cancelled or Completed with
        Warning/Critical (R-17), :class:`RedfishTimeout` past ``timeout_s`` (seconds).
        """
        deadline = time.monotonic() + float(timeout_s)
        monitor = self._abs(location)
        task = self._abs(task_uri) if task_uri else None
        current = monitor
        last = {"state": None, "status": None, "percent": None, "messages": [], "task_uri": task,
                "body": None, "unknown": False}
        unreachable_since = None
        while True:
            wait = poll_s
            try:
                rsp = self._send("GET", current, ok_statuses=(404, 410))
            except (RedfishConnectionError, RedfishTimeout) as exc:
                unreachable_since = unreachable_since or time.monotonic()
                self._warn("%s unreachable while following task %s (%s); still waiting"
                           % (self.host, self._rel(monitor), type(exc).__name__))
            except RedfishHTTPError as exc:
                if exc.status not in (500, 502, 503, 504):
                    raise
                self._warn("%s answered HTTP %s while following task %s; still waiting"
                           % (self.host, exc.status, self._rel(monitor)))
            else:
                unreachable_since = None
                body = rsp.body if isinstance(rsp.body, dict) else {}
                if rsp.status in (404, 410):
                    if task and current != task:
                        current = task
                        continue
                    last.update(state="Unknown", unknown=True)
                    return last
                oid = body.get("@odata.id")
                if oid and "TaskState" in body and not task:
                    task = self._abs(oid)
                    last["task_uri"] = task
                if "TaskState" in body:
                    last.update(state=body.get("TaskState"), status=body.get("TaskStatus"),
                                percent=body.get("PercentComplete"), body=body,
                                messages=[self.registries.describe(m) for m in body.get("Messages") or []])
                    state = body.get("TaskState")
                    if state == "Completed":
                        if last["status"] in (None, "OK"):
                            return last
                        raise _task_error(self, last, "completed with TaskStatus %s" % last["status"])
                    if state in TASK_FAILED:
                        raise _task_error(self, last, "ended %s" % state)
                    if state not in TASK_RUNNING:
                        self._warn("%s task %s: unexpected TaskState %r" % (self.host, self._rel(current), state))
                elif rsp.status in (200, 201, 204) and current == monitor:
                    # the monitor answers the operation's own response once it is done
                    last.update(state="Completed", status=last["status"] or "OK", percent=100, body=body or None)
                    return last
                elif rsp.status in (200, 201, 204):
                    self._warn("%s task %s: answer has no TaskState" % (self.host, self._rel(current)))
                if rsp.retry_after_s is not None:
                    wait = min(rsp.retry_after_s, self.max_retry_after_s)
            if time.monotonic() + wait > deadline:
                raise RedfishTimeout("task %s not finished after %gs (last state %s, %s%%)"
                                     % (self._rel(monitor), timeout_s, last["state"], last["percent"]),
                                     where=self.host, details={k: v for k, v in last.items() if k != "body"})
            self._sleep(wait)

    def wait_service(self, timeout_s=600, poll_s=10.0):
        """Poll ``GET /redfish/v1`` until the service answers 200 with JSON (a BMC back from
        a reboot answers ping long before Redfish, R-18), then log in again with a new
        session.  Returns the seconds waited.  Raises :class:`RedfishTimeout`."""
        start = time.monotonic()
        deadline = start + float(timeout_s)
        while True:
            try:
                root = self._send("GET", SERVICE_ROOT, expect_json=True)
            except (RedfishConnectionError, RedfishTimeout, RedfishHTTPError):
                root = None
            if root is not None and root.status == 200:
                self.service_root = root.body
                old = self._auth
                self._auth = None
                if old is not None and isinstance(old, sushy_auth.SessionAuth):
                    old.reset_session_attrs()  # the old session died with the BMC
                self._login()
                return time.monotonic() - start
            if time.monotonic() + poll_s > deadline:
                raise RedfishTimeout("Redfish service did not come back within %gs" % timeout_s, where=self.host)
            self._sleep(poll_s)

    def load_registries(self, errors=None):
        """Read the message registries the BMC serves under ``/redfish/v1/Registries`` into
        :attr:`registries` (OEM prefixes such as ``IDRAC``/``iLO`` included).  Returns how
        many were added; unreadable files are skipped (listed in ``errors`` if given)."""
        added = 0
        files = self.members(SERVICE_ROOT + "/Registries", errors=errors)
        for f in files:
            for loc in f.get("Location") or []:
                if loc.get("Language") not in (None, "en"):
                    continue
                uri = loc.get("Uri")
                if not uri:
                    continue
                try:
                    doc = self.get(uri)
                except RedfishError as exc:
                    if errors is not None:
                        errors.append({"uri": uri, "reason": str(exc)})
                    continue
                if self.registries.add(doc, source="%s%s" % (self.host, uri)):
                    added += 1
        return added


# --------------------------------------------------------------------------- Ansible glue
def redfish_argument_spec():
    """The argument spec of the ``symphony.cluster.redfish`` doc fragment (keep them in step)."""
    from ansible.module_utils.basic import env_fallback
    return {
        "bmc_url": {"type": "str", "required": True},
        "username": {"type": "str", "required": True},
        "password": {"type": "str", "required": True, "no_log": True,
                     "fallback": (env_fallback, ["SYMPHONY_BMC_PASSWORD"])},
        "auth": {"type": "str", "default": "auto", "choices": ["session", "basic", "auto"]},
        "validate_certs": {"type": "bool", "default": True},
        "ca_path": {"type": "path"},
        "connect_timeout": {"type": "float", "default": 5},
        "read_timeout": {"type": "float", "default": 30},
        "retries": {"type": "int", "default": 3},
        "max_concurrency": {"type": "int", "default": 4},
        "registry_dir": {"type": "path"},
    }


def client_from_params(params, registries=None):
    """A :class:`RedfishClient` from module params of :func:`redfish_argument_spec` (not opened)."""
    return RedfishClient(
        params["bmc_url"], params["username"], params["password"], verify=params.get("validate_certs", True),
        ca_path=params.get("ca_path"), connect_timeout=params.get("connect_timeout", 5),
        read_timeout=params.get("read_timeout", 30), retries=params.get("retries", 3),
        max_concurrency=params.get("max_concurrency", 4), auth=params.get("auth", "auto"),
        registries=registries, registry_dir=params.get("registry_dir"))


# --------------------------------------------------------------------------- module helpers
def _short(exc):
    text = str(exc)
    return text if len(text) <= 300 else text[:300] + "..."


def _not_sent(cause):
    """True when a connection error happened before the request reached the BMC."""
    if requests is None or cause is None:
        return False
    if isinstance(cause, requests.exceptions.ConnectTimeout):
        return True
    if isinstance(cause, requests.exceptions.ConnectionError):
        text = repr(cause)
        return "NewConnectionError" in text or "Connection refused" in text or "Name or service" in text
    return False


def _norm_id(oid):
    return oid.rstrip("/") if isinstance(oid, str) and oid != "/" else oid


def _is_link(member):
    return isinstance(member, dict) and "@odata.id" in member and \
        set(member) <= {"@odata.id", "@odata.type", "@odata.etag"}


def _raise_if_error_body(client, rsp, path):
    """A 2xx GET whose body is only a Redfish ``error`` object is an error, not a resource."""
    body = rsp.body
    if isinstance(body, dict) and "error" in body and "@odata.id" not in body and "Members" not in body:
        raise client._http_error(rsp.status, "GET", path, rsp.extended_info, None,
                                 code=(body.get("error") or {}).get("code")
                                 if isinstance(body.get("error"), dict) else None)


def _action_result(rsp, etag):
    pending = any(message_key(e.get("MessageId")) == "SystemResetRequired" for e in rsp.extended_info)
    return {
        "status": rsp.status,
        "location": rsp.location,
        "task_monitor": rsp.location if rsp.status == 202 else None,
        "retry_after_s": rsp.retry_after_s,
        "body": rsp.body,
        "extended_info": rsp.extended_info,
        "pending_reboot": pending,
        "etag": etag,
    }


def _task_error(client, last, what):
    msgs = "; ".join("%s%s" % ((m.get("MessageId") + ": ") if m.get("MessageId") else "", m.get("Message") or "")
                     for m in last["messages"])
    text = "task %s %s%s" % (client._rel(last["task_uri"]) if last["task_uri"] else "", what,
                             (": " + msgs) if msgs else "")
    return RedfishTaskError(text, where=client.host, details={k: v for k, v in last.items() if k != "body"})
