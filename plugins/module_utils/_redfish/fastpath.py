# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The transport's per-request CPU savings (issue 27 profile, tests/bench/README.md): the connector's session,
whose plain requests skip requests' per-request merging and go to libcurl (:mod:`.curl`) or, without pycurl, to
urllib3's pool directly, and one JSON decode per response body.

Used by :mod:`.transport` only (:func:`connector` and ``_wrap_response``).
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any
from urllib.parse import urlsplit

from . import curl as _curl

try:
    import requests
    import urllib3
    from sushy import connector as sushy_connector
    from urllib3 import exceptions as u3
    from urllib3.util import Timeout
    _SESSION: Any = requests.Session
    # adapters whose ``send`` is requests' own: their pool is used directly (a subclass may send otherwise)
    _PLAIN_ADAPTERS: tuple[type, ...] = (requests.adapters.HTTPAdapter,)
    # requests' own ``Session.send``: when it is replaced (requests-mock, an instrumenting library), GETs go to it
    _REAL_SEND: Any = requests.Session.send
except ImportError:  # the transport refuses to start without sushy and requests (HAS_SUSHY)
    _SESSION = object
    _PLAIN_ADAPTERS = ()
    _REAL_SEND = None

# the variables urllib.request.getproxies_environment reads for an http(s) URL (either case)
_PROXY_VARIABLES = ("http_proxy", "https_proxy", "all_proxy", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY")


def _environ_proxies(url: str) -> dict[str, str]:
    """requests' ``get_environ_proxies(url)``; on Linux, without any proxy variable set, ``{}`` without reading
    the whole environment twice (as ``getproxies_environment`` does: ~0.1 ms per BMC client, issue 27)."""
    if sys.platform.startswith("linux") and not any(os.environ.get(v) for v in _PROXY_VARIABLES):
        return {}
    return requests.utils.get_environ_proxies(url)


def connector(url: str, keep_alive: bool = False, pool_size: int = 4, **kwargs: Any) -> Any:
    """sushy's connector with connection reuse as an option and the environment read once.

    ``keep_alive``: drop sushy's ``Connection: close`` default so the session's pooled
    connections are reused (up to ``pool_size`` per BMC).  requests re-reads the proxy
    and CA-bundle environment on every request (``trust_env``); here it is read once:
    the proxies for this BMC's URL (``no_proxy`` honoured) go into the session and
    ``REQUESTS_CA_BUNDLE``/``CURL_CA_BUNDLE`` apply when ``verify`` is plain True,
    as requests would do.  The session is a :class:`.fastpath.ReuseSession` (plain GETs skip
    requests' per-request merging, :mod:`.fastpath`).
    """
    if kwargs.get("verify", True) is True:
        kwargs["verify"] = os.environ.get("REQUESTS_CA_BUNDLE") or os.environ.get("CURL_CA_BUNDLE") or True
    conn = sushy_connector.Connector(url, **kwargs)
    session = ReuseSession()
    session.headers.update(conn._session.headers)
    session.adapters.update(conn._session.adapters)  # sushy's TLS adapter, when it mounted one
    conn._session = session
    session.proxies.update(_environ_proxies(url))
    session.trust_env = False
    if keep_alive:
        session.headers.pop("Connection", None)
        adapter = requests.adapters.HTTPAdapter(pool_connections=1, pool_maxsize=max(1, int(pool_size)))
        session.mount("https://", adapter)
        session.mount("http://", adapter)
    return conn


try:
    import orjson  # optional: decodes a Redfish body ~3x faster than json
    HAS_ORJSON = True
except ImportError:
    HAS_ORJSON = False


class ReuseSession(_SESSION):
    """The connector's requests Session; a plain GET skips ``Session.request``, ``Session.send`` and the adapter.

    ``Session.request`` re-merges the session's headers, cookies, hooks and environment on every request
    (``merge_setting``, ``prepare_request``, ``merge_environment_settings``), and ``Session.send`` and
    ``HTTPAdapter.send`` look the connection pool up and re-apply the TLS settings to it on every request: most of
    the HTTP layer's CPU per BMC in the issue 27 profile.  A GET with no body, auth object, cookies, hooks, proxy,
    client certificate or redirect following (and a ``Session.send`` that is requests' own, not a test's mock)
    is prepared as requests would prepare it (the session's headers
    under the request's, a header set to None dropped, the URL requoted) and sent by :func:`direct_get` on the
    urllib3 pool of the mounted adapter, the one requests would use (same TLS verification and CA options), with
    requests' exceptions; anything else, or an adapter other than requests' own, goes through requests as before.
    Where pycurl is installed, such a request (and a JSON write: the login POST, a PATCH) goes to libcurl instead
    (:mod:`.curl`, with the same TLS verification and exceptions), the urllib3 path being the fallback.
    """

    def request(self, method: Any, url: Any, *args: Any, **kwargs: Any) -> Any:
        plain = (not args and self.auth is None and not self.cookies and kwargs.get("allow_redirects") is False
                 and set(kwargs) <= {"json", "headers", "verify", "timeout", "allow_redirects"})
        # with libcurl a JSON write (the login POST, a PATCH) is plain too; on urllib3 a DELETE without a body
        # (the logout) is sent like a GET, both encoded the same way
        curl_ok = plain and _curl.HAS_PYCURL and (method in ("GET", "DELETE") and kwargs.get("json") is None
                                                  or method in ("POST", "PATCH", "PUT"))
        simple = plain and method in ("GET", "DELETE") and kwargs.get("json") is None
        if not (simple or curl_ok):
            return super().request(method, url, *args, **kwargs)
        # requests' merge (CaseInsensitiveDict: the request's spelling wins, a None value drops the header, the
        # session's order kept) into a plain dict, without two CaseInsensitiveDicts per request
        merged = {k.lower(): (k, v) for k, v in self.headers.items()}
        for k, v in (kwargs.get("headers") or {}).items():
            merged[k.lower()] = (k, v)
        headers = {k: v for k, v in merged.values() if v is not None}
        url = requests.utils.requote_uri(url)
        verify = kwargs.get("verify")
        verify = self.verify if verify is None else verify
        direct = (not self.proxies and self.cert is None and not any(self.hooks.values())
                  and getattr(self.send, "__func__", None) is _REAL_SEND)
        # libcurl and urllib3 only under requests' own adapter (a mounted subclass, sushy's TLS adapter, sends its way)
        adapter = self.get_adapter(url) if direct else None
        own_adapter = direct and type(adapter) in _PLAIN_ADAPTERS
        if curl_ok and own_adapter:
            json_value = kwargs.get("json")
            body = None if json_value is None else _curl.json_body(json_value)
            if body is not None and not any(k.lower() == "content-type" for k in headers):
                headers["Content-Type"] = "application/json"
            return _curl.send(self, url, method, headers, kwargs.get("timeout"), verify, body=body)
        if not simple:
            return super().request(method, url, *args, **kwargs)
        # get_connection_with_tls_context is requests >= 2.32.2's: on older requests the GET goes through send
        # (an AttributeError here would read as a BMC fault on every node)
        if own_adapter and hasattr(adapter, "get_connection_with_tls_context"):
            return direct_get(self, adapter, url, headers, kwargs.get("timeout"), verify, method=method)
        return self.send(_prepared(url, headers, method), timeout=kwargs.get("timeout"), allow_redirects=False,
                         verify=verify, proxies=self.proxies, cert=self.cert, stream=False)

    def close(self) -> None:
        pool = self.__dict__.get("_curl_handles")
        if pool is not None:
            pool.close()
        super().close()


def _prepared(url: str, headers: Any, method: str = "GET") -> Any:
    """A request without a body as ``Session.prepare_request`` builds it for a requote'd ``url`` and the merged
    ``headers``."""
    prepared = requests.PreparedRequest()
    prepared.method = method
    prepared.url = url
    prepared.headers = requests.structures.CaseInsensitiveDict(headers)
    prepared.body = None
    prepared.hooks = {"response": []}
    prepared.prepare_cookies(requests.cookies.RequestsCookieJar())  # the empty jar redirects copy
    return prepared


def _pool(session: Any, adapter: Any, parts: Any, url: str, verify: Any) -> Any:
    """The adapter's urllib3 pool for this origin and ``verify``, as ``HTTPAdapter.send`` gets it
    (``get_connection_with_tls_context`` + ``cert_verify``), looked up once; again when the pool manager closed it."""
    key = (adapter, parts.scheme, parts.netloc, verify)
    cache = session.__dict__.setdefault("_direct_pools", {})
    pool = cache.get(key)
    if pool is None or pool.pool is None:  # a pool the manager evicted is closed (pool.pool None)
        prepared = _prepared(url, {})
        try:
            pool = adapter.get_connection_with_tls_context(prepared, verify, proxies={}, cert=None)
        except urllib3.exceptions.LocationValueError as exc:
            raise requests.exceptions.InvalidURL(exc, request=prepared)
        adapter.cert_verify(pool, url, verify, None)
        cache[key] = pool
    return pool


_TIMEOUTS: dict[Any, Any] = {}   # (connect, read) seconds -> urllib3 Timeout: its __init__ validates, costly per GET


def _timeout(timeout: Any) -> Any:
    if isinstance(timeout, Timeout):
        return timeout   # urllib3 clones it per request, so one object serves every request
    key = tuple(timeout) if isinstance(timeout, tuple) else (timeout, timeout)
    cached = _TIMEOUTS.get(key)
    if cached is None:
        if len(_TIMEOUTS) > 64:   # a caller that varies its timeout per request does not grow this forever
            _TIMEOUTS.clear()
        cached = _TIMEOUTS[key] = Timeout(connect=key[0], read=key[1])
    return cached


def direct_get(session: Any, adapter: Any, url: str, headers: Any, timeout: Any, verify: Any,
               method: str = "GET") -> Any:
    """GET (or a DELETE without a body: ``method``) ``url`` on ``adapter``'s urllib3 pool -> a
    ``requests.Response`` whose body is read.

    What ``Session.send`` + ``HTTPAdapter.send`` + ``Response.content`` do for a GET without proxy, client
    certificate or hooks, with the same exceptions (requests 2.32-2.34 ``HTTPAdapter.send`` and
    ``Response.iter_content``): connect and TLS failures are ``requests.exceptions.ConnectionError``/``SSLError``,
    ``ConnectTimeout`` and ``ReadTimeout`` as there, a body cut short ``ChunkedEncodingError``, a timeout while
    reading the body ``ConnectionError``.  ``timeout``: seconds, or a (connect, read) tuple of seconds.
    Cookies the server sets go into the session's jar as requests would put them.
    """
    parts = urlsplit(url)
    pool = _pool(session, adapter, parts, url, verify)
    path = (parts.path or "/") + ("?" + parts.query if parts.query else "")
    if path.startswith("//"):
        path = "/" + path.lstrip("/")
    timeout = _timeout(timeout)
    exc = requests.exceptions
    try:
        # RequestMethods.request: for a GET without fields, the pool's own send with these keywords as they are
        raw = pool.request(method, path, headers=headers, redirect=False, assert_same_host=False, preload_content=False,
                           decode_content=False, retries=adapter.max_retries, timeout=timeout, chunked=False)
    except (u3.ProtocolError, OSError) as err:
        raise exc.ConnectionError(err)
    except u3.MaxRetryError as err:
        reason = err.reason
        if isinstance(reason, u3.ConnectTimeoutError) and not isinstance(reason, u3.NewConnectionError):
            raise exc.ConnectTimeout(err)
        if isinstance(reason, u3.ResponseError):
            raise exc.RetryError(err)
        if isinstance(reason, u3.ProxyError):
            raise exc.ProxyError(err)
        if isinstance(reason, u3.SSLError):
            raise exc.SSLError(err)
        raise exc.ConnectionError(err)
    except u3.ClosedPoolError as err:
        raise exc.ConnectionError(err)
    except u3.ProxyError as err:
        raise exc.ProxyError(err)
    except u3.SSLError as err:
        raise exc.SSLError(err)
    except u3.ReadTimeoutError as err:
        raise exc.ReadTimeout(err)
    except u3.InvalidHeader as err:
        raise exc.InvalidHeader(err)
    rsp = requests.Response()
    rsp.status_code = raw.status
    rsp.headers = requests.structures.CaseInsensitiveDict(raw.headers)
    rsp.encoding = requests.utils.get_encoding_from_headers(rsp.headers)
    rsp.raw = raw
    rsp.reason = raw.reason
    rsp.url = url
    if "Set-Cookie" in rsp.headers:
        rsp.request = _prepared(url, headers, method)
        requests.cookies.extract_cookies_to_jar(session.cookies, rsp.request, raw)
    try:
        rsp._content = raw.read(decode_content=True) or b""
    except u3.ProtocolError as err:
        raise exc.ChunkedEncodingError(err)
    except u3.DecodeError as err:
        raise exc.ContentDecodingError(err)
    except u3.ReadTimeoutError as err:
        raise exc.ConnectionError(err)
    except u3.SSLError as err:
        raise exc.SSLError(err)
    rsp._content_consumed = True  # type: ignore[attr-defined]  # as Response.content leaves it
    return rsp


def decode_body(rsp: Any) -> Any:
    """A response's body -> its JSON value, or None when it is empty or not JSON: one decode per response.

    orjson on the bytes where it is installed; the json module on requests' ``text`` (the response's charset,
    undecodable bytes replaced) for what orjson refuses but json reads (NaN, integers over 64 bits, a charset
    other than UTF-8), as before.
    """
    content = rsp.content or b""
    if not content.strip():
        return None
    if HAS_ORJSON:
        try:
            return orjson.loads(content)
        except ValueError:
            pass
    try:
        return json.loads(rsp.text)
    except ValueError:
        return None
