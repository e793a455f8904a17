# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Model FLOPs Utilisation (MFU) with named FLOPs conventions and dense peak tables.

MFU = achieved model FLOP/s / (number of accelerators x dense peak FLOP/s at the
training precision).  The FLOPs count per token depends on the convention; the
choice moves results by 5-15 % (shared/reference/numbers.md, section 0), so every
result carries the convention's name.

Conventions (numbers.md section 1.1, rows F1-F6):

* ``palm`` (F1, Chowdhery et al. 2022, arXiv 2204.02311 section 4.1 + App. B):
  ``F_tok = 6N + 12*L*H*Q*T``; ``H*Q`` is the attention width (heads x head
  dimension), NOT d_model (PaLM 540B: 48 x 256 = 12 288 while d_model = 18 432).
  llm-foundry (F7) is this formula with ``H*Q = d_model``.
* ``torchtitan`` (F6, ``torchtitan/models/utils.py::get_dense_model_nparams_and_flops``):
  ``F_tok = 6*(N - N_emb) + 12*L*H*Q*T``.
* ``korthikanti`` (F4, arXiv 2205.05198, model FLOPs, no recompute):
  ``F_iter = 72*B*s*l*h^2*(1 + s/(6h) + V/(12*l*h))``.
* ``narayanan`` (F3, SC21 eq. 3): ``96*B*s*l*h^2*(1 + s/(6h) + V/(16*l*h))``.
  It counts full activation recompute, so it is an HFU-like number, not MFU.
* ``megatron`` (F5, Megatron-LM ``training.py::num_floating_point_operations``):
  per-GEMM count, GQA-aware, causal attention halved, SwiGLU MLP, logits.

Units: FLOPs per token (float), throughput in tokens/s, peaks in TFLOP/s,
MFU in percent.
"""

from __future__ import annotations

from dataclasses import dataclass, asdict

from .._core.errors import ValidationError

# Dense peak TFLOP/s per accelerator (without 2:4 sparsity), numbers.md section 2.
# NVIDIA datasheets print the sparse figure for TF32/FP16/BF16/FP8; dense is half.
PEAK_TFLOPS = {
    "a100": {"bf16": 312.0, "fp16": 312.0, "tf32": 156.0, "fp64": 19.5},
    "h100_sxm": {"bf16": 989.4, "fp16": 989.4, "fp8": 1978.9, "tf32": 494.5, "fp64": 67.0},
    "h100_pcie": {"bf16": 756.0, "fp16": 756.0, "fp8": 1513.0, "tf32": 378.0, "fp64": 51.0},
    "h100_nvl": {"bf16": 835.0, "fp16": 835.0, "fp8": 1671.0},
    "h200_sxm": {"bf16": 989.4, "fp16": 989.4, "fp8": 1978.9, "tf32": 494.5, "fp64": 67.0},
    "b200": {"bf16": 2250.0, "fp16": 2250.0, "fp8": 4500.0, "tf32": 1100.0},
    "gb200": {"bf16": 2500.0, "fp16": 2500.0, "fp8": 5000.0, "tf32": 1250.0},
    "mi300x": {"bf16": 1307.4, "fp16": 1307.4, "fp8": 2614.9, "tf32": 653.7, "fp64": 163.4},
    "mi325x": {"bf16": 1307.4, "fp16": 1307.4, "fp8": 2614.9, "tf32": 653.7, "fp64": 163.4},
    "mi355x": {"bf16": 2516.6, "fp16": 2516.6, "fp8": 5033.0},
    "tpu_v4": {"bf16": 275.0},
    "tpu_v5p": {"bf16": 459.0},
    "tpu_v6e": {"bf16": 918.0},
}
PEAK_SOURCES = {
    "a100": "composer GPU_AVAILABLE_FLOPS['a100']; torchtitan get_peak_flops 312e12",
    "h100_sxm": "composer h100-sxm (1.979e15/2); torchtitan 989e12; NVIDIA datasheet sparse/2",
    "h100_pcie": "torchtitan get_peak_flops; composer h100-pcie (FP8 derived)",
    "h100_nvl": "torchtitan get_peak_flops (FP8 derived)",
    "h200_sxm": "composer h200-sxm = _HSERIES_SXM; torchtitan 989e12",
    "b200": "NVIDIA Blackwell datasheet (dense = sparse/2); torchtitan 2.25e15",
    "gb200": "NVIDIA GB200 NVL72 datasheet / 72; torchtitan 2.5e15",
    "mi300x": "MLCommons inference v4.1 system JSON; alpharomercoma MI300X-vs-H200 METHODOLOGY.md",
    "mi325x": "AMD spec quoted by awesomeagents.ai (same compute as MI300X); unverified",
    "mi355x": "torchtitan 2500e12; Tom's Hardware ISC 2025",
    "tpu_v4": "torchtitan get_peak_flops", "tpu_v5p": "torchtitan get_peak_flops",
    "tpu_v6e": "torchtitan get_peak_flops",
}
# Names a SKU manifest or nvidia-smi may use for the same part.
GPU_ALIASES = {
    "a100 sxm4 80gb": "a100", "a100-sxm4-80gb": "a100", "nvidia a100-sxm4-80gb": "a100",
    "h100": "h100_sxm", "h100 80gb hbm3": "h100_sxm", "h100 sxm5 80gb": "h100_sxm", "nvidia h100 80gb hbm3": "h100_sxm",
    "h200": "h200_sxm", "h200 141gb hbm3e": "h200_sxm", "nvidia h200": "h200_sxm",
    "b200": "b200", "nvidia b200": "b200", "gb200": "gb200", "nvidia gb200": "gb200",
    "mi300x": "mi300x", "amd instinct mi300x": "mi300x", "mi325x": "mi325x", "mi355x": "mi355x",
}
PRECISION_ALIASES = {"bfloat16": "bf16", "float16": "fp16", "half": "fp16", "float8": "fp8",
                     "fp8_e4m3": "fp8", "amp_bf16": "bf16", "amp_fp8": "fp8", "float32": "fp32"}

CONVENTIONS = ("palm", "torchtitan", "korthikanti", "narayanan", "megatron")
CONVENTION_NOTES = {
    "palm": "PaLM F1: 6N + 12*L*H*Q*T (non-causal attention, all params)",
    "torchtitan": "torchtitan F6: 6(N - N_emb) + 12*L*H*Q*T",
    "korthikanti": "Korthikanti 2022 F4: 72*B*s*l*h^2*(1 + s/(6h) + V/(12lh)), model FLOPs",
    "narayanan": "Narayanan 2021 F3: 96*B*s*l*h^2*(1 + s/(6h) + V/(16lh)); includes full recompute: HFU-like",
    "megatron": "Megatron-LM F5 per-GEMM count, GQA-aware, causal attention halved",
}
# Names SKU manifests and other tools use for the same conventions.
CONVENTION_ALIASES = {"megatron_per_gemm": "megatron", "nemo": "megatron", "llm_foundry": "palm",
                      "korthikanti_2022": "korthikanti", "narayanan_2021": "narayanan", "palm_2022": "palm"}


def normalise_convention(convention):
    """Canonical convention name (``megatron_per_gemm`` -> ``megatron``)."""
    name = str(convention).strip().lower()
    return CONVENTION_ALIASES.get(name, name)


# torchtitan prints its own MFU; ours and its differ by more than this many points -> flagged.
MFU_DISAGREEMENT_PT = 1.0


@dataclass
class ModelShape:
    """A dense decoder-only transformer.

    ``params``: N, all parameters; ``embedding_params``: input-embedding parameters
    (torchtitan subtracts them); ``layers`` L; ``hidden`` d_model h; ``heads`` H;
    ``head_dim`` Q (default h/H); ``kv_heads`` (GQA groups, default H);
    ``ffn_hidden`` (MLP inner size); ``vocab`` V; ``seq_len`` T; ``swiglu``.
    """

    layers: int
    hidden: int
    seq_len: int
    params: float = 0.0
    embedding_params: float = 0.0
    heads: int = 0
    head_dim: int = 0
    kv_heads: int = 0
    ffn_hidden: int = 0
    vocab: int = 0
    swiglu: bool = False

    def attention_width(self):
        """H*Q: heads x head dimension; d_model when neither is given."""
        if self.heads and self.head_dim:
            return self.heads * self.head_dim
        return self.hidden

    def to_dict(self):
        return asdict(self)


def _need(shape, names, convention):
    missing = [n for n in names if not getattr(shape, n)]
    if missing:
        raise ValidationError("the %s convention needs %s" % (convention, ", ".join(missing)),
                              where="model")


def flops_per_token(shape, convention):
    """Training FLOPs per token (forward + backward) for ``shape`` under ``convention``.

    Returns a float (FLOPs/token).  Raises :class:`ValidationError` for an unknown
    convention or a missing dimension.  Formulas and sources: module docstring.
    """
    L, h, T = shape.layers, shape.hidden, shape.seq_len
    convention = normalise_convention(convention)
    if convention == "palm":
        _need(shape, ("params", "layers", "seq_len"), convention)
        return 6.0 * shape.params + 12.0 * L * shape.attention_width() * T
    if convention == "torchtitan":
        _need(shape, ("params", "layers", "seq_len"), convention)
        return 6.0 * (shape.params - shape.embedding_params) + 12.0 * L * shape.attention_width() * T
    if convention in ("korthikanti", "narayanan"):
        _need(shape, ("layers", "hidden", "seq_len", "vocab"), convention)
        V = shape.vocab
        if convention == "korthikanti":
            return 72.0 * L * h * h * (1.0 + T / (6.0 * h) + V / (12.0 * L * h))
        return 96.0 * L * h * h * (1.0 + T / (6.0 * h) + V / (16.0 * L * h))
    if convention == "megatron":
        _need(shape, ("layers", "hidden", "seq_len", "vocab", "ffn_hidden", "heads"), convention)
        heads = shape.heads
        groups = shape.kv_heads or heads
        q_ratio = shape.attention_width() / float(h)
        gated = 1.5 if shape.swiglu else 1.0
        # 12 = 3 passes (fwd, wgrad, dgrad) x 2 (FMA) x 2; the s/(2h) term is causal attention halved.
        return 12.0 * L * h * h * (
            (1.0 + groups / float(heads) + T / (2.0 * h)) * q_ratio
            + (shape.ffn_hidden / float(h)) * gated
            + shape.vocab / (2.0 * L * h))
    raise ValidationError("unknown FLOPs convention %r (known: %s)" % (convention, ", ".join(CONVENTIONS)),
                          where="convention")


def normalise_precision(precision):
    p = str(precision).strip().lower()
    return PRECISION_ALIASES.get(p, p)


def peak_tflops(gpu, precision):
    """Dense peak TFLOP/s for one accelerator: ``(value, source)``.

    ``gpu`` is a table key or an alias (``"H100 80GB HBM3"``); raises
    :class:`ValidationError` naming what is unknown.
    """
    key = str(gpu).strip().lower()
    key = GPU_ALIASES.get(key, key.replace(" ", "_").replace("-", "_"))
    if key not in PEAK_TFLOPS:
        raise ValidationError("no dense peak known for GPU %r (known: %s)" % (gpu, ", ".join(sorted(PEAK_TFLOPS))),
                              where="gpu")
    prec = normalise_precision(precision)
    if prec not in PEAK_TFLOPS[key]:
        raise ValidationError("no dense %s peak known for %s (known: %s)"
                              % (prec, key, ", ".join(sorted(PEAK_TFLOPS[key]))), where="precision")
    return PEAK_TFLOPS[key][prec], PEAK_SOURCES[key]


def mfu_percent(tokens_per_s_per_device, flops_tok, peak_tflops_per_device):
    """MFU in percent: ``tokens/s/device x FLOPs/token / peak FLOP/s``.

    Raises :class:`ValidationError` for a non-positive peak or negative throughput.
    """
    if peak_tflops_per_device is None or peak_tflops_per_device <= 0:
        raise ValidationError("peak TFLOP/s must be positive, got %r" % (peak_tflops_per_device,), where="peak")
    if tokens_per_s_per_device < 0:
        raise ValidationError("throughput must not be negative", where="tokens_per_s")
    return 100.0 * tokens_per_s_per_device * flops_tok / (peak_tflops_per_device * 1e12)


def compute_mfu(shape, convention, tokens_per_s_per_device, peak, peak_source="", reported_mfu_pct=None,
                tolerance_pt=MFU_DISAGREEMENT_PT):
    """One MFU result as a dict.

    Returns ``{convention, convention_note, flops_per_token, tokens_per_s_per_device,
    achieved_tflops_per_device, peak_tflops, peak_source, mfu_pct, hfu_like,
    reported_mfu_pct, disagreement_pt, disagrees}``; ``disagrees`` is True when the
    recipe's own MFU differs from ours by more than ``tolerance_pt`` points.
    """
    convention = normalise_convention(convention)
    f = flops_per_token(shape, convention)
    mfu = mfu_percent(tokens_per_s_per_device, f, peak)
    out = {
        "convention": convention,
        "convention_note": CONVENTION_NOTES[convention],
        "flops_per_token": f,
        "tokens_per_s_per_device": tokens_per_s_per_device,
        "achieved_tflops_per_device": tokens_per_s_per_device * f / 1e12,
        "peak_tflops": peak,
        "peak_source": peak_source,
        "mfu_pct": round(mfu, 3),
        "hfu_like": convention == "narayanan",
        "reported_mfu_pct": reported_mfu_pct,
        "disagreement_pt": None,
        "disagrees": False,
    }
    if reported_mfu_pct is not None:
        diff = round(mfu - float(reported_mfu_pct), 3)
        out["disagreement_pt"] = diff
        out["disagrees"] = abs(diff) > tolerance_pt
    return out


def shape_from_dict(data, where="model"):
    """Build a :class:`ModelShape` from a dict (module option / SKU entry); unknown keys raise."""
    if not isinstance(data, dict):
        raise ValidationError("model must be a mapping", where=where)
    known = set(ModelShape.__dataclass_fields__)
    unknown = sorted(set(data) - known)
    if unknown:
        raise ValidationError("unknown model fields %s (known: %s)" % (unknown, ", ".join(sorted(known))),
                              where=where)
    for key in ("layers", "hidden", "seq_len"):
        if key not in data:
            raise ValidationError("missing %s" % key, where=where)
    return ModelShape(**data)


# Published model shapes for the production recipes (torchtitan's Llama 3 configs,
# torchtitan/models/llama3/__init__.py; parameter counts from numbers.md F6).
MODELS = {
    "llama3_8b": ModelShape(layers=32, hidden=4096, heads=32, head_dim=128, kv_heads=8, ffn_hidden=14336,
                            vocab=128256, seq_len=8192, params=8030261248, embedding_params=525336576,
                            swiglu=True),
    "llama3_70b": ModelShape(layers=80, hidden=8192, heads=64, head_dim=128, kv_heads=8, ffn_hidden=28672,
                             vocab=128256, seq_len=8192, params=70553706496, embedding_params=1050673152,
                             swiglu=True),
    "llama3_405b": ModelShape(layers=126, hidden=16384, heads=128, head_dim=128, kv_heads=8, ffn_hidden=53248,
                              vocab=128256, seq_len=8192, params=405853388800, embedding_params=2101346304,
                              swiglu=True),
}


def model_shape(name_or_dict, seq_len=None):
    """A named model (``MODELS``) or a dict; ``seq_len`` overrides the sequence length."""
    if isinstance(name_or_dict, str):
        if name_or_dict not in MODELS:
            raise ValidationError("unknown model %r (known: %s)" % (name_or_dict, ", ".join(sorted(MODELS))),
                                  where="model")
        shape = ModelShape(**MODELS[name_or_dict].to_dict())
    else:
        shape = shape_from_dict(name_or_dict)
    if seq_len:
        shape.seq_len = int(seq_len)
    return shape
