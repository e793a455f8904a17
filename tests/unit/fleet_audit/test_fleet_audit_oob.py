"""Out-of-band drift through the provisioning plan in check mode, against the emulator's BMCs (requests-mock).

One BMC downgraded (the demo's "drift to find"), one with a BIOS attribute changed, one as the SKU says; no write
request reaches any BMC.
"""

import json
from urllib.parse import unquote, urlsplit

import pytest
import requests
import requests_mock
from requests_mock.response import create_response

from ansible_collections.symphony.cluster.plugins.module_utils._core.sku import load_skus
from ansible_collections.symphony.cluster.plugins.module_utils._core.twin import load_twin
from ansible_collections.symphony.cluster.plugins.module_utils._fleet_audit.oob import audit_oob, judge_node
from ansible_collections.symphony.cluster.plugins.module_utils._redfish.model import FirmwareItem, NodeInventory

from symphony_emulator.bmc import BMC
from symphony_emulator.tree import Spec

PASSWORD = "s3cr3t-Passw0rd"
DEFECTS = {
    "pv-u06": [{"kind": "firmware_drift", "component": "bmc", "version": "01.01.10"}],
    "pv-u10": [{"kind": "bios_drift", "attribute": "PCIeACSCTL_1E3C", "value": "Enable"}],
}


@pytest.fixture
def fleet(repo_root, tmp_path):
    skus = load_skus(str(repo_root / "skus"))
    twin = load_twin(str(repo_root / "molecule" / "provisioning" / "provisioning.twin.yml"), skus.keys())
    hosts = list(DEFECTS) + [h for h in twin.nodes if h not in DEFECTS][:1]
    bmcs = {h: BMC(Spec(twin.nodes[h], skus[twin.nodes[h]["sku"]], DEFECTS.get(h, [])), "admin", PASSWORD, {})
            for h in hosts}
    (tmp_path / "bmcs.json").write_text(json.dumps(
        {"bmcs": {h: {"url": "https://%s.bmc.test" % h, "username": "admin", "password": PASSWORD} for h in bmcs}}))
    methods = []
    mocker = requests_mock.Mocker()

    def match(request):
        methods.append(request.method)
        bmc = bmcs[urlsplit(request.url).hostname.split(".")[0]]
        path, _sep, query = request.path_url.partition("?")
        reply = bmc.handle(request.method, unquote(path), unquote(query), request.headers, request.body or b"")
        if reply.abort:
            raise requests.exceptions.ConnectionError("connection reset by the emulator")
        return create_response(request, status_code=reply.status, headers=reply.headers, content=reply.body)

    mocker.add_matcher(match)
    params = {"nodes": [twin.nodes[h] for h in hosts], "sku_dir": str(repo_root / "skus"),
              "bmc_map": str(tmp_path / "bmcs.json"), "retries": 1, "read_timeout": 3, "connect_timeout": 1}
    with mocker:
        yield {"params": params, "hosts": hosts, "methods": methods}


def test_downgraded_bmc_and_changed_bios_are_drift_and_nothing_is_written(fleet):
    out = audit_oob(fleet["params"])
    checks = {h: {c["name"]: c for c in cs} for h, cs in out["checks"].items()}
    fw = checks["pv-u06"]["firmware_drift"]
    assert fw["status"] == "fail" and "bmc runs 01.01.10" in fw["reason"]
    drift = [r for r in fw["evidence"]["rows"] if r["status"] == "drift"]
    assert [r["component"] for r in drift] == ["bmc"]
    bios = checks["pv-u10"]["bios_drift"]
    assert bios["status"] == "fail" and "PCIeACSCTL_1E3C" in bios["reason"]
    clean = fleet["hosts"][2]
    assert checks[clean]["firmware_drift"]["status"] == checks[clean]["bios_drift"]["status"] == "pass"
    assert set(fleet["methods"]) <= {"GET", "POST", "DELETE"}  # session login/logout only
    assert "PATCH" not in fleet["methods"] and PASSWORD not in json.dumps(out)


def test_an_unreachable_bmc_is_not_run_never_pass(fleet, tmp_path):
    params = dict(fleet["params"], bmc_map=None, username="admin", password=PASSWORD,
                  nodes=[dict(fleet["params"]["nodes"][0], bmc_address="https://unknown.bmc.test")])
    out = audit_oob(params)
    host = next(iter(out["checks"]))
    assert list(out["checks"]) == [host]
    assert {c["status"] for c in out["checks"][host]} == {"not_run"}
    assert PASSWORD not in json.dumps(out)


def test_an_incomplete_firmware_read_is_not_run_but_a_seen_drift_still_fails(repo_root):
    manifest = load_skus(str(repo_root / "skus"))["hgx_h100_supermicro"]
    bmc = next(c for c in manifest["firmware"] if c["id"] == "bmc")
    good = NodeInventory(firmware=[FirmwareItem(id="BMC", version=bmc["accepted"][0])])
    good.incomplete.append({"part": "firmware", "uri": "/redfish/v1/UpdateService/FirmwareInventory",
                            "reason": "HTTP 503"})
    assert judge_node(good, manifest)["firmware_drift"].status == "not_run"
    bad = NodeInventory(firmware=[FirmwareItem(id="BMC", version="00.00.01")], incomplete=list(good.incomplete))
    assert judge_node(bad, manifest)["firmware_drift"].status == "fail"


def test_a_node_without_a_bmc_address_is_not_run(fleet):
    node = {k: v for k, v in fleet["params"]["nodes"][0].items() if k != "bmc_address"}
    node["hostname"] = "not-in-the-map"
    out = audit_oob(dict(fleet["params"], nodes=[node]))
    assert [c["status"] for c in out["checks"]["not-in-the-map"]] == ["not_run", "not_run"]
    assert "no BMC address" in out["checks"]["not-in-the-map"][0]["reason"]


def test_a_node_another_run_holds_is_not_run_naming_the_holder(fleet, ledger_path):
    from ansible_collections.symphony.cluster.plugins.module_utils._core.leases import NodeLeases

    other = NodeLeases(ledger_path, "prov-20261201T000000-deadbeef", "provisioning")
    assert other.acquire(["pv-u06"]) == {}
    # lease_wait_s 0: stop for the node at once (by default the audit waits that long for the holder to finish)
    out = audit_oob(dict(fleet["params"], ledger=ledger_path, lease_wait_s=0))
    held = {c["name"]: c for c in out["checks"]["pv-u06"]}
    assert held["firmware_drift"]["status"] == "not_run"
    assert "another run holds the node" in held["firmware_drift"]["reason"]
    assert "prov-20261201T000000-deadbeef" in held["firmware_drift"]["reason"]
    free = {c["name"]: c for c in out["checks"]["pv-u10"]}
    assert free["bios_drift"]["status"] == "fail"
