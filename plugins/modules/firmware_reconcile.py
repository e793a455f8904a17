#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: firmware_reconcile
short_description: Drive many nodes to their SKU manifest out-of-band, then verify; batched on the controller
description:
  - Stage 2 of symphony.cluster (provisioning). Phase C(out_of_band) reads each BMC, builds the plan
    (see M(symphony.cluster.firmware_plan)) and applies it in the manifest's strict order. Images are checked
    against the manifest sha256 before upload; SimpleUpdate sends C(TransferProtocol) when the service lists allowed
    values; multipart pushes go to C(MultipartHttpPushUri); each task is followed to its end (C(Completed) with
    C(Critical) health is a failure with the task's messages); a BMC that reboots itself is polled until it answers
    with the new version within O(bmc_reboot_timeout_s). BIOS attributes are PATCHed to the settings object with
    C(If-Match) and the apply time the service supports. When anything needs a reset or in-band work the node boots
    once into the SKU's ephemeral RAM-only runtime (VirtualMedia insert or PXE, one-time boot override, reset, wait).
  - Phase C(verify) ejects the runtime media, records the in-band and tuning results the role collected on the
    nodes, re-reads every version and BIOS attribute over Redfish and compares them with the manifest (a mismatch
    fails with both strings), and computes and records the gate.
  - Every check result is appended to the ledger as soon as it is known, so a killed run can be rerun; finished
    steps read as done from the BMC and are not redone, and an image staged by an earlier run is not uploaded again.
  - A node already at its manifest gets no write request at all.
version_added: 0.1.0
author:
  - symphony.cluster maintainers (@symphony-cluster)
options:
  phase:
    description: C(out_of_band) applies the plan; C(verify) re-reads, records the in-band results and gates.
    type: str
    choices: [out_of_band, verify]
    default: out_of_band
  run_id:
    description: Run id to record under; give the C(run_id) the C(out_of_band) phase returned to the C(verify) phase.
    type: str
  allow_downgrade:
    description: Allow a target older than the running version (a manifest component's C(allow_downgrade) also does).
    type: bool
    default: false
  image_dir:
    description: Directory holding the manifest images (file name = basename of C(image.uri)); each is checked
      against the manifest sha256 before it is uploaded.
    type: path
  image_base_url:
    description: Where the BMCs fetch SimpleUpdate images from (default the manifest C(image.uri)).
    type: str
  task_timeout_s:
    description: Seconds to follow one Redfish update task.
    type: float
    default: 1800
  runtime_timeout_s:
    description: Seconds to wait for the ephemeral runtime (default the SKU's C(runtime.boot_timeout_s)).
    type: float
  runtime_image_url:
    description: Runtime image URL to insert (default the SKU's C(runtime.image_uri)).
    type: str
  runtime_config_url:
    description:
      - URL of the runtime's boot-time configuration medium (an ISO labelled C(SYMCFG) holding the controller's
        C(authorized_keys) and C(callback), made by C(images/runtime/config-medium.sh)), inserted into the BMC's
        VirtualMedia C(USBStick) device beside the runtime CD and ejected with it. The key is never in the image.
    type: str
  runtime_probe:
    description:
      - How to tell the runtime is up. C(proof) reaches it in-band over the SSH options and proves it is the SKU's
        pinned RAM-only runtime (the C(runtime_proof) check - RAM root, no disk mounted, build id and kernel command
        line as the SKU pins, the disk marker absent). C(ssh) (port 22 of the twin's in-band address answers; a node
        booted from its old disk answers too), C(emulator) (the Redfish fleet emulator's boot state) and C(none)
        cannot prove the boot, so C(runtime_proof) is then C(not_run) and not required.
    type: str
    choices: [proof, ssh, emulator, none]
    default: ssh
  runtime_boot:
    description: C(auto) boots the runtime only when a reset or in-band work needs it; C(always) boots it every run.
    type: str
    choices: [auto, always]
    default: auto
  ssh_config:
    description: OpenSSH client configuration file (C(ssh -F)) with which C(runtime_proof) reaches the runtime.
    type: path
  ssh_hosts:
    description: SSH destination of the runtime per node when the node name does not resolve.
    type: dict
    default: {}
  ssh_identity_file:
    description: Private key file (C(ssh -i)) whose public key the runtime's config medium carries.
    type: path
  ssh_user:
    description: Remote user on the runtime (C(ssh -l)).
    type: str
  ssh_port:
    description: Remote SSH port of the runtime.
    type: int
  console_logs:
    description: Per host, the file its serial console is captured to (a console server's log, the emulator's VM
      console); its last lines are the evidence of a runtime that did not answer.
    type: dict
  poll_s:
    description: Seconds between polls of tasks, rebooting BMCs and the runtime.
    type: float
    default: 5
  os_install:
    description:
      - The last provisioning step. Phase C(verify), once C(verify) passed, writes the SKU's C(os) image to its
        C(target_disk) from the proven runtime (the image checked against C(os.sha256) on the controller, a URL
        fetched once into O(image_dir) with TLS verified, and streamed over SSH), reads it back against
        C(os.raw_sha256), boots the disk once and verifies the OS in-band (checks C(os_install) and C(os_boot)).
        A node already on the pinned OS is not rewritten; phase C(out_of_band) boots the runtime for a node that is
        not. Overwrites the target disk.
    type: bool
    default: false
  os_image_url:
    description: A local path or URL of the OS image instead of the SKU's C(os.image_uri) (still checked against its sha256).
    type: str
  os_install_timeout_s:
    description: Seconds the OS image write and read-back may take.
    type: float
    default: 1800
  inband_results:
    description: Phase C(verify) only. Per host, per check (C(firmware:<id>)) the result dict the
      M(symphony.cluster.inband_firmware) module returned on that node.
    type: dict
  tunings_results:
    description: Phase C(verify) only. Per host the C(tunings) result (C(status), C(reason)) the role collected.
    type: dict
  optional:
    description: Checks the gate does not require (for example C(tunings) where the in-band phase does not run).
    type: list
    elements: str
    default: []
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
      - Reads each BMC and returns the plan and the diff; sends no write request and writes no ledger row.
  diff_mode:
    support: full
    details:
      - Firmware versions and BIOS attributes before and after, per host.
"""

EXAMPLES = r"""
- name: Apply the plan out-of-band
  symphony.cluster.firmware_reconcile:
    phase: out_of_band
    nodes: "{{ ansible_play_hosts | map('extract', hostvars, 'symphony_twin') | list }}"
    sku_dir: "{{ playbook_dir }}/../skus"
    username: "{{ bmc_username }}"
    password: "{{ bmc_password }}"
    image_dir: /srv/firmware
  run_once: true
  delegate_to: localhost
  register: oob

- name: Verify and gate
  symphony.cluster.firmware_reconcile:
    phase: verify
    run_id: "{{ oob.run_id }}"
    nodes: "{{ ansible_play_hosts | map('extract', hostvars, 'symphony_twin') | list }}"
    sku_dir: "{{ playbook_dir }}/../skus"
    username: "{{ bmc_username }}"
    password: "{{ bmc_password }}"
  run_once: true
  delegate_to: localhost
"""

RETURN = r"""
run_id:
  description: The run id the results and gates were recorded under.
  returned: always
  type: str
hosts:
  description: Per host the checks (status, reason), the plan, the in-band steps still to do, the writes sent to its
    BMC and, after C(verify), its gate.
  returned: always
  type: dict
plan_lines:
  description: One line per step that is not C(skip).
  returned: always
  type: list
  elements: str
summary:
  description: Number of nodes per gate status (phase C(verify)).
  returned: always
  type: dict
failed_hosts:
  description: Hosts whose gate did not pass or whose run ended in an error.
  returned: always
  type: list
  elements: str
writes:
  description: Write requests (POST, PATCH) sent to the BMCs in total.
  returned: always
  type: int
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.symphony.cluster.plugins.module_utils._core.module import run_module
from ansible_collections.symphony.cluster.plugins.module_utils._host import launchers as _launchers
from ansible_collections.symphony.cluster.plugins.module_utils._fleet.batch import TWIN_BATCH_MODULE_KWARGS, fleet_argument_spec
from ansible_collections.symphony.cluster.plugins.module_utils._provision.stage import module_run

_RUNTIME_SSH = ("ssh_config", "ssh_hosts", "ssh_identity_file", "ssh_user", "ssh_port")
ARGUMENT_SPEC = fleet_argument_spec(twin_batch=True, options={
    "phase": {"type": "str", "choices": ["out_of_band", "verify"], "default": "out_of_band"},
    "run_id": {"type": "str"},
    "allow_downgrade": {"type": "bool", "default": False},
    "image_dir": {"type": "path"},
    "image_base_url": {"type": "str"},
    "task_timeout_s": {"type": "float", "default": 1800},
    "runtime_timeout_s": {"type": "float"},
    "runtime_image_url": {"type": "str"},
    "runtime_config_url": {"type": "str"},
    "runtime_probe": {"type": "str", "choices": ["proof", "ssh", "emulator", "none"], "default": "ssh"},
    "runtime_boot": {"type": "str", "choices": ["auto", "always"], "default": "auto"},
    "poll_s": {"type": "float", "default": 5},
    "inband_results": {"type": "dict"},
    "tunings_results": {"type": "dict"},
    "os_install": {"type": "bool", "default": False},
    "os_image_url": {"type": "str"},
    "os_install_timeout_s": {"type": "float", "default": 1800},
    "optional": {"type": "list", "elements": "str", "default": []},
    "ledger": {"type": "str"},
    "console_logs": {"type": "dict"},
    # how runtime_proof reaches the runtime (OpenSSH; connect_timeout is the shared one)
    **{k: v for k, v in _launchers.launcher_argument_spec(default="ssh").items() if k in _RUNTIME_SSH},
})


def _run(params, check_mode):
    return module_run(params, params["phase"], check_mode=check_mode)


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True, **TWIN_BATCH_MODULE_KWARGS)
    run_module(module, _run)


if __name__ == "__main__":
    main()
