# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The BMC map: per-node Redfish URL, credentials and CA, from the emulator's ``bmcs.json`` or an operator's file."""

from __future__ import annotations

import json
from typing import Any

from .._core.errors import ValidationError


def load_bmc_map(path: str) -> dict[str, dict[str, Any]]:
    """Read a BMC map (the emulator's ``bmcs.json`` or an operator's file).

    Accepted shapes: ``{"ca_bundle": path, "nodes": {host: entry}}`` (the emulator's),
    ``{"bmcs": {host: entry}}``, ``{"nodes": [{"hostname": ...}]}`` or ``{host: entry}``; an entry holds
    ``url`` (or ``address`` [+ ``port``, ``scheme``]) and optionally ``username``, ``password``,
    ``ca_bundle``/``ca_path``, ``validate_certs``.  Returns ``{host: {"url", "username", "password", "ca_path",
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
    entries: dict[str, Any]
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
        creds: dict[str, Any] = entry["credentials"] if isinstance(entry.get("credentials"), dict) else entry
        out[host] = {"url": url, "username": creds.get("username") or creds.get("user"),
                     "password": creds.get("password"),
                     "ca_path": entry.get("ca_bundle") or entry.get("ca_path") or entry.get("cafile") or default_ca,
                     "validate_certs": entry.get("validate_certs", entry.get("verify"))}
    return out


def map_secrets(password: str | None, bmc_map: dict[str, dict[str, Any]] | None) -> list[str | None]:
    """The passwords a run must scrub from what it reports: the settings' and every map entry's."""
    return [password] + [e.get("password") for e in (bmc_map or {}).values()]
