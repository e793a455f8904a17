# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The firmware plan: a pure function (observed inventory, SKU manifest) -> ordered steps.

Shared by provisioning (what to apply) and fleet_audit (drift, the same plan in check mode), so it lives in _core.

Order (DESIGN.md stage 2, the manifest's strict order): out-of-band firmware in manifest
order (BMC -> BIOS -> CPLDs ...), then the BIOS settings, then in-band firmware in manifest
order (GPU -> NIC/DPU -> NVMe), then the OS tunings.  Every step names the component, the
observed version(s), the target, the method, the image and the activation, and an
``action``:

* ``skip``: every member matching the component reads an accepted version;
* ``update``: at least one member reads a version outside ``accepted`` (or none, R-29),
  and the target is not older than what runs (or downgrades are allowed);
* ``refuse_downgrade``: the target is older than an observed version and neither the
  manifest (``allow_downgrade``) nor the caller allows it;
* ``missing``: the node reports fewer members than ``match.count`` (the manifest knows a
  component the node does not have);
* ``follows``: a ``method: none`` component whose version is not accepted; it is carried
  by the package of ``updated_with`` and is checked again by verify;
* ``no_image``: the version is not accepted and the manifest gives no target/image.

FirmwareInventory members no component matches are listed in ``Plan.unknown``.  Dell's
``Previous-*``/``Current-*`` duplicates (R-27) never reach the plan: the inventory reader
(``_redfish_inventory.normalise_firmware``) keeps the running ``Installed-*`` entry only.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any, Dict, Optional

from .match import describe, firmware_members

SKIP = "skip"
UPDATE = "update"
REFUSE = "refuse_downgrade"
MISSING = "missing"
FOLLOWS = "follows"
NO_IMAGE = "no_image"
ACTIONS = (SKIP, UPDATE, REFUSE, MISSING, FOLLOWS, NO_IMAGE)


@dataclass
class Step:
    """One step of the plan.

    ``check``: the provisioning check name (``firmware:<id>``, ``bios_settings``, ``tunings``);
    ``observed``: ``{member id: version or None}``; ``changes`` (BIOS settings only):
    ``{attribute: [observed, desired]}``.
    """

    check: str
    kind: str
    phase: str
    action: str
    reason: str
    component: Optional[str] = None
    method: Optional[str] = None
    activation: Optional[str] = None
    target: Optional[str] = None
    accepted: list = field(default_factory=list)
    observed: dict = field(default_factory=dict)
    image: Optional[dict] = None
    changes: dict = field(default_factory=dict)
    updated_with: Optional[str] = None

    @property
    def needs_work(self):
        """True for a firmware update or BIOS change (tunings are applied in-band by the role every run)."""
        if self.kind == "tunings":
            return False
        return self.action == UPDATE or (self.kind == "bios_settings" and bool(self.changes))

    def to_dict(self):
        return asdict(self)


@dataclass
class Plan:
    """The ordered steps, plus what the plan could not place.

    ``unknown``: FirmwareInventory members no manifest component matches (``{id, name,
    version}``); ``missing``: manifest components the node lacks (also a step each).
    """

    sku: str
    steps: list = field(default_factory=list)
    unknown: list = field(default_factory=list)
    missing: list = field(default_factory=list)

    def step(self, check):
        for s in self.steps:
            if s.check == check:
                return s
        return None

    @property
    def changes_needed(self):
        return [s for s in self.steps if s.needs_work]

    @property
    def inband_work(self):
        return [s for s in self.steps if s.phase == "in_band" and s.action == UPDATE]

    def summary(self):
        """``{action: count}`` over the firmware steps, plus ``bios_changes``."""
        out: Dict[str, int] = {}
        for s in self.steps:
            if s.check.startswith("firmware:"):
                out[s.action] = out.get(s.action, 0) + 1
        bios = self.step("bios_settings")
        out["bios_changes"] = len(bios.changes) if bios else 0
        return out

    def to_dict(self):
        return {"sku": self.sku, "steps": [s.to_dict() for s in self.steps], "unknown": list(self.unknown),
                "missing": list(self.missing), "summary": self.summary()}


# --------------------------------------------------------------------------- versions
_TOKEN = re.compile(r"\d+|[A-Za-z]+")


def version_key(version):
    """Tokens of a version for ordering: digits as ints, letters lower-cased.

    ``"28.37.10.14"`` -> ``[(0, 28), (0, 37), (0, 10), (0, 14)]``; ``"BIOS Date: 08/04/2023 Ver 1.4"``
    keeps only the version after ``Ver`` when present.  Returns ``[]`` for None.
    """
    if version is None:
        return []
    text = str(version)
    m = re.search(r"\bVer(?:sion)?\s*[:.]?\s*(\S+)\s*$", text)
    if m:
        text = m.group(1)
    out = []
    for tok in _TOKEN.findall(text):
        out.append((0, int(tok)) if tok.isdigit() else (1, tok.lower()))
    return out


def compare_versions(a, b):
    """-1, 0 or 1 as ``a`` is older, equal or newer than ``b``; None when they cannot be ordered.

    Versions are compared token by token (numbers numerically); versions whose token kinds
    differ at the first difference (``"F5.11.CB"`` vs ``"F5.11.10"``) cannot be ordered.
    """
    ka, kb = version_key(a), version_key(b)
    if not ka or not kb:
        return None
    if ka == kb:
        return 0
    for x, y in zip(ka, kb):
        if x == y:
            continue
        if x[0] != y[0]:
            return None
        return -1 if x[1] < y[1] else 1
    return -1 if len(ka) < len(kb) else 1


# --------------------------------------------------------------------------- matching
def members_of(component, firmware):
    """FirmwareInventory items (``FirmwareItem``) that belong to a manifest component: the one rule of
    :func:`.match.firmware_members` (Id or Name regex, JMESPath ``query``), which the
    pre-deployment audit uses too.  Raises :class:`ManifestError` on a match that does not compile.
    """
    return firmware_members(component, firmware)


def _downgrade(target, observed_versions):
    """Observed versions the target is older than."""
    return [v for v in observed_versions if v is not None and compare_versions(target, v) == -1]


def plan_component(component, firmware, allow_downgrade=False):
    """The :class:`Step` for one manifest firmware component (pure)."""
    members = members_of(component, firmware)
    need = (component.get("match") or {}).get("count", 1)
    observed = {m.id: m.version for m in members}
    accepted = list(component["accepted"])
    target = component.get("target")
    base = dict(check="firmware:%s" % component["id"], kind=component["kind"], phase=component["phase"],
                component=component["id"], method=component["method"], activation=component["activation"],
                target=target, accepted=accepted, observed=observed, image=component.get("image"),
                updated_with=component.get("updated_with"))
    if len(members) < need:
        pattern = describe(component.get("match") or {})
        return Step(action=MISSING, reason="the node reports %d of %d FirmwareInventory members matching %s"
                    % (len(members), need, pattern), **base)
    off = sorted({str(v) for v in observed.values() if v not in accepted and v is not None})
    unknown = sorted(k for k, v in observed.items() if v is None)
    if not off and not unknown:
        versions = sorted({str(v) for v in observed.values()})
        return Step(action=SKIP, reason="at accepted version %s" % ", ".join(versions), **base)
    what = []
    if off:
        what.append("%s not accepted (accepted: %s)" % (", ".join(off), ", ".join(accepted)))
    if unknown:
        what.append("version not reported by %s" % ", ".join(unknown[:4] + (["..."] if len(unknown) > 4 else [])))
    text = "; ".join(what)
    if component["method"] == "none":
        return Step(action=FOLLOWS, reason="%s; updated with %s" % (text, component.get("updated_with") or
                                                                    "its parent package"), **base)
    if not target or not component.get("image"):
        return Step(action=NO_IMAGE, reason="%s; the manifest names no target image" % text, **base)
    older = _downgrade(target, observed.values())
    if older and not (allow_downgrade or component.get("allow_downgrade")):
        return Step(action=REFUSE, reason="target %s is older than the running %s; downgrade refused (set "
                    "allow_downgrade in the manifest or the allow_downgrade option)" % (target, ", ".join(sorted(
                        set(older)))), **base)
    verb = "downgrade" if older else "update"
    return Step(action=UPDATE, reason="%s; %s to %s" % (text, verb, target), **base)


def attribute_value(value):
    """A BIOS attribute's value; Cray/HPE OEM trees report ``{"current_value": ..., ...}`` objects."""
    if isinstance(value, dict) and "current_value" in value:
        return value["current_value"]
    return value


def bios_changes(desired, current):
    """``{attribute: [current, desired]}`` for every desired attribute whose current value differs.

    Values are compared as the BMC reports them; ``"Enabled"`` and ``"enabled"`` differ
    (BMCs are case-exact, R-21).  An attribute the BMC does not report is a change with current None.
    """
    out = {}
    for name, want in (desired or {}).items():
        have = attribute_value((current or {}).get(name))
        if have != want:
            out[name] = [have, want]
    return out


def build_plan(inventory, manifest, allow_downgrade=False, tunings_observed=None):
    """Plan one node: ``(NodeInventory, manifest dict) -> Plan``.  Pure; never talks to anything.

    ``inventory.firmware``: the normalised FirmwareInventory; ``inventory.bios``: the reader's
    BIOS dict (``attributes``); ``allow_downgrade``: the caller's flag (a component's own
    ``allow_downgrade`` also permits).  Raises :class:`ManifestError` on a bad match regex.
    """
    plan = Plan(sku=manifest.get("sku"))
    firmware = list(inventory.firmware or [])
    placed = set()
    oob = [c for c in manifest.get("firmware", []) if c["phase"] == "out_of_band"]
    inband = [c for c in manifest.get("firmware", []) if c["phase"] == "in_band"]
    for comp in oob:
        step = plan_component(comp, firmware, allow_downgrade)
        placed.update(step.observed)
        plan.steps.append(step)
    bios = manifest.get("bios") or {}
    if bios.get("attributes"):
        current = (inventory.bios or {}).get("attributes")
        if current is None or (not current and inventory.bios.get("uri") is None):
            step = Step(check="bios_settings", kind="bios_settings", phase="out_of_band", action=MISSING,
                        reason="the BIOS attributes could not be read", changes={})
        else:
            changes = bios_changes(bios["attributes"], current)
            step = Step(check="bios_settings", kind="bios_settings", phase="out_of_band",
                        action=UPDATE if changes else SKIP,
                        reason=("%d of %d attributes differ: %s"
                                % (len(changes), len(bios["attributes"]), ", ".join(sorted(changes)))
                                if changes else "all %d attributes as the SKU says" % len(bios["attributes"])),
                        changes=changes)
        plan.steps.append(step)
    for comp in inband:
        step = plan_component(comp, firmware, allow_downgrade)
        placed.update(step.observed)
        plan.steps.append(step)
    if manifest.get("tunings"):
        plan.steps.append(Step(check="tunings", kind="tunings", phase="os", action=UPDATE,
                               reason="applied in-band from the SKU's tunings (sysctl, kernel command line, "
                                      "persistence mode, GPU power limit, NCCL environment)",
                               changes=dict(manifest["tunings"])))
    plan.unknown = [{"id": i.id, "name": i.name, "version": i.version} for i in firmware if i.id not in placed]
    plan.missing = [s.component for s in plan.steps if s.action == MISSING and s.component]
    return plan


def diff_of(plan):
    """``{"before": {...}, "after": {...}}`` for Ansible ``--diff``: firmware versions and BIOS attributes.

    Only steps that change something appear; ``after`` shows the target version / desired value (the plan; after a
    run, :func:`diff_after` puts what a fresh read found there).
    """
    before: Dict[str, Dict[str, Any]] = {"firmware": {}, "bios": {}}
    after: Dict[str, Dict[str, Any]] = {"firmware": {}, "bios": {}}
    for s in plan.steps:
        if s.check.startswith("firmware:") and s.action == UPDATE:
            before["firmware"][s.component] = sorted({str(v) for v in s.observed.values()})
            after["firmware"][s.component] = [s.target]
        elif s.check == "bios_settings":
            for name, (have, want) in sorted(s.changes.items()):
                before["bios"][name] = have
                after["bios"][name] = want
    return {"before": before, "after": after}


def diff_after(diff, fresh_plan, fresh_bios):
    """``diff`` (:func:`diff_of` before the run) with ``after`` replaced by what a fresh read found.

    ``fresh_plan``: the plan built from the re-read inventory (its steps' ``observed`` are the running versions);
    ``fresh_bios``: the re-read BIOS ``Attributes``.  A failed update then shows its old version on both sides
    instead of the target it never reached.  Pure.
    """
    running = {s.component: sorted({str(v) for v in s.observed.values()})
               for s in fresh_plan.steps if s.check.startswith("firmware:")}
    after = {"firmware": {component: running.get(component, ["(not found in the fresh read)"])
                          for component in diff["before"].get("firmware", {})},
             "bios": {name: attribute_value(fresh_bios.get(name)) for name in diff["before"].get("bios", {})}}
    return {"before": diff["before"], "after": after}


def format_plan(host, plan):
    """Human lines for ``--check`` output: one per step that is not ``skip``, then unknown members."""
    lines = []
    for s in plan.steps:
        if s.action == SKIP or s.check == "tunings":
            continue
        if s.check == "bios_settings":
            changed = ", ".join("%s %r -> %r" % (k, v[0], v[1]) for k, v in sorted(s.changes.items()))
            lines.append("%s: bios_settings: %s" % (host, changed))
            continue
        lines.append("%s: %s [%s] %s -> %s via %s (%s): %s" % (
            host, s.check, s.action, ",".join(sorted({str(v) for v in s.observed.values()})) or "-",
            s.target or "-", s.method, s.activation, s.reason))
    if plan.unknown:
        lines.append("%s: %d FirmwareInventory members not in the manifest: %s" % (
            host, len(plan.unknown), ", ".join(u["id"] for u in plan.unknown[:8]) +
            (" ..." if len(plan.unknown) > 8 else "")))
    return lines
