# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Reading Redfish collections: ``$expand``, ``Members@odata.nextLink`` paging, and parallel member GETs.

* ``Members@odata.nextLink`` paging with a page cap, loop detection, de-duplication by
  ``@odata.id`` and a stop at ``Members@odata.count`` (R-7, R-26) — sushy's resource
  classes never follow nextLink, so we page on the connector's raw responses;
* a 200 collection without ``Members`` is :class:`RedfishIncomplete` (R-11);
* ``$expand`` when ``ProtocolFeaturesSupported.ExpandQuery`` advertises it, falling
  back to member GETs when the service ignores or refuses it;
* :meth:`Paging.get_many` running up to the per-BMC cap of GETs at once.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any, Iterable, Optional

from .._core.errors import RedfishError
from .errors import RedfishHTTPError, RedfishIncomplete
from .session import Session


def _norm_id(oid: Any) -> Any:
    return oid.rstrip("/") if isinstance(oid, str) and oid != "/" else oid


def _partial(errors: Optional[list[dict[str, Any]]], uri: str, reason: str) -> None:
    """Record a collection read cut short in the caller's ``errors`` (when it collects them)."""
    if errors is not None:
        errors.append({"uri": uri, "reason": reason})


def is_whole(obj: Any) -> bool:
    """Whether ``obj`` is a whole resource body, not a bare link or an excerpt of one.

    Every Redfish resource carries ``Id`` and ``Name`` (``Resource.v1`` schema, required) and every
    collection ``Name`` and ``Members`` (DSP0266 "Resource collections").  ``$expand`` is an
    optimisation only: members a BMC inlines without them are excerpts (issue 16: a DGX chassis
    read through ``$expand`` lost its ``SerialNumber``) and are read again plainly.
    """
    if not isinstance(obj, dict) or not isinstance(obj.get("Name"), str):
        return False
    return isinstance(obj.get("Id"), str) or isinstance(obj.get("Members"), list)


def needs_get(obj: Any) -> bool:
    """Whether ``obj`` names a resource (``@odata.id``, not a fragment) that must be read for its body."""
    oid = obj.get("@odata.id") if isinstance(obj, dict) else None
    return isinstance(oid, str) and "#" not in oid and not is_whole(obj)


class Paging(Session):
    """Collections, ``$expand`` and parallel GETs on top of the logged-in transport."""

    def _expand_query(self) -> Optional[dict[str, Any]]:
        """``ProtocolFeaturesSupported.ExpandQuery`` of the service root, or None where unusable."""
        if not self.use_expand or not isinstance(self.service_root, dict):
            return None
        eq = ((self.service_root.get("ProtocolFeaturesSupported") or {}).get("ExpandQuery") or {})
        return eq if isinstance(eq, dict) else None

    def expand_param(self, levels: int = 1, kind: str = ".") -> Optional[str]:
        """The ``$expand`` query this service advertises (``.($levels=n)``, ``*``...) or None.

        From ``ProtocolFeaturesSupported.ExpandQuery`` of the service root (DSP0266 §7.3):
        ``kind`` ``.`` (NoLinks: hyperlinks outside ``Links``) falls back to ``*`` (ExpandAll)
        and back; ``*`` asks for every hyperlink, ``Links`` included; ``$levels`` only when
        ``Levels`` is advertised, ``levels`` capped at ``MaxLevels``.
        """
        eq = self._expand_query()
        if eq is None:
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

    def expand_levels(self) -> int:
        """How many ``$levels`` of ``$expand`` this service takes: 0 (no ``$expand``), 1, or
        ``MaxLevels`` when ``Levels`` is advertised (1 when MaxLevels is missing)."""
        eq = self._expand_query()
        if eq is None or not (eq.get("NoLinks") or eq.get("ExpandAll")):
            return 0
        if not eq.get("Levels"):
            return 1
        top = eq.get("MaxLevels")
        return top if isinstance(top, int) and top >= 1 else 1

    def expand_url(self, path: str, levels: int = 1, kind: str = ".") -> str:
        """``path`` with this service's ``$expand`` query appended (``path`` itself without one);
        ``levels``/``kind`` as in :meth:`expand_param`."""
        param = self.expand_param(levels, kind)
        if not param:
            return path
        return path + ("&" if "?" in path else "?") + "$expand=" + param

    def members(self, collection_path: str, expand: bool = True, errors: Optional[list[dict[str, Any]]] = None,
                fetch: bool = True, levels: int = 1) -> list[dict[str, Any]]:
        """All members of a Redfish collection, as bodies, in service order, without duplicates.

        Follows ``Members@odata.nextLink`` (page cap ``settings.page_cap``, loop detection),
        de-duplicates by ``@odata.id`` (R-26: pages that overlap), stops once the unique
        count reaches ``Members@odata.count`` and warns when the final count differs.
        Uses ``$expand`` when the service advertises it (``expand=True``; ``levels`` deep,
        capped at the service's ``MaxLevels``); members that come back as bare links or
        excerpts (:func:`is_whole`) are fetched, up to :attr:`max_concurrency` at once (``fetch=False`` returns the links).

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
        seen: dict[Any, dict[str, Any]] = {}
        order: list[Any] = []
        pages = 1
        visited = {self._rel(self._abs(collection_path))}
        page = first
        while True:
            if isinstance(page.get("error"), dict):
                # an error object beside Members (DSP0266 allows it): the service says the list is not whole
                _partial(errors, collection_path, "the collection carries an error beside its Members: %s"
                         % (page["error"].get("message") or page["error"].get("code") or "error"))
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
            if pages >= self.settings.page_cap:
                self._warn("%s %s: more than %d pages; stopped paging" % (self.host, collection_path,
                                                                          self.settings.page_cap))
                # members past the cap were not read: the caller must not judge the collection as complete
                _partial(errors, collection_path, "more than %d pages; stopped paging, the rest is unread"
                         % self.settings.page_cap)
                break
            visited.add(nrel)
            pages += 1
            page = self.get(nxt)
            if not isinstance(page.get("Members"), list):
                self._warn("%s %s: page without Members" % (self.host, nxt))
                _partial(errors, nxt, "page without Members; the rest of the collection is unread")
                break
        if count is not None and len(order) != count:
            self._warn("%s %s: Members@odata.count is %d but %d unique members were read"
                       % (self.host, collection_path, count, len(order)))
        items = [seen[k] for k in order]
        if not fetch:
            return items
        return self.fetch_all(items, errors=errors)

    def fetch_all(self, refs: list[dict[str, Any]],
                  errors: Optional[list[dict[str, Any]]] = None) -> list[dict[str, Any]]:
        """GET the body of every ``{"@odata.id": ...}`` ref that is not a whole resource (:func:`needs_get`);
        keep the whole ones that came back expanded.

        Runs up to :attr:`max_concurrency` GETs at once.  ``errors`` as in :meth:`members`.
        """
        todo = [i for i, m in enumerate(refs) if needs_get(m)]
        out = list(refs)
        if not todo:
            return out
        bodies = self.get_many([refs[i]["@odata.id"] for i in todo], errors=[] if errors is not None else None)
        failed = set()
        for i, (body, exc) in zip(todo, bodies):
            if exc is not None:
                if errors is None:  # get_many raises the first failure when not collecting
                    raise exc
                errors.append({"uri": refs[i]["@odata.id"], "reason": str(exc)})
                failed.add(i)
            elif body is not None:
                out[i] = body
        return [m for i, m in enumerate(out) if i not in failed]

    def get_many(self, paths: Iterable[str], errors: Optional[list[Any]] = None
                 ) -> list[tuple[Optional[dict[str, Any]], Optional[RedfishError]]]:
        """GET every path, up to :attr:`max_concurrency` at once -> ``[(body dict, None) or
        (None, RedfishError)]`` in the order given.

        ``errors``: a list means "collect": each failure is returned as its error; None
        means the first failure (in the order given) is raised.  The worker threads live
        as long as the client (closed by :meth:`close`); a call made from one of them runs
        its GETs one after the other.
        """
        paths = list(paths)

        def one(path: str) -> tuple[Optional[dict[str, Any]], Optional[RedfishError]]:
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

    def _executor(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._pool is None:
                def mark() -> None:
                    self._in_pool.flag = True
                self._pool = ThreadPoolExecutor(max_workers=self.max_concurrency, initializer=mark,
                                                thread_name_prefix="redfish-%s" % self.host)
            return self._pool
