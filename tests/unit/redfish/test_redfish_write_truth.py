"""Issue 16: what a write's answer really says, on a scripted BMC (requests-mock).

Where the task of an accepted write is (Location, a Task/Job body, ExtendedInfo MessageArgs, a 303 to the task
monitor; DSP0266 "Asynchronous operations"), Dell jobs and tasks waiting for a reset, redirects of writes and reads
(RFC 9110 §15.4), and ETags: quoting normalised, one re-read on 412, If-Match never dropped (DSP0266 "ETags").
"""

import pytest

from ansible_collections.symphony.cluster.plugins.module_utils._redfish.client import (
    RedfishClient,
    RedfishHTTPError,
    RedfishTaskError,
)
from ansible_collections.symphony.cluster.plugins.module_utils._redfish.transport import normalise_etag

from .redfish_mockserver import BASE, MockupBMC

PW = "s3cr3t-Passw0rd"
ROOT = {"@odata.id": "/redfish/v1", "RedfishVersion": "1.15.0",
        "Links": {"Sessions": {"@odata.id": "/redfish/v1/SessionService/Sessions"}}}
UPLOAD = "/redfish/v1/UpdateService/upload"
RESET = "/redfish/v1/Systems/1/Actions/ComputerSystem.Reset"
BIOS_SD = "/redfish/v1/Systems/1/Bios/Settings"
FAIL412 = (412, {}, {"error": {"@Message.ExtendedInfo": [
    {"MessageId": "Base.1.8.PreconditionFailed", "Message": "The ETag supplied did not match the ETag required."}]}})


@pytest.fixture
def bmc():
    with MockupBMC(None) as b:
        b.set("GET", "/redfish/v1", (200, {}, ROOT))
        yield b


@pytest.fixture
def client(bmc):
    c = RedfishClient(BASE, "admin", PW, sleep=lambda s: None, retries=1)
    with c:
        yield c


# ------------------------------------------------------------------ where the task is
def test_task_from_location_of_a_202(bmc, client):
    bmc.set("POST", UPLOAD, (202, {"Location": "/redfish/v1/TaskService/Tasks/7/Monitor"}, None))
    res = client.post(UPLOAD, {})
    assert (res["task_monitor"], res["task_source"]) == (BASE + "/redfish/v1/TaskService/Tasks/7/Monitor", "location")


def test_supermicro_multipart_202_names_its_task_only_in_the_body(bmc, client):
    # Supermicro X13: 202, no Location, the Task in the body
    bmc.set("POST", UPLOAD, (202, {}, {"@odata.type": "#Task.v1_4_3.Task", "@odata.id": "/redfish/v1/TaskService/Tasks/1",
                                       "Id": "1", "TaskState": "Running"}))
    res = client.multipart_push(UPLOAD, b"image")
    assert (res["task_monitor"], res["task_source"]) == ("/redfish/v1/TaskService/Tasks/1", "body")


def test_dell_job_in_the_body_and_task_in_message_args(bmc, client):
    bmc.set("POST", UPLOAD, (200, {}, {"@odata.type": "#DellJob.v1_5_0.DellJob",
                                       "@odata.id": "/redfish/v1/Managers/iDRAC.Embedded.1/Jobs/JID_123",
                                       "JobState": "Scheduled"}))
    assert client.post(UPLOAD, {})["task_monitor"] == "/redfish/v1/Managers/iDRAC.Embedded.1/Jobs/JID_123"
    bmc.set("POST", RESET, (200, {}, {"@Message.ExtendedInfo": [
        {"MessageId": "Task.1.0.New", "MessageArgs": ["/redfish/v1/TaskService/Tasks/9"]}]}))
    res = client.post(RESET, {"ResetType": "ForceRestart"})
    assert (res["task_monitor"], res["task_source"]) == ("/redfish/v1/TaskService/Tasks/9", "message_args")


def test_no_task_named_is_none(bmc, client):
    bmc.set("POST", RESET, (204, {}, None))
    assert client.post(RESET, {"ResetType": "ForceRestart"})["task_monitor"] is None


def test_303_to_the_task_monitor_keeps_its_uri(bmc, client):
    # before: requests followed the 303 as a GET and the Location was lost
    bmc.set("POST", UPLOAD, (303, {"Location": "/redfish/v1/TaskService/Tasks/3/Monitor"}, None))
    bmc.set("GET", "/redfish/v1/TaskService/Tasks/3/Monitor", (202, {}, {"TaskState": "Running"}))
    res = client.post(UPLOAD, {})
    assert res["status"] == 303 and res["task_monitor"] == BASE + "/redfish/v1/TaskService/Tasks/3/Monitor"
    assert not bmc.requests("GET", "/redfish/v1/TaskService/Tasks/3/Monitor")


# ------------------------------------------------------------------ redirects
def test_a_reset_redirected_by_301_is_never_sent_as_a_get(bmc, client):
    bmc.set("POST", RESET, (301, {"Location": "/redfish/v1/Systems/1/Actions/Reset"}, None))
    bmc.set("GET", "/redfish/v1/Systems/1/Actions/Reset", (200, {}, {}))
    with pytest.raises(RedfishHTTPError, match="HTTP 301 redirect of POST .* not re-sent as a GET") as ei:
        client.post(RESET, {"ResetType": "ForceRestart"})
    assert ei.value.status == 301
    assert not bmc.requests("GET", "/redfish/v1/Systems/1/Actions/Reset")


def test_a_307_resends_the_same_write(bmc, client):
    bmc.set("POST", RESET, (307, {"Location": "/redfish/v1/Systems/1/Actions/ComputerSystem.Reset2"}, None))
    bmc.set("POST", "/redfish/v1/Systems/1/Actions/ComputerSystem.Reset2", (204, {}, None))
    assert client.post(RESET, {"ResetType": "ForceRestart"})["status"] == 204
    assert len(bmc.requests("POST", "/redfish/v1/Systems/1/Actions/ComputerSystem.Reset2")) == 1


def test_get_follows_a_port_change_once_and_keeps_authorization(bmc, client):
    seen = []

    def chassis(request):
        seen.append(request.url)
        if not request.url.startswith("https://bmc.test:8443/"):
            return (301, {"Location": "https://bmc.test:8443/redfish/v1/Chassis"}, None)
        assert request.headers.get("X-Auth-Token") or request.headers.get("Authorization")
        return (200, {}, {"@odata.id": "/redfish/v1/Chassis", "Members": []})
    bmc.set("GET", "/redfish/v1/Chassis", chassis)
    assert client.get("/redfish/v1/Chassis")["Members"] == []
    assert client.get("/redfish/v1/Chassis")["Members"] == []
    # the second read goes to the effective base URL straight away
    assert seen == [BASE + "/redfish/v1/Chassis"] + ["https://bmc.test:8443/redfish/v1/Chassis"] * 2
    assert client.base_url == "https://bmc.test:8443"
    assert any("using it as the BMC's base URL" in w for w in client.warnings)


def test_get_redirect_to_another_host_is_refused(bmc, client):
    bmc.set("GET", "/redfish/v1/Chassis", (302, {"Location": "https://evil.test/redfish/v1/Chassis"}, None))
    with pytest.raises(RedfishHTTPError, match="another host"):
        client.get("/redfish/v1/Chassis")


def test_get_redirect_on_the_same_host_is_followed(bmc, client):
    bmc.set("GET", "/redfish/v1/Chassis", (301, {"Location": "/redfish/v1/Chassis/"}, None))
    bmc.set("GET", "/redfish/v1/Chassis/", (200, {}, {"@odata.id": "/redfish/v1/Chassis", "Members": []}))
    assert client.get("/redfish/v1/Chassis")["Members"] == []


# ------------------------------------------------------------------ ETags
@pytest.mark.parametrize("raw, want", [('""1234""', '"1234"'), ("1234", '"1234"'), ('"1234"', '"1234"'),
                                       ('W/"17"', 'W/"17"'), ("", None), (None, None)])
def test_etag_quoting_normalised(raw, want):
    assert normalise_etag(raw) == want


def test_malformed_header_loses_to_the_body_etag(bmc, client):
    bmc.set("GET", BIOS_SD, (200, {"ETag": '""1234""'}, {"@odata.etag": '"1234"', "Attributes": {}}))
    bmc.set("PATCH", BIOS_SD, (204, {}, None))
    res = client.patch(BIOS_SD, {"Attributes": {"A": 1}})
    assert res["etag"] == '"1234"' and bmc.requests("PATCH", BIOS_SD)[0][2]["If-Match"] == '"1234"'


def test_412_rereads_once_and_never_drops_if_match(bmc, client):
    # before: sushy re-sent the PATCH without If-Match and the write was reported done
    bmc.set("GET", BIOS_SD, (200, {}, {"@odata.etag": '"1"'}), (200, {}, {"@odata.etag": '"2"'}))
    bmc.set("PATCH", BIOS_SD, FAIL412)
    with pytest.raises(RedfishHTTPError, match="PreconditionFailed.*If-Match \"2\" refused .*not re-sent without it"):
        client.patch(BIOS_SD, {"Attributes": {"A": 1}})
    sent = [r[2].get("If-Match") for r in bmc.requests("PATCH", BIOS_SD)]
    assert sent == ['"1"', '"2"']


def test_412_then_the_fresh_etag_is_taken(bmc, client):
    bmc.set("GET", BIOS_SD, (200, {}, {"@odata.etag": '"1"'}), (200, {}, {"@odata.etag": '"2"'}))
    bmc.set("PATCH", BIOS_SD, FAIL412, (204, {}, None))
    assert client.patch(BIOS_SD, {"Attributes": {"A": 1}})["etag"] == '"2"'


# ------------------------------------------------------------------ tasks and jobs
JOB = "/redfish/v1/Managers/iDRAC.Embedded.1/Jobs/JID_1"


def _job(state, message):
    return (200, {}, {"@odata.type": "#DellJob.v1_5_0.DellJob", "@odata.id": JOB, "Id": "JID_1", "JobState": state,
                      "Message": message, "PercentComplete": 100 if state.startswith("Completed") else 10})


def test_dell_job_completed(bmc, client):
    bmc.set("GET", JOB, _job("Running", "Job in progress."), _job("Completed", "Job completed successfully."))
    out = client.wait_task(JOB, poll_s=0)
    assert out["state"] == "Completed" and out["pending"] is False
    assert out["messages"][-1]["Message"] == "Job completed successfully."


@pytest.mark.parametrize("state", ["Failed", "CompletedWithErrors", "ScheduledWithErrors"])
def test_dell_job_that_ended_with_errors_fails(bmc, client, state):
    # before: JobState was not read at all; the wait ran to its timeout
    bmc.set("GET", JOB, _job(state, "Unable to apply BIOS settings."))
    with pytest.raises(RedfishTaskError, match="ended %s: Unable to apply" % state):
        client.wait_task(JOB, poll_s=0, timeout_s=1)


def test_dell_job_scheduled_waits_for_a_reset_and_names_it(bmc, client):
    bmc.set("GET", JOB, _job("Scheduled", "Task successfully scheduled, server reboot pending (PowerCycle)."))
    out = client.wait_task(JOB, poll_s=0, timeout_s=1, until_pending=True)
    assert out["pending"] is True and out["state"] == "Scheduled" and out["reset_type"] == "PowerCycle"
    bmc.set("GET", JOB, _job("Scheduled", "Task successfully scheduled."))
    assert client.wait_task(JOB, poll_s=0, timeout_s=1, until_pending=True)["reset_type"] is None


def test_task_completed_awaiting_activation_is_pending(bmc, client):
    bmc.set("GET", "/redfish/v1/TaskService/Tasks/2", (200, {}, {
        "@odata.id": "/redfish/v1/TaskService/Tasks/2", "TaskState": "Completed", "TaskStatus": "OK",
        "Messages": [{"MessageId": "Update.1.0.AwaitToActivate", "MessageArgs": ["img", "BIOS"]}]}))
    out = client.wait_task("/redfish/v1/TaskService/Tasks/2", poll_s=0)
    assert out["pending"] is True


def test_dell_job_id_alone_in_message_args(bmc, client):
    bmc.set("POST", UPLOAD, (200, {}, {"@Message.ExtendedInfo": [
        {"MessageId": "IDRAC.2.8.JCP027", "MessageArgs": ["JID_274119212345"]}]}))
    assert client.post(UPLOAD, {})["task_monitor"] == "/redfish/v1/Managers/iDRAC.Embedded.1/Jobs/JID_274119212345"


# ------------------------------------------------------------------ a redirected login
SESSIONS = "/redfish/v1/SessionService/Sessions"


def test_login_redirected_by_301_names_the_redirect_not_the_credentials(bmc):
    # before: requests re-sent the login as a GET, the BMC answered 401 and the run blamed the password
    bmc.set("POST", SESSIONS, (301, {"Location": "/redfish/v1/SessionService/Sessions/"}, None))
    c = RedfishClient(BASE, "admin", PW, sleep=lambda s: None, retries=0, auth="session")
    with pytest.raises(RedfishHTTPError, match="HTTP 301 redirect of POST /redfish/v1/SessionService/Sessions"):
        c.open()
    c.close()


def test_login_redirected_by_307_is_posted_again(bmc):
    bmc.set("POST", SESSIONS, (307, {"Location": "/redfish/v1/SessionService/Sessions/"}, None))
    c = RedfishClient(BASE, "admin", PW, sleep=lambda s: None, retries=0, auth="session")
    with c:
        assert c.used_auth == "session"
    assert [r[0] for r in bmc.requests(path=SESSIONS + "/")][:1] == ["POST"]
