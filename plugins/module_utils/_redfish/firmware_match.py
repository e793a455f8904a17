# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one rule for which FirmwareInventory members belong to a SKU's firmware component (``firmware[].match``).

Used by the pre-deployment audit (is every component reported?) and the provisioning plan (what runs where).
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

from typing import Any, Iterable, List, Mapping, Optional

from .._core.match import compile_match
from .model import FirmwareItem


def member_document(item: FirmwareItem) -> dict:
    """The FirmwareItem as the SoftwareInventory fields a ``match.query`` may read (DSP0268 SoftwareInventory)."""
    return {"Id": item.id, "Name": item.name, "Version": item.version, "Updateable": item.updateable,
            "Status": {"State": item.state, "Health": item.health},
            "RelatedItem": [{"@odata.id": uri} for uri in item.related if uri]}


def firmware_members(component: Mapping[str, Any], items: Iterable[FirmwareItem],
                     where: Optional[str] = None, bodies: bool = True) -> List[FirmwareItem]:
    """The members of ``items`` that belong to ``component`` (a SKU ``firmware[]`` entry), in their order.

    ``bodies=False``: ``items`` come from the member list alone (Ids, no Names or Versions, as the
    pre-deployment audit reads it to save one request per member), so ``query`` is not evaluated and the
    Id/Name regexes decide; the provisioning plan, which reads every member, applies the query.
    Raises :class:`ManifestError` (``where``, default ``firmware[<id>].match``) when the match cannot compile.
    """
    match = component.get("match") or {}
    compiled = compile_match(match, where or "firmware[%s].match" % component.get("id"))
    if not (compiled["id"] or compiled["name"] or (bodies and compiled["query"])):
        ids = match.get("ids") or [component.get("id")]
        return [i for i in items if i.id in ids]
    found = []
    for item in items:
        by_key = [rx.fullmatch(value or "") for rx, value in ((compiled["id"], item.id), (compiled["name"], item.name))
                  if rx is not None]
        if by_key and not any(by_key):
            continue
        if bodies and compiled["query"] is not None and not compiled["query"].search(member_document(item)):
            continue
        found.append(item)
    return found


def describe(match: Mapping[str, Any]) -> str:
    """Short words for a match object in a reason: its query, else its Id or Name pattern."""
    return match.get("query") or match.get("id") or match.get("name") or ", ".join(match.get("ids") or [])
