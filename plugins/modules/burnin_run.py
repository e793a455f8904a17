#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: burnin_run
short_description: Run the burn-in tiers (node, GPU, power) of a SKU on a node, fail fast, keep evidence
description:
  - Runs on the node under test. Builds the burn-in plan from the SKU manifest (tiers node, then gpu, then power;
    tests inside a tier by C(cost_s)), merged with the profile's C(burn_in.tests) overrides and O(overrides).
  - The first failing test stops the node; every later test is C(not_run) with C(stopped by fail-fast after <test>).
    A test marked C(flaky) is repeated once before it fails the node and both attempts are kept.
  - Every test has its own C(timeout_s); a tool that runs past it is killed and the test fails.
  - Before and after each tier the kernel log is read; XIDs, MCE and uncorrected AER errors logged during the tier
    become the check C(<tier>_xid_scan).
  - Absent tools, GPUs or InfiniBand make the test C(not_run) with that reason, never C(pass).
  - Raw tool output and parsed results are written under O(evidence_dir)C(/<node>/<run_id>/); the returned
    C(checks) carry those paths and can be given to M(symphony.cluster.gate_record) as they are.
  - The multi-node fabric tier is not run here (roles/burn_in/tasks/fabric.yml runs it).
version_added: 0.1.0
author:
  - symphony.cluster maintainers (@symphony-cluster)
options:
  node:
    description: The node's name (inventory hostname, as in the twin); used in evidence paths and results.
    type: str
    required: true
  manifest:
    description: The SKU manifest (the parsed C(skus/<sku>.yml), e.g. the inventory's C(symphony_expected)).
    type: dict
    required: true
  profile:
    description: Profile whose C(inband_bom) and C(burn_in.tests) overrides apply (C(lab) on lab hosts).
    type: str
    default: production
  tiers:
    description: Run only these tiers.
    type: list
    elements: str
    choices: [node, gpu, power, fabric]
  tests:
    description: Run only these tests (names from the manifest).
    type: list
    elements: str
  overrides:
    description: "Per-test overrides, test name -> C({params, thresholds, timeout_s, cost_s, flaky}), merged last."
    type: dict
  calibration:
    description:
      - "The machine's measured baseline (C(build/lab/calibration.json) on the lab), which thresholds of the form
        C({of: <figure>, fraction: f}) or C({of: <figure>, multiple: m}) resolve against (the lab profile's floors)."
      - Without it such thresholds are not applied; the returned C(plan) shows the thresholds each test used.
    type: dict
  evidence_dir:
    description: Directory on the node for raw output and parsed results.
    type: path
    default: /var/tmp/symphony/burn_in
  run_id:
    description: Run id; a new sortable C(burnin-...) id when omitted.
    type: str
  stopped_after:
    description: Carry fail-fast in from an earlier call (the name of the test that failed); everything is C(not_run).
    type: str
  fail_fast:
    description: Stop the node's later tests at the first failure.
    type: bool
    default: true
extends_documentation_fragment:
  - symphony.cluster.attributes
attributes:
  check_mode:
    support: full
    details:
      - In check mode the plan is returned and nothing runs.
  diff_mode:
    support: none
"""

EXAMPLES = r"""
- name: Burn in a node with its SKU's tiers
  symphony.cluster.burnin_run:
    node: "{{ inventory_hostname }}"
    manifest: "{{ symphony_expected }}"
    profile: "{{ symphony_profile | default('production') }}"
  register: burn_in_run

- name: A lab host with a storage floor it cannot meet (fails the node tier; GPU and power become not_run)
  symphony.cluster.burnin_run:
    node: lab2
    manifest: "{{ lookup('ansible.builtin.file', 'skus/hgx_h100_supermicro.yml') | from_yaml }}"
    profile: lab
    overrides:
      fio_randread_4k:
        thresholds: {min_iops: 1000000000}
"""

RETURN = r"""
run_id:
  description: The run id used in evidence paths.
  returned: always
  type: str
  sample: burnin-20261129T153501-1a2b3c4d
plan:
  description: The tests in run order with their tier, kind, timeout_s, cost_s, flaky, params and thresholds.
  returned: always
  type: list
  elements: dict
checks:
  description: One result per test and per tier XID scan, in the shape M(symphony.cluster.gate_record) takes.
  returned: always
  type: list
  elements: dict
  sample: [{"name": "fio_randread_4k", "status": "fail", "reason": "storage below the SKU thresholds ...",
            "evidence": {"fio_stdout": "/var/tmp/symphony/burn_in/lab2/burnin-.../node/fio_randread_4k/attempt-1/fio.stdout.txt"}}]
optional:
  description: Checks the SKU's gate does not require for this profile (C(gates.<profile>.burn_in.optional)).
  returned: always
  type: list
  elements: str
declared:
  description:
    - Every check the SKU declares for burn-in in this profile (all its tests and the per-tier XID scans), whether
      this run ran it or not. Give it to M(symphony.cluster.gate_record) as O(symphony.cluster.gate_record#module:declared)
      so a run of some tests (O(tests), O(tiers)) gates on the latest result of every declared check.
  returned: always
  type: list
  elements: str
fabric_tests:
  description: The planned fabric-tier tests (name, kind, params, thresholds, timeout_s) for M(symphony.cluster.fabric_test)'s C(test).
  returned: always
  type: list
  elements: dict
stopped_after:
  description: The test whose failure stopped the node, or null.
  returned: always
  type: str
tiers:
  description: Status per tier (pass, fail, not_run, partial).
  returned: always
  type: dict
  sample: {"node": "fail", "gpu": "not_run", "power": "not_run"}
evidence_dir:
  description: The evidence directory on the node.
  returned: always
  type: str
evidence_files:
  description: Every evidence file written (absolute paths on the node).
  returned: always
  type: list
  elements: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.symphony.cluster.plugins.module_utils._core.module import run_module
from ansible_collections.symphony.cluster.plugins.module_utils._burnin import runner as _burnin

ARGUMENT_SPEC = {
    "node": {"type": "str", "required": True},
    "manifest": {"type": "dict", "required": True},
    "profile": {"type": "str", "default": "production"},
    "tiers": {"type": "list", "elements": "str", "choices": ["node", "gpu", "power", "fabric"]},
    "tests": {"type": "list", "elements": "str"},
    "overrides": {"type": "dict"},
    "calibration": {"type": "dict"},
    "evidence_dir": {"type": "path", "default": "/var/tmp/symphony/burn_in"},
    "run_id": {"type": "str"},
    "stopped_after": {"type": "str"},
    "fail_fast": {"type": "bool", "default": True},
}


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    run_module(module, _burnin.burnin_run)


if __name__ == "__main__":
    main()
