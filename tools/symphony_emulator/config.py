"""Defects and faults files: schemas, loading and per-node lookup.

Defects (``defects: {<hostname>: [{kind: <kind>, ...params}]}``) change what a BMC *is*
(a missing GPU, a drifted firmware version).  Faults (``faults: {<hostname>|"*": {...}}``)
change how it *behaves* on the wire (latency, 5xx, resets, pagination, ETag rules).
Both formats are documented in README.md next to this file.

Every error raises :class:`ValidationError` from the collection's one exception family,
naming the file, the host and the JSON path of the offending field.
"""

from __future__ import annotations

import copy

from ansible_collections.symphony.cluster.plugins.module_utils._core.errors import ValidationError
from ansible_collections.symphony.cluster.plugins.module_utils._core.schema import load_yaml_file, validate_document

_INDEX = {"type": "integer", "minimum": 1}

# kind -> (required params, params schema).  Indices are 1-based (GPU1..GPU8, DIMM 1..n, PSU1.., Fan1..).
DEFECT_KINDS = {
    "missing_gpu": {"index": _INDEX},
    "wrong_gpu_model": {"index": _INDEX, "model": {"type": "string", "minLength": 1}},
    "pcie_downtrain": {"index": _INDEX, "width": {"enum": [1, 2, 4, 8, 16, 32]},
                       "gen": {"type": "integer", "minimum": 1, "maximum": 7}},
    "missing_dimm": {"index": _INDEX},
    "serial_mismatch": {"serial": {"type": "string", "minLength": 1}},
    "firmware_drift": {"component": {"type": "string", "minLength": 1},
                       "version": {"type": "string", "minLength": 1}},
    "bios_drift": {"attribute": {"type": "string", "minLength": 1},
                   "value": {"type": ["string", "integer", "number", "boolean"]}},
    "sel_critical": {"message": {"type": "string", "minLength": 1}},
    "psu_failed": {"index": _INDEX},
    "fan_failed": {"index": _INDEX},
    "bmc_unreachable": {},
    "wrong_credentials": {},
    "gpu_hot": {"index": _INDEX, "temp_c": {"type": "number"}},
    "firmware_task_fails": {"component": {"type": "string", "minLength": 1}},
    "slow_bmc_reboot": {"seconds": {"type": "number", "minimum": 0}},
}

_DEFECT_ITEM = {
    "oneOf": [
        {"type": "object", "additionalProperties": False, "required": ["kind"] + sorted(params),
         "properties": dict({"kind": {"const": kind}}, **params)}
        for kind, params in sorted(DEFECT_KINDS.items())
    ]
}

DEFECTS_SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object", "additionalProperties": False, "required": ["defects"],
    "properties": {"defects": {"type": "object",
                               "additionalProperties": {"type": "array", "items": {"type": "object"}}}},
}

FAULT_DEFAULTS = {
    "latency_ms": 0.0,            # added to every Redfish request (ms)
    "latency_jitter_ms": 0.0,     # plus uniform(0, jitter) ms
    "error_rate": 0.0,            # share of requests answered 500 with an HTML body
    "reset_rate": 0.0,            # share of requests whose connection is reset
    "malformed_json_rate": 0.0,   # share of JSON answers truncated mid-document
    "etag": "optional",           # optional | require (428 without If-Match) | weak_refused | none
    "max_sessions": 16,           # SessionService sessions before 503 SessionLimitExceeded
    "session_timeout_s": 300,     # idle X-Auth-Token lifetime (SessionService.SessionTimeout)
    "page_size": 0,               # 0 = no pagination; else Members@odata.nextLink pages
    "overlapping_pages": False,   # each page returns all remaining members (DGX H100, R-26)
    "slow_firmware_inventory_ms": 0.0,
    "task_duration_s": 1.0,       # firmware update task, Running -> Completed
    "bmc_reboot_s": 2.0,          # BMC unreachable after its own update or Manager.Reset
    "bmc_warmup_s": 0.5,          # then 503 from every URI before it answers again
    "host_boot_s": 0.5,           # host reset -> booted (disk or ephemeral runtime)
    "require_transfer_protocol": False,  # SimpleUpdate without TransferProtocol -> 400
    "expand_max_levels": 2,       # $expand MaxLevels advertised and served (Supermicro X13: 2); 0 = no $expand
    "boot_override_ignored": False,  # VM-backed nodes: a Once/Continuous override is accepted, the disk boots
    "seed": None,                 # RNG seed for the rates above (None: from the hostname)
    # one-shot faults, in order: [{method, path (prefix), kind: reset|500|503, times}]: the next ``times``
    # requests matching method+path get ``kind`` (one TCP reset on the login, one 500 on a SEL page: issue 25)
    "scripted": [],
}

_RATE = {"type": "number", "minimum": 0, "maximum": 1}
_NONNEG = {"type": "number", "minimum": 0}
_FAULT_OBJECT = {
    "type": "object", "additionalProperties": False,
    "properties": {
        "latency_ms": _NONNEG, "latency_jitter_ms": _NONNEG, "error_rate": _RATE, "reset_rate": _RATE,
        "malformed_json_rate": _RATE, "etag": {"enum": ["optional", "require", "weak_refused", "none"]},
        "max_sessions": {"type": "integer", "minimum": 0}, "session_timeout_s": {"type": "number", "minimum": 1},
        "page_size": {"type": "integer", "minimum": 0}, "overlapping_pages": {"type": "boolean"},
        "slow_firmware_inventory_ms": _NONNEG, "task_duration_s": _NONNEG, "bmc_reboot_s": _NONNEG,
        "bmc_warmup_s": _NONNEG, "host_boot_s": _NONNEG, "require_transfer_protocol": {"type": "boolean"},
        "expand_max_levels": {"type": "integer", "minimum": 0, "maximum": 6}, "seed": {"type": ["integer", "null"]},
        "scripted": {"type": "array", "items": {
            "type": "object", "additionalProperties": False, "required": ["path", "kind"],
            "properties": {"method": {"type": "string"}, "path": {"type": "string"},
                           "kind": {"enum": ["reset", "500", "503"]}, "times": {"type": "integer", "minimum": 1}}}},
        "boot_override_ignored": {"type": "boolean"},
    },
}

FAULTS_SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object", "additionalProperties": False, "required": ["faults"],
    "properties": {"faults": {"type": "object", "additionalProperties": _FAULT_OBJECT}},
}


def _document(source, key, where):
    """``source`` is a path, a full document ``{key: ...}``, a bare mapping, or None."""
    if source is None:
        return {key: {}}, where or "<none>"
    if isinstance(source, dict):
        return (source if key in source else {key: source}), where or "<%s>" % key
    path = str(source)
    return load_yaml_file(path, ValidationError), path


def load_defects(source, nodes=None, skus=None, where=None):
    """Load and validate a defects file.

    ``source``: path to YAML, a dict (``{"defects": {...}}`` or the inner mapping) or None.
    ``nodes``: twin nodes (hostname -> node dict) to check hostnames against; ``skus``: name ->
    manifest to check indices (GPU/DIMM/PSU) and firmware component ids against.
    Returns ``{hostname: [defect dict, ...]}``.  Raises :class:`ValidationError` naming
    the file and ``$.defects.<host>[i].<field>``.
    """
    doc, where = _document(source, "defects", where)
    validate_document(doc, DEFECTS_SCHEMA, where, ValidationError)
    out = {}
    for host, items in (doc.get("defects") or {}).items():
        if nodes is not None and host not in nodes:
            raise ValidationError("$.defects.%s: host is not in the twin" % host, where=where)
        for index, item in enumerate(items):
            path = "$.defects.%s[%d]" % (host, index)
            kind = item.get("kind")
            if kind not in DEFECT_KINDS:
                raise ValidationError("%s.kind: unknown defect kind %r (known: %s)"
                                      % (path, kind, ", ".join(sorted(DEFECT_KINDS))), where=where)
            validate_document(item, _DEFECT_ITEM["oneOf"][sorted(DEFECT_KINDS).index(kind)],
                              "%s: %s" % (where, path), ValidationError)
            if nodes is not None and skus is not None:
                _check_against_sku(item, skus.get(nodes[host]["sku"]), "%s: %s" % (where, path))
        out[host] = [copy.deepcopy(i) for i in items]
    return out


def _check_against_sku(item, sku, where):
    if sku is None:
        return
    bom = sku["bom"]
    limits = {"missing_gpu": bom["gpus"]["count"], "wrong_gpu_model": bom["gpus"]["count"],
              "pcie_downtrain": bom["gpus"]["count"], "gpu_hot": bom["gpus"]["count"],
              "missing_dimm": bom["memory"]["dimm_count"],
              "psu_failed": bom.get("psus", {}).get("count", 0),
              "fan_failed": max(bom.get("fans", {}).get("min_count", 0), 1)}
    kind = item["kind"]
    if kind in limits and item["index"] > limits[kind]:
        raise ValidationError(".index: %d is beyond the SKU's %d (SKU %s)" % (item["index"], limits[kind], sku["sku"]),
                              where=where)
    if kind in ("firmware_drift", "firmware_task_fails"):
        ids = [c["id"] for c in sku["firmware"]]
        if item["component"] not in ids:
            raise ValidationError(".component: %r is not a firmware id of SKU %s (known: %s)"
                                  % (item["component"], sku["sku"], ", ".join(ids)), where=where)


def load_faults(source, where=None):
    """Load and validate a faults file; returns ``{hostname or "*": {fault: value}}``.

    Raises :class:`ValidationError` naming the file and ``$.faults.<host>.<field>``.
    """
    doc, where = _document(source, "faults", where)
    validate_document(doc, FAULTS_SCHEMA, where, ValidationError)
    return {host: dict(values) for host, values in (doc.get("faults") or {}).items()}


def faults_for(faults, hostname):
    """Effective faults of one node: defaults, then ``"*"``, then the node's own entry."""
    out = dict(FAULT_DEFAULTS)
    out.update((faults or {}).get("*", {}))
    out.update((faults or {}).get(hostname, {}))
    return out


def check_fault_values(values, where="faults"):
    """Validate one node's fault mapping (used by the control endpoint); raises ValidationError."""
    validate_document(values, _FAULT_OBJECT, where, ValidationError)
    return values
