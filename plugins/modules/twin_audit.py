#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: twin_audit
short_description: Pre-deployment audit of many BMCs against the digital twin and SKU, batched
description:
  - Stage 1 of symphony.cluster (pre_deployment), out-of-band only. For each node it captures the BMC's DHCP lease by
    MAC and emits the reservation of the planned address, reaches the BMC, logs in, reads the Redfish inventory and
    compares it with the twin and the SKU manifest in 20 checks with declared dependencies (lease_captured,
    address_reserved, bmc_reachable, service_root, login, inventory_read, chassis_serial, system_model, cpus,
    memory, gpus, gpu_pcie_links, nics, nvme, psus, fans_thermal, health_rollup, sel_clean, firmware_inventory,
    power_control).
  - Runs once on the controller for the whole batch of hosts with a bounded worker pool and a per-BMC cap, and
    returns each host its own gate; one BMC that times out, answers 5xx or bad JSON, refuses the password or has no
    free session ends its own node C(fail) or C(blocked) with the reason and leaves the others alone.
  - Results and gates are appended to the ledger; a dispatch list (CSV and JSON) names site, rack, U, hostname,
    serial, check, reason and remediation for every node whose gate did not pass.
version_added: 0.1.0
author:
  - symphony.cluster maintainers (@symphony-cluster)
options:
  nodes:
    description:
      - Twin node dicts to audit (the C(symphony_twin) hostvar the twin inventory plugin sets), each with
        C(hostname), C(sku), C(serial), C(bmc_mac), C(bmc_address) and for the dispatch list C(site), C(rack), C(u).
      - Mutually exclusive with O(twin).
  max_concurrency:
    description:
      - Redfish requests in flight to one BMC at once.
      - Used while the pool has more O(workers) than nodes; a batch with at least as many nodes as
        O(workers) reads each BMC one request at a time (parallel requests cost controller CPU the batch needs).
  workers:
    description:
      - Threads of the controller-side pool (BMCs audited at once).
      - 128 audits 1,000 BMCs at 100 ms per request in well under a minute on two cores (C(make bench)).
    default: 128
  lease_file:
    description: DHCP lease file to find each BMC's address by MAC (checks lease_captured, address_reserved).
    type: path
  lease_format:
    description: Format of O(lease_file).
    type: str
    choices: [isc, kea, dnsmasq]
    default: isc
  sel_since:
    description: SEL cutoff, C(30d)/C(12h)/C(90m), an ISO 8601 time, or C(all).
    type: str
    default: 30d
  dispatch_dir:
    description: Where the dispatch list C(dispatch-<run_id>.csv/.json) and C(dispatch-latest.*) are written.
    type: path
  profile:
    description: Gate profile of the SKU manifests (C(gates.<profile>.pre_deployment.optional)).
    type: str
    default: production
  optional:
    description: Further checks the gate does not require (for example C(lease_captured) where no lease file exists).
    type: list
    elements: str
    default: []
  run_id:
    description: Run id to record under (default a new sortable id).
    type: str
  return_details:
    description: Also return every check's expected/observed values per host (large for big batches).
    type: bool
    default: false
extends_documentation_fragment:
  - symphony.cluster.redfish
  - symphony.cluster.fleet
  - symphony.cluster.fleet.TWIN_BATCH
  - symphony.cluster.ledger
  - symphony.cluster.attributes
  - symphony.cluster.attributes.CONTROLLER
attributes:
  check_mode:
    support: full
    details:
      - Observes and judges every node and returns the gates; writes neither the ledger nor the dispatch list.
  diff_mode:
    support: none
"""

EXAMPLES = r"""
- name: Audit the play's hosts in one controller-side task
  symphony.cluster.twin_audit:
    nodes: "{{ ansible_play_hosts | map('extract', hostvars, 'symphony_twin') | list }}"
    sku_dir: "{{ playbook_dir }}/../skus"
    username: "{{ bmc_username }}"
    password: "{{ bmc_password }}"
    lease_file: /var/lib/dhcp/dhcpd.leases
    lease_format: isc
    ledger: /var/lib/symphony/ledger.sqlite
    dispatch_dir: /var/lib/symphony/dispatch
  run_once: true
  delegate_to: localhost
  register: audit

- name: Rehearse against the emulated fleet
  symphony.cluster.twin_audit:
    twin: inventories/demo/demo.twin.yml
    sku_dir: skus
    bmc_map: build/emulator/bmcs.json
    optional: [lease_captured, address_reserved]
"""

RETURN = r"""
run_id:
  description: The run id the results and gates were recorded under.
  returned: always
  type: str
  sample: pre-20261129T153501-1a2b3c4d
hosts:
  description: Per host its gate (C(pass), C(fail), C(blocked), C(not_run)), the gate's reason, the failing checks,
    every check's status/reason/remediation, the BMC endpoint used and the Redfish requests made.
  returned: always
  type: dict
  sample: {"gpu-r01-u02": {"gate": "fail", "reason": "gpus: expected 8 × H100 80GB HBM3, found 7; slot GPU5 empty",
           "failing": ["gpus"], "requests": 195}}
summary:
  description: Number of nodes per gate status.
  returned: always
  type: dict
  sample: {"pass": 17, "fail": 1}
failed_hosts:
  description: Hosts whose gate did not pass.
  returned: always
  type: list
  elements: str
dispatch:
  description: Dispatch list rows (C(items)), their count and the files written.
  returned: always
  type: dict
reservations:
  description: Per host the ISC C(host) stanza and Kea reservation for its planned BMC address.
  returned: when lease_file is set
  type: dict
requests:
  description: Redfish requests made in total.
  returned: always
  type: int
wall_s:
  description: Seconds the whole batch took.
  returned: always
  type: float
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.symphony.cluster.plugins.module_utils._core.module import run_module
from ansible_collections.symphony.cluster.plugins.module_utils._fleet.batch import TWIN_BATCH_MODULE_KWARGS, fleet_argument_spec
from ansible_collections.symphony.cluster.plugins.module_utils._predeploy.stage import module_twin_audit

ARGUMENT_SPEC = fleet_argument_spec(twin_batch=True, workers=128, options={
    "lease_file": {"type": "path"},
    "lease_format": {"type": "str", "choices": ["isc", "kea", "dnsmasq"], "default": "isc"},
    "sel_since": {"type": "str", "default": "30d"},
    "dispatch_dir": {"type": "path"},
    "profile": {"type": "str", "default": "production"},
    "optional": {"type": "list", "elements": "str", "default": []},
    "run_id": {"type": "str"},
    "return_details": {"type": "bool", "default": False},
    "ledger": {"type": "str"},
})


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True, **TWIN_BATCH_MODULE_KWARGS)
    run_module(module, module_twin_audit)


if __name__ == "__main__":
    main()
