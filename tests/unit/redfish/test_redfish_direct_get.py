"""Issue 27: a plain GET goes to urllib3's pool directly (``_redfish/fastpath.direct_get``), with what requests did.

Against a real HTTPS server on 127.0.0.1 (a throw-away CA from the emulator's ``tls``): the GET is sent without
``HTTPAdapter.send`` on one kept-alive connection, with the same headers; TLS is verified (a client without the CA
gets the same controller-side ``tls_trust`` error as through requests, a client with ``ca_path`` reads); a read
timeout, a refused connection, a body cut short and HTTP error statuses raise the same classes as through
requests (``_PLAIN_ADAPTERS`` emptied sends every GET through requests, the reference); a cookie the BMC sets
lands in the session's jar.
"""

import http.server
import json
import socket
import threading
import time

import pytest
import requests

from ansible_collections.symphony.cluster.plugins.module_utils._redfish import fastpath
from ansible_collections.symphony.cluster.plugins.module_utils._redfish.client import RedfishClient
from ansible_collections.symphony.cluster.plugins.module_utils._redfish.errors import (
    RedfishConnectionError, RedfishControllerError, RedfishHTTPError, RedfishTimeout)

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


@pytest.fixture(params=["direct", "requests"])
def path(request, monkeypatch):
    """Each error case runs on the direct path and through requests (the reference), with the same outcome."""
    if request.param == "requests":
        monkeypatch.setattr(fastpath, "_PLAIN_ADAPTERS", ())
    return request.param


@pytest.fixture
def adapter_sends(monkeypatch):
    """Each request that goes through requests' ``HTTPAdapter.send`` (the direct path sends none)."""
    sent = []
    real = requests.adapters.HTTPAdapter.send
    monkeypatch.setattr(requests.adapters.HTTPAdapter, "send",
                        lambda self, *a, **k: sent.append(1) or real(self, *a, **k))
    return sent


def test_a_get_skips_the_adapter_keeps_headers_and_one_connection(server, tls, adapter_sends):
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
    assert ei.value.cause == "tls_trust" and "CERTIFICATE_VERIFY_FAILED" in ei.value.message
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
    with pytest.raises(RedfishConnectionError, match="cannot connect"):
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


def test_a_cookie_the_bmc_sets_goes_to_the_session_jar(server, tls):
    server.answers["/c"] = (200, {"Set-Cookie": "sid=abc; Path=/"}, ROOT)
    c = client(server, tls)
    c.get("/c")
    assert c._conn._session.cookies.get("sid") == "abc"
    c.get("/redfish/v1")  # a session with cookies goes through requests, which sends them
    assert server.log[-1][1].get("Cookie") == "sid=abc"


def test_headers_merge_as_requests_merges_them(monkeypatch):
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


def test_a_logout_delete_takes_the_direct_path_on_the_same_connection(server, tls, adapter_sends):
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
