"""Provisioning against the Redfish fleet emulator (in-process Fleet, HTTP on loopback).

* a node with mixed firmware and one with BIOS drift converge, verify passes, and the rerun sends their
  BMCs no write request (the emulator's write counter stays 0);
* a run killed half-way (SIGKILL of the process once the ledger shows the BIOS image staged) is rerun and
  finishes the plan without uploading the BMC or BIOS image again.
"""

import json
import os
import signal
import subprocess
import sys
import time
from urllib.parse import urlsplit

import pytest

from ansible_collections.symphony.cluster.plugins.module_utils._core.ledger import open_ledger
from ansible_collections.symphony.cluster.plugins.module_utils._provision.stage import ProvisionSettings, run_stage
from ansible_collections.symphony.cluster.plugins.module_utils._core.sku import load_skus

from symphony_emulator import Fleet, demo_image_bytes
from timescale import scaled

FAST = {"faults": {"*": {"task_duration_s": 0.3, "bmc_reboot_s": 0.5, "bmc_warmup_s": 0.3, "host_boot_s": 0.3}}}


@pytest.fixture
def scenario(repo_root, tmp_path):
    skus = load_skus(str(repo_root / "skus"))
    images = tmp_path / "images"
    images.mkdir()
    for sku, manifest in skus.items():
        for comp in manifest["firmware"]:
            if comp.get("image"):
                (images / os.path.basename(urlsplit(comp["image"]["uri"]).path)).write_bytes(
                    demo_image_bytes(sku, comp["id"], comp["target"]))
    twin = repo_root / "molecule" / "provisioning" / "provisioning.twin.yml"
    defects = {"defects": {
        "pv-u06": [{"kind": "firmware_drift", "component": "bmc", "version": "01.01.10"},
                   {"kind": "firmware_drift", "component": "bios", "version": "BIOS Date: 01/12/2023 Ver 1.2"},
                   {"kind": "firmware_drift", "component": "cpld_backplane", "version": "02"}],
        "pv-u10": [{"kind": "bios_drift", "attribute": "PCIeACSCTL_1E3C", "value": "Enable"}]}}
    return {"skus": skus, "images": images, "twin": twin, "defects": defects, "tmp": tmp_path}


def _settings(sc, **kw):
    base = dict(bmc_map=str(sc["tmp"] / "bmcs.json"), ledger=str(sc["tmp"] / "ledger.sqlite"),
                image_dir=str(sc["images"]), runtime_probe="emulator", poll_s=0.2, bmc_reboot_timeout_s=scaled(15),
                retries=1, read_timeout=scaled(3), connect_timeout=scaled(1), optional=("tunings",))
    base.update(kw)
    return ProvisionSettings(**base)


def _converge(fleet, sc, hosts):
    nodes = {h: fleet.twin.nodes[h] for h in hosts}
    s = _settings(sc)
    oob = run_stage(nodes, sc["skus"], s, "out_of_band")
    return oob, run_stage(nodes, sc["skus"], s, "verify", run_id=oob["run_id"])


def test_converge_then_rerun_sends_no_write(scenario):
    hosts = ["pv-u06", "pv-u10"]
    with Fleet(scenario["twin"], defects=scenario["defects"], faults=FAST, http=True, credentials="demo",
               hosts=hosts, map_path=str(scenario["tmp"] / "bmcs.json")) as fleet:
        oob, ver = _converge(fleet, scenario, hosts)
        checks = {c["check"]: c for c in oob["hosts"]["pv-u06"]["checks"]}
        assert checks["firmware:bmc"]["reason"].startswith("updated to 11.01.01; the BMC rebooted itself")
        # issue 16: staged names its task (the Supermicro StartUpdate task, after the verify task)
        assert checks["firmware:bios"]["reason"] == ("BIOS Date: 08/04/2023 Ver 1.4 staged (task "
                                                     "/redfish/v1/TaskService/Tasks/4 Completed); activates at the "
                                                     "runtime boot reset (host_reset)")
        assert checks["runtime_boot"]["status"] == "pass"
        state = fleet.state("pv-u06")
        assert state["firmware"]["bios"] == "BIOS Date: 08/04/2023 Ver 1.4"
        assert state["firmware"]["cpld_backplane"] == "03"
        assert state["virtual_media"]["inserted"] is False  # ejected by verify
        assert fleet.state("pv-u10")["bios"]["current"]["PCIeACSCTL_1E3C"] == "Disable"
        for host in hosts:
            assert ver["hosts"][host]["gate"]["status"] == "pass", ver["hosts"][host]["gate"]
        verify = {c["check"]: c for c in ver["hosts"]["pv-u10"]["checks"]}["verify"]
        assert verify["reason"] == "23 firmware components and 12 BIOS attributes as the manifest says"
        fleet.reset_stats()
        oob2, ver2 = _converge(fleet, scenario, hosts)
        for host in hosts:
            assert fleet.stats(host)["writes"] == 0, fleet.stats(host)["write_log"]
            assert ver2["hosts"][host]["gate"]["status"] == "pass"
        assert oob2["changed"] is False and ver2["changed"] is False


_CHILD = r"""
import sys
from ansible_collections.symphony.cluster.plugins.module_utils._provision.stage import ProvisionSettings, run_stage
from ansible_collections.symphony.cluster.plugins.module_utils._core.sku import load_skus
from symphony_emulator.fleet import load_twin
import json
cfg = json.loads(sys.argv[1])
skus = load_skus(cfg["skus"])
twin = load_twin(cfg["twin"], skus.keys())
s = ProvisionSettings(**cfg["settings"])
run_stage({"pv-u06": twin.nodes["pv-u06"]}, skus, s, "out_of_band", run_id="prov-killed")
"""


def test_killed_run_resumes_without_redoing_finished_steps(scenario, repo_root):
    with Fleet(scenario["twin"], defects=scenario["defects"], faults=FAST, http=True, credentials="demo",
               hosts=["pv-u06"], map_path=str(scenario["tmp"] / "bmcs.json")) as fleet:
        # slow tasks: the run is killed while the CPLD image (after BMC and BIOS) is being applied
        fleet.set_faults("pv-u06", dict(FAST["faults"]["*"], task_duration_s=2.0))
        s = _settings(scenario)
        cfg = {"skus": str(repo_root / "skus"), "twin": str(scenario["twin"]),
               "settings": {k: (list(v) if isinstance(v, tuple) else v) for k, v in vars(s).items()}}
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
        child = subprocess.Popen([sys.executable, "-c", _CHILD, json.dumps(cfg)], env=env)
        deadline = time.monotonic() + scaled(60)
        seen = set()
        try:
            while time.monotonic() < deadline and "firmware:bios" not in seen:
                time.sleep(0.2)
                if os.path.exists(s.ledger):
                    led = open_ledger(s.ledger)
                    seen = {r.check for r in led.history("pv-u06", "provisioning")}
                    led.close()
            assert "firmware:bios" in seen and "runtime_boot" not in seen, seen
        finally:
            child.send_signal(signal.SIGKILL)
            child.wait()
        uploads = [w for w in fleet.stats("pv-u06")["write_log"] if w["path"].endswith("/UpdateService/upload")]
        assert len(uploads) in (2, 3)  # bmc, bios (and maybe cpld_backplane) before the kill
        assert fleet.state("pv-u06")["boot_state"]["boots"] == 0  # killed before the runtime boot
        fleet.set_faults("pv-u06", FAST["faults"]["*"])
        fleet.reset_stats("pv-u06")
        oob, ver = _converge(fleet, scenario, ["pv-u06"])
        checks = {c["check"]: c for c in oob["hosts"]["pv-u06"]["checks"]}
        assert checks["firmware:bmc"]["reason"] == "at accepted version 11.01.01"
        assert checks["firmware:bios"]["reason"] == ("BIOS Date: 08/04/2023 Ver 1.4 staged by run prov-killed; "
                                                     "activates at the runtime boot reset")
        log = [w["path"] for w in fleet.stats("pv-u06")["write_log"]]
        # only the CPLD image, whose step the killed run never recorded, is uploaded again
        assert [p for p in log if p.endswith("/UpdateService/upload")] == ["/redfish/v1/UpdateService/upload"], log
        assert ver["hosts"]["pv-u06"]["gate"]["status"] == "pass", ver["hosts"]["pv-u06"]["gate"]
