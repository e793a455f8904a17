# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""DCGM diagnostic (``dcgmi diag -r <level> -j``) as the SKU declares it: level, thresholds, verdict.

What the verdict follows (NVIDIA DCGM docs):
- Diagnostic Errors (docs.nvidia.com/datacenter/dcgm/latest/reference/diagnostics/errors.html): every error
  a test records carries an ``error_id`` (``DCGM_FR_*``; ``DCGM_FR_OK`` = 0 is "no error"), a severity and a
  category.  The JSON puts them in a result's ``warnings`` list, so an entry with ``error_id`` != 0 is an
  error whatever the status word says: a ``Pass`` with one is not a pass.
- The exit status is read with the JSON, never alone: non-zero with failing tests = the diagnostic ran and
  found errors (``fail``); non-zero with no test result or a ``runtime_error`` = it could not run (``not_run``);
  non-zero while every test passed is inconsistent and fails.
- ``memory_bandwidth_min_mbps`` is handed to DCGM as ``-p memory_bandwidth.minimum_bandwidth=<MB/s>`` (the
  memory_bandwidth plugin's parameter, as the DCGM diag-skus file sets it per SKU), so DCGM judges every GPU;
  the test must then be in the results and pass on every GPU.
- ``required_status: Pass``: a ``Warn`` is not enough.  Levels: user guide "DCGM Diagnostics" (level 1 a
  readiness check of seconds, 3/4 the long stress levels).
"""

from __future__ import annotations

from typing import Any

from ..._core.errors import ToolNotFoundError
from ..._core.gate import Outcome, failed, not_run, passed
from ..._host.parsers.dcgm import parse_dcgm_diag
from ..context import TestContext
from .common import gpu_expectation

DCGM_LEVELS = {"quick": 1, "short": 1, "medium": 2, "long": 3, "xlong": 4}
MEMORY_BANDWIDTH_TEST = "memory_bandwidth"
DCGM_FR_OK = 0


def _key(name: str) -> str:
    return "_".join(str(name).lower().replace("-", " ").split())


def recorded_errors(parsed: dict[str, Any]) -> list[str]:
    """``"<test> GPU <ids>: <message> (error_id N)"`` for every warning entry with an ``error_id`` != 0 on a result
    whose status is ``pass`` (a Fail is already a failure, a Warn is judged by ``required_status``)."""
    out = []
    for test in parsed["tests"]:
        for result in test["results"]:
            if result["status"] != "pass":
                continue
            for warning in result["warnings"]:
                error_id = warning.get("error_id")
                if isinstance(error_id, int) and not isinstance(error_id, bool) and error_id != DCGM_FR_OK:
                    out.append("%s GPU %s: %s (error_id %d)" % (test["name"], ",".join(map(str, result["gpu_ids"]))
                                                                or "?", warning["message"][:200], error_id))
    return out


def _messages(parsed: dict[str, Any], status: str) -> list[str]:
    out = []
    for t in parsed["tests"]:
        if t["status"] != status:
            continue
        msgs = [w["message"] for r in t["results"] for w in r["warnings"] if r["status"] == status]
        gpus = sorted({g for r in t["results"] if r["status"] == status for g in r["gpu_ids"]})
        out.append("%s%s%s" % (t["name"], " (GPU %s)" % ",".join(map(str, gpus)) if gpus else "",
                               ": " + " | ".join(msgs)[:300] if msgs else ""))
    return out


def judge_dcgm_diag(parsed: dict[str, Any], rc: int | None, level: Any, thresholds: dict[str, Any]) -> Outcome:
    """Verdict of one ``dcgmi diag`` run: ``parsed`` from :func:`parse_dcgm_diag`, exit ``rc``, the SKU's
    ``thresholds`` (``required_status``, ``memory_bandwidth_min_mbps`` in MB/s).  See the module docstring."""
    observed = {"level": level, "version": parsed["version"], "layout": parsed["layout"], "counts": parsed["counts"],
                "tests": {t["name"]: t["status"] for t in parsed["tests"]}, "rc": rc}
    required = str(thresholds.get("required_status") or "pass").lower()
    expected = "every DCGM level-%s test %s%s" % (level, "Pass" if required == "pass" else "Pass or Warn", (
        "; memory_bandwidth >= %s MB/s per GPU" % thresholds["memory_bandwidth_min_mbps"]
        if thresholds.get("memory_bandwidth_min_mbps") else ""))
    remediation = ("follow the DCGM error's recommendation; reset the GPU named and rerun; replace it if the "
                   "failure repeats")
    if parsed["verdict"] == "fail":
        return failed("DCGM diag level %s found errors (exit %s): %s" % (level, rc, "; ".join(_messages(parsed, "fail"))),
                      remediation, observed=observed, expected=expected)
    errors = recorded_errors(parsed)
    if errors:
        return failed("DCGM diag level %s reported Pass but recorded errors: %s" % (level, "; ".join(errors)[:600]),
                      remediation, observed=dict(observed, errors=errors), expected=expected)
    if parsed["verdict"] == "not_run" or parsed["runtime_error"]:
        return not_run("DCGM could not run the diagnostic (exit %s): %s" % (
            rc, parsed["runtime_error"] or parsed["preamble"] or "the JSON document holds no test result"))
    if rc not in (0, None):
        return failed("dcgmi exited %s although no test failed in its JSON" % rc,
                      "read the raw output kept as evidence", observed=observed, expected=expected)
    if parsed["verdict"] == "warn" and required == "pass":
        return failed("DCGM diag level %s: the SKU requires Pass, tests warned: %s"
                      % (level, "; ".join(_messages(parsed, "warn"))), remediation, observed=observed,
                      expected=expected)
    if thresholds.get("memory_bandwidth_min_mbps"):
        bandwidth = [t for t in parsed["tests"] if _key(t["name"]) == MEMORY_BANDWIDTH_TEST]
        if not bandwidth or any(t["status"] != "pass" for t in bandwidth):
            return not_run("the SKU's memory_bandwidth_min_mbps was not judged: DCGM's memory_bandwidth test %s"
                           % ("is not in the results (level %s)" % level if not bandwidth
                              else "was %s" % bandwidth[0]["status"]))
    skipped = [t["name"] for t in parsed["tests"] if t["status"] in ("skip", "not_run")]
    reason = "DCGM diag level %s: %d passed" % (level, parsed["counts"]["pass"])
    if parsed["verdict"] == "warn":
        reason += "; warnings: %s" % "; ".join(_messages(parsed, "warn"))
    if skipped:
        reason += "; skipped/not run: %s" % ", ".join(skipped)
    return passed(observed=observed, expected=expected, reason=reason)


def check_dcgm_diag(ctx: TestContext) -> Outcome:
    """DCGM diagnostic ``dcgmi diag -r <level> -j`` at ``params.level`` (1-4 or quick/medium/long/xlong).

    ``thresholds.memory_bandwidth_min_mbps`` (MB/s) goes to DCGM as ``-p memory_bandwidth.minimum_bandwidth``;
    ``thresholds.required_status`` (``Pass`` by default) and the verdict rules: :func:`judge_dcgm_diag`.
    """
    gpu_expectation(ctx, "nvidia")
    tool = ctx.require("dcgmi", why=" (DCGM not installed)")
    level = ctx.params.get("level", 1)
    level = DCGM_LEVELS.get(str(level).lower(), level)
    argv = [tool, "diag", "-r", level, "-j"]
    floor = ctx.threshold("memory_bandwidth_min_mbps")
    if floor:
        argv += ["-p", "%s.minimum_bandwidth=%s" % (MEMORY_BANDWIDTH_TEST, floor)]
    res = ctx.run(argv + list(ctx.params.get("extra") or []), "dcgmi")
    if "{" not in res.stdout:
        raise ToolNotFoundError("dcgmi diag produced no JSON (exit %s): %s"
                                % (res.rc, (res.stdout + res.stderr).strip()[:300]))
    parsed = parse_dcgm_diag(res.stdout)
    ctx.save_json("parsed.json", parsed)
    return judge_dcgm_diag(parsed, res.rc, level, dict(ctx.test.thresholds))
