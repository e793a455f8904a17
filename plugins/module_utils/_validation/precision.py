# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Training precision as a framework's real flags, and the precision a run's log says it used.

A precision label on a job proves nothing: an FP8 target judged on a BF16 run fails for nothing (MFU against
the FP8 peak is half), and a run labelled BF16 that trained in FP8 passes against a peak half its own.  So the
recipe's flags turn precision on, and the run's own log has to confirm it before MFU is judged.

Flags and confirmations:

* ``torchtitan``: FP8 is torchao's float8 linear conversion, ``--model.converters float8``
  (``docs/float8.md``; the Float8 converter logs ``Float8 training active`` [``with recipe <name>``]);
  BF16/FP32 is FSDP2's ``--training.mixed_precision_param`` (``bfloat16``/``float32``).  ``--job.print_args``
  makes torchtitan log ``Running with args: {...}`` (``torchtitan/train.py``), where the value is read back.
* ``megatron`` (Transformer Engine): ``--bf16`` and, for FP8, ``--fp8-format hybrid`` (Megatron-LM
  ``arguments.py``); Megatron prints its arguments at start (``_print_args``: ``  bf16 .... True``,
  ``  fp8 .... hybrid``).
* ``smoke``: ``smoke_train.py --dtype`` and its ``smoke_summary`` ``dtype``; ``fp8`` there is torchao's float8
  too and logs ``Float8 training active``.
"""

from __future__ import annotations

import re
from typing import Dict, List, Optional, Tuple

from .._core.errors import ValidationError

PRECISIONS = ("fp32", "bf16", "fp8")
_ALIASES = {"bfloat16": "bf16", "float32": "fp32", "float8": "fp8", "fp8_e4m3": "fp8", "hybrid": "fp8", "e4m3": "fp8"}

FLAGS: Dict[str, Dict[str, List[str]]] = {
    "torchtitan": {
        "fp32": ["--job.print_args", "--training.mixed_precision_param", "float32"],
        "bf16": ["--job.print_args", "--training.mixed_precision_param", "bfloat16"],
        "fp8": ["--job.print_args", "--training.mixed_precision_param", "bfloat16", "--model.converters", "float8"],
    },
    "megatron": {
        "bf16": ["--bf16"],
        "fp8": ["--bf16", "--fp8-format", "hybrid"],
    },
    "smoke": {"fp32": ["--dtype", "fp32"], "bf16": ["--dtype", "bf16"], "fp8": ["--dtype", "fp8"]},
}

_FLOAT8_ACTIVE = re.compile(r"Float8 (?:\w+ )*training active")
_TITAN_MP = re.compile(r"""['"]mixed_precision_param['"]:\s*['"](\w+)['"]""")
_MEGATRON_ARG = re.compile(r"^\s*(bf16|fp16|fp8)\s\.+\s(\S+)\s*$")


def normalise(precision: str) -> str:
    """``bfloat16`` -> ``bf16``; unknown names are returned lower-cased."""
    name = str(precision).strip().lower()
    return _ALIASES.get(name, name)


def precision_args(recipe: str, precision: str) -> List[str]:
    """The recipe's command-line flags that make it train in ``precision`` (module docstring).

    Raises :class:`ValidationError` when the recipe has no way to train in it (e.g. Megatron in fp32 is not a
    target any SKU sets).
    """
    prec = normalise(precision)
    table = FLAGS.get(recipe)
    if table is None:
        raise ValidationError("no precision flags known for recipe %r (known: %s)" % (recipe, ", ".join(FLAGS)),
                              where="recipe")
    if prec not in table:
        raise ValidationError("recipe %s has no flags for precision %s (known: %s)"
                              % (recipe, prec, ", ".join(table)), where="precision")
    return list(table[prec])


def used_precision(text: str, recipe: str, summary: Optional[dict] = None) -> Tuple[Optional[str], str]:
    """The precision the run's log says it trained in: ``(precision or None, evidence)``.

    ``text``: the job log (ANSI stripped or not); ``summary``: the smoke workload's parsed summary.  None
    when the log says nothing that settles it; ``evidence`` quotes what was found.
    """
    float8 = _FLOAT8_ACTIVE.search(text)
    if float8:
        return "fp8", "log: %r" % float8.group(0)
    if recipe == "smoke":
        dtype = (summary or {}).get("dtype")
        if dtype:
            return normalise(dtype), "smoke_summary dtype %s" % dtype
        return None, "no smoke_summary dtype in the log"
    if recipe == "torchtitan":
        match = _TITAN_MP.search(text)
        if match:
            return normalise(match.group(1)), "torchtitan args: mixed_precision_param %s, no Float8 converter" \
                % match.group(1)
        return None, "no 'Running with args' mixed_precision_param nor 'Float8 training active' in the log"
    if recipe == "megatron":
        found = {}
        for line in text.splitlines():
            match = _MEGATRON_ARG.match(line)
            if match:
                found[match.group(1)] = match.group(2)
        if found.get("fp8") not in (None, "None"):
            return "fp8", "megatron args: fp8 %s" % found["fp8"]
        if found.get("bf16") == "True":
            return "bf16", "megatron args: bf16 True, fp8 %s" % found.get("fp8", "absent")
        if found.get("fp16") == "True":
            return "fp16", "megatron args: fp16 True"
        return None, "no Megatron arguments block (bf16/fp8) in the log"
    raise ValidationError("unknown recipe %r" % recipe, where="recipe")


def confirm(text: str, recipe: str, requested: str, summary: Optional[dict] = None) -> Tuple[str, str, Optional[str]]:
    """``(used, evidence, error)``: error is why the log does not confirm ``requested`` (None when it does)."""
    used, evidence = used_precision(text, recipe, summary)
    want = normalise(requested)
    if used is None:
        return "unknown", evidence, "the run's log does not confirm %s: %s" % (want, evidence)
    if used != want:
        return used, evidence, "requested %s but the run trained in %s (%s)" % (want, used, evidence)
    return used, evidence, None
