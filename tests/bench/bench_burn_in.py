"""Burn-in time to verdict: a node that fails its first sanity test vs a node that runs every tier.

Real runs on this machine with the SKU's lab profile (hgx_h100_supermicro, profile lab: stress-ng 3 s, fio 2 s per
job, the kernel log, /proc and sysfs; GPU and power tiers are not_run here).  The failing node has an impossible
memory floor (memory_size, the cheapest node test, runs first) so fail-fast stops it before the stress tests.
Also the pulsating-power driver on CPU: a busy process as the fake GPU load, driven on a 1 s square wave with a
0.2 s ramp for 5 s; pulse_edge_error_ms is its largest edge error (the test needs <= 50 ms).
Writes build/bench/burn_in.json: fail_fast_verdict_s, all_tiers_s, fail_fast_ratio, pulse_edge_error_ms.
"""

import json
import os
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "build", "collections"))

from ansible_collections.symphony.cluster.plugins.module_utils._burnin import runner as B  # noqa: E402
from ansible_collections.symphony.cluster.plugins.module_utils._core import sku as _sku  # noqa: E402
from ansible_collections.symphony.cluster.plugins.module_utils._burnin.pulse import PulseDriver  # noqa: E402
from ansible_collections.symphony.cluster.plugins.module_utils._host.process import spawn  # noqa: E402


def verdict_time(manifest, overrides, node):
    with tempfile.TemporaryDirectory() as tmp:
        plan = B.build_plan(manifest, "lab", tiers=["node", "gpu", "power"], overrides=overrides)
        start = time.monotonic()
        out = B.run_burnin(node, manifest, plan, "bench", B.EvidenceStore(tmp, node, "bench"), profile="lab")
        elapsed = time.monotonic() - start
    return elapsed, out


def pulse_edge_error_ms():
    load = spawn([sys.executable, "-c", "while True: pass"])
    try:
        wave = PulseDriver(load.signal, period_s=1.0, duty_cycle=0.5, ramp_s=0.2, step_s=0.1).run(5.0)
    finally:
        load.stop(grace_s=2)
    return wave.max_edge_error_ms


def main():
    manifest = _sku.load_manifest(os.path.join(ROOT, "skus", "hgx_h100_supermicro.yml"))
    fail_s, failing = verdict_time(manifest, {"memory_size": {"thresholds": {"min_gib": 1e6}}}, "bad")
    assert failing["stopped_after"] == "memory_size", failing["stopped_after"]
    all_s, healthy = verdict_time(manifest, {}, "good")
    assert healthy["stopped_after"] is None and healthy["tiers"]["node"] != "fail", healthy["tiers"]
    result = {"fail_fast_verdict_s": round(fail_s, 3), "all_tiers_s": round(all_s, 3),
              "fail_fast_ratio": round(fail_s / all_s, 4), "pulse_edge_error_ms": pulse_edge_error_ms()}
    os.makedirs(os.path.join(ROOT, "build", "bench"), exist_ok=True)
    with open(os.path.join(ROOT, "build", "bench", "burn_in.json"), "w") as handle:
        json.dump(result, handle)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
