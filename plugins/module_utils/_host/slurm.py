# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Slurm: submit a rendered sbatch script, follow it to the end, cancel it, drain nodes.

Training runs on the cluster's own scheduler (DESIGN.md, "Scale"); this module
only drives the Slurm client commands: ``sbatch --parsable``, ``squeue``,
``scontrol show job -o`` (works without accounting storage, for ``MinJobAge``
seconds after the end), ``sacct`` (when accounting is enabled), ``scancel``,
``scontrol update nodename=... state=drain reason=...``.

A federated or multi-cluster site answers ``sbatch --parsable`` with ``N;cluster`` (and a wrapper without
``--parsable`` with ``Submitted batch job N on cluster X``, sbatch(1) "--parsable" and "-M"): the job lives on
that cluster, so every follow-up command for it (``scontrol``, ``sacct``, ``scancel``) gets ``-M cluster``;
without it the local controller answers "Invalid job id" while the job runs on.  A job id may be given as
``"N;cluster"`` anywhere one is taken.

Every command goes through an injected ``run(argv, env, timeout) ->
(rc, stdout, stderr)`` so the logic is unit-tested without Slurm; the default
runs the real command.  A missing client raises :class:`ToolNotFoundError`.
"""

from __future__ import annotations

import re
import shlex
import time
from typing import Any, Callable, Mapping, Sequence

from .._core.errors import (
    SchedulerError,
    ToolNotFoundError,
    ValidationError,
)
from .process import CommandTimeoutError, run

# Job states (squeue/scontrol JOB_STATE names, Slurm 22.05 man squeue "JOB STATE CODES").
PENDING_STATES = ("PENDING", "CONFIGURING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RESV_DEL_HOLD",
                  "SUSPENDED", "STOPPED", "SIGNALING", "RESIZING")
RUNNING_STATES = ("RUNNING", "COMPLETING", "STAGE_OUT")
DONE_STATES = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "OUT_OF_MEMORY",
               "BOOT_FAIL", "DEADLINE", "REVOKED", "SPECIAL_EXIT")
# sbatch's stdout: "--parsable" prints "N" or "N;cluster"; without it "Submitted batch job N [on cluster X]"
# (Slurm src/sbatch/sbatch.c, _job_submit output).
_SUBMITTED = (re.compile(r"^(\d+)(?:;(\S+))?$"), re.compile(r"^Submitted batch job (\d+)(?: on cluster (\S+))?$"))
_NODE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-\[\],]*$")


def run_command(argv: Sequence[str], env: Mapping[str, str] | None = None, timeout: float = 60) -> tuple[int, str, str]:
    """Run ``argv``; ``(rc, stdout, stderr)``.  ToolNotFoundError when the executable is absent,
    :class:`SchedulerError` when it does not answer within ``timeout`` seconds."""
    try:
        res = run(argv, timeout, env=env)
    except ToolNotFoundError:
        raise ToolNotFoundError("%s is not installed on this host" % argv[0], where=argv[0])
    except CommandTimeoutError:
        raise SchedulerError("%s did not answer within %d s" % (" ".join(argv[:3]), timeout), where=argv[0])
    return res.rc, res.stdout, res.stderr


def parse_job_record(text: str) -> dict[str, str]:
    """``scontrol show job -o`` output -> dict of its ``Key=Value`` fields.

    Values never contain spaces except ``Command``/``WorkDir``-like paths, which we do
    not rely on; ``Reason=`` values may, and are kept whole up to the next ``Key=``.
    """
    fields: dict[str, str] = {}
    for match in re.finditer(r"(\w[\w:/]*)=(.*?)(?=\s+\w[\w:/]*=|\s*$)", text.strip()):
        fields[match.group(1)] = match.group(2)
    return fields


def parse_exit_code(value: Any) -> tuple[int | None, int | None]:
    """``"1:0"`` -> ``(1, 0)``: (exit status, signal)."""
    try:
        code, dummy, signal = str(value).partition(":")
        return int(code), int(signal or 0)
    except ValueError:
        return None, None


def parse_submitted(stdout: str) -> tuple[str, str | None] | None:
    """sbatch's stdout -> ``(job_id, cluster or None)``; None when no line is a submission answer.

    Only stdout is read: sbatch prints warnings ("sbatch: warning: ...") to stderr, and a site's job_submit
    plugin may print a line before the answer, so each line is tried, the last match wins.
    """
    found = None
    for line in stdout.splitlines():
        for regex in _SUBMITTED:
            match = regex.match(line.strip())
            if match:
                found = (match.group(1), match.group(2) or None)
    return found


def split_job_ref(job_id: str | int) -> tuple[str, str | None]:
    """``"7;gpu-west"`` -> ``("7", "gpu-west")``; ``7`` -> ``("7", None)``."""
    job, _sep, cluster = str(job_id).strip().partition(";")
    return job, cluster or None


def validate_node_names(nodes: Sequence[Any], where: str = "nodes") -> list[str]:
    """``nodes`` as a list; :class:`ValidationError` naming the first that is not a Slurm node name."""
    for node in nodes:
        if not isinstance(node, str) or not _NODE_NAME.match(node):
            raise ValidationError("%r is not a Slurm node name" % (node,), where=where)
    return list(nodes)


class Slurm:
    """The Slurm client commands on this host.

    ``env``: environment for the commands (e.g. ``SLURM_CONF`` for the lab);
    ``run``: see module docstring; ``clock``/``sleep``: injectable time.
    """

    def __init__(self, env: Mapping[str, str] | None = None, run: Callable[..., tuple[int, str, str]] = run_command,
                 clock: Callable[[], float] = time.time, sleep: Callable[[float], None] = time.sleep,
                 command_timeout: float = 60, cluster: str | None = None) -> None:
        self.env = env
        # ``cluster``: submit to this cluster (``sbatch -M``); jobs answered "N;cluster" remember theirs.
        self.cluster = cluster
        self._job_cluster: dict[str, str] = {}
        self._run = run
        self.clock = clock
        self.sleep = sleep
        self.command_timeout = command_timeout

    def _call(self, argv: list[str], where: str) -> str:
        rc, out, err = self._run(argv, env=self.env, timeout=self.command_timeout)
        if rc != 0:
            raise SchedulerError("%s failed (rc %d): %s" % (argv[0], rc, (err or out).strip()[:400]), where=where)
        return out

    def submit(self, script_path: str, nodes: Sequence[str] | None = None, partition: str | None = None,
               job_name: str | None = None, extra_args: Sequence[str] = ()) -> str:
        """``sbatch --parsable``; returns the job id (str).

        ``nodes``: exact node list (``--nodelist`` and ``--nodes``), overriding the
        script's ``--nodes``; raises :class:`SchedulerError` when sbatch refuses.
        """
        argv = ["sbatch", "--parsable"] + (["-M", self.cluster] if self.cluster else [])
        if nodes:
            nodes = validate_node_names(nodes)
            argv += ["--nodes=%d" % len(nodes), "--nodelist=%s" % ",".join(nodes)]
        if partition:
            argv.append("--partition=%s" % partition)
        if job_name:
            argv.append("--job-name=%s" % job_name)
        argv += list(extra_args) + [script_path]
        out = self._call(argv, where=script_path)
        found = parse_submitted(out)
        if found is None:
            raise SchedulerError("sbatch exited 0 but printed %r, no job id: the job may be queued; find it with "
                                 "squeue --name=%s" % (out.strip()[:200], job_name or "<script name>"),
                                 where=script_path)
        job_id, cluster = found
        cluster = cluster or self.cluster
        if cluster:
            self._job_cluster[job_id] = cluster
        return job_id

    def cluster_of(self, job_id: str | int) -> str | None:
        """The cluster ``job_id`` runs on (from its ``"N;cluster"`` form, sbatch's answer, or ``cluster``)."""
        job, cluster = split_job_ref(job_id)
        return cluster or self._job_cluster.get(job) or self.cluster

    def _site(self) -> list[str]:
        return ["-M", self.cluster] if self.cluster else []

    def _m(self, job_id: str | int) -> list[str]:
        cluster = self.cluster_of(job_id)
        return ["-M", cluster] if cluster else []

    def job(self, job_id: str | int) -> dict[str, Any]:
        """Current record of ``job_id``: ``{job_id, cluster, state, exit_code, signal, nodes, reason, stdout, elapsed}``.

        ``cluster`` is the job's cluster (None on a single-cluster site).

        Reads ``scontrol show job -o``; when Slurm no longer holds the job (past
        ``MinJobAge``) falls back to ``sacct``.  Raises :class:`SchedulerError` when
        neither knows it.
        """
        job = split_job_ref(job_id)[0]
        cluster = self.cluster_of(job_id)
        rc, out, err = self._run(["scontrol"] + self._m(job_id) + ["show", "job", "-o", job], env=self.env,
                                 timeout=self.command_timeout)
        # With -M, scontrol may print a "CLUSTER: name" header line before the record.
        lines = [line for line in out.splitlines() if "JobId=" in line]
        if rc == 0 and lines:
            rec = parse_job_record(lines[0])
            code, signal = parse_exit_code(rec.get("ExitCode", ""))
            return {"job_id": job, "cluster": cluster, "state": rec.get("JobState", "UNKNOWN").split()[0],
                    "exit_code": code, "signal": signal, "nodes": rec.get("NodeList", ""),
                    "reason": rec.get("Reason", ""), "stdout": rec.get("StdOut", ""),
                    "elapsed": rec.get("RunTime", "")}
        sacct = ["sacct"] + self._m(job_id) + ["-n", "-P", "-X", "-j", job, "-o", "JobID,State,ExitCode,NodeList,Elapsed"]
        rc2, out2, err2 = self._run(sacct, env=self.env, timeout=self.command_timeout)
        if rc2 == 0 and out2.strip():
            jid, state, exit_code, nodes, elapsed = (out2.strip().splitlines()[0].split("|") + [""] * 5)[:5]
            code, signal = parse_exit_code(exit_code)
            return {"job_id": jid, "cluster": cluster, "state": state.split()[0], "exit_code": code,
                    "signal": signal, "nodes": nodes, "reason": "", "stdout": "", "elapsed": elapsed}
        raise SchedulerError("Slurm knows no job %s (scontrol: %s; sacct: %s)"
                             % (job_id, (err or "no output").strip()[:200], (err2 or "no output").strip()[:200]),
                             where="job %s" % job_id)

    def wait(self, job_id: str | int, timeout_s: float, poll_s: float = 2.0) -> dict[str, Any]:
        """Poll until ``job_id`` ends; returns its final :meth:`job` record plus ``waited_s``.

        Past ``timeout_s`` the job is cancelled and the record says ``state:
        CANCELLED`` with ``timed_out: True``.
        """
        start = self.clock()
        while True:
            rec = self.job(job_id)
            if rec["state"] in DONE_STATES:
                rec.update(waited_s=round(self.clock() - start, 1), timed_out=False)
                return rec
            if self.clock() - start > timeout_s:
                self.cancel(job_id)
                rec.update(state="CANCELLED", timed_out=True, waited_s=round(self.clock() - start, 1),
                           reason="cancelled after %d s without finishing (was %s)" % (timeout_s, rec["state"]))
                return rec
            self.sleep(poll_s)

    def cancel(self, job_id: str | int) -> None:
        """``scancel [-M cluster] <job_id>``."""
        self._call(["scancel"] + self._m(job_id) + [split_job_ref(job_id)[0]], where="job %s" % job_id)

    def drain(self, node: str, reason: str, cluster: str | None = None) -> None:
        """``scontrol [-M cluster] update nodename=<node> state=DRAIN reason=<reason>``; reason is required.

        ``cluster``: the cluster the node's job ran on (:meth:`cluster_of`), else this client's ``cluster``.
        """
        validate_node_names([node])
        if not reason or not str(reason).strip():
            raise ValidationError("draining a node needs a reason", where=node)
        site = ["-M", cluster] if cluster else self._site()
        self._call(["scontrol"] + site + ["update", "nodename=%s" % node, "state=DRAIN", "reason=%s" % reason],
                   where=node)

    def resume(self, node: str) -> None:
        """``scontrol update nodename=<node> state=RESUME``."""
        validate_node_names([node])
        self._call(["scontrol"] + self._site() + ["update", "nodename=%s" % node, "state=RESUME"], where=node)

    def running_jobs(self, node: str) -> list[str]:
        """Ids of the jobs running on ``node`` now (``squeue --states=RUNNING --nodelist``)."""
        validate_node_names([node])
        argv = ["squeue"] + self._site() + ["--noheader", "--format=%i", "--states=RUNNING", "--nodelist=%s" % node]
        out = self._call(argv, where=node)
        # squeue -M prints a "CLUSTER: name" line even with --noheader.
        return [word for word in out.split() if word.isdigit()]

    def node_states(self, nodes: Sequence[str] | None = None) -> dict[str, dict[str, str]]:
        """``{node: {"state": "IDLE+DRAIN", "reason": "...", "addr": "10.77.0.12", "hostname": "lab2"}}``.

        From ``scontrol show node -o``; ``addr``/``hostname`` are the node's ``NodeAddr``/``NodeHostName``
        (empty when Slurm does not print them).
        """
        argv = ["scontrol"] + self._site() + ["show", "node", "-o"]
        if nodes:
            argv.append(",".join(validate_node_names(nodes)))
        out = self._call(argv, where="nodes")
        states = {}
        for line in out.splitlines():
            rec = parse_job_record(line)
            if "NodeName" in rec:
                states[rec["NodeName"]] = {"state": rec.get("State", "UNKNOWN"), "reason": rec.get("Reason", ""),
                                           "addr": rec.get("NodeAddr", ""), "hostname": rec.get("NodeHostName", "")}
        return states


def is_drained(state: str) -> bool:
    """True for a Slurm node state that takes no new jobs (DRAIN, DRAINING, DRAINED, DOWN)."""
    return any(flag in state.upper() for flag in ("DRAIN", "DOWN"))


def render_template(path: str, context: Mapping[str, Any]) -> str:
    """Render a Jinja2 template (the role's ``sbatch.j2``) outside Ansible, with its ``quote`` filter.

    Undefined variables raise (StrictUndefined); :class:`ValidationError` names the
    template and the variable.  Ansible renders the same file with ``ansible.builtin.template``.
    """
    try:
        import jinja2
    except ImportError:
        raise ToolNotFoundError("the jinja2 Python library is required to render %s" % path, where=path)
    env = jinja2.Environment(undefined=jinja2.StrictUndefined, trim_blocks=True, keep_trailing_newline=True)
    env.filters["quote"] = lambda value: shlex.quote(str(value))
    try:
        with open(path, encoding="utf-8") as handle:
            return env.from_string(handle.read()).render(**context)
    except OSError as exc:
        raise ValidationError("cannot read the template: %s" % exc.strerror, where=path)
    except jinja2.TemplateError as exc:
        raise ValidationError("template error: %s" % exc, where=path)
