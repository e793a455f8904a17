# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one endpoint resolver: which URL a stage uses for a node's BMC, and where it came from."""

from __future__ import annotations

from typing import Any, Mapping, Optional, TypedDict


class Endpoint(TypedDict):
    """A node's BMC endpoint: ``url`` and its ``source`` (``map``, ``lease`` or ``twin``)."""

    url: str
    source: str


def _url(address: str, scheme: str) -> str:
    return address if "://" in address else "%s://%s" % (scheme, address)


def resolve_endpoint(host: str, bmc_map: Optional[Mapping[str, Mapping[str, Any]]], leased: Optional[str] = None,
                     address: Optional[str] = None,
                     scheme: str = "https") -> tuple[Optional[Endpoint], Mapping[str, Any]]:
    """``(endpoint, entry)`` for ``host``: the BMC map wins, then the DHCP-leased address, then the twin's address.

    ``bmc_map``: :func:`_fleet.bmcmap.load_bmc_map` output (or None); ``leased``/``address``: an address or URL
    (``scheme`` is added to a bare address).  ``entry`` is the map entry (credentials, CA) or ``{}``; ``endpoint``
    is None when none of the three names the BMC.
    """
    entry = (bmc_map or {}).get(host)
    if entry:
        return {"url": entry["url"], "source": "map"}, entry
    if leased:
        return {"url": _url(str(leased), scheme), "source": "lease"}, {}
    if address:
        return {"url": _url(str(address), scheme), "source": "twin"}, {}
    return None, {}
