# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pre-deployment checks of discovery and access: DHCP lease and reservation, TCP reachability, the Redfish
service root, login and the inventory read.  Each is ``(AuditContext) -> Outcome``.
"""

from __future__ import annotations

from typing import Any, Optional

from .._core.gate import BLOCKED, Outcome, failed, fault_blocked_outcome, not_run, passed
from .._redfish.errors import FAULT_CONTROLLER
from .._redfish.read_base import gaps_fault
from .graph import AuditContext
from .parts import incomplete_for


def fault_blocked(ctx: AuditContext, step: str, what: str) -> Optional[Outcome]:
    """``blocked`` for a step whose error was the controller's own (TLS trust, CA file, DNS: its controller-side
    remedy) or a BMC that stayed unreachable after the retries ("BMC unreachable"), else None: neither is a
    hardware finding, so never the node's ``fail`` (DESIGN.md "Verdict rules").  ``evidence["fault"]`` keeps the
    class for the dispatch list, which leaves controller faults out."""
    fault = ctx.obs.faults.get(step)
    if not fault:
        return None
    err = ctx.obs.errors.get(step) or (ctx.obs.reachable or (False, ""))[1]
    if fault["fault"] == FAULT_CONTROLLER:
        reason = "%s: a controller-side fault, not the node's: %s" % (what, err)
    else:
        reason = "BMC unreachable: %s: %s" % (what, err)
    return Outcome(BLOCKED, reason, remediation=fault["remedy"], evidence={"fault": fault["fault"]})


def check_lease_captured(ctx: AuditContext) -> Outcome:
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


def check_address_reserved(ctx: AuditContext) -> Outcome:
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


def check_bmc_reachable(ctx: AuditContext) -> Outcome:
    ok, reason = ctx.obs.reachable if ctx.obs.reachable is not None else (False, "not attempted")
    url = ctx.obs.endpoint.get("url", "")
    if not ok:
        return fault_blocked(ctx, "reachable", "TCP connect to %s" % url) or failed(
            "BMC not reachable at %s: %s" % (url, reason),
            "check the BMC is powered (standby power), its management port link LED, the "
            "switch port and VLAN, and that %s answers from the controller" % url,
            observed={"url": url, "source": ctx.obs.endpoint.get("source")})
    return passed(observed={"url": url, "source": ctx.obs.endpoint.get("source")})


def validate_service_root(root: Any) -> list[str]:
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


def check_service_root(ctx: AuditContext) -> Outcome:
    err = ctx.obs.errors.get("service_root")
    if err:
        return fault_blocked(ctx, "service_root", "GET /redfish/v1") or failed(
            "GET /redfish/v1 failed: %s" % err,
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


def check_login(ctx: AuditContext) -> Outcome:
    err = ctx.obs.errors.get("login")
    if err:
        return fault_blocked(ctx, "login", "the login") or failed("login failed: %s" % err,
                                                                  "check the BMC account in the vault/AWX credential; a new server may still have its "
                                                                  "factory password (label on the chassis pull-out tag); if the BMC reports too many "
                                                                  "sessions, wait for idle sessions to expire or reset the BMC")
    if not ctx.obs.login:
        return failed("login was not attempted", "rerun the stage")
    return passed()


def check_inventory_read(ctx: AuditContext) -> Outcome:
    err = ctx.obs.errors.get("inventory")
    if err:
        return fault_blocked(ctx, "inventory", "reading the Redfish inventory") or failed(
            "reading the Redfish inventory failed: %s" % err,
            "rerun the stage; if the BMC keeps failing, reset it (Manager.Reset) and check its "
            "firmware version against the SKU")
    inv = ctx.inv
    if inv is None:
        return failed("no inventory was read", "rerun the stage")
    # the collections themselves and the node's systems; one unreadable chassis member feeds only the checks
    # that read chassis (they say so), not all of them
    gaps = incomplete_for(inv, "service", "systems") + incomplete_for(inv, "chassis", members=False)
    if gaps:
        # a BMC that stopped answering mid-read (it began to reboot) is not a hardware finding: blocked with that
        # cause (DESIGN.md "Verdict rules"); a BMC that answers without the twin's system, or keeps failing, fails
        fault = gaps_fault(item for item in inv.incomplete or [] if isinstance(item, dict) and (
            item.get("part") in ("service", "systems") or (item.get("part") == "chassis" and not item.get("member"))))
        if fault:
            return fault_blocked_outcome(fault, "reading the Redfish inventory was cut short: %s" % "; ".join(gaps[:3]))
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
