# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# Apache License 2.0 (see LICENSE)
"""Smoke pretraining workload for cluster_validation (CI and the lab on CPUs; one GPU in tests/device).

A small decoder-only transformer trained with DistributedDataParallel over gloo,
launched by torchrun (one process per node).  Before training it measures the
device's dense GEMM peak with a timed ``torch.matmul`` (on the CPU: the same threads), then prints
torchtitan's own log lines (``step: .. loss: .. tps: .. tflops: .. mfu: ..%``) so
the same parser reads both.  The FLOPs per token are torchtitan's convention
``6*(N - N_emb) + 12*L*H*Q*T``; ``tps`` is tokens/s per process (per device, as
torchtitan prints it).  Data are random token ids (a smoke test of the launch
path, the collective and the arithmetic, not of learning).

``--device cuda`` trains on the process's GPU (``LOCAL_RANK``; NCCL when distributed); ``--dtype bf16`` runs
forward and loss under ``torch.autocast`` in bfloat16 (fp32 master weights), ``--dtype fp8`` additionally swaps
the Linear layers for torchao's float8 training layers and exits 3 saying so where torchao is not installed.

Every rank prints its own step times, for the straggler rule (``_validation/stragglers.py``)::

    rank_step: {"rank": 1, "node": "lab2", "step": 3, "step_s": 0.051, "compute_s": 0.012}

``compute_s`` is forward and loss, before DDP's gradient all-reduce makes every rank wait for the slowest.
``--straggle-rank R --straggle-s S`` (the lab's injection, never set in production) adds S seconds of busy
compute to rank R's forward, as a slow GPU would.
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


class Block(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim, bias=False)
        self.proj = nn.Linear(dim, dim, bias=False)
        self.norm2 = nn.LayerNorm(dim)
        self.up = nn.Linear(dim, 4 * dim, bias=False)
        self.down = nn.Linear(4 * dim, dim, bias=False)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        att = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(att.transpose(1, 2).reshape(b, t, d))
        return x + self.down(F.gelu(self.up(self.norm2(x))))


class Decoder(nn.Module):
    def __init__(self, vocab, dim, layers, heads, seq):
        super().__init__()
        self.tok = nn.Embedding(vocab, dim)
        self.pos = nn.Embedding(seq, dim)
        self.blocks = nn.ModuleList(Block(dim, heads) for dummy in range(layers))
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)

    def forward(self, idx):
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))


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
    parser.add_argument("--heads", type=int, default=4)
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
    model = Decoder(args.vocab, args.dim, args.layers, args.heads, args.seq).to(device)
    if float8 is not None:
        float8(model)
        log(rank, "Float8 training active (torchao convert_to_float8_training)")
    n_params = sum(p.numel() for p in model.parameters())
    n_emb = model.tok.weight.numel()
    # torchtitan: 6*(N - N_emb) + 12*L*H*Q*T with H*Q = dim.  (Position embeddings are
    # embeddings too; torchtitan's Llama has none, so only the token embedding is subtracted.)
    flops_per_token = 6 * (n_params - n_emb) + 12 * args.layers * args.dim * args.seq
    log(rank, "Model smoke decoder size: {:,} total parameters".format(n_params))
    log(rank, "Model shape: layers=%d dim=%d heads=%d seq=%d vocab=%d embedding_params=%d world_size=%d"
        % (args.layers, args.dim, args.heads, args.seq, args.vocab, n_emb, world))
    log(rank, "Peak FLOPS used for computing MFU: %.3e (measured: torch.matmul %s %dx%d on %s, %d thread(s))"
        % (peak * 1e12, str(compute).replace("torch.", ""), args.gemm_size, args.gemm_size, device, args.threads))
    log(rank, "Training on %s in %s" % (device, args.dtype))
    if distributed:
        model = nn.parallel.DistributedDataParallel(model, device_ids=[device.index] if device.type == "cuda" else None)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
    generator = torch.Generator().manual_seed(1000 + rank)
    post_warmup = []
    for step in range(1, args.steps + 1):
        tokens = torch.randint(0, args.vocab, (args.batch, args.seq + 1), generator=generator).to(device)
        sync(device)
        start = time.perf_counter()
        with torch.autocast(device.type, dtype=compute, enabled=compute != torch.float32):
            logits = model(tokens[:, :-1])
            loss = F.cross_entropy(logits.reshape(-1, args.vocab).float(), tokens[:, 1:].reshape(-1))
        if rank == args.straggle_rank:
            busy_until = time.perf_counter() + args.straggle_s
            while time.perf_counter() < busy_until:
                pass
        sync(device)
        compute_s = time.perf_counter() - start
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
            "compute_s": round(compute_s, 6)}, sort_keys=True)), flush=True)
        if step > args.warmup:
            post_warmup.append(tps)
    summary = {
        "world_size": world, "hosts": hosts, "gemm_peak_tflops": peaks, "params": n_params,
        "embedding_params": n_emb, "layers": args.layers, "hidden": args.dim, "heads": args.heads,
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
