# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Inventory bench: load and group a generated 10,000-node twin through the symphony.cluster.twin plugin.

The twin (250 racks x 40 nodes of hgx_h100_supermicro, each with 8 fabric links, as in the demo twin) is written
to a temp dir with an inventory source naming it (`twin: fleet.yml`) and a ledger holding a gate for 1,000
nodes.  What is timed is what `ansible-inventory` does: InventoryManager parsing the source with the plugin
(twin load, JSON Schema + cross-field validation, SKU manifests, netaddr planning, ledger read, hosts, vars,
groups).

load_s: the twin as JSON (valid YAML 1.2, what a DCIM/NetBox export gives; the loader's JSON fast path),
median of 3 runs; goal <= 2 s (issue "Collection foundation").  load_yaml_s: the same twin written as block
YAML, median of 3 runs interleaved with the JSON ones; yaml_json_ratio = load_yaml_s / load_s (issue 27: <= 1.5);
yaml_fast_path (ryaml read it: schema._fast_yaml, used where it provably reads what PyYAML reads) and yaml_c_loader
(whether PyYAML has libyaml's CSafeLoader, the loader otherwise).
Writes build/bench/inventory.json.
"""

import json
import os
import pathlib
import statistics
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
COLL_ROOT = ROOT / "build" / "collections"
NODES, PER_RACK, RAILS, RUNS = 10000, 40, 8, 3

os.environ["ANSIBLE_INVENTORY_ENABLED"] = "symphony.cluster.twin"
os.environ.setdefault("ANSIBLE_COLLECTIONS_PATH", str(COLL_ROOT))

from ansible.plugins.loader import init_plugin_loader  # noqa: E402

init_plugin_loader([str(COLL_ROOT)])  # before anything imports ansible_collections.symphony

from ansible.inventory.manager import InventoryManager  # noqa: E402
from ansible.parsing.dataloader import DataLoader  # noqa: E402
import yaml  # noqa: E402

from ansible_collections.symphony.cluster.plugins.module_utils._core import schema as _schema  # noqa: E402


def write_twin(directory):
    lines = ["twin_version: 1", "sites:", "  - name: bench", "    racks:"]
    for r in range(NODES // PER_RACK):
        lines += ["      - name: r%03d" % r, "        bmc_subnet: 10.%d.%d.0/24" % (100 + r // 250, r % 250),
                  "        bmc_first_host: 10", "        nodes:"]
        for i in range(PER_RACK):
            n = r * PER_RACK + i
            lines += ["          - hostname: gpu-r%03d-u%02d" % (r, i + 1), "            u: %d" % (i + 1),
                      "            sku: hgx_h100_supermicro", "            serial: C8010MM%08d" % n,
                      "            bmc_mac: 3c:ec:%02x:%02x:%02x:%02x" % (
                          n >> 24 & 255, n >> 16 & 255, n >> 8 & 255, n & 255),
                      "            inband_address: 10.%d.%d.%d" % (200 + r // 250, r % 250, 10 + i),
                      "            fabric:"]
            # 8 racks per leaf: ports 1..8*PER_RACK, each cabled once (the twin refuses a port used twice)
            lines += ["              - {rail: %d, leaf: leaf-%03d-%d, port: %d}" % (k, r // 8, k, n % (8 * PER_RACK) + 1)
                      for k in range(RAILS)]
    (directory / "fleet.yml").write_text("\n".join(lines) + "\n")
    data = yaml.load((directory / "fleet.yml").read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    (directory / "fleet.json").write_text(json.dumps(data))
    sources = {}
    for fmt in ("yml", "json"):
        sources[fmt] = directory / ("fleet-%s.twin.yml" % fmt)
        sources[fmt].write_text("plugin: symphony.cluster.twin\ntwin: fleet.%s\nsku_dir: %s\nledger: %s\n"
                                % (fmt, ROOT / "skus", directory / "ledger.sqlite"))
    return sources


def write_ledger(directory):
    from ansible_collections.symphony.cluster.plugins.module_utils._core import gate as _gate
    from ansible_collections.symphony.cluster.plugins.module_utils._core import ledger as _ledger
    ledger = _ledger.open_ledger(str(directory / "ledger.sqlite"))
    for n in range(0, NODES, 10):
        host = "gpu-r%03d-u%02d" % (n // PER_RACK, n % PER_RACK + 1)
        ledger.record_gate(_gate.GateVerdict(host, "pre_deployment", "pass" if n % 20 else "fail", ""), "bench")
    ledger.close()


def main():
    with tempfile.TemporaryDirectory() as tmp:
        directory = pathlib.Path(tmp)
        sources = write_twin(directory)
        write_ledger(directory)
        times, yaml_times = [], []
        # interleaved, so a machine whose load changes mid-run weighs on both formats alike
        for fmt, into in [("json", times), ("yml", yaml_times)] * RUNS:
            start = time.perf_counter()
            inventory = InventoryManager(loader=DataLoader(), sources=[str(sources[fmt])], cache=False)
            into.append(time.perf_counter() - start)
            hosts, groups = len(inventory.hosts), inventory.groups
            if hosts != NODES or len(groups["stage_pre_deployment"].get_hosts()) != NODES // 10:
                print("inventory incomplete (%s): %d hosts" % (fmt, hosts), file=sys.stderr)
                return 1
        result = {"nodes": hosts, "load_s": round(statistics.median(times), 3), "load_min_s": round(min(times), 3),
                  "load_yaml_s": round(statistics.median(yaml_times), 3), "groups": len(groups),
                  # issue 27's figure (goal <= 1.5): medians of RUNS loads each
                  "yaml_json_ratio": round(statistics.median(yaml_times) / statistics.median(times), 2),
                  "yaml_c_loader": getattr(yaml, "CSafeLoader", None) is not None,
                  # ryaml read the twin (schema._fast_yaml), not PyYAML
                  "yaml_fast_path": _schema._fast_yaml((directory / "fleet.yml").read_text()) is not None,
                  "twin_json_mib": round((directory / "fleet.json").stat().st_size / 2**20, 1),
                  "twin_yaml_mib": round((directory / "fleet.yml").stat().st_size / 2**20, 1),
                  "goal_load_s": 2.0}
    out = ROOT / "build" / "bench" / "inventory.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result) + "\n")
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
