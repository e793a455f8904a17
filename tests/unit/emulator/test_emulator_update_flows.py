"""Issue 16: the emulator's vendor update flows: Supermicro's two-phase multipart push (verify Task in the body, no
Location, install only on UpdateService.StartUpdate, OemFirmwareAlreadyInUpdateMode until a BMC reset)."""

import hashlib
import types

from symphony_emulator import demo_image_bytes
from symphony_emulator.resources import ROOT

from .test_emulator_state import _multipart

START = ROOT + "/UpdateService/Actions/UpdateService.StartUpdate"


def _push(c, bmc, version="BIOS Date: 09/09/2024 Ver 2.0"):
    image = demo_image_bytes(bmc.spec.sku["sku"], "bios", version)
    body, headers = _multipart({"Targets": [], "@Redfish.OperationApplyTime": "OnStartUpdateRequest"}, image)
    return c.request("POST", ROOT + "/UpdateService/upload", raw=body, headers=headers), image


def test_supermicro_advertises_start_update_and_others_do_not(make_bmc, demo_twin, real_skus):
    bmc, c = make_bmc()
    assert bmc.spec.sku["system"]["bmc_vendor"] == "Supermicro"
    assert "#UpdateService.StartUpdate" in c.get(ROOT + "/UpdateService").json()["Actions"]
    host = sorted(demo_twin.nodes)[0]
    node = dict(demo_twin.nodes[host], sku="dgx_h100")   # the demo node built as an AMI BMC
    _dgx, dc = make_bmc(twin=types.SimpleNamespace(nodes={host: node}), host=host)
    assert "#UpdateService.StartUpdate" not in dc.get(ROOT + "/UpdateService").json()["Actions"]
    assert dc.post(START, {}).status in (404, 405)


def test_push_installs_only_after_start_update(make_bmc, clock):
    bmc, c = make_bmc(faults={"task_duration_s": 1})
    resp, image = _push(c, bmc)
    assert resp.status == 202 and "Location" not in resp.headers
    assert resp.json()["@odata.type"].startswith("#Task.")
    clock.advance(5)
    assert bmc.describe()["staged_firmware"] == {}            # verified, not installed
    assert c.post(START, {}).status == 202
    clock.advance(5)
    assert bmc.describe()["staged_firmware"]["bios"] == "BIOS Date: 09/09/2024 Ver 2.0"
    assert bmc.describe()["tasks"][-1]["sha256"] == hashlib.sha256(image).hexdigest()


def test_second_push_in_update_mode_is_refused_until_a_bmc_reset(make_bmc, clock):
    bmc, c = make_bmc(faults={"task_duration_s": 1, "bmc_reboot_s": 1, "bmc_warmup_s": 0})
    _push(c, bmc)
    clock.advance(5)
    again, _image = _push(c, bmc)
    assert again.status == 400
    assert again.json()["error"]["@Message.ExtendedInfo"][0]["MessageId"] == "SMC.1.0.0.OemFirmwareAlreadyInUpdateMode"
    assert c.post(bmc.spec.M + "/Actions/Manager.Reset", {"ResetType": "ForceRestart"}).status == 204
    clock.advance(5)
    assert _push(c, bmc)[0].status == 202


def test_start_update_without_an_upload_is_refused(make_bmc):
    bmc, c = make_bmc()
    resp = c.post(START, {})
    assert resp.status == 400
    assert resp.json()["error"]["@Message.ExtendedInfo"][0]["MessageId"] == "SMC.1.0.0.OemFirmwareNotInUpdateMode"
