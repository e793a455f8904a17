# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""SKU manifests: what a kind of server must be, validated by a JSON Schema.

A manifest (``skus/<sku>.yml``) declares the bill of materials, firmware in
strict update order, BIOS attributes, in-band tunings, the ephemeral runtime,
burn-in tiers with thresholds, cluster validation targets and the NCCL recipe.
The schema lives here as data so modules (which ship only ``module_utils``)
can validate on the controller; ``schemas/sku.schema.json`` is generated from it.
"""

from __future__ import annotations

import os
import posixpath
from typing import Any, Dict, List, Tuple
from urllib.parse import urlsplit

from .errors import ManifestError
from .match import compile_match
from .schema import validate_document, load_yaml_file
from .testkinds import NOT_EXPECTED_PARTS, TEST_KINDS, check_burn_in_keys, kind_schema

# "none": never updated on its own (an InfoROM that comes with the GPU package, a part the BMC reports
# with Updateable false); it is still audited against ``accepted``.
FIRMWARE_METHODS = ("redfish_simple_update", "redfish_multipart", "nvfwupd", "mlxfwmanager", "flint", "nvme_cli",
                    "none")
ACTIVATIONS = ("none", "bmc_reset", "host_reset", "ac_cycle")
PHASES = ("out_of_band", "in_band")
FIRMWARE_KINDS = ("bmc", "bios", "cpld", "gpu", "nvswitch", "retimer", "erot", "nic", "dpu", "nvme", "psu", "other")

_SHA256 = {"type": "string", "pattern": "^[0-9a-f]{64}$"}
_PCIE = {
    "type": "object",
    "additionalProperties": False,
    "required": ["width", "gen"],
    "properties": {
        "width": {"type": "integer", "enum": [1, 2, 4, 8, 16, 32]},
        "gen": {"type": "integer", "minimum": 1, "maximum": 7},
    },
}
# In-band software a SKU may pin (fleet_audit reads each with the tool named in _fleet_audit/observe.py).
SOFTWARE_COMPONENTS = ("kernel", "gpu_driver", "cuda", "dcgm", "nccl", "ofed", "container_toolkit", "rocm")
_SOURCES = {"type": "object", "additionalProperties": {"type": "string", "minLength": 1}}
_THRESHOLDS = {"type": "object", "additionalProperties": {"type": ["number", "string", "boolean"]}}
# A profile's threshold may instead be relative to a measured baseline (_burnin/calibration.py): a fraction of a
# calibration figure (floors) or a multiple of it (ceilings), with the reason for that factor.
_RELATIVE = {
    "type": "object", "additionalProperties": False, "required": ["of", "why"],
    "properties": {"of": {"type": "string", "pattern": "^[a-z0-9_]+\\.[a-z0-9_]+$"},
                   "fraction": {"type": "number", "exclusiveMinimum": 0, "maximum": 1},
                   "multiple": {"type": "number", "minimum": 1},
                   "why": {"type": "string", "minLength": 1}},
    "oneOf": [{"required": ["fraction"]}, {"required": ["multiple"]}],
}
_PROFILE_BURN_IN = {
    "type": "object", "additionalProperties": False,
    "properties": {
        # How many hosts run burnin_run at once (roles/burn_in throttle); absent or 0 = no limit.
        "max_concurrent_hosts": {"type": "integer", "minimum": 0},
        "tests": {"type": "object", "additionalProperties": {
            "type": "object", "additionalProperties": False,
            "properties": {"cost_s": {"type": "number", "minimum": 0}, "timeout_s": {"type": "number", "minimum": 1},
                           "flaky": {"type": "boolean"}, "params": {"type": "object"},
                           "thresholds": {"type": "object", "additionalProperties": {
                               "anyOf": [{"type": ["number", "string", "boolean"]}, _RELATIVE]}},
                           "sources": _SOURCES}}},
    },
}

SKU_SCHEMA: Dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": "https://symphony.cluster/schemas/sku.schema.json",
    "title": "symphony.cluster SKU manifest",
    "type": "object",
    "additionalProperties": False,
    "required": ["sku", "schema_version", "system", "bom", "firmware"],
    "properties": {
        "schema_version": {"const": 1},
        "sku": {"type": "string", "pattern": "^[a-z0-9][a-z0-9_]*$"},
        "description": {"type": "string"},
        "system": {
            "type": "object",
            "additionalProperties": False,
            "required": ["manufacturer", "model"],
            "properties": {
                # Redfish ComputerSystem Manufacturer/Model as the BMC reports them; null where the
                # vendor leaves them empty (GB200 System_0).
                "manufacturer": {"type": ["string", "null"]},
                "model": {"type": ["string", "null"]},
                "model_aliases": {"type": "array", "items": {"type": "string"}},
                "system_id": {"type": "string"},
                "chassis_id": {"type": "string"},
                "manager_id": {"type": "string"},
                "bmc_vendor": {"type": "string"},
                # nodes in one chassis behind one BMC (blade chassis); above 1 every twin node of the SKU names
                # its bmc_system_id and is judged on that system alone
                "nodes_per_chassis": {"type": "integer", "minimum": 1},
            },
        },
        "bom": {
            "type": "object",
            "additionalProperties": False,
            "required": ["cpus", "memory", "gpus"],
            "properties": {
                "cpus": {
                    "type": "object", "additionalProperties": False, "required": ["count", "model"],
                    "properties": {"count": {"type": "integer", "minimum": 1},
                                   "model": {"type": "string"},
                                   "cores": {"type": "integer", "minimum": 1}},
                },
                "memory": {
                    "type": "object", "additionalProperties": False, "required": ["dimm_count", "total_gib"],
                    "properties": {"dimm_count": {"type": "integer", "minimum": 0},
                                   "dimm_size_gib": {"type": "number", "minimum": 0},
                                   "total_gib": {"type": "number", "minimum": 0}},
                },
                "gpus": {
                    "type": "object", "additionalProperties": False, "required": ["count"],
                    "properties": {"count": {"type": "integer", "minimum": 0},
                                   "vendor": {"type": "string", "enum": ["nvidia", "amd", "none"]},
                                   "model": {"type": "string"},
                                   "memory_gib": {"type": "number", "minimum": 0},
                                   "pcie": _PCIE,
                                   "tdp_w": {"type": "number", "minimum": 0},
                                   "max_operating_temp_c": {"type": "number"},
                                   "redfish_location": {"type": "string",
                                                        "enum": ["processors", "pcie_devices", "either"]}},
                },
                "nics": {
                    "type": "array",
                    "items": {"type": "object", "additionalProperties": False,
                              "required": ["model", "count"],
                              # model null: the BMC reports no model for these adapters (DGX H100)
                              "properties": {"model": {"type": ["string", "null"]},
                                             "count": {"type": "integer", "minimum": 0},
                                             "ports": {"type": "integer", "minimum": 1},
                                             "speed_gbps": {"type": "number", "minimum": 0},
                                             "role": {"type": "string",
                                                      "enum": ["fabric", "frontend", "storage", "management", "dpu"]},
                                             "pcie": _PCIE}},
                },
                "nvme": {
                    "type": "object", "additionalProperties": False, "required": ["count"],
                    "properties": {"count": {"type": "integer", "minimum": 0},
                                   "model": {"type": "string"},
                                   # every model that may fill a bay (data and boot drives)
                                   "models": {"type": "array", "items": {"type": "string"}},
                                   "capacity_gb": {"type": "number", "minimum": 0}},
                },
                "psus": {"type": "object", "additionalProperties": False, "required": ["count"],
                         "properties": {"count": {"type": "integer", "minimum": 0},
                                        "model": {"type": "string"},
                                        "models": {"type": "array", "items": {"type": "string"}},
                                        "capacity_w": {"type": "number", "minimum": 0}}},
                "fans": {"type": "object", "additionalProperties": False, "required": ["min_count"],
                         "properties": {"min_count": {"type": "integer", "minimum": 0}}},
            },
        },
        "firmware": {
            "type": "array",
            "description": "Components in strict update order.",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["id", "kind", "phase", "accepted", "method", "activation", "match"],
                "properties": {
                    "id": {"type": "string", "pattern": "^[a-z0-9][a-z0-9_]*$"},
                    "name": {"type": "string"},
                    "kind": {"enum": list(FIRMWARE_KINDS)},
                    "phase": {"enum": list(PHASES)},
                    "accepted": {"type": "array", "minItems": 1, "items": {"type": "string", "minLength": 1}},
                    "target": {"type": "string", "minLength": 1},
                    "image": {"type": "object", "additionalProperties": False, "required": ["uri", "sha256"],
                              "properties": {"uri": {"type": "string", "minLength": 1}, "sha256": _SHA256}},
                    "method": {"enum": list(FIRMWARE_METHODS)},
                    "activation": {"enum": list(ACTIVATIONS)},
                    "allow_downgrade": {"type": "boolean"},
                    # the component whose package carries this one (method "none")
                    "updated_with": {"type": "string"},
                    "description": {"type": "string"},
                    # How to find this component in a Redfish FirmwareInventory (ids are regexes,
                    # matched with re.fullmatch); count = how many members must match.
                    "match": {"type": "object", "additionalProperties": False,
                              "properties": {"id": {"type": "string"}, "name": {"type": "string"},
                                             # JMESPath on the member (Redfish SoftwareInventory fields)
                                             "query": {"type": "string"},
                                             "count": {"type": "integer", "minimum": 1},
                                             # literal member Ids as the real BMC names them (the emulator
                                             # serves these; the audit matches with the regexes above)
                                             "ids": {"type": "array", "items": {"type": "string"}},
                                             # their Names, index for index (the emulator serves these too)
                                             "names": {"type": "array", "items": {"type": "string"}}}},
                },
            },
        },
        "bios": {
            "type": "object", "additionalProperties": False,
            "properties": {"attributes": {"type": "object",
                                          "additionalProperties": {"type": ["string", "integer", "boolean", "number"]}},
                           "settings_path": {"type": "string"},
                           # off: no If-Match on the BIOS PATCH, for a BMC that refuses its own ETags (recorded)
                           "etag_mode": {"enum": ["if_match", "off"]},
                           "apply_time": {"enum": ["Immediate", "OnReset", "AtMaintenanceWindowStart",
                                                   "InMaintenanceWindowOnReset"]}},
        },
        "runtime": {
            "type": "object", "additionalProperties": False, "required": ["image_uri", "method"],
            "properties": {"image_uri": {"type": "string"}, "sha256": _SHA256,
                           "method": {"enum": ["virtual_media", "pxe"]},
                           "boot_timeout_s": {"type": "number", "minimum": 1},
                           # what the runtime carries (/etc/symphony/build-id) and boots with: runtime_proof
                           # compares both in-band (_provision/proof.py; images/runtime/build.sh writes them)
                           "build_id": {"type": "string", "pattern": "^[A-Za-z0-9][A-Za-z0-9._-]*$"},
                           "kernel_cmdline": {"type": "string"}},
        },
        # The production OS that provisioning writes to the node's disk last, from the runtime (_provision/os_install.py;
        # images/os/build.sh writes every value into its build.json).  image_uri/sha256: the compressed artefact
        # (zstd); raw_sha256/raw_bytes: the raw disk image, read back from the disk after the write; build_id,
        # kernel, os_release, root_label and packages are verified in-band after the node booted from its disk.
        "os": {
            "type": "object", "additionalProperties": False,
            "required": ["image_uri", "sha256", "raw_sha256", "raw_bytes", "build_id", "target_disk"],
            "properties": {"image_uri": {"type": "string"}, "sha256": _SHA256, "raw_sha256": _SHA256,
                           "raw_bytes": {"type": "integer", "minimum": 512},
                           "build_id": {"type": "string", "pattern": "^[A-Za-z0-9][A-Za-z0-9._-]*$"},
                           "target_disk": {"type": "string", "pattern": "^/dev/"},
                           "root_label": {"type": "string"}, "kernel": {"type": "string"},
                           "kernel_cmdline": {"type": "string"},
                           "os_release": {"type": "object", "additionalProperties": {"type": "string"}},
                           "packages": {"type": "object", "additionalProperties": {"type": "string"}},
                           "boot_timeout_s": {"type": "number", "minimum": 1}},
        },
        "tunings": {
            "type": "object", "additionalProperties": False,
            "properties": {"sysctl": {"type": "object", "additionalProperties": {"type": ["string", "integer"]}},
                           "kernel_cmdline": {"type": "array", "items": {"type": "string"}},
                           "persistence_mode": {"type": "boolean"},
                           "gpu_power_limit_w": {"type": "number", "minimum": 0}},
        },
        "nccl_env": {"type": "object", "additionalProperties": {"type": "string"}},
        # What runs in-band after handoff (fleet_audit drift): accepted version strings exactly as the node's own
        # tool prints them, each with its source.  The names are fixed so a misspelt pin cannot pass unjudged.
        "software": {
            "type": "object", "additionalProperties": False,
            "properties": {name: {"type": "object", "additionalProperties": False, "required": ["accepted", "source"],
                                  "properties": {"accepted": {"type": "array", "minItems": 1,
                                                              "items": {"type": "string", "minLength": 1}},
                                                 "source": {"type": "string", "minLength": 1}}}
                           for name in SOFTWARE_COMPONENTS},
        },
        "burn_in": {
            "type": "object", "additionalProperties": False, "required": ["tiers"],
            "properties": {
                "tiers": {
                    "type": "array",
                    "items": {
                        "type": "object", "additionalProperties": False, "required": ["name", "tests"],
                        "properties": {
                            "name": {"enum": ["node", "gpu", "power", "fabric"]},
                            "tests": {
                                "type": "array",
                                "items": {
                                    "type": "object", "additionalProperties": False,
                                    "required": ["name", "kind", "timeout_s"],
                                    # per kind, the params/thresholds it reads (testkinds.TEST_KINDS)
                                    "allOf": kind_schema(),
                                    "properties": {
                                        "name": {"type": "string", "pattern": "^[a-z0-9_]+$"},
                                        "kind": {"enum": sorted(TEST_KINDS)},
                                        "cost_s": {"type": "number", "minimum": 0},
                                        "timeout_s": {"type": "number", "minimum": 1},
                                        "flaky": {"type": "boolean"},
                                        "params": {"type": "object"},
                                        "thresholds": _THRESHOLDS,
                                        "description": {"type": "string"},
                                        "sources": _SOURCES,
                                    },
                                },
                            },
                        },
                    },
                },
            },
        },
        "validation": {
            "type": "object", "additionalProperties": False,
            "properties": {
                "mfu_targets": {"type": "array", "items": {
                    "type": "object", "additionalProperties": False,
                    "required": ["recipe", "precision", "min_mfu_pct"],
                    "properties": {"recipe": {"type": "string"}, "precision": {"type": "string"},
                                   "min_mfu_pct": {"type": "number", "minimum": 0, "maximum": 100},
                                   "nodes": {"type": "integer", "minimum": 1},
                                   "convention": {"type": "string"}}}},
                "nccl_busbw_floors": {"type": "array", "items": {
                    "type": "object", "additionalProperties": False,
                    "required": ["collective", "min_busbw_gbps"],
                    "properties": {"collective": {"type": "string"}, "nodes": {"type": "integer", "minimum": 1},
                                   "size_bytes": {"type": "integer", "minimum": 1},
                                   "min_busbw_gbps": {"type": "number", "minimum": 0}}}},
                "nccl_max_bytes": {"type": "integer", "minimum": 8},
                "thermal": {"type": "object", "additionalProperties": False,
                            "properties": {"z_threshold": {"type": "number"}, "delta_c": {"type": "number"},
                                           "max_temp_margin_c": {"type": "number"}}},
                # Straggler ranks (_validation/stragglers.py): modified z of a rank's median step time and how
                # much slower than the peers' median it must be, in percent.
                "stragglers": {"type": "object", "additionalProperties": False,
                               "properties": {"z_threshold": {"type": "number", "exclusiveMinimum": 0},
                                              "min_slowdown_pct": {"type": "number", "minimum": 0}}},
                "max_attempts": {"type": "integer", "minimum": 1},
                "sources": _SOURCES,
            },
        },
        # Which checks each stage's gate does NOT require, per profile (everything else is required).
        "gates": {
            "type": "object",
            "additionalProperties": {"type": "object", "additionalProperties": {
                "type": "object", "additionalProperties": False,
                "properties": {"optional": {"type": "array", "items": {"type": "string"}}}}},
        },
        # The in-band view of a profile that differs from the SKU (the lab profile: lab hosts have no GPUs).
        # ``inband_bom`` replaces parts of ``bom`` for in-band checks; ``not_expected`` names bom parts the
        # profile's hosts lack (their checks are not_run with that reason).  Open for stage-specific keys.
        "profiles": {"type": "object", "additionalProperties": {
            "type": "object",
            "properties": {"description": {"type": "string"},
                           "inband_bom": {"type": "object"},
                           "not_expected": {"type": "array", "items": {"enum": list(NOT_EXPECTED_PARTS)}},
                           # test names and their per-kind keys: testkinds.check_burn_in_keys (a name's kind is
                           # not expressible here)
                           "burn_in": _PROFILE_BURN_IN}}},
        "sources": _SOURCES,
    },
}


def _check_boot_lines(data: Dict[str, Any], where: str) -> None:
    """Refuse a SKU whose pinned boot lines lack its own ``tunings.kernel_cmdline`` tokens: provisioning's tunings
    check reads ``/proc/cmdline`` in the pinned runtime and fleet_audit's drift reads it on the installed OS, so such a
    SKU could never pass tunings (or would show drift on every node) whatever the node does."""
    wanted = (data.get("tunings") or {}).get("kernel_cmdline") or []
    for section in ("runtime", "os"):
        line = (data.get(section) or {}).get("kernel_cmdline")
        if line is None:
            continue
        missing = [token for token in wanted if token not in line.split()]
        if missing:
            raise ManifestError("tunings.kernel_cmdline %s not on %s.kernel_cmdline %r: the image boots without them, so "
                                "no node could pass; build the image with them (images/tunings.cmdline) and pin it"
                                % (" ".join(missing), section, line), where="%s: $.%s.kernel_cmdline" % (where, section))


def validate_manifest(data: Dict[str, Any], where: str) -> Dict[str, Any]:
    """Validate one manifest document against :data:`SKU_SCHEMA` and cross-field rules.

    Raises :class:`ManifestError` naming ``where`` and the JSON path of the first error.  Burn-in keys are
    checked first (:func:`testkinds.check_burn_in_keys`) so an unknown key is reported with the keys its kind
    knows.
    """
    check_burn_in_keys(data, where)
    validate_document(data, SKU_SCHEMA, where, ManifestError)
    seen = set()
    # image_dir holds one local copy per URI basename (_provision/firmware.image_file): two different images with
    # one basename would make one of them fail its sha256 check on every run, so refuse the SKU instead.
    local_names: Dict[str, Tuple[str, str]] = {}
    for index, comp in enumerate(data.get("firmware", [])):
        path = "%s: $.firmware[%d]" % (where, index)
        if comp["id"] in seen:
            raise ManifestError("firmware id %r appears twice" % comp["id"], where=path)
        seen.add(comp["id"])
        if comp.get("image"):
            name = posixpath.basename(urlsplit(comp["image"]["uri"]).path)
            other = local_names.setdefault(name, (comp["id"], comp["image"]["sha256"].lower()))
            if other[0] != comp["id"] and other[1] != comp["image"]["sha256"].lower():
                raise ManifestError("image file name %r is also firmware %r's, with another sha256: the local copies in "
                                    "image_dir are named by the URI's file name, so give each image its own"
                                    % (name, other[0]), where="%s.image.uri" % path)
        compile_match(comp.get("match") or {}, "%s.match" % path)
        if comp.get("target") and comp["target"] not in comp["accepted"]:
            raise ManifestError("target %r is not among the accepted versions %s"
                                % (comp["target"], comp["accepted"]), where=path)
    _check_boot_lines(data, where)
    # Out-of-band components come before in-band ones: BMC -> BIOS -> ... then GPU -> NIC -> NVMe.
    phases = [c["phase"] for c in data.get("firmware", [])]
    if "in_band" in phases and "out_of_band" in phases[phases.index("in_band"):]:
        raise ManifestError("out_of_band firmware listed after in_band firmware breaks the update order",
                            where="%s: $.firmware" % where)
    return data


def load_manifest(path: str) -> Dict[str, Any]:
    """Load and validate one SKU manifest file; returns the manifest dict."""
    data = load_yaml_file(path, ManifestError)
    return validate_manifest(data, path)


def load_skus(directory: str) -> Dict[str, Dict[str, Any]]:
    """Load every ``*.yml``/``*.yaml`` manifest in ``directory``: ``{sku: manifest}``.

    Raises :class:`ManifestError` when a file is invalid, or two files declare one SKU.
    """
    if not os.path.isdir(directory):
        raise ManifestError("SKU directory not found", where=directory)
    skus: Dict[str, Dict[str, Any]] = {}
    for name in sorted(os.listdir(directory)):
        if not name.endswith((".yml", ".yaml")):
            continue
        path = os.path.join(directory, name)
        manifest = load_manifest(path)
        if manifest["sku"] in skus:
            raise ManifestError("SKU %r is declared twice" % manifest["sku"], where=path)
        skus[manifest["sku"]] = manifest
    return skus


def required_optional_checks(manifest: Dict[str, Any], stage: str, profile: str = "production") -> List[str]:
    """Names of checks of ``stage`` that the gate does not require for this SKU and profile."""
    return list(manifest.get("gates", {}).get(profile, {}).get(stage, {}).get("optional", []))
