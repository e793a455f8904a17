#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: training_launch
short_description: Submit a pretraining sbatch script to Slurm, follow it to the end, or cancel it
description:
  - Submits O(script) (rendered from the role's C(sbatch.j2)) with C(sbatch --parsable), optionally on an exact
    node list, and with O(state=finished) polls C(scontrol show job) (C(sacct) when Slurm no longer holds the job)
    until it ends, returning the job's state, exit code, nodes and the tail of its log.
  - A job still running after O(timeout_s) is cancelled and reported as such.
  - O(state=cancelled) cancels O(job_id) with C(scancel).
version_added: 0.1.0
author:
  - symphony.cluster maintainers (@symphony-cluster)
options:
  script:
    description: The sbatch script on the submit host.
    type: path
  job_id:
    description: Job to cancel (O(state=cancelled)).
    type: str
  state:
    description: C(finished) submits and waits; C(submitted) only submits; C(cancelled) cancels O(job_id).
    type: str
    choices: [finished, submitted, cancelled]
    default: finished
  nodes:
    description: Exact node list (overrides the script's node count).
    type: list
    elements: str
  partition:
    description: Slurm partition.
    type: str
  job_name:
    description: Slurm job name.
    type: str
  timeout_s:
    description: Seconds to wait before cancelling the job.
    type: int
    default: 3600
  poll_s:
    description: Seconds between polls.
    type: float
    default: 5.0
  log_lines:
    description: Lines of the job's log to return.
    type: int
    default: 40
  slurm_conf:
    description: C(SLURM_CONF) for the Slurm client commands (the lab's slurm.conf).
    type: path
extends_documentation_fragment:
  - symphony.cluster.attributes
attributes:
  check_mode:
    support: none
  diff_mode:
    support: none
"""

EXAMPLES = r"""
- name: Run the pretraining job and wait for it
  symphony.cluster.training_launch:
    script: /shared/cv/cluster_validation.sbatch
    nodes: [gpu-001, gpu-002]
    partition: gpu
    timeout_s: 3600
  register: job
"""

RETURN = r"""
job:
  description: C(job_id), C(state), C(exit_code), C(signal), C(nodes), C(reason), C(stdout) (log path), C(elapsed).
  returned: success
  type: dict
log_tail:
  description: Last lines of the job's log (O(state=finished)).
  returned: when state is finished
  type: list
  elements: str
failed_job:
  description: True when the job did not complete with exit code 0.
  returned: when state is finished
  type: bool
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.symphony.cluster.plugins.module_utils._core.module import run_module
from ansible_collections.symphony.cluster.plugins.module_utils._validation.tasks_launch import run_launch

ARGUMENT_SPEC = {
    "script": {"type": "path"},
    "job_id": {"type": "str"},
    "state": {"type": "str", "choices": ["finished", "submitted", "cancelled"], "default": "finished"},
    "nodes": {"type": "list", "elements": "str"},
    "partition": {"type": "str"},
    "job_name": {"type": "str"},
    "timeout_s": {"type": "int", "default": 3600},
    "poll_s": {"type": "float", "default": 5.0},
    "log_lines": {"type": "int", "default": 40},
    "slurm_conf": {"type": "path"},
}


def _run(params, check_mode):
    result = run_launch(params)
    if result.get("failed_job"):
        job = result["job"]
        result.update(failed=True, msg="job %s ended %s (exit %s)" % (job["job_id"], job["state"], job["exit_code"]))
    return result


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=False)
    run_module(module, _run)


if __name__ == "__main__":
    main()
