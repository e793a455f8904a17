#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: redfish_inventory_info
short_description: Read one BMC's Redfish tree into the normalised symphony.cluster inventory
description:
  - Logs in to one BMC (session deleted at the end), reads Systems, Chassis, Managers and UpdateService and
    returns one vendor-neutral inventory; components (CPUs, DIMMs, GPUs, NICs, DPUs, NVMe and other drives,
    PSUs, fans, NVSwitches) with model, serial, firmware, health, PCIe link width/generation, memory, ports and
    speed; firmware inventory; SEL entries; sensor readings (temperatures, fans, power, coolant, leak detectors);
    BIOS attributes and settings object; out-of-band capabilities (power actions, virtual media, update methods).
  - GPUs are found as Processors, or as PCIe devices (NVIDIA 0x10de / AMD 0x1002) when the BMC lists them there.
  - Parts of the tree that cannot be read are returned in the C(incomplete) list of RV(inventory) with the reason;
    they are never reported as empty.
  - Per host. The pre-deployment stage reads whole fleets in one batched task instead.
version_added: 0.1.0
author:
  - symphony.cluster maintainers (@symphony-cluster)
requirements:
  - sushy
options:
  system_id:
    description: Read only this member of C(/redfish/v1/Systems) (default all; a DGX has two).
    type: str
  sections:
    description: The parts to read; leaving some out saves requests.
    type: list
    elements: str
    choices: [systems, chassis, managers, firmware, sel, readings, bios, capabilities]
    default: [systems, chassis, managers, firmware, sel, readings, bios, capabilities]
extends_documentation_fragment:
  - symphony.cluster.redfish
  - symphony.cluster.redfish.SINGLE_BMC
  - symphony.cluster.attributes
  - symphony.cluster.attributes.CONTROLLER
  - symphony.cluster.attributes.INFO_MODULE
"""

EXAMPLES = r"""
- name: Inventory one BMC
  symphony.cluster.redfish_inventory_info:
    bmc_url: "https://{{ bmc_address }}"
    username: "{{ bmc_username }}"
    password: "{{ bmc_password }}"
    ca_path: /etc/symphony/bmc-ca.pem
    registry_dir: /usr/share/symphony/redfish-registries
  delegate_to: localhost
  register: inv

- name: How many GPUs are present
  ansible.builtin.debug:
    msg: "{{ inv.inventory.components | selectattr('kind', 'eq', 'gpu') | rejectattr('state', 'eq', 'Absent') | list | length }}"
"""

RETURN = r"""
inventory:
  description:
    - The normalised inventory (C(NodeInventory)); keys C(service), C(systems), C(chassis), C(managers),
      C(components), C(firmware), C(sel), C(readings), C(bios), C(capabilities), C(incomplete), C(requests).
    - Units are in the field names (C(memory_gib), C(capacity_gb), C(speed_gbps)); C(null) means "not reported".
  returned: success
  type: dict
  sample: {"systems": [{"id": "DGX", "model": "DGXH100", "serial": "1662923610124"}],
           "components": [{"kind": "gpu", "id": "GPU_SXM_1", "model": "H100 80GB HBM3",
                           "firmware_version": "96.00.89.00.01", "pcie_width": 16, "pcie_gen": 5}],
           "incomplete": [], "requests": 148}
health:
  description: Worst C(Status.Health) over systems, chassis and components (C(OK), C(Warning), C(Critical) or null).
  returned: success
  type: str
  sample: OK
requests:
  description: HTTP requests this run sent to the BMC, login and logout included.
  returned: success
  type: int
  sample: 150
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.symphony.cluster.plugins.module_utils._core.module import run_module
from ansible_collections.symphony.cluster.plugins.module_utils._redfish import client as _redfish
from ansible_collections.symphony.cluster.plugins.module_utils._redfish.reader import (
    ALL_SECTIONS,
    read_inventory,
)


def argument_spec():
    spec = _redfish.redfish_argument_spec()
    spec["system_id"] = {"type": "str"}
    spec["sections"] = {"type": "list", "elements": "str", "choices": list(ALL_SECTIONS),
                        "default": list(ALL_SECTIONS)}
    return spec


def _run(params, check_mode):
    client = _redfish.client_from_params(params)
    with client:
        inv = read_inventory(client, system_id=params["system_id"], sections=params["sections"])
    return {"changed": False, "inventory": inv.to_dict(), "health": inv.health_rollup(),
            "requests": client.requests, "warnings": client.warnings}


def main():
    module = AnsibleModule(argument_spec=argument_spec(), supports_check_mode=True)
    run_module(module, _run, requires={"sushy": _redfish.SUSHY_IMPORT_ERROR})


if __name__ == "__main__":
    main()
