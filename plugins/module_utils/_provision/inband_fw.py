# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# Apache License 2.0 (see LICENSE)
"""In-band firmware adapters: nvfwupd (NVIDIA GPU/HGX), mlxfwmanager/flint (ConnectX, BlueField), nvme-cli.

Each adapter queries the running versions with the vendor tool, updates with it, and queries
again: the step passes only when the fresh query reads the target ("verify, don't trust"),
whatever the update command's exit code said.  An absent tool makes the step ``not_run`` with
the reason (:class:`ToolNotFoundError`), never a fake pass.

Output formats parsed (vendors' documentation):

* ``nvfwupd ... show_version -j`` (nvfwupd >= 2.0.5, NVIDIA nvfwupd guide, "JSON Output Options"):
  ``{"Firmware Devices": [{"AP Name", "Sys Version", "Pkg Version", "Up-To-Date"}]}``; the plain
  table (``AP Name  Sys Version  Pkg Version  Up-To-Date`` then dashes) is parsed too.
* ``mlxfwmanager --query`` (MFT docs): ``Device #N:`` blocks with ``Device Type:``, ``Part Number:``,
  ``PSID:``, ``PCI Device Name:`` and a ``Versions: Current Available`` table whose ``FW`` row holds
  the running version; ``flint -d <dev> query``: ``FW Version:`` line.
* ``nvme list -o json`` (nvme-cli 1.x ``Devices[]`` with ``DevicePath``, ``ModelNumber``, ``Firmware``;
  2.x ``Devices[].Subsystems[].Controllers[]``); ``nvme fw-log <dev>``: ``afi : 0x1`` and
  ``frsN : 0x... (VERSION)`` (or ``frsN : VERSION``); the running slot is ``afi & 0x7``;
  ``fw-download`` prints ``Firmware download success``, ``fw-commit`` prints
  ``Success committing firmware action:A slot:S``.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from typing import Any, Callable, Dict, List, Optional, Tuple
from urllib.parse import urlsplit

from .._core.errors import (
    ParseError,
    SymphonyError,
    ToolNotFoundError,
    ValidationError,
)
from .._core.gate import Outcome, failed, not_run, passed
from .._core.secrets import scrub
from .._host.process import CommandTimeoutError, run

DEFAULT_TIMEOUT_S = 1800

Step = Dict[str, Any]  # one in-band step of firmware_reconcile's plan: check, component, kind, method, target, ...
# What a survey (a read-only query) says of a step: the running versions by device, and the outcome when a run
# would flash nothing (already accepted, or a device missing); None when there is something to flash.
Survey = Tuple[Dict[str, Any], Optional[Outcome]]


def run_tool(argv, timeout_s=DEFAULT_TIMEOUT_S, secrets=()):
    """Run ``argv``; return ``(rc, stdout, stderr)``.  Raises :class:`ToolNotFoundError` when
    ``argv[0]`` is not on PATH, :class:`ParseError` on a timeout.  ``secrets`` are masked in errors."""
    try:
        res = run(argv, timeout_s, secrets=secrets)
    except CommandTimeoutError:
        raise ParseError("%s did not finish within %gs" % (scrub(" ".join(argv), secrets), timeout_s), where=argv[0])
    return res.rc, res.stdout, res.stderr


# --------------------------------------------------------------------------- parsers
def parse_nvfwupd_show_version(text: str) -> Dict[str, Any]:
    """``show_version`` output (JSON or table) -> ``{AP Name: Sys Version}``.  Raises :class:`ParseError`."""
    text = text.strip()
    if text.startswith("{"):
        try:
            doc = json.loads(text)
        except ValueError as exc:
            raise ParseError("show_version -j output is not JSON: %s" % exc, where="nvfwupd")
        devices = doc.get("Firmware Devices")
        if not isinstance(devices, list):
            raise ParseError("show_version -j output has no 'Firmware Devices' list", where="nvfwupd")
        return {str(d.get("AP Name")): d.get("Sys Version") for d in devices if isinstance(d, dict)}
    out, in_table = {}, False
    for line in text.splitlines():
        if re.match(r"^\s*AP Name\s+Sys Version", line):
            in_table = True
            continue
        if not in_table or re.match(r"^\s*-+(\s+-+)*\s*$", line) or not line.strip():
            continue
        parts = line.split()
        if len(parts) >= 2:
            out[parts[0]] = parts[1]
    if not out:
        raise ParseError("show_version output has no 'AP Name  Sys Version' table", where="nvfwupd")
    return out


def parse_mlxfwmanager_query(text: str) -> List[Dict[str, Optional[str]]]:
    """``mlxfwmanager --query`` -> ``[{"device", "type", "part_number", "psid", "description", "fw"}]``."""
    devices: List[Dict[str, Optional[str]]] = []
    cur: Optional[Dict[str, Optional[str]]] = None
    in_versions = False
    for line in text.splitlines():
        m = re.match(r"^\s*Device #\d+:", line)
        if m:
            cur = {"device": None, "type": None, "part_number": None, "psid": None, "description": None,
                   "fw": None, "status": None}
            devices.append(cur)
            in_versions = False
            continue
        if cur is None:
            continue
        m = re.match(r"^\s*(Device Type|Part Number|Description|PSID|PCI Device Name|Status):\s*(.*?)\s*$", line)
        if m:
            key = {"Device Type": "type", "Part Number": "part_number", "Description": "description",
                   "PSID": "psid", "PCI Device Name": "device", "Status": "status"}[m.group(1)]
            cur[key] = m.group(2)
            in_versions = False
            continue
        if re.match(r"^\s*Versions:\s+Current", line):
            in_versions = True
            continue
        if in_versions:
            m = re.match(r"^\s*FW\s+(\S+)", line)
            if m:
                cur["fw"] = m.group(1)
    if not devices:
        raise ParseError("mlxfwmanager --query output lists no 'Device #N:' block", where="mlxfwmanager")
    for d in devices:
        if not d["device"] or not d["fw"]:
            raise ParseError("a device block lacks PCI Device Name or the FW version row", where="mlxfwmanager")
    return devices


def parse_flint_query(text: str) -> str:
    """``flint -d <dev> query`` -> the running FW version.  Raises :class:`ParseError`."""
    m = re.search(r"^\s*FW Version:\s*(\S+)", text, re.M)
    if not m:
        raise ParseError("flint query output has no 'FW Version:' line", where="flint")
    return m.group(1)


def parse_nvme_list(text: str) -> List[Dict[str, str]]:
    """``nvme list -o json`` -> ``[{"device", "model", "firmware"}]`` (nvme-cli 1.x and 2.x shapes)."""
    try:
        doc = json.loads(text or "{}")
    except ValueError as exc:
        raise ParseError("nvme list -o json output is not JSON: %s" % exc, where="nvme")
    out = []
    for d in doc.get("Devices") or []:
        if "DevicePath" in d:
            out.append({"device": d["DevicePath"], "model": (d.get("ModelNumber") or "").strip(),
                        "firmware": (d.get("Firmware") or "").strip()})
            continue
        for sub in d.get("Subsystems") or []:
            for ctrl in sub.get("Controllers") or []:
                out.append({"device": "/dev/%s" % ctrl.get("Controller"), "model": (ctrl.get("ModelNumber") or "").strip(),
                            "firmware": (ctrl.get("Firmware") or "").strip()})
    return out


def parse_nvme_fw_log(text: str) -> Dict[str, Any]:
    """``nvme fw-log <dev>`` -> ``{"active_slot": n, "slots": {n: version}, "running": version}``."""
    m = re.search(r"^\s*afi\s*:\s*(0x[0-9a-fA-F]+|\d+)", text, re.M)
    if not m:
        raise ParseError("fw-log output has no 'afi' line", where="nvme")
    afi = int(m.group(1), 0)
    slots = {}
    for sm in re.finditer(r"^\s*frs(\d)\s*:\s*(\S+)(?:\s*\((.*?)\))?", text, re.M):
        version = sm.group(3) if sm.group(3) is not None else sm.group(2)
        slots[int(sm.group(1))] = version.strip().rstrip(".")
    active = afi & 0x7
    return {"active_slot": active, "slots": slots, "running": slots.get(active)}


# --------------------------------------------------------------------------- helpers
def local_image(image_dir: Optional[str], step: Step) -> Tuple[str, str]:
    """``(path, sha256)`` of the step's image in ``image_dir``, checked against the manifest.

    Raises :class:`ValidationError` when absent or when the sha256 differs (nothing is flashed).
    """
    image = step.get("image") or {}
    name = os.path.basename(urlsplit(image.get("uri", "")).path)
    path = os.path.join(image_dir or "", name)
    if not image_dir or not os.path.isfile(path):
        raise ValidationError("no local copy of %s in image_dir %s" % (name, image_dir), where=step["check"])
    digest = file_sha256(path)
    if digest != str(image.get("sha256", "")).lower():
        raise ValidationError("image sha256 %s differs from the manifest's %s; not flashed"
                              % (digest, image.get("sha256")), where=path)
    return path, digest


def file_sha256(path: str) -> str:
    """The sha256 (hex) of the file at ``path``, read in 1 MiB blocks (images never held in memory whole).

    Raises ``OSError`` when it cannot be read.
    """
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _all_accepted(versions: Dict[str, Any], step: Step) -> bool:
    return bool(versions) and all(v in step["accepted"] for v in versions.values())


def _fmt(versions: Dict[str, Any]) -> str:
    return ", ".join("%s=%s" % kv for kv in sorted(versions.items()))


def _select_mlx(devices: List[Dict[str, Optional[str]]], step: Step) -> List[Dict[str, Optional[str]]]:
    kind = step.get("kind")
    rx = re.compile(step.get("inband_match") or (r"BlueField.*" if kind == "dpu" else r"ConnectX.*"), re.I)
    return [d for d in devices if rx.fullmatch(d.get("type") or "") or rx.fullmatch(d.get("part_number") or "")]


# --------------------------------------------------------------------------- adapters
def _nvfwupd_args(target: Optional[Dict[str, Any]]) -> Tuple[List[str], List[Any]]:
    """``(-t ip=.. user=.. password=.., secrets)`` for nvfwupd talking to the (host-interface) BMC ``target``."""
    if not target:
        return [], []
    return (["-t", "ip=%s" % target["ip"], "user=%s" % target.get("user", ""),
             "password=%s" % target.get("password", "")], [target.get("password")])


def _nvfwupd_pattern(step: Step) -> str:
    return (step.get("match") or {}).get("id") or step.get("inband_match") or ".*"


def _nvfwupd_query(step: Step, target: Optional[Dict[str, Any]], timeout_s: float) -> Dict[str, Any]:
    """``{AP Name: Sys Version}`` of the devices the step matches, read with ``nvfwupd show_version``."""
    tgt, secrets = _nvfwupd_args(target)
    rx = re.compile(_nvfwupd_pattern(step))
    rc, out, err = run_tool(["nvfwupd"] + tgt + ["show_version", "-j"], timeout_s, secrets)
    if rc != 0:
        raise ParseError("nvfwupd show_version exited %d: %s" % (rc, (err or out).strip()[:200]), where="nvfwupd")
    return {k: v for k, v in parse_nvfwupd_show_version(out).items() if rx.fullmatch(k)}


def nvfwupd_survey(step: Step, target: Optional[Dict[str, Any]] = None,
                   timeout_s: float = DEFAULT_TIMEOUT_S) -> Survey:
    """The running GPU/HGX versions, and the outcome when there is nothing to flash (see :data:`Survey`)."""
    before = _nvfwupd_query(step, target, timeout_s)
    if not before:
        return before, failed("nvfwupd lists no firmware device matching %s" % _nvfwupd_pattern(step),
                              "check the GPU baseboard is seen")
    if _all_accepted(before, step):
        return before, passed(observed=before, expected=step["accepted"], reason="at accepted version (nvfwupd)")
    return before, None


def nvfwupd_step(step: Step, image_dir: Optional[str], target: Optional[Dict[str, Any]] = None,
                 timeout_s: float = DEFAULT_TIMEOUT_S) -> Outcome:
    """GPU/HGX firmware with nvfwupd; ``target``: ``{"ip", "user", "password"}`` of the (host-interface) BMC."""
    _before, done = nvfwupd_survey(step, target, timeout_s)
    if done is not None:
        return done
    path, digest = local_image(image_dir, step)
    tgt, secrets = _nvfwupd_args(target)
    rc, out, err = run_tool(["nvfwupd"] + tgt + ["update_fw", "-p", path, "-y"], timeout_s, secrets)
    after = _nvfwupd_query(step, target, timeout_s)
    evidence = {"rc": rc, "sha256": digest, "output_tail": (out + err)[-400:]}
    if not _all_accepted(after, step):
        return failed("after nvfwupd update_fw (exit %d) the devices report %s, expected %s"
                      % (rc, _fmt(after), step["target"]), "read the nvfwupd output; AC-cycle and rerun",
                      observed=after, expected=step["target"], evidence=evidence)
    return passed(observed=after, expected=step["target"], evidence=evidence,
                  reason="updated to %s (nvfwupd, %s)" % (step["target"], step.get("activation")))


def _mlx_query(step: Step, timeout_s: float) -> Dict[str, Any]:
    """``{PCI device: running FW}`` of the step's adapters, read with ``mlxfwmanager --query``."""
    rc, out, err = run_tool(["mlxfwmanager", "--query"], timeout_s)
    if rc != 0:
        raise ParseError("mlxfwmanager --query exited %d: %s" % (rc, (err or out).strip()[:200]),
                         where="mlxfwmanager")
    # parse_mlxfwmanager_query refuses a block without its device name
    return {str(d["device"]): d["fw"] for d in _select_mlx(parse_mlxfwmanager_query(out), step)}


def mlxfwmanager_survey(step: Step, timeout_s: float = DEFAULT_TIMEOUT_S) -> Survey:
    """The adapters' running versions, and the outcome when there is nothing to flash (see :data:`Survey`)."""
    before = _mlx_query(step, timeout_s)
    need = (step.get("match") or {}).get("count", 1)
    if len(before) < need:
        return before, failed("mlxfwmanager sees %d %s devices, the manifest expects %d"
                              % (len(before), step["kind"], need),
                              "check the adapters are seated and mst is started", observed=before)
    if _all_accepted(before, step):
        return before, passed(observed=before, expected=step["accepted"], reason="at accepted version (mlxfwmanager)")
    return before, None


def mlxfwmanager_step(step: Step, image_dir: Optional[str], timeout_s: float = DEFAULT_TIMEOUT_S,
                      tool: str = "mlxfwmanager") -> Outcome:
    """ConnectX/BlueField firmware with mlxfwmanager (or flint per device)."""
    before, done = mlxfwmanager_survey(step, timeout_s)
    if done is not None:
        return done
    path, digest = local_image(image_dir, step)
    rcs = {}
    for dev, version in sorted(before.items()):
        if version in step["accepted"]:
            continue
        if tool == "flint":
            rc, out, err = run_tool(["flint", "-d", dev, "-i", path, "-y", "burn"], timeout_s)
        else:
            rc, out, err = run_tool(["mlxfwmanager", "-u", "-d", dev, "-i", path, "-y"], timeout_s)
        rcs[dev] = rc
    if tool == "flint":
        after = {}
        for dev in before:
            rc, out, err = run_tool(["flint", "-d", dev, "query"], timeout_s)
            after[dev] = parse_flint_query(out)
    else:
        after = _mlx_query(step, timeout_s)
    evidence = {"rc": rcs, "sha256": digest}
    if not _all_accepted(after, step):
        return failed("after %s (exit %s) the adapters report %s, expected %s"
                      % (tool, ",".join(str(v) for v in rcs.values()), _fmt(after), step["target"]),
                      "reset the host (the new FW activates at reset) or reflash", observed=after,
                      expected=step["target"], evidence=evidence)
    return passed(observed=after, expected=step["target"], evidence=evidence,
                  reason="%d adapters at %s (%s)" % (len(after), step["target"], tool))


def nvme_survey(step: Step, timeout_s: float = DEFAULT_TIMEOUT_S) -> Survey:
    """The drives' running versions (``nvme list``), and the outcome when there is nothing to flash."""
    rc, out, err = run_tool(["nvme", "list", "-o", "json"], timeout_s)
    if rc != 0:
        raise ParseError("nvme list exited %d: %s" % (rc, (err or out).strip()[:200]), where="nvme")
    devices = parse_nvme_list(out)
    models = step.get("models") or []
    if models:
        devices = [d for d in devices if d["model"] in models]
    need = (step.get("match") or {}).get("count", 1)
    before = {d["device"]: d["firmware"] for d in devices}
    if len(devices) < need:
        return before, failed("nvme list shows %d drives, the manifest expects %d" % (len(devices), need),
                              "check the drives are seated", observed=before)
    if _all_accepted(before, step):
        return before, passed(observed=before, expected=step["accepted"], reason="at accepted version (nvme-cli)")
    return before, None


def nvme_step(step: Step, image_dir: Optional[str], timeout_s: float = DEFAULT_TIMEOUT_S, slot: int = 2,
              action: int = 3) -> Outcome:
    """NVMe firmware with nvme-cli: fw-download, fw-commit (``action`` 3: activate without reset), fw-log."""
    before, done = nvme_survey(step, timeout_s)
    if done is not None:
        return done
    path, digest = local_image(image_dir, step)
    after, notes = {}, {}
    for dev, version in sorted(before.items()):
        ctrl = re.sub(r"n\d+$", "", dev)
        if version in step["accepted"]:
            after[dev] = version
            continue
        rc, out, err = run_tool(["nvme", "fw-download", ctrl, "--fw=%s" % path], timeout_s)
        if rc != 0 or "Firmware download success" not in out:
            notes[dev] = "fw-download: %s" % (out + err).strip()[:160]
        rc, out, err = run_tool(["nvme", "fw-commit", ctrl, "--slot=%d" % slot, "--action=%d" % action], timeout_s)
        if rc != 0 or "Success committing firmware action" not in out:
            notes[dev] = "fw-commit: %s" % (out + err).strip()[:160]
        rc, out, err = run_tool(["nvme", "fw-log", ctrl], timeout_s)
        after[dev] = parse_nvme_fw_log(out)["running"]
    evidence = {"sha256": digest, "tool_messages": notes}
    if not _all_accepted(after, step):
        return failed("after fw-download/fw-commit the drives run %s, expected %s%s"
                      % (_fmt(after), step["target"], ("; " + "; ".join("%s %s" % kv for kv in sorted(notes.items())))
                         if notes else ""), "reset the host if the drive activates at reset, else reflash",
                      observed=after, expected=step["target"], evidence=evidence)
    return passed(observed=after, expected=step["target"], evidence=evidence,
                  reason="%d drives run %s (nvme-cli)" % (len(after), step["target"]))


ADAPTERS: Dict[str, Callable[..., Outcome]] = {"nvfwupd": nvfwupd_step, "mlxfwmanager": mlxfwmanager_step, "nvme_cli": nvme_step}


def _apply(step: Step, image_dir: Optional[str], nvfwupd_target: Optional[Dict[str, Any]],
           timeout_s: float) -> Outcome:
    if step["method"] == "nvfwupd":
        return nvfwupd_step(step, image_dir, nvfwupd_target, timeout_s)
    if step["method"] == "flint":
        return mlxfwmanager_step(step, image_dir, timeout_s, tool="flint")
    if step["method"] in ADAPTERS:
        return ADAPTERS[step["method"]](step, image_dir, timeout_s)
    return failed("method %s is not an in-band method" % step["method"], "fix the manifest")


def _survey(step: Step, nvfwupd_target: Optional[Dict[str, Any]], timeout_s: float) -> Survey:
    if step["method"] == "nvfwupd":
        return nvfwupd_survey(step, nvfwupd_target, timeout_s)
    if step["method"] in ("mlxfwmanager", "flint"):
        return mlxfwmanager_survey(step, timeout_s)  # flint flashes per device; the query is mlxfwmanager's
    if step["method"] == "nvme_cli":
        return nvme_survey(step, timeout_s)
    return {}, failed("method %s is not an in-band method" % step["method"], "fix the manifest")


def _result(outcome: Outcome) -> Dict[str, Any]:
    return {"status": outcome.status, "reason": outcome.reason, "observed": outcome.observed,
            "expected": outcome.expected, "remediation": outcome.remediation, "evidence": outcome.evidence}


def _in_order(steps: List[Step], attempt: Callable[[Step], Dict[str, Any]]) -> Dict[str, Dict[str, Any]]:
    """``{check: attempt(step)}`` in order: a step after one that neither passed nor is planned is ``blocked``;
    an absent tool is ``not_run`` with the reason, another error fails the step with it."""
    out: Dict[str, Dict[str, Any]] = {}
    stop: Optional[Tuple[str, str]] = None
    for step in steps:
        check = step["check"]
        if stop:
            out[check] = {"status": "blocked", "reason": "blocked by %s (%s)" % (stop[0], stop[1])}
            continue
        try:
            result = attempt(step)
        except ToolNotFoundError as exc:
            result = _result(not_run("%s; the runtime lacks the vendor tool for %s"
                                     % (exc.message, step.get("component"))))
        except SymphonyError as exc:
            result = _result(failed(str(exc), "read the tool output and rerun"))
        out[check] = result
        if result["status"] != "pass" and "plan" not in result:
            stop = (check, result["status"])
    return out


def run_inband(steps: List[Step], image_dir: Optional[str], nvfwupd_target: Optional[Dict[str, Any]] = None,
               timeout_s: float = DEFAULT_TIMEOUT_S) -> Dict[str, Dict[str, Any]]:
    """Run in-band steps in order; returns ``{check: result dict}`` (``status``, ``reason``, ...).

    A step after a failed one is ``blocked``; an absent tool is ``not_run`` with the reason.
    """
    return _in_order(steps, lambda step: _result(_apply(step, image_dir, nvfwupd_target, timeout_s)))


def plan_inband(steps: List[Step], nvfwupd_target: Optional[Dict[str, Any]] = None,
                timeout_s: float = DEFAULT_TIMEOUT_S) -> Dict[str, Dict[str, Any]]:
    """Check mode: query each step's running versions with its vendor tool and say what a run would flash.

    Runs only the tools' read commands (``show_version``, ``--query``, ``nvme list``).  A step already at an
    accepted version, or one a run would fail before flashing (a device missing), gets the result a run would
    give; a step with something to flash is ``not_run`` with ``plan`` ``{device: {"from": running, "to":
    target}}`` for each device not at an accepted version.  Steps are blocked as in :func:`run_inband`, except
    that a planned step does not block the next one (a run would flash it and go on).
    """
    def attempt(step: Step) -> Dict[str, Any]:
        before, done = _survey(step, nvfwupd_target, timeout_s)
        if done is not None:
            return _result(done)
        todo = {dev: version for dev, version in before.items() if version not in step["accepted"]}
        plan = {dev: {"from": version, "to": step.get("target")} for dev, version in sorted(todo.items())}
        reason = "check mode: would update %s to %s (%s)" % (_fmt(todo), step.get("target"), step["method"])
        return dict(_result(not_run(reason)), observed=before, expected=step.get("target"), plan=plan)

    return _in_order(steps, attempt)
