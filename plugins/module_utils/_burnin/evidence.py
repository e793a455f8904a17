# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Burn-in evidence on disk: ``<evidence_root>/<node>/<run_id>/<tier>/<test>/attempt-<n>/`` on the node.

Results carry paths relative to ``evidence_root`` (the controller fetches the tree into its own evidence
directory); :func:`absolutise_evidence` joins them to where they are read.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any

_SAFE = re.compile(r"[^A-Za-z0-9_.-]+")


def safe_name(text: str) -> str:
    """``text`` with every character outside ``[A-Za-z0-9_.-]`` replaced by ``_`` (one path component)."""
    return _SAFE.sub("_", text)


class EvidenceStore:
    """Writes evidence under ``<root>/<node>/<run_id>/`` and remembers what it wrote.

    Paths handed out are relative to ``root`` (``node/run/tier/test/attempt-1/stdout.txt``) so the
    controller can fetch them into its own evidence directory.
    """

    def __init__(self, root: str, node: str, run_id: str) -> None:
        self.root = os.path.abspath(root)
        self.base = os.path.join(safe_name(node), safe_name(run_id))
        self.files: list[str] = []

    def path(self, rel: str) -> str:
        return os.path.join(self.root, rel)

    def write_text(self, rel_dir: str, name: str, text: Any) -> str:
        """Write ``text`` to ``<rel_dir>/<name>``; returns the path relative to the root."""
        rel = os.path.join(self.base, rel_dir, safe_name(name))
        full = self.path(rel)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w", encoding="utf-8") as handle:
            handle.write(text if isinstance(text, str) else str(text))
        if rel not in self.files:
            self.files.append(rel)
        return rel

    def reserve(self, rel_dir: str, name: str) -> tuple[str, str]:
        """``(relative, absolute)`` path of ``<rel_dir>/<name>`` for a file a tool writes itself (a long load's
        output, streamed): its directory is made and it is listed with the files written here."""
        rel = os.path.join(self.base, rel_dir, safe_name(name))
        os.makedirs(os.path.dirname(self.path(rel)), exist_ok=True)
        if rel not in self.files:
            self.files.append(rel)
        return rel, self.path(rel)

    def write_json(self, rel_dir: str, name: str, data: Any) -> str:
        return self.write_text(rel_dir, name, json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")


def absolutise_evidence(evidence: Any, root: str) -> Any:
    """Evidence dict with relative paths joined to the controller's ``root`` (lists and nested dicts too)."""
    if isinstance(evidence, dict):
        return {k: absolutise_evidence(v, root) for k, v in evidence.items()}
    if isinstance(evidence, list):
        return [absolutise_evidence(v, root) for v in evidence]
    if isinstance(evidence, str) and evidence and not os.path.isabs(evidence):
        return os.path.join(os.path.abspath(root), evidence)
    return evidence
