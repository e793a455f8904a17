# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Redfish message registries: ``MessageId`` -> human message.

A Redfish ``MessageId`` is ``<RegistryPrefix>.<Major>.<Minor>[.<Errata>].<MessageKey>``
(DSP0266 "Message object", e.g. ``Base.1.8.PropertyMissing``).  Registries are the
DMTF/OEM ``MessageRegistry`` JSON documents (DSP8011 schema ``MessageRegistry``):
``{"RegistryPrefix": "Base", "RegistryVersion": "1.22.1", "Messages": {key: {"Message":
"The property %1 ...", "Severity": ..., "Resolution": ...}}}``.

Resolution is version tolerant: within one major version a later minor only adds
messages (DSP0266 "Registry versioning"), so ``Base.1.8.X`` resolves with ``Base.1.22.1``.
An unknown id falls back to the raw ``MessageId``.  Registries come from a directory
(the collection's reference copy, or any folder of DMTF registry files), from sushy's
bundled standard registries, and from the BMC's own ``/redfish/v1/Registries``.
"""

from __future__ import annotations

import json
import os
import re
import threading
from typing import Any, Iterable, Optional

Version = tuple[int, int, int]

_ID_RE = re.compile(r"^(?P<prefix>[A-Za-z][A-Za-z0-9_]*)\.(?P<ver>\d+(?:\.\d+){0,2})\.(?P<key>[A-Za-z0-9_]+)$")


def parse_message_id(message_id: Any) -> tuple[Optional[str], Optional[Version], Optional[str]]:
    """Split a MessageId into ``(prefix, (major, minor, errata) or None, key)``.

    ``"Base.1.8.PropertyMissing"`` -> ``("Base", (1, 8, 0), "PropertyMissing")``;
    ``"PropertyMissing"`` -> ``(None, None, "PropertyMissing")``.  Never raises.
    """
    if not isinstance(message_id, str) or not message_id:
        return None, None, None
    m = _ID_RE.match(message_id.strip())
    if not m:
        parts = message_id.strip().split(".")
        if len(parts) >= 2:
            return parts[0], None, parts[-1]
        return None, None, message_id.strip()
    nums = tuple(int(x) for x in m.group("ver").split("."))
    major, minor, errata = (nums + (0, 0, 0))[:3]
    return m.group("prefix"), (major, minor, errata), m.group("key")


def _version_tuple(text: Any) -> Version:
    try:
        nums = tuple(int(x) for x in str(text).split("."))
    except ValueError:
        return (0, 0, 0)
    major, minor, errata = (nums + (0, 0, 0))[:3]
    return major, minor, errata


def format_message(template: Optional[str], args: Optional[Iterable[Any]]) -> Optional[str]:
    """Substitute ``%1``..``%n`` in a registry template with ``args`` (list of values)."""
    if not template:
        return template
    values = list(args or [])

    def repl(m: re.Match[str]) -> str:
        i = int(m.group(1)) - 1
        if 0 <= i < len(values):
            return str(values[i])
        return m.group(0)

    return re.sub(r"%(\d+)", repl, template)


class MessageRegistries:
    """A set of loaded message registries, indexed by prefix and version.

    ``MessageRegistries(directory=None, include_sushy=True)``: load every ``*.json``
    MessageRegistry in ``directory`` (non-registry JSON files are skipped) and, when
    ``include_sushy``, the DMTF Base registries bundled with sushy as a last resort.
    Thread safe for concurrent ``resolve``/``add``.
    """

    def __init__(self, directory: Optional[str] = None, include_sushy: bool = True) -> None:
        # lower-case prefix -> [(version, Messages)], newest first
        self._by_prefix: dict[str, list[tuple[Version, dict[str, Any]]]] = {}
        self._lock = threading.Lock()
        self.sources: list[str] = []
        if directory:
            self.load_directory(directory)
        if include_sushy:
            try:
                import sushy  # noqa: F401  (location of its standard registries)
                sushy_dir = os.path.join(os.path.dirname(sushy.__file__), "standard_registries")
                if os.path.isdir(sushy_dir):
                    self.load_directory(sushy_dir)
            except ImportError:
                pass

    def load_directory(self, directory: str) -> int:
        """Load every MessageRegistry JSON file in ``directory``; return how many were added.

        Raises nothing for unreadable files (they are skipped); a missing directory
        raises ``FileNotFoundError`` naming it.
        """
        if not os.path.isdir(directory):
            raise FileNotFoundError("registry directory not found: %s" % directory)
        added = 0
        for name in sorted(os.listdir(directory)):
            if not name.endswith(".json"):
                continue
            path = os.path.join(directory, name)
            try:
                with open(path, encoding="utf-8") as fh:
                    doc = json.load(fh)
            except (OSError, ValueError):
                continue
            if self.add(doc, source=path):
                added += 1
        return added

    def add(self, doc: Any, source: Optional[str] = None) -> bool:
        """Add one MessageRegistry document; return True if it was one."""
        if not isinstance(doc, dict) or not isinstance(doc.get("Messages"), dict):
            return False
        prefix = doc.get("RegistryPrefix")
        version = doc.get("RegistryVersion")
        if not prefix:
            reg_id = str(doc.get("Id", ""))
            prefix = reg_id.split(".", maxsplit=1)[0] if reg_id else None
            version = version or ".".join(reg_id.split(".")[1:4])
        if not prefix:
            return False
        with self._lock:
            entries = self._by_prefix.setdefault(prefix.lower(), [])
            vt = _version_tuple(version)
            if any(entry[0] == vt for entry in entries):
                return False  # first loaded wins (directory before sushy's bundle)
            entries.append((vt, doc["Messages"]))
            entries.sort(key=lambda e: e[0], reverse=True)
            self.sources.append(source or "%s.%s" % (prefix, version))
        return True

    def prefixes(self) -> list[str]:
        """The registry prefixes loaded (lower case), sorted."""
        with self._lock:
            return sorted(self._by_prefix)

    def lookup(self, message_id: Any) -> Optional[dict[str, Any]]:
        """Return the registry entry dict for ``message_id`` or None.

        Search order: the exact version, then the newest version with the same major
        that holds the key, then any version that holds the key.
        """
        prefix, ver, key = parse_message_id(message_id)
        if not prefix or not key:
            return None
        with self._lock:
            entries = list(self._by_prefix.get(prefix.lower(), ()))
        if not entries:
            return None
        if ver is not None:
            for vt, messages in entries:
                if vt == ver and key in messages:
                    return messages[key]
            for vt, messages in entries:
                if vt[0] == ver[0] and key in messages:
                    return messages[key]
        for vt, messages in entries:
            if key in messages:
                return messages[key]
        return None

    def resolve(self, message_id: Any, args: Optional[Iterable[Any]] = None) -> Any:
        """Return the formatted message for ``message_id`` with ``args``, or the raw id if unknown."""
        entry = self.lookup(message_id)
        if not entry or not entry.get("Message"):
            return message_id
        return format_message(entry["Message"], args)

    def describe(self, info: Any) -> dict[str, Any]:
        """Normalise one ``@Message.ExtendedInfo`` / ``Messages`` entry.

        Returns ``{"MessageId", "Message", "MessageArgs", "RelatedProperties", "Severity",
        "Resolution"}``; the BMC's own ``Message`` is kept when present, otherwise it is
        resolved from the registries (raw id when unknown).  Severity prefers
        ``MessageSeverity`` then ``Severity`` then the registry's.
        """
        if not isinstance(info, dict):
            return {"MessageId": None, "Message": str(info), "MessageArgs": [], "RelatedProperties": [],
                    "Severity": None, "Resolution": None}
        mid = info.get("MessageId")
        args = info.get("MessageArgs") or []
        entry = self.lookup(mid) if mid else None
        message = info.get("Message")
        if not message:
            message = format_message(entry.get("Message"), args) if entry and entry.get("Message") else mid
        severity = info.get("MessageSeverity") or info.get("Severity")
        if not severity and entry:
            severity = entry.get("MessageSeverity") or entry.get("Severity")
        resolution = info.get("Resolution") or (entry.get("Resolution") if entry else None)
        return {
            "MessageId": mid,
            "Message": message,
            "MessageArgs": list(args),
            "RelatedProperties": list(info.get("RelatedProperties") or []),
            "Severity": severity,
            "Resolution": resolution,
        }


def message_key(message_id: Any) -> Optional[str]:
    """The ``MessageKey`` part of an id (``"iLO.2.14.SystemResetRequired"`` -> ``"SystemResetRequired"``)."""
    return parse_message_id(message_id)[2]
