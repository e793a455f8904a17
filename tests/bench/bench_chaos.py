"""Benchmark: the chaos suite of issue 25 (tests/integration/chaos_scenarios.py) over the emulated fleet.

Writes build/bench/chaos.json with ``scenarios`` (how many ran), the sums over them of ``false_pass``,
``false_fail``, ``lost_rows``, ``secret_hits`` and ``duplicate_writes`` (each must be 0), ``invalid`` (scenarios
that did not stage what they test), ``wall_s``, and ``per_scenario`` (each scenario's counts and notes).
Exits 1 when any sum is not 0.  Environment: CHAOS_SCENARIOS (comma-separated names; default all).
"""

import json
import os
import pathlib
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
OUT = ROOT / "build" / "bench"
sys.path[:0] = [str(ROOT / "tests" / "integration"), str(ROOT / "build" / "collections"), str(ROOT / "tools")]

import chaos_scenarios  # noqa: E402

KEYS = ("false_pass", "false_fail", "lost_rows", "secret_hits", "duplicate_writes")


def main():
    names = [n for n in os.environ.get("CHAOS_SCENARIOS", "").split(",") if n] or None
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="chaos-") as work:
        base, results = chaos_scenarios.run_all(work, names)
    doc = {"scenarios": len(results), "baseline": base}
    doc.update({key: sum(r[key] for r in results) for key in KEYS})
    doc["invalid"] = [r["scenario"] for r in results if not r.get("valid", True)]
    doc["wall_s"] = round(time.monotonic() - started, 1)
    doc["per_scenario"] = results
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "chaos.json").write_text(json.dumps(doc, indent=2) + "\n")
    print(json.dumps({k: doc[k] for k in ("scenarios",) + KEYS + ("invalid", "wall_s")}))
    return 1 if any(doc[k] for k in KEYS) or doc["invalid"] else 0


if __name__ == "__main__":
    sys.exit(main())
