# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Slurm ``topology.conf`` from the verified topology: what the cabling check found, not what was planned.

``topology/tree`` (slurm.conf ``TopologyPlugin=topology/tree``; topology.conf(5)): ``SwitchName=<name>
Nodes=<hostlist>`` for the lowest level and ``SwitchName=<name> Switches=<list>`` above it.  A rail-optimised node
reaches one leaf per rail, so the lowest level is one Slurm switch per set of leaves the nodes share (a scalable
unit); the level above groups those by the spines their leaves uplink to (the site's switches in the twin, named
``planned`` in the result since no node port sees a spine).  ``topology/block`` (Slurm 23.11 and later,
topology.conf(5) "BlockName"): ``BlockName=<name> Nodes=<hostlist>``, one block per NVLink domain found
(ClusterUUID + CliqueId of ``nvidia-smi -q``).
"""

from __future__ import annotations

import os
import re
from typing import Any, Dict, Iterable, List, Mapping, Optional, Tuple

from .._core.errors import SymphonyError
from .._core.ledger import open_ledger
from .._core.twin import load_twin
from .._host import process

_SPLIT = re.compile(r"^(.*?)(\d+)$")
# topology/block appeared in Slurm 23.11 (Slurm 23.11 release notes, "topology/block plugin")
BLOCK_MIN_VERSION = (23, 11)


def compress_hostlist(names: Iterable[str]) -> str:
    """Slurm hostlist expression: ``["gpu01", "gpu02", "gpu03", "lab9", "lab10", "cpu"]`` ->
    ``"cpu,gpu[01-03],lab[9-10]"``.

    Names sharing a prefix fold into ranges: zero-padded numbers with their digit count (``gpu01``..``gpu03``),
    unpadded ones together (``lab9``, ``lab10``); names without a trailing number are listed as they are."""
    groups: Dict[Tuple[str, int], List[int]] = {}
    parts = []
    for name in set(names):
        match = _SPLIT.match(name)
        if not match:
            parts.append(name)
            continue
        digits = match.group(2)
        width = len(digits) if digits.startswith("0") and len(digits) > 1 else 0  # 0: not padded
        groups.setdefault((match.group(1), width), []).append(int(digits))
    for (prefix, width) in [k for k in groups if k[1]]:
        # gpu10 belongs with gpu01..gpu09: same digit count as the padded ones
        unpadded = groups.get((prefix, 0), [])
        groups[(prefix, width)] += [n for n in unpadded if len(str(n)) == width]
        unpadded[:] = [n for n in unpadded if len(str(n)) != width]
    for (prefix, width), numbers in groups.items():
        if not numbers:
            continue
        numbers.sort()
        runs = [[numbers[0], numbers[0]]]
        for n in numbers[1:]:
            if n == runs[-1][1] + 1:
                runs[-1][1] = n
            else:
                runs.append([n, n])
        text = ["%0*d" % (width, a) if a == b else "%0*d-%0*d" % (width, a, width, b) for a, b in runs]
        parts.append(prefix + text[0] if len(text) == 1 and "-" not in text[0] else "%s[%s]" % (prefix, ",".join(text)))
    return ",".join(sorted(parts))


def tree(found: Mapping[str, List[Mapping[str, Any]]],
         switches: Optional[Mapping[str, Mapping[str, Any]]] = None) -> Dict[str, Any]:
    """The verified tree: ``{"leaves": {slurm switch: {"leaves": [switch names], "nodes": [hosts]}}, "spines":
    {slurm switch: {"spines": [names], "switches": [slurm leaf switches], "source": "planned"}},
    "unplaced": [hosts no port of which was found]}``.

    ``found``: the cabling check's ``found`` (``{host: [{switch, ...}]}``); ``switches``: the site's switches from
    the twin (``uplinks`` per leaf: no node port sees a spine, so the level above the leaves is the plan's).
    """
    by_set: Dict[Tuple[str, ...], List[str]] = {}
    unplaced = []
    for host, ports in found.items():
        leaves = tuple(sorted({p["switch"] for p in ports}))
        if leaves:
            by_set.setdefault(leaves, []).append(host)
        else:
            unplaced.append(host)
    leaves_out = {}
    for leaves, hosts in sorted(by_set.items()):
        name = leaves[0] if len(leaves) == 1 else "+".join(leaves)
        leaves_out[name] = {"leaves": list(leaves), "nodes": sorted(hosts)}
    spines_out: Dict[str, Dict[str, Any]] = {}
    for name, entry in leaves_out.items():
        ups = set()
        for leaf in entry["leaves"]:
            ups.update((switches or {}).get(leaf, {}).get("uplinks") or ())
        if not ups:
            continue
        key = "+".join(sorted(ups))
        spines_out.setdefault(key, {"spines": sorted(ups), "switches": [], "source": "planned"})["switches"].append(name)
    return {"leaves": leaves_out, "spines": spines_out, "unplaced": sorted(unplaced)}


def blocks(domains: Mapping[str, Iterable[Any]], names: Optional[Mapping[str, str]] = None) -> Dict[str, List[str]]:
    """One block per NVLink domain found: ``{block name: [hosts]}``.  ``domains``: ``{host: [cluster_uuid,
    clique_id]}``; ``names``: ``{host: planned domain name}``, used when every host of a found domain has the same
    one (else the block is named ``nvl-<uuid prefix>-<clique>``)."""
    grouped: Dict[Tuple[str, str], List[str]] = {}
    for host, key in domains.items():
        uuid, clique = list(key)
        grouped.setdefault((str(uuid), str(clique)), []).append(host)
    out: Dict[str, List[str]] = {}
    for (uuid, clique), hosts in sorted(grouped.items()):
        planned = {(names or {}).get(h) for h in hosts}
        name = planned.pop() if len(planned) == 1 and None not in planned else "nvl-%s-%s" % (uuid[:8], clique)
        if name in out:
            name = "nvl-%s-%s" % (uuid[:8], clique)
        out[name] = sorted(hosts)
    return out


def render_tree(topo: Mapping[str, Any], header: str = "") -> str:
    """topology.conf text (``topology/tree``) for :func:`tree`'s result."""
    lines = ["# " + line for line in header.splitlines()] if header else []
    for name, entry in topo["leaves"].items():
        lines.append("SwitchName=%s Nodes=%s" % (name, compress_hostlist(entry["nodes"])))
    for name, entry in topo["spines"].items():
        lines.append("SwitchName=%s Switches=%s" % (name, ",".join(sorted(entry["switches"]))))
    return "\n".join(lines) + "\n"


def render_blocks(found_blocks: Mapping[str, List[str]], header: str = "") -> str:
    """topology.conf text (``topology/block``) for :func:`blocks`'s result."""
    lines = ["# " + line for line in header.splitlines()] if header else []
    for name, hosts in found_blocks.items():
        lines.append("BlockName=%s Nodes=%s" % (name, compress_hostlist(hosts)))
    return "\n".join(lines) + "\n"


def slurm_version(text: str) -> Optional[Tuple[int, int]]:
    """``(major, minor)`` from ``scontrol --version`` / ``slurmctld -V`` (``"slurm 22.05.8"`` -> ``(22, 5)``,
    ``"slurm-wlm 23.11.4"`` too); None when no version is printed."""
    match = re.search(r"(\d+)\.(\d+)(?:\.\d+)?", text or "")
    return (int(match.group(1)), int(match.group(2))) if match else None


def block_supported(version: Optional[Tuple[int, int]]) -> bool:
    """Whether a Slurm of ``version`` has ``topology/block`` (23.11 and later); an unknown version has not."""
    return version is not None and version >= BLOCK_MIN_VERSION


def _installed_version() -> Tuple[Optional[Tuple[int, int]], str]:
    try:
        result = process.run(["scontrol", "--version"], 30)
    except SymphonyError as exc:  # scontrol absent or hung: the version stays unknown
        return None, exc.message
    return slurm_version(result.stdout), result.stdout.strip()


def found_from_ledger(ledger: Any) -> Tuple[Dict[str, List[Dict[str, Any]]], Dict[str, List[str]]]:
    """``(found, domains)`` as ``cabling_check`` returns them, from the latest ``cabling`` result of every node in
    ``ledger`` (its evidence: per port the switch port found, the NVLink domain found)."""
    found: Dict[str, List[Dict[str, Any]]] = {}
    domains: Dict[str, List[str]] = {}
    for res in ledger.current_results():
        if res.check != "cabling":
            continue
        evidence = res.evidence or {}
        found[res.node] = [{"port": p.get("port"), "switch": p["found"][0], "switch_port": p["found"][1]}
                           for p in evidence.get("ports") or () if p.get("found")]
        if (evidence.get("nvlink_domain") or {}).get("found"):
            domains[res.node] = list(evidence["nvlink_domain"]["found"])
    return found, domains


def run_topology(params: Mapping[str, Any], check_mode: bool) -> Dict[str, Any]:
    """The ``slurm_topology`` module: topology.conf from the cabling check's verified topology.

    ``params``: ``found``/``domains`` (``cabling_check``'s results, or with ``from_ledger`` the latest ``cabling``
    results in ``ledger``: :func:`found_from_ledger`), ``domain_names`` (host -> planned domain),
    ``twin`` (its sites' switches: uplinks), ``form`` (``tree``, ``block`` or ``auto``: block when NVLink domains
    were found and the installed Slurm has it), ``dest``, ``slurm_version`` (else ``scontrol --version``).
    Returns ``{changed, dest, form, content, supported, message, tree, blocks, slurm_version, diff}``; a form the
    installed Slurm lacks is not written (``supported`` false, ``message`` says so).  Raises
    :class:`SymphonyError` naming ``dest`` when it cannot be written.
    """
    switches: Dict[str, Any] = {}
    if params.get("twin"):
        for fabric in load_twin(params["twin"]).fabric.values():
            switches.update(fabric["switches"])
    if params.get("slurm_version"):
        version, version_text = slurm_version(params["slurm_version"]), params["slurm_version"]
    else:
        version, version_text = _installed_version()
    found, domains = params.get("found") or {}, params.get("domains") or {}
    if params.get("from_ledger"):
        found, domains = found_from_ledger(open_ledger(params.get("ledger")))
    found_tree = tree(found, switches)
    found_blocks = blocks(domains, params.get("domain_names"))
    form = params.get("form") or "auto"
    message = ""
    if form == "auto":
        form = "block" if found_blocks and block_supported(version) else "tree"
        if found_blocks and form == "tree":
            message = ("NVLink domains were found but Slurm %s has no topology/block (Slurm 23.11 and later): wrote "
                       "the tree form" % (version_text or "(version unknown)"))
    supported = form == "tree" or block_supported(version)
    header = "Generated by symphony.cluster slurm_topology from the verified (found, not planned) topology."
    content = render_tree(found_tree, header) if form == "tree" else render_blocks(found_blocks, header)
    if not supported:
        message = "Slurm %s has no topology/block (added in Slurm 23.11); nothing written" % (
            version_text or "(version unknown)")
    dest = params["dest"]
    try:
        with open(dest, encoding="utf-8") as handle:
            before = handle.read()
    except OSError:
        before = ""
    changed = supported and before != content
    if changed and not check_mode:
        try:
            with open(dest + ".tmp", "w", encoding="utf-8") as handle:
                handle.write(content)
            os.replace(dest + ".tmp", dest)
        except OSError as exc:
            raise SymphonyError("cannot write topology.conf: %s" % exc.strerror, where=dest)
    return {"changed": changed, "dest": dest, "form": form, "content": content, "supported": supported,
            "message": message, "tree": found_tree, "blocks": found_blocks,
            "plugin": "topology/%s" % form, "slurm_version": version_text,
            "diff": {"before": before, "after": content if supported else before, "before_header": dest,
                     "after_header": dest}}
