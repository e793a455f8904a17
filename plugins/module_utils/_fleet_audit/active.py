# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Active health: short checks run as a preemptible Slurm job on an idle node, yielding to any customer job.

The job is submitted with ``--deadline=now+<time limit + 1>minutes`` (sbatch has no ``--immediate``, only
salloc/srun do: a job that cannot start within about a minute cannot end by its deadline and Slurm removes it,
state ``DEADLINE``, so it never waits in front of a customer), ``--exclusive`` (it shares the node with nobody), ``--no-requeue`` and a
short ``--time``, into the audit partition/QOS the cluster configures as preemptible: a customer job preempts
it (slurm.conf ``PreemptType=preempt/partition_prio`` or ``preempt/qos`` with ``PreemptMode=CANCEL``; Slurm
"Preemption" guide), which ends it in state ``PREEMPTED``.

A preempted job's checks are ``not_run`` "preempted by job N" (N: the job running on the node afterwards), never
``fail``; a node that is busy gives ``not_run`` "node busy"; no Slurm on the submit
host gives ``not_run`` with that reason; a job removed at its deadline is ``not_run`` "node busy".  The job script prints one line per check,
``SYMPHONY_CHECK <name> <exit status>``; exit 127 (command not found, POSIX shell) is ``not_run``.
"""

from __future__ import annotations

import re
from typing import Any, Dict, List, Mapping, Optional, Sequence

from .._core.errors import SchedulerError, ToolNotFoundError
from .._core.gate import Outcome, failed, not_run, passed
from .._host.process import which
from .._host.slurm import Slurm, validate_node_names

JOB_NAME = "symphony-fleet-audit"
# name -> (shell command, the part the check needs, what its exit status means: the tool's documentation)
CHECKS: Dict[str, tuple] = {
    "active_gpu_query": ("nvidia-smi -q -x >/dev/null", "gpus", "nvidia-smi exits 0 when every GPU answered"),
    "active_dcgm_r1": ("dcgmi diag -r 1", "gpus",
                       "dcgmi diag exits non-zero when a test fails (DCGM User Guide, 'Run Levels': r1 is the "
                       "quick software/deployment check)"),
    "active_nccl_single": ("all_reduce_perf -b 8 -e 128M -f 2 -g \"$(nvidia-smi -L | wc -l)\" -c 1", "gpus",
                           "nccl-tests exits non-zero on a CUDA/NCCL error or a wrong result (-c 1 checks)"),
    "active_memtest": ("stress-ng --vm 1 --vm-bytes 10% --verify --timeout 20s --metrics-brief", None,
                       "stress-ng --verify exits 2 when a verification failure was found (stress-ng(1) EXIT STATUS)"),
}
_LINE = re.compile(r"^SYMPHONY_CHECK (\S+) (\d+)\s*$", re.M)


def sbatch_options(node: str, partition: str, qos: Optional[str], time_limit_min: int, output: str) -> List[str]:
    """The sbatch options of the active-health job (module docstring)."""
    validate_node_names([node])
    argv = ["--deadline=now+%dminutes" % (time_limit_min + 1), "--exclusive", "--no-requeue", "--time=%d" % time_limit_min,
            "--output=%s" % output, "--comment=symphony fleet_audit active health (preemptible)"]
    if qos:
        argv.append("--qos=%s" % qos)
    return argv + ["--partition=%s" % partition]


def job_script(checks: Sequence[str]) -> str:
    """The batch script: each check's command, then its status line (never stops at the first failure)."""
    lines = ["#!/bin/sh", "# symphony.cluster fleet_audit active health; preemptible, see roles/fleet_audit"]
    for name in checks:
        lines.append("%s; echo \"SYMPHONY_CHECK %s $?\"" % (CHECKS[name][0], name))
    return "\n".join(lines) + "\n"


def skipped(not_expected: Sequence[str]) -> Dict[str, Outcome]:
    """Checks the profile's hosts cannot run (no GPUs in the lab): ``not_run`` with that reason, not submitted."""
    return {name: not_run("this profile's hosts have no %s" % part) for name, (_cmd, part, _doc) in CHECKS.items()
            if part and part in not_expected}


def judge_job(record: Mapping[str, Any], output: Optional[str], checks: Sequence[str],
              preemptor: Optional[str] = None) -> Dict[str, Outcome]:
    """``{check: Outcome}`` from the job's final record (``Slurm.wait``) and its output text."""
    state = record.get("state")
    job = record.get("job_id")
    if state == "PREEMPTED":
        why = "preempted by job %s" % preemptor if preemptor else "preempted by a customer job"
        return {name: not_run("%s (active-health job %s)" % (why, job)) for name in checks}
    if state == "DEADLINE":
        return {name: not_run("node busy: active-health job %s could not start before its deadline" % job)
                for name in checks}
    seen = {m.group(1): int(m.group(2)) for m in _LINE.finditer(output or "")}
    out: Dict[str, Outcome] = {}
    for name in checks:
        status = seen.get(name)
        evidence = {"job_id": job, "state": state}
        if status is None:
            out[name] = not_run("job %s ended %s before reporting %s" % (job, state, name), evidence=evidence)
        elif status == 0:
            out[name] = passed(observed={"exit_status": 0}, expected={"exit_status": 0}, evidence=evidence,
                               reason="%s exited 0 in job %s" % (CHECKS[name][0].split()[0], job))
        elif status == 127:
            out[name] = not_run("%s not installed on the node" % CHECKS[name][0].split()[0], evidence=evidence)
        else:
            out[name] = failed("%s exited %d in job %s (%s)" % (CHECKS[name][0].split()[0], status, job,
                                                                CHECKS[name][2]),
                               "drain the node and run its burn-in GPU/memory tier to find the part",
                               observed={"exit_status": status}, expected={"exit_status": 0}, evidence=evidence)
    return out


def run_active(node: str, partition: str, script_path: str, output_path: str, not_expected: Sequence[str] = (),
               qos: Optional[str] = None, time_limit_min: int = 10, timeout_s: float = 900,
               slurm: Optional[Slurm] = None, read: Any = None) -> Dict[str, Outcome]:
    """Submit, wait and judge; every check of :data:`CHECKS` gets an outcome (module docstring)."""
    out = skipped(not_expected)
    todo = [name for name in CHECKS if name not in out]
    if not todo:
        return out
    if slurm is None:
        if not which("sbatch"):
            return dict(out, **{name: not_run("Slurm is not installed on the submit host (no sbatch)")
                                for name in todo})
        slurm = Slurm()
    with open(script_path, "w", encoding="utf-8") as handle:
        handle.write(job_script(todo))
    try:
        job = slurm.submit(script_path, nodes=[node], job_name=JOB_NAME,
                           extra_args=sbatch_options(node, partition, qos, time_limit_min, output_path))
    except SchedulerError as exc:
        reason = "node busy or not allocatable now: %s" % exc if "immediate" in str(exc).lower() or \
            "unavailable" in str(exc).lower() else "sbatch refused the job: %s" % exc
        return dict(out, **{name: not_run(reason) for name in todo})
    record = slurm.wait(job, timeout_s)
    preemptor = None
    if record.get("state") == "PREEMPTED":
        try:
            preemptor = next(iter(j for j in slurm.running_jobs(node) if j != job), None)
        except SchedulerError:
            preemptor = None
    try:
        text = (read or _read)(output_path)
    except (OSError, ToolNotFoundError):
        text = None
    out.update(judge_job(record, text, todo, preemptor))
    return out


def _read(path: str) -> str:
    with open(path, encoding="utf-8", errors="replace") as handle:
        return handle.read()
