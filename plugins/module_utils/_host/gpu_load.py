# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The built-in GPU load: dense bf16 matrix products through PyTorch, for nodes without gpu-burn or DCGM.

The programs are text run as ``python -c`` by the node's own interpreter, so they travel inside the module
(AnsiballZ) and need nothing installed but PyTorch.  :data:`PYTORCH_LOAD` takes the duration in seconds as its
argument and keeps every visible CUDA device busy with 8192 x 8192 x 8192 bf16 products (2 x 8192^3 FLOPs each)
until then; it synchronises every few products so that SIGSTOP (the pulsating power test's off phase) idles the
GPUs within milliseconds rather than after a long queue.  It prints one ``pytorch load:`` line per device at the
end.  :data:`PYTORCH_PROBE` exits 0 when PyTorch sees a CUDA device, :data:`NO_CUDA_RC` (and says why) otherwise.
"""

from __future__ import annotations

# Exit status of both programs when PyTorch sees no CUDA device (no driver, a CPU-only build).
NO_CUDA_RC = 3

PYTORCH_PROBE = """
import sys
import torch
if not torch.cuda.is_available():
    print("PyTorch %s sees no CUDA device" % torch.__version__)
    sys.exit(3)
print("PyTorch %s, %d CUDA device(s): %s" % (torch.__version__, torch.cuda.device_count(),
      ", ".join(torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count()))))
"""

PYTORCH_LOAD = """
import sys
import time
import torch
duration = float(sys.argv[1])
if not torch.cuda.is_available():
    print("pytorch load: PyTorch %s sees no CUDA device" % torch.__version__)
    sys.exit(3)
N, BATCH = 8192, 8
devices = [torch.device("cuda", i) for i in range(torch.cuda.device_count())]
mats = [(torch.randn(N, N, device=d, dtype=torch.bfloat16), torch.randn(N, N, device=d, dtype=torch.bfloat16))
        for d in devices]
outs = [torch.empty(N, N, device=d, dtype=torch.bfloat16) for d in devices]
count = 0
start = time.monotonic()
while time.monotonic() - start < duration:
    for (a, b), out in zip(mats, outs):
        for _ in range(BATCH):
            torch.matmul(a, b, out=out)
    for d in devices:
        torch.cuda.synchronize(d)
    count += BATCH
elapsed = time.monotonic() - start
for d in devices:
    print("pytorch load: %s %s: %d bf16 %dx%d products in %.1f s (wall clock, pauses included)"
          % (d, torch.cuda.get_device_name(d), count, N, N, elapsed), flush=True)
"""
