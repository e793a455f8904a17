#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: telemetry_outliers
short_description: Per-GPU temperature, power and SM clock outliers against peers
description:
  - Reads per-GPU telemetry sampled through a run from a file (JSON lines or CSV, including
    C(nvidia-smi --query-gpu) CSV; the lab's source), a DCGM exporter scrape, or this host's GPUs (NVML,
    nvidia-smi, rocm-smi), and flags GPUs whose modified z-score is above O(z_threshold) (Iglewicz and Hoaglin
    1993), whose temperature is O(delta_c) or more above the peer median, or whose hottest sample is within
    O(max_temp_margin_c) of O(max_operating_temp_c).
  - A source that cannot be read here (no GPU, exporter unreachable) returns C(status=not_run) with the reason.
version_added: 0.1.0
author:
  - symphony.cluster maintainers (@symphony-cluster)
options:
  source:
    description: Where the samples come from.
    type: str
    choices: [file, dcgm, local]
    default: file
  path:
    description: Telemetry file for O(source=file).
    type: path
  node:
    description: Node name for samples that carry none (a per-host CSV, a scrape without C(Hostname) label).
    type: str
  url:
    description: DCGM exporter metrics URL for O(source=dcgm), e.g. C(http://gpu-017:9400/metrics).
    type: str
  validate_certs:
    description: Verify TLS certificates of an HTTPS O(url).
    type: bool
    default: true
  samples:
    description: Number of scrapes or local samples.
    type: int
    default: 10
  interval_s:
    description: Seconds between scrapes or local samples.
    type: float
    default: 1.0
  nodes:
    description: Only compare the GPUs of these nodes (the run's nodes).
    type: list
    elements: str
  z_threshold:
    description: Modified z-score above which a GPU is an outlier.
    type: float
    default: 3.5
  delta_c:
    description: Degrees C above the peer median that make a GPU an outlier.
    type: float
    default: 10.0
  max_temp_margin_c:
    description: Degrees C below the maximum operating temperature that count as too hot.
    type: float
    default: 3.0
  max_operating_temp_c:
    description: The device's maximum operating temperature in degrees C (SKU C(bom.gpus.max_operating_temp_c)).
    type: float
extends_documentation_fragment:
  - symphony.cluster.attributes
  - symphony.cluster.attributes.INFO_MODULE
"""

EXAMPLES = r"""
- name: Outliers of the run's telemetry file
  symphony.cluster.telemetry_outliers:
    source: file
    path: /shared/telemetry/cv-1234.jsonl
    nodes: "{{ groups['stage_cluster_validation'] }}"
    max_operating_temp_c: 85
  register: outliers
"""

RETURN = r"""
status:
  description: C(pass) (no outlier), C(fail) (outliers found) or C(not_run) (source unreadable here).
  returned: always
  type: str
reason:
  description: What was found, in the field's words.
  returned: always
  type: str
outliers:
  description: One entry per outlier GPU and metric with C(node), C(gpu), C(metric), C(value), C(peer_median),
    C(delta), C(z), C(rules) and C(reason).
  returned: always
  type: list
  elements: dict
nodes:
  description: Nodes with at least one outlier GPU.
  returned: always
  type: list
  elements: str
gpus:
  description: GPUs compared.
  returned: always
  type: int
samples:
  description: Samples per GPU.
  returned: always
  type: int
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.symphony.cluster.plugins.module_utils._core.module import run_module
from ansible_collections.symphony.cluster.plugins.module_utils._validation.tasks_outliers import run_outliers

ARGUMENT_SPEC = {
    "source": {"type": "str", "choices": ["file", "dcgm", "local"], "default": "file"},
    "path": {"type": "path"},
    "node": {"type": "str"},
    "url": {"type": "str"},
    "validate_certs": {"type": "bool", "default": True},
    "samples": {"type": "int", "default": 10},
    "interval_s": {"type": "float", "default": 1.0},
    "nodes": {"type": "list", "elements": "str"},
    "z_threshold": {"type": "float", "default": 3.5},
    "delta_c": {"type": "float", "default": 10.0},
    "max_temp_margin_c": {"type": "float", "default": 3.0},
    "max_operating_temp_c": {"type": "float"},
}


def _run(params, check_mode):
    return dict(run_outliers(params), changed=False)


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    run_module(module, _run)


if __name__ == "__main__":
    main()
