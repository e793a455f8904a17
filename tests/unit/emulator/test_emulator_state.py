"""Stateful behaviour: power, boot override + virtual media, BIOS settings, ETags, firmware tasks, sessions."""

import hashlib
import json

from symphony_emulator import demo_image_bytes
from symphony_emulator.resources import ROOT

SIMPLE = ROOT + "/UpdateService/Actions/UpdateService.SimpleUpdate"


def _comp(bmc, comp_id):
    return next(c for c in bmc.spec.sku["firmware"] if c["id"] == comp_id)


def _reset(c, bmc, kind="ForceRestart"):
    return c.post(bmc.spec.S + "/Actions/ComputerSystem.Reset", {"ResetType": kind})


def test_power_off_on_and_bad_reset_type(make_bmc, clock):
    bmc, c = make_bmc()
    assert _reset(c, bmc, "ForceOff").status == 204
    assert c.get(bmc.spec.S).json()["PowerState"] == "Off"
    assert bmc.describe()["boot_state"]["state"] == "off"
    assert _reset(c, bmc, "On").status == 204
    assert c.get(bmc.spec.S).json()["PowerState"] == "On"
    bad = _reset(c, bmc, "Explode")
    assert bad.status == 400
    assert bad.json()["error"]["@Message.ExtendedInfo"][0]["MessageId"] == "Base.1.22.ActionParameterValueNotInList"
    assert c.post(bmc.spec.S + "/Actions/ComputerSystem.Reset", {}).status == 400


def test_virtual_media_one_time_boot_reaches_ephemeral_runtime(make_bmc, clock):
    bmc, c = make_bmc()
    image = bmc.spec.sku["runtime"]["image_uri"]
    vm = bmc.spec.M + "/VirtualMedia/CD1"
    assert c.post(vm + "/Actions/VirtualMedia.InsertMedia", {"Image": image}).status == 204
    assert c.get(vm).json()["Inserted"] is True
    assert c.post(vm + "/Actions/VirtualMedia.InsertMedia", {"Image": image}).status == 409
    assert c.patch(bmc.spec.S, {"Boot": {"BootSourceOverrideTarget": "Cd",
                                         "BootSourceOverrideEnabled": "Once"}}).status == 204
    assert c.get(bmc.spec.S).json()["Boot"]["BootSourceOverrideTarget"] == "Cd"
    assert _reset(c, bmc).status == 204
    assert bmc.describe()["boot_state"]["state"] == "booting"
    clock.advance(bmc.faults["host_boot_s"] + 0.01)
    state = bmc.describe()["boot_state"]
    assert state["state"] == "ephemeral_runtime" and state["image"] == image and state["target"] == "Cd"
    # one-time override consumed; the next reset boots from disk
    assert c.get(bmc.spec.S).json()["Boot"]["BootSourceOverrideEnabled"] == "Disabled"
    assert c.post(vm + "/Actions/VirtualMedia.EjectMedia", {}).status == 204
    _reset(c, bmc)
    clock.advance(1)
    assert bmc.describe()["boot_state"]["state"] == "disk"
    assert bmc.describe()["boot_state"]["boots"] == 2


def test_cd_override_without_media_boots_disk(make_bmc, clock):
    bmc, c = make_bmc()
    c.patch(bmc.spec.S, {"Boot": {"BootSourceOverrideTarget": "Cd", "BootSourceOverrideEnabled": "Once"}})
    _reset(c, bmc)
    clock.advance(1)
    assert bmc.describe()["boot_state"]["state"] == "disk"
    bad = c.patch(bmc.spec.S, {"Boot": {"BootSourceOverrideTarget": "Floppy"}})
    assert bad.status == 400 and "Floppy" in bad.json()["error"]["message"]


def test_bios_patch_is_pending_until_reset(make_bmc, clock):
    bmc, c = make_bmc()
    settings = bmc.spec.bios_settings_uri
    name, value = next((k, v) for k, v in bmc.spec.sku["bios"]["attributes"].items() if v in ("Enabled", "Disabled"))
    other = "Disabled" if value == "Enabled" else "Enabled"
    assert c.patch(settings, {"Attributes": {name: other}}).status == 204
    assert c.get(bmc.spec.S + "/Bios").json()["Attributes"][name] == value
    assert c.get(settings).json()["Attributes"][name] == other
    assert bmc.describe()["bios"]["pending"] == {name: other}
    _reset(c, bmc)
    assert c.get(bmc.spec.S + "/Bios").json()["Attributes"][name] == other
    assert bmc.describe()["bios"]["pending"] == {}


def test_bios_patch_validated_against_registry(make_bmc):
    bmc, c = make_bmc()
    settings = bmc.spec.bios_settings_uri
    name = next(k for k, v in bmc.spec.sku["bios"]["attributes"].items() if v in ("Enabled", "Disabled"))
    wrong_case = c.patch(settings, {"Attributes": {name: "enabled"}})   # exact enum case
    info = wrong_case.json()["error"]["@Message.ExtendedInfo"][0]
    assert wrong_case.status == 400 and info["MessageId"] == "Base.1.22.PropertyValueNotInList"
    assert info["RelatedProperties"] == ["#/Attributes/%s" % name]
    unknown = c.patch(settings, {"Attributes": {"NoSuchAttribute": 1}})
    assert unknown.status == 400 and "NoSuchAttribute" in unknown.json()["error"]["message"]
    assert c.patch(bmc.spec.S + "/Bios", {"Attributes": {name: "Enabled"}}).status == 405


def test_etag_modes(make_bmc):
    bmc, c = make_bmc(faults={"etag": "require"})
    settings = bmc.spec.bios_settings_uri
    name = next(k for k, v in bmc.spec.sku["bios"]["attributes"].items() if v == "Enabled")
    body = {"Attributes": {name: "Disabled"}}
    missing = c.patch(settings, body)                        # 428 without If-Match
    assert missing.status == 428
    assert missing.json()["error"]["@Message.ExtendedInfo"][0]["MessageId"] == "Base.1.22.PreconditionRequired"
    etag = c.get(settings).headers["ETag"]
    assert c.get(settings).json()["@odata.etag"] == etag
    assert c.patch(settings, body, headers={"If-Match": '"stale"'}).status == 412
    assert c.patch(settings, body, headers={"If-Match": etag}).status == 204
    assert c.patch(settings, body, headers={"If-Match": etag}).status == 412   # the resource changed

    bmc, c = make_bmc(faults={"etag": "weak_refused"})      # AMI refuses its own weak ETag
    etag = c.get(bmc.spec.bios_settings_uri).headers["ETag"]
    assert etag.startswith('W/"')
    assert c.patch(bmc.spec.bios_settings_uri, body, headers={"If-Match": etag}).status == 412
    assert c.patch(bmc.spec.bios_settings_uri, body, headers={"If-Match": etag[2:]}).status == 204

    bmc, c = make_bmc(faults={"etag": "none"})
    assert "ETag" not in c.get(bmc.spec.S).headers
    assert c.patch(bmc.spec.bios_settings_uri, body, headers={"If-Match": '"whatever"'}).status == 204


def _run_task(c, clock, response, seconds):
    assert response.status == 202
    monitor = response.headers["Location"]
    assert monitor.endswith("/Monitor")
    running = c.get(monitor)
    assert running.status == 202 and running.json()["TaskState"] == "Running"
    clock.advance(seconds)
    return monitor


def test_simple_update_bmc_reboots_and_reports_new_version(make_bmc, clock):
    bmc, c = make_bmc(faults={"task_duration_s": 2, "bmc_reboot_s": 5, "bmc_warmup_s": 1})
    comp = _comp(bmc, "bmc")
    sha = hashlib.sha256(demo_image_bytes(bmc.spec.sku["sku"], "bmc", "12.00.00")).hexdigest()
    resp = c.post(SIMPLE, {"ImageURI": "https://fw.example.internal/bmc/12.00.00/image.bin",
                           "TransferProtocol": "HTTPS", "Oem": {"Symphony": {"ExpectedSha256": sha}}})
    task_uri = resp.json()["@odata.id"]
    clock.advance(1)
    assert 40 <= c.get(task_uri).json()["PercentComplete"] <= 60
    monitor = _run_task(c, clock, resp, 1.05)
    done = c.get(monitor)
    assert done.status == 200 and done.json()["TaskState"] == "Completed" and done.json()["TaskStatus"] == "OK"
    clock.advance(0.25)                                       # the BMC restarts itself
    assert c.get(ROOT).abort and not bmc.reachable()          # unreachable window
    clock.advance(5)
    warming = c.get(ROOT)
    assert warming.status == 503 and "Retry-After" in warming.headers
    clock.advance(1)
    assert c.get(task_uri).status == 404                      # task store wiped by the reboot
    fw = c.get(ROOT + "/UpdateService/FirmwareInventory/" + comp["match"]["ids"][0]).json()
    assert fw["Version"] == "12.00.00"
    assert c.get(bmc.spec.M).json()["FirmwareVersion"] == "12.00.00"


def test_slow_bmc_reboot_defect(make_bmc, clock):
    bmc, c = make_bmc([{"kind": "slow_bmc_reboot", "seconds": 30}], faults={"task_duration_s": 1})
    resp = c.post(SIMPLE, {"ImageURI": "https://fw.example.internal/bmc/12.00.00/image.bin"})
    _run_task(c, clock, resp, 1.3)
    c.get(ROOT)
    clock.advance(20)
    assert c.get(ROOT).abort
    clock.advance(11 + bmc.faults["bmc_warmup_s"])
    assert c.get(ROOT).status == 200
    assert bmc.describe()["firmware"]["bmc"] == "12.00.00"


def test_bios_image_from_manifest_uri_applies_at_host_reset(make_bmc, clock):
    bmc, c = make_bmc(faults={"task_duration_s": 1})
    comp = _comp(bmc, "bios")
    before = bmc.describe()["firmware"]["bios"]
    bmc.state.versions["bios"] = "BIOS Date: 01/01/2023 Ver 1.0"   # an older BIOS
    bmc.invalidate()
    resp = c.post(SIMPLE, {"ImageURI": comp["image"]["uri"], "TransferProtocol": "HTTPS",
                           "Oem": {"Symphony": {"ExpectedSha256": comp["image"]["sha256"]}}})
    monitor = _run_task(c, clock, resp, 1.01)
    body = c.get(monitor).json()
    assert body["TaskStatus"] == "OK" and body["Messages"][-1]["MessageId"] == "Update.1.3.AwaitToActivate"
    assert bmc.describe()["staged_firmware"] == {"bios": comp["target"]}
    assert c.get(bmc.spec.S).json()["BiosVersion"] == "BIOS Date: 01/01/2023 Ver 1.0"
    _reset(c, bmc)
    assert c.get(bmc.spec.S).json()["BiosVersion"] == comp["target"] == before


def test_sha256_mismatch_and_corrupt_image_fail_the_task(make_bmc, clock):
    bmc, c = make_bmc(faults={"task_duration_s": 1})
    uri = "https://fw.example.internal/bmc/12.00.00/image.bin"
    resp = c.post(SIMPLE, {"ImageURI": uri, "Oem": {"Symphony": {"ExpectedSha256": "0" * 64}}})
    body = c.get(_run_task(c, clock, resp, 1.01)).json()
    assert body["TaskState"] == "Exception" and body["TaskStatus"] == "Critical"
    assert body["Messages"][-1]["MessageId"] == "Update.1.3.VerificationFailed"
    resp = c.post(SIMPLE, {"ImageURI": uri + "?corrupt=1"})
    body = c.get(_run_task(c, clock, resp, 1.01)).json()
    assert body["TaskState"] == "Exception"
    resp = c.post(SIMPLE, {"ImageURI": "https://fw.example.internal/unknown.bin"})
    body = c.get(_run_task(c, clock, resp, 1.01)).json()
    assert body["Messages"][-1]["MessageId"] == "Update.1.3.TransferFailed"
    clock.advance(5)
    assert bmc.describe()["firmware"]["bmc"] == _comp(bmc, "bmc")["target"]   # nothing changed
    assert c.post(SIMPLE, {"ImageURI": "fw/bmc.bin"}).status == 400          # no scheme, no protocol


def test_firmware_task_fails_defect_is_completed_but_critical(make_bmc, clock):
    bmc, c = make_bmc([{"kind": "firmware_task_fails", "component": "bmc"}], faults={"task_duration_s": 1})
    resp = c.post(SIMPLE, {"ImageURI": "https://fw.example.internal/bmc/12.00.00/image.bin"})
    body = c.get(_run_task(c, clock, resp, 1.01)).json()
    assert (body["TaskState"], body["TaskStatus"]) == ("Completed", "Critical")
    assert body["Messages"][-1]["MessageId"] == "Update.1.3.ApplyFailed"
    clock.advance(10)
    assert bmc.reachable() and bmc.describe()["firmware"]["bmc"] == _comp(bmc, "bmc")["target"]


def _multipart(params, image):
    boundary = "XsymphonyX"
    parts = [b'--%s\r\nContent-Disposition: form-data; name="UpdateParameters"\r\nContent-Type: application/json'
             b'\r\n\r\n%s\r\n' % (boundary.encode(), json.dumps(params).encode()),
             b'--%s\r\nContent-Disposition: form-data; name="UpdateFile"; filename="image.bin"\r\n'
             b'Content-Type: application/octet-stream\r\n\r\n%s\r\n' % (boundary.encode(), image),
             b"--%s--\r\n" % boundary.encode()]
    return b"".join(parts), {"Content-Type": "multipart/form-data; boundary=%s" % boundary}


def test_multipart_push_checks_uploaded_bytes(make_bmc, clock):
    bmc, c = make_bmc(faults={"task_duration_s": 1})
    image = demo_image_bytes(bmc.spec.sku["sku"], "bios", "BIOS Date: 09/09/2024 Ver 2.0")
    body, headers = _multipart({"Targets": [], "Oem": {"Symphony": {"ExpectedSha256": hashlib.sha256(image).hexdigest()}}},
                               image)
    resp = c.request("POST", ROOT + "/UpdateService/upload", raw=body, headers=headers)
    # Supermicro (this SKU's BMC): the verify task is in the body, no Location; the image waits for StartUpdate
    assert resp.status == 202 and "Location" not in resp.headers
    verify = resp.json()["@odata.id"]
    clock.advance(1.01)
    assert c.get(verify).json()["Messages"][-1]["MessageId"] == "Update.1.3.AwaitToUpdate"
    assert bmc.describe()["staged_firmware"] == {}
    resp = c.post(ROOT + "/UpdateService/Actions/UpdateService.StartUpdate", {})
    task = c.get(_run_task(c, clock, resp, 1.01)).json()
    assert task["TaskStatus"] == "OK"
    assert bmc.describe()["staged_firmware"]["bios"] == "BIOS Date: 09/09/2024 Ver 2.0"
    assert bmc.describe()["tasks"][0]["sha256"] == hashlib.sha256(image).hexdigest()
    body, headers = _multipart({}, b"not a firmware image")
    resp = c.request("POST", ROOT + "/UpdateService/upload", raw=body, headers=headers)
    assert resp.status == 202
    clock.advance(1.01)
    assert c.get(resp.json()["@odata.id"]).json()["TaskState"] == "Exception"


def test_sessions_limit_delete_and_stale_token(make_bmc, clock):
    bmc, c = make_bmc(faults={"max_sessions": 2, "session_timeout_s": 60})
    login = {"UserName": "admin", "Password": "pw"}
    s1 = c.post(ROOT + "/SessionService/Sessions", login, auth=False)
    assert s1.status == 201 and s1.headers["Location"].startswith(ROOT + "/SessionService/Sessions/")
    token = s1.headers["X-Auth-Token"]
    assert c.get(ROOT + "/Systems", auth=False, headers={"X-Auth-Token": token}).status == 200
    c.post(ROOT + "/SessionService/Sessions", login, auth=False)
    full = c.post(ROOT + "/SessionService/Sessions", login, auth=False)
    assert full.status == 503
    assert full.json()["error"]["@Message.ExtendedInfo"][0]["MessageId"] == "Base.1.22.SessionLimitExceeded"
    assert c.request("DELETE", s1.headers["Location"], auth=False, headers={"X-Auth-Token": token}).status == 204
    assert c.get(ROOT + "/Systems", auth=False, headers={"X-Auth-Token": token}).status == 401
    s3 = c.post(ROOT + "/SessionService/Sessions", login, auth=False)
    assert s3.status == 201
    clock.advance(61)
    stale = c.get(ROOT + "/Systems", auth=False, headers={"X-Auth-Token": s3.headers["X-Auth-Token"]})
    assert stale.status == 401 and stale.headers["Content-Type"] == "text/html"
    assert c.post(ROOT + "/SessionService/Sessions", {"UserName": "admin", "Password": "x"}, auth=False).status == 401
    assert c.get(ROOT + "/Systems", auth=False).status == 401
    assert c.get(ROOT, auth=False).status == 200        # the service root needs no auth


def test_stats_count_writes_but_not_session_login(make_bmc):
    bmc, c = make_bmc()
    s = c.post(ROOT + "/SessionService/Sessions", {"UserName": "admin", "Password": "pw"}, auth=False)
    c.get(bmc.spec.S)
    c.get(bmc.spec.S)
    c.request("DELETE", s.headers["Location"])
    stats = bmc.stats
    assert (stats["GET"], stats["POST"], stats["DELETE"], stats["writes"]) == (2, 1, 1, 0)
    c.patch(bmc.spec.S, {"Boot": {"BootSourceOverrideTarget": "Pxe", "BootSourceOverrideEnabled": "Once"}})
    assert bmc.stats["writes"] == 1 and bmc.stats["PATCH"] == 1
    assert bmc.stats["write_log"] == [{"method": "PATCH", "path": bmc.spec.S}]
    control = bmc.handle("DELETE", "/_emulator/stats")
    assert control.status == 200 and bmc.stats["writes"] == 0
    state = json.loads(bmc.handle("GET", "/_emulator/state").body)
    assert state["boot_override"] == {"enabled": "Once", "target": "Pxe"}
