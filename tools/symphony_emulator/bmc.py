"""One emulated BMC: state, Redfish request handling, defects and faults.

:class:`BMC` knows nothing about sockets: ``handle(method, path, query, headers, body)``
returns a :class:`Reply` (status, headers, body bytes, plus ``delay`` seconds and ``abort``
for the server to apply).  That keeps every behaviour unit-testable without a network and
lets one event loop serve thousands of BMCs.

Time comes from an injectable monotonic ``clock``; timed events (task completion, BMC
reboot, host boot) run when due, at the next request or ``tick()``.
"""

from __future__ import annotations

import base64
import copy
import email.parser
import email.policy
import hashlib
import heapq
import json
import random
import re
import secrets
import time
from datetime import datetime, timezone
from urllib.parse import parse_qs, urlparse

from ansible_collections.symphony.cluster.plugins.module_utils._core.errors import ValidationError

from symphony_emulator import tree
from symphony_emulator.config import check_fault_values, faults_for

ROOT = tree.ROOT
JSON = "application/json"
BASE = "Base.1.22"
UPDATE = "Update.1.3"
DEMO_IMAGE_PREFIX = "symphony-demo-image"
_IMAGE_PATH = re.compile(r"/(?P<component>[a-z0-9][a-z0-9_]*)/(?P<version>[^/]+)/image\.bin$")

BASE_MESSAGES = {
    "GeneralError": "A general error has occurred.  See Resolution for information on how to resolve the error.",
    "PropertyUnknown": "The property %1 is not in the list of valid properties for the resource.",
    "PropertyValueNotInList": "The value '%1' for the property %2 is not in the list of acceptable values.",
    "PropertyValueTypeError": "The value '%1' for the property %2 is not a type that the property can accept.",
    "PropertyNotWritable": "The property %1 is a read-only property and cannot be assigned a value.",
    "PropertyMissing": "The property %1 is a required property and must be included in the request.",
    "ActionParameterMissing": "The action %1 requires the parameter %2 to be present in the request body.",
    "ActionParameterValueNotInList": "The value '%1' for the parameter %2 in the action %3 is not in the list of "
                                     "acceptable values.",
    "ActionParameterValueError": "The value for the parameter %1 in the action %2 is invalid.",
    "ActionNotSupported": "The action %1 is not supported by the resource.",
    "MalformedJSON": "The request body submitted was malformed JSON and could not be parsed by the receiving service.",
    "ResourceNotFound": "The requested resource of type %1 named '%2' was not found.",
    "ResourceInUse": "The change to the requested resource failed because the resource is in use or in transition.",
    "NoValidSession": "There is no valid session established with the implementation.",
    "SessionLimitExceeded": "The session establishment failed due to the number of simultaneous sessions exceeding "
                            "the limit of the implementation.",
    "PreconditionRequired": "A precondition header or annotation is required to change the resource.",
    "PreconditionFailed": "The ETag supplied did not match the ETag required to change this resource.",
    "OperationNotAllowed": "The HTTP method is not allowed on this resource.",
    "ServiceTemporarilyUnavailable": "The service is temporarily unavailable.  Retry in %1 seconds.",
    "MissingOrMalformedPart": "The multipart request did not contain all required parts or contained malformed "
                              "parts.",
    "QueryParameterOutOfRange": "The value '%1' for the query parameter %2 is out of range %3.",
    "QueryParameterValueFormatError": "The value '%1' for the parameter %2 is not a format that the parameter can "
                                      "accept.",
}
# $expand=<*|.|~>[($levels=n)] (DSP0266 "Query parameters", $expand)
_EXPAND = re.compile(r"^(?P<kind>[*.~])(?:\(\$levels=(?P<levels>\d+)\))?$")
_LINK_KEYS = frozenset(["@odata.id", "@odata.type", "@odata.etag"])


def _fill(template, args):
    for n, arg in enumerate(args, 1):
        template = template.replace("%%%d" % n, str(arg))
    return template


def error_body(message_id, *args, related=None, severity="Critical"):
    """A Redfish error payload with one ``@Message.ExtendedInfo`` entry (DSP0266 §9.6)."""
    info = {"MessageId": "%s.%s" % (BASE, message_id), "Message": _fill(BASE_MESSAGES.get(message_id, message_id),
                                                                          args),
            "MessageArgs": [str(a) for a in args], "MessageSeverity": severity, "Resolution": "None."}
    if related:
        info["RelatedProperties"] = list(related)
    return {"error": {"code": "%s.%s" % (BASE, message_id), "message": info["Message"],
                      "@Message.ExtendedInfo": [info]}}


def demo_image_bytes(sku, component, version):
    """The bytes whose sha256 is a demo firmware image's checksum (see README: image rule)."""
    return ("%s:%s:%s:%s" % (DEMO_IMAGE_PREFIX, sku, component, version)).encode()


def now_iso(wall=None):
    return datetime.fromtimestamp(wall if wall is not None else time.time(), timezone.utc).strftime(
        "%Y-%m-%dT%H:%M:%S+00:00")


class Reply:
    """What the server sends back: ``status``, ``headers``, ``body`` (bytes), ``delay`` (s), ``abort``."""

    __slots__ = ("status", "headers", "body", "delay", "abort")

    def __init__(self, status=200, body=b"", headers=None, delay=0.0, abort=False):
        self.status = status
        self.body = body
        self.headers = headers if headers is not None else {"Content-Type": JSON}
        self.delay = delay
        self.abort = abort

    def json(self):
        return json.loads(self.body.decode()) if self.body else None


def jreply(status, payload, headers=None):
    h = {"Content-Type": JSON}
    if headers:
        h.update(headers)
    return Reply(status, json.dumps(payload).encode(), h)


class State:
    """Mutable state of one BMC; the tree is a pure function of it."""

    def __init__(self, spec, faults):
        self.faults = faults
        self.power = "On"
        self.boot = {"enabled": "Disabled", "target": "None"}
        self.bios = spec.initial_bios()
        self.bios_pending = {}
        self.versions = spec.initial_versions()
        self.staged = {}
        self.virtual_media = {"image": None, "inserted": False, "protocol": None}
        self.sel = []
        self.boot_state = {"state": "disk", "image": None, "target": "Hdd", "boots": 0}


class BMC:
    """One generated BMC.

    ``spec``: :class:`tree.Spec`; ``username``/``password``: what the BMC accepts (the map file
    may say otherwise for a ``wrong_credentials`` defect); ``faults``: ``{host|"*": {...}}``.
    """

    def __init__(self, spec, username, password, faults=None, clock=time.monotonic, wall=time.time):
        self.spec = spec
        self.hostname = spec.node["hostname"]
        self.username = username
        self.password = password
        self._clock = clock
        self._wall = wall
        self._fault_overrides = {}
        self._faults_source = faults or {}
        eff = faults_for(self._faults_source, self.hostname)
        self.state = State(spec, eff)
        self.rng = random.Random(eff["seed"] if eff["seed"] is not None else self.hostname)
        self._basic = "Basic " + base64.b64encode(("%s:%s" % (username, password)).encode()).decode()
        self._tree = None
        self._cache = {}
        self._events = []
        self._seq = 0
        self.sessions = {}
        self._session_seq = 0
        self.tasks = {}
        self._task_seq = 0
        self.down_until = 0.0
        self.warm_until = 0.0
        self.on_schedule = None   # server hook: called with (bmc, due) when an event is queued
        self.reset_stats()
        self._seed_sel()

    # ------------------------------------------------------------------ state helpers
    @property
    def faults(self):
        return self.state.faults

    def set_faults(self, values):
        """Replace this node's fault overrides (validated); returns the effective faults."""
        check_fault_values(values, "faults for %s" % self.hostname)
        self._fault_overrides = dict(values)
        eff = faults_for(self._faults_source, self.hostname)
        eff.update(self._fault_overrides)
        self.state.faults = eff
        if "seed" in values:
            self.rng = random.Random(values["seed"])
        self.invalidate()
        return dict(eff)

    def reset_stats(self):
        self.stats = {"GET": 0, "HEAD": 0, "POST": 0, "PATCH": 0, "PUT": 0, "DELETE": 0, "writes": 0,
                      "requests": 0, "injected_errors": 0, "injected_resets": 0, "injected_malformed": 0,
                      "write_log": []}

    def invalidate(self):
        self._tree = None
        self._cache = {}

    @property
    def tree(self):
        if self._tree is None:
            self._tree = tree.build_tree(self.spec, self.state)
        return self._tree

    def _seed_sel(self):
        w = self._wall()
        self._add_sel("OK", "Event Log Cleared", "Event Logging Disabled", w - 86400)
        self._add_sel("OK", "System ACPI Power State: S0/G0 working", "System ACPI PowerState", w - 3600)
        for d in self.spec.by_kind.get("sel_critical", []):
            self._add_sel("Critical", d["message"], "Critical Interrupt", w - 600)

    def _add_sel(self, severity, message, sensor_type, when=None):
        n = len(self.state.sel) + 1
        self.state.sel.append({"Id": str(n), "Name": "SEL entry %d" % n, "Severity": severity, "Message": message,
                               "SensorType": sensor_type, "EntryCode": "Assert",
                               "Created": now_iso(when if when is not None else self._wall())})
        self.invalidate()

    def schedule(self, delay, fn):
        """Run ``fn(due)`` once ``delay`` seconds have passed (at the next request or tick)."""
        due = self._clock() + max(delay, 0.0)
        self._seq += 1
        heapq.heappush(self._events, (due, self._seq, fn))
        if self.on_schedule is not None:
            self.on_schedule(self, due)

    def tick(self, now=None):
        """Run every timed event that is due; returns the next due time or None."""
        now = self._clock() if now is None else now
        while self._events and self._events[0][0] <= now:
            due, _, fn = heapq.heappop(self._events)
            fn(due)
        return self._events[0][0] if self._events else None

    def reachable(self):
        """False while the BMC is rebooting (connections are reset), or for a ``bmc_unreachable`` defect."""
        if self.spec.defect("bmc_unreachable"):
            return False
        return self._clock() >= self.down_until

    # ------------------------------------------------------------------ entry point
    def handle(self, method, path, query="", headers=None, body=b""):
        """Answer one HTTP request.  ``headers`` is a case-insensitive mapping (or dict)."""
        headers = headers or {}
        if path.startswith("/_emulator"):
            return self._control(method, path, body)
        self.tick()
        if not self.reachable():
            return Reply(0, abort=True)
        faults = self.state.faults
        delay = 0.0
        if faults["latency_ms"] or faults["latency_jitter_ms"]:
            delay = (faults["latency_ms"] + self.rng.uniform(0, faults["latency_jitter_ms"])) / 1000.0
        if faults["reset_rate"] and self.rng.random() < faults["reset_rate"]:
            self.stats["injected_resets"] += 1
            return Reply(0, abort=True, delay=delay)
        if self._clock() < self.warm_until:
            r = jreply(503, error_body("ServiceTemporarilyUnavailable", int(self.warm_until - self._clock()) + 1),
                       {"Retry-After": str(int(self.warm_until - self._clock()) + 1)})
            r.delay = delay
            return r
        if faults["error_rate"] and self.rng.random() < faults["error_rate"]:
            self.stats["injected_errors"] += 1
            return Reply(500, b"<html><body><h1>500 - Internal Server Error</h1></body></html>",
                         {"Content-Type": "text/html"}, delay=delay)
        reply = self._redfish(method, path, query, headers, body)
        reply.delay += delay
        if (faults["malformed_json_rate"] and reply.body and reply.headers.get("Content-Type") == JSON
                and self.rng.random() < faults["malformed_json_rate"]):
            self.stats["injected_malformed"] += 1
            reply.body = reply.body[: max(1, len(reply.body) // 2)]
        return reply

    # ------------------------------------------------------------------ control endpoint
    def _control(self, method, path, body):
        self.tick()
        sub = path[len("/_emulator"):].strip("/")
        if sub == "stats" and method == "GET":
            return jreply(200, self.stats)
        if sub == "stats" and method == "DELETE":
            self.reset_stats()
            return jreply(200, self.stats)
        if sub == "state" and method == "GET":
            return jreply(200, self.describe())
        if sub == "faults" and method == "GET":
            return jreply(200, self.state.faults)
        if sub == "faults" and method in ("PUT", "POST"):
            try:
                values = json.loads(body or b"{}")
                return jreply(200, self.set_faults(values))
            except (ValueError, ValidationError) as exc:   # bad JSON or a value outside the faults schema
                return jreply(400, {"error": str(exc)})
        return jreply(404, {"error": "unknown control endpoint %s %s" % (method, path)})

    def describe(self):
        """A plain dict of everything tests and rehearsals may want to observe."""
        self.tick()
        s = self.state
        return {
            "hostname": self.hostname, "sku": self.spec.sku["sku"], "power": s.power,
            "boot_state": dict(s.boot_state), "boot_override": dict(s.boot),
            "virtual_media": dict(s.virtual_media), "firmware": dict(s.versions), "staged_firmware": dict(s.staged),
            "bios": {"current": dict(s.bios), "pending": dict(s.bios_pending)},
            "tasks": [self._task_summary(t) for t in self.tasks.values()],
            "sessions": len(self.sessions), "reachable": self.reachable(),
            "rebooting_for_s": max(0.0, round(self.down_until - self._clock(), 3)),
            "defects": copy.deepcopy(self.spec.defects), "faults": dict(s.faults),
            "sel_entries": len(s.sel),
        }

    # ------------------------------------------------------------------ Redfish
    def _redfish(self, method, path, query, headers, body):
        if len(path) > 1 and path.endswith("/"):
            path = path.rstrip("/")
        if path == "/redfish" and method in ("GET", "HEAD"):
            return jreply(200, {"v1": "/redfish/v1/"})
        public = path in (ROOT, ROOT + "/$metadata", ROOT + "/odata")
        if method == "POST" and path == ROOT + "/SessionService/Sessions":
            self._count("POST", path, write=False)
            return self._login(body)
        if not public:
            denied = self._authenticate(headers)
            if denied is not None:
                return denied
        self._count(method, path, write=method in ("POST", "PATCH", "PUT", "DELETE")
                    and not path.startswith(ROOT + "/SessionService/Sessions/"))
        if method in ("GET", "HEAD"):
            reply = self._get(path, query)
            if method == "HEAD":
                reply.body = b""
            return reply
        if method == "PATCH":
            return self._patch(path, headers, body)
        if method == "POST":
            return self._post(path, headers, body)
        if method == "DELETE":
            return self._delete(path)
        return jreply(405, error_body("OperationNotAllowed"), {"Allow": "GET, HEAD"})

    def _count(self, method, path, write):
        st = self.stats
        st["requests"] += 1
        st[method] = st.get(method, 0) + 1
        if write:
            st["writes"] += 1
            log = st["write_log"]
            log.append({"method": method, "path": path})
            if len(log) > 200:
                del log[0]

    def _authenticate(self, headers):
        token = headers.get("X-Auth-Token")
        if token:
            session = self.sessions.get(token)
            now = self._clock()
            if session is None or now - session["used"] > self.state.faults["session_timeout_s"]:
                if session is not None:
                    self._drop_session(token)
                # iDRAC-style: 401 with an HTML content type and empty body for a stale token
                return Reply(401, b"", {"Content-Type": "text/html", "WWW-Authenticate": 'Basic realm="Redfish"'})
            session["used"] = now
            return None
        auth = headers.get("Authorization")
        if auth and auth == self._basic:
            return None
        return jreply(401, error_body("NoValidSession"), {"WWW-Authenticate": 'Basic realm="Redfish"'})

    # -- sessions
    def _login(self, body):
        try:
            data = json.loads(body or b"{}")
        except ValueError:
            return jreply(400, error_body("MalformedJSON"))
        if not isinstance(data, dict) or "UserName" not in data or "Password" not in data:
            return jreply(400, error_body("PropertyMissing", "UserName/Password"))
        if data["UserName"] != self.username or data["Password"] != self.password:
            return jreply(401, error_body("NoValidSession"))
        now = self._clock()
        for token in [t for t, s in self.sessions.items() if now - s["used"] > self.state.faults["session_timeout_s"]]:
            self._drop_session(token)
        if len(self.sessions) >= self.state.faults["max_sessions"]:
            return jreply(503, error_body("SessionLimitExceeded"))
        self._session_seq += 1
        sid = str(self._session_seq)
        token = secrets.token_hex(16)
        self.sessions[token] = {"id": sid, "user": data["UserName"], "used": now, "created": now_iso(self._wall())}
        uri = "%s/SessionService/Sessions/%s" % (ROOT, sid)
        return jreply(201, self._session_body(self.sessions[token]), {"X-Auth-Token": token, "Location": uri})

    def _session_body(self, s):
        uri = "%s/SessionService/Sessions/%s" % (ROOT, s["id"])
        return {"@odata.id": uri, "@odata.type": tree.T["Session"], "Id": s["id"], "Name": "User Session",
                "UserName": s["user"], "CreatedTime": s["created"]}

    def _drop_session(self, token):
        self.sessions.pop(token, None)

    # -- GET
    def _get(self, path, query):
        if path.startswith(ROOT + "/TaskService/Tasks"):
            return self._get_task(path)
        if path.startswith(ROOT + "/SessionService/Sessions"):
            return self._get_sessions(path)
        if path == ROOT + "/$metadata":
            return Reply(200, metadata_xml(self.tree).encode(), {"Content-Type": "application/xml"})
        if path == ROOT + "/odata":
            return jreply(200, odata_service_document(self.tree))
        skip = top = None
        expand = None
        if query:
            q = parse_qs(query)
            skip = _int(q.get("$skip", [None])[0])
            top = _int(q.get("$top", [None])[0])
            if "$expand" in q:
                expand, problem = self._expand_query(q["$expand"][0])
                if problem is not None:
                    return problem
        faults = self.state.faults
        page = faults["page_size"]
        delay = 0.0
        if faults["slow_firmware_inventory_ms"] and path.startswith(ROOT + "/UpdateService/FirmwareInventory"):
            delay = faults["slow_firmware_inventory_ms"] / 1000.0
        key = (path, skip, top, expand)
        hit = self._cache.get(key)
        if hit is None:
            resource = self.tree.get(path)
            if resource is None:
                return jreply(404, error_body("ResourceNotFound", "Resource", path))
            hit = self._render(path, resource, skip, top, page, faults["overlapping_pages"], expand)
            self._cache[key] = hit
        body, etag = hit
        headers = {"Content-Type": JSON}
        if etag:
            headers["ETag"] = etag
        return Reply(200, body, headers, delay=delay)

    def _expand_query(self, value):
        """``$expand`` value -> ``((kind, levels), None)``, ``(None, None)`` when this BMC does not
        support $expand (the query is ignored, as such services do), or ``(None, 400 reply)``."""
        max_levels = int(self.state.faults["expand_max_levels"])
        if max_levels <= 0:
            return None, None
        m = _EXPAND.match(value or "")
        if not m:
            return None, jreply(400, error_body("QueryParameterValueFormatError", value, "$expand"))
        levels = int(m.group("levels")) if m.group("levels") is not None else 1
        if levels < 1 or levels > max_levels:
            return None, jreply(400, error_body("QueryParameterOutOfRange", levels, "$levels",
                                                "1-%d" % max_levels))
        return (m.group("kind"), levels), None

    def _expanded(self, resource, kind, levels):
        """``resource`` with its hyperlinks replaced by the resources they name, ``levels`` deep.

        DSP0266 $expand: ``.`` expands hyperlinks outside ``Links`` properties (``Members``
        included), ``~`` only those inside ``Links``, ``*`` both; a link expanded at level n
        carries its own links expanded at level n+1 while n < ``$levels``.  Links to
        fragments (``.../Power#/PowerSupplies/0``) and to resources rendered on request
        (Sessions, Tasks) stay links.
        """
        tree_ = self.tree

        def walk(obj, depth, in_links):
            if isinstance(obj, dict):
                oid = obj.get("@odata.id")
                if oid is not None and depth < levels and obj.keys() <= _LINK_KEYS and (
                        kind == "*" or (kind == "." and not in_links) or (kind == "~" and in_links)):
                    target = tree_.get(oid.rstrip("/")) if "#" not in oid else None
                    if target is not None:
                        return walk(target, depth + 1, False)
                    return obj
                return {k: walk(v, depth, in_links or k == "Links") for k, v in obj.items()}
            if isinstance(obj, list):
                return [walk(v, depth, in_links) for v in obj]
            return obj

        return walk(resource, 0, False)

    def _render(self, path, resource, skip, top, page, overlapping, expand=None):
        mode = self.state.faults["etag"]
        if "Members" in resource:
            members = resource["Members"]
            total = len(members)
            start = skip or 0
            if page and total > page or skip is not None or top is not None:
                if top is not None:
                    chosen = members[start:start + top]
                elif page:
                    # DGX H100 (AMI) pages return every remaining member yet still link on
                    chosen = members[start:] if overlapping else members[start:start + page]
                else:
                    chosen = members[start:]
                resource = dict(resource, Members=chosen)
                if page and top is None and start + page < total:
                    resource["Members@odata.nextLink"] = "%s?$skip=%d" % (path, start + page)
                    if expand:
                        resource["Members@odata.nextLink"] += "&$expand=%s($levels=%d)" % expand
            if expand:
                resource = self._expanded(resource, *expand)
            raw = json.dumps(resource).encode()
            return raw, self._etag(raw, mode)
        if expand:
            resource = self._expanded(resource, *expand)
        raw = json.dumps(resource).encode()
        etag = self._etag(raw, mode)
        if etag:   # the ETag of the body without it, appended as @odata.etag (one serialisation)
            raw = raw[:-1] + b', "@odata.etag": ' + json.dumps(etag).encode() + b"}"
        return raw, etag

    @staticmethod
    def _etag(raw, mode):
        if mode == "none":
            return None
        digest = hashlib.md5(raw).hexdigest()[:20]
        return ('W/"%s"' if mode == "weak_refused" else '"%s"') % digest

    def _current_etag(self, path):
        reply = self._get(path, "")
        return reply.headers.get("ETag")

    def _get_task(self, path):
        rest = path[len(ROOT + "/TaskService/Tasks"):].strip("/")
        if not rest:
            uris = ["%s/TaskService/Tasks/%s" % (ROOT, t) for t in self.tasks]
            return jreply(200, {"@odata.id": ROOT + "/TaskService/Tasks", "@odata.type": tree.collection_type("Task"),
                                "Name": "Task Collection", "Members": [tree.link(u) for u in uris],
                                "Members@odata.count": len(uris)})
        parts = rest.split("/")
        task = self.tasks.get(parts[0])
        if task is None or len(parts) > 2 or (len(parts) == 2 and parts[1] != "Monitor"):
            return jreply(404, error_body("ResourceNotFound", "Task", parts[0]))
        body = self._task_body(task)
        if len(parts) == 2:   # task monitor: 202 while running, then the final Task with 200
            running = task["state"] == "Running"
            return jreply(202 if running else 200, body, {"Retry-After": "1"} if running else None)
        return jreply(200, body)

    def _get_sessions(self, path):
        rest = path[len(ROOT + "/SessionService/Sessions"):].strip("/")
        if not rest:
            uris = ["%s/SessionService/Sessions/%s" % (ROOT, s["id"]) for s in self.sessions.values()]
            return jreply(200, {"@odata.id": ROOT + "/SessionService/Sessions",
                                "@odata.type": tree.collection_type("Session"), "Name": "Session Collection",
                                "Members": [tree.link(u) for u in uris], "Members@odata.count": len(uris)})
        for s in self.sessions.values():
            if s["id"] == rest:
                return jreply(200, self._session_body(s))
        return jreply(404, error_body("ResourceNotFound", "Session", rest))

    # -- PATCH
    def _patch(self, path, headers, body):
        try:
            data = json.loads(body or b"{}")
        except ValueError:
            return jreply(400, error_body("MalformedJSON"))
        if not isinstance(data, dict):
            return jreply(400, error_body("MalformedJSON"))
        spec = self.spec
        if path not in (spec.S, spec.bios_settings_uri):
            if path in self.tree:
                return jreply(405, error_body("OperationNotAllowed"), {"Allow": "GET, HEAD"})
            return jreply(404, error_body("ResourceNotFound", "Resource", path))
        denied = self._check_etag(path, headers)
        if denied is not None:
            return denied
        if path == spec.S:
            return self._patch_system(data)
        return self._patch_bios(data)

    def _check_etag(self, path, headers):
        mode = self.state.faults["etag"]
        if mode == "none":
            return None
        given = headers.get("If-Match")
        if not given:
            if mode in ("require", "weak_refused"):
                return jreply(428, error_body("PreconditionRequired"))
            return None
        if given.strip() == "*":
            return None
        if mode == "weak_refused" and given.strip().startswith("W/"):
            # AMI/Gigabyte Bios/SD refused its own weak ETag
            return jreply(412, error_body("PreconditionFailed"))
        current = self._current_etag(path) or ""
        candidates = [g.strip() for g in given.split(",")]
        bare = current[2:] if current.startswith("W/") else current
        if current in candidates or bare in candidates:
            return None
        return jreply(412, error_body("PreconditionFailed"))

    def _patch_system(self, data):
        boot = data.get("Boot")
        extra = [k for k in data if k not in ("Boot",)]
        if extra:
            return jreply(400, error_body("PropertyNotWritable", extra[0], related=["#/%s" % extra[0]]))
        if not isinstance(boot, dict):
            return jreply(400, error_body("PropertyValueTypeError", boot, "Boot"))
        new = dict(self.state.boot)
        for key, field, allowed in (("BootSourceOverrideTarget", "target", tree.BOOT_TARGETS),
                                    ("BootSourceOverrideEnabled", "enabled", ["Disabled", "Once", "Continuous"]),
                                    ("BootSourceOverrideMode", None, ["UEFI", "Legacy"])):
            if key in boot:
                if boot[key] not in allowed:
                    return jreply(400, error_body("PropertyValueNotInList", boot[key], key,
                                                  related=["#/Boot/%s" % key], severity="Warning"))
                if field:
                    new[field] = boot[key]
        unknown = [k for k in boot if k not in ("BootSourceOverrideTarget", "BootSourceOverrideEnabled",
                                                "BootSourceOverrideMode")]
        if unknown:
            return jreply(400, error_body("PropertyUnknown", unknown[0], related=["#/Boot/%s" % unknown[0]]))
        self.state.boot = new
        self.invalidate()
        return Reply(204)

    def _patch_bios(self, data):
        attrs = data.get("Attributes")
        if not isinstance(attrs, dict) or not attrs:
            return jreply(400, error_body("PropertyMissing", "Attributes"))
        registry = tree.registry_entries(self.spec)
        for name, value in attrs.items():
            entry = registry.get(name)
            rel = ["#/Attributes/%s" % name]
            if entry is None:
                return jreply(400, error_body("PropertyUnknown", name, related=rel, severity="Warning"))
            kind = entry["Type"]
            if kind == "Enumeration":
                names = [v["ValueName"] for v in entry["Value"]]
                if value not in names:
                    return jreply(400, error_body("PropertyValueNotInList", value, name, related=rel,
                                                  severity="Warning"))
            elif (kind == "Boolean" and not isinstance(value, bool)) or \
                    (kind == "Integer" and (not isinstance(value, int) or isinstance(value, bool))) or \
                    (kind == "String" and not isinstance(value, str)):
                return jreply(400, error_body("PropertyValueTypeError", value, name, related=rel, severity="Warning"))
        self.state.bios_pending.update(attrs)
        self.invalidate()
        return Reply(204)

    # -- DELETE
    def _delete(self, path):
        if path.startswith(ROOT + "/SessionService/Sessions/"):
            sid = path.rsplit("/", 1)[-1]
            for token, s in list(self.sessions.items()):
                if s["id"] == sid:
                    self._drop_session(token)
                    return Reply(204)
            return jreply(404, error_body("ResourceNotFound", "Session", sid))
        if path in self.tree:
            return jreply(405, error_body("OperationNotAllowed"), {"Allow": "GET, HEAD"})
        return jreply(404, error_body("ResourceNotFound", "Resource", path))

    # -- POST
    def _post(self, path, headers, body):
        spec = self.spec
        if path == ROOT + "/UpdateService/upload":
            return self._multipart_update(headers, body)
        try:
            data = json.loads(body or b"{}")
        except ValueError:
            return jreply(400, error_body("MalformedJSON"))
        if not isinstance(data, dict):
            return jreply(400, error_body("MalformedJSON"))
        if path == spec.S + "/Actions/ComputerSystem.Reset":
            return self._system_reset(data)
        if path == spec.M + "/Actions/Manager.Reset":
            reset = data.get("ResetType", "GracefulRestart")
            if reset not in ("ForceRestart", "GracefulRestart"):
                return jreply(400, error_body("ActionParameterValueNotInList", reset, "ResetType", "Manager.Reset"))
            self.schedule(0.05, lambda due: self._bmc_reboot(due, None))
            return Reply(204)
        if path == spec.M + "/VirtualMedia/CD1/Actions/VirtualMedia.InsertMedia":
            image = data.get("Image")
            if not image:
                return jreply(400, error_body("ActionParameterMissing", "VirtualMedia.InsertMedia", "Image"))
            if self.state.virtual_media["inserted"]:
                return jreply(409, error_body("ResourceInUse"))
            self.state.virtual_media = {"image": image, "inserted": True,
                                        "protocol": data.get("TransferProtocolType")
                                        or (urlparse(image).scheme.upper() or None)}
            self.invalidate()
            return Reply(204)
        if path == spec.M + "/VirtualMedia/CD1/Actions/VirtualMedia.EjectMedia":
            self.state.virtual_media = {"image": None, "inserted": False, "protocol": None}
            self.invalidate()
            return Reply(204)
        if path == spec.M + "/LogServices/SEL/Actions/LogService.ClearLog":
            self.state.sel = []
            self._add_sel("OK", "Event Log Cleared", "Event Logging Disabled")
            return Reply(204)
        if path == spec.S + "/Bios/Actions/Bios.ResetBios":
            self.state.bios_pending = dict((spec.sku.get("bios") or {}).get("attributes") or {})
            self.invalidate()
            return Reply(204)
        if path == ROOT + "/UpdateService/Actions/UpdateService.SimpleUpdate":
            return self._simple_update(data)
        if path in self.tree:
            return jreply(405, error_body("OperationNotAllowed"), {"Allow": "GET, HEAD"})
        return jreply(404, error_body("ResourceNotFound", "Action", path))

    def _system_reset(self, data):
        reset = data.get("ResetType")
        if reset is None:
            return jreply(400, error_body("ActionParameterMissing", "ComputerSystem.Reset", "ResetType"))
        if reset not in tree.RESET_TYPES:
            return jreply(400, error_body("ActionParameterValueNotInList", reset, "ResetType", "ComputerSystem.Reset"))
        st = self.state
        if reset in ("ForceOff", "GracefulShutdown"):
            st.power = "Off"
            st.boot_state = dict(st.boot_state, state="off", image=None)
        elif reset == "On":
            if st.power == "Off":
                self._host_boot()
        elif reset in ("ForceRestart", "GracefulRestart", "PowerCycle"):
            self._host_boot()
        self.invalidate()
        return Reply(204)

    def _host_boot(self):
        """Power on (or restart): apply pending BIOS settings and staged firmware, consume a one-time override."""
        st = self.state
        st.power = "On"
        if st.bios_pending:
            st.bios.update(st.bios_pending)
            st.bios_pending = {}
        for comp, version in list(st.staged.items()):
            st.versions[comp] = version
        st.staged = {}
        target = "Hdd"
        if st.boot["enabled"] in ("Once", "Continuous") and st.boot["target"] != "None":
            target = st.boot["target"]
            if st.boot["enabled"] == "Once":
                st.boot = {"enabled": "Disabled", "target": "None"}
        runtime = self.spec.sku.get("runtime") or {}
        image = st.virtual_media["image"] if st.virtual_media["inserted"] else None
        if target == "Cd" and image:
            final = {"state": "ephemeral_runtime", "image": image}
        elif target == "Pxe":
            final = ({"state": "ephemeral_runtime", "image": runtime.get("image_uri")}
                     if runtime.get("method") == "pxe" else {"state": "pxe", "image": None})
        else:
            final = {"state": "disk", "image": None}
        boots = st.boot_state.get("boots", 0) + 1
        st.boot_state = {"state": "booting", "image": None, "target": target, "boots": boots}
        final.update(target=target, boots=boots)

        def done(_due):
            if st.boot_state.get("boots") == boots and st.power == "On":
                st.boot_state = final
                self.invalidate()
        self.schedule(st.faults["host_boot_s"], done)
        self.invalidate()

    # -- firmware updates
    def _component(self, comp_id):
        for comp in self.spec.sku["firmware"]:
            if comp["id"] == comp_id:
                return comp
        return None

    def _simple_update(self, data):
        uri = data.get("ImageURI")
        if not uri:
            return jreply(400, error_body("ActionParameterMissing", "UpdateService.SimpleUpdate", "ImageURI"))
        protocol = data.get("TransferProtocol")
        if protocol is None and (self.state.faults["require_transfer_protocol"] or "://" not in uri):
            return jreply(400, error_body("PropertyMissing", "TransferProtocol"))
        if protocol is not None and protocol not in ("HTTP", "HTTPS"):
            return jreply(400, error_body("ActionParameterValueNotInList", protocol, "TransferProtocol",
                                          "UpdateService.SimpleUpdate"))
        for target in data.get("Targets") or []:
            if target.rstrip("/") not in self.tree:
                return jreply(400, error_body("ActionParameterValueError", "Targets", "UpdateService.SimpleUpdate"))
        parsed = urlparse(uri)
        expected = ((data.get("Oem") or {}).get("Symphony") or {}).get("ExpectedSha256")
        found = self.image_for_uri(uri)
        if found is None:
            return self._new_task(None, None, uri, "transfer_failed")
        comp_id, version = found
        image = demo_image_bytes(self.spec.sku["sku"], comp_id, version)
        if "corrupt=1" in (parsed.query or ""):
            image += b":corrupt"
        outcome = "ok"
        actual = hashlib.sha256(image).hexdigest()
        if actual != hashlib.sha256(demo_image_bytes(self.spec.sku["sku"], comp_id, version)).hexdigest() or \
                (expected and expected.lower() != actual):
            outcome = "verify_failed"
        return self._new_task(comp_id, version, uri, outcome, sha256=actual)

    def image_for_uri(self, uri):
        """``(component id, version)`` a firmware image URI stands for, or None (see README: image rule).

        Accepted shapes: ``.../<component>/<version>/image.bin``; the manifest's own ``image.uri``
        (its ``target`` version); ``.../<component>/<version>.bin`` where the file stem is the
        version with characters other than ``[A-Za-z0-9.-]`` replaced by ``_``.
        """
        path = urlparse(uri).path
        match = _IMAGE_PATH.search(path)
        if match and self._component(match.group("component")):
            return match.group("component"), match.group("version")
        bare = uri.split("?", 1)[0]
        for comp in self.spec.sku["firmware"]:
            image = comp.get("image") or {}
            if image.get("uri") == bare:
                return comp["id"], comp.get("target") or comp["accepted"][0]
        parts = path.rstrip("/").split("/")
        if len(parts) >= 2 and parts[-1].endswith(".bin") and self._component(parts[-2]):
            comp = self._component(parts[-2])
            stem = parts[-1][:-4]
            for version in [comp.get("target")] + list(comp["accepted"]):
                if version and re.sub(r"[^A-Za-z0-9.-]", "_", version) == stem:
                    return comp["id"], version
            return comp["id"], stem
        return None

    def _multipart_update(self, headers, body):
        ctype = headers.get("Content-Type", "")
        if not ctype.startswith("multipart/form-data"):
            return jreply(400, error_body("MissingOrMalformedPart"))
        msg = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
            b"Content-Type: " + ctype.encode() + b"\r\n\r\n" + body)
        params, image = {}, None
        for part in msg.iter_parts() if msg.is_multipart() else []:
            name = part.get_param("name", header="content-disposition")
            payload = part.get_payload(decode=True) or b""
            if name == "UpdateParameters":
                try:
                    params = json.loads(payload or b"{}")
                except ValueError:
                    return jreply(400, error_body("MalformedJSON"))
            elif name == "UpdateFile":
                image = payload
        if image is None:
            return jreply(400, error_body("MissingOrMalformedPart"))
        actual = hashlib.sha256(image).hexdigest()
        expected = ((params.get("Oem") or {}).get("Symphony") or {}).get("ExpectedSha256")
        text = image.decode("utf-8", "replace").split(":", 3)
        if len(text) != 4 or text[0] != DEMO_IMAGE_PREFIX or text[1] != self.spec.sku["sku"] \
                or self._component(text[2]) is None:
            return self._new_task(None, None, "UpdateFile", "verify_failed", sha256=actual)
        outcome = "verify_failed" if expected and expected.lower() != actual else "ok"
        return self._new_task(text[2], text[3], "UpdateFile", outcome, sha256=actual)

    def _new_task(self, comp_id, version, image, outcome, sha256=None):
        if comp_id and outcome == "ok":
            for d in self.spec.by_kind.get("firmware_task_fails", []):
                if d["component"] == comp_id:
                    outcome = "apply_failed"
        self._task_seq += 1
        tid = str(self._task_seq)
        task = {"id": tid, "component": comp_id, "version": version, "image": image, "outcome": outcome,
                "state": "Running", "status": "OK", "start": self._clock(), "start_wall": self._wall(),
                "end_wall": None, "duration": float(self.state.faults["task_duration_s"]), "messages": [],
                "sha256": sha256}
        task["messages"].append(_update_msg("UpdateInProgress", []))
        self.tasks[tid] = task
        self.schedule(task["duration"], lambda due: self._finish_task(task, due))
        monitor = "%s/TaskService/Tasks/%s/Monitor" % (ROOT, tid)
        return jreply(202, self._task_body(task), {"Location": monitor, "Retry-After": "1"})

    def _finish_task(self, task, due):
        if self.tasks.get(task["id"]) is not task:
            return   # wiped by a BMC reboot
        comp = self._component(task["component"]) if task["component"] else None
        target = comp.get("name", comp["id"]) if comp else "unknown"
        task["end_wall"] = self._wall() - max(0.0, self._clock() - due)
        outcome = task["outcome"]
        if outcome == "transfer_failed":
            task.update(state="Exception", status="Critical")
            task["messages"].append(_update_msg("TransferFailed", [task["image"], "UpdateService"], "Critical"))
            return
        if outcome == "verify_failed":
            task.update(state="Exception", status="Critical")
            task["messages"].append(_update_msg("VerificationFailed", [task["image"], target], "Critical"))
            return
        if outcome == "apply_failed":
            # Dell-style: Completed yet Critical
            task.update(state="Completed", status="Critical")
            task["messages"].append(_update_msg("ApplyFailed", [task["image"], target], "Critical"))
            return
        activation = comp["activation"]
        task.update(state="Completed", status="OK")
        if activation == "none":
            self.state.versions[comp["id"]] = task["version"]
            task["messages"].append(_update_msg("UpdateSuccessful", [target, task["image"]]))
        elif activation == "bmc_reset":
            task["messages"].append(_update_msg("UpdateSuccessful", [target, task["image"]]))
            self.schedule(0.2, lambda due: self._bmc_reboot(due, (comp["id"], task["version"])))
        else:   # host_reset / ac_cycle: staged until the host resets
            self.state.staged[comp["id"]] = task["version"]
            task["messages"].append(_update_msg("AwaitToActivate", [task["image"], target]))
        self.invalidate()

    def _bmc_reboot(self, due, new_version):
        """The BMC restarts: unreachable, then 503 while warming up, then answers with any new version.

        Sessions and the task store are wiped, as on real BMCs (R-18)."""
        down = float(self.state.faults["bmc_reboot_s"])
        slow = self.spec.defect("slow_bmc_reboot")
        if slow:
            down = float(slow["seconds"])
        self.down_until = due + down
        self.warm_until = self.down_until + float(self.state.faults["bmc_warmup_s"])
        self.sessions.clear()
        self.tasks.clear()
        if new_version:
            self.state.versions[new_version[0]] = new_version[1]
        self.invalidate()

    def _task_body(self, task):
        uri = "%s/TaskService/Tasks/%s" % (ROOT, task["id"])
        if task["state"] == "Running":
            elapsed = self._clock() - task["start"]
            pct = 0 if task["duration"] <= 0 else min(99, int(100 * elapsed / task["duration"]))
        else:
            pct = 100
        body = {"@odata.id": uri, "@odata.type": tree.T["Task"], "Id": task["id"],
                "Name": "Firmware update %s" % (task["component"] or "?"), "TaskState": task["state"],
                "TaskStatus": task["status"], "PercentComplete": pct, "StartTime": now_iso(task["start_wall"]),
                "TaskMonitor": uri + "/Monitor", "Messages": list(task["messages"])}
        if task["end_wall"] is not None:
            body["EndTime"] = now_iso(task["end_wall"])
        return body

    def _task_summary(self, task):
        body = self._task_body(task)
        return {"id": task["id"], "component": task["component"], "version": task["version"],
                "state": body["TaskState"], "status": body["TaskStatus"], "percent": body["PercentComplete"],
                "sha256": task["sha256"],
                "messages": [m["MessageId"] for m in task["messages"]]}


def _update_msg(message_id, args, severity="OK"):
    templates = {
        "UpdateInProgress": "An update is in progress.",
        "UpdateSuccessful": "Device '%1' successfully updated with image '%2'.",
        "AwaitToActivate": "Awaiting for an action to proceed with activating image '%1' on '%2'.",
        "TransferFailed": "Transfer of image '%1' to '%2' failed.",
        "VerificationFailed": "Verification of image '%1' at '%2' failed.",
        "ApplyFailed": "Installation of image '%1' to '%2' failed.",
    }
    return {"MessageId": "%s.%s" % (UPDATE, message_id), "Message": _fill(templates[message_id], args),
            "MessageArgs": [str(a) for a in args], "MessageSeverity": severity}


def _int(value):
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def _namespaces(resources):
    out = set()
    for body in resources.values():
        kind = body.get("@odata.type", "")
        if kind.startswith("#"):
            name = kind[1:].split(".")[0]
            out.add(name)
    return out


def metadata_xml(resources):
    """``$metadata``: an OData CSDL document referencing the DMTF schema files the tree uses."""
    names = sorted(_namespaces(resources) | {"Task", "Session", "Message", "Resource", "Settings"})
    refs = []
    for name in names:
        refs.append('  <edmx:Reference Uri="http://redfish.dmtf.org/schemas/v1/%s_v1.xml">\n'
                    '    <edmx:Include Namespace="%s"/>\n  </edmx:Reference>' % (name, name))
    return ('<?xml version="1.0" encoding="UTF-8"?>\n'
            '<edmx:Edmx xmlns:edmx="http://docs.oasis-open.org/odata/ns/edmx" Version="4.0">\n%s\n'
            '  <edmx:DataServices>\n    <Schema xmlns="http://docs.oasis-open.org/odata/ns/edm" Namespace="Service">\n'
            '      <EntityContainer Name="Service" Extends="ServiceRoot.v1_20_0.ServiceContainer"/>\n'
            '    </Schema>\n  </edmx:DataServices>\n</edmx:Edmx>\n' % "\n".join(refs))


def odata_service_document(resources):
    root = resources[ROOT]
    values = [{"name": "Service", "kind": "Singleton", "url": "/redfish/v1/"}]
    for key in ("Systems", "Chassis", "Managers", "SessionService", "UpdateService", "TaskService", "Registries"):
        if key in root:
            values.append({"name": key, "kind": "Singleton", "url": root[key]["@odata.id"]})
    return {"@odata.context": "/redfish/v1/$metadata", "value": values}
