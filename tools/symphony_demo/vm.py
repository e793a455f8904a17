"""``make demo``'s VM-backed nodes: two nodes whose emulated BMC drives a real QEMU guest (issue 22).

The collection's own ``playbooks/provisioning.yml`` runs on them (``inventories/demo-vm``): the runtime built by
``images/runtime`` booted through VirtualMedia, proven in-band, firmware and BIOS out-of-band, tunings in the guest's
own kernel, then the OS image built by ``images/os`` written to the guest's qcow2 disk and booted from it.  Their
gate rows go to ``build/demo/vm/ledger.sqlite`` and the report ``build/demo/vm/report`` with each guest's serial
console beside it.  The images are cached under ``build/runtime`` and ``build/os`` and the guests' disks under
``build/demo/vm/guests``: a second ``make demo`` rebuilds nothing and finds both nodes already on the pinned OS.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
VM = ROOT / "build" / "demo" / "vm"
TWIN = ROOT / "inventories" / "demo-vm" / "vm.twin.yml"
SKU = "hgx_h100_supermicro"
CHECKS = ("runtime_boot", "runtime_proof", "bios_settings", "tunings", "verify", "os_install", "os_boot")


def build_images():
    """The runtime ISO and the OS image (cached: a rerun with the same inputs returns at once); their build.json."""
    out = {}
    for name, script in (("runtime", "images/runtime/build.sh"), ("os", "images/os/build.sh")):
        subprocess.run([str(ROOT / script), str(ROOT / "build" / name)], check=True, cwd=ROOT)
        out[name] = json.loads((ROOT / "build" / name / "build.json").read_text())
    return out


def write_sku(images):
    """The shipped SKU pinned to this machine's builds, without in-band firmware (a guest has no GPU or NIC to
    flash), in build/demo/vm/skus (the VM twin's sku_dir)."""
    import yaml
    sku = yaml.safe_load((ROOT / "skus" / ("%s.yml" % SKU)).read_text())
    runtime, image = images["runtime"], images["os"]
    sku["firmware"] = [c for c in sku["firmware"] if c["phase"] == "out_of_band"]
    sku["runtime"] = {"image_uri": "file://%s" % (ROOT / "build" / "runtime" / runtime["iso"]),
                      "sha256": runtime["sha256"], "build_id": runtime["build_id"],
                      "kernel_cmdline": runtime["cmdline"], "method": "virtual_media", "boot_timeout_s": 600}
    versions = dict(line.split()[:2] for line in (ROOT / "build" / "os" / "manifest.txt").read_text().splitlines())
    sku["os"] = {"image_uri": "file://%s" % (ROOT / "build" / "os" / image["image"]), "sha256": image["sha256"],
                 "raw_sha256": image["raw_sha256"], "raw_bytes": image["raw_bytes"], "build_id": image["build_id"],
                 "target_disk": "/dev/vda", "root_label": image["root_label"], "kernel": image["kernel"],
                 "kernel_cmdline": image["cmdline"],
                 "os_release": image["os_release"], "boot_timeout_s": 600,
                 "packages": {name: versions[name] for name in ("openssh-server", "python3")}}
    (VM / "skus").mkdir(parents=True, exist_ok=True)
    (VM / "skus" / ("%s.yml" % SKU)).write_text(
        "# written by make demo (tools/symphony_demo/vm.py): skus/%s.yml pinned to build/runtime and build/os\n%s"
        % (SKU, yaml.safe_dump(sku, sort_keys=False)))


def _key():
    key = VM / "ssh" / "id_ed25519"
    if not key.exists():
        key.parent.mkdir(parents=True, exist_ok=True)
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "symphony-demo-vm", "-f", str(key)],
                       check=True)
    return key


def _ssh_config(fleet, key):
    """Each node name and twin in-band address -> the guest's forwarded sshd.  Host keys are new at every runtime
    boot and on the installed OS, so this demo keeps none (a real site verifies them through its own CA)."""
    lines = []
    for host, entry in sorted(fleet.map_data()["nodes"].items()):
        node = fleet.twin.nodes[host]
        lines += ["Host %s %s" % (host, node["inband_address"]), "  HostName 127.0.0.1",
                  "  Port %d" % entry["inband"]["port"], "  User root", "  IdentityFile %s" % key,
                  "  StrictHostKeyChecking no", "  UserKnownHostsFile /dev/null", "  LogLevel ERROR", ""]
    (VM / "ssh_config").write_text("\n".join(lines))


def run_vm_nodes(console, run_playbook, count=2):
    """Provision ``count`` VM-backed nodes with the collection's playbook; returns ``(rc, summary)``.

    ``run_playbook``: the demo's ``run_playbook(console, playbook, var_files, extra_args, log_path, inventory=,
    ledger=)``.  Raises ``ValidationError`` (from the emulator) when QEMU or qemu.qmp is missing.
    """
    from symphony_emulator import Fleet
    from ansible_collections.symphony.cluster.plugins.module_utils._core.twin import load_twin

    started = time.monotonic()
    VM.mkdir(parents=True, exist_ok=True)
    console.rule("VM-backed nodes: provisioning for real (QEMU guests, runtime ISO, OS image to disk)")
    images = build_images()
    write_sku(images)
    key = _key()
    subprocess.run([str(ROOT / "images" / "runtime" / "config-medium.sh"), str(VM / "config.iso"),
                    "%s.pub" % key], check=True)
    hosts = sorted(load_twin(str(TWIN)).nodes)[:count]
    with Fleet(TWIN, credentials="demo", hosts=hosts, vm_nodes=hosts, vm_dir=str(VM / "guests"),
               map_path=str(VM / "bmcs.json"), state_dir=str(VM / "emulator")) as fleet:
        _ssh_config(fleet, key)
        consoles = {h: e["inband"]["console"] for h, e in fleet.map_data()["nodes"].items()}
        (VM / "vars.json").write_text(json.dumps({"demo_vm_console_logs": consoles}, indent=1) + "\n")
        console.print("runtime %s, OS image %s; guests %s (SSH on 127.0.0.1:%s)" % (
            images["runtime"]["build_id"], images["os"]["build_id"], ", ".join(hosts),
            ", ".join(str(fleet.map_data()["nodes"][h]["inband"]["port"]) for h in hosts)))
        rc = run_playbook(console, "provisioning.yml", [VM / "vars.json"], ["-e", "provisioning_hosts=all"],
                          VM / "ansible.log", inventory=TWIN, ledger=VM / "ledger.sqlite")
        # the console evidence: each guest's serial log, kept beside the report
        evidence = VM / "report" / "console"
        evidence.mkdir(parents=True, exist_ok=True)
        for host, path in consoles.items():
            if os.path.exists(path):
                shutil.copyfile(path, evidence / ("%s.serial.log" % host))
    return rc, summarise(console, hosts, time.monotonic() - started, images)


def summarise(console, hosts, wall_s, images):
    """The VM nodes' provisioning rows (table), their report and ``build/demo/vm/summary.json``."""
    from rich.table import Table
    from ansible_collections.symphony.cluster.plugins.module_utils._core.ledger import open_ledger
    from ansible_collections.symphony.cluster.plugins.module_utils._core.report import write_report
    from ansible_collections.symphony.cluster.plugins.module_utils._core.twin import load_twin

    ledger = open_ledger(str(VM / "ledger.sqlite"))
    try:
        gates = ledger.current_gates()
        table = Table(title="VM-backed nodes: provisioning checks of the last run (from the ledger)")
        for col in ("node",) + CHECKS + ("gate",):
            table.add_column(col, no_wrap=True)
        table.add_column("reason", overflow="fold")
        colours = {"pass": "green", "fail": "red", "blocked": "yellow", "not_run": "bright_black"}
        nodes = {}
        for host in hosts:
            gate = gates.get(host, {}).get("provisioning")
            history = ledger.history(host, "provisioning")
            last = max(history, key=lambda r: r.started or 0).run_id if history else None
            checks = {r.check: r for r in history if r.run_id == last}
            status = gate.status if gate else "not_run"
            nodes[host] = {"gate": status, "reason": gate.reason if gate else "no gate recorded",
                           "checks": {c: {"status": checks[c].status, "reason": checks[c].reason}
                                      for c in CHECKS if c in checks}}
            cells = ["[%s]%s[/]" % (colours.get(checks[c].status, "white"), checks[c].status) if c in checks else "—"
                     for c in CHECKS]
            table.add_row(host, *cells, "[%s]%s[/]" % (colours.get(status, "white"), status),
                          checks["os_boot"].reason if "os_boot" in checks else nodes[host]["reason"])
        console.print(table)
        written = write_report(ledger, str(VM / "report"), load_twin(str(TWIN)).nodes)
    finally:
        ledger.close()
    summary = {"wall_s": round(wall_s, 1), "nodes": nodes, "runtime_build_id": images["runtime"]["build_id"],
               "os_build_id": images["os"]["build_id"], "report": os.path.relpath(written["paths"]["html"], ROOT),
               "console": os.path.relpath(VM / "report" / "console", ROOT)}
    (VM / "summary.json").write_text(json.dumps(summary, indent=1, sort_keys=True) + "\n")
    console.print("VM nodes: %s   report: %s   consoles: %s   (%.0f s)" % (
        os.path.relpath(VM / "summary.json", ROOT), summary["report"], summary["console"], wall_s))
    return summary


def qemu_missing():
    """What VM-backed nodes lack on this machine (empty when QEMU and the image builders are here)."""
    tools = ("qemu-system-x86_64", "qemu-img", "mmdebstrap", "xorriso", "grub-mkimage", "sfdisk")
    return [t for t in tools if shutil.which(t) is None] + ([] if _has_qmp() else ["qemu.qmp"])


def _has_qmp():
    try:
        import qemu.qmp  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import
    except ImportError:
        return False
    return True


if __name__ == "__main__":
    sys.exit("run it through make demo (python -m symphony_demo)")
