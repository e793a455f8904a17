# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the ``symphony.cluster.twin`` inventory plugin builds, without Ansible's inventory objects.

:func:`build_records` turns a twin (inline in the inventory source, or in its own file) and the SKU manifests
into host records (hostvars + group names); :func:`read_ledger_view` reads each node's gate and the promoted spares from the ledger.
The plugin only copies these into Ansible's inventory, so everything here is unit-testable and benchable.
"""

from __future__ import annotations

import os
from typing import Any, Dict, Iterable, List, Optional, Tuple

from .errors import ManifestError, TwinError
from .gate import STAGES
from .ledger import default_ledger_path, ledger_exists, open_ledger
from .schema import load_yaml_file
from .sku import load_skus
from .twin import TWIN_SCHEMA, validate_twin

SUFFIXES = (".twin.yml", ".twin.yaml")
TWIN_KEYS: Tuple[str, ...] = tuple(TWIN_SCHEMA["properties"])
# The collection's own manifests: <collection>/skus, two levels above plugins/module_utils.
DEFAULT_SKU_DIR = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "skus"))


def _twin_document(source_path: str, option_keys: Iterable[str],
                   twin_path: Optional[str]) -> Tuple[str, Dict[str, Any]]:
    """Return ``(path, data)`` of the twin: the file named by ``twin_path``, or the inline part of the source."""
    if twin_path:
        return twin_path, load_yaml_file(twin_path, TwinError)
    data = load_yaml_file(source_path, TwinError)
    unknown = sorted(set(data) - set(option_keys) - set(TWIN_KEYS))
    if unknown:
        raise TwinError("unknown top-level key(s) %s: neither an option of symphony.cluster.twin nor a twin key (%s)"
                        % (", ".join(unknown), ", ".join(TWIN_KEYS)), where=source_path)
    if "sites" not in data:
        raise TwinError("no twin here: give the twin inline (twin_version, sites) or name its file with `twin:`",
                        where=source_path)
    return source_path, {key: data[key] for key in TWIN_KEYS if key in data}


def build_records(source_path: str, option_keys: Iterable[str] = (), twin_path: Optional[str] = None,
                  sku_dir: Optional[str] = None) -> Dict[str, Any]:
    """Load and validate the twin and its SKUs; return ``{"skus": {...}, "hosts": [...]}``.

    ``hosts`` items are ``{"hostname", "vars", "groups"}`` with vars ``symphony_twin`` (the flat node dict of
    :class:`~._twin.Twin`), ``symphony_sku``, ``symphony_bmc_address`` and ``ansible_host`` (the in-band
    address, when the twin has one); groups ``site_<site>``, ``rack_<rack>``, ``sku_<sku>`` and ``spares``.
    ``skus`` maps each SKU a node uses to its manifest.  ``sku_dir``: explicit directory, else the twin's
    ``sku_dir`` (relative to the twin file), else :data:`DEFAULT_SKU_DIR`.  The result is JSON-serialisable
    (it is what the inventory cache stores).

    Raises :class:`TwinError` / :class:`ManifestError` naming the file, node and JSON path; nothing half-loaded.
    """
    path, data = _twin_document(source_path, option_keys, twin_path)
    if not sku_dir:
        declared = data.get("sku_dir")
        if isinstance(declared, str) and declared:
            sku_dir = declared if os.path.isabs(declared) else os.path.normpath(
                os.path.join(os.path.dirname(os.path.abspath(path)), declared))
        else:
            sku_dir = DEFAULT_SKU_DIR
    skus = load_skus(sku_dir)
    twin = validate_twin(data, path, known_skus=skus)
    hosts: List[Dict[str, Any]] = []
    used: Dict[str, Dict[str, Any]] = {}
    for host, node in twin.nodes.items():
        used[node["sku"]] = skus[node["sku"]]
        hostvars = {"symphony_twin": node, "symphony_sku": node["sku"], "symphony_bmc_address": node["bmc_address"]}
        if node["inband_address"]:
            hostvars["ansible_host"] = node["inband_address"]
        groups = ["site_" + node["site"], "rack_" + node["rack"], "sku_" + node["sku"]]
        if node["spare"]:
            groups.append("spares")
        hosts.append({"hostname": host, "vars": hostvars, "groups": groups})
    return {"skus": used, "hosts": hosts, "twin_path": path, "sku_dir": sku_dir}


def check_profile(skus: Dict[str, Dict[str, Any]], profile: Optional[str]) -> None:
    """Raise :class:`ManifestError` when a SKU the twin uses does not declare ``profile``.

    ``production`` is every SKU's default; any other profile (``lab``) must be declared in the manifest's
    ``profiles`` or ``gates``, so a typo never silently falls back to the production gates.
    """
    if profile in (None, "", "production"):
        return
    for sku, manifest in sorted(skus.items()):
        declared = set(manifest.get("profiles", {})) | set(manifest.get("gates", {}))
        if profile not in declared:
            raise ManifestError("SKU %r declares no profile %r (declared: %s)"
                                % (sku, profile, ", ".join(sorted(declared | {"production"}))), where="profile")


def read_positions(location: Optional[str] = None) -> Dict[str, Tuple[str, str, str, List[str]]]:
    """``{node: (stage, gate_status, reason, passed)}``: each node's furthest gated stage, read in one query.

    ``passed`` lists every stage whose current gate for the node is ``pass``: a stage's playbook targets the
    nodes that passed the previous stage whatever happened later (a rerun after a fix finds them again).

    ``location``: ledger path/URL, else ``$SYMPHONY_LEDGER`` or the default path.  A ledger that does not exist
    yet (no SQLite file, no PostgreSQL schema) yields ``{}`` and is not created (reading an inventory never writes).
    Raises :class:`LedgerError` when the ledger exists but cannot be read.
    """
    return read_ledger_view(location)["positions"]


def promoted_spares(ledger: Any) -> Dict[str, Any]:
    """``{spare: node it replaces}`` for the twin spares in service now, from an open ledger: the latest
    ``spare_promoted`` event of a spare, unless a ``spare_returned`` event came after it (the fleet audit resumed the
    node the spare stood in for, and the spare went back to the pool)."""
    moves = sorted(ledger.events(kind="spare_promoted") + ledger.events(kind="spare_returned"),
                   key=lambda event: event["recorded_at"])
    promoted: Dict[str, Any] = {}
    for event in moves:
        if event["kind"] == "spare_promoted":
            promoted[event["node"]] = (event["data"] or {}).get("replaces")
        else:
            promoted.pop(event["node"], None)
    return promoted


def read_ledger_view(location: Optional[str] = None) -> Dict[str, Any]:
    """What the inventory needs from the ledger: ``{"positions": {...}, "promoted": {node: replaced node}}``.

    ``positions`` is :func:`read_positions`' mapping.  ``promoted`` names the twin spares cluster_validation
    promoted into service (``spare_promoted`` events; the latest one for a node wins) with the node each replaced: they
    are in the cluster now, so the inventory takes them out of ``spares`` (never offered twice) and a rerun
    of cluster_validation includes them.  A ``spare_returned`` event after a spare's promotion (the fleet audit
    resumed the node it stood in for) puts it back in the pool.  Same ``location`` rules and errors as
    :func:`read_positions`.
    """
    location = location or default_ledger_path()
    if not ledger_exists(location):
        return {"positions": {}, "promoted": {}}
    ledger = open_ledger(location)
    try:
        gates = ledger.current_gates()
        promoted = promoted_spares(ledger)
    finally:
        ledger.close()
    out: Dict[str, Tuple[str, str, str, List[str]]] = {}
    for node, by_stage in gates.items():
        passed = [stage for stage in STAGES if stage in by_stage and by_stage[stage].status == "pass"]
        for stage in reversed(STAGES):
            if stage in by_stage:
                out[node] = (stage, by_stage[stage].status, by_stage[stage].reason, passed)
                break
    return {"positions": out, "promoted": promoted}
