# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Login and logout of the Redfish client on sushy's auth classes.

sushy (5.x) gives the auth classes (``SessionAuth``, ``BasicAuth``, ``SessionOrBasicAuth``: the
login POST carries no Authorization header, fallback to Basic when a session cannot be created,
e.g. ``SessionLimitExceeded``; re-login once on 401 with a session).  This adds: the service root
read first (unauthenticated where the BMC allows it), Basic credentials checked at login rather
than at the first read, the session always DELETEd when the client closes (R-23), and a new
login after a BMC reboot (:meth:`Session.wait_service`, R-18).

Secrets: the password is kept only here and in sushy's auth object; it never appears in an
exception, a warning or ``repr``; the session token is never reported.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Literal, Optional

try:
    from sushy import auth as sushy_auth
    from sushy import exceptions as sushy_exc
except ImportError:  # Transport refuses to start without sushy (HAS_SUSHY)
    pass

from .._core.errors import RedfishError
from .errors import (
    FAULT_UNREACHABLE,
    RedfishAuthError,
    RedfishConnectionError,
    RedfishHTTPError,
    RedfishTimeout,
    controller_cause,
    fault_of,
)
from .transport import MAX_REDIRECTS, REDIRECTS, RETRY_STATUSES, SERVICE_ROOT, Transport, parse_retry_after


# How often the entry check asks a rebooting BMC again (seconds)
REBOOT_POLL_S = 2.0


def _rebooting(exc: RedfishError) -> bool:
    """Whether a service-root error after the retries looks like a BMC still rebooting: 503, or a connection
    reset (a BMC whose network is up before its web server); not a refused connection nor a controller cause."""
    if fault_of(exc) != FAULT_UNREACHABLE:
        return False
    if isinstance(exc, RedfishHTTPError):
        return exc.status == 503
    text = exc.message.lower()
    return "reset" in text or "aborted" in text or "remotedisconnected" in text


class _RootShim:
    """The 'root resource' sushy's auth classes expect: only ``create_session``.

    sushy's ``Sushy`` object would GET the service root and build resource objects on
    construction; we already hold the root, so this shim creates the session on the
    connector directly (no Authorization header on the POST, R-23).
    """

    def __init__(self, client: Session) -> None:
        self._client = client
        self.last_error: Any = None

    def create_session(self, username: Optional[str] = None,
                       password: Optional[str] = None) -> tuple[str, Optional[str]]:
        conn = self._client._conn
        conn._session.auth = None
        conn._session.headers.pop("X-Auth-Token", None)
        path = self._client.sessions_path
        conn._sessions_uri = self._client._abs(path)
        url = self._client._abs(path)
        for hop in range(MAX_REDIRECTS + 1):
            rsp = self._post_login(url, username, password)
            if rsp.status_code not in REDIRECTS or not rsp.headers.get("Location"):
                break
            # requests would follow a 301/302 as a GET without the body, and the 401 that answers it reads as
            # wrong credentials: re-POST on 307/308 (RFC 9110 §15.4.8/9), else name the redirect
            target = self._client._redirect("POST", url, rsp.status_code, rsp.headers["Location"], hop)
            if target is None:
                break
            url = target
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

    def _post_login(self, url: str, username: Optional[str], password: Optional[str]) -> Any:
        """POST the login, re-sent with the client's backoff (``settings.retries`` times) after a connection
        fault or a 408/429/5xx: a login is idempotent enough (a second session is harmless, and one whose
        answer was lost expires at the BMC's SessionTimeout), and one TCP reset must not read as a refused
        password.  A controller-side cause (TLS trust, DNS) and every other answer are raised at once."""
        client = self._client
        attempt = 0
        while True:
            retry_after = None
            try:
                return client._conn.post(url, data={"UserName": username, "Password": password}, allow_reauth=False,
                                         server_side_retries_left=0, allow_redirects=False)
            except sushy_exc.ConnectionError as exc:
                self.last_error = exc
                if controller_cause(exc.__context__) is not None or attempt >= client.settings.retries:
                    raise
            except sushy_exc.HTTPError as exc:
                self.last_error = exc
                if exc.status_code not in RETRY_STATUSES or attempt >= client.settings.retries:
                    raise
                last = getattr(client._tls, "last", None)
                retry_after = parse_retry_after(last.headers.get("Retry-After")) if last is not None else None
            except sushy_exc.SushyError as exc:
                self.last_error = exc
                raise
            client._sleep(client._delay(attempt, retry_after))
            attempt += 1


class Session(Transport):
    """The client's lifecycle: :meth:`open` (service root + login), :meth:`close` (logout), context manager.

    ``password`` is held for (re-)login only.
    """

    def __init__(self, base_url: str, username: Optional[str], password: Optional[str], **kwargs: Any) -> None:
        super().__init__(base_url, username, **kwargs)
        self.auth_mode = self.settings.auth
        self.sessions_path = SERVICE_ROOT + "/SessionService/Sessions"
        self.session_timeout_s: Optional[int] = None
        self.used_auth: Optional[str] = None
        self._opened = False
        # the worker threads of get_many (paging), shut down at close
        self._pool: Any = None
        self._in_pool = threading.local()
        self._root_shim = _RootShim(self)
        self._password = password
        self._auth: Any = None

    def __repr__(self) -> str:
        return "RedfishClient(%r, username=%r, auth=%r)" % (self.base_url, self.username, self.auth_mode)

    def __enter__(self) -> Session:
        self.open()
        return self

    def __exit__(self, *exc: object) -> Literal[False]:
        self.close()
        return False

    def open(self) -> Optional[dict[str, Any]]:
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

    def _get_root(self) -> Optional[dict[str, Any]]:
        """The service root, waiting up to ``settings.reboot_wait_s`` while the BMC looks like one still
        rebooting (a connection accepted then reset, or 503 + ``Retry-After`` while its web server starts, R-18)
        rather than failing the node; a refused connection or a timeout is not waited for (an absent BMC says
        the same).  None when the root needs authentication."""
        deadline = time.monotonic() + self.settings.reboot_wait_s
        while True:
            try:
                return self.get(SERVICE_ROOT)
            except RedfishAuthError:
                # a few BMCs protect the service root; log in with the standard paths then read it
                self._warn("service root requires authentication on %s" % self.host)
                return None
            except (RedfishConnectionError, RedfishHTTPError) as exc:
                left = deadline - time.monotonic()
                if left <= 0 or not _rebooting(exc):
                    raise
                self._warn("%s looks like a BMC still rebooting (%s); waiting up to %gs (bmc_reboot_timeout_s)"
                           % (self.host, exc.message, self.settings.reboot_wait_s))
                self._sleep(min(REBOOT_POLL_S, left))

    def _login(self) -> None:
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

    def _describe_login_error(self, err: Any) -> str:
        if isinstance(err, sushy_exc.HTTPError):
            ext = [self.registries.describe(e) for e in (err.extended_info or []) if isinstance(e, dict)]
            ids = ", ".join(e["MessageId"] or e["Message"] for e in ext) if ext else ""
            return "HTTP %s%s" % (err.status_code, (" " + ids) if ids else "")
        return str(err) if err else "unknown reason"

    def close(self) -> None:
        """DELETE the session (if any) and close the connection.  Never raises; a failed
        DELETE becomes a warning (the BMC's session slot may stay taken until it times out)."""
        auth = self._auth
        self._auth = None
        if auth is not None and isinstance(auth, sushy_auth.SessionAuth):
            uri = auth.get_session_resource_id()
            if uri:
                try:
                    with self._sem:
                        # no redirect is followed on a logout (and so it takes the transport's direct path)
                        self._conn.delete(self._abs(uri), allow_reauth=False, server_side_retries_left=0,
                                          allow_redirects=False)
                except sushy_exc.SushyError as exc:
                    status = getattr(exc, "status_code", None)
                    if status != 404:
                        self._warn("could not delete Redfish session on %s (%s)"
                                   % (self.host, "HTTP %s" % status if status else type(exc).__name__))
                except Exception as exc:  # noqa: BLE001 - closing must never raise
                    self._warn("could not delete Redfish session on %s (%s)" % (self.host, type(exc).__name__))
            try:
                auth.reset_session_attrs()
            except Exception:  # noqa: BLE001 - closing must never raise
                pass
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)
        try:
            self._conn.close()
        except Exception:  # noqa: BLE001 - closing must never raise
            pass

    def wait_service(self, timeout_s: float = 600, poll_s: float = 10.0) -> float:
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
