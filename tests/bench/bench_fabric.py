# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fabric localisation simulation: 1,024 nodes, k bad node interfaces AND k bad fabric links.

Fabric: a two-tier leaf/spine Clos (32 leaves x 32 nodes, 32 spines, one uplink cable per
leaf/spine: 1,024 uplinks) with deterministic symmetric ECMP (plugins/module_utils/_fabric/pairs.py
LeafSpineFabric).  Faults: k random node interfaces and k random leaf-spine uplinks, deterministic
(every test crossing a bad component fails).  Schedule: the adaptive scheduler (random perfect
matching, suspects re-paired with known-good nodes, suspect and never-exercised links probed by
known-good pairs) until it has nothing left to learn.  Precision = convicted components that are
truly bad / all convicted; recall = truly bad components convicted / all truly bad (ambiguous
verdicts count as misses, never as hits).  Each k runs TRIALS seeds; the JSON reports the worst
trial (max rounds, min precision, min recall) and the mean.  Writes build/bench/fabric.json.
"""

import json
import os
import pathlib
import random
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "build" / "collections"))

from ansible_collections.symphony.cluster.plugins.module_utils._fabric import pairs as F  # noqa: E402
from ansible_collections.symphony.cluster.plugins.module_utils._fabric import schedules as S  # noqa: E402

NODES, PER_LEAF, SPINES = 1024, 32, 32
TRIALS = int(os.environ.get("BENCH_FABRIC_TRIALS", "20"))


def trial(k, seed):
    rng = random.Random(seed)
    nodes = ["n%04d" % i for i in range(NODES)]
    fabric = F.LeafSpineFabric.uniform(nodes, PER_LEAF, SPINES)
    bad_if = set(rng.sample(nodes, k))
    bad_links = set(rng.sample(list(fabric.coverage_links()), k))
    truth = {(F.INTERFACE, n) for n in bad_if} | {(F.LINK, l) for l in bad_links}

    def run_round(number, pairs, tests):
        for a, b in pairs:
            hit = fabric.components(a, b) & truth
            tests.append(F.PairTest(a, b, F.FAIL if hit else F.OK, 10.0 if hit else 400.0, "Gb/s", number))
        return tests

    out = S.run_schedule(nodes, run_round, "adaptive", fabric, seed=seed, max_rounds=16)
    found = out["localisation"].bad
    tp = len(found & truth)
    precision = tp / len(found) if found else (1.0 if not truth else 0.0)
    recall = tp / len(truth)
    return out["rounds"], precision, recall


def main():
    result = {"nodes": NODES, "spines": SPINES, "nodes_per_leaf": PER_LEAF, "trials": TRIALS,
              "round_robin_rounds": len(S.round_robin(["n%04d" % i for i in range(NODES)]))}
    start = time.time()
    for k in (1, 4, 16):
        runs = [trial(k, 1000 * k + s) for s in range(TRIALS)]
        result["k%d_rounds" % k] = max(r[0] for r in runs)
        result["k%d_precision" % k] = min(r[1] for r in runs)
        result["k%d_recall" % k] = min(r[2] for r in runs)
        result["k%d_rounds_mean" % k] = round(sum(r[0] for r in runs) / len(runs), 2)
        result["k%d_precision_mean" % k] = round(sum(r[1] for r in runs) / len(runs), 4)
        result["k%d_recall_mean" % k] = round(sum(r[2] for r in runs) / len(runs), 4)
    result["wall_s"] = round(time.time() - start, 2)
    out = ROOT / "build" / "bench" / "fabric.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, sort_keys=True) + "\n")
    print(json.dumps(result, sort_keys=True))
    return 0 if result["k4_rounds"] <= 4 and result["k4_precision"] == 1.0 and result["k4_recall"] == 1.0 else 1


if __name__ == "__main__":
    sys.exit(main())
