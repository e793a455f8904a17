# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one rule for which FirmwareInventory members belong to a SKU firmware component (``firmware[].match``),
compiled once at SKU load (a bad pattern fails the manifest, not a node) and used by the pre-deployment audit
(is every component reported?), the provisioning plan and the fleet audit's drift (what runs where).
A member belongs to a component when

* ``match.id`` (regex, ``re.fullmatch`` on the member ``Id``) or ``match.name`` (regex on ``Name``) matches —
  Name is the only usable key where a BMC numbers its members ``1..27`` — and, when given,
* ``match.query``, a JMESPath expression (https://jmespath.org/specification.html) evaluated on the member as a
  Redfish SoftwareInventory document (``Id``, ``Name``, ``Version``, ``Updateable``, ``Status``, ``RelatedItem``),
  is truthy: it says what a regex cannot, e.g. ``starts_with(Id, 'NIC') && contains(Name, 'MCX75310AAS-NEAT')``.

Without ``id``, ``name`` or ``query`` the component's literal ``match.ids`` (default: the component id) are the
member Ids.
"""

from __future__ import annotations

import re
from typing import Any, Iterable, List, Mapping, Optional

from .errors import ManifestError

try:
    import jmespath
    HAS_JMESPATH = True
except ImportError:  # only a SKU that uses match.query needs it
    jmespath = None
    HAS_JMESPATH = False


# compile_match's results by (id, name, query) pattern: compiled objects are immutable and shared
_COMPILED: dict = {}


def compile_match(match: Mapping[str, Any], where: str) -> dict:
    """Compiled regexes and JMESPath of one ``match`` object: ``{"id", "name", "query"}`` (None where absent).

    Raises :class:`ManifestError` naming ``where`` (the SKU file and JSON path) on a bad regex, a JMESPath
    syntax error, or a ``query`` without the jmespath library installed.
    """
    out: dict = {"id": None, "name": None, "query": None}
    for key in ("id", "name"):
        if match.get(key):
            try:
                out[key] = re.compile(match[key])
            except re.error as exc:
                raise ManifestError("match.%s %r is not a valid regex: %s" % (key, match[key], exc), where=where)
    if match.get("query"):
        if not HAS_JMESPATH:
            raise ManifestError("match.query needs the jmespath Python library (requirements.txt)", where=where)
        try:
            out["query"] = jmespath.compile(match["query"])
        except jmespath.exceptions.JMESPathError as exc:
            raise ManifestError("match.query %r is not a valid JMESPath expression: %s" % (match["query"], exc),
                                where=where)
    return out


def member_document(item: Any) -> dict:
    """The FirmwareItem as the SoftwareInventory fields a ``match.query`` may read (DSP0268 SoftwareInventory)."""
    return {"Id": item.id, "Name": item.name, "Version": item.version, "Updateable": item.updateable,
            "Status": {"State": item.state, "Health": item.health},
            "RelatedItem": [{"@odata.id": uri} for uri in item.related if uri]}


def firmware_members(component: Mapping[str, Any], items: Iterable[Any],
                     where: Optional[str] = None, bodies: bool = True) -> List[Any]:
    """The members of ``items`` that belong to ``component`` (a SKU ``firmware[]`` entry), in their order.

    ``bodies=False``: ``items`` come from the member list alone (Ids, no Names or Versions, as the
    pre-deployment audit reads it to save one request per member), so ``query`` is not evaluated and the
    Id/Name regexes decide; the provisioning plan, which reads every member, applies the query.
    Items are FirmwareItem-shaped (``id``, ``name``, ``version``, ...).
    Raises :class:`ManifestError` (``where``, default ``firmware[<id>].match``) when the match cannot compile.
    """
    match = component.get("match") or {}
    key = (match.get("id"), match.get("name"), match.get("query"))
    compiled = _COMPILED.get(key) if all(k is None or isinstance(k, str) for k in key) else None
    if compiled is None:
        compiled = compile_match(match, where or "firmware[%s].match" % component.get("id"))
        if all(k is None or isinstance(k, str) for k in key):
            # once per pattern: every node's audit matches the same SKU entries (issue 27 profile)
            _COMPILED[key] = compiled
    rx_id, rx_name, query = compiled["id"], compiled["name"], compiled["query"] if bodies else None
    if not (rx_id or rx_name or query):
        ids = match.get("ids") or [component.get("id")]
        return [i for i in items if i.id in ids]
    found = []
    for item in items:
        # an Id or Name pattern given: one of the given ones matches
        if (rx_id is not None or rx_name is not None) and not (
                (rx_id is not None and rx_id.fullmatch(item.id or ""))
                or (rx_name is not None and rx_name.fullmatch(item.name or ""))):
            continue
        if query is not None and not query.search(member_document(item)):
            continue
        found.append(item)
    return found


def describe(match: Mapping[str, Any]) -> str:
    """Short words for a match object in a reason: its query, else its Id or Name pattern."""
    return match.get("query") or match.get("id") or match.get("name") or ", ".join(match.get("ids") or [])
