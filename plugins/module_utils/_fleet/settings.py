# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""How a controller-side stage reaches its BMCs: the settings every fleet stage shares, read from module params."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Optional

from .._core.errors import ValidationError
from .._core.leases import DEFAULT_LEASE_WAIT_S
from .._redfish.settings import DEFAULT_REBOOT_TIMEOUT_S, DEFAULT_RETRIES
from .batch import DEFAULT_PER_BMC, DEFAULT_WORKERS, default_processes


@dataclass
class BmcFleetSettings:
    """How a controller-side stage reaches its BMCs (fields shared by the stages' settings).

    ``connect_timeout``/``read_timeout`` in seconds (per request); ``retries``: re-sends after
    connection errors, timeouts, 408/429/5xx; ``workers``: threads of the controller-side pool;
    ``per_bmc``: nodes handled at once behind one BMC endpoint; ``max_concurrency``: Redfish
    requests in flight to one BMC; ``bmc_map``: path of a map file (per-node url/credentials/CA,
    see :func:`_fleet.bmcmap.load_bmc_map`); ``bmc_reboot_timeout_s``: seconds the entry check waits for a BMC
    still rebooting; ``lease_wait_s``: seconds a node another run holds is waited for; ``ledger``: ledger path or None (nothing written);
    ``optional``: checks the gate does not require; ``registry_dir``: Redfish message registries.
    """

    username: Optional[str] = None
    password: Optional[str] = None
    validate_certs: bool = True
    ca_path: Optional[str] = None
    auth: str = "auto"
    connect_timeout: float = 5.0
    read_timeout: float = 30.0
    retries: int = DEFAULT_RETRIES
    bmc_reboot_timeout_s: float = DEFAULT_REBOOT_TIMEOUT_S
    workers: int = DEFAULT_WORKERS
    processes: int = 1
    per_bmc: int = DEFAULT_PER_BMC
    max_concurrency: int = 4
    lease_wait_s: float = DEFAULT_LEASE_WAIT_S
    bmc_map: Optional[str] = None
    ledger: Optional[str] = None
    optional: tuple[str, ...] = ()
    registry_dir: Optional[str] = None


def _count(params: Mapping[str, Any], name: str, default: int) -> int:
    """A pool size from ``params``: missing takes ``default``; below 1 is an error (a pool of 0 would hang or, with
    ``or default``, silently become the default)."""
    value = params.get(name)
    if value is None:
        return default
    if int(value) < 1:
        raise ValidationError("%s must be at least 1, got %r" % (name, value), where=name)
    return int(value)


def _seconds(params: Mapping[str, Any], name: str, default: float) -> float:
    """A duration from ``params`` in seconds: missing takes ``default``; negative is an error naming the option."""
    value = params.get(name)
    if value is None:
        return default
    if float(value) < 0:
        raise ValidationError("%s must be 0 or more seconds, got %r" % (name, value), where=name)
    return float(value)


def connection_kwargs(params: Mapping[str, Any]) -> dict[str, Any]:
    """The :class:`BmcFleetSettings` connection fields (credentials, TLS, auth, timeouts in seconds, retries) from
    module params (``fleet_argument_spec`` names), a missing or empty value taking the default.  Returns a dict."""
    return {
        "username": params.get("username"), "password": params.get("password"),
        "validate_certs": params.get("validate_certs", True), "ca_path": params.get("ca_path"),
        "auth": params.get("auth") or "auto", "connect_timeout": params.get("connect_timeout") or 5.0,
        "read_timeout": params.get("read_timeout") or 30.0, "retries": DEFAULT_RETRIES if params.get("retries") is None else params["retries"],
        "bmc_reboot_timeout_s": DEFAULT_REBOOT_TIMEOUT_S if params.get("bmc_reboot_timeout_s") is None
        else params["bmc_reboot_timeout_s"],
    }


def fleet_settings_kwargs(params: Mapping[str, Any], workers: int = DEFAULT_WORKERS) -> dict[str, Any]:
    """The :class:`BmcFleetSettings` fields but ``ledger`` from module params (``fleet_argument_spec``
    names), a missing or empty value taking the default (``workers`` threads; ``processes``:
    ``_fleet.batch.default_processes()``, one per core or ``$SYMPHONY_FLEET_PROCESSES``).  Returns a dict.
    Raises :class:`ValidationError` naming the option when ``workers``, ``processes``, ``per_bmc`` or
    ``max_concurrency`` is below 1."""
    return dict(
        connection_kwargs(params),
        workers=_count(params, "workers", workers), processes=_count(params, "processes", default_processes()),
        per_bmc=_count(params, "per_bmc", DEFAULT_PER_BMC),
        max_concurrency=_count(params, "max_concurrency", 4), bmc_map=params.get("bmc_map"),
        lease_wait_s=_seconds(params, "lease_wait_s", DEFAULT_LEASE_WAIT_S),
        optional=tuple(params.get("optional") or ()), registry_dir=params.get("registry_dir"),
    )


def require_credentials(settings: BmcFleetSettings, where: str) -> None:
    """Raise :class:`ValidationError` (at ``where``) unless ``settings`` has a BMC map or a user and password."""
    if not settings.bmc_map and not (settings.username and settings.password):
        raise ValidationError("give username and password (vault/AWX credential) or a bmc_map with credentials",
                              where=where)
