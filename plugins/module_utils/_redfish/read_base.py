# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The base of the inventory reader: the per-read cache of resources, reads that record what failed, helpers.

Every family reader (:mod:`.read_systems`, :mod:`.read_chassis`, ...) builds on :class:`ReaderBase`:
a part of the tree that cannot be read (error, collection without Members, R-11) is listed in
``NodeInventory.incomplete`` as ``{"part", "uri", "reason"}``, never as empty; every resource that
came back (inline through ``$expand`` or fetched) is kept by ``@odata.id`` so nothing is read twice.
"""

from __future__ import annotations

import re
from typing import Any, Iterable, Optional

from .._core.errors import RedfishError
from .client import RedfishClient, RedfishHTTPError
from .errors import FAULT_BMC, FAULT_CONTROLLER, FAULT_UNREACHABLE, fault_of
from .model import Component, NodeInventory
from .paging import needs_get

ALL_SECTIONS = ("systems", "chassis", "managers", "firmware", "sel", "readings", "bios", "capabilities")
# "firmware_ids" (not in ALL_SECTIONS): the FirmwareInventory member list only (ids and links, one request
# per page instead of one per member) for readers that need to know what is inventoried, not its versions.
SECTIONS = ALL_SECTIONS + ("firmware_ids",)
# Placeholders BMCs put where they know nothing (DESIGN.md "Verdict rules": unknown, never a value); compared
# case-insensitively after stripping.
UNKNOWN_VERSIONS = {"", "N/A", "NA", "n/a", "na", "Unknown", "unknown", "null", "None"}
_PLACEHOLDERS = frozenset(v.lower() for v in UNKNOWN_VERSIONS | {
    "Not Available", "NotAvailable", "Not Specified", "Not Applicable", "To Be Filled By O.E.M.", "-"})
# Integer placeholders: -1 and 0xFFFF (an unset 16-bit register, as IPMI/SMBIOS-fed BMCs pass it on).
_COUNT_PLACEHOLDERS = frozenset([-1, 0xFFFF])
# A zero date ("0000-00-00T00:00:00Z", "1970-01-01T00:00:00Z" from an unset RTC) is no time at all.
_ZERO_DATE = re.compile(r"^(0000-00-00|1970-01-01)T00:00:00")
# Entries some BMCs type as GPU that are not one: the HGX baseboard, NVSwitches, retimers, ERoTs.
NOT_A_GPU = re.compile(r"baseboard|nvswitch|retimer|\bE?RoT\b|ERoT_|\bHMC\b|\bFPGA\b|PCIe ?switch", re.I)
_GPU_WORDS = re.compile(r"\b(GPU|H100|H200|H800|A100|A800|B100|B200|GB200|L40S?|MI\d{3}X?|INSTINCT|TESLA)\b", re.I)


def link(obj: Any, key: str) -> Optional[str]:
    """The ``@odata.id`` that property ``key`` of ``obj`` links to, or None."""
    v = (obj or {}).get(key)
    if isinstance(v, dict):
        return v.get("@odata.id")
    return None


def _links_list(obj: Any, key: str) -> list[Any]:
    v = ((obj or {}).get("Links") or {}).get(key)
    if isinstance(v, dict):
        return [v.get("@odata.id")] if v.get("@odata.id") else []
    if isinstance(v, list):
        return [x.get("@odata.id") for x in v if isinstance(x, dict) and x.get("@odata.id")]
    return []


def _norm(uri: Any) -> Any:
    return uri.rstrip("/") if isinstance(uri, str) and uri != "/" else uri


def _status(obj: Any) -> tuple[Optional[str], Optional[str]]:
    st = (obj or {}).get("Status") or {}
    if not isinstance(st, dict):
        return None, None
    return st.get("State"), st.get("Health")


def _str(v: Any) -> Optional[str]:
    """A reported string, or None for null and the placeholders (``"N/A"``, ``""``, ``"Not Available"`` ...)."""
    if v is None:
        return None
    text = v.strip() if isinstance(v, str) else str(v)
    return None if text.lower() in _PLACEHOLDERS else text


def known_count(v: Any) -> Optional[int]:
    """A reported count (ports, lanes, cores) as int, or None for null, non-numbers, ``-1`` and ``65535``."""
    if isinstance(v, bool) or not isinstance(v, int) or v in _COUNT_PLACEHOLDERS or v < 0:
        return None
    return v


def known_date(v: Any) -> Optional[str]:
    """A reported ISO 8601 time, or None for null, placeholders and zero dates (``0000-00-00T00:00:00Z``)."""
    text = _str(v)
    return None if text is None or _ZERO_DATE.match(text) else text


def error_body(body: Any) -> Optional[str]:
    """The message of a Redfish ``error`` object (DSP0266 "Error responses") in a body that is not a resource,
    or None: some BMCs answer 200 with an error body for a part they cannot read."""
    if isinstance(body, dict) and isinstance(body.get("error"), dict) and "@odata.id" not in body:
        err = body["error"]
        return "the BMC answered with an error body: %s" % (err.get("message") or err.get("code") or "error")
    return None


def child_uri(base: str, *segments: str) -> str:
    """``base`` with ``segments`` below it, one ``/`` between each (``Systems/1/`` + ``Actions`` never gives
    ``//``); for URIs the service does not link (DSP0268 gives the path), never for links it gives."""
    return "/".join([base.rstrip("/")] + [seg.strip("/") for seg in segments])


def _pcie_gen(text: Any) -> Optional[int]:
    """``"Gen5"`` -> 5; None when not reported."""
    if not text:
        return None
    m = re.search(r"(\d+)", str(text))
    return int(m.group(1)) if m else None


def _location(obj: Any) -> Optional[str]:
    loc = (obj or {}).get("Location") or {}
    part = loc.get("PartLocation") or {}
    return _str(part.get("ServiceLabel")) or _str(loc.get("Info"))


def normalise_version(version: Any) -> Optional[str]:
    """Firmware version -> str or None (null, "", "N/A" and the like are unknown, R-29)."""
    if version is None:
        return None
    text = str(version).strip()
    if text.lower() in _PLACEHOLDERS:
        return None
    return text


def gaps_fault(gaps: Iterable[Any]) -> Optional[str]:
    """The fault class behind the incomplete entries ``gaps`` (:meth:`ReaderBase.incomplete`'s dicts): the
    controller's where any is, else unreachable where any is, else None (the BMC answered: a finding)."""
    faults = {g.get("fault") for g in gaps if isinstance(g, dict)}
    if FAULT_CONTROLLER in faults:
        return FAULT_CONTROLLER
    return FAULT_UNREACHABLE if FAULT_UNREACHABLE in faults else None


class ReaderBase:
    """One read of one BMC into ``inv``: the client, the sections asked for, the resource cache.

    ``client``: an opened :class:`RedfishClient`; ``system_id``: only this ``Systems`` member;
    ``sections``: subset of :data:`SECTIONS`.
    """

    def __init__(self, client: RedfishClient, inv: NodeInventory, system_id: Optional[str] = None,
                 sections: Iterable[str] = ALL_SECTIONS) -> None:
        self.c = client
        self.inv = inv
        self.system_id = system_id
        self.sections = set(sections)
        self._seen_components: set[str] = set()
        self._pcie_cache: dict[str, Optional[dict[str, Any]]] = {}
        # @odata.id -> resource body seen inline or fetched during this read
        self.cache: dict[str, dict[str, Any]] = {}
        # PCIe devices a NetworkAdapter names as its own (Controllers[].Links)
        self.nic_devices: set[Any] = set()
        levels = getattr(client, "expand_levels", None)
        self.levels = levels() if callable(levels) else 0

    def incomplete(self, part: str, uri: Optional[str], exc: object, member: bool = False) -> None:
        """Record that ``part`` at ``uri`` could not be read; ``member``: one member of the collection, not the
        collection itself (an unreadable secondary chassis feeds only the checks that read chassis).  An error of
        the unreachable or controller fault class (:func:`.errors.fault_of`) is kept as ``"fault"``."""
        entry: dict[str, Any] = {"part": part, "uri": uri, "reason": str(exc)}
        fault = fault_of(exc) if isinstance(exc, BaseException) else FAULT_BMC
        if fault != FAULT_BMC:
            # the BMC stopped answering (or the controller could not reach it): the checks this part feeds are
            # blocked with that cause, not judged on what the BMC did not say
            entry["fault"] = fault
        if member:
            entry["member"] = True
        self.inv.incomplete.append(entry)

    def remember(self, body: Any) -> Any:
        """Keep every whole resource in ``body`` (itself and whatever came back expanded inline); an
        excerpt (:func:`.paging.is_whole`) is never kept, so what reads it later gets the resource itself."""
        # one loop, no generator per container (issue 27 profile); the visiting order is the same, so of two
        # copies of one resource with as many properties the one visited last is kept, as before
        cache = self.cache
        stack = [body]
        pop, push = stack.pop, stack.append
        while stack:
            obj = pop()
            if isinstance(obj, dict):
                oid = obj.get("@odata.id")
                # is_whole and _norm, inline (called for every linked dict of every body)
                if isinstance(oid, str) and "#" not in oid and isinstance(obj.get("Name"), str) and (
                        isinstance(obj.get("Id"), str) or isinstance(obj.get("Members"), list)):
                    key = oid.rstrip("/") if oid != "/" else oid
                    old = cache.get(key)
                    if old is None or len(obj) >= len(old):
                        cache[key] = obj
                values: Any = obj.values()
            elif isinstance(obj, list):
                values = obj
            else:
                continue  # a body that is not JSON object or array (only the first can be)
            for v in values:
                if isinstance(v, (dict, list)):
                    push(v)
        return body

    def cached(self, uri: Optional[str]) -> Optional[dict[str, Any]]:
        return self.cache.get(_norm(uri)) if uri else None

    def get(self, part: str, uri: str) -> Optional[dict[str, Any]]:
        hit = self.cached(uri)
        if hit is not None:
            return hit
        try:
            body = self.c.get(uri)
        except RedfishError as exc:
            self.incomplete(part, uri, exc)
            return None
        err = error_body(body)
        if err:
            self.incomplete(part, uri, err)
            return None
        return self.remember(body)

    def _from_cache(self, uri: Optional[str]) -> Optional[list[dict[str, Any]]]:
        """Members of a collection already seen, as bodies, or None when something is missing."""
        coll = self.cached(uri)
        if coll is None or not isinstance(coll.get("Members"), list) or coll.get("Members@odata.nextLink") \
                or coll.get("error"):
            return None   # the client reads it again and reports what is wrong
        out, seen = [], set()
        for m in coll["Members"]:
            if not isinstance(m, dict):
                continue
            oid = _norm(m.get("@odata.id"))
            if oid in seen:
                continue
            seen.add(oid)
            if needs_get(m):
                m = self.cached(oid)
                if m is None:
                    return None
            out.append(m)
        count = coll.get("Members@odata.count")
        if isinstance(count, int) and count != len(out):
            return None   # let the client page and warn
        return out

    def members(self, part: str, uri: str, levels: int = 1) -> list[dict[str, Any]]:
        hit = self._from_cache(uri)
        if hit is not None:
            return hit
        errors: list[dict[str, Any]] = []
        try:
            items = self.c.members(uri, errors=errors, levels=levels)
        except RedfishError as exc:
            self.incomplete(part, uri, exc)
            return []
        for e in errors:
            self.incomplete(part, e["uri"], e["reason"], member=_norm(e["uri"]) != _norm(uri))
        out = []
        for item in items:
            err = error_body(item)
            if err:
                self.incomplete(part, uri, err, member=True)
                continue
            out.append(self.remember(item))
        return out

    def fetch(self, part: str, uris: list[str]) -> list[dict[str, Any]]:
        """Bodies of ``uris`` (cache first, the rest a few at a time); unreadable ones are incomplete."""
        out = {}
        todo = []
        for u in uris:
            hit = self.cached(u)
            if hit is not None:
                out[u] = hit
            elif u not in todo:
                todo.append(u)
        if todo:
            for u, (body, exc) in zip(todo, self._get_many(todo)):
                err = exc if exc is not None else error_body(body)
                if err is not None:
                    self.incomplete(part, u, err)
                else:
                    out[u] = self.remember(body)
        return [out[u] for u in uris if u in out]

    def _get_many(self, uris: list[str]) -> list[tuple[Optional[dict[str, Any]], Optional[RedfishError]]]:
        many = getattr(self.c, "get_many", None)
        if callable(many):
            return many(uris, errors=[])
        results: list[tuple[Optional[dict[str, Any]], Optional[RedfishError]]] = []
        for u in uris:
            try:
                results.append((self.c.get(u), None))
            except RedfishError as exc:
                results.append((None, exc))
        return results

    def prefetch(self, wanted: list[tuple[Any, ...]]) -> None:
        """GET ``[(uri, levels[, kind])]`` expanded, a few at a time, and remember what came back.

        Collections already complete in the cache are skipped.  Failures are left to the
        reading that follows (which records them as incomplete with the reason).
        """
        if not self.levels:
            return
        urls = []
        for want in wanted:
            uri = want[0]
            if uri and self._from_cache(uri) is None:
                url = self.c.expand_url(*want)
                if url not in urls:
                    urls.append(url)
        if not urls:
            return
        for body, exc in self._get_many(urls):
            if exc is None and isinstance(body, dict):
                self.remember(body)

    def add(self, comp: Component) -> Optional[Component]:
        key = comp.uri or "%s:%s" % (comp.kind, comp.id)
        if key in self._seen_components:
            return None
        self._seen_components.add(key)
        self.inv.components.append(comp)
        return comp

    def pcie_device(self, uri: str) -> Optional[dict[str, Any]]:
        hit = self.cached(uri)
        if hit is not None:
            return hit
        if uri not in self._pcie_cache:
            try:
                self._pcie_cache[uri] = self.c.get(uri)
            except RedfishHTTPError as exc:
                if exc.status != 404:
                    self.incomplete("pcie", uri, exc)
                self._pcie_cache[uri] = None
            except RedfishError as exc:
                self.incomplete("pcie", uri, exc)
                self._pcie_cache[uri] = None
        return self._pcie_cache[uri]

    def apply_pcie(self, comp: Component, dev: dict[str, Any]) -> None:
        iface = dev.get("PCIeInterface") or {}
        comp.pcie_width = known_count(iface.get("LanesInUse"))
        comp.pcie_width_max = known_count(iface.get("MaxLanes"))
        comp.pcie_gen = _pcie_gen(iface.get("PCIeType"))
        comp.pcie_gen_max = _pcie_gen(iface.get("MaxPCIeType"))
        comp.extra.setdefault("pcie_device", dev.get("@odata.id"))
