"""Issue 27: a plain request goes to libcurl (``_redfish/curl.send``) or, without pycurl, to urllib3's pool
directly (``_redfish/fastpath.direct_get``), with what requests did.

Against a real HTTPS server on 127.0.0.1 (a throw-away CA from the emulator's ``tls``): the GET is sent without
``HTTPAdapter.send`` on one kept-alive connection, with the same headers; TLS is verified (a client without the CA
gets the same controller-side ``tls_trust`` error as through requests, a client with ``ca_path`` reads); a read
timeout, a refused connection, a body cut short and HTTP error statuses raise the same classes on each path
(``curl``, ``urllib3``, and ``requests``: ``_PLAIN_ADAPTERS`` emptied sends every request through requests, the
reference); a cookie the BMC sets lands in the session's jar; a JSON write through libcurl carries the body and
headers requests would send.
"""

import http.server
import json
import socket
import threading
import time

import pytest
import requests

from ansible_collections.symphony.cluster.plugins.module_utils._redfish import curl, fastpath
from ansible_collections.symphony.cluster.plugins.module_utils._redfish.client import RedfishClient
from ansible_collections.symphony.cluster.plugins.module_utils._redfish.errors import (
    RedfishConnectionError, RedfishControllerError, RedfishError, RedfishHTTPError, RedfishTimeout)

from symphony_emulator.tls import make_certificates, server_context

ROOT = {"@odata.id": "/redfish/v1", "RedfishVersion": "1.15.0"}


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_GET(self):
        server = self.server
        server.log.append((self.path, dict(self.headers), self.client_address[1]))
        status, headers, body = server.answers.get(self.path, (200, {}, ROOT))
        if callable(body):
            body(self)
            return
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(status)
        for key, value in headers.items():
            self.send_header(key, value)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length)
        self.server.log.append(("%s %s" % (self.command, self.path), dict(self.headers), self.client_address[1], body))
        data = json.dumps({"@odata.id": "/redfish/v1/SessionService/Sessions/7"}).encode()
        self.send_response(201)
        self.send_header("X-Auth-Token", "t0k")
        self.send_header("Location", "/redfish/v1/SessionService/Sessions/7")
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_PATCH = do_POST

    def do_DELETE(self):
        self.server.log.append(("DELETE " + self.path, dict(self.headers), self.client_address[1]))
        self.send_response(204)
        self.send_header("Content-Length", "0")
        self.end_headers()


@pytest.fixture(scope="module")
def tls(tmp_path_factory):
    return make_certificates(str(tmp_path_factory.mktemp("tls")), ["127.0.0.1"])


@pytest.fixture
def server(tls):
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    srv.daemon_threads = True
    srv.socket = server_context(tls).wrap_socket(srv.socket, server_side=True)
    srv.log, srv.answers = [], {}
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()


def url(srv):
    return "https://127.0.0.1:%d" % srv.server_address[1]


def client(srv, tls, **kw):
    kw.setdefault("ca_path", tls["ca"])
    return RedfishClient(url(srv), "admin", "pw", sleep=lambda s: None, retries=0, keep_alive=True, **kw)


@pytest.fixture(params=["curl", "urllib3", "requests"])
def path(request, monkeypatch):
    """Each error case runs through libcurl, on urllib3's pool and through requests (the reference), with the same
    outcome."""
    if request.param != "curl":
        monkeypatch.setattr(curl, "HAS_PYCURL", False)
    else:
        assert curl.HAS_PYCURL, "pycurl is in requirements.txt"
    if request.param == "requests":
        monkeypatch.setattr(fastpath, "_PLAIN_ADAPTERS", ())
    return request.param


@pytest.fixture(params=["curl", "urllib3"])
def fast(request, monkeypatch):
    """The two paths that skip requests' adapter."""
    if request.param == "urllib3":
        monkeypatch.setattr(curl, "HAS_PYCURL", False)
    return request.param


@pytest.fixture
def adapter_sends(monkeypatch):
    """Each request that goes through requests' ``HTTPAdapter.send`` (the direct path sends none)."""
    sent = []
    real = requests.adapters.HTTPAdapter.send
    monkeypatch.setattr(requests.adapters.HTTPAdapter, "send",
                        lambda self, *a, **k: sent.append(1) or real(self, *a, **k))
    return sent


def test_a_get_skips_the_adapter_keeps_headers_and_one_connection(server, tls, adapter_sends, fast):
    sent = adapter_sends
    c = client(server, tls)
    c._conn._session.headers["X-Auth-Token"] = "tok"  # as sushy's session login sets it
    assert c.get("/redfish/v1") == ROOT
    assert c.get("/redfish/v1/Systems?$top=2")["RedfishVersion"] == "1.15.0"
    assert sent == [] and c.requests == 2
    (p1, h1, port1), (p2, h2, port2) = server.log
    assert p2 == "/redfish/v1/Systems?$top=2" and port1 == port2  # one kept-alive TLS connection
    assert h1["X-Auth-Token"] == "tok" and h1["OData-Version"] == "4.0" and h1["Accept-Encoding"] == "identity"
    assert "Connection" not in h1
    c.close()


def test_tls_is_verified_without_the_ca(server, tls, path):
    c = client(server, tls, ca_path=None)
    with pytest.raises(RedfishControllerError) as ei:
        c.get("/redfish/v1")
    # OpenSSL's verify result, in Python's words ("[SSL: CERTIFICATE_VERIFY_FAILED] ...") or libcurl's
    assert ei.value.cause == "tls_trust" and "self-signed certificate in certificate chain" in ei.value.message
    assert server.log == []


def test_read_timeout_is_a_redfish_timeout(server, tls, path):
    server.answers["/slow"] = (200, {}, lambda h: time.sleep(1.5))
    c = client(server, tls, read_timeout=0.3)
    with pytest.raises(RedfishTimeout, match="read timeout after 0.3s"):
        c.get("/slow")


def test_refused_connection_is_a_connection_error(tls, path):
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    c = RedfishClient("https://127.0.0.1:%d" % port, "admin", "pw", sleep=lambda s: None, retries=0,
                      keep_alive=True, ca_path=tls["ca"])
    with pytest.raises(RedfishConnectionError, match="cannot connect.*Connection refused"):   # the OS's words
        c.get("/redfish/v1")


def test_a_body_cut_short_is_a_connection_error(server, tls, path):
    def cut(h):
        h.send_response(200)
        h.send_header("Content-Length", "1000")
        h.end_headers()
        h.wfile.write(b'{"@odata.id": "/x"')
        h.close_connection = True
    server.answers["/cut"] = (200, {}, cut)
    with pytest.raises(RedfishConnectionError):
        client(server, tls).get("/cut")


@pytest.mark.parametrize("status", [404, 500])
def test_http_error_statuses_with_extended_info(server, tls, path, status):
    body = {"error": {"code": "Base.1.8.GeneralError", "message": "no",
                      "@Message.ExtendedInfo": [{"MessageId": "Base.1.8.ResourceMissingAtURI"}]}}
    server.answers["/gone"] = (status, {"Retry-After": "0"}, body)
    with pytest.raises(RedfishHTTPError) as ei:
        client(server, tls).get("/gone")
    assert ei.value.status == status and "ResourceMissingAtURI" in str(ei.value.details)


def test_a_cookie_the_bmc_sets_goes_to_the_session_jar(server, tls, fast):
    server.answers["/c"] = (200, {"Set-Cookie": "sid=abc; Path=/"}, ROOT)
    c = client(server, tls)
    c.get("/c")
    assert c._conn._session.cookies.get("sid") == "abc"
    c.get("/redfish/v1")  # a session with cookies goes through requests, which sends them
    assert server.log[-1][1].get("Cookie") == "sid=abc"


def test_headers_merge_as_requests_merges_them(monkeypatch):
    monkeypatch.setattr(curl, "HAS_PYCURL", False)
    session = fastpath.ReuseSession()
    session.trust_env = False
    session.headers.update({"OData-Version": "4.0", "X-Auth-Token": "t", "Connection": "close"})
    seen = {}
    monkeypatch.setattr(fastpath, "direct_get",
                        lambda s, adapter, u, headers, timeout, verify, method="GET": seen.update(h=headers))
    given = {"odata-version": "4.01", "Connection": None, "If-Match": '"x"', "Accept-Encoding": "identity"}
    session.request("GET", "https://bmc.test/x", headers=given, timeout=1, allow_redirects=False)
    ref = session.prepare_request(requests.Request("GET", "https://bmc.test/x", headers=given)).headers
    assert list(seen["h"].items()) == list(ref.items()) and "Connection" not in seen["h"]


def test_a_logout_delete_takes_the_direct_path_on_the_same_connection(server, tls, adapter_sends, fast):
    sent = adapter_sends
    c = client(server, tls)
    assert c.get("/redfish/v1") == ROOT
    session = c._conn._session
    rsp = session.request("DELETE", url(server) + "/redfish/v1/SessionService/Sessions/1", json=None,
                          headers={"X-Auth-Token": "tok"}, verify=tls["ca"], timeout=5, allow_redirects=False)
    assert rsp.status_code == 204 and rsp.content == b""
    assert sent == []   # neither the GET nor the DELETE went through HTTPAdapter.send
    (_p1, _h1, port1), (p2, h2, port2) = server.log
    assert p2 == "DELETE /redfish/v1/SessionService/Sessions/1" and h2["X-Auth-Token"] == "tok" and port1 == port2
    c.close()


def test_one_timeout_object_serves_every_request_with_the_same_limits():
    assert fastpath._timeout((5, 30)) is fastpath._timeout((5, 30))
    assert fastpath._timeout(7) is fastpath._timeout(7)
    t = fastpath._timeout((5, 30))
    assert (t.connect_timeout, t.read_timeout) == (5, 30)


def test_a_login_post_and_a_patch_go_through_libcurl_as_requests_would_send_them(server, tls, adapter_sends):
    c = client(server, tls)
    session = c._conn._session
    creds = {"UserName": "admin", "Password": "pw"}
    rsp = session.request("POST", url(server) + "/redfish/v1/SessionService/Sessions", json=creds,
                          headers={"OData-Version": "4.0"}, verify=tls["ca"], timeout=5, allow_redirects=False)
    assert rsp.status_code == 201 and rsp.headers["X-Auth-Token"] == "t0k" and rsp.json()["@odata.id"].endswith("/7")
    assert rsp.headers["location"] == "/redfish/v1/SessionService/Sessions/7" and rsp.reason == "Created"
    patch = session.request("PATCH", url(server) + "/redfish/v1/Systems/1", json={"AssetTag": "x"},
                            headers={"If-Match": '"e1"'}, verify=tls["ca"], timeout=5, allow_redirects=False)
    assert patch.status_code == 201
    assert adapter_sends == []
    (line1, h1, port1, body1), (line2, h2, port2, body2) = server.log
    assert line1 == "POST /redfish/v1/SessionService/Sessions" and json.loads(body1) == creds
    ref = requests.Request("POST", "https://x/", json=creds).prepare()
    assert body1 == ref.body and h1["Content-Type"] == "application/json" and "Expect" not in h1
    assert line2 == "PATCH /redfish/v1/Systems/1" and json.loads(body2) == {"AssetTag": "x"} and h2["If-Match"] == '"e1"'
    assert port1 == port2   # the POST's connection served the PATCH
    with pytest.raises(requests.exceptions.InvalidJSONError):   # as requests refuses NaN
        session.request("POST", url(server) + "/x", json={"v": float("nan")}, verify=tls["ca"], timeout=5,
                        allow_redirects=False)


def test_a_refused_login_post_counts_as_not_sent_so_it_may_be_sent_again(tls):
    from ansible_collections.symphony.cluster.plugins.module_utils._redfish import transport
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    session = fastpath.ReuseSession()
    session.trust_env = False
    with pytest.raises(requests.exceptions.ConnectionError) as ei:
        session.request("POST", "https://127.0.0.1:%d/redfish/v1/SessionService/Sessions" % port, json={},
                        verify=tls["ca"], timeout=5, allow_redirects=False)
    assert isinstance(ei.value, curl.NotSent) and transport._not_sent(ei.value)


def test_a_read_timeout_under_a_second_waits_a_whole_second_on_libcurl(server, tls):
    """libcurl's stall timer counts whole seconds (CURLOPT_LOW_SPEED_TIME): 0.3 s is rounded up to 1 s."""
    server.answers["/slowish"] = (200, {}, lambda h: time.sleep(0.6))
    c = client(server, tls, read_timeout=0.3)
    start = time.monotonic()
    with pytest.raises(RedfishTimeout, match="read timeout after 0.3s"):
        c.get("/slowish")
    assert time.monotonic() - start >= 0.5


def test_validate_certs_false_reads_without_the_ca_and_says_so(server, tls, fast):
    c = client(server, tls, ca_path=None, verify=False)
    assert c.get("/redfish/v1") == ROOT
    assert any("verif" in w.lower() for w in c.warnings)


def test_a_proxy_in_the_environment_is_kept_and_sends_through_requests(monkeypatch, tls):
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.test:3128")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    conn = fastpath.connector("https://bmc.test", verify=tls["ca"])
    assert conn._session.proxies.get("https") == "http://proxy.test:3128"
    monkeypatch.delenv("HTTPS_PROXY")
    assert fastpath.connector("https://bmc.test", verify=tls["ca"])._session.proxies == {}


def test_a_read_timeout_on_a_kept_alive_connection_is_a_read_timeout(server, tls, path):
    """The request was sent on the reused connection: never a connect timeout (which a POST may be re-sent after)."""
    server.answers["/slow"] = (200, {}, lambda h: time.sleep(1.5))
    c = client(server, tls, read_timeout=0.3)
    assert c.get("/redfish/v1") == ROOT
    with pytest.raises(RedfishTimeout, match="read timeout after 0.3s"):
        c.get("/slow")


def test_a_header_with_a_line_break_is_refused_not_sent(server, tls, fast):
    c = client(server, tls)
    c._conn._session.headers["X-Auth-Token"] = "tok\r\nX-Injected: 1"
    with pytest.raises(RedfishError) as ei:   # a RedfishError either way, and nothing reached the BMC
        c.get("/redfish/v1")
    assert "header" in str(ei.value).lower() and server.log == [], repr(ei.value)


def test_a_connection_closed_without_an_answer_reads_as_a_bmc_still_rebooting(server, tls, path):
    """What Session.open waits on (reboot_wait_s): http.client's RemoteDisconnected or libcurl's error 52."""
    from ansible_collections.symphony.cluster.plugins.module_utils._redfish.session import _rebooting

    def hang_up(h):
        h.close_connection = True
    server.answers["/gone-quiet"] = (200, {}, hang_up)
    with pytest.raises(RedfishConnectionError) as ei:
        client(server, tls).get("/gone-quiet")
    assert _rebooting(ei.value), ei.value.message
