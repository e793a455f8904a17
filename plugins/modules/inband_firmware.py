#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: inband_firmware
short_description: Update GPU, NIC/DPU and NVMe firmware in-band with the vendor tools, verifying by a fresh query
description:
  - Runs on the node (in its ephemeral runtime) for the in-band steps of the provisioning plan that
    M(symphony.cluster.firmware_reconcile) returned for it, in order (GPU, NIC/DPU, NVMe).
  - C(nvfwupd) for NVIDIA GPU/HGX firmware, C(mlxfwmanager) or C(flint) for ConnectX and BlueField, C(nvme-cli)
    (C(fw-download), C(fw-commit), C(fw-log)) for NVMe drives. Each step queries the running versions with the tool,
    flashes the image after checking its sha256 against the manifest, and queries again; it passes only when the
    fresh query reads the target, whatever the update command's exit code said.
  - A step whose tool is absent is C(not_run) with the reason; a step after a failed one is C(blocked).
version_added: 0.1.0
author:
  - symphony.cluster maintainers (@symphony-cluster)
options:
  steps:
    description: The in-band steps (C(hosts.<host>.inband) of M(symphony.cluster.firmware_reconcile)), each with
      C(check), C(component), C(kind), C(method), C(target), C(accepted), C(image) (C(uri), C(sha256)) and C(match).
    type: list
    elements: dict
    required: true
  image_dir:
    description: Directory on the node holding the images (file name = basename of C(image.uri)).
    type: path
  nvfwupd_target:
    description: C(ip), C(user), C(password) of the BMC (host interface) nvfwupd talks to; the password is never
      returned or logged.
    type: dict
  timeout_s:
    description: Seconds one tool invocation may take.
    type: float
    default: 1800
extends_documentation_fragment:
  - symphony.cluster.attributes
attributes:
  check_mode:
    support: full
    details:
      - Queries the running versions with the vendor tools' read commands and returns, per step, what a run
        would flash (C(plan)); flashes nothing.
  diff_mode:
    support: none
"""

EXAMPLES = r"""
- name: In-band firmware in the runtime
  symphony.cluster.inband_firmware:
    steps: "{{ oob.hosts[inventory_hostname].inband | default([]) }}"
    image_dir: /run/symphony/images
  register: inband
"""

RETURN = r"""
results:
  description:
    - Per check (C(firmware:<id>)) its C(status), C(reason), C(observed), C(expected), C(remediation).
    - In check mode a step with something to flash is C(not_run) with C(plan), per device its running version
      (C(from)) and the target (C(to)); a step already at an accepted version is C(pass).
  returned: always
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.symphony.cluster.plugins.module_utils._core.module import run_module
from ansible_collections.symphony.cluster.plugins.module_utils._provision.inband_fw import plan_inband, run_inband

ARGUMENT_SPEC = {
    "steps": {"type": "list", "elements": "dict", "required": True},
    "image_dir": {"type": "path"},
    "nvfwupd_target": {"type": "dict", "no_log": True},
    "timeout_s": {"type": "float", "default": 1800},
}


def _run(params, check_mode):
    if check_mode:
        results = plan_inband(params["steps"], params["nvfwupd_target"], params["timeout_s"])
        return {"changed": any(r.get("plan") for r in results.values()), "results": results}
    results = run_inband(params["steps"], params["image_dir"], params["nvfwupd_target"], params["timeout_s"])
    return {"changed": any(r.get("evidence", {}).get("sha256") for r in results.values()), "results": results}


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    run_module(module, _run)


if __name__ == "__main__":
    main()
