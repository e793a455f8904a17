"""Every case of shared/cases/redfish-cases.md against the client (requests-mock BMC)."""

import json

import pytest
import requests

from ansible_collections.symphony.cluster.plugins.module_utils._redfish.client import (
    RedfishAuthError,
    RedfishClient,
    RedfishConnectionError,
    RedfishHTTPError,
    RedfishIncomplete,
    RedfishInvalidResponse,
    RedfishTaskError,
    RedfishTimeout,
    parse_retry_after,
)
from ansible_collections.symphony.cluster.plugins.module_utils._redfish.registries import MessageRegistries

from .redfish_mockserver import BASE, MockupBMC

PW = "s3cr3t-Passw0rd"
ROOT = {"@odata.id": "/redfish/v1", "RedfishVersion": "1.15.0",
        "Links": {"Sessions": {"@odata.id": "/redfish/v1/SessionService/Sessions"}},
        "Systems": {"@odata.id": "/redfish/v1/Systems"}}


@pytest.fixture(scope="module")
def registries(shared):
    return MessageRegistries(directory=str(shared / "reference" / "redfish-registries"))


@pytest.fixture
def sleeps():
    return []


@pytest.fixture
def bmc():
    with MockupBMC(None) as b:
        b.set("GET", "/redfish/v1", (200, {}, ROOT))
        yield b


@pytest.fixture
def client(bmc, registries, sleeps):
    c = RedfishClient(BASE, "admin", PW, registries=registries, sleep=sleeps.append, retries=3, backoff_s=0.5)
    with c:
        yield c


def ok(body, headers=None):
    return (200, headers or {}, body)


# ------------------------------------------------------------------ ETag, If-Match, 428, 412
def test_r1_patch_sends_if_match_from_fresh_get(bmc, client):
    bmc.set("GET", "/redfish/v1/Systems/1/Bios", ok({"@odata.etag": "\"e4f1-placeholder\"", "Attributes": {}},
                                                    {"ETag": "\"e4f1-placeholder\""}))
    bmc.set("PATCH", "/redfish/v1/Systems/1/Bios/Pending", (204, {}, None))
    res = client.patch("/redfish/v1/Systems/1/Bios/Pending", {"Attributes": {"BootMode": "UEFIMode"}},
                       etag=None)
    assert res["status"] == 204
    # explicit etag auto: GET the target first, If-Match from the ETag header
    bmc.set("GET", "/redfish/v1/Systems/1/Bios/Pending", ok({"Attributes": {}}, {"ETag": "\"e4f1-placeholder\""}))
    client.patch("/redfish/v1/Systems/1/Bios/Pending", {"Attributes": {"BootMode": "UEFIMode"}})
    patches = bmc.requests("PATCH")
    assert patches[-1][2]["If-Match"] == "\"e4f1-placeholder\""


def test_r1_428_then_exactly_one_get_and_retry(bmc, client):
    path = "/redfish/v1/Systems/1/Bios/Pending"
    body428 = {"error": {"code": "Base.1.4.GeneralError",
                         "@Message.ExtendedInfo": [{"MessageId": "Base.1.4.PreconditionRequired"}]}}
    bmc.set("GET", path, ok({"@odata.etag": "\"e4f1-placeholder\"", "Attributes": {}}))
    bmc.set("PATCH", path, (428, {}, body428), (200, {}, {"@odata.id": path}))
    res = client.patch(path, {"Attributes": {"BootMode": "UEFIMode"}}, etag=None)
    assert res["status"] == 200 and res["etag"] == "\"e4f1-placeholder\""
    patches = bmc.requests("PATCH", path)
    assert len(patches) == 2
    assert "If-Match" not in patches[0][2] and patches[1][2]["If-Match"] == "\"e4f1-placeholder\""
    assert len(bmc.requests("GET", path)) == 1


def test_r1_428_twice_raises_with_resolved_message(bmc, client):
    path = "/redfish/v1/Systems/1/Bios/Pending"
    body428 = {"error": {"@Message.ExtendedInfo": [{"MessageId": "Base.1.4.PreconditionRequired"}]}}
    bmc.set("GET", path, ok({"@odata.etag": "\"abc\""}))
    bmc.set("PATCH", path, (428, {}, body428))
    with pytest.raises(RedfishHTTPError) as ei:
        client.patch(path, {"Attributes": {}}, etag=None)
    assert ei.value.status == 428
    assert "Base.1.4.PreconditionRequired" in str(ei.value)
    # resolved through the Base registry (Base.1.4 id, Base.1.22.1 file)
    assert ei.value.extended_info[0]["Message"] == "A precondition header or annotation is required to change this resource."
    assert len(bmc.requests("PATCH", path)) == 2


def test_r4_weak_etag_refused_is_retried_strong(bmc, client):
    path = "/redfish/v1/Systems/Self/Bios/SD"
    bmc.set("GET", path, ok({"@odata.etag": "W/\"1700000000\"", "Attributes": {}}))
    fail412 = (412, {}, {"error": {"@Message.ExtendedInfo": [{"MessageId": "Base.1.8.PreconditionFailed"}]}})
    bmc.set("PATCH", path, fail412, (204, {}, None))
    res = client.patch(path, {"Attributes": {"SETTING_A": "Disable"}})
    assert res["status"] == 204
    sent = [r[2].get("If-Match") for r in bmc.requests("PATCH", path)]
    assert sent == ["W/\"1700000000\"", "\"1700000000\""]


# ------------------------------------------------------------------ collections
def test_r7_next_link_followed(bmc, client):
    base = "/redfish/v1/UpdateService/FirmwareInventory"
    bmc.set("GET", base, ok({"Members@odata.count": 3, "Members": [{"@odata.id": base + "/FW_A"},
                                                                   {"@odata.id": base + "/FW_B"}],
                             "Members@odata.nextLink": base + "?$skip=2"}))
    bmc.set("GET", base + "?$skip=2", ok({"Members@odata.count": 3, "Members": [{"@odata.id": base + "/FW_C"}]}))
    for n in "ABC":
        bmc.set("GET", base + "/FW_" + n, ok({"@odata.id": base + "/FW_" + n, "Id": "FW_" + n, "Version": "1"}))
    items = client.members(base, expand=False)
    assert [i["Id"] for i in items] == ["FW_A", "FW_B", "FW_C"]
    assert client.warnings == []


def test_r7_loop_and_page_cap_and_count_mismatch(bmc, client):
    base = "/redfish/v1/Chassis/1/Sensors"
    bmc.set("GET", base, ok({"Members@odata.count": 5, "Members": [{"@odata.id": base + "/A"}],
                             "Members@odata.nextLink": base + "?$skip=1"}))
    bmc.set("GET", base + "?$skip=1", ok({"Members": [{"@odata.id": base + "/B"}],
                                          "Members@odata.nextLink": base}))  # loops back
    items = client.members(base, fetch=False)
    assert [i["@odata.id"] for i in items] == [base + "/A", base + "/B"]
    assert any("nextLink loop" in w for w in client.warnings)
    assert any("Members@odata.count is 5 but 2" in w for w in client.warnings)


def test_r7_page_cap(bmc, registries, sleeps):
    base = "/redfish/v1/Big"
    with MockupBMC(None) as b:
        b.set("GET", "/redfish/v1", ok(ROOT))
        for i in range(10):
            b.set("GET", base + ("?$skip=%d" % i if i else ""),
                  ok({"Members": [{"@odata.id": base + "/%d" % i}], "Members@odata.nextLink": base + "?$skip=%d" % (i + 1)}))
        with RedfishClient(BASE, "admin", PW, registries=registries, page_cap=3, sleep=sleeps.append) as c:
            items = c.members(base, fetch=False)
    assert len(items) == 3
    assert any("more than 3 pages" in w for w in c.warnings)


def test_r26_overlapping_pages_deduped_dgx_sensors(mockups, registries):
    root = mockups / "libredfish-nvidia_viking"
    with MockupBMC(root, honour_expand=False) as b:
        with RedfishClient(BASE, "admin", PW, registries=registries) as c:
            refs = c.members("/redfish/v1/Chassis/DGX/Sensors", fetch=False)
            assert len(refs) == 264 and len({r["@odata.id"] for r in refs}) == 264
            # the naive concatenation of the 4 captured pages is 606 entries
            pages = ["", "?$skip=75", "?$skip=150", "?$skip=225"]
            naive = sum(len(json.load(open(str(root) + "/redfish/v1/Chassis/DGX/Sensors%s/index.json" % p))["Members"])
                        for p in pages)
            assert naive == 606
            pcie = c.members("/redfish/v1/Chassis/DGX/PCIeDevices", fetch=False)
            assert len(pcie) == len({p["@odata.id"] for p in pcie})
    assert c.warnings == []


def test_r26_minimal_overlap_follow_until_count(bmc, client):
    base = "/redfish/v1/X"
    mk = [{"@odata.id": base + "/" + n} for n in "ABC"]
    bmc.set("GET", base, ok({"Members@odata.count": 4, "Members": mk, "Members@odata.nextLink": base + "?$skip=2"}))
    bmc.set("GET", base + "?$skip=2", ok({"Members@odata.count": 4, "Members": [mk[2], {"@odata.id": base + "/D"}]}))
    refs = client.members(base, fetch=False)
    assert [r["@odata.id"][-1] for r in refs] == ["A", "B", "C", "D"]


def test_r11_collection_without_members_is_incomplete(bmc, client):
    base = "/redfish/v1/UpdateService/FirmwareInventory"
    bmc.set("GET", base, ok({"@odata.id": base, "Name": "Firmware Inventory Collection"}))
    with pytest.raises(RedfishIncomplete) as ei:
        client.members(base)
    assert "INCOMPLETE" in str(ei.value) and "not empty" in str(ei.value)


def test_expand_used_when_advertised(mockups, registries):
    with MockupBMC(mockups / "libredfish-dell") as b:
        with RedfishClient(BASE, "admin", PW, registries=registries) as c:
            mem = c.members("/redfish/v1/Systems/System.Embedded.1/Memory")
    assert len(mem) == 16 and all("CapacityMiB" in m for m in mem)
    gets = [r[1] for r in b.requests("GET") if "Memory" in r[1]]
    assert gets == ["/redfish/v1/Systems/System.Embedded.1/Memory?$expand=.($levels=1)"]


def test_expand_refused_falls_back(mockups, registries):
    with MockupBMC(mockups / "libredfish-dell") as b:
        b.set("GET", "/redfish/v1/Systems/System.Embedded.1/Memory?$expand=.($levels=1)", (501, {}, ""))
        with RedfishClient(BASE, "admin", PW, registries=registries) as c:
            mem = c.members("/redfish/v1/Systems/System.Embedded.1/Memory")
            assert c.expand_param() is None
    assert len(mem) == 16
    assert any("refused $expand" in w for w in c.warnings)


# ------------------------------------------------------------------ SimpleUpdate protocols, 400 PropertyMissing
def test_r9_property_missing_resolved_from_registry(bmc, client):
    target = "/redfish/v1/UpdateService/Actions/UpdateService.SimpleUpdate"
    bmc.set("POST", target, (400, {}, {"error": {"@Message.ExtendedInfo": [
        {"MessageId": "Base.1.8.PropertyMissing", "MessageArgs": ["TransferProtocol"]}]}}))
    with pytest.raises(RedfishHTTPError) as ei:
        client.post(target, {"ImageURI": "http://192.0.2.10/fw/bios.bin"})
    e = ei.value
    assert e.status == 400
    assert e.extended_info[0]["Message"] == \
        "The property TransferProtocol is a required property and must be included in the request."
    assert "TransferProtocol" in str(e)
    assert len(bmc.requests("POST", target)) == 1  # a 400 is not retried


# ------------------------------------------------------------------ R-13 and the whole kind: 5xx / 408 / 429 / connection
def test_r13_html_500_retried_then_excerpt(bmc, client, sleeps):
    html = "<html><body><h1>500 - Internal Server Error</h1></body></html>"
    bmc.set("GET", "/redfish/v1/Systems", (500, {"Content-Type": "text/html"}, html))
    with pytest.raises(RedfishHTTPError) as ei:
        client.get("/redfish/v1/Systems")
    e = ei.value
    assert e.status == 500 and e.body_excerpt == html[:200]
    assert "Manager.Reset" in str(e)
    assert len(bmc.requests("GET", "/redfish/v1/Systems")) == 4  # 1 + 3 retries
    assert sleeps == [0.5, 1.0, 2.0]


@pytest.mark.parametrize("status", [408, 429, 500, 502, 503, 504])
def test_retryable_statuses_recover(bmc, client, sleeps, status):
    bmc.set("GET", "/redfish/v1/Systems", (status, {}, ""), ok({"Members": []}))
    assert client.get("/redfish/v1/Systems") == {"Members": []}
    assert sleeps == [0.5]


def test_retry_after_honoured_and_capped(bmc, registries, sleeps):
    with MockupBMC(None) as b:
        b.set("GET", "/redfish/v1", ok(ROOT))
        b.set("GET", "/redfish/v1/Systems", (503, {"Retry-After": "7"}, ""), (429, {"Retry-After": "999"}, ""),
              ok({"Members": []}))
        with RedfishClient(BASE, "admin", PW, registries=registries, sleep=sleeps.append,
                           max_retry_after_s=60) as c:
            c.get("/redfish/v1/Systems")
    assert sleeps == [7.0, 60.0]
    assert any("Retry-After 999" in w for w in c.warnings)
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT", now=1445412470.0) == 10.0


def test_post_not_resent_on_500_but_on_503(bmc, client, sleeps):
    bmc.set("POST", "/redfish/v1/Act", (500, {}, ""))
    with pytest.raises(RedfishHTTPError):
        client.post("/redfish/v1/Act", {})
    assert len(bmc.requests("POST", "/redfish/v1/Act")) == 1
    bmc.set("POST", "/redfish/v1/Act2", (503, {"Retry-After": "1"}, ""), (204, {}, None))
    assert client.post("/redfish/v1/Act2", {})["status"] == 204


def test_connection_errors_retried_then_typed(bmc, client, sleeps):
    bmc.set("GET", "/redfish/v1/Systems", requests.exceptions.ConnectionError("Connection refused"))
    with pytest.raises(RedfishConnectionError) as ei:
        client.get("/redfish/v1/Systems")
    assert "bmc.test /redfish/v1/Systems" in str(ei.value)
    assert len(sleeps) == 3
    bmc.set("GET", "/redfish/v1/Chassis", requests.exceptions.ReadTimeout("read timed out"))
    with pytest.raises(RedfishTimeout) as ei:
        client.get("/redfish/v1/Chassis")
    assert "read timeout after 30s" in str(ei.value)


def test_tls_error_not_retried(bmc, client, sleeps):
    bmc.set("GET", "/redfish/v1/Systems", requests.exceptions.SSLError("certificate verify failed"))
    with pytest.raises(RedfishConnectionError) as ei:
        client.get("/redfish/v1/Systems")
    assert "ca_path" in str(ei.value) and sleeps == []


def test_bad_json_retried_then_invalid_response(bmc, client, sleeps):
    bmc.set("GET", "/redfish/v1/Systems", (200, {"Content-Type": "application/json"}, "{\"Members\": [tru"))
    with pytest.raises(RedfishInvalidResponse) as ei:
        client.get("/redfish/v1/Systems")
    assert ei.value.status == 200 and ei.value.body_excerpt.startswith("{\"Members\"")
    assert len(sleeps) == 3


def test_verify_off_warns_and_default_on(registries, monkeypatch, tmp_path):
    monkeypatch.delenv("REQUESTS_CA_BUNDLE", raising=False)
    monkeypatch.delenv("CURL_CA_BUNDLE", raising=False)
    c = RedfishClient(BASE, "admin", PW, registries=registries, verify=False)
    assert any("TLS certificate verification is disabled" in w for w in c.warnings)
    c2 = RedfishClient(BASE, "admin", PW, registries=registries)
    assert c2._conn._verify is True and c2.warnings == []
    # the environment is read once per client, as requests reads it per request: its CA bundle applies
    # to verify=True, never to an explicit ca_path or to verify=False
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", "/etc/ssl/certs/env-ca.pem")
    assert RedfishClient(BASE, "admin", PW, registries=registries)._conn._verify == "/etc/ssl/certs/env-ca.pem"
    assert RedfishClient(BASE, "admin", PW, registries=registries, verify=False)._conn._verify is False
    assert RedfishClient(BASE, "admin", PW, registries=registries)._conn._session.trust_env is False
    ca = tmp_path / "ca.pem"
    ca.write_text("-----BEGIN CERTIFICATE-----\n")
    c3 = RedfishClient(BASE, "admin", PW, registries=registries, ca_path=str(ca))
    assert c3._conn._verify == str(ca)
    assert PW not in repr(c) and PW not in repr(c3)


# ------------------------------------------------------------------ tasks
def test_r15_monitor_202_then_done(bmc, client, sleeps):
    bmc.set("POST", "/redfish/v1/UpdateService/Actions/UpdateService.SimpleUpdate",
            (202, {"Location": "/redfish/v1/TaskService/Tasks/5/Monitor", "Retry-After": "10"}, ""))
    mon = "/redfish/v1/TaskService/Tasks/5/Monitor"
    bmc.set("GET", mon, (202, {"Retry-After": "10"}, {"@odata.id": "/redfish/v1/TaskService/Tasks/5",
                                                      "TaskState": "Running", "PercentComplete": 40}),
            (200, {}, {"@odata.id": "/redfish/v1/TaskService/Tasks/5", "TaskState": "Completed",
                       "TaskStatus": "OK", "PercentComplete": 100}))
    r = client.post("/redfish/v1/UpdateService/Actions/UpdateService.SimpleUpdate", {"ImageURI": "http://x/y"})
    assert r["task_monitor"] == BASE + mon and r["retry_after_s"] == 10.0
    res = client.wait_task(r["task_monitor"], timeout_s=60, poll_s=1)
    assert res["state"] == "Completed" and res["status"] == "OK"
    assert res["task_uri"] == BASE + "/redfish/v1/TaskService/Tasks/5"
    assert sleeps == [10.0]


def test_r15_monitor_gone_falls_back_to_task(bmc, client):
    mon = "/redfish/v1/TaskService/TaskMonitors/9"  # bmcweb shape
    bmc.set("GET", mon, (202, {}, {"@odata.id": "/redfish/v1/TaskService/Tasks/9", "TaskState": "Running"}),
            (404, {}, ""))
    done = {"@odata.id": "/redfish/v1/TaskService/Tasks/9", "TaskState": "Completed", "TaskStatus": "OK"}
    bmc.set("GET", "/redfish/v1/TaskService/Tasks/9", (200, {}, done))
    res = client.wait_task(mon, timeout_s=60, poll_s=0)
    assert res["state"] == "Completed"


def test_r15_monitor_answers_operation_response(bmc, client):
    bmc.set("GET", "/redfish/v1/TaskService/TaskMonitors/3", (202, {}, ""), (204, {}, ""))
    res = client.wait_task("https://bmc.test/redfish/v1/TaskService/TaskMonitors/3", timeout_s=60, poll_s=0)
    assert res["state"] == "Completed" and res["status"] == "OK"


@pytest.mark.parametrize("state,status", [("Completed", "Critical"), ("Completed", "Warning"),
                                          ("Exception", "Critical"), ("Killed", None), ("Cancelled", None)])
def test_r17_completed_but_failed(bmc, client, state, status):
    task = "/redfish/v1/TaskService/Tasks/JID_000000000001"
    bmc.set("GET", task, (200, {}, {"@odata.id": task, "TaskState": state, "TaskStatus": status,
                                    "PercentComplete": 100, "Messages": [
                                        {"MessageId": "IDRAC.2.8.JCP052",
                                         "Message": "The Job was in running state and made no progress for the "
                                                    "allocated time."}]}))
    with pytest.raises(RedfishTaskError) as ei:
        client.wait_task(task, timeout_s=60, poll_s=0)
    assert "IDRAC.2.8.JCP052" in str(ei.value) and "no progress" in str(ei.value)


def test_r18_bmc_reboots_task_wiped_is_unknown(bmc, client, sleeps):
    task = "/redfish/v1/TaskService/Tasks/7"
    bmc.set("GET", task, (202, {}, {"@odata.id": task, "TaskState": "Running", "PercentComplete": 10}),
            (202, {}, {"@odata.id": task, "TaskState": "Running", "PercentComplete": 60}),
            requests.exceptions.ConnectionError("Connection refused"),
            requests.exceptions.ConnectionError("Connection refused"),
            requests.exceptions.ConnectionError("Connection refused"),
            requests.exceptions.ConnectionError("Connection refused"),
            (503, {}, ""), (503, {}, ""), (503, {}, ""), (503, {}, ""),
            (404, {}, ""))
    res = client.wait_task(task, timeout_s=3600, poll_s=5)
    assert res["unknown"] is True and res["state"] == "Unknown" and res["percent"] == 60
    assert any("unreachable while following task" in w for w in client.warnings)


def test_r18_wait_service_then_new_session(bmc, client):
    first_session = list(bmc.sessions.values())[0]
    bmc.sessions.clear()  # the BMC rebooted: the old session is gone
    bmc.set("GET", "/redfish/v1", requests.exceptions.ConnectionError("Connection refused"), (503, {}, ""),
            (200, {}, ROOT))
    waited = client.wait_service(timeout_s=600, poll_s=10)
    assert waited >= 0
    new_session = list(bmc.sessions.values())[0]
    assert new_session != first_session
    bmc.set("GET", "/redfish/v1/Systems", ok({"Members": []}))
    assert client.get("/redfish/v1/Systems") == {"Members": []}
    token = bmc.requests("GET", "/redfish/v1/Systems")[-1][2]["X-Auth-Token"]
    assert bmc.sessions[token] == new_session


def test_task_timeout(bmc, client):
    bmc.set("GET", "/redfish/v1/TaskService/Tasks/1", (202, {}, {"TaskState": "Running", "PercentComplete": 5}))
    with pytest.raises(RedfishTimeout) as ei:
        client.wait_task("/redfish/v1/TaskService/Tasks/1", timeout_s=0, poll_s=1)
    assert "not finished after 0s" in str(ei.value)


# ------------------------------------------------------------------
def test_r20_2xx_with_system_reset_required_is_pending(bmc, client):
    path = "/redfish/v1/Systems/1/bios/settings/"
    bmc.set("PATCH", path, (200, {}, {"error": {"code": "iLO.0.10.ExtendedInfo", "@Message.ExtendedInfo": [
        {"MessageId": "iLO.2.14.SystemResetRequired"}]}}))
    res = client.patch(path, {"Attributes": {"WorkloadProfile": "HighPerformanceCompute"}}, etag=None)
    assert res["status"] == 200 and res["pending_reboot"] is True


def test_r21_400_lists_every_extended_info(bmc, client):
    path = "/redfish/v1/Systems/1/Bios/Settings"
    bmc.set("PATCH", path, (400, {}, {"error": {"@Message.ExtendedInfo": [
        {"MessageId": "IDRAC.2.3.SYS409", "MessageArgs": ["PxeDev2EnDis"],
         "RelatedProperties": ["#/Attributes/PxeDev2EnDis"], "Severity": "Warning"},
        {"MessageId": "Base.1.8.PropertyValueNotInList", "MessageArgs": ["disabled", "PxeDev2EnDis"]}]}}))
    with pytest.raises(RedfishHTTPError) as ei:
        client.patch(path, {"Attributes": {"PxeDev2EnDis": "disabled"}}, etag=None)
    e = ei.value
    text = str(e)
    assert "IDRAC.2.3.SYS409" in text and "#/Attributes/PxeDev2EnDis" in text and "PxeDev2EnDis" in text
    assert e.extended_info[0]["RelatedProperties"] == ["#/Attributes/PxeDev2EnDis"]
    assert e.extended_info[0]["Severity"] == "Warning"
    assert e.extended_info[1]["Message"].startswith("The value 'disabled' for the property PxeDev2EnDis")


# ------------------------------------------------------------------ sessions
def test_r23_session_deleted_on_close_even_after_error(registries):
    with MockupBMC(None) as b:
        b.set("GET", "/redfish/v1", ok(ROOT))
        with pytest.raises(RedfishHTTPError):
            with RedfishClient(BASE, "admin", PW, registries=registries, retries=0) as c:
                c.get("/redfish/v1/Nope")
        assert b.deleted == ["/redfish/v1/SessionService/Sessions/1"] and b.sessions == {}
        login = b.requests("POST", "/redfish/v1/SessionService/Sessions")[0]
        assert "Authorization" not in login[2] and "X-Auth-Token" not in login[2]


def test_r23_session_limit_falls_back_to_basic(registries):
    with MockupBMC(None) as b:
        b.set("GET", "/redfish/v1", ok(ROOT))
        b.set("POST", "/redfish/v1/SessionService/Sessions", (503, {}, {"error": {"@Message.ExtendedInfo": [
            {"MessageId": "Base.1.8.SessionLimitExceeded"}]}}))
        b.set("GET", "/redfish/v1/SessionService", lambda req: (200, {}, {"SessionTimeout": 300}) if
              "Authorization" in req.headers else (401, {}, ""))
        with RedfishClient(BASE, "admin", PW, registries=registries, auth="auto") as c:
            assert c.used_auth == "basic" and c.session_timeout_s == 300
            got = b.requests("GET", "/redfish/v1/SessionService")[-1]
            assert got[2]["Authorization"].startswith("Basic ")
        assert any("SessionLimitExceeded" in w and "Basic" in w for w in c.warnings)
        # auth=session does not fall back: the resolved message says why
        with pytest.raises(RedfishHTTPError) as ei:
            RedfishClient(BASE, "admin", PW, registries=registries, auth="session").open()
        assert "simultaneous sessions exceeding the limit" in str(ei.value)


def test_r23_stale_token_html_401_relogins_once(bmc, client):
    old = dict(bmc.sessions)
    bmc.sessions.clear()  # token expired on the BMC (SessionTimeout)
    bmc.set("GET", "/redfish/v1/Systems", lambda req: (200, {}, {"Members": []}) if
            req.headers.get("X-Auth-Token") in bmc.sessions else (401, {"Content-Type": "text/html"}, ""))
    assert client.get("/redfish/v1/Systems") == {"Members": []}
    assert set(bmc.sessions) != set(old) and len(bmc.sessions) == 1


def test_r23_wrong_password_is_auth_error_without_secret(registries):
    with MockupBMC(None) as b:
        b.set("GET", "/redfish/v1", ok(ROOT))
        for mode in ("session", "auto", "basic"):
            with pytest.raises(RedfishAuthError) as ei:
                RedfishClient(BASE, "admin", "wrong-Pa55", registries=registries, auth=mode).open()
            assert "login refused for user 'admin'" in str(ei.value) or "access denied" in str(ei.value)
            assert "wrong-Pa55" not in str(ei.value) and "wrong-Pa55" not in json.dumps(ei.value.to_dict())
        assert b.sessions == {}


# ------------------------------------------------------------------ misc API
def test_concurrency_cap_and_request_counter(mockups, registries):
    import threading
    peak = [0]
    cur = [0]
    lock = threading.Lock()
    with MockupBMC(mockups / "cray-OpenBMC-stock", honour_expand=False) as b:
        orig = b._match

        def slow(req):
            with lock:
                cur[0] += 1
                peak[0] = max(peak[0], cur[0])
            import time
            time.sleep(0.005)
            try:
                return orig(req)
            finally:
                with lock:
                    cur[0] -= 1
        b.mocker._adapter._matchers[:] = [slow]
        with RedfishClient(BASE, "admin", PW, registries=registries, max_concurrency=2) as c:
            before = c.requests
            items = c.members("/redfish/v1/Registries")
            assert c.requests - before == 1 + len(items)
    assert 1 <= peak[0] <= 2 and len(items) == 4


def test_multipart_push(bmc, client):
    def check(req):
        assert b"UpdateParameters" in req.body and b"UpdateFile" in req.body and b"\x00IMG" in req.body
        return (202, {"Location": "/redfish/v1/TaskService/Tasks/2"}, "")
    bmc.set("POST", "/redfish/v1/UpdateService/upload", check)
    res = client.multipart_push("/redfish/v1/UpdateService/upload", b"\x00IMG", {"Targets": []})
    assert res["status"] == 202 and res["task_monitor"].endswith("/Tasks/2")


def test_bmc_registries_loaded(mockups):
    regs = MessageRegistries(include_sushy=False)
    with MockupBMC(mockups / "cray-EX235a"):
        with RedfishClient(BASE, "admin", PW, registries=regs) as c:
            n = c.load_registries()
    assert n >= 5 and "crayalerts" in regs.prefixes()


def test_expand_levels_capped_at_max_levels_and_star(mockups, registries):
    # Supermicro X13 advertises ExpandAll/NoLinks/Levels with MaxLevels 2; Dell R750 MaxLevels 1
    with MockupBMC(mockups / "libredfish-supermicro"):
        with RedfishClient(BASE, "admin", PW, registries=registries) as c:
            assert c.expand_levels() == 2
            assert c.expand_param() == ".($levels=1)" and c.expand_param(5) == ".($levels=2)"
            assert c.expand_url("/redfish/v1/Chassis/1/NetworkAdapters", 2, "*") == \
                "/redfish/v1/Chassis/1/NetworkAdapters?$expand=*($levels=2)"
    with MockupBMC(mockups / "libredfish-dell"):
        with RedfishClient(BASE, "admin", PW, registries=registries) as c:
            assert c.expand_levels() == 1 and c.expand_param(2) == ".($levels=1)"
    with MockupBMC(mockups / "cray-EX235a"):
        with RedfishClient(BASE, "admin", PW, registries=registries) as c:
            assert c.expand_levels() == 0 and c.expand_url("/redfish/v1/Systems", 2) == "/redfish/v1/Systems"


def test_get_many_keeps_order_and_collects_errors(bmc, registries):
    for i in range(6):
        bmc.set("GET", "/redfish/v1/Things/%d" % i, ok({"@odata.id": "/redfish/v1/Things/%d" % i, "N": i}))
    bmc.set("GET", "/redfish/v1/Things/3", (404, {}, {"error": {"@Message.ExtendedInfo": [
        {"MessageId": "Base.1.8.ResourceMissingAtURI", "MessageArgs": ["/redfish/v1/Things/3"]}]}}))
    with RedfishClient(BASE, "admin", PW, registries=registries, retries=0, max_concurrency=3) as c:
        out = c.get_many(["/redfish/v1/Things/%d" % i for i in range(6)], errors=[])
        assert [b["N"] if b else None for b, _e in out] == [0, 1, 2, None, 4, 5]
        assert out[3][1].status == 404
        with pytest.raises(RedfishHTTPError):
            c.get_many(["/redfish/v1/Things/%d" % i for i in range(6)])
        assert c._pool is not None
    assert c._pool is None  # the worker threads end with the client
