#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: training_manifest
short_description: Render a PyTorchJob or JobSet manifest for the pretraining run on Kubernetes
description:
  - Renders a Kubeflow C(kubeflow.org/v1) PyTorchJob or a C(jobset.x-k8s.io/v1alpha2) JobSet running torchrun
    on O(nodes) pods, checked in the unit tests against the CRDs' published OpenAPI schemas; apply it with
    C(kubernetes.core.k8s).
  - Pure rendering; nothing is sent to a cluster.
version_added: 0.1.0
author:
  - symphony.cluster maintainers (@symphony-cluster)
options:
  kind:
    description: Manifest kind.
    type: str
    choices: [pytorchjob, jobset]
    default: pytorchjob
  name:
    description: Object name (DNS label).
    type: str
    required: true
  namespace:
    description: Namespace.
    type: str
    default: default
  image:
    description: Container image with the recipe (torchtitan).
    type: str
    required: true
  nodes:
    description: Number of nodes (pods).
    type: int
    required: true
  gpus_per_node:
    description: GPUs per pod (and torchrun processes per node).
    type: int
    default: 8
  gpu_resource:
    description: Extended resource name of the GPUs.
    type: str
    default: nvidia.com/gpu
  program:
    description: Training script, or module with O(module=true) (C(torchtitan.train)).
    type: str
    required: true
  module:
    description: Run O(program) as a Python module (C(torchrun --module)).
    type: bool
    default: false
  args:
    description: Arguments of the program.
    type: list
    elements: str
    default: []
  env:
    description: Environment (the SKU's NCCL environment).
    type: dict
    default: {}
  node_selector:
    description: Pod node selector.
    type: dict
    default: {}
  rdzv_port:
    description: Rendezvous port (JobSet).
    type: int
    default: 29500
extends_documentation_fragment:
  - symphony.cluster.attributes
  - symphony.cluster.attributes.INFO_MODULE
"""

EXAMPLES = r"""
- name: Render the PyTorchJob
  symphony.cluster.training_manifest:
    kind: pytorchjob
    name: cv-llama3-8b
    image: registry.example/torchtitan:2026.11
    nodes: 4
    module: true
    program: torchtitan.train
    args: [--job.config_file, /configs/llama3_8b.toml]
  register: manifest
"""

RETURN = r"""
manifest:
  description: The rendered manifest.
  returned: success
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.symphony.cluster.plugins.module_utils._core.module import run_module
from ansible_collections.symphony.cluster.plugins.module_utils._validation.k8s_render import render

ARGUMENT_SPEC = {
    "kind": {"type": "str", "choices": ["pytorchjob", "jobset"], "default": "pytorchjob"},
    "name": {"type": "str", "required": True},
    "namespace": {"type": "str", "default": "default"},
    "image": {"type": "str", "required": True},
    "nodes": {"type": "int", "required": True},
    "gpus_per_node": {"type": "int", "default": 8},
    "gpu_resource": {"type": "str", "default": "nvidia.com/gpu"},
    "program": {"type": "str", "required": True},
    "module": {"type": "bool", "default": False},
    "args": {"type": "list", "elements": "str", "default": []},
    "env": {"type": "dict", "default": {}},
    "node_selector": {"type": "dict", "default": {}},
    "rdzv_port": {"type": "int", "default": 29500},
}


def _run(params, check_mode):
    job = {k: params[k] for k in ARGUMENT_SPEC if k != "kind"}
    return {"changed": False, "manifest": render(params["kind"], job)}


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True)
    run_module(module, _run)


if __name__ == "__main__":
    main()
