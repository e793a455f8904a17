"""Scenario helper: write the emulator's demo images, reset or read every BMC's write counters.

    emu.py images <skus dir> <out dir>       one file per manifest image (basename of image.uri)
    emu.py reset-stats <bmcs.json>           DELETE /_emulator/stats on every BMC
    emu.py stats <bmcs.json> <out.json>      {host: writes, ...} and each BMC's write log
"""
import json
import os
import ssl
import sys
import urllib.request
from urllib.parse import urlsplit

from symphony_emulator import demo_image_bytes
from ansible_collections.symphony.cluster.plugins.module_utils._core.sku import load_skus


def _call(url, method, ca):
    ctx = ssl.create_default_context(cafile=ca) if url.startswith("https") else None
    req = urllib.request.Request(url, method=method)
    with urllib.request.urlopen(req, context=ctx, timeout=10) as rsp:
        return json.loads(rsp.read().decode())


def main(argv):
    if argv[0] == "images":
        for sku, manifest in load_skus(argv[1]).items():
            for comp in manifest["firmware"]:
                if comp.get("image"):
                    name = os.path.basename(urlsplit(comp["image"]["uri"]).path)
                    with open(os.path.join(argv[2], name), "wb") as handle:
                        handle.write(demo_image_bytes(sku, comp["id"], comp["target"]))
        return 0
    bmc_map = json.load(open(argv[1]))
    out = {}
    for host, node in bmc_map["nodes"].items():
        try:
            stats = _call(node["url"] + "/_emulator/stats", "DELETE" if argv[0] == "reset-stats" else "GET",
                          bmc_map.get("ca_bundle"))
            out[host] = {"writes": stats["writes"], "write_log": stats["write_log"]}
        except OSError as exc:
            out[host] = {"writes": None, "error": str(exc)}
    if argv[0] == "stats":
        with open(argv[2], "w") as handle:
            json.dump(out, handle, indent=2, sort_keys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
