# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The transport's per-request CPU savings (issue 27 profile, tests/bench/README.md): the connector's session,
whose plain GETs skip requests' per-request merging, and one JSON decode per response body.

Used by :mod:`.transport` only (``_connector`` and ``_wrap_response``).
"""

from __future__ import annotations

import json
from typing import Any

try:
    import requests
    _SESSION: Any = requests.Session
except ImportError:  # the transport refuses to start without sushy and requests (HAS_SUSHY)
    _SESSION = object

try:
    import orjson  # optional: decodes a Redfish body ~3x faster than json
    HAS_ORJSON = True
except ImportError:
    HAS_ORJSON = False


class ReuseSession(_SESSION):
    """The connector's requests Session; a plain GET skips ``Session.request``.

    ``Session.request`` re-merges the session's headers, cookies, hooks and environment on every request
    (``merge_setting``, ``prepare_request``, ``merge_environment_settings``): a quarter of the controller's
    CPU per BMC in the issue 27 profile.  A GET with no body, auth object, cookies or redirect following is
    prepared as requests would prepare it (the session's headers under the request's, a header set to None
    dropped, the URL requoted) and handed to ``Session.send``, so adapters, TLS, proxies, timeouts, cookies
    and requests' exceptions are the same.  Everything else goes through ``Session.request`` as before.
    """

    def request(self, method: Any, url: Any, *args: Any, **kwargs: Any) -> Any:
        simple = (method == "GET" and not args and self.auth is None and not self.cookies
                  and kwargs.get("allow_redirects") is False and kwargs.get("json") is None
                  and set(kwargs) <= {"json", "headers", "verify", "timeout", "allow_redirects"})
        if not simple:
            return super().request(method, url, *args, **kwargs)
        headers = requests.structures.CaseInsensitiveDict(self.headers)
        headers.update(kwargs.get("headers") or {})
        prepared = requests.PreparedRequest()
        prepared.method = "GET"
        prepared.url = requests.utils.requote_uri(url)
        prepared.headers = requests.structures.CaseInsensitiveDict(
            (k, v) for k, v in headers.items() if v is not None)
        prepared.body = None
        prepared.hooks = {"response": []}
        prepared.prepare_cookies(requests.cookies.RequestsCookieJar())  # the empty jar redirects copy
        verify = kwargs.get("verify")
        return self.send(prepared, timeout=kwargs.get("timeout"), allow_redirects=False,
                         verify=self.verify if verify is None else verify, proxies=self.proxies, cert=self.cert,
                         stream=False)


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
