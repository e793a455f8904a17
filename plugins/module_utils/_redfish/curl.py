# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""libcurl (pycurl) under the connector's plain requests: issue 27's biggest remaining controller cost.

A GET through urllib3 and http.client costs about 0.4 ms of controller CPU before its body is decoded (request
building, ``email.parser`` header parsing, ``HTTPResponse``); libcurl does the same exchange in C for about
0.05 ms (measured against the emulator, tests/bench/README.md).  :class:`.fastpath.ReuseSession` sends its plain
requests here when pycurl is installed, and gets back a ``requests.Response`` whose body is read, with requests'
exception classes, so sushy and the transport see what they saw through requests.

What stays the same as requests (requests 2.32 ``HTTPAdapter.send``):

* TLS: verified against the same CA (``verify``: True -> requests' bundle ``DEFAULT_CA_BUNDLE_PATH``; a file ->
  that bundle only; a directory -> that hashed CA directory only; False -> not verified), host name checked.
  libcurl's compiled-in CA locations are unset, so a CA the user did not give is never trusted.
* HTTP/1.1, no redirects followed, no proxy (the session's proxies, read from the environment once by the
  connector, send a request through requests instead), the session's cookies sent by requests (a session with
  cookies never reaches this module); a ``Set-Cookie`` answer lands in the session's jar.
* The headers as given (``Accept-Encoding`` is handed to libcurl, which decodes what it names); a JSON body
  encoded as requests encodes it (``allow_nan=False``, UTF-8, ``Content-Type: application/json``).
* Errors: a name that does not resolve, a refused connection and a connect timeout are :class:`NotSent` (a
  ``requests.exceptions.ConnectionError``; ``ConnectTimeout`` for the timeout): the request never reached the
  BMC, so even a POST may be sent again; a certificate the controller does not trust is ``SSLError`` (libcurl
  error 60: "SSL certificate problem: ..."); a read timeout ``ReadTimeout``; a body cut short
  ``ChunkedEncodingError``; anything else ``ConnectionError`` naming the libcurl error.

One difference: requests' read timeout bounds each socket read; libcurl's stall timer (``LOW_SPEED_TIME``,
libcurl docs "CURLOPT_LOW_SPEED_TIME") counts whole seconds, so a read timeout is rounded up to the next second
(at least 1 s).  The connect timeout covers the TCP connect and the TLS handshake, as urllib3's does.

Handles are kept per session (one session per BMC) and reused, so each keeps its connection to the BMC alive
(TLS session included); the transport's semaphore caps how many are in use at once (``max_concurrency``).
"""

from __future__ import annotations

import collections
import datetime
import io
import json
import math
import os
import threading
from typing import Any, Optional

try:
    import pycurl
    HAS_PYCURL = True
except ImportError:  # optional: without it the plain requests go to urllib3 (fastpath.direct_get)
    HAS_PYCURL = False

try:
    import requests
    _ConnectionError: Any = requests.exceptions.ConnectionError
    _ConnectTimeout: Any = requests.exceptions.ConnectTimeout
    _Response: Any = requests.Response
except ImportError:  # the transport refuses to start without sushy and requests (HAS_SUSHY)
    _ConnectionError = OSError
    _ConnectTimeout = TimeoutError   # an OSError too: the classes below keep a consistent MRO
    _Response = object

_NO_TIME = datetime.timedelta(0)


class NotSent(_ConnectionError):
    """The request never reached the BMC: its name did not resolve, or the connection was refused."""


class ConnectTimeoutNotSent(_ConnectTimeout, NotSent):
    """The TCP connect or the TLS handshake did not finish in the connect timeout: nothing was sent."""


# libcurl error codes (libcurl-errors(3)); pycurl names them E_*
_RESOLVE, _CONNECT, _PARTIAL, _TIMEOUT, _TLS_CONNECT, _PEER_VERIFY, _GOT_NOTHING, _SEND, _RECV, _DECODING, \
    _CA_FILE, _URL = 6, 7, 18, 28, 35, 60, 52, 55, 56, 61, 77, 3
_BODY_METHODS = ("POST", "PATCH", "PUT")


class _Handles:
    """A session's idle libcurl handles, by (origin, verify); each keeps its own connection alive."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.idle: dict[tuple[str, Any], list[Any]] = {}

    def take(self, key: tuple[str, Any]) -> Any:
        with self.lock:
            free = self.idle.get(key)
            if free:
                return free.pop()
        return _new_handle(key[1])

    def give(self, key: tuple[str, Any], handle: Any) -> None:
        with self.lock:
            self.idle.setdefault(key, []).append(handle)

    def close(self) -> None:
        with self.lock:
            handles = [h for free in self.idle.values() for h in free]
            self.idle.clear()
        for handle in handles:
            handle.close()


def _new_handle(verify: Any) -> Any:
    handle = pycurl.Curl()
    handle.setopt(pycurl.NOSIGNAL, 1)          # timeouts without SIGALRM: the stage runs many threads
    handle.setopt(pycurl.PROTOCOLS, pycurl.PROTO_HTTP | pycurl.PROTO_HTTPS)
    handle.setopt(pycurl.HTTP_VERSION, pycurl.CURL_HTTP_VERSION_1_1)
    handle.setopt(pycurl.PROXY, "")            # never the environment's proxy: the connector decided (module doc)
    handle.setopt(pycurl.FOLLOWLOCATION, 0)
    handle.unsetopt(pycurl.CAINFO)             # libcurl's compiled-in CA locations are not the user's
    handle.unsetopt(pycurl.CAPATH)
    if verify is False:
        handle.setopt(pycurl.SSL_VERIFYPEER, 0)
        handle.setopt(pycurl.SSL_VERIFYHOST, 0)
    else:
        where = requests.utils.DEFAULT_CA_BUNDLE_PATH if verify is True else str(verify)
        handle.setopt(pycurl.SSL_VERIFYPEER, 1)
        handle.setopt(pycurl.SSL_VERIFYHOST, 2)
        handle.setopt(pycurl.CAPATH if os.path.isdir(where) else pycurl.CAINFO, where)
    return handle


def handles(session: Any) -> _Handles:
    """The session's handle pool (made on first use)."""
    pool = session.__dict__.get("_curl_handles")
    if pool is None:
        pool = session.__dict__.setdefault("_curl_handles", _Handles())
    return pool


def json_body(value: Any) -> bytes:
    """A request's ``json=`` value as requests encodes it (``PreparedRequest.prepare_body``).

    Raises ``requests.exceptions.InvalidJSONError`` for NaN/Infinity, as requests does."""
    try:
        return json.dumps(value, allow_nan=False).encode("utf-8")
    except ValueError as exc:
        raise requests.exceptions.InvalidJSONError(exc)


def send(session: Any, url: str, method: str, headers: dict[str, str], timeout: Any, verify: Any,
         body: Optional[bytes] = None) -> Any:
    """Send one request with libcurl -> a ``requests.Response`` with its body read (module docstring).

    ``url``: requoted absolute URL; ``headers``: the merged headers (None values already dropped); ``timeout``:
    seconds or a (connect, read) tuple of seconds, None for none; ``body``: bytes for POST/PATCH/PUT (None: an
    empty body).  Raises requests' exceptions (module docstring).
    """
    key = (url[:url.find("/", url.find("//") + 2)] if url.count("/") > 2 else url, verify)
    pool = handles(session)
    handle = pool.take(key)
    out = io.BytesIO()
    lines: list[bytes] = []
    sent = _configure(handle, url, method, headers, timeout, body)
    handle.setopt(pycurl.WRITEFUNCTION, out.write)
    handle.setopt(pycurl.HEADERFUNCTION, lines.append)   # C-level callbacks: no Python frame per line or chunk
    try:
        handle.perform()
    except pycurl.error as err:
        code, text = (err.args + (0, ""))[:2]
        mapped = _exception(handle, int(code), str(text), url)
        handle.close()  # a handle after an error may hold a half-read connection: never reused
        raise mapped from None
    status = handle.getinfo(pycurl.RESPONSE_CODE)
    pool.give(key, handle)
    return _response(session, url, method, status, lines, out.getvalue(), sent)


def _configure(handle: Any, url: str, method: str, headers: dict[str, str], timeout: Any,
               body: Optional[bytes]) -> list[str]:
    """Set ``handle`` up for one request; what the previous request on it set alike is not set again."""
    handle.setopt(pycurl.URL, url)
    sent = []
    encoding = None
    for name, value in headers.items():
        if name.lower() == "accept-encoding":
            encoding = value
            continue
        if "\n" in value or "\r" in value or "\n" in name or "\r" in name:
            # requests and http.client refuse these too: libcurl would send them, splitting the header
            raise requests.exceptions.InvalidHeader("header %r: a line break in a header name or value" % name)
        sent.append("%s: %s" % (name, value) if value != "" else "%s;" % name)
    if method in _BODY_METHODS:
        if not any(k.lower() == "content-type" for k in headers):
            sent.append("Content-Type:")   # libcurl's form-encoded default is not what requests sends
        sent.append("Expect:")             # no 100-continue round trip on larger bodies (requests sends none)
    state = (method, tuple(sent), encoding, timeout)
    if getattr(handle, "last", None) == state and method not in _BODY_METHODS:
        return sent                        # a GET like the one before (the audit's usual case)
    handle.setopt(pycurl.HTTPGET, 1)       # resets a POST left from this handle's previous request
    if method in ("GET", "POST"):          # POST: POSTFIELDS below selects it
        handle.unsetopt(pycurl.CUSTOMREQUEST)
    else:
        handle.setopt(pycurl.CUSTOMREQUEST, method)
    if method in _BODY_METHODS:
        handle.setopt(pycurl.POSTFIELDS, body or b"")
    if encoding is None:
        handle.unsetopt(pycurl.ACCEPT_ENCODING)
    else:
        handle.setopt(pycurl.ACCEPT_ENCODING, encoding)
    handle.setopt(pycurl.HTTPHEADER, sent)
    connect, read = timeout if isinstance(timeout, tuple) else (timeout, timeout)
    handle.setopt(pycurl.CONNECTTIMEOUT_MS, 0 if connect is None else max(1, int(float(connect) * 1000)))
    if read is None:
        handle.setopt(pycurl.LOW_SPEED_LIMIT, 0)
        handle.setopt(pycurl.LOW_SPEED_TIME, 0)
    else:
        handle.setopt(pycurl.LOW_SPEED_LIMIT, 1)
        handle.setopt(pycurl.LOW_SPEED_TIME, max(1, int(math.ceil(float(read)))))
    handle.last = state
    return sent


def _exception(handle: Any, code: int, text: str, url: str) -> Exception:
    exc = requests.exceptions
    errno = handle.getinfo(pycurl.OS_ERRNO)
    # the operating system's words ("Connection refused", "No route to host") tell refused from unreachable
    cause = ": %s" % os.strerror(errno) if errno and os.strerror(errno) not in text else ""
    what = "%s%s (libcurl error %d, %s)" % (text, cause, code, url)
    if code in (_GOT_NOTHING, _SEND, _RECV):
        # http.client says RemoteDisconnected or "Connection reset" here, words Session.open's wait for a BMC still
        # rebooting looks for; libcurl says "Empty reply" or an OpenSSL "unexpected eof"
        what = "the BMC closed or reset the connection: " + what
    if code in (_RESOLVE, _CONNECT):
        return NotSent(what)
    if code == _TIMEOUT:
        # only a new connection that never finished its TCP connect or TLS handshake sent nothing; a kept-alive one
        # (no new connection made: its connect and handshake times read 0) had the request sent on it
        reused = handle.getinfo(pycurl.NUM_CONNECTS) == 0
        connected = reused or handle.getinfo(pycurl.APPCONNECT_TIME if url.startswith("https:")
                                             else pycurl.CONNECT_TIME) > 0
        return exc.ReadTimeout(what) if connected else ConnectTimeoutNotSent(what)
    if code in (_PEER_VERIFY, _TLS_CONNECT, _CA_FILE):
        return exc.SSLError(what)
    if code == _PARTIAL:
        return exc.ChunkedEncodingError(what)
    if code == _DECODING:
        return exc.ContentDecodingError(what)
    if code == _URL:
        return exc.InvalidURL(what)
    return exc.ConnectionError(what)


class CurlResponse(_Response):
    """A ``requests.Response`` built without ``Response.__init__``, whose cookie jar (an RLock and a cookie policy
    per response: ~10% of the audit's CPU per BMC, issue 27) is made when first read; the same attributes."""

    def __init__(self, status: int, headers: Any, reason: str, url: str, content: bytes) -> None:
        # pylint: disable=super-init-not-called
        self._content = content
        self._content_consumed = True
        self._next = None
        self.status_code = status
        self.headers = headers
        self.raw = None
        self.url = url
        self.encoding = requests.utils.get_encoding_from_headers(headers)
        self.history: list[Any] = []
        self.reason = reason
        self.elapsed = _NO_TIME
        self.request = None

    @property
    def cookies(self) -> Any:
        jar = self.__dict__.get("_cookie_jar")
        if jar is None:
            jar = self.__dict__["_cookie_jar"] = requests.cookies.cookiejar_from_dict({})
        return jar

    @cookies.setter
    def cookies(self, jar: Any) -> None:
        self.__dict__["_cookie_jar"] = jar


def _response(session: Any, url: str, method: str, status: int, lines: list[bytes], content: bytes,
              sent: list[str]) -> Any:
    start = 0
    for i, raw in enumerate(lines):
        if raw.startswith(b"HTTP/"):
            start = i          # an interim 100 Continue's headers are not the response's
    reason = ""
    store: Any = collections.OrderedDict()   # CaseInsensitiveDict's own store: lower name -> (name, value)
    last = None
    for raw in lines[start:]:
        line = raw.decode("iso-8859-1").rstrip("\r\n")   # http.client's header charset
        if not line:
            continue
        if line.startswith("HTTP/"):
            parts = line.split(" ", 2)
            reason = parts[2] if len(parts) > 2 else ""
        elif line[0] in " \t" and last is not None:        # obsolete line folding (RFC 9112 section 5.2)
            store[last] = (store[last][0], store[last][1] + " " + line.strip())
        elif ":" in line:
            name, _sep, value = line.partition(":")
            name, value, last = name.strip(), value.strip(), name.strip().lower()
            # repeated fields joined as urllib3's HTTPHeaderDict joins them
            store[last] = (store[last][0], store[last][1] + ", " + value) if last in store else (name, value)
    headers: Any = requests.structures.CaseInsensitiveDict()
    headers._store = store   # the dict it would build from these pairs, built once here
    rsp = CurlResponse(status, headers, reason, url, content)
    if "set-cookie" in store:
        _cookies(session, rsp, url, method, lines[start:], sent)
    return rsp


def _cookies(session: Any, rsp: Any, url: str, method: str, lines: list[bytes], sent: list[str]) -> None:
    """Put the answer's cookies into the session's jar and the response's, as requests does
    (``extract_cookies_to_jar``)."""
    import email.message
    msg = email.message.Message()
    for raw in lines:
        name, sep, value = raw.decode("iso-8859-1").partition(":")
        if sep and not name.startswith("HTTP/"):
            msg[name.strip()] = value.strip()
    request = requests.Request(method, url, headers=dict(h.split(": ", 1) for h in sent if ": " in h)).prepare()
    for jar in (session.cookies, rsp.cookies):
        jar.extract_cookies(requests.cookies.MockResponse(msg), requests.cookies.MockRequest(request))
