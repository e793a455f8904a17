#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: fleet_audit_exercise
short_description: Exercise the health checks, inject a fault and time detect, drain, replace, return to service
description:
  - Stage 5 of symphony.cluster (fleet_audit). Each O(action) is one step, recorded as a ledger event.
  - C(inject_lab) appends an XID record in the kernel's C(/dev/kmsg) format to the lab host's own kernel-log source
    O(kernel_log_source) and records C(fault_injected), marked injected.
  - C(inject_sel) appends a C(Critical) entry to the node's emulated BMC SEL (C(POST /_emulator/sel) of the
    symphony emulator, the entry marked injected there too) and records C(fault_injected), marked injected; the
    next audit's SEL check finds it as a new Critical entry. The BMC is the node's in O(bmc_map), else
    O(bmc_address).
  - C(inject_dcgm) runs C(dcgmi test --inject) on the XID field (230) of GPU O(gpu) on a real GPU node and returns
    the event; C(record_injection) records that event (O(injection)) in the ledger on the controller.
  - C(inject_link), on the node (C(delegate_to) it; root), cuts O(link_interface)'s transmit side to
    O(link_rate_mbit) Mbit/s with C(tc) (a C(tbf) root qdisc) and returns the event for C(record_injection); the
    audit's fabric check (C(fleet_audit_fabric), C(iperf3 --bidir), the slower direction counts) finds it.
    C(clear_link), the repair, removes it and returns the event for C(record_clear) (C(fault_cleared)).
  - C(resume) returns a node symphony drained (M(symphony.cluster.node_evict) drains it and promotes a spare) to
    service (C(scontrol update state=RESUME)) only once it passed a re-burn-in after the drain, else the task fails
    saying why; a node symphony did not drain is left alone.
  - C(timings) returns detect, drain, replace and return times from the ledger's timestamps.
version_added: 0.1.0
author:
  - symphony.cluster maintainers (@symphony-cluster)
options:
  action:
    description: The step.
    type: str
    choices: [inject_lab, inject_sel, inject_dcgm, inject_link, clear_link, record_injection, record_clear, resume,
              timings]
    required: true
  node:
    description: The node (its inventory name, which the ledger uses).
    type: str
    required: true
  slurm_node:
    description: The node's Slurm C(NodeName), for C(resume) (default O(node); the demo's lab hosts are C(labN)).
    type: str
  rerun_checks:
    description:
      - For C(resume), the burn-in checks a drained node can run alone (its SKU's node, GPU and power tiers, their
        XID scans, the SEL scan and the cabling check). Each of them that has a result must have one that started
        after the drain, or the node is not resumed. Multi-node fabric checks are left out and may keep older
        results.
      - Not given, every latest burn-in result must have started after the drain.
    type: list
    elements: str
  run_id:
    description: The fleet-audit run the injection belongs to (recorded with the event; a rerun of an interrupted
      run does not inject again).
    type: str
  bmc_map:
    description: With C(inject_sel), the BMC map file (the emulator's C(bmcs.json)).
    type: path
  bmc_address:
    description: With C(inject_sel), the BMC's URL or address when O(node) is not in O(bmc_map).
    type: str
  sel_message:
    description: With C(inject_sel), the entry's message.
    type: str
  sel_severity:
    description: With C(inject_sel), the entry's Redfish severity.
    type: str
    choices: [OK, Warning, Critical]
    default: Critical
  sel_sensor_type:
    description: With C(inject_sel), the entry's sensor type.
    type: str
    default: Critical Interrupt
  validate_certs:
    description: With C(inject_sel), verify the emulator's TLS certificate.
    type: bool
    default: true
  ca_path:
    description: With C(inject_sel), the CA bundle (default the BMC map's C(ca_bundle)).
    type: path
  kernel_log_source:
    description: With C(inject_lab), the lab host's kernel-log file.
    type: str
  xid:
    description: The XID to inject (79, GPU has fallen off the bus, by default).
    type: int
    default: 79
  gpu:
    description: With C(inject_dcgm), the GPU index.
    type: int
    default: 0
  link_interface:
    description: With C(inject_link) and C(clear_link), the node's interface on the fabric under test (the lab
      host's C(eth0)).
    type: str
  link_rate_mbit:
    description: With C(inject_link), the rate the link is cut to, in Mbit/s.
    type: int
    default: 100
  injection:
    description: With C(record_injection) and C(record_clear), the event C(inject_dcgm), C(inject_link) or
      C(clear_link) returned.
    type: dict
  slurm_conf:
    description: The C(slurm.conf) the Slurm commands use (C(SLURM_CONF); the lab's).
    type: path
extends_documentation_fragment:
  - symphony.cluster.ledger
  - symphony.cluster.attributes
  - symphony.cluster.attributes.CONTROLLER
attributes:
  check_mode:
    support: full
  diff_mode:
    support: none
"""

EXAMPLES = r"""
- name: Inject an XID on lab2
  symphony.cluster.fleet_audit_exercise:
    action: inject_lab
    node: lab2
    kernel_log_source: /var/lib/symphony-lab/lab2.kmsg
  delegate_to: localhost

- name: Cut lab2's link to 100 Mbit/s (the audit's fabric check must find it)
  symphony.cluster.fleet_audit_exercise:
    action: inject_link
    node: lab2
    link_interface: eth0
    link_rate_mbit: 100
  register: link

- name: Record it in the ledger on the controller
  symphony.cluster.fleet_audit_exercise:
    action: record_injection
    node: lab2
    injection: "{{ link.event }}"
  delegate_to: localhost

- name: Inject a Critical SEL entry on an emulated BMC
  symphony.cluster.fleet_audit_exercise:
    action: inject_sel
    node: gpu-r01-u26
    bmc_map: build/demo/bmcs.json
  delegate_to: localhost
"""

RETURN = r"""
event:
  description: The C(fault_injected) event data.
  returned: for the inject actions
  type: dict
timings:
  description: C(detect_s), C(drain_s), C(replace_s), C(return_s) (seconds after the injection, None when not reached),
    C(steps) and C(missing).
  returned: for C(timings)
  type: dict
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.symphony.cluster.plugins.module_utils._core.errors import ValidationError
from ansible_collections.symphony.cluster.plugins.module_utils._core.module import run_module
from ansible_collections.symphony.cluster.plugins.module_utils._fleet.bmcmap import load_bmc_map
from ansible_collections.symphony.cluster.plugins.module_utils._fleet.endpoint import resolve_endpoint
from ansible_collections.symphony.cluster.plugins.module_utils._fleet_audit.metrics import PROMETHEUS_IMPORT_ERROR
from ansible_collections.symphony.cluster.plugins.module_utils._fleet_audit import exercise
from ansible_collections.symphony.cluster.plugins.module_utils._fleet_audit.state import exercise_module
from ansible_collections.symphony.cluster.plugins.module_utils._host.process import run
from ansible_collections.symphony.cluster.plugins.module_utils._host.slurm import Slurm

ARGUMENT_SPEC = {
    "ledger": {"type": "str"},
    "action": {"type": "str", "choices": ["inject_lab", "inject_sel", "inject_dcgm", "inject_link", "clear_link",
                                          "record_injection", "record_clear", "resume", "timings"], "required": True},
    "node": {"type": "str", "required": True},
    "slurm_node": {"type": "str"},
    "rerun_checks": {"type": "list", "elements": "str"},
    "run_id": {"type": "str"},
    "bmc_map": {"type": "path"},
    "bmc_address": {"type": "str"},
    "sel_message": {"type": "str"},
    "sel_severity": {"type": "str", "choices": ["OK", "Warning", "Critical"], "default": "Critical"},
    "sel_sensor_type": {"type": "str", "default": "Critical Interrupt"},
    "validate_certs": {"type": "bool", "default": True},
    "ca_path": {"type": "path"},
    "kernel_log_source": {"type": "str"},
    "xid": {"type": "int", "default": 79},
    "gpu": {"type": "int", "default": 0},
    "link_interface": {"type": "str"},
    "link_rate_mbit": {"type": "int", "default": 100},
    "injection": {"type": "dict"},
    "slurm_conf": {"type": "path"},
}


def _run(params, check_mode):
    action = params["action"]
    slurm = Slurm(env=dict(os.environ, SLURM_CONF=params["slurm_conf"])) if params.get("slurm_conf") else None
    if action in ("inject_link", "clear_link"):
        return _link(params, check_mode)
    if action in ("inject_lab", "inject_sel", "inject_dcgm"):
        if check_mode:
            return {"changed": True, "event": {}}
        if action == "inject_lab":
            if not params.get("kernel_log_source"):
                raise ValidationError("inject_lab needs kernel_log_source", where="kernel_log_source")
            data = exercise.inject_lab(params["kernel_log_source"], params["xid"])
        elif action == "inject_sel":
            bmc_map = load_bmc_map(params["bmc_map"]) if params.get("bmc_map") else {}
            endpoint, entry = resolve_endpoint(params["node"], bmc_map, address=params.get("bmc_address"))
            if not endpoint:
                raise ValidationError("inject_sel: no BMC for %s (not in bmc_map, no bmc_address)" % params["node"],
                                      where="bmc_map")
            data = exercise.inject_sel(endpoint["url"], params.get("sel_message") or exercise.DEFAULT_SEL_MESSAGE,
                                       params["sel_severity"], params["sel_sensor_type"],
                                       ca_path=params.get("ca_path") or entry.get("ca_path"),
                                       validate_certs=params["validate_certs"])
        else:
            argv = exercise.dcgm_inject_argv(params["gpu"], params["xid"])
            res = run(argv, 60)
            if res.rc != 0:
                raise ValidationError("dcgmi test --inject exited %d: %s" % (res.rc, res.stderr.strip()[:300]),
                                      where="dcgmi")
            # the node has no ledger: the role records the event on the controller (record_injection)
            return {"changed": True, "event": {"kind": "xid", "xid": params["xid"], "method": "dcgmi_inject",
                                               "argv": argv, "gpu": params["gpu"], "injected": True,
                                               "run_id": params.get("run_id")}}
        return exercise_module(dict(params, action="record_injection", injection=dict(data, run_id=params.get(
            "run_id"))), False)
    return exercise_module(params, check_mode, slurm)


def _link(params, check_mode):
    """inject_link / clear_link on the node itself: the tc commands, then the event the controller records."""
    iface, rate = params.get("link_interface") or "", params["link_rate_mbit"]
    if params["action"] == "inject_link":
        argvs, event = exercise.link_inject_argv(iface, rate), exercise.link_event(iface, rate, params["node"])
    else:
        argvs = exercise.link_clear_argv(iface)
        event = {"kind": "link", "method": "tc", "interface": iface, "cleared": True}
    if check_mode:
        return {"changed": True, "event": event}
    for argv in argvs:
        res = run(argv, 30)
        # clearing what is not there (tc: "Cannot delete qdisc with handle of zero" / "Invalid handle") is done
        if res.rc != 0 and params["action"] == "inject_link":
            raise ValidationError("%s exited %d: %s" % (" ".join(argv), res.rc, res.stderr.strip()[:300]),
                                  where=params["node"])
    return {"changed": True, "event": dict(event, run_id=params.get("run_id"))}


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    run_module(module, _run, requires={"prometheus_client": PROMETHEUS_IMPORT_ERROR})


if __name__ == "__main__":
    main()
