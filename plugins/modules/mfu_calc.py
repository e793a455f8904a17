#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

DOCUMENTATION = r"""
module: mfu_calc
short_description: Model FLOPs Utilisation of a training run with a named FLOPs convention
description:
  - Computes MFU = tokens/s per device x FLOPs per token / dense peak FLOP/s, with the FLOPs convention named
    (C(palm) 6N + 12LHQT, C(torchtitan) 6(N - N_emb) + 12LHQT, C(korthikanti), C(narayanan) (HFU-like, it counts
    full recompute), C(megatron) per-GEMM).
  - The throughput comes from O(tokens_per_s_per_device) or from a run's log (O(log) with O(log_format)); the peak
    from O(peak_tflops), or the dense peak table by O(gpu) and O(precision), or for the smoke workload the CPU GEMM
    peak it measured itself.
  - When the recipe prints its own MFU (torchtitan), both are returned and a disagreement beyond 1 point is flagged.
version_added: 0.1.0
author:
  - symphony.cluster maintainers (@symphony-cluster)
options:
  model:
    description:
      - A known model (C(llama3_8b), C(llama3_70b), C(llama3_405b)) or a dict with C(layers), C(hidden), C(seq_len),
        C(params), C(embedding_params), C(heads), C(head_dim), C(kv_heads), C(ffn_hidden), C(vocab), C(swiglu).
      - Not needed for the smoke workload's log (it prints its own shape).
    type: raw
  seq_len:
    description: Sequence length override in tokens.
    type: int
  convention:
    description: FLOPs convention.
    type: str
    default: torchtitan
  tokens_per_s_per_device:
    description: Steady-state throughput in tokens/s per device.
    type: float
  log:
    description: Path of the run's log to read the throughput (and the recipe's own MFU) from.
    type: path
  log_format:
    description: Format of O(log).
    type: str
    choices: [torchtitan, megatron, smoke]
    default: torchtitan
  warmup:
    description: Log steps to skip as warm-up.
    type: int
    default: 1
  devices:
    description: Number of devices of the run (Megatron logs give a global throughput).
    type: int
  gpu:
    description: Accelerator for the dense peak table (C(h100_sxm), C(H100 80GB HBM3), C(b200), C(mi300x)...).
    type: str
  precision:
    description: Training precision for the dense peak (C(bf16), C(fp8), C(tf32)...).
    type: str
    default: bf16
  peak_tflops:
    description: Dense peak TFLOP/s per device, overriding the table.
    type: float
  reported_mfu_pct:
    description: The recipe's own MFU in percent, compared with ours.
    type: float
extends_documentation_fragment:
  - symphony.cluster.attributes
  - symphony.cluster.attributes.INFO_MODULE
"""

EXAMPLES = r"""
- name: MFU of a torchtitan Llama 3 8B run on H100, torchtitan convention
  symphony.cluster.mfu_calc:
    model: llama3_8b
    convention: torchtitan
    log: /shared/logs/cv-llama3-8b-1234.out
    log_format: torchtitan
    gpu: h100_sxm
    precision: bf16
  register: mfu

- name: A published row, PaLM convention
  symphony.cluster.mfu_calc:
    model: {layers: 118, hidden: 18432, heads: 48, head_dim: 256, seq_len: 2048, params: 540350000000}
    convention: palm
    tokens_per_s_per_device: 38.79
    peak_tflops: 275
"""

RETURN = r"""
mfu:
  description: The MFU result with its convention, FLOPs per token, achieved and peak TFLOP/s, and the comparison
    with the recipe's own MFU (C(disagrees) true beyond 1 point).
  returned: success
  type: dict
  sample: {"convention": "torchtitan", "mfu_pct": 35.12, "flops_per_token": 57910000000.0, "peak_tflops": 989.4,
           "reported_mfu_pct": 35.2, "disagreement_pt": -0.08, "disagrees": false}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.symphony.cluster.plugins.module_utils._core.module import run_module
from ansible_collections.symphony.cluster.plugins.module_utils._validation.tasks_mfu import run_mfu

ARGUMENT_SPEC = {
    "model": {"type": "raw"},
    "seq_len": {"type": "int"},
    "convention": {"type": "str", "default": "torchtitan"},
    "tokens_per_s_per_device": {"type": "float", "no_log": False},
    "log": {"type": "path"},
    "log_format": {"type": "str", "choices": ["torchtitan", "megatron", "smoke"], "default": "torchtitan"},
    "warmup": {"type": "int", "default": 1},
    "devices": {"type": "int"},
    "gpu": {"type": "str"},
    "precision": {"type": "str", "default": "bf16"},
    "peak_tflops": {"type": "float"},
    "reported_mfu_pct": {"type": "float"},
}


def _run(params, check_mode):
    return {"changed": False, "mfu": run_mfu(params)}


def main():
    module = AnsibleModule(argument_spec=ARGUMENT_SPEC, supports_check_mode=True,
                           required_one_of=[("tokens_per_s_per_device", "log")])
    run_module(module, _run)


if __name__ == "__main__":
    main()
