#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: nccl_sweep
short_description: NCCL/RCCL message-size sweeps at power-of-two node counts, checked for level and shape
description:
  - Runs a nccl-tests (or rccl-tests) collective from O(min_bytes) (8 B) to the SKU's maximum (default 8 GiB) by
    powers of two, at node counts in powers of two up to the number of nodes, through C(srun) or C(mpirun)
    (one node may use C(ssh)).
  - Each curve must rise monotonically within O(tolerance) (dips are flagged with their size, such as the
    classic one at 128 KiB) and reach the SKU's busbw floor (C(validation.nccl_busbw_floors)); C(#wrong) or
    out-of-bounds values are data corruption and fail the run. Failing sizes are listed.
  - The NCCL environment (the SKU's golden recipe, C(nccl_env)) is exported to the run and recorded with every
    result.
  - Records a C(nccl_sweep_<collective>) check result for every node (C(pass), C(fail), or C(not_run) when the
    tool, the GPUs or the scheduler are absent, with the reason).
  - O(results_from) analyses outputs of runs already made instead of launching.
version_added: 0.1.0
author:
  - symphony.cluster maintainers (@symphony-cluster)
options:
  nodes:
    description: The nodes of the cluster under test; the first N form the N-node run.
    type: list
    elements: str
    required: true
  collective:
    description: The collective (C(all_reduce), C(all_gather), C(reduce_scatter), C(alltoall), C(sendrecv), ...).
    type: str
    default: all_reduce
  sku_manifest:
    description: SKU manifest supplying C(nccl_env), C(validation.nccl_max_bytes) and C(validation.nccl_busbw_floors).
    type: path
  floor_gbps:
    description: busbw floor in GB/s for every node count (overrides the SKU's floors).
    type: float
  max_bytes:
    description: Largest message size in bytes (default the SKU's C(nccl_max_bytes), else 8 GiB).
    type: int
  min_bytes:
    description: Smallest message size in bytes.
    type: int
    default: 8
  node_counts:
    description: Node counts to sweep (default powers of two up to the number of nodes).
    type: list
    elements: int
  tolerance:
    description: A point this fraction below the best smaller size (or its neighbours' geometric mean) is a dip.
    type: float
    default: 0.1
  nccl_env:
    description: NCCL variables added to (and overriding) the SKU's recipe.
    type: dict
    default: {}
  gpus_per_node:
    description: Ranks (GPUs) per node.
    type: int
    default: 8
  binary_dir:
    description: Directory of the nccl-tests/rccl-tests binaries on the nodes (default found on PATH).
    type: str
  timeout_s:
    description: Seconds one run (one node count) may take.
    type: int
    default: 1800
  results_from:
    description: Outputs (text or C(-J) JSON) of runs already made, analysed instead of launching.
    type: list
    elements: dict
    default: []
    suboptions:
      nodes:
        description: Node count of that run.
        type: int
        required: true
      path:
        description: File with the run's output (on the controller).
        type: path
        required: true
  stage:
    description: Stage the results are recorded under.
    type: str
    default: cluster_validation
    choices: [burn_in, cluster_validation, fleet_audit]
  run_id:
    description: Run id to record under; a new one when omitted.
    type: str
  record:
    description: Whether to append the results to the ledger.
    type: bool
    default: true
  launcher:
    default: srun
extends_documentation_fragment:
  - symphony.cluster.launcher
  - symphony.cluster.ledger
  - symphony.cluster.attributes
  - symphony.cluster.attributes.CONTROLLER
attributes:
  check_mode:
    support: full
    details:
      - In check mode nothing runs or is recorded; the planned node counts, sizes, floors and environment are returned.
  diff_mode:
    support: none
"""

EXAMPLES = r"""
- name: all_reduce sweep across the cluster with the SKU's recipe and floors
  symphony.cluster.nccl_sweep:
    nodes: "{{ groups['stage_cluster_validation'] }}"
    sku_manifest: "{{ symphony_sku_dir }}/hgx_h100_supermicro.yml"
    collective: all_reduce
    launcher: srun
    partition: validation
  run_once: true
  delegate_to: localhost

- name: Check a sweep that was already run
  symphony.cluster.nccl_sweep:
    nodes: [gpu-r01-u02]
    floor_gbps: 200
    results_from:
      - nodes: 1
        path: /var/lib/symphony/evidence/all_reduce_perf-1node.txt
  run_once: true
  delegate_to: localhost
"""

RETURN = r"""
run_id:
  description: Run id the results were recorded under.
  returned: always
  type: str
check:
  description: The check name recorded (C(nccl_sweep_<collective>)).
  returned: always
  type: str
  sample: nccl_sweep_all_reduce
status:
  description: pass, fail or not_run.
  returned: when not in check mode
  type: str
reason:
  description: Per node count, what passed or failed (dips with their sizes, plateau below floor, corruption).
  returned: when not in check mode
  type: str
runs:
  description: Per node count, status, reason, plateau busbw (GB/s), failing sizes and dips.
  returned: when not in check mode
  type: list
  elements: dict
  sample: [{"nodes": 1, "status": "pass", "plateau_gbps": 234.37, "failing_sizes": [], "dips": []}]
nccl_env:
  description: The NCCL environment the runs used (recorded with every result).
  returned: always
  type: dict
node_counts:
  description: Node counts swept.
  returned: always
  type: list
  elements: int
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.symphony.cluster.plugins.module_utils._core.module import run_module
from ansible_collections.symphony.cluster.plugins.module_utils._fabric import sweep as _sweep
from ansible_collections.symphony.cluster.plugins.module_utils._host import launchers as _launchers

ARGUMENT_SPEC = {
    "nodes": {"type": "list", "elements": "str", "required": True},
    "collective": {"type": "str", "default": "all_reduce"},
    "sku_manifest": {"type": "path"},
    "floor_gbps": {"type": "float"},
    "max_bytes": {"type": "int"},
    "min_bytes": {"type": "int", "default": 8},
    "node_counts": {"type": "list", "elements": "int"},
    "tolerance": {"type": "float", "default": 0.1},
    "nccl_env": {"type": "dict", "default": {}},
    "gpus_per_node": {"type": "int", "default": 8},
    "binary_dir": {"type": "str"},
    **_launchers.launcher_argument_spec(default="srun"),
    "timeout_s": {"type": "int", "default": 1800},
    "results_from": {"type": "list", "elements": "dict", "default": [],
                     "options": {"nodes": {"type": "int", "required": True},
                                 "path": {"type": "path", "required": True}}},
    "stage": {"type": "str", "default": "cluster_validation",
              "choices": ["burn_in", "cluster_validation", "fleet_audit"]},
    "run_id": {"type": "str"},
    "record": {"type": "bool", "default": True},
    "ledger": {"type": "str"},
}


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    run_module(module, _sweep.nccl_sweep_module)


if __name__ == "__main__":
    main()
