# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one place a controller-side stage builds the Redfish client of one BMC from its settings and map entry."""

from __future__ import annotations

from typing import Any, Callable, Mapping, Optional

from .._core.errors import SymphonyError
from .._redfish.client import RedfishClient
from .settings import BmcFleetSettings


def bmc_client(url: str, entry: Mapping[str, Any], settings: BmcFleetSettings,
               factory: Optional[Callable[..., Any]] = None, **kwargs: Any) -> Any:
    """A Redfish client for one BMC: ``factory(url, ...)`` (``RedfishClient``'s signature; default ``RedfishClient``).

    ``entry``: the node's BMC map entry (``username``/``password``/``ca_path``/``validate_certs``
    override ``settings``); timeouts and the reboot wait (seconds), retries, the per-BMC request cap and the auth mode come from
    ``settings``; ``kwargs`` are passed on (``registries``, ``keep_alive``).  The client is not opened.
    """
    verify = settings.validate_certs if entry.get("validate_certs") is None else bool(entry["validate_certs"])
    return (factory or RedfishClient)(
        url, username=entry.get("username") or settings.username,
        password=entry.get("password") or settings.password, verify=verify,
        ca_path=entry.get("ca_path") or settings.ca_path, connect_timeout=settings.connect_timeout,
        read_timeout=settings.read_timeout, retries=settings.retries,
        max_concurrency=settings.max_concurrency, auth=settings.auth,
        reboot_wait_s=settings.bmc_reboot_timeout_s, **kwargs)


def close_quietly(client: Any) -> None:
    """Close a BMC client (logout) if there is one; a failing logout never hides the reading's own result.

    ``RedfishClient.close`` already turns a failed session DELETE into a warning; a Redfish or socket error from
    another client is added to the client's ``warnings`` the same way, naming what failed.
    """
    if client is None:
        return
    try:
        client.close()
    except (SymphonyError, OSError) as exc:
        warnings = getattr(client, "warnings", None)
        if isinstance(warnings, list):
            warnings.append("could not close the BMC session (%s: %s)" % (type(exc).__name__, exc))
