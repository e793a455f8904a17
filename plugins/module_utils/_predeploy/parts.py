# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the pre-deployment checks share: matching part models, counting present parts, slots, unreadable parts.

Each helper reads the :class:`NodeInventory` and the SKU of an :class:`AuditContext`; none judges on its own.
"""

from __future__ import annotations

import re
from typing import Any, Callable, Iterable, Mapping, Optional

from .._core.gate import PASS, Outcome, not_run
from .._redfish.model import Component, NodeInventory
from .graph import AuditContext


def _norm(text: Any) -> str:
    return re.sub(r"[^a-z0-9]", "", str(text or "").lower())


def model_matches(expected: Any, observed: Any) -> bool:
    """True when ``observed`` names the part ``expected`` names.

    Case, spaces and punctuation are ignored and either may contain the other, so
    ``"H100 80GB HBM3"`` matches ``"NVIDIA H100 80GB HBM3"``; an unreported model
    (None/empty) never matches.
    """
    e, o = _norm(expected), _norm(observed)
    return bool(e) and bool(o) and (e in o or o in e)


def present_parts(components: Iterable[Component]) -> list[Component]:
    """The parts the BMC lists as there (any state but ``Absent``)."""
    return [c for c in components if c.state not in ("Absent",)]


def absent_parts(components: Iterable[Component]) -> list[Component]:
    """The empty slots the BMC lists (state ``Absent``)."""
    return [c for c in components if c.state == "Absent"]


def slot_of(comp: Component) -> str:
    """How a reason names a part: its location (silkscreen label) where the BMC gives one, else its Id."""
    return comp.location or comp.id


def missing_slots(ids: Iterable[Any], expected_count: int) -> list[str]:
    """Slots that should exist but are not listed, inferred from numbered ids.

    ``['GPU1', 'GPU2', 'GPU4']`` with 4 expected -> ``['GPU3']``; ids numbered from
    0 are handled (``GPU_SXM_0``); ids without a common prefix and number give ``[]``.
    """
    parsed = []
    for i in ids:
        m = re.match(r"^(.*?)(\d+)$", str(i))
        if not m:
            return []
        parsed.append((m.group(1), int(m.group(2))))
    if not parsed or len({pair[0] for pair in parsed}) != 1:
        return []
    prefix = parsed[0][0]
    nums = {pair[1] for pair in parsed}
    base = 0 if 0 in nums else 1
    return ["%s%d" % (prefix, n) for n in range(base, base + expected_count) if n not in nums]


def incomplete_for(inv: NodeInventory, *parts: str, members: bool = True) -> list[str]:
    """Entries of ``inv.incomplete`` (``{"part", "uri", "reason"[, "member"]}``) for any of ``parts``, as strings;
    ``members=False``: only whole collections, not one unreadable member."""
    out = []
    for item in inv.incomplete or []:
        if isinstance(item, dict):
            if item.get("part") in parts and (members or not item.get("member")):
                out.append("%s: %s" % (item.get("uri") or item.get("part"), item.get("reason")))
        elif any(p.lower() in str(item).lower() for p in parts):
            out.append(str(item))
    return out


def unreadable(inv: NodeInventory, words: Iterable[str], what: str) -> Optional[Outcome]:
    """``not_run`` naming what of ``words`` could not be read, or None when all of it was read.

    A partial read is never judged (DESIGN.md "Verdict rules"): neither pass nor a hardware fail.
    """
    gaps = incomplete_for(inv, *words)
    if gaps:
        return not_run("%s could not be read completely from the BMC, so it is not judged: %s; rerun the stage "
                       "(reset the BMC with Manager.Reset if it persists)" % (what, "; ".join(gaps[:3])),
                       evidence={"incomplete": gaps})
    return None


def fmt_gib(value: Optional[float]) -> str:
    """GiB in a reason: whole numbers without decimals (``80``), others with one (``79.6``)."""
    return ("%.0f" % value) if value is not None and abs(value - round(value)) < 0.05 else "%.1f" % (value or 0)


def main_system(ctx: AuditContext) -> Optional[dict]:
    """The ComputerSystem the SKU describes: its ``system_id``, else the one whose model matches, else the first."""
    systems = ctx.inv.systems
    sysdef = ctx.manifest.get("system", {})
    if sysdef.get("system_id"):
        for s in systems:
            if s.get("id") == sysdef["system_id"]:
                return s
    models = [sysdef.get("model")] + list(sysdef.get("model_aliases", []))
    for s in systems:
        if any(model_matches(m, s.get("model")) for m in models if m):
            return s
    return systems[0] if systems else None


def tolerate_gaps(outcome: Outcome, inv: NodeInventory, parts: Iterable[str], what: str) -> Outcome:
    """A check over parts that were not all read: ``not_run`` with what was read, whatever ``outcome`` says.

    An unread member may be the missing part, an extra one or a sick one, so neither a pass nor a fail is
    true; the check becomes ``not_run`` with the reason and the outcome of what was read as evidence.
    """
    gaps = incomplete_for(inv, *parts)
    if not gaps:
        return outcome
    return not_run("%s could not be read completely (%s), so it is not judged; what was read: %s; rerun the "
                   "stage (reset the BMC with Manager.Reset if it persists)"
                   % (what, "; ".join(gaps[:2]), outcome.reason or outcome.status),
                   evidence={"incomplete": gaps, "read": {"status": outcome.status, "expected": outcome.expected,
                                                          "observed": outcome.observed}})


def _system_of(comp: Component) -> Optional[str]:
    m = re.search(r"/Systems/([^/]+)/", comp.uri or "")
    return m.group(1) if m else None


def per_system(ctx: AuditContext, comps: list[Component], evaluate: Callable[[list[Component]], Outcome]) -> Outcome:
    """Evaluate ``comps`` per ComputerSystem and pass if any system passes.

    Multi-system BMCs (GB200: System_0 and HGX_Baseboard_0) list the same CPUs and
    memory under both, one of them without models; the physical parts are one set.
    Failures are reported for the SKU's ``system_id`` (else the largest group).
    """
    groups = {}
    for c in comps:
        groups.setdefault(_system_of(c), []).append(c)
    if len(groups) <= 1:
        return evaluate(comps)
    outcomes = {sid: evaluate(items) for sid, items in groups.items()}
    # Prefer the system that reports models (GB200 HGX_Baseboard_0 over System_0).
    ranked = sorted(outcomes, key=lambda k: -sum(1 for c in groups[k] if c.model))
    for sid in ranked:
        outcome = outcomes[sid]
        if outcome.status == PASS:
            outcome.reason = ((outcome.reason + "; ") if outcome.reason else "") + "as Systems/%s reports them" % sid
            return outcome
    main = ctx.manifest.get("system", {}).get("system_id")
    sid = main if main in outcomes else max(groups, key=lambda k: len(groups[k]))
    return outcomes[sid]


def unique_parts(components: Iterable[Component]) -> list[Component]:
    """One entry per physical part: BMCs list a drive under both a System's Storage and a Chassis (GB200).

    Parts are the same when their serials match, or (no serial) their Id and model match.
    """
    seen, out = set(), []
    for c in components:
        key = ("serial", c.serial) if c.serial else ("id", c.id, c.model)
        if key in seen:
            continue
        seen.add(key)
        out.append(c)
    return out


def models_of(want: Mapping[str, Any]) -> list[str]:
    """The model names a SKU entry accepts: ``model`` and ``models``."""
    return [m for m in [want.get("model")] + list(want.get("models") or []) if m]
