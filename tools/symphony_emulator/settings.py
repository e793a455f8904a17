"""PATCH of a generated BMC: the System's boot override and the BIOS settings object, with ETag preconditions.

:class:`Settings` is a mixin of :class:`symphony_emulator.bmc.BMC` (it uses ``spec``, ``state``, ``tree``,
``invalidate`` and the BMC's ``_get`` for the current ETag).  Only the System and the SKU's BIOS settings
object are writable (PATCH to ``Bios`` itself is 405, as on real BMCs); attributes are checked against the
generated AttributeRegistry, enum values case-exact (R-21); ``If-Match`` per the ``etag`` fault (R-1, R-4).
"""

from __future__ import annotations

from symphony_emulator.replies import Reply, error_body, jreply, json_object
from symphony_emulator.resources import BOOT_TARGETS
from symphony_emulator.tree_system import registry_entries


class Settings:
    """PATCH handling of one BMC (mixin of :class:`BMC`)."""

    def _patch(self, path, headers, body):
        data, refused = json_object(body)
        if refused is not None:
            return refused
        spec = self.spec
        if path not in (spec.S, spec.bios_settings_uri):
            if path in self.tree:
                return jreply(405, error_body("OperationNotAllowed"), {"Allow": "GET, HEAD"})
            return jreply(404, error_body("ResourceNotFound", "Resource", path))
        denied = self._check_etag(path, headers)
        if denied is not None:
            return denied
        if path == spec.S:
            return self._patch_system(data)
        return self._patch_bios(data)

    def _check_etag(self, path, headers):
        mode = self.state.faults["etag"]
        if mode == "none":
            return None
        given = headers.get("If-Match")
        if not given:
            if mode in ("require", "weak_refused"):
                return jreply(428, error_body("PreconditionRequired"))
            return None
        if given.strip() == "*":
            return None
        if mode == "weak_refused" and given.strip().startswith("W/"):
            # AMI/Gigabyte Bios/SD refused its own weak ETag
            return jreply(412, error_body("PreconditionFailed"))
        current = self._current_etag(path) or ""
        candidates = [g.strip() for g in given.split(",")]
        bare = current[2:] if current.startswith("W/") else current
        if current in candidates or bare in candidates:
            return None
        return jreply(412, error_body("PreconditionFailed"))

    def _patch_system(self, data):
        boot = data.get("Boot")
        extra = [k for k in data if k not in ("Boot",)]
        if extra:
            return jreply(400, error_body("PropertyNotWritable", extra[0], related=["#/%s" % extra[0]]))
        if not isinstance(boot, dict):
            return jreply(400, error_body("PropertyValueTypeError", boot, "Boot"))
        new = dict(self.state.boot)
        for key, field, allowed in (("BootSourceOverrideTarget", "target", BOOT_TARGETS),
                                    ("BootSourceOverrideEnabled", "enabled", ["Disabled", "Once", "Continuous"]),
                                    ("BootSourceOverrideMode", None, ["UEFI", "Legacy"])):
            if key in boot:
                if boot[key] not in allowed:
                    return jreply(400, error_body("PropertyValueNotInList", boot[key], key,
                                                  related=["#/Boot/%s" % key], severity="Warning"))
                if field:
                    new[field] = boot[key]
        unknown = [k for k in boot if k not in ("BootSourceOverrideTarget", "BootSourceOverrideEnabled",
                                                "BootSourceOverrideMode")]
        if unknown:
            return jreply(400, error_body("PropertyUnknown", unknown[0], related=["#/Boot/%s" % unknown[0]]))
        self.state.boot = new
        self.invalidate()
        return Reply(204)

    def _patch_bios(self, data):
        attrs = data.get("Attributes")
        if not isinstance(attrs, dict) or not attrs:
            return jreply(400, error_body("PropertyMissing", "Attributes"))
        registry = registry_entries(self.spec)
        for name, value in attrs.items():
            entry = registry.get(name)
            rel = ["#/Attributes/%s" % name]
            if entry is None:
                return jreply(400, error_body("PropertyUnknown", name, related=rel, severity="Warning"))
            kind = entry["Type"]
            if kind == "Enumeration":
                names = [v["ValueName"] for v in entry["Value"]]
                if value not in names:
                    return jreply(400, error_body("PropertyValueNotInList", value, name, related=rel,
                                                  severity="Warning"))
            elif (kind == "Boolean" and not isinstance(value, bool)) or \
                    (kind == "Integer" and (not isinstance(value, int) or isinstance(value, bool))) or \
                    (kind == "String" and not isinstance(value, str)):
                return jreply(400, error_body("PropertyValueTypeError", value, name, related=rel, severity="Warning"))
        self.state.bios_pending.update(attrs)
        self.invalidate()
        return Reply(204)
