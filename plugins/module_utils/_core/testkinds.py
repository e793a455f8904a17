# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The keys each burn-in test kind knows: the one table a SKU's ``params``/``thresholds`` are checked against.

A key a check does not read is a floor nobody enforces (``min_bw_mbsp: 5500`` beside ``min_bw_mbps``), so a
SKU that names one does not load.  :data:`TEST_KINDS` is the table: when a check in ``_burnin/checks`` starts
reading a new key, add it here in the same change.  :func:`check_burn_in_keys` runs at SKU load
(``sku.validate_manifest``) and :func:`kind_schema` puts the same table in ``schemas/sku.schema.json``.
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Tuple

from .errors import ManifestError

_STRESS_NG_THRESHOLDS = ("exit_code", "max_errors", "min_bogo_ops_per_s")
_POWER_PARAMS = ("duration_s", "warmup_s", "sample_interval_s", "period_s", "duty_cycle", "load", "load_args",
                 "telemetry", "ramp_s", "ramp_step_s", "max_edge_error_ms")
# max_sel_critical: judged on the controller from the BMC SEL scan (check bmc_sel_scan), not by the power check.
_POWER_THRESHOLDS = ("target_w", "min_fraction_of_tdp", "max_fraction_of_tdp", "max_throttle_pct", "max_temp_c",
                     "max_xid", "max_power_brake_events", "max_hw_thermal_events", "max_sel_critical")
# Fabric-tier kinds are run by the fabric tier (fabric_test, roles/burn_in/tasks/fabric.yml), not by a burn-in
# check function; _fabric/declared.py test_options reads these (transport/floor: a profile replacing the tool).
_FABRIC_PARAMS = ("transport", "floor", "duration_s", "binary")
_COLLECTIVE_PARAMS = ("min_bytes", "max_bytes", "step_factor", "nodes", "size_bytes", "gpus_per_node") + _FABRIC_PARAMS

# kind -> {"params": keys, "thresholds": keys}: what the kind's check in _burnin/checks reads (its docstring
# gives units and defaults).
TEST_KINDS: Dict[str, Dict[str, Tuple[str, ...]]] = {
    "stress_ng_cpu": {"params": ("workers", "method", "verify", "duration_s", "extra"),
                      "thresholds": _STRESS_NG_THRESHOLDS},
    "stress_ng_vm": {"params": ("workers", "vm_bytes", "verify", "duration_s", "extra"),
                     "thresholds": _STRESS_NG_THRESHOLDS},
    "memory_size": {"params": (), "thresholds": ("min_fraction_of_bom", "min_gib")},
    "edac": {"params": (), "thresholds": ("max_ue", "max_ce")},
    "pcie_links": {"params": ("check_gpu_current_speed",),
                   "thresholds": ("gpu_min_width", "gpu_min_gen", "nic_min_width", "nic_min_gen")},
    "fio": {"params": ("rw", "directory", "filename", "allow_device_write", "bs", "size_mib", "iodepth", "numjobs",
                       "direct", "ioengine", "runtime_s"),
            "thresholds": ("min_bw_mbps", "min_iops", "max_p99_lat_us")},
    "kernel_log_scan": {"params": (), "thresholds": ("max_xid", "max_mce", "max_aer_fatal", "max_aer_corrected")},
    "ibstat": {"params": ("link_layer",), "thresholds": ()},
    "nvidia_smi": {"params": (),
                   "thresholds": ("gpu_count", "require_ecc", "max_ecc_uncorrectable", "max_retired_pages_pending",
                                  "max_retired_dbe", "max_remapped_rows_failure", "max_remapped_uncorrectable")},
    # required_status: the verdict DCGM must give (the check fails on any Fail); memory_bandwidth_min_mbps: the
    # floor DCGM's memory_bandwidth plugin applies from its diag-skus table (the check reads DCGM's verdict).
    "dcgm_diag": {"params": ("level", "extra"), "thresholds": ("required_status", "memory_bandwidth_min_mbps")},
    "nvlink": {"params": ("fabric_state", "fabric_manager"),
               "thresholds": ("min_active_links", "min_link_gbps", "max_replay_errors", "max_recovery_errors",
                              "max_crc_errors")},
    "rocm_smi": {"params": (), "thresholds": ("gpu_count", "max_temp_c", "max_pcie_replay")},
    "rocm_validation_suite": {"params": ("suite", "conf_dir"), "thresholds": ("required_status",)},
    "amd_field_diag": {"params": ("command",), "thresholds": ()},
    "gpu_burn": {"params": ("binary", "duration_s", "use_doubles"), "thresholds": ("max_errors", "max_temp_c")},
    "dcgmproftester": {"params": ("duration_s", "field_id"), "thresholds": ()},
    "power_sustained": {"params": _POWER_PARAMS, "thresholds": _POWER_THRESHOLDS},
    "power_pulsating": {"params": _POWER_PARAMS, "thresholds": _POWER_THRESHOLDS},
    "ib_write_bw_pairwise": {"params": ("pairing", "size_bytes", "gpudirect", "cuda_devices", "hcas", "bidirectional")
                             + _FABRIC_PARAMS,
                             "thresholds": ("min_bidir_gbps", "max_p99_lat_us")},
    "nccl_all_reduce": {"params": _COLLECTIVE_PARAMS, "thresholds": ("min_busbw_gbps",)},
    "nccl_all_gather": {"params": _COLLECTIVE_PARAMS, "thresholds": ("min_busbw_gbps",)},
    "rccl_all_reduce": {"params": _COLLECTIVE_PARAMS, "thresholds": ("min_busbw_gbps", "max_wrong")},
}
SECTIONS = ("params", "thresholds")
# What a profile's not_expected may name: bom parts, and the InfiniBand fabric (bom.nics with role fabric).
NOT_EXPECTED_PARTS = ("cpus", "memory", "gpus", "nics", "nvme", "psus", "fans", "infiniband")


def _unknown(keys: Any, known: Tuple[str, ...], what: str, where: str) -> None:
    if not isinstance(keys, Mapping):
        return  # the JSON Schema reports the wrong type
    for key in keys:
        if key not in known:
            raise ManifestError("unknown key %r in %s (known: %s)" % (key, what, ", ".join(known) or "none"),
                                where=where)


def check_test_keys(kind: str, test: Mapping[str, Any], where: str) -> None:
    """Refuse a ``params``/``thresholds`` key that test kind ``kind`` does not read.

    ``test``: a test dict (or a profile's/operator's override of one); ``where``: ``file: $.json.path`` of it.
    Raises :class:`ManifestError` naming the path, the unknown key and the keys the kind knows.
    """
    table = TEST_KINDS[kind]
    for section in SECTIONS:
        _unknown(test.get(section) or {}, table[section], "%s of kind %s" % (section, kind),
                 "%s.%s" % (where, section))


def check_burn_in_keys(manifest: Mapping[str, Any], where: str) -> None:
    """Check every burn-in test's kind and keys, and every profile's test names, keys and ``not_expected``.

    ``where``: the file the manifest came from.  Raises :class:`ManifestError` at the first unknown name or key,
    with its JSON path and what is known there.
    """
    kinds: Dict[str, str] = {}
    tiers = (manifest.get("burn_in") or {}).get("tiers") if isinstance(manifest.get("burn_in"), Mapping) else None
    for t_index, tier in enumerate(tiers if isinstance(tiers, list) else []):
        tests = tier.get("tests") if isinstance(tier, Mapping) else None
        for index, test in enumerate(tests if isinstance(tests, list) else []):
            if not isinstance(test, Mapping):
                continue
            path = "%s: $.burn_in.tiers[%d].tests[%d]" % (where, t_index, index)
            kind = test.get("kind")
            if kind not in TEST_KINDS:
                raise ManifestError("unknown test kind %r (known: %s)" % (kind, ", ".join(sorted(TEST_KINDS))),
                                    where=path + ".kind")
            check_test_keys(kind, test, path)
            kinds[str(test.get("name"))] = kind
    profiles = manifest.get("profiles")
    for name, profile in (profiles.items() if isinstance(profiles, Mapping) else []):
        if not isinstance(profile, Mapping):
            continue
        path = "%s: $.profiles.%s" % (where, name)
        for index, part in enumerate(profile.get("not_expected") or []):
            if part not in NOT_EXPECTED_PARTS:
                raise ManifestError("unknown part %r in not_expected (known: %s)" % (part, ", ".join(NOT_EXPECTED_PARTS)),
                                    where="%s.not_expected[%d]" % (path, index))
        burn_in = profile.get("burn_in")
        # the other keys of a profile's burn_in and of its tests: the JSON Schema (sku._PROFILE_BURN_IN)
        overrides = burn_in.get("tests") or {} if isinstance(burn_in, Mapping) else {}
        for test_name, override in (overrides.items() if isinstance(overrides, Mapping) else []):
            test_path = "%s.burn_in.tests.%s" % (path, test_name)
            if test_name not in kinds:
                raise ManifestError("profile names test %r, which burn_in.tiers does not declare (declared: %s)"
                                    % (test_name, ", ".join(kinds) or "none"), where=test_path)
            if isinstance(override, Mapping):
                check_test_keys(kinds[test_name], override, test_path)


def kind_schema() -> List[Dict[str, Any]]:
    """JSON Schema ``allOf`` items for a burn-in test: per kind, the ``params``/``thresholds`` names it knows."""
    return [{"if": {"properties": {"kind": {"const": kind}}},
             "then": {"properties": {section: {"propertyNames": {"enum": list(table[section])}}
                                     for section in SECTIONS}}}
            for kind, table in TEST_KINDS.items()]
