"""The cabling check and the topology.conf writer at scale: 1,024 nodes x 8 InfiniBand HCAs (8,192 ports).

Inputs are recorded-output shapes, generated: per node an ``ibstat`` of 8 CAs in the line shape of the shared
capture (fixtures/tool-outputs/ibstat-h100-some-down-polling-gpud.txt), one fabric-wide ``iblinkinfo`` whose CA
lines have the shape of the public QDR sample (tests/unit/fabric/data/ib_qdr_fabric.txt) at NDR lane rate, and a
rail-optimised plan: scalable units of 32 nodes, one leaf per rail per unit, spines above.  One swapped pair and
one port trained at 1X are seeded so the slow paths run too.
Writes build/bench/topology.json: check_s_1024 (the issue asks <= 5 s), topology_conf_s_1024, ports, swaps.
"""

import json
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "build", "collections"))

from ansible_collections.symphony.cluster.plugins.module_utils._fabric import topology as T  # noqa: E402
from ansible_collections.symphony.cluster.plugins.module_utils._fabric.cabling_gate import (  # noqa: E402
    cabling_checks, rated_from_gbps)

NODES, HCAS, UNIT = 1024, 8, 32
CA = ("CA 'mlx5_{i}'\n\tCA type: MT4129\n\tNumber of ports: 1\n\tFirmware version: 28.39.1002\n\tHardware version: 0\n"
      "\tNode GUID: 0x{guid}\n\tSystem image GUID: 0x{guid}\n\tPort 1:\n\t\tState: Active\n\t\tPhysical state: LinkUp\n"
      "\t\tRate: 400\n\t\tBase lid: {lid}\n\t\tLMC: 0\n\t\tSM lid: 1\n\t\tCapability mask: 0x2651e848\n"
      "\t\tPort GUID: 0x{guid}\n\t\tLink layer: InfiniBand\n")
LINE = ('      0x{guid}  {lid:5d}    1[  ] ==( {width}         106.25 Gbps Active/  LinkUp)==>  {sl:5d}   {port:2d}[  ] '
        '"MF0;{leaf}:MQM9700/U1" ( )\n')


def _leaf(n, rail):
    return "su%02d-rail%d" % (n // UNIT, rail)


def fleet():
    nodes, scan = {}, []
    for n in range(NODES):
        host = "gpu%04d" % (n + 1)
        links, ibstat = [], []
        for i in range(HCAS):
            guid = "%04x%012x" % (0xa088, n * HCAS + i + 1)
            lid = n * HCAS + i + 10
            links.append({"rail": i, "leaf": _leaf(n, i), "port": n % UNIT + 1, "nic": "mlx5_%d" % i, "hca_port": 1})
            ibstat.append(CA.format(i=i, guid=guid, lid=lid))
            leaf, port, width = _leaf(n, i), n % UNIT + 1, "4X"
            if n == 5 and i in (2, 3):  # the swapped pair: rails 2 and 3 of gpu0006 on each other's leaf
                leaf = _leaf(n, 5 - i)
            if n == 700 and i == 7:
                width = "1X"
            line = LINE.format(guid=guid, lid=lid, width=width, sl=2, port=port, leaf=leaf)
            scan.append("CA: %s mlx5_%d:\n" % (host, i) + line)
        nodes[host] = {"twin": {"hostname": host, "site": "s1", "fabric": links, "nvlink_domain": None},
                       "required": True, "ibstat": "".join(ibstat)}
    switches = {}
    for unit in range(NODES // UNIT):
        for rail in range(HCAS):
            switches[_leaf(unit * UNIT, rail)] = {"name": _leaf(unit * UNIT, rail), "tier": "leaf", "rail": rail,
                                                  "uplinks": ["spine%d" % s for s in range(4)]}
    return nodes, "".join(scan), {"s1": {"rail_optimised": True, "switches": switches}}


def main():
    nodes, scan, site = fleet()
    start = time.monotonic()
    out = cabling_checks(nodes, scan, site, rated_from_gbps(400))
    check_s = time.monotonic() - start
    statuses = [c["status"] for c in out["checks"].values()]
    assert statuses.count("fail") == 2 and statuses.count("pass") == NODES - 2, statuses.count("fail")
    assert len(out["swaps"]) == 1
    start = time.monotonic()
    conf = T.render_tree(T.tree(out["found"], site["s1"]["switches"]))
    conf_s = time.monotonic() - start
    # one Slurm switch per scalable unit (the swapped pair stays within its unit's leaves) and one over the spines
    assert conf.count("SwitchName=") == NODES // UNIT + 1, conf.count("SwitchName=")
    result = {"check_s_1024": round(check_s, 3), "topology_conf_s_1024": round(conf_s, 3),
              "ports": NODES * HCAS, "swaps": len(out["swaps"]), "check_limit_s": 5.0}
    os.makedirs(os.path.join(ROOT, "build", "bench"), exist_ok=True)
    with open(os.path.join(ROOT, "build", "bench", "topology.json"), "w", encoding="utf-8") as handle:
        json.dump(result, handle, indent=2)
    print(json.dumps(result))
    return 0 if check_s <= 5.0 else 1


if __name__ == "__main__":
    sys.exit(main())
