#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: fabric_test
short_description: Run a pairwise fabric schedule over nodes and localise bad interfaces and bad links
description:
  - Tests node pairs in rounds of disjoint pairs with one transport (iperf3, perftest C(ib_write_bw) per HCA,
    nccl-tests or rccl-tests), launched over SSH or the cluster's scheduler (C(srun), C(mpirun)).
  - Schedules are C(adaptive) (a random perfect matching, then every suspect re-paired with known-good nodes
    until the evidence separates the faults), C(round_robin) (circle method, N-1 rounds covering every pair) and
    C(tri_ring) (triples tested A->B, B->C, A->C).
  - A pair passes when its measurement reaches O(floor), or without a floor O(min_fraction) of the upper quartile
    of all pairs measured. A node whose pairs fail with known-good partners has a bad interface; a pair that fails
    while both nodes pass with others is a bad link (keyed by the twin's cabling C(<leaf>:<port>~<leaf>:<port>));
    what the evidence cannot separate is reported as ambiguous with its candidates and never passed.
  - Records one C(fabric_interface) check result per node at O(stage), and one C(fabric_link) ledger event per
    endpoint node of every bad or ambiguous link.
  - A pair that could not be measured (unreachable host, tool missing, timeout) is no evidence; a node with
    nothing but such pairs is C(not_run) with the reason.
version_added: 0.1.0
author:
  - symphony.cluster maintainers (@symphony-cluster)
options:
  nodes:
    description: The nodes to test (inventory hostnames; at least two for a verdict).
    type: list
    elements: str
    required: true
  addresses:
    description: Address of each node on the fabric under test (what the client connects to); default its name.
    type: dict
    default: {}
  transport:
    description: What measures a pair.
    type: str
    default: iperf3
    choices: [iperf3, ib_write_bw, nccl-tests, rccl-tests]
  test:
    description:
      - One fabric test of the SKU's burn-in declaration (C(name), C(kind), C(params), C(thresholds)), as
        C(burnin_run) returns it in C(fabric_tests). Its kind gives the tool (C(ib_write_bw_pairwise),
        C(nccl_all_reduce), C(nccl_all_gather), C(rccl_all_reduce)), its thresholds the floor, its params the
        size, the node count (C(nodes=1) runs on each node alone over all its GPUs) and, where a profile sets
        one, C(transport); the results are recorded under the test's name instead of C(fabric_interface).
      - C(max_p99_lat_us) is judged by C(ib_write_lat) per HCA after C(ib_write_bw); C(params.hcas) and, with
        C(params.gpudirect), C(params.cuda_devices) (the GPU beside each HCA) name what is measured. A declared
        test without its floor never passes (C(not_run)).
      - O(floor) judges a test only where the profile replaced its kind's tool (the lab's iperf3); otherwise the
        SKU's floor does.
    type: dict
  schedule:
    description: Which schedule to run.
    type: str
    default: adaptive
    choices: [adaptive, round_robin, tri_ring]
  seed:
    description: Seed of the random matching (reproducible schedules).
    type: int
  max_rounds:
    description: Most rounds the adaptive schedule may use; what is unresolved then is reported ambiguous.
    type: int
    default: 8
  workers:
    description: Pairs measured at once within a round.
    type: int
    default: 8
  floor:
    description:
      - Absolute pass threshold in the transport's unit (Gb/s for iperf3 and ib_write_bw, busbw GB/s for
        nccl-tests), typically from the SKU's fabric tier thresholds.
    type: float
  min_fraction:
    description: Without O(floor), a pair passes at this fraction of the upper quartile of all pairs.
    type: float
    default: 0.8
  duration_s:
    description: Seconds per iperf3 or ib_write_bw measurement.
    type: int
    default: 1
  port:
    description: Base TCP port of the transport's server (pairs of one round use consecutive ports).
    type: int
  streams:
    description: Parallel iperf3 streams (C(-P)).
    type: int
    default: 1
  hcas:
    description: HCAs tested by C(ib_write_bw) (C(-d)), one measurement each; the pair's value is the slowest.
    type: list
    elements: str
    default: [mlx5_0]
  message_bytes:
    description: Message size for C(ib_write_bw) (C(-s)) and nccl-tests (C(-b)/C(-e)), bytes.
    type: int
  gpus_per_node:
    description: Ranks per node for nccl-tests/rccl-tests.
    type: int
    default: 8
  binary:
    description: Path or name of the transport's executable on the nodes.
    type: str
  nccl_env:
    description: NCCL environment (the SKU's golden recipe) exported to nccl-tests/rccl-tests and recorded.
    type: dict
    default: {}
  timeout_s:
    description: Seconds one pair measurement may take before it is an error.
    type: int
    default: 60
  twin:
    description: Twin file whose cabling keys the links (C(<leaf>:<port>) of each node on O(rail)).
    type: path
  rail:
    description: Which rail's cabling names the links.
    type: int
    default: 0
  stage:
    description: Stage the results are recorded under.
    type: str
    default: burn_in
    choices: [burn_in, cluster_validation, fleet_audit]
  run_id:
    description: Run id to record under; a new one when omitted.
    type: str
  injected:
    description:
      - Node -> what the fleet audit's exercise injected there (a degraded link). A failing node's reason ends
        C([injected] <what>) and its observed value carries C(injected=true); an empty text marks nothing.
    type: dict
    default: {}
  record:
    description: Whether to append the verdicts to the ledger.
    type: bool
    default: true
  launcher:
    default: ssh
extends_documentation_fragment:
  - symphony.cluster.launcher
  - symphony.cluster.ledger
  - symphony.cluster.attributes
  - symphony.cluster.attributes.CONTROLLER
attributes:
  check_mode:
    support: full
    details:
      - In check mode nothing is measured or recorded; the schedule's plan is returned (the first round only for
        C(adaptive), whose later rounds depend on the results).
  diff_mode:
    support: none
"""

EXAMPLES = r"""
- name: Fabric tier over the burn-in batch, iperf3 over SSH (the lab)
  symphony.cluster.fabric_test:
    nodes: "{{ ansible_play_hosts }}"
    addresses: "{{ dict(ansible_play_hosts | zip(ansible_play_hosts | map('extract', hostvars, 'ansible_host'))) }}"
    transport: iperf3
    launcher: ssh
    ssh_config: build/lab/ssh_config
    schedule: round_robin
  run_once: true
  delegate_to: localhost

- name: ib_write_bw per HCA with a floor from the SKU, launched with srun
  symphony.cluster.fabric_test:
    nodes: "{{ groups['stage_burn_in'] }}"
    transport: ib_write_bw
    launcher: srun
    partition: burnin
    hcas: [mlx5_0, mlx5_1, mlx5_2, mlx5_3, mlx5_4, mlx5_5, mlx5_6, mlx5_7]
    floor: 360
    twin: inventories/site1/twin.yml
  run_once: true
  delegate_to: localhost
"""

RETURN = r"""
run_id:
  description: Run id the verdicts were recorded under.
  returned: always
  type: str
rounds:
  description: Rounds the schedule used.
  returned: when not in check mode
  type: int
  sample: 2
plan:
  description: The pairs of each planned round.
  returned: in check mode
  type: list
  elements: list
interfaces:
  description: Per node, the C(fabric_interface) status (pass, fail, not_run), reason, remediation, observed values and evidence (its pair measurements).
  returned: when not in check mode
  type: dict
  sample: {"lab3": {"status": "fail", "reason": "bad fabric interface: fails with known-good partners: ..."}}
bad_interfaces:
  description: Nodes convicted of a bad interface.
  returned: when not in check mode
  type: list
  elements: str
bad_links:
  description: Links convicted (C(<leaf>:<port>~<leaf>:<port>), or node names without cabling).
  returned: when not in check mode
  type: list
  elements: str
links:
  description: Bad and ambiguous links with what they join.
  returned: when not in check mode
  type: dict
ambiguous:
  description: Failures the evidence cannot attribute, each with its candidate components.
  returned: when not in check mode
  type: list
  elements: dict
threshold:
  description: The pass threshold used (C(threshold), C(reference), C(basis) floor or relative).
  returned: when not in check mode
  type: dict
tests:
  description: Every pair measurement (nodes, status ok/fail/error, value, unit, round, evidence).
  returned: when not in check mode
  type: list
  elements: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.symphony.cluster.plugins.module_utils._core.module import run_module
from ansible_collections.symphony.cluster.plugins.module_utils._fabric import rounds as _rounds
from ansible_collections.symphony.cluster.plugins.module_utils._fabric import transports as _transports
from ansible_collections.symphony.cluster.plugins.module_utils._host import launchers as _launchers

ARGUMENT_SPEC = {
    "nodes": {"type": "list", "elements": "str", "required": True},
    "addresses": {"type": "dict", "default": {}},
    "transport": {"type": "str", "default": "iperf3", "choices": list(_transports.TRANSPORTS)},
    **_launchers.launcher_argument_spec(default="ssh"),
    "test": {"type": "dict"},
    "schedule": {"type": "str", "default": "adaptive", "choices": ["adaptive", "round_robin", "tri_ring"]},
    "seed": {"type": "int"},
    "max_rounds": {"type": "int", "default": 8},
    "workers": {"type": "int", "default": 8},
    "floor": {"type": "float"},
    "min_fraction": {"type": "float", "default": 0.8},
    "duration_s": {"type": "int", "default": 1},
    "port": {"type": "int"},
    "streams": {"type": "int", "default": 1},
    "hcas": {"type": "list", "elements": "str", "default": ["mlx5_0"]},
    "message_bytes": {"type": "int"},
    "gpus_per_node": {"type": "int", "default": 8},
    "binary": {"type": "str"},
    "nccl_env": {"type": "dict", "default": {}},
    "timeout_s": {"type": "int", "default": 60},
    "twin": {"type": "path"},
    "rail": {"type": "int", "default": 0},
    "stage": {"type": "str", "default": "burn_in", "choices": ["burn_in", "cluster_validation", "fleet_audit"]},
    "run_id": {"type": "str"},
    "record": {"type": "bool", "default": True},
    "injected": {"type": "dict", "default": {}},
    "ledger": {"type": "str"},
}


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    run_module(module, _rounds.fabric_test_module)


if __name__ == "__main__":
    main()
