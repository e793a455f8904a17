"""MFU calculator: every published row of shared/reference/mfu-published.csv, and the derived F_tok values."""

import csv
import re

import pytest

from ansible_collections.symphony.cluster.plugins.module_utils._validation import mfu as _mfu
from ansible_collections.symphony.cluster.plugins.module_utils._core.errors import ValidationError


def _rows(shared):
    with open(shared / "reference" / "mfu-published.csv", newline="") as handle:
        return list(csv.DictReader(handle))


def _shape_for_row(row):
    """The convention each row's notes column names, with the attention width it names.

    - PaLM row: '6N+12LHQT with H=48,Q=256' -> palm with H*Q = 12 288 (not d_model).
    - llm-foundry rows: '(6N+12*L*d*s)' -> palm with H*Q = d_model (F7).
    - MT-NLG row (PaLM paper Table 3, '29.7% without attention term') -> palm, H*Q = d_model.
    """
    notes = row["notes"]
    heads = head_dim = 0
    match = re.search(r"H=(\d+),\s*Q=(\d+)", notes)
    if match:
        heads, head_dim = int(match.group(1)), int(match.group(2))
    shape = _mfu.ModelShape(layers=int(row["n_layers"]), hidden=int(row["hidden"]), seq_len=int(row["seq_len"]),
                            params=float(row["params"]), heads=heads, head_dim=head_dim, vocab=int(row["vocab"]))
    return shape, "palm"


def test_every_published_row_within_0_1_point(shared):
    rows = _rows(shared)
    assert len(rows) == 12
    for row in rows:
        shape, convention = _shape_for_row(row)
        result = _mfu.compute_mfu(shape, convention, float(row["tokens_per_sec_per_gpu"]),
                                  float(row["peak_tflops_per_gpu"]))
        assert abs(result["mfu_pct"] - float(row["reported_mfu_percent"])) <= 0.1, (row["model"], result["mfu_pct"])


def test_palm_attention_width_is_not_d_model(shared):
    row = [r for r in _rows(shared) if r["model"] == "PaLM 540B"][0]
    shape, _convention = _shape_for_row(row)
    assert shape.attention_width() == 12288
    right = _mfu.compute_mfu(shape, "palm", 38.79, 275)["mfu_pct"]
    shape.heads = shape.head_dim = 0  # d_model = 18 432 would be wrong
    wrong = _mfu.compute_mfu(shape, "palm", 38.79, 275)["mfu_pct"]
    assert round(right, 1) == 46.2
    assert round(wrong, 2) == pytest.approx(46.49, abs=0.02)


def test_torchtitan_llama31_8b_flops_per_token():
    # numbers.md F6: F_tok = 57.91 GF at T = 8192.
    assert _mfu.flops_per_token(_mfu.MODELS["llama3_8b"], "torchtitan") / 1e9 == pytest.approx(57.91, abs=0.01)


@pytest.mark.parametrize("name,gflops,tps,printed", [
    # numbers.md F5: derived F_tok and the NeMo TFLOP/s it reproduces.
    ("llama3_8b", 51.47, 14451, 744), ("llama3_70b", 449.2, 1602, 719), ("llama3_405b", 2524, 292, 737)])
def test_megatron_per_gemm_reproduces_nemo(name, gflops, tps, printed):
    f = _mfu.flops_per_token(_mfu.MODELS[name], "megatron")
    assert f / 1e9 == pytest.approx(gflops, rel=5e-4)
    assert tps * f / 1e12 == pytest.approx(printed, abs=1.0)


def test_korthikanti_equals_palm_with_its_parameter_count_and_narayanan_is_hfu_like():
    shape = _mfu.ModelShape(layers=96, hidden=12288, seq_len=2048, vocab=51200)
    korth = _mfu.flops_per_token(shape, "korthikanti")
    # 72*l*h^2*(1 + s/6h + V/12lh) == 6*(12*l*h^2 + V*h) + 12*l*h*s  (PaLM with N = 12lh^2 + Vh, H*Q = h)
    palm_shape = _mfu.ModelShape(layers=96, hidden=12288, seq_len=2048, params=12 * 96 * 12288 ** 2 + 51200 * 12288)
    assert korth == pytest.approx(_mfu.flops_per_token(palm_shape, "palm"), rel=1e-12)
    nar = _mfu.flops_per_token(shape, "narayanan")
    # F3 - F4 = 24*l*h^2*(1 + s/(6h)): the recomputed forward pass.
    assert nar - korth == pytest.approx(24 * 96 * 12288 ** 2 * (1 + 2048 / (6 * 12288)), rel=1e-12)
    res = _mfu.compute_mfu(shape, "narayanan", 100, 312)
    assert res["hfu_like"] is True and "HFU" in res["convention_note"]


def test_peaks_and_disagreement_flag():
    assert _mfu.peak_tflops("H100 80GB HBM3", "bf16")[0] == 989.4
    assert _mfu.peak_tflops("h200_sxm", "fp8")[0] == 1978.9
    assert _mfu.peak_tflops("a100", "bfloat16")[0] == 312.0
    with pytest.raises(ValidationError, match="no dense fp8 peak known for a100"):
        _mfu.peak_tflops("a100", "fp8")
    with pytest.raises(ValidationError, match="no dense peak known for GPU 'V100'"):
        _mfu.peak_tflops("V100", "bf16")
    shape = _mfu.MODELS["llama3_8b"]
    ours = _mfu.compute_mfu(shape, "torchtitan", 6000, 989.4, reported_mfu_pct=35.12)
    assert ours["mfu_pct"] == pytest.approx(35.12, abs=0.01) and not ours["disagrees"]
    palm = _mfu.compute_mfu(shape, "palm", 6000, 989.4, reported_mfu_pct=35.12)
    assert palm["disagrees"] and palm["disagreement_pt"] == pytest.approx(1.91, abs=0.01)


def test_bad_input_names_the_field():
    with pytest.raises(ValidationError, match="unknown FLOPs convention 'kaplan'"):
        _mfu.flops_per_token(_mfu.MODELS["llama3_8b"], "kaplan")
    with pytest.raises(ValidationError, match="megatron convention needs vocab, ffn_hidden, heads"):
        _mfu.flops_per_token(_mfu.ModelShape(layers=2, hidden=8, seq_len=4), "megatron")
    with pytest.raises(ValidationError, match="model: unknown model fields"):
        _mfu.model_shape({"layers": 2, "hidden": 8, "seq_len": 4, "dmodel": 3})
    with pytest.raises(ValidationError, match="peak TFLOP/s must be positive"):
        _mfu.mfu_percent(1, 1, 0)
