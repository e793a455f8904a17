# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""``dcgmi diag -j`` JSON, both the DCGM 3.x and the 4.x layouts (parsing cases P-C1, P-C2).

3.x: top key ``"DCGM GPU Diagnostic"``, results carry ``gpu_ids`` (a string
``"0,1,2"`` or an int) and upper-case statuses, text may precede the JSON and
``tests`` may contain ``null``.  4.x: top key ``"DCGM Diagnostic"``, results
carry ``entity_group``/``entity_id``, each test has ``test_summary.status``,
plus top-level ``entity_groups`` and ``metadata`` (source: NVIDIA/DCGM
``testing/python3/dcgm_diag_schema.json``; status words from ``dcgmi/Diag.cpp``:
Pass, Skip, Warn, Fail, Not Run).
"""

from __future__ import annotations

from typing import Any

from . import (
    load_json_document,
    parse_error,
)

TOOL = "dcgmi diag"
TOP_KEYS = ("DCGM Diagnostic", "DCGM GPU Diagnostic")
# Keys the 4.x schema requires (dcgm_diag_schema.json): used to tell the layouts apart.
V4_RESULT_KEYS = ("entity_group", "entity_group_id", "entity_id", "status")
V4_TEST_KEYS = ("name", "results", "test_summary")
STATUS_WORDS = {
    "pass": "pass", "passed": "pass",
    "fail": "fail", "failed": "fail", "failure": "fail",
    "warn": "warn", "warning": "warn",
    "skip": "skip", "skipped": "skip",
    "not run": "not_run", "notrun": "not_run", "not_run": "not_run",
}
_ORDER = ("fail", "warn", "pass", "skip", "not_run")


def normalise_status(value: Any, where: str = "") -> str:
    """``PASS``/``Pass`` -> ``pass`` ... ``Not Run`` -> ``not_run``; ParseError for anything else."""
    if not isinstance(value, str):
        raise parse_error(TOOL, "%sstatus is %r, not a string" % (where, value))
    key = " ".join(value.strip().lower().split())
    if key not in STATUS_WORDS:
        raise parse_error(TOOL, "%sunknown status %r (expected Pass, Fail, Warn, Skip or Not Run)" % (where, value))
    return STATUS_WORDS[key]


def _gpu_ids(value: Any) -> list[int]:
    """``"0,1,2"`` / ``3`` / ``[0, 1]`` -> sorted list of ints."""
    if value is None:
        return []
    if isinstance(value, bool):
        raise parse_error(TOOL, "gpu_ids is a boolean")
    if isinstance(value, int):
        return [value]
    if isinstance(value, str):
        out = []
        for part in value.replace(" ", "").split(","):
            if part == "":
                continue
            if not part.isdigit():
                raise parse_error(TOOL, "gpu_ids %r is not a list of GPU indexes" % value)
            out.append(int(part))
        return sorted(set(out))
    if isinstance(value, list):
        out = []
        for item in value:
            out.extend(_gpu_ids(item))
        return sorted(set(out))
    raise parse_error(TOOL, "gpu_ids %r is neither a string nor an integer" % (value,))


def _messages(value: Any, key: str) -> list[dict[str, Any]]:
    """warnings/info: a list of strings or of ``{"warning": ...}`` objects, or one string."""
    if value is None:
        return []
    # one string (or another scalar) is one message, in the same shape as a list item
    if isinstance(value, str):
        return [{"message": value}]
    if isinstance(value, dict):
        value = [value]
    if not isinstance(value, list):
        return [{"message": str(value)}]
    out = []
    for item in value:
        if isinstance(item, dict):
            text = item.get(key, item.get("message", ""))
            entry: dict[str, Any] = {"message": str(text)}
            if "error_id" in item:
                entry["error_id"] = item.get("error_id")
            out.append(entry)
        elif item is not None:
            out.append({"message": str(item)})
    return out


def _parse_result(result: Any, test_name: str) -> dict[str, Any]:
    where = "test %r: " % test_name
    if not isinstance(result, dict):
        raise parse_error(TOOL, "%sresult is %r, not an object" % (where, type(result).__name__))
    if "status" not in result:
        raise parse_error(TOOL, "%sresult has no status" % where)
    out: dict[str, Any] = {"status": normalise_status(result["status"], where),
                           "warnings": _messages(result.get("warnings"), "warning"),
                           "info": [m["message"] for m in _messages(result.get("info"), "info")]}
    if "entity_id" in result or "entity_group" in result:
        out["entity_group"] = result.get("entity_group")
        out["entity_id"] = result.get("entity_id")
        out["gpu_ids"] = [result["entity_id"]] if (result.get("entity_group") in (None, "GPU")
                                                   and isinstance(result.get("entity_id"), int)
                                                   and not isinstance(result.get("entity_id"), bool)) else []
    else:
        out["gpu_ids"] = _gpu_ids(result.get("gpu_ids", result.get("gpu_id")))
    return out


def _worst(statuses: Any) -> str:
    for status in _ORDER:
        if status in statuses:
            return status
    return "not_run"


def parse_dcgm_diag(text: str) -> dict[str, Any]:
    """Parse ``dcgmi diag -r <level> -j`` output.

    Returns ``{layout: "3.x"|"4.x", version, driver_version, preamble, runtime_error,
    tests: [{category, name, status, results: [{status, gpu_ids, entity_group, entity_id,
    warnings: [{message, error_id}], info}]}], gpus: [{entity_id, serial, device_id}],
    counts: {pass, fail, warn, skip, not_run}, verdict}``.  ``verdict`` is ``fail`` if any test
    failed, else ``warn`` if any warned, else ``pass`` if any passed, else ``not_run`` (a
    document with no tests is never a pass).  Raises :class:`ParseError` on a missing top key,
    malformed JSON or an unknown status.
    """
    doc, preamble, _dups = load_json_document(TOOL, text)
    if not isinstance(doc, dict):
        raise parse_error(TOOL, "top level is not a JSON object")
    top_key = next((k for k in TOP_KEYS if k in doc), None)
    if top_key is None:
        raise parse_error(TOOL, "neither %s found at the top level" % " nor ".join(repr(k) for k in TOP_KEYS))
    body = doc[top_key]
    if not isinstance(body, dict):
        raise parse_error(TOOL, "%r is not an object" % top_key)
    metadata: dict[str, Any] = doc["metadata"] if isinstance(doc.get("metadata"), dict) else {}
    categories = body.get("test_categories") or []
    if not isinstance(categories, list):
        raise parse_error(TOOL, "test_categories is not a list")
    tests = []
    for cat in categories:
        if cat is None:
            continue
        if not isinstance(cat, dict):
            raise parse_error(TOOL, "a test category is not an object")
        cat_tests = cat.get("tests") or []
        if not isinstance(cat_tests, list):
            raise parse_error(TOOL, "category %r: tests is not a list" % cat.get("category"))
        for test in cat_tests:
            if test is None:  # DCGM 3.x writes null between tests (P-C1)
                continue
            if not isinstance(test, dict) or not isinstance(test.get("name"), str):
                raise parse_error(TOOL, "category %r: a test has no name" % cat.get("category"))
            results = test.get("results") or []
            if not isinstance(results, list):
                raise parse_error(TOOL, "test %r: results is not a list" % test["name"])
            parsed = [_parse_result(r, test["name"]) for r in results if r is not None]
            summary = test.get("test_summary")
            if isinstance(summary, dict) and "status" in summary:
                status = normalise_status(summary["status"], "test %r summary: " % test["name"])
            else:
                status = _worst({r["status"] for r in parsed})
            tests.append({"category": cat.get("category"), "name": test["name"], "status": status,
                          "results": parsed,
                          "warnings": _messages(test.get("warnings"), "warning")
                          if isinstance(summary, dict) else []})
    gpus = []
    for group in doc.get("entity_groups") or []:
        if not isinstance(group, dict):
            continue
        for entity in group.get("entities") or []:
            if isinstance(entity, dict):
                gpus.append({"entity_group": group.get("entity_group"), "entity_id": entity.get("entity_id"),
                             "serial": entity.get("serial_num"), "device_id": entity.get("device_id")})
    is_v4 = top_key == "DCGM Diagnostic" or "entity_groups" in doc or "metadata" in doc
    counts = {s: 0 for s in _ORDER}
    for test in tests:
        counts[test["status"]] += 1
    verdict = "not_run"
    if tests:
        verdict = "fail" if counts["fail"] else "warn" if counts["warn"] else "pass" if counts["pass"] else "not_run"
    runtime_error = body.get("runtime_error") or doc.get("runtime_error")
    return {
        "layout": "4.x" if is_v4 else "3.x",
        "version": metadata.get("version") or body.get("version"),
        "driver_version": metadata.get("Driver Version Detected") or body.get("Driver Version Detected"),
        "preamble": preamble,
        "runtime_error": runtime_error if isinstance(runtime_error, str) else None,
        "error_code": body.get("error_code"),
        "tests": tests,
        "gpus": gpus,
        "counts": counts,
        "verdict": verdict,
    }
