# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pre-deployment stage: out-of-band audit of one BMC against the twin and the SKU.

The stage is split in two so the judging is pure and testable with real captures:

* :class:`Observation`: what was seen for one node (DHCP lease and reservation,
  TCP reachability, Redfish service root, login, the normalised
  :class:`NodeInventory`), filled by :func:`observe_node` over the network.
* The checks: pure functions ``(AuditContext) -> Outcome`` over that observation,
  the twin node and the SKU manifest, run through :data:`CHECKS` with
  :class:`CheckGraph` so ``blocked`` is derived from declared dependencies.

:func:`dispatch_rows` turns failing nodes into the technician's dispatch list
(site, rack, U, hostname, serial, check, reason, remediation).
"""

from __future__ import annotations

import dataclasses
import json
import re
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from urllib.parse import urlsplit

from .discovery import (
    LeaseIndex,
    discover_node,
    read_leases,
    tcp_reachable,
)
from .._core.errors import (
    SymphonyError,
    ValidationError,
)
from .._fleet.batch import (
    BmcFleetSettings,
    bmc_client,
    fleet_settings_kwargs,
    require_credentials,
    run_batch,
    twin_nodes_from_params,
)
from .._core.ledger import open_ledger
from .._redfish.client import RedfishClient
from .._redfish.reader import read_inventory
from .._redfish.registries import MessageRegistries
from .._core.report import (
    gate_rows,
    sort_rows,
    write_dispatch_latest,
    write_rows,
)
from .._core.gate import (
    CheckGraph,
    CheckSpec,
    PASS,
    BLOCKED,
    failed,
    not_run,
    passed,
    compute_gate,
    new_run_id,
)

STAGE = "pre_deployment"

# The checks of the stage, in the order an operator reads them, with their dependencies.
CHECKS = (
    CheckSpec("lease_captured", (), True, "the BMC's DHCP lease was found by its MAC"),
    CheckSpec("address_reserved", ("lease_captured",), True,
              "a host reservation for the planned BMC address was emitted and nobody else holds it"),
    CheckSpec("bmc_reachable", (), True, "TCP connection to the BMC's Redfish port"),
    CheckSpec("service_root", ("bmc_reachable",), True, "GET /redfish/v1 returns a valid Redfish service root"),
    CheckSpec("login", ("service_root",), True, "the BMC accepts the credentials (session or Basic)"),
    CheckSpec("inventory_read", ("login",), True, "Systems, Chassis and Managers were read"),
    CheckSpec("chassis_serial", ("inventory_read",), True, "chassis serial equals the twin's"),
    CheckSpec("system_model", ("inventory_read",), True, "system manufacturer/model match the SKU"),
    CheckSpec("cpus", ("inventory_read",), True, "CPU count and model match the SKU"),
    CheckSpec("memory", ("inventory_read",), True, "DIMM count and total capacity match the SKU"),
    CheckSpec("gpus", ("inventory_read",), True, "GPU count, model and memory match the SKU"),
    CheckSpec("gpu_pcie_links", ("gpus",), True, "every GPU's PCIe link trained at the expected width and speed"),
    CheckSpec("nics", ("inventory_read",), True, "NICs/DPUs: model, count, ports and port speed"),
    CheckSpec("nvme", ("inventory_read",), True, "NVMe drives: count, model and capacity"),
    CheckSpec("psus", ("inventory_read",), True, "PSUs present and healthy"),
    CheckSpec("fans_thermal", ("inventory_read",), True, "fans present and healthy, temperatures below critical"),
    CheckSpec("health_rollup", ("inventory_read",), True, "no component reports Warning or Critical health"),
    CheckSpec("sel_clean", ("inventory_read",), True, "no Critical SEL entries since the cutoff"),
    CheckSpec("firmware_inventory", ("inventory_read",), True, "FirmwareInventory readable, SKU components found"),
    CheckSpec("power_control", ("inventory_read",), True, "ComputerSystem.Reset can power the node on and off"),
)
CHECK_NAMES = tuple(spec.name for spec in CHECKS)


# GPU memory as BMCs report it differs from the marketing size (80 GB HBM3 -> 79.6 GiB, 81559 MiB):
# the check accepts +-8 %, which still tells an 80 GB part from a 94 GB or 141 GB one.
GPU_MEMORY_TOLERANCE = 0.08
# DIMM totals: exact up to rounding of MiB -> GiB.
MEMORY_TOLERANCE = 0.005
# NVMe capacity: vendors round the label (3.84 TB drive reports 3840755982336 bytes).
NVME_CAPACITY_TOLERANCE = 0.02


def check_graph(manifest=None, profile="production", optional=()):
    """The stage's :class:`CheckGraph`, with the checks the SKU's ``gates.<profile>.pre_deployment.optional``
    and ``optional`` name made not required."""
    graph = CheckGraph(STAGE, CHECKS)
    names = set(optional or ())
    if manifest:
        names.update(manifest.get("gates", {}).get(profile, {}).get(STAGE, {}).get("optional", []))
    return graph.with_required(sorted(names)) if names else graph


# --------------------------------------------------------------------------- observation


@dataclass
class Observation:
    """What was seen for one node.  Each step is ``None`` when not attempted.

    ``discovery``: :func:`_discovery.discover_node` output, or None without a lease
    source; ``endpoint``: ``{"url", "source"}`` (``map``, ``lease``, ``twin``);
    ``reachable``: ``(bool, reason)``; ``service_root``: the root body (dict);
    ``errors``: ``{step: message}`` for ``service_root``, ``login``, ``inventory``;
    ``inventory``: :class:`NodeInventory`; ``requests``: Redfish requests made;
    ``elapsed_s``: seconds spent on this node.
    """

    endpoint: dict = field(default_factory=dict)
    discovery: dict = None
    lease_source: str = None
    reachable: tuple = None
    service_root: dict = None
    login: bool = None
    inventory: object = None
    errors: dict = field(default_factory=dict)
    requests: int = 0
    elapsed_s: float = 0.0


@dataclass
class AuditContext:
    """Everything a check reads: the twin node, its SKU manifest, the observation, the SEL cutoff."""

    node: dict
    manifest: dict
    obs: Observation
    sel_cutoff: datetime = None
    now: float = 0.0

    @property
    def inv(self):
        return self.obs.inventory

    @property
    def bom(self):
        return self.manifest.get("bom", {})


# --------------------------------------------------------------------------- helpers


def _norm(text):
    return re.sub(r"[^a-z0-9]", "", str(text or "").lower())


def model_matches(expected, observed):
    """True when ``observed`` names the part ``expected`` names.

    Case, spaces and punctuation are ignored and either may contain the other, so
    ``"H100 80GB HBM3"`` matches ``"NVIDIA H100 80GB HBM3"``; an unreported model
    (None/empty) never matches.
    """
    e, o = _norm(expected), _norm(observed)
    return bool(e) and bool(o) and (e in o or o in e)


def _present(components):
    return [c for c in components if c.state not in ("Absent",)]


def _absent(components):
    return [c for c in components if c.state == "Absent"]


def _slot(comp):
    return comp.location or comp.id


def missing_slots(ids, expected_count):
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


def _incomplete_for(inv, *parts):
    """Entries of ``inv.incomplete`` (``{"part", "uri", "reason"}``) for any of ``parts``, as strings."""
    out = []
    for item in inv.incomplete or []:
        if isinstance(item, dict):
            if item.get("part") in parts:
                out.append("%s: %s" % (item.get("uri") or item.get("part"), item.get("reason")))
        elif any(p.lower() in str(item).lower() for p in parts):
            out.append(str(item))
    return out


def _unreadable(inv, words, what, remediation=None):
    gaps = _incomplete_for(inv, *words)
    if gaps:
        return failed("%s could not be read from the BMC: %s" % (what, "; ".join(gaps[:3])),
                      remediation or "rerun the stage; if it persists, reset the BMC (Manager.Reset) and "
                      "check its Redfish service", observed={"incomplete": gaps})
    return None


def _count_phrase(n, what):
    return "%d %s" % (n, what)


def _fmt_gib(value):
    return ("%.0f" % value) if value is not None and abs(value - round(value)) < 0.05 else "%.1f" % (value or 0)


# --------------------------------------------------------------------------- checks: discovery and access


def check_lease_captured(ctx):
    disc = ctx.obs.discovery
    if disc is None:
        return not_run("no DHCP lease source configured (set pre_deployment_lease_file and "
                       "pre_deployment_lease_format)")
    if disc["lease"] is None:
        return failed("%s (%s)" % (disc["note"], ctx.obs.lease_source or "lease file"),
                      "check the BMC's dedicated/shared NIC is cabled to the management switch port the twin "
                      "names, that the BMC is set to DHCP, and that MAC %s in the twin matches the BMC's label"
                      % ctx.node["bmc_mac"],
                      expected={"bmc_mac": ctx.node["bmc_mac"]})
    lease = disc["lease"]
    return passed(observed={"address": lease["address"], "mac": lease["mac"], "source": lease["source"],
                            "hostname": lease["hostname"]},
                  reason="BMC %s holds %s (%s lease)" % (lease["mac"], lease["address"], lease["source"]))


def check_address_reserved(ctx):
    disc = ctx.obs.discovery
    planned = disc["planned_address"]
    if disc["conflict"]:
        return failed("planned BMC address %s is leased to another MAC %s" % (planned, disc["conflict"]),
                      "find the device with MAC %s on the management network and move it, or correct the twin's "
                      "address plan for %s" % (disc["conflict"], ctx.node["hostname"]),
                      expected=planned, observed={"holder": disc["conflict"]})
    leased = disc["leased_address"]
    note = ("BMC already at its planned address" if leased == planned else
            "BMC currently at %s; reservation for %s takes effect at its next DHCP renewal" % (leased, planned))
    return passed(expected=planned, observed={"leased": leased, "reservation": disc["reservation"]["kea"]},
                  reason=note)


def check_bmc_reachable(ctx):
    ok, reason = ctx.obs.reachable if ctx.obs.reachable is not None else (False, "not attempted")
    url = ctx.obs.endpoint.get("url", "")
    if not ok:
        return failed("BMC not reachable at %s: %s" % (url, reason),
                      "check the BMC is powered (standby power), its management port link LED, the "
                      "switch port and VLAN, and that %s answers from the controller" % url,
                      observed={"url": url, "source": ctx.obs.endpoint.get("source")})
    return passed(observed={"url": url, "source": ctx.obs.endpoint.get("source")})


def validate_service_root(root):
    """Problems with a Redfish service root body (list of str; empty when valid).

    A valid root has ``RedfishVersion``, ``@odata.id`` ``/redfish/v1/`` (trailing
    slash optional) and links to ``Systems``, ``Chassis`` and ``Managers``
    (DSP0266 and the ServiceRoot schema).
    """
    if not isinstance(root, dict):
        return ["the service root is not a JSON object"]
    problems = []
    if not root.get("RedfishVersion"):
        problems.append("no RedfishVersion")
    odata_id = str(root.get("@odata.id", "")).rstrip("/")
    if odata_id != "/redfish/v1":
        problems.append("@odata.id is %r, not /redfish/v1" % root.get("@odata.id"))
    for link in ("Systems", "Chassis", "Managers"):
        if not isinstance(root.get(link), dict) or not root[link].get("@odata.id"):
            problems.append("no link to %s" % link)
    return problems


def check_service_root(ctx):
    err = ctx.obs.errors.get("service_root")
    if err:
        return failed("GET /redfish/v1 failed: %s" % err,
                      "the BMC answers TCP but its Redfish service does not: reset the BMC (ipmitool mc reset "
                      "cold or the vendor UI), and update BMC firmware if it recurs")
    root = ctx.obs.service_root
    if root is None and ctx.obs.errors.get("login"):
        return passed(reason="the service root requires authentication; it answered, login decides")
    problems = validate_service_root(root)
    if problems:
        return failed("the Redfish service root is invalid: %s" % "; ".join(problems),
                      "reset the BMC; if the service root stays invalid the BMC firmware needs an update",
                      observed={k: root.get(k) for k in ("RedfishVersion", "@odata.id", "Vendor")}
                      if isinstance(root, dict) else None)
    return passed(observed={"RedfishVersion": root.get("RedfishVersion"), "Vendor": root.get("Vendor"),
                            "Product": root.get("Product")})


def check_login(ctx):
    err = ctx.obs.errors.get("login")
    if err:
        return failed("login failed: %s" % err,
                      "check the BMC account in the vault/AWX credential; a new server may still have its "
                      "factory password (label on the chassis pull-out tag); if the BMC reports too many "
                      "sessions, wait for idle sessions to expire or reset the BMC")
    if not ctx.obs.login:
        return failed("login was not attempted", "rerun the stage")
    return passed()


def check_inventory_read(ctx):
    err = ctx.obs.errors.get("inventory")
    if err:
        return failed("reading the Redfish inventory failed: %s" % err,
                      "rerun the stage; if the BMC keeps failing, reset it (Manager.Reset) and check its "
                      "firmware version against the SKU")
    inv = ctx.inv
    if inv is None:
        return failed("no inventory was read", "rerun the stage")
    gaps = _incomplete_for(inv, "service", "systems", "chassis")
    if gaps:
        return failed("the BMC's Systems/Chassis could not be read: %s" % "; ".join(gaps[:3]),
                      "rerun the stage; if the BMC keeps failing, reset it (Manager.Reset)",
                      observed={"incomplete": gaps})
    missing = [what for what, items in (("Systems", inv.systems), ("Chassis", inv.chassis)) if not items]
    if missing:
        return failed("the BMC lists no %s" % " and no ".join(missing),
                      "the BMC has not finished initialising its inventory: wait a few minutes after AC power "
                      "on, then rerun; reset the BMC if it persists")
    return passed(observed={"systems": len(inv.systems), "chassis": len(inv.chassis),
                            "managers": len(inv.managers), "components": len(inv.components),
                            "incomplete": len(inv.incomplete or [])})


# --------------------------------------------------------------------------- checks: identity


def _main_system(ctx):
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


def check_chassis_serial(ctx):
    want = ctx.node["serial"]
    chassis = ctx.inv.chassis
    cid = ctx.manifest.get("system", {}).get("chassis_id")
    candidates = [c for c in chassis if c.get("id") == cid] if cid else []
    if not candidates:
        candidates = list(chassis)
    for c in candidates:
        if (c.get("serial") or "").strip().upper() == want.strip().upper():
            return passed(expected=want, observed=c.get("serial"),
                          reason="Chassis/%s serial %s" % (c.get("id"), c.get("serial")))
    # Some vendors leave Chassis SerialNumber empty and put it on the System.
    for s in ctx.inv.systems:
        if (s.get("serial") or "").strip().upper() == want.strip().upper() and not any(
                c.get("serial") for c in candidates):
            return passed(expected=want, observed=s.get("serial"),
                          reason="Systems/%s serial %s (chassis reports none)" % (s.get("id"), s.get("serial")))
    main = candidates[0] if candidates else {}
    seen = ", ".join("Chassis/%s=%s" % (c.get("id"), c.get("serial") or "none") for c in candidates[:4])
    return failed("twin says chassis serial %s at %s U%s, BMC reports %s"
                  % (want, ctx.node.get("rack"), ctx.node.get("u"), seen or "no chassis"),
                  "the server in %s U%s is not the one the twin plans there: compare the serial on the "
                  "pull-out tag with the twin, then swap the server or correct the twin"
                  % (ctx.node.get("rack"), ctx.node.get("u")),
                  expected=want, observed=main.get("serial"))


def check_system_model(ctx):
    sysdef = ctx.manifest.get("system", {})
    system = _main_system(ctx)
    if system is None:
        return failed("the BMC lists no ComputerSystem", "reset the BMC and rerun")
    want_model, want_mfr = sysdef.get("model"), sysdef.get("manufacturer")
    aliases = list(sysdef.get("model_aliases", []))
    observed = {"id": system.get("id"), "manufacturer": system.get("manufacturer"), "model": system.get("model")}
    problems = []
    if want_model is None:
        # The SKU says this vendor leaves Model null on the host system (GB200 System_0); the aliases must
        # then be found on another system (HGX_Baseboard_0 "GB200 NVL").
        if system.get("model") is not None and not any(model_matches(a, system.get("model")) for a in aliases):
            problems.append("model %r, expected none (SKU %s)" % (system.get("model"), ctx.manifest.get("sku")))
        elif aliases and not any(model_matches(a, s.get("model")) for s in ctx.inv.systems for a in aliases):
            problems.append("no system reports model %s" % " or ".join(repr(a) for a in aliases))
    elif not any(model_matches(m, system.get("model")) for m in [want_model] + aliases):
        problems.append("model %r, expected %r" % (system.get("model"), want_model))
    if want_mfr and system.get("manufacturer") and not model_matches(want_mfr, system.get("manufacturer")):
        problems.append("manufacturer %r, expected %r" % (system.get("manufacturer"), want_mfr))
    if problems:
        return failed("Systems/%s reports %s (SKU %s)" % (system.get("id"), " and ".join(problems),
                                                          ctx.manifest.get("sku")),
                      "the server is not the SKU the twin plans (%s): check the twin's SKU for %s or swap "
                      "the server" % (ctx.manifest.get("sku"), ctx.node["hostname"]),
                      expected={"manufacturer": want_mfr, "model": want_model, "aliases": aliases},
                      observed=observed)
    return passed(expected={"manufacturer": want_mfr, "model": want_model}, observed=observed,
                  reason="" if want_model else "Model null on Systems/%s as the SKU says; %s found"
                  % (system.get("id"), " or ".join(aliases) or "no alias required"))


# --------------------------------------------------------------------------- checks: bill of materials


def _tolerate_gaps(outcome, inv, parts, what):
    """Count checks: an unreadable part only matters when what was read falls short.

    A pass stays a pass (the unreadable parts are named in its reason); a fail
    says the part could not be read, so nobody hunts for hardware that may be there.
    """
    gaps = _incomplete_for(inv, *parts)
    if not gaps:
        return outcome
    if outcome.status == PASS:
        outcome.reason = ((outcome.reason + "; ") if outcome.reason else "") + \
            "%d part(s) of %s unreadable: %s" % (len(gaps), what, "; ".join(gaps[:2]))
        return outcome
    return failed("%s could not be read completely (%s); what was read: %s"
                  % (what, "; ".join(gaps[:2]), outcome.reason),
                  "rerun the stage; if the BMC keeps failing on this part, reset it (Manager.Reset)",
                  expected=outcome.expected, observed=outcome.observed)


def _system_of(comp):
    m = re.search(r"/Systems/([^/]+)/", comp.uri or "")
    return m.group(1) if m else None


def _per_system(ctx, comps, evaluate):
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


def _unique(components):
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


def _models(want):
    return [m for m in [want.get("model")] + list(want.get("models") or []) if m]


def check_cpus(ctx):
    want = ctx.bom["cpus"]

    def evaluate(cpus):
        present = _present(cpus)
        # A BMC that reports no model (DGX H100 Processors Model null) is not a mismatch: the count is checked.
        wrong = [c for c in present if c.model and not model_matches(want["model"], c.model)]
        unreported = [c for c in present if not c.model]
        observed = {"count": len(present), "models": sorted({c.model or "unreported" for c in present})}
        if len(present) != want["count"] or wrong:
            parts = ["expected %d × %s, found %d" % (want["count"], want["model"], len(present))]
            empty = [_slot(c) for c in _absent(cpus)] or missing_slots([c.id for c in present], want["count"])
            if empty and len(present) < want["count"]:
                parts.append("socket %s empty" % ", ".join(empty))
            if wrong:
                parts.append("%s is %s" % (", ".join(_slot(c) for c in wrong), wrong[0].model))
            return failed("; ".join(parts), "open the node and check the CPU sockets; the SKU needs %d × %s"
                          % (want["count"], want["model"]), expected=want, observed=observed)
        cores = want.get("cores")
        low = [c for c in present if cores and isinstance(c.extra.get("TotalCores"), int)
               and c.extra["TotalCores"] < cores]
        if low:
            return failed("%s reports %d cores, expected %d" % (_slot(low[0]), low[0].extra["TotalCores"], cores),
                          "check the BIOS core-disable settings, or replace the CPU", expected=want,
                          observed=observed)
        derived = [c for c in present if c.extra.get("model_source")]
        reason = ""
        if unreported:
            reason = "model not reported by the BMC for %s; count checked" % ", ".join(_slot(c) for c in unreported)
        elif derived:
            reason = "Model null on %s; model read from %s" % (", ".join(_slot(c) for c in derived),
                                                               derived[0].extra["model_source"])
        return passed(expected=want, observed=observed, reason=reason)

    return _tolerate_gaps(_per_system(ctx, ctx.inv.of_kind("cpu"), evaluate), ctx.inv, ("processors",),
                          "Processors")


def check_memory(ctx):
    want = ctx.bom["memory"]
    size = want.get("dimm_size_gib")

    def evaluate(dimms):
        present = [d for d in _present(dimms) if (d.memory_gib or 0) > 0]
        total = sum(d.memory_gib or 0 for d in present)
        observed = {"dimm_count": len(present), "total_gib": round(total, 2)}
        problems = []
        if len(present) != want["dimm_count"]:
            problems.append("expected %d DIMMs, found %d" % (want["dimm_count"], len(present)))
        if abs(total - want["total_gib"]) > MEMORY_TOLERANCE * max(want["total_gib"], 1):
            problems.append("%s GiB total, expected %s GiB" % (_fmt_gib(total), _fmt_gib(want["total_gib"])))
        if size:
            odd = [d for d in present if abs((d.memory_gib or 0) - size) > MEMORY_TOLERANCE * size]
            if odd:
                problems.append("%s is %s GiB, expected %s GiB"
                                % (_slot(odd[0]), _fmt_gib(odd[0].memory_gib), _fmt_gib(size)))
        if problems:
            empty = [_slot(d) for d in dimms if d not in present]
            if empty and len(present) < want["dimm_count"]:
                more = " (+%d more)" % (len(empty) - 8) if len(empty) > 8 else ""
                problems.append("slot %s empty%s" % (", ".join(empty[:8]), more))
            return failed("; ".join(problems),
                          "reseat or replace the DIMMs named; the SKU needs %d × %s GiB (%s GiB)"
                          % (want["dimm_count"], _fmt_gib(size or want["total_gib"] / max(want["dimm_count"], 1)),
                             _fmt_gib(want["total_gib"])),
                          expected=want, observed=observed)
        return passed(expected=want, observed=observed)

    return _tolerate_gaps(_per_system(ctx, ctx.inv.of_kind("dimm"), evaluate), ctx.inv, ("memory",), "Memory")


def check_gpus(ctx):
    return _tolerate_gaps(_check_gpus(ctx), ctx.inv, ("processors", "pcie"), "the GPU inventory")


def _check_gpus(ctx):
    want = ctx.bom["gpus"]
    count = want["count"]
    gpus = ctx.inv.of_kind("gpu")
    present = _present(gpus)
    observed = {"count": len(present), "models": sorted({g.model or "unknown" for g in present})}
    if count == 0:
        if present:
            return failed("SKU has no GPUs, found %d" % len(present),
                          "check the twin's SKU for %s" % ctx.node["hostname"], expected=want, observed=observed)
        return passed(expected=want, observed=observed, reason="no GPUs in this SKU")
    model = want.get("model")
    label = "%d × %s" % (count, model or "GPU")
    problems = []
    if len(present) != count:
        problems.append("expected %s, found %d" % (label, len(present)))
        if len(present) < count:
            empty = [_slot(g) for g in _absent(gpus)] or missing_slots([g.id for g in present], count)
            if empty:
                problems.append("slot %s empty" % ", ".join(empty))
    wrong = [g for g in present if model and not model_matches(model, g.model)]
    if wrong:
        problems.append("%s is %s, expected %s" % (", ".join(_slot(g) for g in wrong[:4]),
                                                   wrong[0].model or "unreported", model))
    mem = want.get("memory_gib")
    if mem:
        small = [g for g in present if g.memory_gib is not None
                 and abs(g.memory_gib - mem) > GPU_MEMORY_TOLERANCE * mem]
        if small:
            problems.append("%s reports %s GiB memory, expected %s GiB" % (_slot(small[0]), _fmt_gib(
                small[0].memory_gib), _fmt_gib(mem)))
    if problems:
        return failed("; ".join(problems),
                      "reseat or replace the GPU named (check the baseboard/riser and its power cables); the SKU "
                      "needs %s" % label, expected=want, observed=observed)
    return passed(expected=want, observed=observed)


def check_gpu_pcie_links(ctx):
    want = ctx.bom["gpus"]
    gpus = _present(ctx.inv.of_kind("gpu"))
    if want["count"] == 0:
        return passed(reason="no GPUs in this SKU")
    exp = want.get("pcie")
    reported = [g for g in gpus if g.pcie_width is not None or g.pcie_gen is not None]
    if not reported:
        return not_run("the BMC reports no PCIe link state for the GPUs (%s)" % ctx.inv.service.get("vendor", "BMC")
                       if ctx.inv.service else "the BMC reports no PCIe link state for the GPUs")
    bad = []
    for g in reported:
        w_exp = exp["width"] if exp else g.pcie_width_max
        g_exp = exp["gen"] if exp else g.pcie_gen_max
        low_w = w_exp is not None and g.pcie_width is not None and g.pcie_width < w_exp
        low_g = g_exp is not None and g.pcie_gen is not None and g.pcie_gen < g_exp
        if low_w or low_g:
            bad.append("%s at x%s Gen%s, expected x%s Gen%s" % (_slot(g), g.pcie_width, g.pcie_gen, w_exp, g_exp))
    observed = {g.id: {"width": g.pcie_width, "gen": g.pcie_gen} for g in reported}
    if bad:
        return failed("PCIe link downtrained: %s" % "; ".join(bad),
                      "reseat the GPU/riser and its PCIe cables, check the slot's retimer, then rerun; "
                      "replace the GPU or riser if the link stays degraded",
                      expected=exp, observed=observed)
    return passed(expected=exp, observed=observed,
                  reason="%d GPU links at expected width/speed" % len(reported)
                  + ("" if len(reported) == len(gpus) else "; %d GPUs report no link" % (len(gpus) - len(reported))))


def check_nics(ctx):
    return _tolerate_gaps(_check_nics(ctx), ctx.inv, ("network_adapters", "network_ports"), "NetworkAdapters")


def _check_nics(ctx):
    wanted = ctx.bom.get("nics") or []
    nics = _present(ctx.inv.of_kind("nic") + ctx.inv.of_kind("dpu"))
    observed = [{"id": n.id, "model": n.model, "ports": n.ports, "speed_gbps": n.speed_gbps} for n in nics]
    if not wanted:
        return passed(observed=observed, reason="SKU declares no NICs")
    problems = []
    named = [w["model"] for w in wanted if w.get("model")]
    for want in wanted:
        if want.get("model"):
            match = [n for n in nics if model_matches(want["model"], n.model)]
        else:
            # The BMC reports no model for these adapters (DGX H100): count those no other entry claims.
            match = [n for n in nics if not any(model_matches(m, n.model) for m in named)]
        desc = "%d × %s" % (want["count"], want.get("model") or "NIC (model not reported)")
        if len(match) < want["count"]:
            problems.append("expected %s, found %d" % (desc, len(match)))
            continue
        if want.get("ports"):
            few = [n for n in match if n.ports is not None and n.ports < want["ports"]]
            if few:
                problems.append("%s has %d ports, expected %d" % (_slot(few[0]), few[0].ports, want["ports"]))
        if want.get("speed_gbps"):
            slow = [n for n in match if n.speed_gbps is not None and n.speed_gbps < want["speed_gbps"]]
            if slow:
                problems.append("%s links at %g Gb/s, expected %g Gb/s"
                                % (_slot(slow[0]), slow[0].speed_gbps, want["speed_gbps"]))
    if problems:
        return failed("; ".join(problems),
                      "check the adapters named are seated in the slots the SKU plans and their transceivers "
                      "and cables are the rated ones", expected=wanted, observed=observed)
    return passed(expected=wanted, observed=observed)


def check_nvme(ctx):
    return _tolerate_gaps(_check_nvme(ctx), ctx.inv, ("storage", "drives"), "Storage")


def _check_nvme(ctx):
    want = ctx.bom.get("nvme")
    models = _models(want or {})
    # Drives whose protocol the BMC does not report (Supermicro: Protocol null) count when the model is the SKU's.
    drives = _unique(_present(ctx.inv.of_kind("nvme") + [d for d in ctx.inv.of_kind("drive")
                                                         if any(model_matches(m, d.model) for m in models)]))
    observed = {"count": len(drives), "models": sorted({d.model or "unreported" for d in drives})}
    if not want:
        return passed(observed=observed, reason="SKU declares no NVMe drives")
    problems = []
    if len(drives) != want["count"]:
        problems.append("expected %d NVMe drives, found %d" % (want["count"], len(drives)))
    if models:
        wrong = [d for d in drives if d.model and not any(model_matches(m, d.model) for m in models)]
        if wrong:
            problems.append("%s is %s, expected %s" % (_slot(wrong[0]), wrong[0].model, " or ".join(models)))
    if want.get("capacity_gb"):
        # The capacity is the primary model's (GB200: 8 × 3.84 TB data drives; the M.2 boot drive is smaller).
        small = [d for d in drives if d.capacity_gb is not None
                 and (not want.get("model") or model_matches(want["model"], d.model))
                 and d.capacity_gb < want["capacity_gb"] * (1 - NVME_CAPACITY_TOLERANCE)]
        if small:
            problems.append("%s holds %.0f GB, expected %.0f GB"
                            % (_slot(small[0]), small[0].capacity_gb, want["capacity_gb"]))
    if problems:
        return failed("; ".join(problems), "reseat or replace the drives named; check the drive bay backplane",
                      expected=want, observed=observed)
    return passed(expected=want, observed=observed)


def check_psus(ctx):
    want = ctx.bom.get("psus")
    if want and want["count"] == 0:
        return passed(reason="the SKU's power supplies are not managed by this BMC (count 0)")
    gap = _unreadable(ctx.inv, ("psu",), "power supplies")
    if gap:
        return gap
    psus = ctx.inv.of_kind("psu")
    present = _present(psus)
    sick = [p for p in present if p.health in ("Warning", "Critical")]
    observed = {"count": len(present), "unhealthy": {_slot(p): p.health for p in sick}}
    problems = []
    if want and len(present) < want["count"]:
        empty = [_slot(p) for p in _absent(psus)]
        problems.append("expected %d PSUs, found %d%s" % (want["count"], len(present),
                                                          "; bay %s empty" % ", ".join(empty) if empty else ""))
    if not want and not present:
        problems.append("the BMC reports no power supplies")
    for p in sick:
        problems.append("%s health %s" % (_slot(p), p.health))
    if problems:
        return failed("; ".join(problems),
                      "check each PSU's AC cord and PDU breaker; replace a PSU that stays unhealthy",
                      expected=want, observed=observed)
    return passed(expected=want, observed=observed)


def check_fans_thermal(ctx):
    gap = _unreadable(ctx.inv, ("fans", "readings"), "fans and thermal sensors")
    if gap:
        return gap
    want = ctx.bom.get("fans") or {}
    fans = _present(ctx.inv.of_kind("fan"))
    fan_readings = [r for r in ctx.inv.readings if r.kind == "fan"]
    temps = [r for r in ctx.inv.readings if r.kind == "temperature"]
    n_fans = max(len(fans), len(fan_readings))
    problems = []
    if want.get("min_count") and n_fans < want["min_count"]:
        problems.append("expected at least %d fans, found %d" % (want["min_count"], n_fans))
    for f in fans:
        if f.health in ("Warning", "Critical"):
            problems.append("fan %s health %s" % (_slot(f), f.health))
    for r in fan_readings:
        if r.health in ("Warning", "Critical"):
            problems.append("fan %s health %s" % (r.name or r.id, r.health))
    if not temps:
        problems.append("no temperature sensors reported")
    for r in temps:
        if r.value is not None and r.upper_critical is not None and r.value >= r.upper_critical:
            problems.append("%s at %.0f °C, critical %.0f °C" % (r.name or r.id, r.value, r.upper_critical))
        elif r.health == "Critical" and r.value is not None:
            # A sensor without a reading (State Absent: no transceiver in the port) says nothing about heat.
            problems.append("%s health Critical" % (r.name or r.id))
    for r in ctx.inv.readings:
        if r.kind == "leak" and r.health in ("Warning", "Critical"):
            problems.append("leak detector %s reports a leak" % (r.name or r.id))
    observed = {"fans": n_fans, "temperature_sensors": len(temps)}
    if problems:
        return failed("; ".join(dict.fromkeys(problems)),
                      "replace the fans named, check airflow (blanking panels, hot aisle) and rerun",
                      expected=want, observed=observed)
    return passed(expected=want, observed=observed)


def check_health_rollup(ctx):
    inv = ctx.inv
    worst = inv.health_rollup()
    bad = ["Systems/%s %s" % (s.get("id"), s.get("health")) for s in inv.systems
           if s.get("health") in ("Warning", "Critical")]
    bad += ["Chassis/%s %s" % (c.get("id"), c.get("health")) for c in inv.chassis
            if c.get("health") in ("Warning", "Critical")]
    bad += ["%s %s" % (_slot(c), c.health) for c in inv.components if c.health in ("Warning", "Critical")]
    if worst in ("Warning", "Critical"):
        more = " (+%d more)" % (len(bad) - 6) if len(bad) > 6 else ""
        return failed("health roll-up %s: %s%s" % (worst, ", ".join(bad[:6]), more),
                      "read the SEL and the named components' status, fix the cause and rerun",
                      expected="OK", observed={"rollup": worst, "unhealthy": bad})
    if worst is None:
        return failed("no component reports a health state", "check the BMC inventory is populated; reset "
                      "the BMC if it stays empty", expected="OK", observed={"rollup": None})
    return passed(expected="OK", observed={"rollup": worst})


def parse_cutoff(value, now=None):
    """SEL cutoff from ``'30d'``/``'12h'``/``'90m'``, an ISO 8601 time, or ``'all'``/None-equivalent.

    Returns an aware :class:`datetime` (UTC) or None for ``'all'`` (every entry counts).
    Raises :class:`ValidationError` on anything else.
    """
    now = time.time() if now is None else now
    if value in (None, "", "all"):
        return None
    text = str(value).strip()
    m = re.match(r"^(\d+(?:\.\d+)?)\s*([dhm])$", text)
    if m:
        seconds = float(m.group(1)) * {"d": 86400, "h": 3600, "m": 60}[m.group(2)]
        return datetime.fromtimestamp(now - seconds, tz=timezone.utc)
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ValidationError("SEL cutoff %r is neither a duration (30d, 12h, 90m) nor an ISO 8601 time" % text,
                              where="sel_since")
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)


def _entry_time(created):
    if not created:
        return None
    try:
        parsed = datetime.fromisoformat(str(created).replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=timezone.utc)


def check_sel_clean(ctx):
    gap = _unreadable(ctx.inv, ("sel",), "the SEL")
    if gap:
        return gap
    cutoff = ctx.sel_cutoff
    critical = []
    for entry in ctx.inv.sel:
        if entry.severity != "Critical":
            continue
        when = _entry_time(entry.created)
        # An entry without a readable time counts: it may be recent (never a false pass).
        if cutoff is None or when is None or when >= cutoff:
            critical.append((when or datetime.max.replace(tzinfo=timezone.utc), entry))
    since = cutoff.strftime("%Y-%m-%dT%H:%M:%SZ") if cutoff else "the start of the log"
    if critical:
        critical.sort(key=lambda pair: pair[0])
        last = critical[-1][1]
        return failed("%d critical SEL entr%s since %s; latest %s: %s"
                      % (len(critical), "y" if len(critical) == 1 else "ies", since, last.created or "undated",
                         (last.message or last.message_id or "").strip()),
                      "read the SEL entries, fix their cause (replace the part they name), then clear the SEL "
                      "(LogService.ClearLog) and rerun",
                      observed=[{"id": e.id, "created": e.created, "message": e.message, "message_id": e.message_id}
                                for _when, e in critical[-5:]])
    return passed(observed={"entries": len(ctx.inv.sel), "critical_since_cutoff": 0},
                  reason="no critical SEL entries since %s" % since)


def check_firmware_inventory(ctx):
    gap = _unreadable(ctx.inv, ("firmware",), "FirmwareInventory")
    if gap:
        return gap
    items = ctx.inv.firmware
    if not items:
        return failed("FirmwareInventory lists no members",
                      "the BMC has not populated its firmware inventory: wait after AC power on, reset the BMC "
                      "if it stays empty")
    missing = []
    for comp in ctx.manifest.get("firmware", []):
        match = comp.get("match") or {}
        if not match.get("id") and not match.get("name"):
            continue
        # The member Id is the key; the Name pattern is used only where the SKU gives no Id pattern.
        if match.get("id"):
            found = [i for i in items if re.fullmatch(match["id"], i.id or "")]
        else:
            found = [i for i in items if re.fullmatch(match["name"], i.name or "")]
        need = match.get("count", 1)
        if len(found) < need:
            missing.append("%s (%s: %d of %d)" % (comp["id"], match.get("id") or match.get("name"), len(found), need))
    observed = {"items": len(items)}
    if not ctx.inv.capabilities.get("firmware_ids_only"):
        observed["version_unknown"] = [i.id for i in items if i.version is None][:10]
    if missing:
        return failed("FirmwareInventory has no member for %s" % ", ".join(missing),
                      "the BMC does not report these components: check they are installed and the BMC firmware "
                      "is recent enough to inventory them", observed=observed)
    return passed(observed=observed, reason="%d FirmwareInventory members" % len(items))


# Reset types that give out-of-band power control: one to power on, one to power off, one to restart.
_ON = ("On", "ForceOn")
_OFF = ("ForceOff", "GracefulShutdown", "PushPowerButton")
_RESTART = ("ForceRestart", "GracefulRestart", "PowerCycle")


def _reset_types(ctx):
    caps = ctx.inv.capabilities or {}
    if caps.get("power_actions"):
        return list(caps["power_actions"]), caps.get("power_target")
    system = _main_system(ctx)
    if system:
        for key in ("reset_types", "reset_allowable_values"):
            if system.get(key):
                return list(system[key]), system.get("reset_target")
    return [], None


def check_power_control(ctx):
    gap = _unreadable(ctx.inv, ("capabilities",), "the Reset action's ActionInfo")
    if gap:
        return gap
    types, target = _reset_types(ctx)
    if not types:
        return failed("Systems/%s advertises no ComputerSystem.Reset action" % ((_main_system(ctx) or {}).get("id")),
                      "update the BMC firmware; without Redfish power control provisioning cannot boot the node "
                      "into its ephemeral runtime")
    # Restart can be composed from off + on (HPE Cray EX offers On, ForceOff, Off only).
    lacking = [what for what, options in (("power on", _ON), ("power off", _OFF + ("Off",)))
               if not any(t in types for t in options)]
    if lacking:
        return failed("ComputerSystem.Reset offers %s, no way to %s" % (", ".join(types), " or ".join(lacking)),
                      "update the BMC firmware so ComputerSystem.Reset supports On, ForceOff and ForceRestart",
                      observed=types)
    restart = any(t in types for t in _RESTART)
    return passed(observed={"reset_types": types, "target": target},
                  reason="" if restart else "no restart type; a restart is done as power off then on")


CHECK_FUNCTIONS = {
    "lease_captured": check_lease_captured,
    "address_reserved": check_address_reserved,
    "bmc_reachable": check_bmc_reachable,
    "service_root": check_service_root,
    "login": check_login,
    "inventory_read": check_inventory_read,
    "chassis_serial": check_chassis_serial,
    "system_model": check_system_model,
    "cpus": check_cpus,
    "memory": check_memory,
    "gpus": check_gpus,
    "gpu_pcie_links": check_gpu_pcie_links,
    "nics": check_nics,
    "nvme": check_nvme,
    "psus": check_psus,
    "fans_thermal": check_fans_thermal,
    "health_rollup": check_health_rollup,
    "sel_clean": check_sel_clean,
    "firmware_inventory": check_firmware_inventory,
    "power_control": check_power_control,
}


def judge(node, manifest, obs, run_id, graph=None, sel_cutoff=None, now=None):
    """Run every check for one node; returns ``(results, verdict)``.

    ``results``: list of :class:`CheckResult` in graph order; ``verdict``:
    :class:`GateVerdict` (pass only when every required check passed).
    """
    graph = graph or check_graph(manifest)
    ctx = AuditContext(node=node, manifest=manifest, obs=obs, sel_cutoff=sel_cutoff,
                       now=time.time() if now is None else now)
    results = graph.run(node["hostname"], run_id, CHECK_FUNCTIONS, ctx)
    return results, compute_gate(graph, results)


# --------------------------------------------------------------------------- dispatch list


def dispatch_rows(nodes, outcomes):
    """Dispatch list rows for this run's nodes whose gate did not pass (``_report.gate_rows`` each).

    ``nodes``: ``{hostname: twin node}``; ``outcomes``: ``{hostname: {"gate": GateVerdict
    dict, "results": [CheckResult dict]}}``.  Rows have ``_report.DISPATCH_FIELDS``, in rack walk order.
    """
    rows = []
    for host, out in outcomes.items():
        gate = out["gate"]
        if gate["status"] != PASS:
            rows.extend(gate_rows(nodes.get(host, {}), host, STAGE, gate.get("failing") or [],
                                  {r["check"]: r for r in out["results"]}))
    return sort_rows(rows)


def write_dispatch(rows, directory, run_id, latest=True):
    """Write ``dispatch-<run_id>.csv`` and ``.json`` (and, with ``latest``, ``dispatch-latest.*``) under ``directory``.

    With a ledger the stage writes ``dispatch-latest.*`` from it instead (``_report.write_dispatch_latest``: every
    node and stage), so ``latest`` is only for a run without one.  Returns ``{"csv": path, "json": path}`` of the
    run's files.  Raises :class:`SymphonyError` when the directory cannot be written.
    """
    paths = write_rows(directory, "dispatch-%s" % run_id, rows, run_id=run_id, stage=STAGE)
    if latest:
        write_rows(directory, "dispatch-latest", rows, run_id=run_id, stage=STAGE)
    return paths


def scrub(value, secrets):
    """Return ``value`` (str/list/dict, nested) with every occurrence of each secret replaced by ``********``."""
    secrets = [s for s in secrets if s]
    if not secrets:
        return value
    if isinstance(value, str):
        for s in secrets:
            value = value.replace(s, "********")
        return value
    if isinstance(value, dict):
        return {k: scrub(v, secrets) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [scrub(v, secrets) for v in value]
    return value


# --------------------------------------------------------------------------- observing over the network


AUDIT_WORKERS = 128


@dataclass
class StageSettings(BmcFleetSettings):
    """How the stage reaches the BMCs (:class:`BmcFleetSettings`, ``workers`` 128) and where it writes.

    ``sel_since``: SEL cutoff (``30d``, ISO time, ``all``); ``lease_file``/``lease_format``: the
    DHCP leases (``isc``, ``kea``, ``dnsmasq``); ``dispatch_dir``: where the dispatch list goes;
    ``profile``: gate profile of the SKU manifests.
    """

    workers: int = AUDIT_WORKERS
    sel_since: str = "30d"
    lease_file: str = None
    lease_format: str = "isc"
    dispatch_dir: str = None
    profile: str = "production"


def load_bmc_map(path):
    """Read a BMC map (the emulator's ``bmcs.json`` or an operator's file).

    Accepted shapes: ``{"ca_bundle": path, "nodes": {host: entry}}`` (the emulator's),
    ``{"bmcs": {host: entry}}``, ``{"nodes": [{"hostname": ...}]}`` or ``{host: entry}``; an entry holds ``url`` (or ``address`` [+ ``port``,
    ``scheme``]) and optionally ``username``, ``password``, ``ca_bundle``/``ca_path``,
    ``validate_certs``.  Returns ``{host: {"url", "username", "password", "ca_path",
    "validate_certs"}}``.  Raises :class:`ValidationError` naming the file and host.
    """
    try:
        with open(path, "r", encoding="utf-8") as handle:
            doc = json.load(handle)
    except OSError as exc:
        raise ValidationError("cannot read BMC map: %s" % exc.strerror, where=path)
    except ValueError as exc:
        raise ValidationError("BMC map is not valid JSON: %s" % exc, where=path)
    default_ca = doc.get("ca_bundle") if isinstance(doc, dict) and isinstance(doc.get("ca_bundle"), str) else None
    if isinstance(doc, dict) and isinstance(doc.get("bmcs"), dict):
        entries = doc["bmcs"]
    elif isinstance(doc, dict) and isinstance(doc.get("nodes"), dict):
        entries = doc["nodes"]
    elif isinstance(doc, dict) and isinstance(doc.get("nodes"), list):
        entries = {}
        for i, n in enumerate(doc["nodes"]):
            if not isinstance(n, dict) or not n.get("hostname"):
                raise ValidationError("$.nodes[%d] has no hostname" % i, where=path)
            entries[n["hostname"]] = n
    elif isinstance(doc, dict):
        entries = doc
    else:
        raise ValidationError("BMC map must be a JSON object", where=path)
    out = {}
    for host, entry in entries.items():
        if not isinstance(entry, dict):
            continue
        url = entry.get("url") or entry.get("base_url")
        if not url and entry.get("address"):
            url = "%s://%s%s" % (entry.get("scheme", "https"), entry["address"],
                                 ":%s" % entry["port"] if entry.get("port") else "")
        if not url:
            raise ValidationError("$.%s has no url or address" % host, where=path)
        creds = entry.get("credentials") if isinstance(entry.get("credentials"), dict) else entry
        out[host] = {"url": url, "username": creds.get("username") or creds.get("user"),
                     "password": creds.get("password"),
                     "ca_path": entry.get("ca_bundle") or entry.get("ca_path") or entry.get("cafile") or default_ca,
                     "validate_certs": entry.get("validate_certs", entry.get("verify"))}
    return out


def resolve_endpoint(node, bmc_map, discovery, scheme="https"):
    """``({"url", "source"}, entry)`` for a node: the map wins, then the DHCP lease, then the twin's address."""
    if bmc_map is not None and node["hostname"] in bmc_map:
        entry = bmc_map[node["hostname"]]
        return {"url": entry["url"], "source": "map"}, entry
    if discovery and discovery.get("leased_address"):
        return {"url": "%s://%s" % (scheme, discovery["leased_address"]), "source": "lease"}, {}
    return {"url": "%s://%s" % (scheme, node["bmc_address"]), "source": "twin"}, {}


def _host_port(url):
    parts = urlsplit(url if "://" in url else "https://" + url)
    return parts.hostname, parts.port or (443 if parts.scheme == "https" else 80)


def audit_client(*args, **kwargs):
    """The audit's :class:`RedfishClient`: ``keep_alive=True`` (one TCP+TLS handshake per connection
    instead of one per request; an audit's burst of GETs lasts seconds), other arguments as given."""
    kwargs.setdefault("keep_alive", True)
    return RedfishClient(*args, **kwargs)


def observe_node(node, endpoint, entry, settings, discovery=None, lease_source=None, client_factory=None,
                 reader=None, registries=None, probe=tcp_reachable):
    """Observe one node over the network; never raises for the node's own problems.

    ``endpoint``/``entry`` from :func:`resolve_endpoint`; ``client_factory``: callable
    with :class:`RedfishClient`'s signature (tests inject one); ``reader``:
    ``callable(client) -> NodeInventory`` (default :func:`read_for_audit`);
    ``probe``: ``callable(host, port, timeout_s) -> (ok, reason)`` (default a TCP connect).
    Each step's failure lands in ``Observation.errors`` and the later steps are
    skipped, so the checks become ``fail``/``blocked`` with that reason.  Returns
    ``(Observation, warnings)``; warnings are strings without secrets.
    """
    started = time.monotonic()
    obs = Observation(endpoint=endpoint, discovery=discovery, lease_source=lease_source)
    warnings = []
    host, port = _host_port(endpoint["url"])
    obs.reachable = probe(host, port, settings.connect_timeout)
    if not obs.reachable[0]:
        obs.elapsed_s = time.monotonic() - started
        return obs, warnings
    if client_factory is None:
        client_factory = audit_client
    client = None
    try:
        client = bmc_client(client_factory, endpoint["url"], entry, settings, registries=registries)
        try:
            client.open()
        except SymphonyError as exc:
            obs.service_root = getattr(client, "service_root", None)
            step = "login"
            if obs.service_root is None and type(exc).__name__ != "RedfishAuthError":
                step = "service_root"
            obs.errors[step] = str(exc)
            return obs, warnings
        obs.service_root = client.service_root
        obs.login = True
        reader = reader or read_for_audit
        try:
            obs.inventory = reader(client)
        except SymphonyError as exc:
            obs.errors["inventory"] = str(exc)
        except Exception as exc:  # pylint: disable=broad-except
            # One BMC's odd tree must fail that node, not the fleet run.
            obs.errors["inventory"] = "unexpected %s while reading the inventory: %s" % (type(exc).__name__, exc)
    except SymphonyError as exc:
        obs.errors.setdefault("service_root", str(exc))
    finally:
        if client is not None:
            try:
                client.close()
            except Exception:  # pylint: disable=broad-except
                pass
            obs.requests = getattr(client, "requests", 0)
            warnings.extend(getattr(client, "warnings", []) or [])
        obs.elapsed_s = time.monotonic() - started
    return obs, warnings


# What the audit reads: everything but the BIOS attributes (provisioning's concern) and the bodies of the
# FirmwareInventory members (their versions are provisioning's; the audit needs the member ids).
AUDIT_SECTIONS = ("systems", "chassis", "managers", "sel", "readings", "capabilities", "firmware_ids")


def read_for_audit(client):
    """Read what the pre-deployment checks judge, in as few Redfish requests as the BMC allows.

    ``_redfish_inventory.read_inventory`` over :data:`AUDIT_SECTIONS`: ``$expand`` where the
    service advertises it, several GETs at once up to the client's per-BMC cap, and the
    FirmwareInventory member list (ids and links, one request per page instead of one per
    member: 106 members on the Supermicro HGX capture).  Returns a :class:`NodeInventory`
    whose ``firmware`` items carry ``id``/``uri`` only (``capabilities["firmware_ids_only"]``
    is True).  Raises :class:`RedfishError` only when the service root cannot be read.
    """
    return read_inventory(client, sections=AUDIT_SECTIONS)


def _compact(result):
    return {"check": result.check, "status": result.status, "reason": result.reason,
            "remediation": result.remediation}


def run_stage(nodes, manifests, settings, run_id=None, client_factory=None, reader=None, now=None,
              ledger=None, return_details=False):
    """Audit many nodes at once with a bounded worker pool (DESIGN.md "Scale").

    ``nodes``: ``{hostname: twin node dict}``; ``manifests``: ``{sku: manifest}``;
    ``settings``: :class:`StageSettings`; ``ledger``: an open :class:`Ledger`
    (or None to open ``settings.ledger``; no ledger when that is None too).
    Returns ``{"run_id", "hosts": {host: {"gate", "reason", "failing", "checks",
    "endpoint", "requests", "elapsed_s"}}, "summary": {status: count}, "dispatch":
    {"rows": n, "csv", "json"}, "reservations": {host: {...}}, "warnings": [...],
    "requests": total, "wall_s": seconds}``.  Secrets in ``settings`` never appear
    in it, in the ledger or in the dispatch files.
    Raises :class:`SymphonyError` for problems of the whole run (unreadable lease
    file, bad map, unknown SKU, ledger not writable); a node's own problems end in
    its results.
    """
    started = time.monotonic()
    now = time.time() if now is None else now
    run_id = run_id or new_run_id("pre")
    cutoff = parse_cutoff(settings.sel_since, now)
    for host, node in nodes.items():
        if node.get("sku") not in manifests:
            raise ValidationError("SKU %r of %s has no manifest (known: %s)"
                                  % (node.get("sku"), host, ", ".join(sorted(manifests))), where=host)
    index = None
    if settings.lease_file:
        index = LeaseIndex(read_leases(settings.lease_file, settings.lease_format), now=now)
    bmc_map = load_bmc_map(settings.bmc_map) if settings.bmc_map else None
    try:
        registries = MessageRegistries(directory=settings.registry_dir)
    except OSError as exc:
        raise ValidationError("cannot load the Redfish message registries: %s" % exc, where="registry_dir")
    secrets = [settings.password] + [e.get("password") for e in (bmc_map or {}).values()]
    graphs = {sku: check_graph(m, settings.profile, settings.optional) for sku, m in manifests.items()}

    items = []
    for host, node in nodes.items():
        discovery = discover_node(node, index) if index is not None else None
        endpoint, entry = resolve_endpoint(node, bmc_map, discovery)
        items.append((host, {"node": node, "discovery": discovery, "endpoint": endpoint, "entry": entry}))

    # Parallel GETs to one BMC shorten that BMC's read, but cost controller CPU (threads, a TLS handshake per
    # connection): measured at 300 emulated BMCs, 128 workers, 100 ms latency, 18 requests per BMC, the stage
    # took 9.7 s of CPU with one GET at a time per BMC and 14.5 s with four.  So they are used only while the
    # pool has more workers than nodes; a saturated pool reads each BMC one GET at a time.
    node_settings = settings
    if len(items) >= settings.workers and settings.max_concurrency > 1:
        node_settings = dataclasses.replace(settings, max_concurrency=1)

    def work(host, item):
        obs, warns = observe_node(item["node"], item["endpoint"], item["entry"], node_settings, item["discovery"],
                                  settings.lease_file, client_factory, reader, registries)
        manifest = manifests[item["node"]["sku"]]
        results, verdict = judge(item["node"], manifest, obs, run_id, graphs[item["node"]["sku"]], cutoff, now)
        return obs, warns, results, verdict

    outcomes = run_batch(items, work, workers=settings.workers, per_key=settings.per_bmc,
                         key=lambda item: item["endpoint"]["url"])
    all_results, verdicts, hosts, warnings, total_requests, by_host = [], {}, {}, [], 0, {}
    for host, item in items:
        out = outcomes[host]
        if out.ok:
            obs, warns, results, verdict = out.value
        else:
            # Only a bug can land here (observe_node handles a node's own failures); judge it anyway so the
            # node ends fail with the reason instead of disappearing.
            obs = Observation(endpoint=item["endpoint"], discovery=item["discovery"], lease_source=settings.lease_file,
                              reachable=(True, ""), errors={"service_root": out.error.get("msg", "error")})
            warns = []
            results, verdict = judge(item["node"], manifests[item["node"]["sku"]], obs, run_id,
                                     graphs[item["node"]["sku"]], cutoff, now)
        results = [type(r).from_dict(scrub(r.to_dict(), secrets)) for r in results]
        verdict.reason = scrub(verdict.reason, secrets)
        warnings.extend("%s: %s" % (host, w) for w in scrub(list(warns), secrets))
        total_requests += obs.requests
        all_results.extend(results)
        by_host[host] = results
        verdicts[host] = verdict
        entry = {"gate": verdict.status, "reason": verdict.reason, "failing": verdict.failing,
                 "checks": [_compact(r) for r in results], "endpoint": item["endpoint"],
                 "requests": obs.requests, "elapsed_s": round(obs.elapsed_s, 3)}
        if return_details:
            entry["results"] = [r.to_dict() for r in results]
        hosts[host] = entry

    own_ledger = None
    rows = dispatch_rows(nodes, {h: {"gate": verdicts[h].to_dict(),
                                     "results": [r.to_dict() for r in by_host[h]]}
                                 for h in verdicts})
    dispatch = {"rows": len(rows), "items": rows}
    if ledger is None and settings.ledger:
        ledger = own_ledger = open_ledger(settings.ledger)
    try:
        if ledger is not None and all_results:
            ledger.record_results(all_results)
            for host, verdict in verdicts.items():
                ledger.record_gate(verdict, run_id)
        if settings.dispatch_dir:
            # dispatch-<run_id>: this run's nodes; dispatch-latest: the whole fleet, every stage, from the ledger
            # (a --limit run must not drop the others from the technicians' list)
            dispatch.update(write_dispatch(rows, settings.dispatch_dir, run_id, latest=ledger is None))
            if ledger is not None:
                dispatch["latest"] = write_dispatch_latest(ledger, settings.dispatch_dir, nodes)
    finally:
        if own_ledger is not None:
            own_ledger.close()
    summary = {}
    for verdict in verdicts.values():
        summary[verdict.status] = summary.get(verdict.status, 0) + 1
    reservations = {h: item["discovery"]["reservation"] for h, item in items if item["discovery"]}
    return {"run_id": run_id, "hosts": hosts, "summary": summary, "dispatch": dispatch,
            "reservations": reservations, "warnings": sorted(set(warnings)), "requests": total_requests,
            "wall_s": round(time.monotonic() - started, 3)}


def module_twin_audit(params, check_mode=False):
    """The ``twin_audit`` module's work: params dict in, result dict out (see the module's RETURN).

    Nodes come from ``params["nodes"]`` (twin node dicts, e.g. hostvars ``symphony_twin``) or from
    ``params["twin"]`` filtered by ``params["hosts"]``; manifests from ``params["sku_dir"]``.  In check
    mode everything is observed and judged, nothing is written (ledger, dispatch files).
    Raises :class:`SymphonyError` for problems of the whole run.
    """
    from .._core.sku import load_skus

    manifests = load_skus(params["sku_dir"])
    nodes = twin_nodes_from_params(params, manifests, required=("sku", "serial", "bmc_mac", "bmc_address"))
    settings = StageSettings(
        **fleet_settings_kwargs(params, workers=AUDIT_WORKERS), sel_since=params.get("sel_since") or "30d",
        lease_file=params.get("lease_file"), lease_format=params.get("lease_format") or "isc",
        ledger=None if check_mode else params.get("ledger"),
        dispatch_dir=None if check_mode else params.get("dispatch_dir"),
        profile=params.get("profile") or "production")
    require_credentials(settings, "twin_audit")
    out = run_stage(nodes, manifests, settings, run_id=params.get("run_id"),
                    return_details=params.get("return_details", False))
    out["changed"] = not check_mode
    out["failed_hosts"] = sorted(h for h, e in out["hosts"].items() if e["gate"] != PASS)
    if not params.get("return_dispatch_rows", True):
        out["dispatch"].pop("items", None)
    return out


__all__ = ["STAGE", "CHECKS", "CHECK_NAMES", "check_graph", "Observation", "AuditContext", "judge",
           "dispatch_rows", "write_dispatch", "scrub", "parse_cutoff", "model_matches", "missing_slots",
           "validate_service_root", "BLOCKED"]
