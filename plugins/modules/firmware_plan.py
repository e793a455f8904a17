#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: firmware_plan
short_description: Read each node's BMC and return its provisioning plan (changes nothing)
description:
  - Stage 2 of symphony.cluster (provisioning), the plan only. For each node it reads the Redfish FirmwareInventory
    and BIOS attributes and compares them with the SKU manifest, in the manifest's strict order (BMC, BIOS, other
    out-of-band parts, the BIOS settings, then GPU, NIC/DPU and NVMe in-band, then the OS tunings).
  - Each step names the component, observed and target version, method, image and activation, and an action
    C(skip), C(update), C(refuse_downgrade), C(missing), C(follows) or C(no_image). FirmwareInventory members the
    manifest does not know are listed per host.
  - Sends no write request to any BMC and writes no ledger row; safe in C(--check).
version_added: 0.1.0
author:
  - symphony.cluster maintainers (@symphony-cluster)
options:
  nodes:
    description:
      - Twin node dicts (the C(symphony_twin) hostvar the twin inventory plugin sets), each with C(hostname), C(sku)
        and C(bmc_address); C(inband_address) is where the runtime answers SSH. Mutually exclusive with O(twin).
    type: list
    elements: dict
  twin:
    description: A twin file to read the nodes from instead of O(nodes).
    type: path
  hosts:
    description: With O(twin), only these hostnames (default every node of the twin).
    type: list
    elements: str
  sku_dir:
    description: Directory of SKU manifests (C(skus/) of the collection).
    type: path
    required: true
  bmc_map:
    description: JSON map of per-node BMC C(url), C(username), C(password), C(ca_bundle) (the emulator writes one).
    type: path
  username:
    description: BMC user name for nodes not in O(bmc_map).
    type: str
  password:
    description: BMC password (vault or AWX credential). Never logged, returned or written to the ledger.
    type: str
  auth:
    description: Redfish session (always deleted), Basic, or session with Basic fallback.
    type: str
    choices: [session, basic, auto]
    default: auto
  validate_certs:
    description: Verify the BMCs' TLS certificates; turning it off is reported as a warning.
    type: bool
    default: true
  ca_path:
    description: CA bundle to verify BMC certificates with.
    type: path
  connect_timeout:
    description: Seconds to wait for a TCP/TLS connection to a BMC, per request.
    type: float
    default: 5
  read_timeout:
    description: Seconds to wait for a BMC's answer, per request.
    type: float
    default: 30
  retries:
    description: Re-sends after connection errors, timeouts, 408, 429 and 5xx, with backoff and C(Retry-After).
    type: int
    default: 2
  max_concurrency:
    description: Redfish requests in flight to one BMC at once.
    type: int
    default: 4
  workers:
    description: Threads of the controller-side pool (BMCs handled at once).
    type: int
    default: 64
  per_bmc:
    description: Nodes handled at once behind one BMC endpoint.
    type: int
    default: 1
  allow_downgrade:
    description: Allow a target older than the running version (a manifest component's C(allow_downgrade) also does).
    type: bool
    default: false
  registry_dir:
    description: Directory of Redfish message registries to resolve C(MessageId)s in BMC errors and task messages.
    type: path
extends_documentation_fragment:
  - symphony.cluster.attributes
  - symphony.cluster.attributes.CONTROLLER
  - symphony.cluster.attributes.INFO_MODULE
"""

EXAMPLES = r"""
- name: Print the plan of the play's hosts
  symphony.cluster.firmware_plan:
    nodes: "{{ ansible_play_hosts | map('extract', hostvars, 'symphony_twin') | list }}"
    sku_dir: "{{ playbook_dir }}/../skus"
    username: "{{ bmc_username }}"
    password: "{{ bmc_password }}"
  run_once: true
  delegate_to: localhost
  register: plan
"""

RETURN = r"""
hosts:
  description: Per host the plan (C(steps), C(unknown), C(missing), C(summary)), the diff and the in-band steps.
  returned: always
  type: dict
plan_lines:
  description: One line per step that is not C(skip), for every host.
  returned: always
  type: list
  elements: str
diff:
  description: Per host the firmware versions and BIOS attributes before and after the plan.
  returned: always
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.symphony.cluster.plugins.module_utils._errors import SymphonyError
from ansible_collections.symphony.cluster.plugins.module_utils._provision import module_run

ARGUMENT_SPEC = {
    "nodes": {"type": "list", "elements": "dict"},
    "twin": {"type": "path"},
    "hosts": {"type": "list", "elements": "str"},
    "sku_dir": {"type": "path", "required": True},
    "bmc_map": {"type": "path"},
    "username": {"type": "str"},
    "password": {"type": "str", "no_log": True},
    "auth": {"type": "str", "choices": ["session", "basic", "auto"], "default": "auto"},
    "validate_certs": {"type": "bool", "default": True},
    "ca_path": {"type": "path"},
    "connect_timeout": {"type": "float", "default": 5},
    "read_timeout": {"type": "float", "default": 30},
    "retries": {"type": "int", "default": 2},
    "max_concurrency": {"type": "int", "default": 4},
    "workers": {"type": "int", "default": 64},
    "per_bmc": {"type": "int", "default": 1},
    "allow_downgrade": {"type": "bool", "default": False},
    "registry_dir": {"type": "path"},
}


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True,
                           mutually_exclusive=[("nodes", "twin")], required_one_of=[("nodes", "twin")])
    try:
        result = module_run(module.params, "plan", check_mode=True)
    except SymphonyError as exc:
        module.fail_json(**exc.to_dict())
    for warning in result.pop("warnings", []):
        module.warn(warning)
    result["changed"] = False
    module.exit_json(**result)


if __name__ == "__main__":
    main()
