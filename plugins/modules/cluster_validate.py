#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: cluster_validate
short_description: Pretraining through Slurm, MFU per scale, telemetry outliers, evict-replace-rerun, handoff certificate
description:
  - Runs the rendered sbatch O(script) at every scale of O(targets) on the active nodes, computes MFU from the
    run's log with the target's FLOPs convention, compares per-GPU telemetry against peers, drains outlier nodes in
    Slurm with a reason, promotes spares from O(spares) whose C(burn_in) gate passed, and reruns until every scale
    meets its target or O(max_attempts) is reached.
  - Records check results C(training_run), C(mfu_target), C(telemetry_outliers), C(stragglers), one
    C(scale_<N>n_<precision>) row per scale a node ran in, and the C(cluster_validation) gate per node,
    C(drain)/C(spare_promoted) events, and writes the handoff certificate (JSON and text) to O(dest).
  - A node of the play that Slurm has drained or down is C(blocked) with Slurm's reason; the others are
    validated and the certificate is written.
  - The ledger and the certificate name nodes by their inventory (twin) names; Slurm gets their Slurm names
    (O(slurm_names), else the C(NodeName) equal to the inventory name, else the one at the node's address).
  - Check mode returns the plan (scales, nodes, Slurm names, eligible spares) without submitting anything.
version_added: 0.1.0
author:
  - symphony.cluster maintainers (@symphony-cluster)
options:
  nodes:
    description: Nodes to validate (their burn_in gate passed).
    type: list
    elements: str
    required: true
  spares:
    description: The twin's spare pool, in order of preference.
    type: list
    elements: str
    default: []
  script:
    description: One rendered sbatch script for every scale (O(template) renders one per scale and precision).
    type: path
  template:
    description:
      - The role's C(sbatch.j2) on the submit host, rendered per scale and precision with O(job) plus the
        precision and the recipe's flags for it into O(script_dir). One of O(script) and O(template) is required.
    type: path
  job:
    description: The template's C(job) variables (name, partition, log_dir, env, python, program, args, ...).
    type: dict
    default: {}
  script_dir:
    description: Where the per-scale scripts are written (default O(log_dir)).
    type: path
  ladder_max_nodes:
    description:
      - The scale ladder 1, 2, 4, ... up to the pool runs beside the SKU's scales, up to this many nodes;
        C(0) runs the SKU's scales only.
    type: int
    default: 0
  stragglers:
    description: C(z_threshold) and C(min_slowdown_pct) for straggler ranks (SKU C(validation.stragglers)).
    type: dict
    default: {}
  log_dir:
    description: Directory of the job logs (the script's C(--output)).
    type: path
    required: true
  job_name:
    description: Job name prefix.
    type: str
    default: cluster-validation
  partition:
    description: Slurm partition.
    type: str
  timeout_s:
    description: Seconds one job may run before it is cancelled.
    type: int
    default: 3600
  poll_s:
    description: Seconds between job polls.
    type: float
    default: 5.0
  log_format:
    description: Log format of the recipe.
    type: str
    choices: [torchtitan, megatron, smoke]
    default: torchtitan
  targets:
    description: SKU C(validation.mfu_targets) entries (C(recipe), C(precision), C(min_mfu_pct), C(nodes),
      C(convention)).
    type: list
    elements: dict
    required: true
  telemetry_file:
    description: The run's telemetry file (JSON lines or CSV), where no sampler runs in the job.
    type: path
  optional:
    description: Checks the gate does not require (the SKU's C(gates.<profile>.cluster_validation.optional)).
    type: list
    elements: str
    default: []
  nccl_not_run:
    description: Why the NCCL sweep could not run; recorded as C(nccl_sweep_all_reduce) C(not_run) per node.
    type: str
  telemetry_dir:
    description:
      - Where the job's GPU samplers write (the template's C(job.telemetry_dir), one folder per job). Preferred over
        O(telemetry_file); with neither, telemetry is C(not_run).
    type: path
  thermal:
    description: C(z_threshold), C(delta_c), C(max_temp_margin_c) (SKU C(validation.thermal)).
    type: dict
    default: {}
  max_operating_temp_c:
    description: The GPUs' maximum operating temperature in degrees C.
    type: float
  max_attempts:
    description: Attempts before giving up.
    type: int
    default: 3
  model:
    description: Model name or dict for the FLOPs count (default the target's C(recipe) name, e.g. C(llama3_8b)).
    type: raw
  gpu:
    description: Accelerator for the dense peak table.
    type: str
  gpus_per_node:
    description: GPUs per node (Megatron throughput per device).
    type: int
    default: 8
  warmup:
    description: Log steps to skip as warm-up.
    type: int
    default: 1
  cluster:
    description: Cluster name on the certificate.
    type: str
    default: cluster
  sku:
    description: SKU name on the certificate.
    type: str
    default: ""
  dest:
    description: Directory for C(handoff-certificate.json) and C(handoff-certificate.txt).
    type: path
    required: true
  slurm_conf:
    description: C(SLURM_CONF) for the Slurm client commands (the lab's slurm.conf).
    type: path
  addresses:
    description:
      - Address of each node and spare (the inventory's C(ansible_host)), as a dict of node name to address.
      - A node whose name is not a Slurm C(NodeName) is the Slurm node whose C(NodeAddr) or C(NodeHostName)
        is its address (in the demo the twin's C(gpu-r01-u02) is the lab host C(lab1)).
    type: dict
    default: {}
  slurm_names:
    description:
      - Slurm C(NodeName) of nodes and spares whose inventory name is not, a dict of node name to C(NodeName); wins over
        O(addresses).
      - A node of the run that Slurm does not know fails the task naming it; such a spare is left out of the pool.
    type: dict
    default: {}
  run_id:
    description: Run id for the ledger (generated when omitted).
    type: str
extends_documentation_fragment:
  - symphony.cluster.attributes
  - symphony.cluster.ledger
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
"""

EXAMPLES = r"""
- name: Validate the cluster
  symphony.cluster.cluster_validate:
    nodes: "{{ groups['stage_cluster_validation'] }}"
    spares: "{{ groups['spare'] }}"
    script: /shared/cv/cluster_validation.sbatch
    log_dir: /shared/cv/logs
    log_format: torchtitan
    targets: "{{ sku.validation.mfu_targets }}"
    gpu: h100_sxm
    telemetry_file: /shared/cv/telemetry.jsonl
    max_operating_temp_c: 85
    dest: /shared/cv/handoff
  register: validation
"""

RETURN = r"""
status:
  description: C(pass) when every scale met its target with no outlier, else C(fail).
  returned: success
  type: str
reason:
  description: Why, in the field's words.
  returned: success
  type: str
final_nodes:
  description: The node list handed off.
  returned: success
  type: list
  elements: str
evicted:
  description: Nodes drained.
  returned: success
  type: list
  elements: str
replacements:
  description: C(evicted), C(spare), C(attempt) per replacement.
  returned: success
  type: list
  elements: dict
outliers:
  description: Outliers found, per attempt.
  returned: success
  type: list
  elements: dict
actions:
  description: Actions taken, in order.
  returned: success
  type: list
  elements: str
certificate:
  description: The handoff certificate.
  returned: success
  type: dict
paths:
  description: Where the certificate was written (C(json), C(text)).
  returned: success
  type: dict
gates:
  description: C(cluster_validation) gate per node.
  returned: success
  type: dict
slurm_names:
  description: Slurm C(NodeName) of each node and usable spare, by node name.
  returned: success
  type: dict
blocked:
  description: Nodes of the play Slurm has drained or down, with Slurm's reason; their checks are C(blocked).
  returned: success
  type: dict
spares_not_in_slurm:
  description: Spares left out because Slurm does not know them, with the reason.
  returned: success
  type: dict
plan:
  description: Check mode only, the scales, nodes, Slurm names and eligible spares.
  returned: check mode
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.symphony.cluster.plugins.module_utils._core.module import run_module
from ansible_collections.symphony.cluster.plugins.module_utils._validation.tasks_validate import run_validate

ARGUMENT_SPEC = {
    "nodes": {"type": "list", "elements": "str", "required": True},
    "spares": {"type": "list", "elements": "str", "default": []},
    "script": {"type": "path"},
    "template": {"type": "path"},
    "job": {"type": "dict", "default": {}},
    "script_dir": {"type": "path"},
    "ladder_max_nodes": {"type": "int", "default": 0},
    "stragglers": {"type": "dict", "default": {}},
    "log_dir": {"type": "path", "required": True},
    "job_name": {"type": "str", "default": "cluster-validation"},
    "partition": {"type": "str"},
    "timeout_s": {"type": "int", "default": 3600},
    "poll_s": {"type": "float", "default": 5.0},
    "log_format": {"type": "str", "choices": ["torchtitan", "megatron", "smoke"], "default": "torchtitan"},
    "targets": {"type": "list", "elements": "dict", "required": True},
    "telemetry_file": {"type": "path"},
    "telemetry_dir": {"type": "path"},
    "nccl_not_run": {"type": "str"},
    "optional": {"type": "list", "elements": "str", "default": []},
    "thermal": {"type": "dict", "default": {}},
    "max_operating_temp_c": {"type": "float"},
    "max_attempts": {"type": "int", "default": 3},
    "model": {"type": "raw"},
    "gpu": {"type": "str"},
    "gpus_per_node": {"type": "int", "default": 8},
    "warmup": {"type": "int", "default": 1},
    "cluster": {"type": "str", "default": "cluster"},
    "sku": {"type": "str", "default": ""},
    "dest": {"type": "path", "required": True},
    "ledger": {"type": "str"},
    "slurm_conf": {"type": "path"},
    "addresses": {"type": "dict", "default": {}},
    "slurm_names": {"type": "dict", "default": {}},
    "run_id": {"type": "str"},
}


def _run(params, check_mode):
    result = run_validate(params, check_mode=check_mode)
    if result.get("status") == "fail":
        result.update(failed=True, msg="cluster_validation failed: %s" % result["reason"])
    return result


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True,
                           required_one_of=[("script", "template")])
    run_module(module, _run)


if __name__ == "__main__":
    main()
