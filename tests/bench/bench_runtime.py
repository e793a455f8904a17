"""Benchmark: the RAM-only runtime, built and booted in VM-backed emulator nodes (QEMU, TCG).

``image_build_s``: the last full build of ``images/runtime/build.sh`` (its ``build.json``; a cached rerun is not a
build); ``image_mib``: the ISO's size; ``boot_to_ssh_s_1`` / ``boot_to_ssh_s_4``: from the Redfish reset to the
runtime answering SSH (the slowest of the nodes), one node alone and four at once, each booted through its BMC
(InsertMedia, a one-time Cd override, Reset On). ``os_install_s``: one VM-backed node provisioned by the collection's
own stage with ``os_install`` on (``images/os`` image, built and cached like the runtime): from the start of the
``os_install`` check (image streamed over SSH, written, read back, Hdd boot, reset) to the end of ``os_boot`` (the
OS verified in-band from its disk), from the ledger's timestamps; ``os_image_mib``/``os_raw_mib``: the image's
compressed and raw sizes. Writes ``build/bench/runtime.json``. Goals: image <= 400 MiB, four nodes to SSH within 60 s.
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
from ansible_collections.symphony.cluster.plugins.module_utils._core.gate import new_run_id  # noqa: E402
from ansible_collections.symphony.cluster.plugins.module_utils._core.ledger import open_ledger  # noqa: E402
from ansible_collections.symphony.cluster.plugins.module_utils._core.sku import load_skus  # noqa: E402
from ansible_collections.symphony.cluster.plugins.module_utils._host.launchers import SSHLauncher  # noqa: E402
from ansible_collections.symphony.cluster.plugins.module_utils._provision.stage import (  # noqa: E402
    ProvisionSettings, run_stage)

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


def _os_install(tmp, runtime, iso, config, key):
    """Provision one VM-backed node with os_install on; returns os_install_s and the image sizes."""
    out_dir = ROOT / "build" / "os"
    subprocess.run([str(ROOT / "images" / "os" / "build.sh"), str(out_dir)], check=True)
    image = json.loads((out_dir / "build.json").read_text())
    skus = load_skus(str(ROOT / "skus"))
    manifest = dict(skus["hgx_h100_supermicro"])
    manifest["firmware"] = [c for c in manifest["firmware"] if c["phase"] == "out_of_band"]
    manifest["runtime"] = {"image_uri": "file://" + iso, "sha256": runtime["sha256"], "method": "virtual_media",
                           "boot_timeout_s": 600, "build_id": runtime["build_id"], "kernel_cmdline": runtime["cmdline"]}
    pins = ("sha256", "raw_sha256", "raw_bytes", "build_id", "root_label", "kernel", "os_release")
    manifest["os"] = dict({k: image[k] for k in pins}, image_uri="file://%s" % (out_dir / image["image"]),
                          kernel_cmdline=image["cmdline"], target_disk="/dev/vda", boot_timeout_s=600)
    host, ledger = HOSTS[0], os.path.join(tmp, "ledger.sqlite")
    with Fleet(TWIN, http=True, credentials="demo", hosts=[host], vm_nodes=[host], vm_dir=os.path.join(tmp, "vm-os"),
               map_path=os.path.join(tmp, "bmcs.json")) as fleet:
        ssh_config = os.path.join(tmp, "ssh_config")
        with open(ssh_config, "w", encoding="utf-8") as handle:
            handle.write("Host %s\n  HostName 127.0.0.1\n  Port %d\n  User root\n  IdentityFile %s\n"
                         "  StrictHostKeyChecking no\n  UserKnownHostsFile /dev/null\n  LogLevel ERROR\n"
                         % (host, fleet.map_data()["nodes"][host]["inband"]["port"], key))
        settings = ProvisionSettings(
            bmc_map=os.path.join(tmp, "bmcs.json"), ledger=ledger, runtime_probe="proof", runtime_boot="always",
            runtime_config_url="file://" + config, poll_s=1.0, optional=("tunings",), os_install=True,
            launcher=SSHLauncher(config_file=ssh_config, connect_timeout=10))
        run_id = new_run_id("prov")
        for phase in ("out_of_band", "verify"):
            out = run_stage({host: fleet.twin.nodes[host]}, dict(skus, hgx_h100_supermicro=manifest), settings, phase,
                            run_id=run_id)
        gate = out["hosts"][host]["gate"]
        if gate["status"] != "pass":
            raise SystemExit("os install bench: the node's gate is %s: %s" % (gate["status"], gate["reason"]))
    store = open_ledger(ledger)
    try:
        checks = {r.check: r for r in store.history(host, "provisioning") if r.run_id == run_id}
    finally:
        store.close()
    return {"os_install_s": round(checks["os_boot"].finished - checks["os_install"].started, 1),
            "os_image_mib": image["mib"], "os_raw_mib": round(image["raw_bytes"] / 1048576, 1),
            "os_build_id": image["build_id"]}


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
        result.update(_os_install(tmp, record, iso, config, key))
    result["load_average_1m"] = round(os.getloadavg()[0], 2)
    (ROOT / "build" / "bench").mkdir(parents=True, exist_ok=True)
    (ROOT / "build" / "bench" / "runtime.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
