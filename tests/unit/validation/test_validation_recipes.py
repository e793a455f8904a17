"""Recipe log parsers: torchtitan, Megatron-LM, and the real smoke workload's output."""

import os
import pathlib
import subprocess
import sys
import time

import pytest

from ansible_collections.symphony.cluster.plugins.module_utils._validation import mfu as _mfu
from ansible_collections.symphony.cluster.plugins.module_utils._validation import recipes as _recipes
from ansible_collections.symphony.cluster.plugins.module_utils._core.errors import ParseError
from timescale import scaled

# Lines as torchtitan's MetricsProcessor.log prints them (colours included), and its start-up lines.
TITAN = "\n".join([
    "[rank0]:[titan] 2026-11-29 10:00:01,101 - root - INFO - Model llama3 8B size: 8,030,261,248 total parameters",
    "[rank0]:[titan] 2026-11-29 10:00:02,202 - root - INFO - Peak FLOPS used for computing MFU: 9.890e+14",
    "[rank0]:[titan] 2026-11-29 10:00:40,000 - root - INFO - \x1b[31mstep:  1  \x1b[32mloss: 12.2510  "
    "\x1b[38;2;180;60;0mgrad_norm:  4.1234  \x1b[38;2;54;234;195mmemory: 43.77GiB(55.27%)  \x1b[34mtps: 1,083  "
    "\x1b[36mtflops: 62.72  \x1b[35mmfu: 6.34%\x1b[39m",
    "[rank0]:[titan] 2026-11-29 10:00:50,000 - root - INFO - \x1b[31mstep: 10  \x1b[32mloss:  9.8765  "
    "\x1b[38;2;180;60;0mgrad_norm:  2.0001  \x1b[38;2;54;234;195mmemory: 60.12GiB(75.90%)  \x1b[34mtps: 6,012  "
    "\x1b[36mtflops: 348.17  \x1b[35mmfu: 35.20%\x1b[39m",
    "[rank0]:[titan] 2026-11-29 10:01:00,000 - root - INFO - \x1b[31mstep: 20  \x1b[32mloss:  8.1000  "
    "\x1b[38;2;180;60;0mgrad_norm:  1.5000  \x1b[38;2;54;234;195mmemory: 60.12GiB(75.90%)  \x1b[34mtps: 5,988  "
    "\x1b[36mtflops: 346.78  \x1b[35mmfu: 35.06%\x1b[39m",
    "[rank0]:[titan] 2026-11-29 10:01:05,000 - root - INFO - Training completed"])

MEGATRON = "\n".join([
    " [2026-11-29 10:00:00] iteration        1/     100 | consumed samples:          512 | elapsed time per "
    "iteration (ms): 9123.4 | throughput per GPU (TFLOP/s/GPU): 80.1 | learning rate: 1.500000E-06 | "
    "global batch size:   512 | lm loss: 1.178000E+01 | loss scale: 1.0 | grad norm: 9.876 | "
    "number of skipped iterations:   0 | number of nan iterations:   0 |",
    " [2026-11-29 10:00:20] iteration       10/     100 | consumed samples:         5120 | elapsed time per "
    "iteration (ms): 1800.0 | throughput per GPU (TFLOP/s/GPU): 405.9 | learning rate: 1.500000E-05 | "
    "global batch size:   512 | lm loss: 8.123000E+00 | loss scale: 1.0 | grad norm: 2.345 | "
    "number of skipped iterations:   0 | number of nan iterations:   0 |"])


def test_torchtitan_lines_and_our_mfu_agree_with_its_own():
    parsed = _recipes.parse_torchtitan(TITAN)
    assert [s["step"] for s in parsed["steps"]] == [1, 10, 20]
    assert parsed["steps"][1] == {"step": 10, "loss": 9.8765, "grad_norm": 2.0001, "memory_gib": 60.12,
                                  "tps": 6012.0, "tflops": 348.17, "mfu_pct": 35.2}
    assert parsed["params"] == 8030261248 and parsed["peak_flops"] == 9.89e14
    tput = _recipes.throughput(parsed, "torchtitan", warmup=1)
    assert tput["tokens_per_s_per_device"] == 6000.0 and tput["reported_mfu_pct"] == pytest.approx(35.13)
    ours = _mfu.compute_mfu(_mfu.MODELS["llama3_8b"], "torchtitan", tput["tokens_per_s_per_device"], 989.0,
                            reported_mfu_pct=tput["reported_mfu_pct"])
    assert not ours["disagrees"] and abs(ours["disagreement_pt"]) < 0.05


def test_old_torchtitan_wps_lines():
    line = "[rank0]:2024-05-01 12:00:00,000 - root - INFO - step:  5  loss:  9.1000  memory: 20.00GiB(25.00%)  " \
           "wps: 3,456  mfu: 21.00%"
    parsed = _recipes.parse_torchtitan(line)
    assert parsed["steps"] == [{"step": 5, "loss": 9.1, "memory_gib": 20.0, "tps": 3456.0, "mfu_pct": 21.0}]


def test_megatron_iterations_and_throughput():
    parsed = _recipes.parse_megatron(MEGATRON)
    assert parsed["iterations"][1] == {"iteration": 10, "train_iters": 100, "elapsed_ms": 1800.0,
                                       "tflops_per_gpu": 405.9, "global_batch_size": 512, "lm_loss": 8.123,
                                       "skipped": 0, "nan": 0}
    tput = _recipes.throughput(parsed, "megatron", warmup=1, seq_len=8192, n_devices=512)
    assert tput["tokens_per_s_per_device"] == pytest.approx(512 * 8192 / 1.8 / 512)
    # Megatron's printed TFLOP/s/GPU is its per-GEMM count (F5) x tokens/s.
    f5 = _mfu.flops_per_token(_mfu.MODELS["llama3_8b"], "megatron")
    assert tput["tokens_per_s_per_device"] * f5 / 1e12 == pytest.approx(234.2, abs=0.1)


def test_crashed_run_says_why():
    with pytest.raises(ParseError, match="no step lines.*CUDA out of memory"):
        _recipes.parse_torchtitan("[rank0]: starting\n[rank0]: torch.OutOfMemoryError: CUDA out of memory.\n")
    with pytest.raises(ParseError, match="no iteration lines"):
        _recipes.parse_megatron("building GPT model ...\n")


def test_real_smoke_workload_output(repo_root):
    script = pathlib.Path(repo_root) / "roles" / "cluster_validation" / "files" / "smoke_train.py"
    proc = subprocess.run([sys.executable, str(script), "--steps", "3", "--warmup", "1", "--gemm-size", "256",
                           "--layers", "1", "--dim", "64", "--seq", "32"],
                          capture_output=True, text=True, timeout=scaled(120), check=True)
    parsed = _recipes.parse_torchtitan(proc.stdout, "smoke")
    assert [s["step"] for s in parsed["steps"]] == [1, 2, 3]
    summary = parsed["summary"]
    assert summary["world_size"] == 1 and summary["layers"] == 1 and summary["hidden"] == 64
    shape = _mfu.ModelShape(**_recipes.smoke_shape(summary))
    # Llama-style: grouped-query attention (half as many key/value heads as query heads by default), SwiGLU.
    assert (shape.heads, shape.kv_heads, shape.head_dim, shape.swiglu) == (4, 2, 16, True)
    assert shape.ffn_hidden == 192            # Llama's 8*64/3 = 170, rounded up to a multiple of 32
    # The parameters it reports are those of that shape: q and o full width, k and v kv_heads wide, three SwiGLU
    # matrices and two RMSNorm weights per layer; token embedding, final RMSNorm, untied output head.
    h, kv_width, V = shape.hidden, shape.kv_heads * shape.head_dim, shape.vocab
    per_layer = 2 * h * shape.heads * shape.head_dim + 2 * h * kv_width + 3 * h * shape.ffn_hidden + 2 * h
    assert summary["params"] == shape.layers * per_layer + V * h + h + h * V
    assert summary["embedding_params"] == V * h
    # Our torchtitan-convention count equals the workload's own, for the GQA + SwiGLU shape.
    assert _mfu.flops_per_token(shape, "torchtitan") == summary["flops_per_token"]
    assert summary["flops_per_token"] == 6 * (summary["params"] - V * h) + 12 * 1 * 4 * 16 * 32
    # The shape is complete enough for the GQA-aware per-GEMM (megatron) convention too.
    assert _mfu.flops_per_token(shape, "megatron") > 0
    assert parsed["params"] == summary["params"]
    peak = summary["gemm_peak_tflops"][0]
    assert parsed["peak_flops"] == pytest.approx(peak * 1e12, rel=1e-3)
    tput = _recipes.throughput(parsed, "smoke", warmup=1)
    ours = _mfu.compute_mfu(shape, "torchtitan", tput["tokens_per_s_per_device"], peak,
                            reported_mfu_pct=tput["reported_mfu_pct"])
    # Same convention, same throughput, same peak: only the printed rounding of tps differs.
    assert abs(ours["disagreement_pt"]) < 0.05 * max(1.0, ours["mfu_pct"])
    assert 0 < ours["mfu_pct"] < 100


def test_a_cpu_rank_kept_off_its_core_is_not_slower_but_a_slow_one_is(repo_root):
    """On a CPU the straggler rule's compute_s is the rank's own CPU time: a rank paused by the machine (here SIGSTOP
    for 0.3 s, what another process on a shared core does to it) is not slower by that; the seeded straggle is."""
    import json as _json
    import signal
    import threading

    from ansible_collections.symphony.cluster.plugins.module_utils._validation.stragglers import parse_rank_steps

    script = pathlib.Path(repo_root) / "roles" / "cluster_validation" / "files" / "smoke_train.py"
    argv = [sys.executable, str(script), "--steps", "4", "--warmup", "1", "--gemm-size", "128", "--layers", "1",
            "--dim", "64", "--seq", "32", "--straggle-rank", "0", "--straggle-s", "0.4"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=dict(os.environ, OMP_NUM_THREADS="1"))
    out = []
    reader = threading.Thread(target=lambda: out.extend(proc.stdout), daemon=True)
    reader.start()
    deadline = time.monotonic() + scaled(120)
    while not any("rank_step" in line for line in out) and time.monotonic() < deadline:
        time.sleep(0.01)
    for _pause in range(3):   # pauses land in the straggle loop of the next steps (0.4 s of CPU time each)
        time.sleep(0.1)
        if proc.poll() is not None:
            break
        proc.send_signal(signal.SIGSTOP)
        time.sleep(0.3)
        proc.send_signal(signal.SIGCONT)
    assert proc.wait(timeout=scaled(120)) == 0, "".join(out)
    reader.join(timeout=10)
    steps = parse_rank_steps("".join(out))
    assert len(steps) == 4
    for rec in steps:
        assert rec["compute_s"] >= 0.4                    # the seeded straggle counts, on the rule's clock
        assert rec["compute_wall_s"] >= rec["compute_s"] - 0.05
    paused = [r for r in steps if r["compute_wall_s"] - r["compute_s"] > 0.2]
    assert paused, _json.dumps(steps)                    # some step was paused for real (wall time shows it) ...
    assert max(r["compute_s"] for r in steps) < 0.4 + 0.3   # ... and no step's compute_s took the pause in
