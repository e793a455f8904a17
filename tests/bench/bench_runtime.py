"""Benchmark: the RAM-only runtime, built and booted in VM-backed emulator nodes (QEMU, TCG).

``image_build_s``: the last full build of ``images/runtime/build.sh`` (its ``build.json``; a cached rerun is not a
build); ``image_mib``: the ISO's size; ``boot_to_ssh_s_1`` / ``boot_to_ssh_s_4``: from the Redfish reset to the
runtime answering SSH (the slowest of the nodes), one node alone and four at once, each booted through its BMC
(InsertMedia, a one-time Cd override, Reset On). ``os_install_s`` is null: the OS install step is not built yet.
Writes ``build/bench/runtime.json``. Goals: image <= 400 MiB, four nodes to SSH within 60 s.
"""

import base64
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))

from symphony_emulator import Fleet  # noqa: E402

TWIN = ROOT / "molecule" / "provisioning" / "provisioning.twin.yml"
HOSTS = ["pv-u02", "pv-u06", "pv-u10", "pv-u14"]


def _call(node, method, path, body):
    req = urllib.request.Request(node.url + path, method=method, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json", "Authorization": "Basic " + base64.b64encode(
                                     ("%s:%s" % (node.username, node.password)).encode()).decode()})
    urllib.request.urlopen(req, timeout=120).close()


def _boot(fleet, hosts, iso, config, key, timeout_s=900):
    started = {}
    for host in hosts:
        node, spec = fleet.nodes[host], fleet.bmc(host).spec
        _call(node, "POST", spec.M + "/VirtualMedia/CD1/Actions/VirtualMedia.InsertMedia", {"Image": "file://" + iso})
        _call(node, "POST", spec.M + "/VirtualMedia/USB1/Actions/VirtualMedia.InsertMedia", {"Image": "file://" + config})
        _call(node, "PATCH", spec.S, {"Boot": {"BootSourceOverrideTarget": "Cd", "BootSourceOverrideEnabled": "Once"}})
    for host in hosts:
        started[host] = time.monotonic()
        _call(fleet.nodes[host], "POST", fleet.bmc(host).spec.S + "/Actions/ComputerSystem.Reset", {"ResetType": "On"})
    up = {}
    inband = fleet.map_data()["nodes"]
    while len(up) < len(hosts):
        for host in hosts:
            if host in up:
                continue
            r = subprocess.run(["ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=5", "-o", "StrictHostKeyChecking=no",
                                "-o", "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR", "-i", key,
                                "-p", str(inband[host]["inband"]["port"]), "root@127.0.0.1", "true"],
                               capture_output=True, timeout=60, check=False)
            if r.returncode == 0:
                up[host] = time.monotonic() - started[host]
        if time.monotonic() - min(started.values()) > timeout_s:
            raise SystemExit("runtime did not answer SSH within %ds on %s" % (timeout_s, sorted(set(hosts) - set(up))))
        time.sleep(1)
    return round(max(up.values()), 1)


def main():
    out_dir = ROOT / "build" / "runtime"
    subprocess.run([str(ROOT / "images" / "runtime" / "build.sh"), str(out_dir)], check=True)
    record = json.loads((out_dir / "build.json").read_text())
    iso = str(out_dir / record["iso"])
    result = {"image_build_s": record["build_s"], "image_mib": round(os.path.getsize(iso) / 1048576, 1),
              "build_id": record["build_id"]}
    with tempfile.TemporaryDirectory() as tmp:
        key = os.path.join(tmp, "key")
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", key], check=True)
        config = os.path.join(tmp, "config.iso")
        subprocess.run([str(ROOT / "images" / "runtime" / "config-medium.sh"), config, key + ".pub"], check=True)
        for count in (1, 4):
            hosts = HOSTS[:count]
            with Fleet(TWIN, http=True, credentials="demo", hosts=hosts, vm_nodes=hosts,
                       vm_dir=os.path.join(tmp, "vm%d" % count)) as fleet:
                result["boot_to_ssh_s_%d" % count] = _boot(fleet, hosts, iso, config, key)
    result["os_install_s"] = None
    result["os_install"] = "not_run: the OS install step is not built yet (issue 22 item 5)"
    result["load_average_1m"] = round(os.getloadavg()[0], 2)
    (ROOT / "build" / "bench").mkdir(parents=True, exist_ok=True)
    (ROOT / "build" / "bench" / "runtime.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
