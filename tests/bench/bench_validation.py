"""Telemetry outlier analysis at cluster scale: 512 GPUs x 3,600 samples (goal < 1 s).

Writes build/bench/validation.json: {"gpus": 512, "samples": 3600, "outlier_analysis_s": ...}
(best of 5 runs of find_outliers over a seeded trace with one GPU 20 °C hotter).
"""

import json
import os
import pathlib
import sys
import time

from ansible_collections.symphony.cluster.plugins.module_utils._validation import outliers as ot

ROOT = pathlib.Path(__file__).resolve().parents[2]


def main():
    trace = ot.synthetic_trace(nodes=64, gpus_per_node=8, samples=3600, seed=0, hot=(40, 7, 20.0))
    times = []
    for _repeat in range(5):
        start = time.perf_counter()
        found = ot.find_outliers(trace, max_operating_temp_c=85.0)
        times.append(time.perf_counter() - start)
    assert [(o["node"], o["gpu"]) for o in found] == [("node040", 7)], found
    result = {"gpus": len(trace.gpus), "samples": trace.samples, "outlier_analysis_s": round(min(times), 4)}
    out = ROOT / "build" / "bench"
    os.makedirs(out, exist_ok=True)
    (out / "validation.json").write_text(json.dumps(result) + "\n")
    print(json.dumps(result))
    return 0 if result["outlier_analysis_s"] < 1.0 else 1


if __name__ == "__main__":
    sys.exit(main())
