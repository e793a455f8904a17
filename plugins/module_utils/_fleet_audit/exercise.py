# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Exercising the health checks: inject a fault on one node, then time detect -> drain -> replace -> return.

The exercise ClusterMAX grades GPU clouds on (shared/seeds/podcast-clustermax.txt: "inject an XID, then time how
long the provider takes to identify it, drain the node, replace it with a hot spare ... and bring it back").

Injection, marked ``injected`` in the ledger event and in every result that detects it:

* on a GPU node, DCGM's own injection into the XID field: ``dcgmi test --inject --gpuid N -f 230 -v XID``
  (field 230 is ``DCGM_FI_DEV_XID_ERRORS``, dcgm_fields.h);
* in the lab, an XID record in the kernel's real ``/dev/kmsg`` format appended to the host's own kernel-log
  source (network namespaces share one kernel, so each lab host reads its own file).
* on an emulated BMC, a ``Critical`` entry in its SEL (``POST /_emulator/sel`` of tools/symphony_emulator, the
  entry itself marked ``Oem.Symphony.Injected``), which the next audit's SEL check judges as new (kind ``sel``).

* a degraded link, on the node itself (in the lab, inside its network namespace): its interface's transmit side
  shaped with ``tc`` to a fraction of its rate (a ``tbf`` root qdisc, tc-tbf(8)), what a failing transmitter lane
  or a dirty optic looks like to a bandwidth test.  Transmit only: ingress policing needs the ``act_police``
  module, which not every kernel has (this lab's has not), and the audit's fabric check (``fleet_audit_fabric``:
  the burn-in's pairwise ``fabric_interface`` test, ``iperf3 --bidir``, the slower direction counts) sees one slow
  direction from every partner.  ``clear_link``, the repair, removes it and records ``fault_cleared``.

The timings come from the ledger's timestamps only (events ``fault_injected``, ``drain``, ``spare_promoted``,
``resume``; the first ``fleet_audit`` fail marked injected of the check that detects the injected kind,
:data:`DETECTED_BY`): nothing is timed by a stopwatch here.
"""

from __future__ import annotations

import json
import re
import time
import urllib.error
from typing import Any, Dict, List, Mapping, Optional, Sequence

from ansible.module_utils.urls import open_url

from .._core.errors import RedfishError, ValidationError
from .._core.gate import BLOCKED, FAIL, PASS

DCGM_XID_FIELD = 230
# Xid 79: "GPU has fallen off the bus" (NVIDIA Xid Catalog; severity fail in _host.parsers.xid).
DEFAULT_XID = 79
_XID_TEXT = {79: "GPU has fallen off the bus.", 48: "An uncorrectable double bit error (DBE) has been detected.",
             94: "Contained ECC error.", 119: "Timeout after 6s of waiting for RPC response from GPU0 GSP!"}
KERNEL_ERR = 3  # kmsg prio: facility kern (0) << 3 | LOG_ERR (3); NVRM prints Xids at KERN_ERR


def xid_message(xid: int, pci: str) -> str:
    """The NVRM line as the driver prints it.

    ``NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.``
    """
    return "NVRM: Xid (PCI:%s): %d, pid='<unknown>', name=<unknown>, %s" % (pci, xid, _XID_TEXT.get(
        xid, "injected by symphony fleet_audit"))


def kmsg_record(seq: int, usec: int, message: str) -> str:
    """One ``/dev/kmsg`` record ``prio,seq,usec,flags;message`` (Documentation/ABI/testing/dev-kmsg)."""
    return "%d,%d,%d,-;%s\n" % (KERNEL_ERR, seq, usec, message)


def next_seq(text: str) -> int:
    """The seq after the last record of a kmsg-format text (0 for an empty one)."""
    seqs = [int(line.split(",", 2)[1]) for line in text.splitlines()
            if line and not line.startswith(" ") and line.count(",") >= 3 and line.split(",", 2)[1].isdigit()]
    return max(seqs) + 1 if seqs else 0


def inject_lab(path: str, xid: int = DEFAULT_XID, pci: str = "0000:3b:00", uptime_s: Optional[float] = None
               ) -> Dict[str, Any]:
    """Append an XID record to the lab host's kernel-log source ``path``; returns the ``fault_injected`` data."""
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except FileNotFoundError:
        text = ""
    message = xid_message(xid, pci)
    seq = next_seq(text)
    usec = int((uptime_s if uptime_s is not None else time.monotonic()) * 1e6)
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(kmsg_record(seq, usec, message))
    return {"kind": "xid", "xid": xid, "method": "lab_kernel_log", "source": path, "seq": seq,
            "message": message, "injected": True}


# The fleet_audit check whose injected fail is the exercise's "detect" step, by injected kind.
DETECTED_BY = {"xid": "kernel_log", "sel": "bmc_sel", "link": "fabric_interface"}
_IFACE = re.compile(r"^[A-Za-z0-9_.:@-]{1,15}$")   # IFNAMSIZ 16 with its NUL (include/uapi/linux/if.h)


def _check_link(interface: str, rate_mbit: int) -> None:
    if not _IFACE.match(interface or ""):
        raise ValidationError("link_interface must be a network interface name (at most 15 characters: letters, "
                              "digits, _ . : @ -), not %r" % interface, where="link_interface")
    if not 1 <= rate_mbit <= 1000000:
        raise ValidationError("link_rate_mbit must be 1 to 1000000 Mbit/s, not %r" % rate_mbit,
                              where="link_rate_mbit")


def link_inject_argv(interface: str, rate_mbit: int) -> List[List[str]]:
    """The ``tc`` command that cuts ``interface``'s transmit side to ``rate_mbit`` Mbit/s (module docstring): a
    token bucket root qdisc (tc-tbf(8): burst 64 KiB, at most 100 ms queued).  ``replace`` makes a rerun harmless.
    ValidationError for a bad interface name or rate.
    """
    _check_link(interface, rate_mbit)
    return [["tc", "qdisc", "replace", "dev", interface, "root", "tbf", "rate", "%dmbit" % rate_mbit,
             "burst", "64kb", "latency", "100ms"]]


def link_clear_argv(interface: str) -> List[List[str]]:
    """The ``tc`` command that undoes :func:`link_inject_argv` (no root qdisc makes ``tc`` exit 2: ignore it)."""
    _check_link(interface, 1)
    return [["tc", "qdisc", "del", "dev", interface, "root"]]


def link_event(interface: str, rate_mbit: int, node: str) -> Dict[str, Any]:
    """The ``fault_injected`` data of a degraded link (its message is what the detecting check's reason carries)."""
    return {"kind": "link", "method": "tc", "interface": interface, "rate_mbit": rate_mbit, "injected": True,
            "message": "%s: %s transmit shaped to %d Mbit/s (tc tbf)" % (node, interface, rate_mbit)}


def open_link_injection(events: Sequence[Mapping[str, Any]]) -> Optional[Mapping[str, Any]]:
    """The node's degraded-link injection still in place: its last ``fault_injected`` of kind link when no
    ``fault_cleared`` of kind link came after it (``events``: the node's ``Ledger.events()``, oldest first)."""
    last = None
    for ev in events:
        data = ev.get("data") or {}
        if data.get("kind") != "link":
            continue
        if ev["kind"] == "fault_injected":
            last = ev
        elif ev["kind"] == "fault_cleared":
            last = None
    return last


def dcgm_inject_argv(gpu: int, xid: int = DEFAULT_XID) -> List[str]:
    """``dcgmi test --inject`` on the XID field of GPU ``gpu`` (module docstring)."""
    if gpu < 0:
        raise ValidationError("gpu index must be 0 or more, not %d" % gpu, where="gpu")
    return ["dcgmi", "test", "--inject", "--gpuid", str(gpu), "-f", str(DCGM_XID_FIELD), "-v", str(xid)]


# What a failing GPU's PCIe slot makes a BMC log (IPMI sensor type 13h "Critical Interrupt", a PCI SERR); the
# Redfish Severity is what the SEL check judges.
DEFAULT_SEL_MESSAGE = "Critical Interrupt: PCI SERR on GPU slot 3 (bus 3b, device 00, function 0) - Asserted"
DEFAULT_SEL_SENSOR = "Critical Interrupt"
SEL_SEVERITIES = ("OK", "Warning", "Critical")


def sel_request(message: str = DEFAULT_SEL_MESSAGE, severity: str = "Critical",
                sensor_type: str = DEFAULT_SEL_SENSOR) -> Dict[str, str]:
    """The ``POST /_emulator/sel`` body (ValidationError for an empty message or a severity Redfish lacks)."""
    if not message:
        raise ValidationError("the SEL entry needs a message", where="sel_message")
    if severity not in SEL_SEVERITIES:
        raise ValidationError("SEL severity must be one of %s, not %r" % (", ".join(SEL_SEVERITIES), severity),
                              where="sel_severity")
    return {"severity": severity, "message": message, "sensor_type": sensor_type or DEFAULT_SEL_SENSOR}


def inject_sel(url: str, message: str = DEFAULT_SEL_MESSAGE, severity: str = "Critical",
               sensor_type: str = DEFAULT_SEL_SENSOR, ca_path: Optional[str] = None, validate_certs: bool = True,
               timeout_s: float = 10.0) -> Dict[str, Any]:
    """Append a SEL entry to the emulated BMC at ``url`` (``POST <url>/_emulator/sel``); returns the
    ``fault_injected`` data.  RedfishError when the BMC is not an emulator's or refuses."""
    body = sel_request(message, severity, sensor_type)
    target = url.rstrip("/") + "/_emulator/sel"
    try:
        with open_url(target, data=json.dumps(body), headers={"Content-Type": "application/json"}, method="POST",
                      timeout=timeout_s, validate_certs=validate_certs, ca_path=ca_path or None,
                      use_proxy=False) as reply:
            answer = json.loads(reply.read() or b"{}")
    except urllib.error.HTTPError as exc:
        raise RedfishError("POST %s answered %d: %s (only the symphony emulator takes injected SEL entries)"
                           % (target, exc.code, exc.read()[:200].decode("utf-8", "replace")), where=url)
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise RedfishError("POST %s failed: %s" % (target, exc), where=url)
    entry = answer.get("entry") or {}
    return dict(body, kind="sel", method="emulator_sel", bmc=url, entry_id=entry.get("Id"),
                created=entry.get("Created"), injected=True)


def _first(events: Sequence[Mapping[str, Any]], kind: str, after: float, node: Optional[str] = None,
           key: Optional[str] = None) -> Optional[Mapping[str, Any]]:
    for ev in events:
        if ev["kind"] != kind or ev["recorded_at"] < after:
            continue
        if node is not None and (ev["node"] if key is None else (ev.get("data") or {}).get(key)) != node:
            continue
        return ev
    return None


def timings(node: str, events: Sequence[Mapping[str, Any]], results: Sequence[Any]) -> Dict[str, Any]:
    """The exercise's timeline for ``node`` from the ledger (seconds after the injection).

    ``events``: ``Ledger.events()`` (all nodes: the spare's ``spare_promoted`` names ``replaces``);
    ``results``: ``Ledger.history(node, "fleet_audit", check)`` rows of the check that detects the injected kind
    (:data:`DETECTED_BY`).  Returns ``{injected_at, detect_s,
    drain_s, replace_s, return_s, steps: [{step, at, s}], missing: [step not reached]}``; a step not reached is
    None and named in ``missing``, never estimated.
    """
    injected = [e for e in events if e["kind"] == "fault_injected" and e["node"] == node]
    if not injected:
        return {"injected_at": None, "detect_s": None, "drain_s": None, "replace_s": None, "return_s": None,
                "steps": [], "missing": ["inject"]}
    t0 = injected[-1]["recorded_at"]
    detected = next((r.finished for r in results if r.status == FAIL and r.finished >= t0
                     and (r.observed or {}).get("injected")), None)
    drained = _first(events, "drain", t0, node)
    promoted = _first(events, "spare_promoted", t0, node, key="replaces")
    resumed = _first(events, "resume", t0, node)
    steps = [("detect", detected), ("drain", drained["recorded_at"] if drained else None),
             ("replace", promoted["recorded_at"] if promoted else None),
             ("return", resumed["recorded_at"] if resumed else None)]
    out: Dict[str, Any] = {"injected_at": t0, "steps": [], "missing": []}
    for step, at in steps:
        out["%s_s" % step] = round(at - t0, 3) if at is not None else None
        if at is None:
            out["missing"].append(step)
        else:
            out["steps"].append({"step": step, "at": at, "s": round(at - t0, 3)})
    return out


def may_resume(burn_in_results: Sequence[Any], burn_in_gate: Optional[str], drained_at: Optional[float],
               rerun: Optional[Sequence[str]] = None) -> Optional[str]:
    """None when the node may return to service, else why not.

    A node returns only after a re-burn-in that started after it was drained and passed: the current ``burn_in``
    gate is ``pass``; the latest burn-in run that started after the drain (``burn_in_results``' rows, grouped by
    run id) has no check failed or blocked and at least one passed; and every check in ``rerun`` (the SKU's
    single-node tiers: node, GPU, power, and their XID scans) that has a result at all has one that started after
    the drain.  Only what a drained node cannot run alone (the multi-node fabric tier, named by leaving it out of
    ``rerun``) may keep an older result: an older GPU pass proves nothing about the fault that drained the node.
    ``rerun`` None: every latest result must have started after the drain.
    """
    if drained_at is None:
        return "the node was not drained by the exercise (no drain event after the injection)"
    if burn_in_gate != PASS:
        return "its burn_in gate is %s, not pass: rerun the quick re-burn-in first" % (burn_in_gate or "absent")
    after = [r for r in burn_in_results if r.started >= drained_at]
    if not after:
        return "no burn-in ran after the drain (its burn_in results all predate it): rerun the quick re-burn-in first"
    latest = max(after, key=lambda r: r.finished).run_id
    run = [r for r in after if r.run_id == latest]
    bad = ["%s %s" % (r.check, r.status) for r in run if r.status in (FAIL, BLOCKED)]
    if bad:
        return "the re-burn-in after the drain (run %s) did not pass: %s" % (latest, ", ".join(bad[:5]))
    if not any(r.status == PASS for r in run):
        return "the re-burn-in after the drain (run %s) passed no check: rerun the quick re-burn-in" % latest
    must = set(rerun) if rerun is not None else {r.check for r in burn_in_results}
    stale = sorted({r.check for r in burn_in_results if r.check in must}
                   - {r.check for r in burn_in_results if r.started >= drained_at})
    if stale:
        return ("the re-burn-in after the drain did not rerun %s (their latest results predate the drain): run the "
                "node, GPU and power tiers again" % ", ".join(stale[:6]))
    return None
