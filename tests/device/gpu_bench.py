"""The GPU machine's measured dense matmul rate, the yardstick the smoke model's MFU is judged by (issue 20).

``python gpu_bench.py OUT.json``: an n x n x n product (n = 8192) of random bf16 matrices, 3 warm-ups, then
10 products timed together with CUDA events (2 n^3 FLOPs each); fp8 (e4m3, ``torch._scaled_mm`` with unit scales,
bf16 out) the same way where the installed PyTorch and the GPU support it (compute capability 8.9 or later).
The same method as KINDS.md's reading on this machine (788 TFLOP/s bf16 on random data, 2026-10-28), so the two
can be compared.  Writes ``{status, reason, device, torch, capability, bf16: {...}, fp8: {...}}``; without PyTorch
or a CUDA device the status is ``not_run`` with the reason, never a figure.
"""

import json
import sys

try:
    import torch
    TORCH_ERROR = None
except ImportError as exc:  # the device image has PyTorch; a bare machine says so
    torch = None
    TORCH_ERROR = str(exc)

N, WARMUP, REPEATS = 8192, 3, 10


def timed(product, n, repeats=REPEATS, warmup=WARMUP):
    """``{tflops, ms_per_product, n, repeats}`` of ``product()`` (one n^3 product per call), timed by CUDA events."""
    for _warm in range(warmup):
        product()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _rep in range(repeats):
        product()
    end.record()
    end.synchronize()
    ms = start.elapsed_time(end) / repeats
    return {"status": "ran", "tflops": round(2.0 * n ** 3 / (ms / 1e3) / 1e12, 1), "ms_per_product": round(ms, 4),
            "n": n, "repeats": repeats}


def bf16_rate(n=N):
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    out = torch.empty(n, n, device="cuda", dtype=torch.bfloat16)
    return timed(lambda: torch.matmul(a, b, out=out), n)


def fp8_rate(n=N):
    """fp8 e4m3 x e4m3 -> bf16 through ``torch._scaled_mm`` (mat2 column-major, as cuBLASLt wants it)."""
    capability = torch.cuda.get_device_capability()
    if capability < (8, 9) or not hasattr(torch, "_scaled_mm") or not hasattr(torch, "float8_e4m3fn"):
        return {"status": "not_run", "reason": "fp8 matmul needs compute capability 8.9+ and torch._scaled_mm "
                                               "(GPU %d.%d, PyTorch %s)" % (capability + (torch.__version__,))}
    a = torch.randn(n, n, device="cuda").to(torch.float8_e4m3fn)
    b = torch.randn(n, n, device="cuda").to(torch.float8_e4m3fn).t()
    one = torch.tensor(1.0, device="cuda")
    try:
        return timed(lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16), n)
    except (RuntimeError, TypeError) as exc:  # an fp8 path this PyTorch build lacks
        return {"status": "not_run", "reason": "torch._scaled_mm failed: %s" % str(exc).splitlines()[0][:200]}


def measure():
    if torch is None:
        return {"status": "not_run", "reason": "PyTorch is not importable: %s" % TORCH_ERROR}
    if not torch.cuda.is_available():
        return {"status": "not_run", "reason": "PyTorch %s sees no CUDA device" % torch.__version__}
    out = {"status": "ran", "reason": "", "device": torch.cuda.get_device_name(), "torch": torch.__version__,
           "capability": list(torch.cuda.get_device_capability()), "bf16": bf16_rate()}
    out["fp8"] = fp8_rate()
    return out


def main(argv):
    result = measure()
    with open(argv[1], "w", encoding="utf-8") as handle:
        json.dump(result, handle, indent=1)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
