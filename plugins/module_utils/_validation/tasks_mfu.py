# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Entry point of the ``mfu_calc`` module: MFU from a given throughput or from a training log.

A pure calculator: it reads at most a log file, never a scheduler.
"""

from __future__ import annotations

from typing import Any, Dict

from .._core.errors import ValidationError
from . import mfu as _mfu
from . import recipes as _recipes


def run_mfu(p: Dict[str, Any]) -> Dict[str, Any]:
    """mfu_calc: see the module's documentation."""
    reported = p.get("reported_mfu_pct")
    tps = p.get("tokens_per_s_per_device")
    peak, source = p.get("peak_tflops"), "given"
    shape = None
    if p.get("log"):
        parsed = _recipes.parse_log(_recipes.read_log(p["log"]), p["log_format"], where=p["log"])
        if p["log_format"] == "smoke":
            if not parsed.get("summary"):
                raise ValidationError("the smoke log has no smoke_summary line", where=p["log"])
            shape = _mfu.ModelShape(**_recipes.smoke_shape(parsed["summary"]))
            if peak is None:
                peak, source = parsed["summary"]["gemm_peak_tflops"][0], "measured CPU GEMM peak (rank 0)"
        seq = p.get("seq_len") or (shape.seq_len if shape else _mfu.model_shape(p["model"]).seq_len
                                   if p.get("model") else None)
        tput = _recipes.throughput(parsed, p["log_format"], warmup=p["warmup"], seq_len=seq, n_devices=p.get("devices"))
        tps = tput["tokens_per_s_per_device"]
        reported = reported if reported is not None else tput["reported_mfu_pct"]
    if shape is None:
        if not p.get("model"):
            raise ValidationError("model is required (a known name or a dict)", where="model")
        shape = _mfu.model_shape(p["model"], p.get("seq_len"))
    if peak is None:
        if not p.get("gpu"):
            raise ValidationError("give peak_tflops, or gpu and precision for the dense peak table", where="gpu")
        peak, source = _mfu.peak_tflops(p["gpu"], p["precision"])
    return _mfu.compute_mfu(shape, p["convention"], tps, peak, peak_source=source, reported_mfu_pct=reported)
