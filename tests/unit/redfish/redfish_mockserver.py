"""Serve a captured BMC tree from ../shared/fixtures/mockups through requests-mock.

``MockupBMC(root, base_url)`` maps ``GET <path>[?query]`` to ``<root>/<path>[?query]/index.json``
with the capture artefacts of mockups/README.md: query-string page directories
(``Sensors?$skip=75``), ``#`` stored as ``_0x23_``, trailing slashes.  A query the capture
does not hold (``$expand=...``) is answered with the plain resource, as a service that
ignores the query would.  Sessions: ``POST`` to the Sessions collection creates one
(X-Auth-Token + Location), ``DELETE`` removes it; every other request needs the token or
Basic credentials.  ``overrides`` maps ``(method, path)`` to a callable or a list of
``(status, headers, body)`` answers served in turn (the last repeats), for fault cases.
"""

import base64
import json
import os
import threading
from urllib.parse import unquote, urlsplit

import requests_mock

BASE = "https://bmc.test"
_LINK_KEYS = frozenset(["@odata.id", "@odata.type", "@odata.etag"])


class MockupBMC:
    def __init__(self, root=None, base_url=BASE, username="admin", password="s3cr3t-Passw0rd",
                 sessions=True, honour_expand=True, expand_excerpt=None):
        self.root = str(root) if root else None
        self.base_url = base_url
        self.username = username
        self.password = password
        self.sessions_enabled = sessions
        self.honour_expand = honour_expand
        # keys an expanded member keeps (a BMC whose $expand inlines excerpts, not resources); None: all
        self.expand_excerpt = expand_excerpt
        self.sessions = {}
        self.deleted = []
        self.log = []  # (method, path_with_query, headers)
        self.overrides = {}
        self._n = 0
        self._lock = threading.Lock()

    # --------------------------------------------------------------- plumbing
    def __enter__(self):
        self.mocker = requests_mock.Mocker()
        self.mocker.__enter__()
        self.mocker.add_matcher(self._match)
        return self

    def __exit__(self, *exc):
        self.mocker.__exit__(*exc)

    def set(self, method, path, *answers):
        """Script answers for ``method path`` (path may include a query); the last one repeats."""
        self.overrides[(method.upper(), path)] = list(answers)

    def requests(self, method=None, path=None):
        return [r for r in self.log if (method is None or r[0] == method) and (path is None or r[1] == path)]

    def _resp(self, request, status, headers=None, body=None):
        from requests_mock.response import create_response
        headers = dict(headers or {})
        if isinstance(body, (dict, list)):
            text = json.dumps(body)
            headers.setdefault("Content-Type", "application/json")
        else:
            text = body or ""
        return create_response(request, status_code=status, headers=headers, text=text)

    def _authorised(self, request):
        token = request.headers.get("X-Auth-Token")
        if token and token in self.sessions:
            return True
        auth = request.headers.get("Authorization", "")
        if auth.startswith("Basic "):
            user, _sep, pw = base64.b64decode(auth[6:]).decode().partition(":")
            return user == self.username and pw == self.password
        return False

    def _match(self, request):
        parts = urlsplit(request.url)
        path = unquote(parts.path)
        query = unquote(parts.query)
        full = path + ("?" + query if query else "")
        with self._lock:
            self.log.append((request.method, full, dict(request.headers)))
        for key in ((request.method, full), (request.method, path)):
            if key in self.overrides:
                answers = self.overrides[key]
                ans = answers.pop(0) if len(answers) > 1 else answers[0]
                if callable(ans):
                    ans = ans(request)
                    if ans is None:
                        break
                if isinstance(ans, BaseException) or (isinstance(ans, type) and issubclass(ans, BaseException)):
                    raise ans
                status, headers, body = ans
                return self._resp(request, status, headers, body)
        norm = path.rstrip("/") or "/"
        if request.method == "POST" and norm == "/redfish/v1/SessionService/Sessions":
            if not self.sessions_enabled:
                return self._resp(request, 405, {}, {"error": {"code": "Base.1.8.GeneralError"}})
            body = json.loads(request.body or b"{}")
            if body.get("UserName") != self.username or body.get("Password") != self.password:
                return self._resp(request, 401, {}, {"error": {"@Message.ExtendedInfo": [
                    {"MessageId": "Base.1.8.NoValidSession"}]}})
            with self._lock:
                self._n += 1
                sid = str(self._n)
            token = "tok-%s" % sid
            loc = "/redfish/v1/SessionService/Sessions/%s" % sid
            self.sessions[token] = loc
            return self._resp(request, 201, {"X-Auth-Token": token, "Location": loc},
                              {"@odata.id": loc, "Id": sid, "UserName": self.username})
        if norm != "/redfish/v1" and not self._authorised(request):
            return self._resp(request, 401, {"Content-Type": "text/html", "WWW-Authenticate": "Basic"}, "")
        if request.method == "DELETE" and norm.startswith("/redfish/v1/SessionService/Sessions/"):
            for tok, loc in list(self.sessions.items()):
                if loc == norm:
                    del self.sessions[tok]
                    self.deleted.append(loc)
                    return self._resp(request, 204)
            return self._resp(request, 404)
        if request.method != "GET":
            return self._resp(request, 405, {}, {"error": {"code": "Base.1.8.GeneralError"}})
        fpath = self.file_for(path, query)
        if fpath is None:
            return self._resp(request, 404, {}, {"error": {"@Message.ExtendedInfo": [
                {"MessageId": "Base.1.8.ResourceMissingAtURI", "MessageArgs": [path]}]}})
        with open(fpath, encoding="utf-8") as fh:
            text = fh.read()
        if self.honour_expand and "$expand" in query:
            body = json.loads(text)
            if isinstance(body.get("Members"), list):
                inlined = []
                for m in body["Members"]:
                    # a member the collection already holds whole stays as captured, as a service answers it
                    mf = self.file_for(m.get("@odata.id", "")) if set(m) <= _LINK_KEYS else None
                    if mf:
                        with open(mf, encoding="utf-8") as fh:
                            m = json.load(fh)
                    if mf and self.expand_excerpt is not None:
                        m = {k: v for k, v in m.items() if k in self.expand_excerpt or k in _LINK_KEYS}
                    inlined.append(m)
                body["Members"] = inlined
                text = json.dumps(body)
        return self._resp(request, 200, {"Content-Type": "application/json"}, text)

    def file_for(self, path, query=""):
        if not self.root:
            return None
        rel = path.strip("/").replace("#", "_0x23_")
        candidates = []
        if query:
            candidates.append(os.path.join(self.root, rel + "?" + query))
            # keep only the capture's own paging ($skip), drop $expand/$select etc.
            kept = "&".join(p for p in query.split("&") if p.startswith("$skip") or p.startswith("$top"))
            if kept and kept != query:
                candidates.append(os.path.join(self.root, rel + "?" + kept))
        candidates.append(os.path.join(self.root, rel))
        for c in candidates:
            if os.path.isfile(os.path.join(c, "index.json")):
                return os.path.join(c, "index.json")
            if os.path.isfile(c):
                return c
        return None


def mockup_root(mockups, name):
    return mockups / name
