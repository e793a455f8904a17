"""One emulated BMC: state, Redfish request handling, defects and faults.

:class:`BMC` knows nothing about sockets: ``handle(method, path, query, headers, body)``
returns a :class:`Reply` (status, headers, body bytes, plus ``delay`` seconds and ``abort``
for the server to apply).  That keeps every behaviour unit-testable without a network and
lets one event loop serve thousands of BMCs.  This module holds the state, authentication,
sessions, GET (paging, ``$expand``, ETags), PATCH and DELETE; POST actions are in ``actions``,
firmware updates and tasks in ``firmware``, the resource tree in ``tree``.

Time comes from an injectable monotonic ``clock``; timed events (task completion, BMC
reboot, host boot) run when due, at the next request or ``tick()``.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import heapq
import json
import random
import re
import secrets
import time
from urllib.parse import parse_qs

from ansible_collections.symphony.cluster.plugins.module_utils._core.errors import ValidationError

from symphony_emulator.actions import Actions
from symphony_emulator.config import check_fault_values, faults_for
from symphony_emulator.firmware import FirmwareUpdates
from symphony_emulator.odata import metadata_xml, odata_service_document
from symphony_emulator.replies import JSON, Reply, dumps_bytes, error_body, jreply, now_iso
from symphony_emulator.resources import ROOT, T, collection_type, link
from symphony_emulator.settings import Settings
from symphony_emulator.tree import build_tree

# $expand=<*|.|~>[($levels=n)] (DSP0266 "Query parameters", $expand)
_EXPAND = re.compile(r"^(?P<kind>[*.~])(?:\(\$levels=(?P<levels>\d+)\))?$")
_LINK_KEYS = frozenset(["@odata.id", "@odata.type", "@odata.etag"])
# Redfish LogEntry.Severity (DSP0268): what an injected SEL entry may be.
SEL_SEVERITIES = ("OK", "Warning", "Critical")


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
        self.boot_progress = None   # BootProgress.LastState, VM-backed nodes only


class BMC(Actions, FirmwareUpdates, Settings):
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
        self._scripted_left = None   # the scripted faults still to fire (built at the first request)
        self.on_schedule = None   # server hook: called with (bmc, due) when an event is queued
        self.vm = None            # a vm.Guest for a VM-backed node (attach_vm): power, boot and media are real
        self._post_table = self._post_routes()
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
        self._scripted_left = None
        if "seed" in values:
            self.rng = random.Random(values["seed"])
        self.invalidate()
        return dict(eff)

    def _sync_vm(self):
        if self.vm is not None:   # a real guest's power and boot progress change between requests
            self.state.power, self.state.boot_progress = self.vm.power_state(), self.vm.boot_progress()
            self.invalidate()

    def attach_vm(self, guest):
        """Back this BMC's System with ``guest`` (a :class:`vm.Guest`), its config medium USB1 included."""
        self.vm = guest
        self._post_table.update(guest.post_routes(self.spec))
        self.invalidate()

    def reset_stats(self):
        self.stats = {"GET": 0, "HEAD": 0, "POST": 0, "PATCH": 0, "PUT": 0, "DELETE": 0, "writes": 0,
                      "requests": 0, "injected_errors": 0, "injected_resets": 0, "injected_malformed": 0,
                      "write_log": []}

    def invalidate(self):
        self._tree = None
        self._cache = {}

    @property
    def tree(self):
        self._sync_vm()
        if self._tree is None:
            self._tree = build_tree(self.spec, self.state)
            if self.vm is not None:
                self.vm.add_resources(self._tree, self.spec)
        return self._tree

    def _seed_sel(self):
        w = self._wall()
        self._add_sel("OK", "Event Log Cleared", "Event Logging Disabled", w - 86400)
        self._add_sel("OK", "System ACPI Power State: S0/G0 working", "System ACPI PowerState", w - 3600)
        for d in self.spec.by_kind.get("sel_critical", []):
            self._add_sel("Critical", d["message"], "Critical Interrupt", w - 600)

    def _add_sel(self, severity, message, sensor_type, when=None, injected=False):
        n = len(self.state.sel) + 1
        entry = {"Id": str(n), "Name": "SEL entry %d" % n, "Severity": severity, "Message": message,
                 "SensorType": sensor_type, "EntryCode": "Assert",
                 "Created": now_iso(when if when is not None else self._wall())}
        if injected:   # a fault-injection exercise's entry says so to anyone who reads the SEL
            entry["Oem"] = {"Symphony": {"Injected": True}}
        self.state.sel.append(entry)
        self.invalidate()
        return entry

    def inject_sel(self, values):
        """``POST /_emulator/sel``: append one SEL entry marked injected (``{severity, message, sensor_type}``;
        severity one of Redfish's OK, Warning, Critical).  Returns the entry; ValueError for a bad body."""
        if not isinstance(values, dict) or not isinstance(values.get("message"), str) or not values["message"]:
            raise ValueError("body must be {\"severity\": \"Critical\", \"message\": text, \"sensor_type\": text}")
        severity = values.get("severity", "Critical")
        if severity not in SEL_SEVERITIES:
            raise ValueError("severity %r is not one of %s" % (severity, ", ".join(SEL_SEVERITIES)))
        return dict(self._add_sel(severity, values["message"], str(values.get("sensor_type") or "Critical Interrupt"),
                                  injected=True))

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
        scripted = self._scripted(method, path)
        if scripted == "reset":
            self.stats["injected_resets"] += 1
            return Reply(0, abort=True, delay=delay)
        if scripted:
            self.stats["injected_errors"] += 1
            return Reply(int(scripted), b"<html><body><h1>%s</h1></body></html>" % scripted.encode(),
                         {"Content-Type": "text/html"}, delay=delay)
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

    def _scripted(self, method, path):
        """The kind (``reset``, ``500``, ``503``) of the first ``scripted`` fault matching this request, used up
        one ``times`` at a time; None when none matches."""
        pending = self._scripted_left
        if pending is None:
            pending = self._scripted_left = [dict(item, times=item.get("times", 1))
                                             for item in self.state.faults.get("scripted") or []]
        for item in pending:
            if item["times"] > 0 and path.startswith(item["path"]) and item.get("method", method) == method:
                item["times"] -= 1
                return item["kind"]
        return None

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
        if sub == "firmware" and method in ("PUT", "POST"):
            # what a technician's out-of-band flash (or a BMC's own rollback) leaves behind: a component at
            # another version than provisioning set, for the fleet audit's drift check to find
            try:
                values = json.loads(body or b"{}")
                comp, version = values["component"], str(values["version"])
            except (ValueError, KeyError, TypeError) as exc:
                return jreply(400, {"error": "body must be {\"component\": id, \"version\": text}: %s" % exc})
            if comp not in self.state.versions:
                return jreply(400, {"error": "unknown firmware component %r (one of %s)"
                                             % (comp, ", ".join(sorted(self.state.versions)))})
            self.state.versions[comp] = version
            self.invalidate()
            return jreply(200, {"firmware": dict(self.state.versions)})
        if sub == "sel" and method == "POST":
            # the fleet audit's exercise: a critical entry in the SEL, as a failing part would log it
            try:
                entry = self.inject_sel(json.loads(body or b"{}"))
                return jreply(200, {"entry": entry, "entries": len(self.state.sel)})
            except ValueError as exc:
                return jreply(400, {"error": str(exc)})
        return jreply(404, {"error": "unknown control endpoint %s %s" % (method, path)})

    def describe(self):
        """A plain dict of everything tests and rehearsals may want to observe."""
        self.tick()
        self._sync_vm()
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
        return {"@odata.id": uri, "@odata.type": T["Session"], "Id": s["id"], "Name": "User Session",
                "UserName": s["user"], "CreatedTime": s["created"]}

    def _drop_session(self, token):
        self.sessions.pop(token, None)

    # -- GET
    def _get(self, path, query):
        if path.startswith(ROOT + "/TaskService/Tasks"):
            return self._get_task(path)
        if path.startswith(self.spec.M + "/Jobs/JID_"):   # Dell jobs (firmware.py)
            return self.get_job(path)
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
            raw = dumps_bytes(resource)
            return raw, self._etag(raw, mode)
        if expand:
            resource = self._expanded(resource, *expand)
        raw = dumps_bytes(resource)
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

    def _get_sessions(self, path):
        rest = path[len(ROOT + "/SessionService/Sessions"):].strip("/")
        if not rest:
            uris = ["%s/SessionService/Sessions/%s" % (ROOT, s["id"]) for s in self.sessions.values()]
            return jreply(200, {"@odata.id": ROOT + "/SessionService/Sessions",
                                "@odata.type": collection_type("Session"), "Name": "Session Collection",
                                "Members": [link(u) for u in uris], "Members@odata.count": len(uris)})
        for s in self.sessions.values():
            if s["id"] == rest:
                return jreply(200, self._session_body(s))
        return jreply(404, error_body("ResourceNotFound", "Session", rest))

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


def _int(value):
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None
