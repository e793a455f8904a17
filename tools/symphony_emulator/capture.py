"""Serve a real capture (``../shared/fixtures/mockups/<name>``) as one BMC, read-only and byte-identical.

Capture artefacts honoured (see that folder's README):

* paginated pages stored as sibling directories named with the query string
  (``Chassis/DGX/Sensors?$skip=75/index.json`` answers ``GET .../Sensors?$skip=75``);
* ``#`` in ids stored as ``_0x23_`` (Dell ``DIMM.Socket.B4#FRU``);
* trailing-slash ids: ``/redfish/v1/Foo/`` and ``/redfish/v1/Foo`` are the same file;
* paths in any case (``/redfish/v1/chassis/1``): real BMCs match them case-insensitively;
* files outside ``redfish/v1`` (Supermicro ``/registries/...``) and plain ``*.json`` files
  (``Registries/Base.1.5.0.json``).

Only GET/HEAD read the tree.  Session login is accepted (any credentials, nothing stored) so
session-based clients work; every other write answers 405: the files are never modified.
"""

from __future__ import annotations

import json
import os
import secrets

from symphony_emulator.replies import JSON, Reply, error_body, jreply


class CaptureBMC:
    """A captured BMC tree rooted at ``directory`` (the folder that holds ``redfish/``)."""

    def __init__(self, directory):
        self.root = os.path.realpath(str(directory))
        if not os.path.isdir(os.path.join(self.root, "redfish", "v1")):
            raise FileNotFoundError("%s: no redfish/v1 tree (expected <mockup>/redfish/v1/index.json)" % self.root)
        self.hostname = os.path.basename(self.root)
        self.stats = {"GET": 0, "HEAD": 0, "POST": 0, "PATCH": 0, "PUT": 0, "DELETE": 0, "writes": 0,
                      "requests": 0}

    def reachable(self):
        return True

    def tick(self, now=None):
        return None

    def file_for(self, path, query=""):
        """The file answering ``GET path?query``, or None."""
        rel = path.strip("/")
        if not rel:
            return None
        rel = rel.replace("#", "_0x23_")
        if query:
            rel = "%s?%s" % (rel, query)
        candidate = os.path.realpath(os.path.join(self.root, rel))
        if candidate != self.root and not candidate.startswith(self.root + os.sep):
            return None   # path traversal
        if not os.path.exists(candidate):
            candidate = self._folded(rel)
            if candidate is None:
                return None
        if os.path.isdir(candidate):
            index = os.path.join(candidate, "index.json")
            return index if os.path.isfile(index) else None
        if os.path.isfile(candidate):
            return candidate
        return None

    def _folded(self, rel):
        """``rel`` matched one segment at a time without regard to case, as real BMCs answer
        (``/redfish/v1/chassis/1`` is ``Chassis/1``); None when a segment has no match or several."""
        here = self.root
        for seg in rel.split("/"):
            if not seg:
                continue   # doubled or trailing slashes
            exact = os.path.join(here, seg)
            if os.path.exists(exact):
                here = exact
                continue
            try:
                names = [n for n in os.listdir(here) if n.lower() == seg.lower()]
            except OSError:
                return None
            if len(names) != 1:
                return None
            here = os.path.join(here, names[0])
        return here

    def handle(self, method, path, query="", headers=None, body=b""):
        self.stats["requests"] += 1
        self.stats[method] = self.stats.get(method, 0) + 1
        if path.startswith("/_emulator"):
            if path.rstrip("/") == "/_emulator/stats":
                return jreply(200, self.stats)
            return jreply(200, {"hostname": self.hostname, "capture": self.root, "reachable": True})
        if method == "POST" and path.rstrip("/") == "/redfish/v1/SessionService/Sessions":
            token = secrets.token_hex(16)
            sid = token[:8]
            return jreply(201, {"@odata.id": "/redfish/v1/SessionService/Sessions/" + sid, "Id": sid,
                                "Name": "User Session"},
                          {"X-Auth-Token": token, "Location": "/redfish/v1/SessionService/Sessions/" + sid})
        if method == "DELETE" and path.rstrip("/").startswith("/redfish/v1/SessionService/Sessions/"):
            return Reply(204)
        if method not in ("GET", "HEAD"):
            self.stats["writes"] += 1
            return jreply(405, error_body("OperationNotAllowed"), {"Allow": "GET, HEAD"})
        found = self.file_for(path, query)
        if found is None and query:
            found = self.file_for(path)
        if found is None:
            if path.rstrip("/") == "/redfish":
                return jreply(200, {"v1": "/redfish/v1/"})
            return jreply(404, error_body("ResourceNotFound", "Resource", path))
        with open(found, "rb") as handle:
            data = handle.read()
        ctype = JSON
        if not found.endswith(".json"):
            try:
                json.loads(data)
            except ValueError:
                ctype = "application/octet-stream"
        return Reply(200, b"" if method == "HEAD" else data, {"Content-Type": ctype})
