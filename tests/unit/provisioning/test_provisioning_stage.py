"""The provisioning stage end to end against the emulator's BMCs, in-process through requests-mock (no sockets).

One node with mixed firmware (BMC, BIOS image, CPLD) and one with BIOS drift converge through ``out_of_band`` and
``verify``: the steps' reasons, the gate, the ledger rows (written from the worker threads) and a rerun that
sends no write.  The same flow as tests/integration/test_provisioning_emulator.py, fast enough for the unit suite.
"""

import dataclasses
import json
import os
from types import SimpleNamespace
from urllib.parse import unquote, urlsplit

import pytest
import requests
import requests_mock
from requests_mock.response import create_response

from ansible_collections.symphony.cluster.plugins.module_utils._core.ledger import open_ledger
from ansible_collections.symphony.cluster.plugins.module_utils._core.sku import load_skus
from ansible_collections.symphony.cluster.plugins.module_utils._core.twin import load_twin
from ansible_collections.symphony.cluster.plugins.module_utils._provision.stage import ProvisionSettings, run_stage

from symphony_emulator import demo_image_bytes
from symphony_emulator.bmc import BMC
from symphony_emulator.tree import Spec

PASSWORD = "s3cr3t-Passw0rd"
FAST = {"task_duration_s": 0.05, "bmc_reboot_s": 0.2, "bmc_warmup_s": 0.1, "host_boot_s": 0.1}
DEFECTS = {
    "pv-u06": [{"kind": "firmware_drift", "component": "bmc", "version": "01.01.10"},
               {"kind": "firmware_drift", "component": "bios", "version": "BIOS Date: 01/12/2023 Ver 1.2"},
               {"kind": "firmware_drift", "component": "cpld_backplane", "version": "02"}],
    "pv-u10": [{"kind": "bios_drift", "attribute": "PCIeACSCTL_1E3C", "value": "Enable"}],
}


def _demo_images(skus, directory):
    """``directory`` holding the image of every manifest step as the emulator accepts it (name from ``image.uri``)."""
    directory.mkdir()
    steps = [(sku, comp) for sku, manifest in skus.items() for comp in manifest["firmware"] if comp.get("image")]
    for sku, comp in steps:
        name = os.path.basename(urlsplit(comp["image"]["uri"]).path)
        (directory / name).write_bytes(demo_image_bytes(sku, comp["id"], comp["target"]))
    return directory


@pytest.fixture
def fleet(repo_root, tmp_path):
    skus = load_skus(str(repo_root / "skus"))
    twin = load_twin(str(repo_root / "molecule" / "provisioning" / "provisioning.twin.yml"), skus.keys())
    images = _demo_images(skus, tmp_path / "images")
    bmcs = {h: BMC(Spec(twin.nodes[h], skus[twin.nodes[h]["sku"]], DEFECTS[h]), "admin", PASSWORD, {"*": FAST})
            for h in DEFECTS}
    (tmp_path / "bmcs.json").write_text(json.dumps(
        {"bmcs": {h: {"url": "https://%s.bmc.test" % h, "username": "admin", "password": PASSWORD} for h in bmcs}}))
    mocker = requests_mock.Mocker()

    def match(request):
        bmc = bmcs[urlsplit(request.url).hostname.split(".")[0]]
        path, _sep, query = request.path_url.partition("?")
        reply = bmc.handle(request.method, unquote(path), unquote(query), request.headers, request.body or b"")
        if reply.abort:
            raise requests.exceptions.ConnectionError("connection reset by the emulator")
        return create_response(request, status_code=reply.status, headers=reply.headers, content=reply.body)

    mocker.add_matcher(match)
    settings = ProvisionSettings(bmc_map=str(tmp_path / "bmcs.json"), ledger=str(tmp_path / "ledger.sqlite"),
                                 image_dir=str(images), runtime_probe="emulator", poll_s=0.05,
                                 bmc_reboot_timeout_s=10, retries=1, read_timeout=3, connect_timeout=1,
                                 optional=("tunings",))
    with mocker:
        yield {"nodes": {h: twin.nodes[h] for h in bmcs}, "skus": skus, "settings": settings, "bmcs": bmcs}


def _converge(fleet):
    oob = run_stage(fleet["nodes"], fleet["skus"], fleet["settings"], "out_of_band")
    return oob, run_stage(fleet["nodes"], fleet["skus"], fleet["settings"], "verify", run_id=oob["run_id"])


def test_converge_record_and_rerun_without_writes(fleet):
    oob, ver = _converge(fleet)
    checks = {c["check"]: c for c in oob["hosts"]["pv-u06"]["checks"]}
    assert checks["firmware:bmc"]["reason"].startswith("updated to 11.01.01; the BMC rebooted itself")
    assert checks["firmware:bios"]["reason"] == ("BIOS Date: 08/04/2023 Ver 1.4 staged (task "
                                                 "/redfish/v1/TaskService/Tasks/4 Completed); activates at the "
                                                 "runtime boot reset (host_reset)")
    assert checks["runtime_boot"]["status"] == "pass"
    bios = {c["check"]: c for c in oob["hosts"]["pv-u10"]["checks"]}["bios_settings"]
    assert bios["status"] == "pass" and bios["reason"].endswith("applied at the runtime boot reset")
    assert oob["changed"] is True and oob["writes"] > 0
    for host in fleet["nodes"]:
        assert ver["hosts"][host]["gate"]["status"] == "pass", ver["hosts"][host]["gate"]
    verify = {c["check"]: c for c in ver["hosts"]["pv-u10"]["checks"]}["verify"]
    assert verify["reason"] == "23 firmware components and 12 BIOS attributes as the manifest says"
    assert PASSWORD not in json.dumps([oob, ver])

    ledger = open_ledger(fleet["settings"].ledger)
    try:
        rows = ledger.history("pv-u06", "provisioning")
        gates = ledger.current_gates()
    finally:
        ledger.close()
    assert {r.run_id for r in rows} == {oob["run_id"]}
    # issue 16: every firmware pass/staged row carries its task and the task's final state; the Supermicro push
    # went through its two phases (verify task from the 202 body, then StartUpdate's task)
    fw_rows = [r for r in rows if r.check.startswith("firmware:") and r.evidence.get("method")]
    assert fw_rows and all(r.evidence["task"]["uri"] and r.evidence["task"]["state"] == "Completed" for r in fw_rows)
    bios_row = next(r for r in fw_rows if r.check == "firmware:bios")
    assert bios_row.evidence["start_update_task"]["uri"] == "/redfish/v1/TaskService/Tasks/4"
    assert bios_row.evidence["staged"] == "BIOS Date: 08/04/2023 Ver 1.4"
    assert {r.check for r in rows} >= {"inventory_read", "firmware:bmc", "bios_settings", "runtime_boot", "verify"}
    assert gates["pv-u06"]["provisioning"].status == gates["pv-u10"]["provisioning"].status == "pass"

    oob2, ver2 = _converge(fleet)
    assert oob2["changed"] is False and ver2["changed"] is False
    assert oob2["writes"] == ver2["writes"] == 0
    for host in fleet["nodes"]:
        assert ver2["hosts"][host]["gate"]["status"] == "pass"


def test_plan_phase_reads_and_writes_nothing(fleet):
    out = run_stage(fleet["nodes"], fleet["skus"], fleet["settings"], "plan", check_mode=True)
    assert out["writes"] == 0 and out["changed"] is False
    assert out["diff"]["before"]["pv-u10"] and out["plan_lines"]
    assert [c["check"] for c in out["hosts"]["pv-u06"]["checks"]] == ["inventory_read"]


def test_a_node_another_run_holds_is_not_touched(fleet):
    """Issue 25: a rerun raced a killed run's module (double uploads, double resets); now it stops for that node."""
    ledger = open_ledger(fleet["settings"].ledger)
    holder = {"run_id": "prov-other", "host": "controller-2.example", "pid": 4242, "stage": "provisioning"}
    ledger.acquire_leases(["pv-u06"], holder, ttl_s=600)
    # lease_wait_s 0: stop for the node at once (by default the stage waits that long for the holder to finish)
    oob = run_stage(fleet["nodes"], fleet["skus"], dataclasses.replace(fleet["settings"], lease_wait_s=0),
                    "out_of_band")
    entry = oob["hosts"]["pv-u06"]
    assert entry["writes"] == 0 and "gate" not in entry
    assert "leased by run prov-other on host controller-2.example pid 4242" in entry["error"]
    assert oob["hosts"]["pv-u10"]["writes"] > 0
    assert ledger.history("pv-u06", "provisioning") == []
    assert [(lease["node"], lease["run_id"]) for lease in ledger.leases()] == [("pv-u06", "prov-other")]
    ledger.close()


def test_one_gate_row_per_node_per_run_when_the_bmc_cannot_be_read(fleet):
    """Issue 25: out_of_band recorded a gate for an unreadable BMC, and verify of the same run a second one."""
    fleet["bmcs"]["pv-u10"].handle = lambda *args, **kwargs: SimpleNamespace(abort=True)
    oob, ver = _converge(fleet)
    # a BMC that resets every connection is blocked "BMC unreachable", not a hardware fail (issue 25; was "fail")
    assert oob["hosts"]["pv-u10"]["gate"]["status"] == ver["hosts"]["pv-u10"]["gate"]["status"] == "blocked"
    assert "BMC unreachable" in ver["hosts"]["pv-u10"]["gate"]["reason"]
    ledger = open_ledger(fleet["settings"].ledger)
    rows = ledger._query("SELECT node, run_id FROM gates ORDER BY node")
    ledger.close()
    assert rows == [("pv-u06", oob["run_id"]), ("pv-u10", oob["run_id"])]


@pytest.mark.parametrize("module_name", ["firmware_reconcile", "firmware_plan"])
def test_settings_build_from_every_default_of_the_modules_argument_spec(module_name):
    # A merge once passed bmc_reboot_timeout_s twice (the connection spec and the stage): every module run failed
    # with "got multiple values", and no test built the settings the way the module does.
    import importlib
    from ansible_collections.symphony.cluster.plugins.module_utils._provision.stage import settings_from_params
    spec = importlib.import_module("ansible_collections.symphony.cluster.plugins.modules.%s" % module_name).ARGUMENT_SPEC
    params = {key: opt.get("default") for key, opt in spec.items()}
    params.update(sku_dir="skus", username="admin", password="x")
    settings = settings_from_params(params, check_mode=True)
    assert settings.bmc_reboot_timeout_s == spec["bmc_reboot_timeout_s"]["default"] > 0
