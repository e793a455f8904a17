# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The nodes of a twin-batch module: twin node dicts given inline, or read from a twin file."""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from .._core.errors import ValidationError
from .._core.twin import load_twin


def twin_nodes_from_params(params: Mapping[str, Any], manifests: Mapping[str, Any],
                           required: Iterable[str] = ("sku",)) -> dict[str, dict[str, Any]]:
    """``{hostname: twin node}`` from ``params["nodes"]`` (twin node dicts) or ``params["twin"]`` (+ ``hosts``).

    ``manifests``: ``{sku: manifest}`` (the twin's SKUs must be among them); ``required``: keys
    every given node must have besides ``hostname``.  Raises :class:`ValidationError` naming the
    node index and key, the hosts not in the twin, or neither source given.
    """
    if params.get("nodes"):
        nodes = {}
        for i, node in enumerate(params["nodes"]):
            if not isinstance(node, dict) or not node.get("hostname"):
                raise ValidationError("nodes[%d] is not a twin node (no hostname)" % i, where="nodes")
            for key in required:
                if not node.get(key):
                    raise ValidationError("nodes[%d] (%s) has no %s" % (i, node["hostname"], key), where="nodes")
            nodes[node["hostname"]] = node
        return nodes
    if params.get("twin"):
        twin = load_twin(params["twin"], manifests.keys())
        wanted = params.get("hosts") or list(twin.nodes)
        unknown = [h for h in wanted if h not in twin.nodes]
        if unknown:
            raise ValidationError("hosts not in the twin: %s" % ", ".join(unknown[:10]), where=params["twin"])
        return {h: twin.nodes[h] for h in wanted}
    raise ValidationError("give nodes (twin node dicts) or twin (a twin file)", where="nodes")
