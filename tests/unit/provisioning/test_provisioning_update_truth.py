"""Issue 16: an out-of-band firmware step is done or staged only with the BMC's evidence, on the emulator's BMCs.

The emulator's Supermicro BMC pushes in two phases (verify Task in the 202 body, install on StartUpdate); a
``tamper`` hook rewrites one answer the way another BMC gives it (no task at all, a refusal).  Before the fix the
product read no body and sent no StartUpdate: the BIOS step passed "staged" with nothing behind it.
"""

import json
import time
from urllib.parse import unquote

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
from symphony_emulator.replies import Reply
from symphony_emulator.tree import Spec

from .test_provisioning_stage import FAST, PASSWORD, _demo_images

HOST = "pv-u06"
BIOS_OLD = "BIOS Date: 01/12/2023 Ver 1.2"
UPLOAD = "/redfish/v1/UpdateService/upload"


@pytest.fixture
def make_node(repo_root, tmp_path):
    """make_node(sku, defects) -> {"nodes", "skus", "settings", "bmc", "tamper", "sent"}: pv-u06 built as ``sku``.

    ``tamper[(method, path)]``: ``fn(reply) -> reply`` rewrites the emulator's answer; ``sent``: (method, path,
    JSON body or None) of every write."""
    skus = load_skus(str(repo_root / "skus"))
    twin = load_twin(str(repo_root / "molecule" / "provisioning" / "provisioning.twin.yml"), skus.keys())
    (tmp_path / "bmcs.json").write_text(json.dumps(
        {"bmcs": {HOST: {"url": "https://%s.bmc.test" % HOST, "username": "admin", "password": PASSWORD}}}))
    mocker = requests_mock.Mocker()
    made = {}

    def match(request):
        bmc, tamper = made["bmc"], made["tamper"]
        path, _sep, query = request.path_url.partition("?")
        reply = bmc.handle(request.method, unquote(path), unquote(query), request.headers, request.body or b"")
        if request.method in ("POST", "PATCH") and "json" in request.headers.get("Content-Type", ""):
            made["sent"].append((request.method, unquote(path), json.loads(request.body or b"null")))
            made["if_match"].append((request.method, unquote(path), request.headers.get("If-Match")))
        hook = tamper.get((request.method, unquote(path)))
        if hook is not None:
            reply = hook(reply)
        if reply.abort:
            raise requests.exceptions.ConnectionError("connection reset by the emulator")
        return create_response(request, status_code=reply.status, headers=reply.headers, content=reply.body)

    mocker.add_matcher(match)

    def make(sku="hgx_h100_supermicro", defects=({"kind": "firmware_drift", "component": "bios",
                                                  "version": BIOS_OLD},), vendor=None):
        # one SKU's images only: SKUs share image file names
        images = _demo_images({sku: skus[sku]}, tmp_path / ("images-" + sku))
        settings = ProvisionSettings(bmc_map=str(tmp_path / "bmcs.json"), ledger=str(tmp_path / "ledger.sqlite"),
                                     image_dir=str(images), runtime_probe="emulator", poll_s=0.05, task_timeout_s=10,
                                     bmc_reboot_timeout_s=10, retries=1, read_timeout=3, connect_timeout=1,
                                     optional=("tunings",))
        node = dict(twin.nodes[HOST], sku=sku)
        manifest = skus[sku] if vendor is None else dict(skus[sku], system=dict(skus[sku]["system"],
                                                                                bmc_vendor=vendor))
        made.update(bmc=BMC(Spec(node, manifest, list(defects)), "admin", PASSWORD, {"*": FAST}), tamper={},
                    sent=[], if_match=[])
        return dict(made, nodes={HOST: node}, skus=skus, settings=settings)

    with mocker:
        yield make


@pytest.fixture
def node(make_node):
    return make_node()


def _checks(out):
    return {c["check"]: c for c in out["hosts"][HOST]["checks"]}


def _rows(settings):
    ledger = open_ledger(settings.ledger)
    try:
        return {r.check: r for r in ledger.history(HOST, "provisioning")}
    finally:
        ledger.close()


def test_two_phase_push_is_staged_with_both_tasks_and_verifies(node):
    oob = run_stage(node["nodes"], node["skus"], node["settings"], "out_of_band")
    bios = _checks(oob)["firmware:bios"]
    assert bios["status"] == "pass" and " staged (task /redfish/v1/TaskService/Tasks/2 Completed)" in bios["reason"]
    ev = _rows(node["settings"])["firmware:bios"].evidence
    assert ev["verify_task"]["found_in"] == "body" and ev["verify_task"]["state"] == "Completed"
    assert ev["task"] == ev["start_update_task"] and ev["task"]["found_in"] == "location"
    assert ev["start_update_task"]["messages"][-1] == "Update.1.3.AwaitToActivate"
    ver = run_stage(node["nodes"], node["skus"], node["settings"], "verify", run_id=oob["run_id"])
    # the image really installed: before the fix it waited for a StartUpdate that was never sent
    assert ver["hosts"][HOST]["gate"]["status"] == "pass", _checks(ver)["verify"]


def test_accepted_without_any_task_is_a_fail_not_staged(node):
    # a BMC that answers 202 and names no task anywhere (no Location, no Task body, no MessageArgs)
    node["tamper"][("POST", UPLOAD)] = lambda reply: Reply(202, b"", {})
    oob = run_stage(node["nodes"], node["skus"], node["settings"], "out_of_band")
    bios = _checks(oob)["firmware:bios"]
    assert bios["status"] == "fail"
    assert bios["reason"].startswith("the BMC accepted the update but shows no task or pending state")
    assert node["bmc"].describe()["staged_firmware"] == {}


def test_already_in_update_mode_asks_for_a_bmc_cold_reset(node):
    bmc = node["bmc"]
    # an earlier run pushed the image and died before StartUpdate: the BMC stays in update mode
    image = demo_image_bytes(bmc.spec.sku["sku"], "bios", "BIOS Date: 08/04/2023 Ver 1.4")
    boundary = "XsymphonyX"
    body = (b'--%s\r\nContent-Disposition: form-data; name="UpdateFile"; filename="i.bin"\r\n'
            b'Content-Type: application/octet-stream\r\n\r\n%s\r\n--%s--\r\n' % (boundary.encode(), image,
                                                                                 boundary.encode()))
    first = bmc.handle("POST", UPLOAD, "", {"Content-Type": "multipart/form-data; boundary=%s" % boundary,
                                            "Authorization": requests.auth._basic_auth_str("admin", PASSWORD)}, body)
    assert first.status == 202
    time.sleep(0.1)   # the verify task ends (FAST: 0.05 s)
    oob = run_stage(node["nodes"], node["skus"], node["settings"], "out_of_band")
    bios = _checks(oob)["firmware:bios"]
    assert bios["status"] == "fail" and "still in update mode" in bios["reason"]
    row = _rows(node["settings"])["firmware:bios"]
    assert "cold-reset the BMC" in row.remediation and "OemFirmwareAlreadyInUpdateMode" in row.reason


# ------------------------------------------------------------------ Dell jobs and HPE's update state (SimpleUpdate)
SIMPLE = "/redfish/v1/UpdateService/Actions/SimpleUpdate"
JOB = "/redfish/v1/Managers/iDRAC.Embedded.1/Jobs/JID_42"


def _dgx(make_node):
    node = make_node("dgx_h100", ({"kind": "firmware_drift", "component": "bios", "version": "01.01.01"},))
    simple = node["bmc"].tree["/redfish/v1/UpdateService"]["Actions"]["#UpdateService.SimpleUpdate"]["target"]
    return node, simple


def _json_reply(status, body, headers=None):
    return lambda _reply: Reply(status, json.dumps(body).encode() if body is not None else b"",
                                dict({"Content-Type": "application/json"}, **(headers or {})))


def test_dell_job_scheduled_is_staged_with_the_job_and_its_reset(make_node):
    node, simple = _dgx(make_node)
    node["tamper"][("POST", simple)] = _json_reply(202, None, {"Location": JOB})
    node["tamper"][("GET", JOB)] = _json_reply(200, {
        "@odata.id": JOB, "@odata.type": "#DellJob.v1_5_0.DellJob", "Id": "JID_42", "JobState": "Scheduled",
        "Message": "Job scheduled, server reboot pending: PowerCycle"})
    oob = run_stage(node["nodes"], node["skus"], node["settings"], "out_of_band")
    step = _checks(oob)["firmware:bios"]
    assert step["status"] == "pass" and "staged (task %s Scheduled)" % JOB in step["reason"], step
    ev = _rows(node["settings"])["firmware:bios"].evidence
    assert ev["task"]["pending"] is True and ev["task"]["reset_type"] == "PowerCycle"
    resets = [b["ResetType"] for m, p, b in node["sent"] if p.endswith("ComputerSystem.Reset")]
    assert resets == ["PowerCycle"]


def test_dell_job_failed_fails_the_step(make_node):
    node, simple = _dgx(make_node)
    node["tamper"][("POST", simple)] = _json_reply(202, None, {"Location": JOB})
    node["tamper"][("GET", JOB)] = _json_reply(200, {"@odata.id": JOB, "JobState": "Failed",
                                                     "Message": "Unable to verify the update package."})
    step = _checks(run_stage(node["nodes"], node["skus"], node["settings"], "out_of_band"))["firmware:bios"]
    assert step["status"] == "fail" and "ended Failed: Unable to verify the update package." in step["reason"]


@pytest.mark.parametrize("state, status", [("Complete", "pass"), ("Idle", "fail")])
def test_hpe_update_state_stands_for_the_task(make_node, state, status):
    node, simple = _dgx(make_node)
    node["tamper"][("POST", simple)] = _json_reply(200, {})      # iLO: no task, the state is on UpdateService
    service = dict(node["bmc"].tree["/redfish/v1/UpdateService"], Oem={"Hpe": {"State": state}})
    node["tamper"][("GET", "/redfish/v1/UpdateService")] = _json_reply(200, service)
    step = _checks(run_stage(node["nodes"], node["skus"], node["settings"], "out_of_band"))["firmware:bios"]
    assert step["status"] == status, step
    if status == "fail":
        assert step["reason"].startswith("the BMC accepted the update but shows no task or pending state")


# ------------------------------------------------------------------ the SKU's explicit etag_mode
@pytest.mark.parametrize("mode", [None, "off"])
def test_bios_patch_if_match_unless_the_sku_turns_it_off(make_node, mode):
    node = make_node(defects=({"kind": "bios_drift", "attribute": "PCIeACSCTL_1E3C", "value": "Enable"},))
    if mode:
        node["skus"] = dict(node["skus"])
        manifest = node["skus"]["hgx_h100_supermicro"] = dict(node["skus"]["hgx_h100_supermicro"])
        manifest["bios"] = dict(manifest["bios"], etag_mode=mode)
    oob = run_stage(node["nodes"], node["skus"], node["settings"], "out_of_band")
    assert _checks(oob)["bios_settings"]["status"] == "pass"
    sent = [h for m, p, h in node["if_match"] if m == "PATCH" and "/Bios" in p]
    row = _rows(node["settings"])["bios_settings"]
    if mode == "off":
        assert sent == [None] and row.evidence["etag_mode"] == "off"
        assert "sent without If-Match: the SKU's bios.etag_mode is off" in row.evidence["notes"]
    else:
        assert len(sent) == 1 and sent[0] and row.evidence["etag_mode"] == "if_match"


def test_dell_shaped_bmc_converges_through_its_scheduled_job(make_node):
    # the emulator's Dell shape: SimpleUpdate -> DellJob, Scheduled until the runtime boot's reset
    node = make_node("dgx_h100", ({"kind": "firmware_drift", "component": "bios", "version": "01.01.01"},),
                     vendor="Dell")
    oob = run_stage(node["nodes"], node["skus"], node["settings"], "out_of_band")
    step = _checks(oob)["firmware:bios"]
    assert step["status"] == "pass" and " Scheduled); activates at the runtime boot reset" in step["reason"], step
    assert _rows(node["settings"])["firmware:bios"].evidence["task"]["uri"].startswith(node["bmc"].spec.M + "/Jobs/")
    ver = run_stage(node["nodes"], node["skus"], node["settings"], "verify", run_id=oob["run_id"])
    assert ver["hosts"][HOST]["gate"]["status"] == "pass", ver["hosts"][HOST]["checks"]
