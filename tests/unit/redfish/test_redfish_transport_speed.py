"""Issue 27: a plain GET skips requests' per-request merging, and each body is decoded once, from its bytes.

On a scripted BMC (requests-mock): the GET still carries what requests would send (the session's X-Auth-Token,
sushy's OData-Version and ``Accept-Encoding: identity``, no ``Connection: close`` with keep-alive); a POST and a
login still go through ``Session.request``; a JSON body with NaN (which orjson refuses, RFC 8259 §6) still reads as
the json module reads it; a body that is not JSON is kept as an excerpt.
"""

import json

import pytest
import requests

from ansible_collections.symphony.cluster.plugins.module_utils._redfish.client import RedfishClient
from ansible_collections.symphony.cluster.plugins.module_utils._redfish.errors import RedfishInvalidResponse

from .redfish_mockserver import BASE, MockupBMC

PW = "s3cr3t-Passw0rd"
ROOT = {"@odata.id": "/redfish/v1", "RedfishVersion": "1.15.0",
        "Links": {"Sessions": {"@odata.id": "/redfish/v1/SessionService/Sessions"}}}


@pytest.fixture
def bmc():
    with MockupBMC(None) as b:
        b.set("GET", "/redfish/v1", (200, {}, ROOT))
        yield b


def test_a_get_skips_session_request_and_sends_the_same_headers(bmc, monkeypatch):
    calls = []
    real = requests.Session.request

    def counted(self, method, url, *args, **kwargs):
        calls.append(method)
        return real(self, method, url, *args, **kwargs)

    monkeypatch.setattr(requests.Session, "request", counted)
    bmc.set("GET", "/redfish/v1/Chassis", (200, {}, {"@odata.id": "/redfish/v1/Chassis", "Members": []}))
    with RedfishClient(BASE, "admin", PW, sleep=lambda s: None, retries=0, keep_alive=True) as client:
        assert client.get("/redfish/v1/Chassis")["Members"] == []
    # the login POST and the logout DELETE go through requests' Session.request; the GETs do not
    assert "GET" not in calls and "POST" in calls
    method, path, headers = bmc.requests("GET", "/redfish/v1/Chassis")[-1]
    assert headers.get("X-Auth-Token") and headers.get("OData-Version") == "4.0"
    assert headers.get("Accept-Encoding") == "identity" and "Connection" not in headers


def test_a_body_orjson_refuses_reads_as_json_does_and_not_json_is_an_excerpt(bmc):
    nan = '{"@odata.id": "/redfish/v1/Chassis/1/Sensors/T", "Reading": NaN}'
    bmc.set("GET", "/redfish/v1/Chassis/1/Sensors/T", (200, {"Content-Type": "application/json"}, nan))
    bmc.set("GET", "/redfish/v1/Chassis/1/Sensors/U", (200, {"Content-Type": "text/html"}, "<html>oops</html>"))
    with RedfishClient(BASE, "admin", PW, sleep=lambda s: None, retries=0) as client:
        body = client.get("/redfish/v1/Chassis/1/Sensors/T")
        assert body["@odata.id"].endswith("/T") and body["Reading"] != body["Reading"]  # NaN, as json.loads gives
        assert json.loads(nan)["@odata.id"] == body["@odata.id"]
        with pytest.raises(RedfishInvalidResponse, match="oops"):
            client.get("/redfish/v1/Chassis/1/Sensors/U")
