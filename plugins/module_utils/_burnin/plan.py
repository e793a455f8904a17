# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Burn-in plan (DESIGN.md stage 3): the SKU's ``burn_in.tiers`` merged with the profile and run-time overrides.

Tiers run in the order node -> gpu -> power -> fabric, tests inside a tier by ``cost_s`` (seconds-long
sanity checks first, hours-long stress last).  Each runner tier adds the check ``<tier>_xid_scan`` (the
kernel log read around the tier).  :func:`gate_graph` is the burn-in gate those checks feed.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field, asdict
from typing import Any

from .._core.errors import ManifestError
from .._core.gate import CheckGraph, CheckSpec
from .calibration import resolve_thresholds

STAGE = "burn_in"
TIER_ORDER = ("node", "gpu", "power", "fabric")
RUNNER_TIERS = ("node", "gpu", "power")
XID_CHECK = "%s_xid_scan"
# Kinds the fabric tier runs (tasks/fabric.yml -> fabric_test; implemented in _fabric/declared.py KINDS, a
# unit test keeps the two equal).  The runner tiers' kinds are those of _burnin.checks.KINDS.
FABRIC_KINDS = frozenset(("ib_write_bw_pairwise", "nccl_all_reduce", "nccl_all_gather", "rccl_all_reduce"))


@dataclass
class PlannedTest:
    """One test of the plan.  ``timeout_s``/``cost_s`` in seconds."""

    tier: str
    name: str
    kind: str
    timeout_s: float
    cost_s: float
    flaky: bool = False
    params: dict = field(default_factory=dict)
    thresholds: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return asdict(self)


def deep_merge(base: dict, override: dict | None) -> dict:
    """Return ``base`` with ``override`` merged in (dicts recursively, anything else replaced)."""
    out = copy.deepcopy(base) if isinstance(base, dict) else {}
    for key, value in (override or {}).items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def profile_view(manifest: dict, profile: str | None) -> dict:
    """The manifest's ``profiles.<profile>`` object (``{}`` for ``production`` or when absent).

    Raises :class:`ManifestError` when a profile other than ``production`` is asked for and
    the manifest does not declare it.
    """
    profiles = manifest.get("profiles") or {}
    if profile in (None, "", "production"):
        return profiles.get("production") or {}
    if profile not in profiles:
        declared = ", ".join(sorted(profiles)) or "none"
        raise ManifestError("profile %r is not declared (declared: %s)" % (profile, declared),
                            where="%s: $.profiles" % manifest.get("sku", "manifest"))
    return profiles[profile] or {}


def effective_bom(manifest: dict, profile: str | None) -> dict:
    """The SKU's ``bom`` with the profile's ``inband_bom`` deep-merged over it (what this host has in-band)."""
    return deep_merge(manifest.get("bom") or {}, profile_view(manifest, profile).get("inband_bom") or {})


def build_plan(manifest: dict, profile: str | None = "production", tiers: list | None = None,
               only: list | None = None, overrides: dict | None = None,
               calibration: dict | None = None) -> list[PlannedTest]:
    """Ordered list of :class:`PlannedTest` for one node.

    ``manifest``: SKU manifest dict; ``profile``: name in ``manifest.profiles`` whose
    ``burn_in.tests.<name>`` entries (params/thresholds/timeout_s/cost_s/flaky) are merged
    over the SKU's tests; ``tiers``: restrict to these tier names; ``only``: restrict to
    these test names; ``overrides``: ``{test: {params, thresholds, timeout_s, ...}}`` merged
    last (operator's run-time overrides); ``calibration``: the measured baseline that relative
    thresholds resolve against (:mod:`.calibration`).  Order: :data:`TIER_ORDER`, then ``cost_s``
    (default: ``timeout_s``), then declaration order.  Raises :class:`ManifestError` when the
    manifest has no burn-in section, a name is duplicated, or ``only``/``tiers``/``overrides``
    name something the manifest lacks.
    """
    where = "%s: $.burn_in" % manifest.get("sku", "manifest")
    section = manifest.get("burn_in")
    if not isinstance(section, dict) or not isinstance(section.get("tiers"), list):
        raise ManifestError("the SKU declares no burn_in.tiers", where=where)
    prof = (profile_view(manifest, profile).get("burn_in") or {}).get("tests") or {}
    overrides = overrides or {}
    tests: list[tuple[int, float, int, PlannedTest]] = []
    seen: set[str] = set()
    declared_tiers: list[str] = []
    for t_index, tier in enumerate(section["tiers"]):
        if not isinstance(tier, dict) or tier.get("name") not in TIER_ORDER:
            raise ManifestError("tier %r is not one of %s" % (tier.get("name") if isinstance(tier, dict) else tier,
                                                              ", ".join(TIER_ORDER)),
                                where="%s.tiers[%d]" % (where, t_index))
        declared_tiers.append(tier["name"])
        for index, spec in enumerate(tier.get("tests") or []):
            path = "%s.tiers[%d].tests[%d]" % (where, t_index, index)
            if not isinstance(spec, dict) or not spec.get("name") or not spec.get("kind"):
                raise ManifestError("a test needs name and kind", where=path)
            name = spec["name"]
            if name in seen:
                raise ManifestError("test %r is declared twice" % name, where=path)
            seen.add(name)
            merged = deep_merge(deep_merge(spec, prof.get(name) or {}), overrides.get(name) or {})
            timeout = merged.get("timeout_s")
            if not isinstance(timeout, (int, float)) or isinstance(timeout, bool) or timeout <= 0:
                raise ManifestError("test %r needs a positive timeout_s" % name, where=path)
            cost = merged.get("cost_s", timeout)
            tests.append((TIER_ORDER.index(tier["name"]), float(cost), len(tests), PlannedTest(
                tier=tier["name"], name=name, kind=str(merged["kind"]), timeout_s=float(timeout),
                cost_s=float(cost), flaky=bool(merged.get("flaky", False)),
                params=dict(merged.get("params") or {}),
                thresholds=resolve_thresholds(merged.get("thresholds"), calibration,
                                              "%s: burn-in test %s" % (manifest.get("sku", "manifest"), name)))))
    for name in list(only or []) + list(overrides):
        if name not in seen:
            raise ManifestError("no burn-in test named %r in this SKU" % name, where=where)
    for tier in tiers or []:
        if tier not in declared_tiers:
            raise ManifestError("tier %r is not declared in this SKU (declared: %s)"
                                % (tier, ", ".join(declared_tiers)), where=where)
    plan = [item[3] for item in sorted(tests, key=lambda item: item[:3])]
    if tiers:
        plan = [t for t in plan if t.tier in tiers]
    if only:
        plan = [t for t in plan if t.name in only]
    return plan


def check_kinds(manifest: dict, registry: Any) -> None:
    """Raise :class:`ManifestError` naming the SKU, tier and test for a kind nothing implements.

    ``registry``: the runner tiers' kinds (``_burnin.checks.KINDS``); fabric tests need a kind of
    :data:`FABRIC_KINDS`.  A declared test nobody can run would otherwise only ever be ``not_run``.
    """
    sku = manifest.get("sku", "manifest")
    for t_index, tier in enumerate((manifest.get("burn_in") or {}).get("tiers") or []):
        if not isinstance(tier, dict):
            continue
        known = FABRIC_KINDS if tier.get("name") not in RUNNER_TIERS else registry
        for index, spec in enumerate(tier.get("tests") or []):
            kind = spec.get("kind") if isinstance(spec, dict) else None
            if kind not in known:
                raise ManifestError("SKU %s, tier %s, test %r: kind %r has no implementation (known for this tier: "
                                    "%s)" % (sku, tier.get("name"), spec.get("name") if isinstance(spec, dict)
                                             else spec, kind, ", ".join(sorted(known))),
                                    where="%s: $.burn_in.tiers[%d].tests[%d]" % (sku, t_index, index))


def check_names(plan: list[PlannedTest]) -> list[str]:
    """Ledger check names of a plan: its tests plus ``<tier>_xid_scan`` for each runner tier in it."""
    names = []
    for tier in TIER_ORDER:
        tier_tests = [t.name for t in plan if t.tier == tier]
        if not tier_tests:
            continue
        names.extend(tier_tests)
        if tier in RUNNER_TIERS:
            names.append(XID_CHECK % tier)
    return names


def gate_graph(manifest: dict, profile: str | None = "production", plan: list[PlannedTest] | None = None,
               extra_checks: tuple | list = ()) -> CheckGraph:
    """The burn-in :class:`CheckGraph` for a SKU and profile.

    Checks: every planned test, the per-tier XID scans and ``extra_checks`` (e.g. ``sel_scan``);
    none depends on another (fail-fast is recorded as ``not_run``, not ``blocked``).  Checks the
    manifest lists under ``gates.<profile>.burn_in.optional`` are not required by the gate.
    """
    plan = build_plan(manifest, profile) if plan is None else plan
    names = check_names(plan) + [c for c in extra_checks if c]
    graph = CheckGraph(STAGE, [CheckSpec(n) for n in dict.fromkeys(names)])
    gate_profile = profile or "production"
    optional = ((manifest.get("gates") or {}).get(gate_profile) or {}).get(STAGE, {}).get("optional") or []
    return graph.with_required([n for n in optional if n in graph.specs])
