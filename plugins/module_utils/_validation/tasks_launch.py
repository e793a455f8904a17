# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Entry point of the ``training_launch`` module: submit, follow or cancel one Slurm job."""

from __future__ import annotations

import os
from typing import Any, Dict

from .._core.errors import SchedulerError, ValidationError
from .._host.slurm import Slurm
from .recipes import read_log


def run_launch(p: Dict[str, Any]) -> Dict[str, Any]:
    """training_launch: submit (and follow to the end) or cancel a Slurm job; returns the job record and log tail."""
    env = dict(os.environ, SLURM_CONF=p["slurm_conf"]) if p.get("slurm_conf") else None
    slurm = Slurm(env=env)
    if p["state"] == "cancelled":
        if not p.get("job_id"):
            raise ValidationError("state=cancelled needs job_id", where="job_id")
        slurm.cancel(p["job_id"])
        return {"changed": True, "job": slurm.job(p["job_id"])}
    if not p.get("script"):
        raise ValidationError("state=%s needs script" % p["state"], where="script")
    job_id = slurm.submit(p["script"], nodes=p.get("nodes"), partition=p.get("partition"), job_name=p.get("job_name"))
    if p["state"] == "submitted":
        return {"changed": True, "job": slurm.job(job_id)}
    job = slurm.wait(job_id, p["timeout_s"], poll_s=p["poll_s"])
    tail = []
    if job.get("stdout"):
        try:
            tail = read_log(job["stdout"], 200_000).splitlines()[-p["log_lines"]:]
        except SchedulerError as exc:
            tail = [str(exc)]
    failed = job["state"] != "COMPLETED" or job.get("exit_code") not in (0, None)
    return {"changed": True, "job": job, "log_tail": tail, "failed_job": failed}
