"""The redfish_inventory_info module end to end (in process) and the message registries."""

import json

import pytest
from ansible.module_utils import basic
from ansible.module_utils.common.text.converters import to_bytes

from ansible_collections.symphony.cluster.plugins.module_utils._redfish.registries import MessageRegistries, parse_message_id
from ansible_collections.symphony.cluster.plugins.modules import redfish_inventory_info

from .redfish_mockserver import BASE, MockupBMC

PW = "s3cr3t-Passw0rd"


def run_module(monkeypatch, capsys, args):
    monkeypatch.setattr(basic, "_ANSIBLE_ARGS", to_bytes(json.dumps({"ANSIBLE_MODULE_ARGS": args})))
    monkeypatch.setattr(basic, "_ANSIBLE_PROFILE", "legacy", raising=False)
    with pytest.raises(SystemExit) as ei:
        redfish_inventory_info.main()
    out = capsys.readouterr().out
    return ei.value.code, json.loads(out), out


def test_module_reads_dell(monkeypatch, capsys, mockups, shared):
    with MockupBMC(mockups / "libredfish-dell") as bmc:
        rc, res, raw = run_module(monkeypatch, capsys, {
            "bmc_url": BASE, "username": "admin", "password": PW,
            "registry_dir": str(shared / "reference" / "redfish-registries"),
            "sections": ["systems", "chassis", "firmware"]})
    assert rc == 0 and res["changed"] is False
    gpus = [c for c in res["inventory"]["components"] if c["kind"] == "gpu"]
    assert [g["model"] for g in gpus] == ["NVIDIA H100 PCIe"]
    assert res["inventory"]["sel"] == [] and len(res["inventory"]["firmware"]) == 21
    assert res["health"] == "OK" and res["requests"] > 5
    assert PW not in raw and bmc.sessions == {}


def test_module_wrong_password_fails_cleanly(monkeypatch, capsys, mockups):
    with MockupBMC(mockups / "libredfish-dell"):
        rc, res, raw = run_module(monkeypatch, capsys, {
            "bmc_url": BASE, "username": "admin", "password": "Wr0ng-secret", "auth": "session"})
    assert rc == 1 and res["failed"] is True and res["error"] == "RedfishAuthError"
    assert "login refused for user 'admin'" in res["msg"] and "Wr0ng-secret" not in raw


def test_version_tolerant_resolution(shared):
    regs = MessageRegistries(directory=str(shared / "reference" / "redfish-registries"), include_sushy=False)
    assert regs.resolve("Base.1.8.PropertyMissing", ["TransferProtocol"]) == \
        "The property TransferProtocol is a required property and must be included in the request."
    assert regs.resolve("Base.1.0.4.GeneralError").startswith("A general error has occurred.")
    assert regs.resolve("IDRAC.2.8.JCP052") == "IDRAC.2.8.JCP052"  # unknown -> raw id
    d = regs.describe({"MessageId": "Base.1.8.SessionLimitExceeded"})
    assert d["Severity"] == "Critical" and "simultaneous sessions" in d["Message"]
    assert parse_message_id("iLO.2.14.SystemResetRequired") == ("iLO", (2, 14, 0), "SystemResetRequired")


def test_bmc_served_registry_adds_oem_prefix(mockups):
    regs = MessageRegistries(include_sushy=False)
    regs.load_directory(str(mockups / "cray-EX235a" / "redfish" / "v1" / "Registries" / "CrayAlerts.1.0.0.json"))
    assert "crayalerts" in regs.prefixes()
    key = next(iter(json.load(open(str(mockups / "cray-EX235a/redfish/v1/Registries/CrayAlerts.1.0.0.json/index.json")))
                    ["Messages"]))
    assert regs.lookup("CrayAlerts.1.0.%s" % key) is not None
