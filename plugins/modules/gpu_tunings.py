#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: gpu_tunings
short_description: Set the SKU's GPU persistence mode and power limit with nvidia-smi and check the kernel command line
description:
  - Runs on the node (its ephemeral runtime or OS) for the GPU part of the SKU's C(tunings) that Ansible has no
    module for; sysctl values and the NCCL environment file use C(ansible.posix.sysctl) and C(ansible.builtin.copy).
  - Queries every GPU (C(nvidia-smi --query-gpu=index,persistence_mode,power.limit,power.min_limit,power.max_limit)),
    runs C(nvidia-smi -i <index> -pm 1) and C(nvidia-smi -i <index> -pl <W>) only where a GPU differs, and queries
    again; a setting counts only when the fresh query reads it, whatever the command's exit code said.
  - Checks that the running kernel command line (C(/proc/cmdline)) has every token of the SKU's C(kernel_cmdline);
    the runtime image's boot entry sets them, so a missing token fails with the tokens named.
  - The task fails when a part fails (C(status=fail), with C(reason) and C(parts)). Without C(nvidia-smi) the GPU
    part is C(not_run) with the reason and the task does not fail; check C(status). A power limit outside a GPU's
    C(power.min_limit)..C(power.max_limit) fails the task before anything is changed.
version_added: 0.1.0
author:
  - symphony.cluster maintainers (@symphony-cluster)
options:
  persistence_mode:
    description: Persistence mode every GPU should have; omitted leaves it alone.
    type: bool
  power_limit_w:
    description: Power limit in W every GPU should have (the SKU's C(tunings.gpu_power_limit_w)); omitted leaves it alone.
    type: float
  kernel_cmdline:
    description: Tokens the running kernel command line must contain (the SKU's C(tunings.kernel_cmdline)).
    type: list
    elements: str
    default: []
  cmdline_path:
    description: Where the running kernel command line is read.
    type: path
    default: /proc/cmdline
  timeout_s:
    description: Seconds one C(nvidia-smi) call may take.
    type: float
    default: 60
extends_documentation_fragment:
  - symphony.cluster.attributes
attributes:
  check_mode:
    support: full
    details:
      - Queries the GPUs and returns the C(nvidia-smi) calls it would make; changes nothing.
  diff_mode:
    support: full
    details:
      - Per GPU, persistence mode and power limit before and after.
"""

EXAMPLES = r"""
- name: GPU persistence mode and power limit of the SKU
  symphony.cluster.gpu_tunings:
    persistence_mode: "{{ symphony_expected.tunings.persistence_mode | default(omit) }}"
    power_limit_w: "{{ symphony_expected.tunings.gpu_power_limit_w | default(omit) }}"
    kernel_cmdline: "{{ symphony_expected.tunings.kernel_cmdline | default([]) }}"
  become: true
  register: gpu_tunings
"""

RETURN = r"""
status:
  description: C(pass), C(fail) or C(not_run) (no nvidia-smi; check mode with changes to make), for the provisioning gate.
  returned: always
  type: str
reason:
  description: What was found and done, in words (each part's reason, joined).
  returned: always
  type: str
remediation:
  description: What to do next when a part failed.
  returned: always
  type: str
parts:
  description: C(gpu) and C(kernel_cmdline), each with C(status), C(reason) and C(observed) (per GPU index, W).
  returned: always
  type: dict
changes:
  description: The C(nvidia-smi) calls, each with C(gpu), C(setting), C(before), C(after), C(argv).
  returned: always
  type: list
  elements: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.symphony.cluster.plugins.module_utils._core.module import run_module
from ansible_collections.symphony.cluster.plugins.module_utils._provision.gpu_tunings import run_tunings

ARGUMENT_SPEC = {
    "persistence_mode": {"type": "bool"},
    "power_limit_w": {"type": "float"},
    "kernel_cmdline": {"type": "list", "elements": "str", "default": []},
    "cmdline_path": {"type": "path", "default": "/proc/cmdline"},
    "timeout_s": {"type": "float", "default": 60},
}


def _diff(changes):
    before, after = {}, {}
    for change in changes:
        key = "GPU%d.%s" % (change["gpu"], change["setting"])
        before[key], after[key] = change["before"], change["after"]
    return {"before": before, "after": after}


def _run(params, check_mode):
    out = run_tunings(params["persistence_mode"], params["power_limit_w"], params["kernel_cmdline"],
                      params["cmdline_path"], check_mode, params["timeout_s"])
    result = dict(out, changed=bool(out["changes"]), diff=_diff(out["changes"]))
    if out["status"] == "fail":
        # a setting the fresh query does not read, or a missing kernel parameter: the task fails (a caller that
        # only looks at the task colour must not see a pass)
        result.update(failed=True, msg=out["reason"])
    return result


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    run_module(module, _run)


if __name__ == "__main__":
    main()
