# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# Apache License 2.0 (see LICENSE)
"""Smoke pretraining workload for cluster_validation (CI and the lab on CPUs; one GPU in tests/device).

A small Llama-style decoder (RMSNorm, rotary position embeddings, SwiGLU MLP, grouped-query attention with
``--kv-heads`` key/value heads shared by ``--heads`` query heads; no biases, untied output head) trained with
DistributedDataParallel over gloo (NCCL on GPUs), launched by torchrun (one process per node).  Before training it
measures the device's dense GEMM peak with a timed ``torch.matmul`` (on the CPU: the same threads), then prints
torchtitan's own log lines (``step: .. loss: .. tps: .. tflops: .. mfu: ..%``) so the same parser reads both.

The FLOPs per token are torchtitan's convention, F6 in ``_validation/mfu.py``
(``torchtitan/models/utils.py::get_dense_model_nparams_and_flops``): ``6*(N - N_emb) + 12*L*H*Q*T`` with N all
parameters, N_emb the token embedding's, H the query heads and Q the head dimension (GQA's fewer key/value heads
shrink N, not H*Q; RMSNorm and RoPE count nothing beyond their parameters).  The summary line names the shape
(``kv_heads``, ``head_dim``, ``ffn_hidden``, ``swiglu``) for ``recipes.smoke_shape``, whose ``ModelShape`` gives
the same count (tests/unit/validation/test_validation_recipes.py).  ``tps`` is tokens/s per process (per device,
as torchtitan prints it).  Data are random token ids (a smoke test of the launch path, the collective and
the arithmetic, not of learning).

``--device cuda`` trains on the process's GPU (``LOCAL_RANK``; NCCL when distributed); ``--dtype bf16`` runs
forward and loss under ``torch.autocast`` in bfloat16 (fp32 master weights), ``--dtype fp8`` additionally swaps
the Linear layers for torchao's float8 training layers and exits 3 saying so where torchao is not installed.

Every rank prints its own step times, for the straggler rule (``_validation/stragglers.py``)::

    rank_step: {"rank": 1, "node": "lab2", "step": 3, "step_s": 0.051, "compute_s": 0.012}

``compute_s`` is forward and loss, before DDP's gradient all-reduce makes every rank wait for the slowest: on a
GPU the wall time between device syncs (the GPU's speed), on a CPU the process's CPU time (``time.process_time``):
a slower core spends more CPU time on the same work, while a rank that another process kept off a shared core
(lab hosts share the machine's cores with everything else on it) spends the same, so a busy machine makes no
straggler.  ``compute_wall_s`` is the wall time either way (evidence).  ``--straggle-rank R --straggle-s S`` (the
lab's injection, never set in production) adds S seconds of busy compute, on that same clock, to rank R's forward,
as a slow GPU would.
"""

import argparse
import gc
import json
import os
import socket
import sys
import time

import torch
import torch.distributed as dist
from torch import nn
import torch.nn.functional as F


# F.scaled_dot_product_attention shares key/value heads across query groups itself from 2.5 (enable_gqa).
SDPA_GQA = tuple(int(part) for part in torch.__version__.split("+")[0].split(".")[:2]) >= (2, 5)


def rotary(seq, head_dim, device, theta=10000.0):
    """RoPE's cos and sin, (seq, head_dim) in the rotate-half layout (Su et al., arXiv 2104.09864; Llama's theta).

    PyTorch has no rotary module of its own (torchtune's is outside torch), so this is the one hand-written part.
    """
    inv_freq = 1.0 / theta ** (torch.arange(0, head_dim, 2, device=device, dtype=torch.float32) / head_dim)
    angles = torch.outer(torch.arange(seq, device=device, dtype=torch.float32), inv_freq)
    angles = torch.cat((angles, angles), dim=-1)
    return angles.cos(), angles.sin()


def apply_rotary(x, cos, sin):
    """Rotate (batch, heads, seq, head_dim) ``x`` by position: x*cos + rotate_half(x)*sin."""
    x1, x2 = x.chunk(2, dim=-1)
    return x * cos.to(x.dtype) + torch.cat((-x2, x1), dim=-1) * sin.to(x.dtype)


class Attention(nn.Module):
    """Causal grouped-query attention: ``heads`` query heads share ``kv_heads`` key/value heads."""

    def __init__(self, dim, heads, kv_heads):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, dim // heads
        self.wq = nn.Linear(dim, heads * self.head_dim, bias=False)
        self.wk = nn.Linear(dim, kv_heads * self.head_dim, bias=False)
        self.wv = nn.Linear(dim, kv_heads * self.head_dim, bias=False)
        self.wo = nn.Linear(heads * self.head_dim, dim, bias=False)

    def forward(self, x, cos, sin):
        b, t, dummy = x.shape
        q = self.wq(x).view(b, t, self.heads, self.head_dim).transpose(1, 2)
        k = self.wk(x).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.wv(x).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
        q, k = apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)
        if SDPA_GQA:
            att = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        else:
            groups = self.heads // self.kv_heads
            att = F.scaled_dot_product_attention(q, k.repeat_interleave(groups, dim=1),
                                                 v.repeat_interleave(groups, dim=1), is_causal=True)
        return self.wo(att.transpose(1, 2).reshape(b, t, self.heads * self.head_dim))


class FeedForward(nn.Module):
    """SwiGLU MLP (Shazeer, arXiv 2002.05202): w2(silu(w1 x) * w3 x)."""

    def __init__(self, dim, hidden):
        super().__init__()
        self.w1 = nn.Linear(dim, hidden, bias=False)
        self.w3 = nn.Linear(dim, hidden, bias=False)
        self.w2 = nn.Linear(hidden, dim, bias=False)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class Block(nn.Module):
    def __init__(self, dim, heads, kv_heads, ffn_hidden):
        super().__init__()
        self.attention_norm = nn.RMSNorm(dim, eps=1e-5)
        self.attention = Attention(dim, heads, kv_heads)
        self.ffn_norm = nn.RMSNorm(dim, eps=1e-5)
        self.feed_forward = FeedForward(dim, ffn_hidden)

    def forward(self, x, cos, sin):
        x = x + self.attention(self.attention_norm(x), cos, sin)
        return x + self.feed_forward(self.ffn_norm(x))


class Decoder(nn.Module):
    def __init__(self, vocab, dim, layers, heads, kv_heads, ffn_hidden):
        super().__init__()
        self.head_dim = dim // heads
        self.tok_embeddings = nn.Embedding(vocab, dim)
        self.layers = nn.ModuleList(Block(dim, heads, kv_heads, ffn_hidden) for dummy in range(layers))
        self.norm = nn.RMSNorm(dim, eps=1e-5)
        self.output = nn.Linear(dim, vocab, bias=False)

    def forward(self, idx):
        # cos/sin are recomputed, not buffers: DDP would broadcast buffers before every forward, a collective
        # inside compute_s that the straggler rule must not see.
        cos, sin = rotary(idx.shape[1], self.head_dim, idx.device)
        x = self.tok_embeddings(idx)
        for layer in self.layers:
            x = layer(x, cos, sin)
        return self.output(self.norm(x))


def llama_ffn_hidden(dim, multiple_of=32):
    """Llama's SwiGLU width: 2/3 of 4*dim (three matrices, the parameters of a 4*dim two-matrix MLP), rounded up."""
    hidden = int(2 * 4 * dim / 3)
    return multiple_of * ((hidden + multiple_of - 1) // multiple_of)


def sync(device):
    """Wait for the device's queued kernels (CUDA runs them asynchronously; a timing must include them)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def gemm_peak_tflops(size, repeats, device, dtype=torch.float32):
    """Dense GEMM throughput on ``device`` in ``dtype``: 2*n^3 FLOPs per matmul, best of ``repeats``."""
    a = torch.randn(size, size, device=device, dtype=dtype)
    b = torch.randn(size, size, device=device, dtype=dtype)
    torch.matmul(a, b)
    sync(device)
    best = float("inf")
    for dummy in range(repeats):
        start = time.perf_counter()
        torch.matmul(a, b)
        sync(device)
        best = min(best, time.perf_counter() - start)
    return 2.0 * size ** 3 / best / 1e12


def log(rank, message):
    if rank == 0:
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        print("[smoke] %s - root - INFO - %s" % (stamp, message), flush=True)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--dim", type=int, default=128)
    parser.add_argument("--heads", type=int, default=4, help="query heads")
    parser.add_argument("--kv-heads", type=int, default=0, help="key/value heads (GQA); 0: half of --heads")
    parser.add_argument("--ffn-hidden", type=int, default=0, help="SwiGLU width; 0: Llama's 8*dim/3 rounded up to 32")
    parser.add_argument("--seq", type=int, default=64)
    parser.add_argument("--vocab", type=int, default=512)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--gemm-size", type=int, default=1024)
    parser.add_argument("--gemm-repeats", type=int, default=5)
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--dtype", choices=("fp32", "bf16", "fp8"), default="fp32")
    parser.add_argument("--straggle-rank", type=int, default=-1)
    parser.add_argument("--straggle-s", type=float, default=0.0)
    args = parser.parse_args(argv)
    args.kv_heads = args.kv_heads or max(1, args.heads // 2)
    args.ffn_hidden = args.ffn_hidden or llama_ffn_hidden(args.dim)
    if args.dim % args.heads or (args.dim // args.heads) % 2 or args.heads % args.kv_heads:
        parser.error("--dim must split into --heads heads of even size, and --heads into --kv-heads groups")
    if not hasattr(nn, "RMSNorm"):
        print("smoke_unsupported: the Llama-style smoke model needs torch.nn.RMSNorm (PyTorch 2.4+; this is %s)"
              % torch.__version__, flush=True)
        return 3

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    if args.device == "cuda":
        if not torch.cuda.is_available():
            print("smoke_unsupported: PyTorch sees no CUDA device", flush=True)
            return 3
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
        torch.cuda.set_device(device)
    else:
        device = torch.device("cpu")
    float8 = None
    if args.dtype == "fp8":
        try:
            from torchao.float8 import convert_to_float8_training as float8
        except ImportError as exc:
            print("smoke_unsupported: fp8 training needs torchao.float8 (%s)" % exc, flush=True)
            return 3
    compute = torch.float32 if args.dtype == "fp32" else torch.bfloat16
    distributed = "WORLD_SIZE" in os.environ
    if distributed:
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    rank = dist.get_rank() if distributed else 0
    world = dist.get_world_size() if distributed else 1

    peak = gemm_peak_tflops(args.gemm_size, args.gemm_repeats, device, compute)
    peaks = [None] * world
    hosts = [None] * world
    if distributed:
        dist.all_gather_object(peaks, peak)
        dist.all_gather_object(hosts, socket.gethostname() + "/" + os.environ.get("SLURMD_NODENAME", ""))
    else:
        peaks, hosts = [peak], [socket.gethostname() + "/" + os.environ.get("SLURMD_NODENAME", "")]

    node_name = os.environ.get("SLURMD_NODENAME") or socket.gethostname()
    model = Decoder(args.vocab, args.dim, args.layers, args.heads, args.kv_heads, args.ffn_hidden).to(device)
    if float8 is not None:
        float8(model)
        log(rank, "Float8 training active (torchao convert_to_float8_training)")
    n_params = sum(p.numel() for p in model.parameters())
    # torchtitan (mfu.py F6): N_emb sums the parameters of the model's nn.Embedding children (here, as in
    # torchtitan's Llama, the token embedding only: RoPE has no parameters); H*Q counts the query heads.
    n_emb = sum(p.numel() for m in model.children() if isinstance(m, nn.Embedding) for p in m.parameters())
    head_dim = args.dim // args.heads
    flops_per_token = 6 * (n_params - n_emb) + 12 * args.layers * args.heads * head_dim * args.seq
    log(rank, "Model smoke decoder size: {:,} total parameters".format(n_params))
    log(rank, "Model shape: layers=%d dim=%d heads=%d kv_heads=%d ffn_hidden=%d seq=%d vocab=%d embedding_params=%d "
        "world_size=%d (Llama-style: RMSNorm, RoPE, SwiGLU, GQA)"
        % (args.layers, args.dim, args.heads, args.kv_heads, args.ffn_hidden, args.seq, args.vocab, n_emb, world))
    log(rank, "Peak FLOPS used for computing MFU: %.3e (measured: torch.matmul %s %dx%d on %s, %d thread(s))"
        % (peak * 1e12, str(compute).replace("torch.", ""), args.gemm_size, args.gemm_size, device, args.threads))
    log(rank, "Training on %s in %s" % (device, args.dtype))
    if distributed:
        model = nn.parallel.DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
    generator = torch.Generator().manual_seed(1000 + rank)
    post_warmup = []
    # the straggler rule's clock (module docstring): a GPU's wall time, a CPU's own CPU time
    compute_clock = time.perf_counter if device.type == "cuda" else time.process_time
    for step in range(1, args.steps + 1):
        tokens = torch.randint(0, args.vocab, (args.batch, args.seq + 1), generator=generator).to(device)
        sync(device)
        start = time.perf_counter()
        compute_start = compute_clock()
        with torch.autocast(device.type, dtype=compute, enabled=compute != torch.float32):
            logits = model(tokens[:, :-1])
            loss = F.cross_entropy(logits.reshape(-1, args.vocab).float(), tokens[:, 1:].reshape(-1))
        if rank == args.straggle_rank:
            busy_until = compute_clock() + args.straggle_s
            while compute_clock() < busy_until:
                pass
        sync(device)
        compute_s = compute_clock() - compute_start
        compute_wall_s = time.perf_counter() - start
        optimizer.zero_grad()
        loss.backward()
        grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        sync(device)
        elapsed = time.perf_counter() - start
        if distributed:
            dist.all_reduce(loss.detach(), op=dist.ReduceOp.AVG)
        tps = args.batch * args.seq / elapsed
        tflops = flops_per_token * tps / 1e12
        mfu = 100.0 * tflops / peak
        log(rank, "step: {:2}  loss: {:7.4f}  grad_norm: {:7.4f}  memory:  0.00GiB(0.00%)  tps: {:,}  "
            "tflops: {:,.2f}  mfu: {:.2f}%".format(step, loss.item(), float(grad_norm), round(tps), tflops, mfu))
        print("[rank%d]: rank_step: %s" % (rank, json.dumps({
            "rank": rank, "node": node_name, "step": step, "step_s": round(elapsed, 6),
            "compute_s": round(compute_s, 6), "compute_wall_s": round(compute_wall_s, 6)}, sort_keys=True)), flush=True)
        if step > args.warmup:
            post_warmup.append(tps)
    summary = {
        "world_size": world, "hosts": hosts, "gemm_peak_tflops": peaks, "params": n_params,
        "embedding_params": n_emb, "layers": args.layers, "hidden": args.dim, "heads": args.heads,
        "kv_heads": args.kv_heads, "head_dim": head_dim, "ffn_hidden": args.ffn_hidden, "swiglu": True,
        "seq_len": args.seq, "vocab": args.vocab, "flops_per_token": flops_per_token,
        "tokens_per_s_per_device": sum(post_warmup) / max(1, len(post_warmup)), "steps": args.steps,
        "warmup": args.warmup, "device": str(device), "dtype": args.dtype,
    }
    log(rank, "smoke_summary: " + json.dumps(summary, sort_keys=True))
    if distributed:
        # Tear down in order: every rank done with its collectives, then DDP's reducer (it holds the
        # process group and gloo work) before the group itself.  Destroying the group under a live
        # reducer aborts the process at exit ("terminate called without an active exception", SIGABRT)
        # in about 1 run in 6, which fails a run that had completed.
        dist.barrier()
        del model, optimizer
        gc.collect()
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
