# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pretraining recipes: what to launch, and their logs parsed for throughput and MFU.

* ``torchtitan`` (production recipe).  Rank 0 logs, per log step (torchtitan
  ``components/metrics.py::MetricsProcessor.log``)::

      step: 10  loss:  7.1234  grad_norm:  1.2345  memory: 33.10GiB(41.80%)  tps: 6,012  tflops: 348.20  mfu: 35.21%

  with ANSI colours and a ``[rank0]:[titan] <time> - root - INFO -`` prefix; older
  releases print ``wps:`` instead of ``tps:`` and no ``grad_norm``/``tflops``.  ``tps``
  is tokens/s per device.  At start it logs ``Model llama3 8B size: 8,030,261,248
  total parameters`` and ``Peak FLOPS used for computing MFU: 9.890e+14``.
* ``megatron`` (Megatron-LM ``training.py::training_log``)::

      [2026-11-29 10:00:00] iteration      100/   10000 | consumed samples: 51200 | elapsed time per
      iteration (ms): 1534.2 | throughput per GPU (TFLOP/s/GPU): 412.3 | learning rate: ... |
      global batch size:   512 | lm loss: 7.12E+00 | ... | number of skipped iterations: 0 | ...

* ``smoke``: ``roles/cluster_validation/files/smoke_train.py`` (a small Llama-style decoder), which prints
  torchtitan's lines plus a ``smoke_summary: {json}`` line.
"""

from __future__ import annotations

import json
import os
import re

from .._core.errors import ParseError, SchedulerError, ValidationError

RECIPES = ("torchtitan", "megatron", "smoke")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_NUM = r"([-+]?[\d,]*\.?\d+(?:[eE][-+]?\d+)?)"
_TITAN_FIELDS = {
    "step": re.compile(r"\bstep:\s*(\d+)"),
    "loss": re.compile(r"\bloss:\s*" + _NUM),
    "grad_norm": re.compile(r"\bgrad_norm:\s*" + _NUM),
    "memory_gib": re.compile(r"\bmemory:\s*" + _NUM + r"GiB"),
    "tps": re.compile(r"\b(?:tps|wps):\s*" + _NUM),
    "tflops": re.compile(r"\btflops:\s*" + _NUM),
    "mfu_pct": re.compile(r"\bmfu:\s*" + _NUM + r"%"),
}
_TITAN_PARAMS = re.compile(r"Model (.+?) size:\s*([\d,]+) total parameters")
_TITAN_PEAK = re.compile(r"Peak FLOPS used for computing MFU:\s*" + _NUM)
_SMOKE_SUMMARY = re.compile(r"smoke_summary:\s*(\{.*\})\s*$")


def _num(text):
    return float(text.replace(",", ""))


def strip_ansi(text):
    return _ANSI.sub("", text)


def parse_torchtitan(text, where="torchtitan log"):
    """Parse a torchtitan (or smoke workload) log.

    Returns ``{steps: [{step, loss, tps, grad_norm?, memory_gib?, tflops?, mfu_pct?}],
    params, model, peak_flops, summary}`` (``summary`` only for the smoke workload).
    Raises :class:`ParseError` when no step line is found, naming the last lines
    (a crashed run says why there).
    """
    steps, params, model, peak, summary = [], None, None, None, None
    for raw in strip_ansi(text).splitlines():
        line = raw.strip()
        match = _SMOKE_SUMMARY.search(line)
        if match:
            try:
                summary = json.loads(match.group(1))
            except ValueError as exc:
                raise ParseError("smoke_summary is not JSON: %s" % exc, where=where)
            continue
        match = _TITAN_PARAMS.search(line)
        if match:
            model, params = match.group(1), int(match.group(2).replace(",", ""))
            continue
        match = _TITAN_PEAK.search(line)
        if match:
            peak = _num(match.group(1))
            continue
        if "step:" not in line or "loss:" not in line:
            continue
        rec = {}
        for key, regex in _TITAN_FIELDS.items():
            found = regex.search(line)
            if found:
                rec[key] = int(found.group(1)) if key == "step" else _num(found.group(1))
        if "step" in rec and "tps" in rec:
            steps.append(rec)
    if not steps:
        tail = " | ".join(strip_ansi(text).strip().splitlines()[-3:])
        raise ParseError("no step lines with loss and tps/wps (last lines: %s)" % (tail[:400] or "empty log"),
                         where=where)
    return {"steps": steps, "params": params, "model": model, "peak_flops": peak, "summary": summary}


def parse_megatron(text, where="megatron log"):
    """Parse Megatron-LM iteration lines.

    Returns ``{iterations: [{iteration, train_iters, elapsed_ms, tflops_per_gpu?,
    global_batch_size, lm_loss?, skipped?, nan?}]}``; :class:`ParseError` when none.
    """
    iterations = []
    for raw in strip_ansi(text).splitlines():
        if "iteration" not in raw or "elapsed time per iteration (ms)" not in raw:
            continue
        rec = {}
        for part in raw.split("|"):
            key, sep, value = part.partition(":")
            if not sep:
                continue
            key, value = key.strip(), value.strip()
            if key == "elapsed time per iteration (ms)":
                rec["elapsed_ms"] = _num(value)
            elif key == "throughput per GPU (TFLOP/s/GPU)":
                rec["tflops_per_gpu"] = _num(value)
            elif key == "global batch size":
                rec["global_batch_size"] = int(_num(value))
            elif key == "lm loss":
                rec["lm_loss"] = float(value)
            elif key == "number of skipped iterations":
                rec["skipped"] = int(value)
            elif key == "number of nan iterations":
                rec["nan"] = int(value)
        match = re.search(r"iteration\s+(\d+)\s*/\s*(\d+)", raw)
        if match and "elapsed_ms" in rec and "global_batch_size" in rec:
            rec["iteration"], rec["train_iters"] = int(match.group(1)), int(match.group(2))
            iterations.append(rec)
    if not iterations:
        raise ParseError("no iteration lines with 'elapsed time per iteration (ms)' and 'global batch size'",
                         where=where)
    return {"iterations": iterations}


def megatron_tokens_per_s_per_device(iteration, seq_len, n_devices):
    """Tokens/s per device of one Megatron iteration: global batch x seq_len / elapsed / devices."""
    if n_devices <= 0 or seq_len <= 0:
        raise ValidationError("seq_len and devices must be positive", where="megatron")
    return iteration["global_batch_size"] * seq_len / (iteration["elapsed_ms"] / 1000.0) / n_devices


def throughput(parsed, recipe, warmup=1, seq_len=None, n_devices=None):
    """Steady-state throughput of a run: steps after ``warmup`` averaged.

    Returns ``{tokens_per_s_per_device, reported_mfu_pct, reported_tflops_per_device,
    steps_used, last_loss}``; ``reported_*`` are the recipe's own figures (None when it
    prints none).  Raises :class:`ParseError` when no step is left after warm-up.
    """
    if recipe in ("torchtitan", "smoke"):
        steps = [s for s in parsed["steps"] if s["step"] > warmup]
        if not steps:
            raise ParseError("no step after the %d warm-up step(s)" % warmup, where=recipe)
        mfus = [s["mfu_pct"] for s in steps if "mfu_pct" in s]
        tfl = [s["tflops"] for s in steps if "tflops" in s]
        return {"tokens_per_s_per_device": sum(s["tps"] for s in steps) / len(steps),
                "reported_mfu_pct": (sum(mfus) / len(mfus)) if mfus else None,
                "reported_tflops_per_device": (sum(tfl) / len(tfl)) if tfl else None,
                "steps_used": len(steps), "last_loss": steps[-1].get("loss")}
    if recipe == "megatron":
        if not seq_len or not n_devices:
            raise ValidationError("Megatron throughput needs seq_len and the number of devices", where=recipe)
        its = [i for i in parsed["iterations"] if i["iteration"] > warmup]
        if not its:
            raise ParseError("no iteration after the %d warm-up iteration(s)" % warmup, where=recipe)
        tps = [megatron_tokens_per_s_per_device(i, seq_len, n_devices) for i in its]
        tfl = [i["tflops_per_gpu"] for i in its if "tflops_per_gpu" in i]
        return {"tokens_per_s_per_device": sum(tps) / len(tps), "reported_mfu_pct": None,
                "reported_tflops_per_device": (sum(tfl) / len(tfl)) if tfl else None,
                "steps_used": len(its), "last_loss": its[-1].get("lm_loss")}
    raise ValidationError("unknown recipe %r (known: %s)" % (recipe, ", ".join(RECIPES)), where="recipe")


def parse_log(text, recipe, where=None):
    """Dispatch on ``recipe``."""
    if recipe in ("torchtitan", "smoke"):
        return parse_torchtitan(text, where or "%s log" % recipe)
    if recipe == "megatron":
        return parse_megatron(text, where or "megatron log")
    raise ValidationError("unknown recipe %r (known: %s)" % (recipe, ", ".join(RECIPES)), where="recipe")


def smoke_shape(summary):
    """The smoke workload's model as :class:`_mfu.ModelShape` fields (from its summary line)."""
    keys = ("layers", "hidden", "heads", "seq_len", "vocab", "params", "embedding_params")
    missing = [k for k in keys if k not in summary]
    if missing:
        raise ParseError("smoke_summary lacks %s" % ", ".join(missing), where="smoke log")
    shape = {k: summary[k] for k in keys}
    shape["head_dim"] = summary.get("head_dim") or summary["hidden"] // summary["heads"]
    # The Llama-style workload also names its GQA groups and SwiGLU width (older logs: full MHA, GELU MLP).
    for key in ("kv_heads", "ffn_hidden", "swiglu"):
        if key in summary:
            shape[key] = summary[key]
    return shape


def torchtitan_args(config_file, steps=None, extra=()):
    """Arguments after ``-m torchtitan.train``: its TOML config (Llama 3 8B/70B etc.) and overrides."""
    args = ["--job.config_file", config_file]
    if steps:
        args += ["--training.steps", str(int(steps))]
    return args + list(extra)


def read_log(path: str, max_bytes: int = 2_000_000) -> str:
    """The last ``max_bytes`` of a training job's output file; ``SchedulerError`` naming it when unreadable."""
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - max_bytes))
            return handle.read().decode("utf-8", "replace")
    except OSError as exc:
        raise SchedulerError("cannot read the job's log: %s" % exc.strerror, where=path)
