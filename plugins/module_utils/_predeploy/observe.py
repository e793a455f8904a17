# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Observing one node over the network: TCP reachability, the Redfish service root, login and the audit's
inventory read, each step's failure kept in the :class:`Observation` for the checks to judge.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Mapping, Optional
from urllib.parse import urlsplit

from .._core.errors import SymphonyError
from .._fleet.client import bmc_client, close_quietly
from .._fleet.settings import BmcFleetSettings
from .._redfish.client import RedfishClient
from .._redfish.errors import CONTROLLER_REMEDIES, DNS_FAILURES, FAULT_BMC, FAULT_CONTROLLER, fault_of, fault_remedy
from .._redfish.model import NodeInventory
from .._redfish.reader import read_inventory
from .discovery import tcp_reachable
from .graph import Observation


def _host_port(url: str) -> tuple[Optional[str], int]:
    parts = urlsplit(url if "://" in url else "https://" + url)
    return parts.hostname, parts.port or (443 if parts.scheme == "https" else 80)


def audit_client(*args: Any, **kwargs: Any) -> RedfishClient:
    """The audit's :class:`RedfishClient`: ``keep_alive=True`` (one TCP+TLS handshake per connection
    instead of one per request; an audit's burst of GETs lasts seconds), other arguments as given."""
    kwargs.setdefault("keep_alive", True)
    return RedfishClient(*args, **kwargs)


def observe_node(node: Mapping[str, Any], endpoint: dict[str, Any], entry: Mapping[str, Any],
                 settings: BmcFleetSettings, discovery: Optional[dict[str, Any]] = None,
                 lease_source: Optional[str] = None, client_factory: Optional[Callable[..., Any]] = None,
                 reader: Optional[Callable[[Any], NodeInventory]] = None, registries: Any = None,
                 probe: Callable[[Any, int, float], tuple[bool, str]] = tcp_reachable) -> tuple[Observation, list[str]]:
    """Observe one node over the network; never raises for the node's own problems.

    ``endpoint``/``entry`` from :func:`_fleet.endpoint.resolve_endpoint`; ``client_factory``: callable
    with :class:`RedfishClient`'s signature (tests inject one); ``reader``:
    ``callable(client) -> NodeInventory`` (default :func:`read_for_audit`);
    ``probe``: ``callable(host, port, timeout_s) -> (ok, reason)`` (default a TCP connect).
    Each step's failure lands in ``Observation.errors`` and the later steps are
    skipped, so the checks become ``fail``/``blocked`` with that reason.  Returns
    ``(Observation, warnings)``; warnings are strings without secrets.
    """
    started = time.monotonic()
    obs = Observation(endpoint=endpoint, discovery=discovery, lease_source=lease_source)
    warnings: list[str] = []
    host, port = _host_port(endpoint["url"])
    obs.reachable = probe(host, port, settings.connect_timeout)
    if not obs.reachable[0] and any(d.lower() in obs.reachable[1].lower() for d in DNS_FAILURES):
        # the controller cannot resolve the BMC's name: nothing a technician can fix at the rack
        obs.faults["reachable"] = {"fault": FAULT_CONTROLLER, "remedy": CONTROLLER_REMEDIES["dns"]}
    if not obs.reachable[0]:
        obs.elapsed_s = time.monotonic() - started
        return obs, warnings
    client = None
    try:
        client = bmc_client(endpoint["url"], entry, settings, client_factory or audit_client, registries=registries)
        obs.tls_verified = getattr(client, "tls_verified", True)
        try:
            client.open()
        except SymphonyError as exc:
            obs.service_root = getattr(client, "service_root", None)
            step = "login"
            if obs.service_root is None and type(exc).__name__ != "RedfishAuthError":
                step = "service_root"
            _record(obs, step, exc)
            return obs, warnings
        obs.service_root = client.service_root
        obs.login = True
        reader = reader or read_for_audit
        try:
            obs.inventory = reader(client)
        except SymphonyError as exc:
            _record(obs, "inventory", exc)
        except Exception as exc:  # pylint: disable=broad-except
            # One BMC's odd tree must fail that node, not the fleet run.
            obs.errors["inventory"] = "unexpected %s while reading the inventory: %s" % (type(exc).__name__, exc)
    except SymphonyError as exc:
        if "service_root" not in obs.errors:
            _record(obs, "service_root", exc)
    finally:
        close_quietly(client)
        if client is not None:
            obs.requests = getattr(client, "requests", 0)
            warnings.extend(getattr(client, "warnings", []) or [])
        obs.elapsed_s = time.monotonic() - started
    return obs, warnings


def _record(obs: Observation, step: str, exc: SymphonyError) -> None:
    """Keep a step's error and, when it is the controller's or an unreachable BMC's, its fault class."""
    obs.errors[step] = str(exc)
    if fault_of(exc) != FAULT_BMC:
        obs.faults[step] = {"fault": fault_of(exc), "remedy": fault_remedy(exc)}


# What the audit reads: everything but the BIOS attributes (provisioning's concern) and the bodies of the
# FirmwareInventory members (their versions are provisioning's; the audit needs the member ids).
AUDIT_SECTIONS = ("systems", "chassis", "managers", "sel", "readings", "capabilities", "firmware_ids")


def read_for_audit(client: Any, system_id: Optional[str] = None, firmware_bodies: bool = False) -> NodeInventory:
    """Read what the pre-deployment checks judge, in as few Redfish requests as the BMC allows.

    ``system_id``: the twin's ``bmc_system_id``, the node's own ``Systems`` member where one BMC serves
    several nodes (only that system and its chassis are read, :func:`_redfish.reader.node_chassis`);
    ``firmware_bodies``: read the FirmwareInventory members' bodies (their ``Name``), for a SKU that
    matches firmware by name.

    ``_redfish.reader.read_inventory`` over :data:`AUDIT_SECTIONS`: ``$expand`` where the
    service advertises it, several GETs at once up to the client's per-BMC cap, and the
    FirmwareInventory member list (ids and links, one request per page instead of one per
    member: 106 members on the Supermicro HGX capture).  Returns a :class:`NodeInventory`
    whose ``firmware`` items carry ``id``/``uri`` only (``capabilities["firmware_ids_only"]``
    is True).  Raises :class:`RedfishError` only when the service root cannot be read.
    """
    sections = AUDIT_SECTIONS if not firmware_bodies else \
        tuple(x for x in AUDIT_SECTIONS if x != "firmware_ids") + ("firmware",)
    return read_inventory(client, system_id=system_id, sections=sections)


def audit_reader(node: Mapping[str, Any], manifest: Mapping[str, Any]) -> Callable[[Any], NodeInventory]:
    """The :func:`read_for_audit` for one twin node: its ``bmc_system_id``, and member bodies where the SKU
    matches a firmware component by ``name`` alone (the member list carries only links)."""
    by_name = any((c.get("match") or {}).get("name") and not (c.get("match") or {}).get("id")
                  for c in manifest.get("firmware") or [])

    def read(client: Any) -> NodeInventory:
        return read_for_audit(client, system_id=node.get("bmc_system_id"), firmware_bodies=by_name)
    return read
