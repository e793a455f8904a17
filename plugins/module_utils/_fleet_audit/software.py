# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""In-band drift: what runs on a handed-off node against the SKU (pure functions).

Three comparisons, each a list of drift rows ``{component, expected, found, status, reason}`` with ``status``
``ok``, ``drift`` or ``unknown``:

* :func:`software_rows`: the SKU's ``software:`` pins (accepted version strings, exact match) against what the
  node's tools print;
* :func:`tuning_rows`: the SKU's ``tunings:`` (kernel command line, sysctl, GPU persistence mode and power limit);
* :func:`recipe_rows`: the NCCL golden recipe (``nccl_env``) against the node's ``/etc/nccl.conf``, the file NCCL
  reads ``NAME=value`` lines from (NCCL user guide, "Environment Variables": "/etc/nccl.conf").

:func:`rows_outcome` turns rows into a gate outcome: any ``drift`` fails (even when other rows are unknown);
otherwise any ``unknown`` is ``not_run`` (a reading that is missing is never a pass); else pass.
"""

from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence

from .._core.gate import Outcome, failed, not_run, passed
from .._host.parsers import NA_VALUES

OK = "ok"
DRIFT = "drift"
UNKNOWN = "unknown"
# Software a profile without GPUs / InfiniBand cannot have (profiles.<p>.not_expected, e.g. the lab).
NEEDS_PART = {"gpu_driver": "gpus", "cuda": "gpus", "dcgm": "gpus", "nccl": "gpus", "container_toolkit": "gpus",
              "rocm": "gpus", "ofed": "infiniband"}
REMEDIATION = ("drain the node and bring it back to the SKU: reinstall the pinned version, or, when the new "
               "version is qualified, add it to the SKU's accepted list with its source")


def known(value: Any) -> bool:
    """Whether ``value`` is a real reading, not a placeholder (the parsers' ``NA_VALUES``, ``-1``: DESIGN.md)."""
    return value is not None and str(value).strip().lower() not in NA_VALUES + ("-1",)


def _row(component: str, expected: Any, found: Any, status: str, reason: str) -> Dict[str, Any]:
    return {"component": component, "expected": expected, "found": found, "status": status, "reason": reason}


def software_rows(pins: Mapping[str, Any], observed: Mapping[str, Mapping[str, Any]],
                  not_expected: Sequence[str] = ()) -> List[Dict[str, Any]]:
    """One row per pinned component.

    ``pins``: the SKU's ``software`` section ``{component: {accepted: [str], source}}``; ``observed``:
    ``{component: {"value": str or None, "note": why None}}`` from ``observe.read_software``; a component that
    is not installed is ``{"value": None, "absent": True, "note": ...}`` and is drift (a pinned tool missing on a
    production node is a broken install).  ``not_expected``: parts the profile's hosts lack; their software rows
    are ``unknown`` naming the profile, never drift and never ok.
    """
    rows = []
    for component, pin in pins.items():
        accepted = list(pin.get("accepted") or [])
        seen = observed.get(component) or {}
        value = seen.get("value")
        part = NEEDS_PART.get(component)
        if part and part in not_expected:
            rows.append(_row(component, accepted, None, UNKNOWN,
                             "this profile's hosts have no %s, so %s is not judged" % (part, component)))
        elif seen.get("absent"):
            rows.append(_row(component, accepted, None, DRIFT, "%s not installed: %s" % (component, seen.get("note"))))
        elif not known(value):
            rows.append(_row(component, accepted, None, UNKNOWN, "%s could not be read: %s"
                             % (component, seen.get("note") or "no reading")))
        elif str(value).strip() in accepted:
            rows.append(_row(component, accepted, value, OK, "%s %s is accepted" % (component, value)))
        else:
            rows.append(_row(component, accepted, value, DRIFT, "%s is %s, the SKU accepts %s (%s)"
                             % (component, value, ", ".join(accepted), pin.get("source"))))
    return rows


def _number(value: Any) -> Optional[float]:
    try:
        return float(str(value).strip().split()[0])
    except (TypeError, ValueError, IndexError):
        return None


def tuning_rows(tunings: Mapping[str, Any], observed: Mapping[str, Any],
                not_expected: Sequence[str] = ()) -> List[Dict[str, Any]]:
    """Rows for the SKU's ``tunings``.

    ``observed``: ``{"cmdline": text of /proc/cmdline or None, "sysctl": {key: text or None},
    "gpus": [{"persistence_mode": "Enabled"/"Disabled"/None, "power_limit_w": W or None}] or None}``.
    A kernel command-line token must appear as a whole token; sysctl values compare as the kernel prints them
    (whitespace-separated fields, numbers numerically); power limits compare in watts, within 0.5 W (nvidia-smi
    prints two decimals of the enforced limit).
    """
    rows = []
    cmdline = observed.get("cmdline")
    tokens = cmdline.split() if isinstance(cmdline, str) else None
    for token in tunings.get("kernel_cmdline") or []:
        name = "cmdline:%s" % token
        if tokens is None:
            rows.append(_row(name, token, None, UNKNOWN, "/proc/cmdline could not be read"))
        else:
            on = token in tokens
            rows.append(_row(name, token, token if on else None, OK if on else DRIFT,
                             "%s %s the kernel command line" % (token, "is on" if on else "is missing from")))
    sysctl = observed.get("sysctl") or {}
    for key, want in (tunings.get("sysctl") or {}).items():
        have = sysctl.get(key)
        name = "sysctl:%s" % key
        if not known(have):
            rows.append(_row(name, want, None, UNKNOWN, "sysctl %s could not be read" % key))
            continue
        fields = str(have).split()
        same = fields == str(want).split() or (len(fields) == 1 and _number(have) is not None
                                               and _number(have) == _number(want))
        rows.append(_row(name, want, have, OK if same else DRIFT, "sysctl %s = %s%s" % (
            key, have, "" if same else ", the SKU sets %s" % want)))
    gpu_keys = [k for k in ("persistence_mode", "gpu_power_limit_w") if k in tunings]
    if gpu_keys and "gpus" in not_expected:
        for key in gpu_keys:
            rows.append(_row(key, tunings[key], None, UNKNOWN, "this profile's hosts have no GPUs"))
        return rows
    gpus = observed.get("gpus")
    if "persistence_mode" in tunings:
        want = "Enabled" if tunings["persistence_mode"] else "Disabled"
        rows.append(_per_gpu("persistence_mode", want, gpus, lambda g: g.get("persistence_mode"),
                             lambda have: have == want))
    if "gpu_power_limit_w" in tunings:
        want_w = float(tunings["gpu_power_limit_w"])
        rows.append(_per_gpu("gpu_power_limit_w", want_w, gpus, lambda g: g.get("power_limit_w"),
                             lambda have: abs(float(have) - want_w) <= 0.5))
    return rows


def _per_gpu(name: str, want: Any, gpus: Optional[Sequence[Mapping[str, Any]]], read: Any, good: Any) -> Dict[str, Any]:
    """One row over every GPU: drift names the GPUs that differ; a GPU without a reading makes it unknown."""
    if not gpus:
        return _row(name, want, None, UNKNOWN, "no GPU reading (nvidia-smi -q -x gave no GPUs)")
    found = {str(g.get("index", i)): read(g) for i, g in enumerate(gpus)}
    off = sorted(k for k, v in found.items() if known(v) and not good(v))
    missing = sorted(k for k, v in found.items() if not known(v))
    if off:
        return _row(name, want, found, DRIFT, "%s differs on GPU %s (%s), the SKU sets %s"
                    % (name, ", ".join(off), ", ".join(str(found[k]) for k in off), want))
    if missing:
        return _row(name, want, found, UNKNOWN, "%s not reported by GPU %s" % (name, ", ".join(missing)))
    return _row(name, want, found, OK, "%s is %s on all %d GPUs" % (name, want, len(found)))


def parse_nccl_conf(text: str) -> Dict[str, str]:
    """``NAME=value`` lines of an ``nccl.conf`` (``#`` comments and blank lines skipped)."""
    out = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#") or "=" not in line:
            continue
        name, value = line.split("=", 1)
        out[name.strip()] = value.strip()
    return out


def recipe_rows(nccl_env: Mapping[str, str], conf_text: Optional[str], path: str = "/etc/nccl.conf",
                note: str = "") -> List[Dict[str, Any]]:
    """One row per recipe variable: the value ``path`` sets for it, or drift when it sets another or none."""
    if not nccl_env:
        return []
    if conf_text is None:
        return [_row("nccl_recipe", dict(nccl_env), None, UNKNOWN, "%s could not be read: %s" % (path, note))]
    conf = parse_nccl_conf(conf_text)
    rows = []
    for name, want in nccl_env.items():
        have = conf.get(name)
        status = OK if have == str(want) else DRIFT
        rows.append(_row("nccl:%s" % name, want, have, status, "%s sets %s=%s%s" % (
            path, name, have if have is not None else "(nothing)",
            "" if status == OK else ", the recipe says %s" % want)))
    return rows


def rows_outcome(rows: Sequence[Mapping[str, Any]], what: str) -> Outcome:
    """Gate outcome of drift rows (module docstring); evidence carries every row for the drift table."""
    evidence = {"rows": [dict(r) for r in rows]}
    drift = [r for r in rows if r["status"] == DRIFT]
    unknown = [r for r in rows if r["status"] == UNKNOWN]
    observed = {r["component"]: r["found"] for r in rows}
    expected = {r["component"]: r["expected"] for r in rows}
    if drift:
        reason = "; ".join(r["reason"] for r in drift[:4])
        if len(drift) > 4:
            reason += " (and %d more)" % (len(drift) - 4)
        if unknown:
            reason += "; not read: %s" % ", ".join(r["component"] for r in unknown)
        return failed("%s drift: %s" % (what, reason), REMEDIATION, observed=observed, expected=expected,
                      evidence=evidence)
    if not rows:
        return not_run("the SKU declares no %s to compare" % what, evidence=evidence)
    if unknown:
        return not_run("%s not judged: %s" % (what, "; ".join(r["reason"] for r in unknown[:4])), evidence=evidence)
    return passed(observed=observed, expected=expected, evidence=evidence,
                  reason="%s as the SKU says (%d compared)" % (what, len(rows)))
