# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Burn-in runner (DESIGN.md stage 3): plan, fail-fast tiers, flaky retry, per-test timeouts, evidence.

The plan comes from the SKU manifest's ``burn_in.tiers`` (merged with the profile's
overrides): tiers in the order node -> gpu -> power -> fabric, tests inside a tier by
``cost_s`` (seconds-long sanity checks first, hours-long stress last).  The first
failing test stops the node: every later test is ``not_run`` with "stopped by
fail-fast after <test>".  A test marked ``flaky`` is repeated once before it fails
the node and both attempts are kept.  Before and after each tier the kernel log is
read and the XIDs (and MCE/AER errors) that appeared during the tier become the
check ``<tier>_xid_scan``.  Raw output and parsed results are written under
``<evidence_root>/<node>/<run_id>/<tier>/<test>/attempt-<n>/``; results carry those
paths relative to ``evidence_root``.

The multi-node fabric tier runs from ``roles/burn_in/tasks/fabric.yml``; this runner
only marks fabric tests ``not_run`` when fail-fast has stopped the node.
"""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field, asdict

from .._core.errors import (
    ManifestError,
    ParseError,
    SymphonyError,
    ToolNotFoundError,
)
from .._core.gate import (
    FAIL,
    NOT_RUN,
    PASS,
    CheckGraph,
    CheckResult,
    CheckSpec,
    Outcome,
    compute_gate,
    failed,
    not_run,
    passed,
)
from .._host.parsers.kmsg import (
    parse_kernel_log,
    scan_hardware_errors,
)
from .._host.parsers.xid import deduplicate, events_from_records
from .calibration import resolve_thresholds

STAGE = "burn_in"
TIER_ORDER = ("node", "gpu", "power", "fabric")
RUNNER_TIERS = ("node", "gpu", "power")
XID_CHECK = "%s_xid_scan"
DEFAULT_EVIDENCE_ROOT = "/var/tmp/symphony/burn_in"
_SAFE = re.compile(r"[^A-Za-z0-9_.-]+")


class TestTimeoutError(SymphonyError):
    """A burn-in test ran past its ``timeout_s``."""


# ----------------------------------------------------------------------------------------------- plan
@dataclass
class PlannedTest:
    """One test of the plan.  ``timeout_s``/``cost_s`` in seconds."""

    tier: str
    name: str
    kind: str
    timeout_s: float
    cost_s: float
    flaky: bool = False
    params: dict = field(default_factory=dict)
    thresholds: dict = field(default_factory=dict)

    def to_dict(self):
        return asdict(self)


def deep_merge(base, override):
    """Return ``base`` with ``override`` merged in (dicts recursively, anything else replaced)."""
    out = copy.deepcopy(base) if isinstance(base, dict) else {}
    for key, value in (override or {}).items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def profile_view(manifest, profile):
    """The manifest's ``profiles.<profile>`` object (``{}`` for ``production`` or when absent).

    Raises :class:`ManifestError` when a profile other than ``production`` is asked for and
    the manifest does not declare it.
    """
    profiles = manifest.get("profiles") or {}
    if profile in (None, "", "production"):
        return profiles.get("production") or {}
    if profile not in profiles:
        declared = ", ".join(sorted(profiles)) or "none"
        raise ManifestError("profile %r is not declared (declared: %s)" % (profile, declared),
                            where="%s: $.profiles" % manifest.get("sku", "manifest"))
    return profiles[profile] or {}


def effective_bom(manifest, profile):
    """The SKU's ``bom`` with the profile's ``inband_bom`` deep-merged over it (what this host has in-band)."""
    return deep_merge(manifest.get("bom") or {}, profile_view(manifest, profile).get("inband_bom") or {})


def build_plan(manifest, profile="production", tiers=None, only=None, overrides=None, calibration=None):
    """Ordered list of :class:`PlannedTest` for one node.

    ``manifest``: SKU manifest dict; ``profile``: name in ``manifest.profiles`` whose
    ``burn_in.tests.<name>`` entries (params/thresholds/timeout_s/cost_s/flaky) are merged
    over the SKU's tests; ``tiers``: restrict to these tier names; ``only``: restrict to
    these test names; ``overrides``: ``{test: {params, thresholds, timeout_s, ...}}`` merged
    last (operator's run-time overrides); ``calibration``: the measured baseline that relative
    thresholds resolve against (:mod:`.calibration`).  Order: :data:`TIER_ORDER`, then ``cost_s``
    (default: ``timeout_s``), then declaration order.  Raises :class:`ManifestError` when the
    manifest has no burn-in section, a name is duplicated, or ``only``/``tiers``/``overrides``
    name something the manifest lacks.
    """
    where = "%s: $.burn_in" % manifest.get("sku", "manifest")
    section = manifest.get("burn_in")
    if not isinstance(section, dict) or not isinstance(section.get("tiers"), list):
        raise ManifestError("the SKU declares no burn_in.tiers", where=where)
    prof = (profile_view(manifest, profile).get("burn_in") or {}).get("tests") or {}
    overrides = overrides or {}
    tests, seen = [], set()
    declared_tiers = []
    for t_index, tier in enumerate(section["tiers"]):
        if not isinstance(tier, dict) or tier.get("name") not in TIER_ORDER:
            raise ManifestError("tier %r is not one of %s" % (tier.get("name") if isinstance(tier, dict) else tier,
                                                              ", ".join(TIER_ORDER)),
                                where="%s.tiers[%d]" % (where, t_index))
        declared_tiers.append(tier["name"])
        for index, spec in enumerate(tier.get("tests") or []):
            path = "%s.tiers[%d].tests[%d]" % (where, t_index, index)
            if not isinstance(spec, dict) or not spec.get("name") or not spec.get("kind"):
                raise ManifestError("a test needs name and kind", where=path)
            name = spec["name"]
            if name in seen:
                raise ManifestError("test %r is declared twice" % name, where=path)
            seen.add(name)
            merged = deep_merge(deep_merge(spec, prof.get(name) or {}), overrides.get(name) or {})
            timeout = merged.get("timeout_s")
            if not isinstance(timeout, (int, float)) or isinstance(timeout, bool) or timeout <= 0:
                raise ManifestError("test %r needs a positive timeout_s" % name, where=path)
            cost = merged.get("cost_s", timeout)
            tests.append((TIER_ORDER.index(tier["name"]), float(cost), len(tests), PlannedTest(
                tier=tier["name"], name=name, kind=str(merged["kind"]), timeout_s=float(timeout),
                cost_s=float(cost), flaky=bool(merged.get("flaky", False)),
                params=dict(merged.get("params") or {}),
                thresholds=resolve_thresholds(merged.get("thresholds"), calibration,
                                              "%s: burn-in test %s" % (manifest.get("sku", "manifest"), name)))))
    for name in list(only or []) + list(overrides):
        if name not in seen:
            raise ManifestError("no burn-in test named %r in this SKU" % name, where=where)
    for tier in tiers or []:
        if tier not in declared_tiers:
            raise ManifestError("tier %r is not declared in this SKU (declared: %s)"
                                % (tier, ", ".join(declared_tiers)), where=where)
    plan = [item[3] for item in sorted(tests, key=lambda item: item[:3])]
    if tiers:
        plan = [t for t in plan if t.tier in tiers]
    if only:
        plan = [t for t in plan if t.name in only]
    return plan


def check_names(plan):
    """Ledger check names of a plan: its tests plus ``<tier>_xid_scan`` for each runner tier in it."""
    names = []
    for tier in TIER_ORDER:
        tier_tests = [t.name for t in plan if t.tier == tier]
        if not tier_tests:
            continue
        names.extend(tier_tests)
        if tier in RUNNER_TIERS:
            names.append(XID_CHECK % tier)
    return names


def gate_graph(manifest, profile="production", plan=None, extra_checks=()):
    """The burn-in :class:`CheckGraph` for a SKU and profile.

    Checks: every planned test, the per-tier XID scans and ``extra_checks`` (e.g. ``sel_scan``);
    none depends on another (fail-fast is recorded as ``not_run``, not ``blocked``).  Checks the
    manifest lists under ``gates.<profile>.burn_in.optional`` are not required by the gate.
    """
    plan = build_plan(manifest, profile) if plan is None else plan
    names = check_names(plan) + [c for c in extra_checks if c]
    graph = CheckGraph(STAGE, [CheckSpec(n) for n in dict.fromkeys(names)])
    gate_profile = profile or "production"
    optional = ((manifest.get("gates") or {}).get(gate_profile) or {}).get(STAGE, {}).get("optional") or []
    return graph.with_required([n for n in optional if n in graph.specs])


# ------------------------------------------------------------------------------------------- commands
@dataclass
class CommandResult:
    """A finished command: ``rc`` (None when killed on timeout), ``duration_s`` seconds."""

    argv: list
    rc: int
    stdout: str
    stderr: str
    duration_s: float
    timed_out: bool = False


class Executor:
    """Runs commands on this host, killing the whole process group on timeout."""

    SEARCH_PATH = ("/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin",
                   "/usr/local/cuda/bin", "/opt/rocm/bin", "/usr/local/gpu-burn")

    def __init__(self, env=None):
        self.env = env

    def which(self, tool):
        """Absolute path of ``tool`` (an absolute path is checked as it is), or None."""
        if os.path.isabs(tool):
            return tool if os.access(tool, os.X_OK) else None
        path = os.pathsep.join([os.environ.get("PATH", "")] + list(self.SEARCH_PATH))
        return shutil.which(tool, path=path)

    def run(self, argv, timeout_s, cwd=None):
        """Run ``argv`` for at most ``timeout_s`` seconds; returns :class:`CommandResult`."""
        start = time.monotonic()
        try:
            proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=cwd, env=self.env,
                                    start_new_session=True)
        except OSError as exc:
            raise ToolNotFoundError("cannot run %s: %s" % (argv[0], exc.strerror or exc), where=argv[0])
        try:
            out, err = proc.communicate(timeout=max(timeout_s, 0.01))
            timed_out = False
        except subprocess.TimeoutExpired:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except OSError:
                pass
            out, err = proc.communicate()
            timed_out = True
        return CommandResult(list(argv), None if timed_out else proc.returncode,
                             out.decode("utf-8", "replace"), err.decode("utf-8", "replace"),
                             round(time.monotonic() - start, 3), timed_out)


# ------------------------------------------------------------------------------------------- evidence
class EvidenceStore:
    """Writes evidence under ``<root>/<node>/<run_id>/`` and remembers what it wrote.

    Paths handed out are relative to ``root`` (``node/run/tier/test/attempt-1/stdout.txt``) so the
    controller can fetch them into its own evidence directory.
    """

    def __init__(self, root, node, run_id):
        self.root = os.path.abspath(root)
        self.base = os.path.join(_SAFE.sub("_", node), _SAFE.sub("_", run_id))
        self.files = []

    def path(self, rel):
        return os.path.join(self.root, rel)

    def write_text(self, rel_dir, name, text):
        """Write ``text`` to ``<rel_dir>/<name>``; returns the path relative to the root."""
        rel = os.path.join(self.base, rel_dir, _SAFE.sub("_", name))
        full = self.path(rel)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w", encoding="utf-8") as handle:
            handle.write(text if isinstance(text, str) else str(text))
        if rel not in self.files:
            self.files.append(rel)
        return rel

    def write_json(self, rel_dir, name, data):
        return self.write_text(rel_dir, name, json.dumps(data, indent=2, sort_keys=True, default=str) + "\n")


# ----------------------------------------------------------------------------------------- kernel log
class KernelLog:
    """Reads the kernel log: ``/dev/kmsg`` (root), else ``dmesg``, else ``journalctl -k -b``.

    :meth:`snapshot` returns a marker; :meth:`since` the records logged after it.
    Raises :class:`ToolNotFoundError` when no source is readable (the scan is ``not_run``).
    """

    def __init__(self, executor=None, source="auto", kmsg_path="/dev/kmsg"):
        self.executor = executor or Executor()
        self.source = source
        self.kmsg_path = kmsg_path
        self.used = None

    def _read_kmsg(self):
        fd = os.open(self.kmsg_path, os.O_RDONLY | os.O_NONBLOCK)
        chunks = []
        try:
            while True:
                try:
                    data = os.read(fd, 65536)
                except BlockingIOError:
                    break
                except OSError as exc:  # EPIPE: record overwritten while reading; keep going
                    if exc.errno == 32:
                        continue
                    raise
                if not data:
                    break
                chunks.append(data.decode("utf-8", "replace"))
        finally:
            os.close(fd)
        return "".join(c if c.endswith("\n") else c + "\n" for c in chunks)

    def read(self):
        """``(source, text, records)`` of the whole current boot's kernel log."""
        reasons = []
        order = ("kmsg", "dmesg", "journalctl") if self.source == "auto" else (self.source,)
        for source in order:
            try:
                if source == "kmsg":
                    text = self._read_kmsg()
                elif source == "dmesg":
                    tool = self.executor.which("dmesg")
                    if not tool:
                        raise ToolNotFoundError("dmesg not found")
                    res = self.executor.run([tool], 60)
                    if res.rc != 0:
                        raise ToolNotFoundError("dmesg exited %s: %s" % (res.rc, res.stderr.strip()[:200]))
                    text = res.stdout
                else:
                    tool = self.executor.which("journalctl")
                    if not tool:
                        raise ToolNotFoundError("journalctl not found")
                    res = self.executor.run([tool, "-k", "-b", "--no-pager", "-o", "short-monotonic"], 60)
                    if res.rc != 0 or "No journal files" in res.stdout + res.stderr:
                        raise ToolNotFoundError("journalctl -k gave no kernel log: %s"
                                                % (res.stderr or res.stdout).strip()[:200])
                    text = res.stdout
            except (OSError, ToolNotFoundError) as exc:
                reasons.append("%s: %s" % (source, getattr(exc, "message", None) or exc))
                continue
            self.used = source
            return source, text, parse_kernel_log(text)
        raise ToolNotFoundError("kernel log not readable (%s)" % "; ".join(reasons), where="kernel log")

    def snapshot(self):
        """Marker of the current end of the log: ``(source, last seq or record count)``."""
        source, _text, records = self.read()
        if source == "kmsg":
            return source, max([r["seq"] for r in records] or [-1])
        return source, len(records)

    def since(self, marker):
        """``(text, records)`` logged after ``marker`` (from :meth:`snapshot`)."""
        source, text, records = self.read()
        if source == "kmsg" and marker[0] == "kmsg":
            new = [r for r in records if r["seq"] > marker[1]]
        else:
            new = records[marker[1]:] if marker[0] == source else records
        return "\n".join(_record_line(r) for r in new), new


def _record_line(rec):
    return "[%s] %s" % (rec.get("time"), rec.get("message")) if rec.get("time") else (rec.get("message") or "")


def kernel_findings(records, gpu_by_pci=None):
    """``{xids: [finding], hardware: {kind: {...}}}`` for kernel log records (see _xid, _kmsg)."""
    return {"xids": deduplicate(events_from_records(records), gpu_by_pci),
            "hardware": scan_hardware_errors(records)}


def xid_outcome(findings, window, evidence):
    """Outcome of an XID/hardware-error scan over ``window`` (words for the reason).

    Fails on any XID whose catalog severity is ``fail``, any MCE, uncorrected AER, EDAC UE,
    GPU-off-the-bus or NVSwitch fatal line; other XIDs are reported in ``observed``.
    """
    bad = [f for f in findings["xids"] if f["severity"] == "fail"]
    hw = {k: v for k, v in findings["hardware"].items()
          if k in ("mce", "aer_uncorrected", "edac_ue", "gpu_off_bus", "nvswitch_fatal")}
    observed = {"xids": findings["xids"], "hardware_errors": findings["hardware"]}
    if bad or hw:
        parts = ["Xid %d (%s) x%d on PCI %s%s, first %s" % (f["xid"], f["description"], f["count"], f["pci"],
                                                            " GPU %s" % f["gpu"] if f["gpu"] is not None else "",
                                                            f["first"]) for f in bad]
        parts += ["%d %s line(s), first %s: %s" % (v["count"], k, v["first"], v["sample"]) for k, v in hw.items()]
        remediation = bad[0]["remediation"] if bad else \
            "drain the node and check the SEL/kernel log for the failing component; reseat or replace it"
        return failed("%s: %s" % (window, "; ".join(parts)), remediation, observed=observed,
                      expected="no fail-severity XID, MCE or uncorrected PCIe/memory error", evidence=evidence)
    note = "" if not findings["xids"] else " (non-fatal: %s)" % ", ".join(
        "Xid %d x%d" % (f["xid"], f["count"]) for f in findings["xids"])
    return passed(observed=observed, expected="no fail-severity XID, MCE or uncorrected PCIe/memory error",
                  reason="no hardware error in the kernel log %s%s" % (window, note), evidence=evidence)


# -------------------------------------------------------------------------------------------- context
class TestContext:
    """What a test function gets: its test, the node's expected state, commands, evidence, clock.

    ``bom``: the SKU ``bom`` merged with the profile's; ``deadline``: monotonic time the test
    must finish by (``timeout_s``).
    """

    def __init__(self, test, node, manifest, profile, executor, evidence, rel_dir, kernel_log, deadline,
                 clock=time.monotonic, sleep=time.sleep, sysfs="/sys", procfs="/proc"):
        self.test = test
        self.node = node
        self.manifest = manifest
        self.profile = profile or "production"
        self.bom = effective_bom(manifest, profile)
        self.profile_data = profile_view(manifest, profile)
        self.executor = executor
        self.evidence_store = evidence
        self.rel_dir = rel_dir
        self.kernel_log = kernel_log
        self.deadline = deadline
        self.clock = clock
        self.sleep = sleep
        self.sysfs = sysfs
        self.procfs = procfs
        self.evidence = {}

    @property
    def params(self):
        return self.test.params

    def threshold(self, name, default=None):
        value = self.test.thresholds.get(name, default)
        return value

    def remaining(self):
        return self.deadline - self.clock()

    def check_deadline(self):
        if self.remaining() <= 0:
            raise TestTimeoutError("timed out after %gs (timeout_s in the SKU)" % self.test.timeout_s,
                                   where=self.test.name)

    def save_text(self, name, text, key=None):
        rel = self.evidence_store.write_text(self.rel_dir, name, text)
        self.evidence[key or name.rsplit(".", 1)[0]] = rel
        return rel

    def save_json(self, name, data, key=None):
        rel = self.evidence_store.write_json(self.rel_dir, name, data)
        self.evidence[key or name.rsplit(".", 1)[0]] = rel
        return rel

    def which(self, *tools):
        """First of ``tools`` found on the node, or None."""
        for tool in tools:
            path = self.executor.which(tool)
            if path:
                return path
        return None

    def require(self, *tools, why=""):
        """Like :meth:`which` but raises :class:`ToolNotFoundError` (-> ``not_run``) naming the tools."""
        path = self.which(*tools)
        if not path:
            raise ToolNotFoundError("%s not found on this node%s" % (" / ".join(tools), why), where=self.test.name)
        return path

    def run(self, argv, label, timeout_s=None):
        """Run a command within the test's deadline; stdout/stderr saved as ``<label>.stdout.txt``.

        Raises :class:`TestTimeoutError` when it ran out of time (output is still saved).
        """
        self.check_deadline()
        limit = self.remaining() if timeout_s is None else min(timeout_s, self.remaining())
        result = self.executor.run([str(a) for a in argv], limit)
        self.save_text("%s.stdout.txt" % label, result.stdout, key="%s_stdout" % label)
        if result.stderr:
            self.save_text("%s.stderr.txt" % label, result.stderr, key="%s_stderr" % label)
        command = {"argv": result.argv, "rc": result.rc, "duration_s": result.duration_s,
                   "timed_out": result.timed_out}
        self.save_json("%s.command.json" % label, command, key="%s_command" % label)
        if result.timed_out:
            raise TestTimeoutError("%s timed out after %.0fs (timeout_s %gs in the SKU)"
                                   % (os.path.basename(str(argv[0])), result.duration_s, self.test.timeout_s),
                                   where=self.test.name)
        return result


# --------------------------------------------------------------------------------------------- runner
def _attempt(test, node, manifest, profile, executor, evidence, kernel_log, function, attempt, clock, sleep, sysfs,
             procfs):
    rel_dir = os.path.join(test.tier, _SAFE.sub("_", test.name), "attempt-%d" % attempt)
    ctx = TestContext(test, node, manifest, profile, executor, evidence, rel_dir, kernel_log,
                      clock() + test.timeout_s, clock=clock, sleep=sleep, sysfs=sysfs, procfs=procfs)
    try:
        outcome = function(ctx)
    except ToolNotFoundError as exc:
        outcome = not_run(str(exc.message))
    except TestTimeoutError as exc:
        outcome = failed(exc.message, "rerun the test; if it times out again, look at the raw output for where it "
                                      "hung and check the component it exercises")
    except ParseError as exc:
        outcome = failed("output could not be parsed: %s" % exc,
                         "inspect the raw output kept as evidence; a truncated output usually means the tool "
                         "crashed or was killed")
    except SymphonyError as exc:
        outcome = failed(str(exc), getattr(exc, "remediation", "") or "investigate the error above and rerun")
    if not isinstance(outcome, Outcome):
        raise TypeError("burn-in test %r returned %r, not an Outcome" % (test.name, type(outcome).__name__))
    merged = dict(ctx.evidence)
    merged.update(outcome.evidence or {})
    summary = {"status": outcome.status, "reason": outcome.reason, "expected": outcome.expected,
               "observed": outcome.observed, "remediation": outcome.remediation, "attempt": attempt}
    merged["result"] = evidence.write_json(rel_dir, "result.json", summary)
    outcome.evidence = merged
    return outcome


def run_test(test, node, manifest, profile, executor, evidence, kernel_log, function, clock=time.monotonic,
             sleep=time.sleep, sysfs="/sys", procfs="/proc"):
    """Run one test (twice if it is flaky and the first attempt failed); returns an :class:`Outcome`.

    A flaky test's final status is its second attempt's; both attempts' evidence and
    observations are kept (``evidence.attempts``, ``observed.attempts``).
    """
    args = (test, node, manifest, profile, executor, evidence, kernel_log, function)
    first = _attempt(*args, 1, clock, sleep, sysfs, procfs)
    if not (test.flaky and first.status == FAIL):
        return first
    second = _attempt(*args, 2, clock, sleep, sysfs, procfs)
    attempts = [dict(status=o.status, reason=o.reason, observed=o.observed, evidence=o.evidence)
                for o in (first, second)]
    if second.status == PASS:
        reason = "passed on retry (flaky-prone test); first attempt failed: %s" % first.reason
    elif second.status == FAIL:
        reason = "failed twice (flaky-prone test retried once): %s" % second.reason
    else:
        reason = "retry %s: %s; first attempt failed: %s" % (second.status, second.reason, first.reason)
    evidence_out = dict(second.evidence)
    evidence_out["attempts"] = [o.evidence for o in (first, second)]
    return Outcome(second.status, reason, second.expected, {"attempts": attempts, "final": second.observed},
                   second.remediation or first.remediation, evidence_out)


def run_burnin(node, manifest, plan, run_id, evidence, profile="production", executor=None, kernel_log=None,
               registry=None, stopped_after=None, fail_fast=True, clock=time.monotonic, wall=time.time,
               sleep=time.sleep, sysfs="/sys", procfs="/proc"):
    """Run the node/gpu/power tiers of ``plan`` on this host for ``node``.

    Returns ``{"results": [CheckResult], "stopped_after": name|None, "files": [relative paths],
    "tiers": {tier: status}}`` where a tier's status is ``fail`` if any of its checks failed, else
    ``not_run`` if all were not run, else ``pass`` if none is ``not_run``, else ``partial``.
    ``stopped_after`` carries fail-fast across calls (a previous call's failing test).  Fabric
    tests in the plan are returned only as ``not_run`` when fail-fast stopped the node.
    ``registry``: kind -> ``callable(TestContext) -> Outcome`` (default: _burnin_checks.KINDS).
    """
    if registry is None:
        from .checks import KINDS as registry
    executor = executor or Executor()
    kernel_log = kernel_log or KernelLog(executor)
    results = []

    def record(test_name, outcome, started):
        results.append(CheckResult(node=node, stage=STAGE, check=test_name, status=outcome.status,
                                   reason=outcome.reason, expected=outcome.expected, observed=outcome.observed,
                                   remediation=outcome.remediation, evidence=outcome.evidence,
                                   started=started, finished=wall(), run_id=run_id))

    for tier in TIER_ORDER:
        tier_tests = [t for t in plan if t.tier == tier]
        if not tier_tests:
            continue
        if tier not in RUNNER_TIERS:
            if stopped_after:
                for test in tier_tests:
                    record(test.name, not_run("stopped by fail-fast after %s" % stopped_after), wall())
            continue
        if stopped_after:
            for name in [t.name for t in tier_tests] + [XID_CHECK % tier]:
                record(name, not_run("stopped by fail-fast after %s" % stopped_after), wall())
            continue
        tier_start = wall()
        rel_dir = os.path.join(tier, "kernel-log")
        try:
            marker = kernel_log.snapshot()
            scan_error = None
        except ToolNotFoundError as exc:
            marker, scan_error = None, exc.message
        for test in tier_tests:
            started = wall()
            if stopped_after:
                record(test.name, not_run("stopped by fail-fast after %s" % stopped_after), started)
                continue
            function = registry.get(test.kind)
            if function is None:
                outcome = not_run("test kind %r has no implementation in this collection" % test.kind)
            else:
                outcome = run_test(test, node, manifest, profile, executor, evidence, kernel_log, function,
                                   clock=clock, sleep=sleep, sysfs=sysfs, procfs=procfs)
            record(test.name, outcome, started)
            if fail_fast and outcome.status == FAIL:
                stopped_after = test.name
        # XIDs and hardware errors logged while the tier ran (even when it stopped early).
        if marker is None:
            outcome = not_run("kernel log not read before the tier: %s" % scan_error)
        else:
            try:
                text, records = kernel_log.since(marker)
                ev = {"kernel_log": evidence.write_text(rel_dir, "kernel-log-during-tier.txt", text)}
                findings = kernel_findings(records)
                ev["findings"] = evidence.write_json(rel_dir, "findings.json", findings)
                outcome = xid_outcome(findings, "during the %s tier" % tier, ev)
            except ToolNotFoundError as exc:
                outcome = not_run("kernel log not readable after the tier: %s" % exc.message)
        record(XID_CHECK % tier, outcome, tier_start)
        if fail_fast and outcome.status == FAIL and not stopped_after:
            stopped_after = XID_CHECK % tier
    tiers = {}
    for tier in TIER_ORDER:
        names = set(t.name for t in plan if t.tier == tier) | {XID_CHECK % tier}
        statuses = [r.status for r in results if r.check in names]
        if not statuses:
            continue
        if FAIL in statuses:
            tiers[tier] = FAIL
        elif all(s == NOT_RUN for s in statuses):
            tiers[tier] = NOT_RUN
        elif NOT_RUN in statuses:
            tiers[tier] = "partial"
        else:
            tiers[tier] = PASS
    return {"results": results, "stopped_after": stopped_after, "files": list(evidence.files), "tiers": tiers}


# ---------------------------------------------------------------------------------------- controller
def absolutise_evidence(evidence, root):
    """Evidence dict with relative paths joined to the controller's ``root`` (lists and nested dicts too)."""
    if isinstance(evidence, dict):
        return {k: absolutise_evidence(v, root) for k, v in evidence.items()}
    if isinstance(evidence, list):
        return [absolutise_evidence(v, root) for v in evidence]
    if isinstance(evidence, str) and evidence and not os.path.isabs(evidence):
        return os.path.join(os.path.abspath(root), evidence)
    return evidence


def record_burnin(ledger, manifest, profile, node, run_id, results, evidence_root=None, waivers=None,
                  extra_checks=()):
    """Append ``results`` (dicts or :class:`CheckResult`) to ``ledger`` and record the node's burn-in gate.

    The gate is computed from the ledger's current burn-in results for the node (so results of
    the fabric tier recorded separately count) against :func:`gate_graph`.  Returns the
    :class:`GateVerdict`.  Raises :class:`LedgerError` on write failure.
    """
    rows = []
    for item in results:
        res = item if isinstance(item, CheckResult) else CheckResult.from_dict(item)
        if res.node != node or res.stage != STAGE:
            raise ManifestError("result for %s/%s/%s does not belong to %s/%s"
                                % (res.node, res.stage, res.check, node, STAGE), where=node)
        if evidence_root:
            res.evidence = absolutise_evidence(res.evidence, evidence_root)
        rows.append(res)
    if rows:
        ledger.record_results(rows)
    verdict = current_gate(ledger, manifest, profile, node, waivers, extra_checks)
    ledger.record_gate(verdict, run_id)
    return verdict


def current_gate(ledger, manifest, profile, node, waivers=None, extra_checks=()):
    """The burn-in gate of ``node`` from the ledger's current results (no write)."""
    graph = gate_graph(manifest, profile, extra_checks=extra_checks)
    current = [r for r in ledger.current_results(node=node, stage=STAGE) if r.check in graph.specs]
    if not current:
        current = [CheckResult(node=node, stage=STAGE, check=graph.order()[0], status=NOT_RUN,
                               reason="no burn-in result recorded")]
    waived = ledger.waivers(node, STAGE) if waivers is None else waivers
    return compute_gate(graph, current, waived)


# -------------------------------------------------------------------------------------------- module
def _validate(manifest):
    """Validate the manifest where jsonschema is available (the controller); structural checks otherwise."""
    try:
        from .._core.schema import HAS_JSONSCHEMA
        from .._core.sku import validate_manifest
    except ImportError:  # pragma: no cover - module_utils always ship together
        return manifest
    if HAS_JSONSCHEMA:
        validate_manifest(manifest, "SKU %s" % manifest.get("sku", "manifest"))
    return manifest


def burnin_run(params, check_mode, executor=None, kernel_log=None):
    """Logic of the ``burnin_run`` module.

    ``params``: node, manifest, profile, tiers, tests, overrides, evidence_dir, run_id, stopped_after,
    fail_fast.  In check mode returns the plan without running anything.  Returns the module result:
    ``{changed, run_id, plan, checks: [gate_record check dicts with absolute evidence paths], optional,
    stopped_after, tiers, evidence_dir, evidence_files}``.
    """
    from .._core.gate import new_run_id
    manifest = _validate(params["manifest"])
    profile = params.get("profile") or "production"
    plan = build_plan(manifest, profile, tiers=params.get("tiers") or None, only=params.get("tests") or None,
                      overrides=params.get("overrides") or None, calibration=params.get("calibration"))
    run_id = params.get("run_id") or new_run_id("burnin")
    optional = list(((manifest.get("gates") or {}).get(profile) or {}).get(STAGE, {}).get("optional") or [])
    out = {"changed": False, "run_id": run_id, "plan": [t.to_dict() for t in plan], "optional": optional,
           "profile": profile, "checks": [], "stopped_after": params.get("stopped_after"), "tiers": {},
           "evidence_dir": params["evidence_dir"], "evidence_files": []}
    if check_mode:
        return out
    store = EvidenceStore(params["evidence_dir"], params["node"], run_id)
    report = run_burnin(params["node"], manifest, plan, run_id, store, profile=profile, executor=executor,
                        kernel_log=kernel_log, stopped_after=params.get("stopped_after"),
                        fail_fast=params.get("fail_fast", True))
    checks = []
    for res in report["results"]:
        checks.append({"name": res.check, "status": res.status, "reason": res.reason, "expected": res.expected,
                       "observed": res.observed, "remediation": res.remediation,
                       "evidence": absolutise_evidence(res.evidence, store.root),
                       "started": res.started, "finished": res.finished})
    out.update(changed=True, checks=checks, stopped_after=report["stopped_after"], tiers=report["tiers"],
               evidence_files=[os.path.join(store.root, f) for f in report["files"]])
    return out
