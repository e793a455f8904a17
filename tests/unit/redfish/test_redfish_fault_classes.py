"""Issue 25: whose fault it is.  Controller-side causes (TLS trust, a missing CA file, DNS) are typed
:class:`RedfishControllerError` and never retried; a transient BMC fault (reset, 5xx, a TLS handshake cut short) is
retried, the login POST included; the entry check waits for a BMC still rebooting (R-18).

The exceptions are requests' own, with the messages urllib3/OpenSSL/glibc put in them (requests
``adapters.HTTPAdapter.send`` wraps ``SSLError``/``MaxRetryError``; "certificate verify failed" is OpenSSL's
``X509_V_ERR`` text, "Name or service not known" glibc's ``gai_strerror(EAI_NONAME)``, "Connection reset by peer"
``ECONNRESET``'s strerror), served by the requests-mock BMC of redfish_mockserver.py.
"""

import pytest
import requests

from ansible_collections.symphony.cluster.plugins.module_utils._core.errors import FAULT_BMC, FAULT_CONTROLLER, \
    FAULT_UNREACHABLE
from ansible_collections.symphony.cluster.plugins.module_utils._core.gate import (
    BLOCKED, FAIL, CheckGraph, CheckResult, CheckSpec, derive_blocked, error_outcome)
from ansible_collections.symphony.cluster.plugins.module_utils._redfish.client import RedfishClient
from ansible_collections.symphony.cluster.plugins.module_utils._redfish.errors import (
    RedfishAuthError,
    RedfishConnectionError,
    RedfishControllerError,
    RedfishHTTPError,
    RedfishInvalidResponse,
    RedfishTimeout,
    fault_of,
)
from ansible_collections.symphony.cluster.plugins.module_utils._redfish.registries import MessageRegistries

from .redfish_mockserver import BASE, MockupBMC

PW = "s3cr3t-Passw0rd"
ROOT = {"@odata.id": "/redfish/v1", "RedfishVersion": "1.15.0",
        "Links": {"Sessions": {"@odata.id": "/redfish/v1/SessionService/Sessions"}},
        "Systems": {"@odata.id": "/redfish/v1/Systems"}}
SESSIONS = "/redfish/v1/SessionService/Sessions"
TRUST = ("HTTPSConnectionPool(host='bmc.test', port=443): Max retries exceeded with url: /redfish/v1 (Caused by "
         "SSLError(SSLCertVerificationError(1, '[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: unable to "
         "get local issuer certificate (_ssl.c:1006)')))")
HANDSHAKE_CUT = ("HTTPSConnectionPool(host='bmc.test', port=443): Max retries exceeded with url: /redfish/v1 (Caused by "
                 "SSLError(SSLEOFError(8, 'EOF occurred in violation of protocol (_ssl.c:1006)')))")
DNS = ("HTTPSConnectionPool(host='bmc-r01-u02.mgmt', port=443): Max retries exceeded with url: /redfish/v1 (Caused "
       "by NameResolutionError(\"<urllib3.connection.HTTPSConnection object>: Failed to resolve 'bmc-r01-u02.mgmt' "
       "([Errno -2] Name or service not known)\"))")
RESET = "('Connection aborted.', ConnectionResetError(104, 'Connection reset by peer'))"


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


def make(registries, sleeps, **kw):
    return RedfishClient(BASE, "admin", PW, registries=registries, sleep=sleeps.append, retries=3, backoff_s=0.5,
                         **kw)


def test_tls_trust_failure_is_the_controllers_and_not_retried(bmc, registries, sleeps):
    bmc.set("GET", "/redfish/v1", requests.exceptions.SSLError(TRUST))
    with pytest.raises(RedfishControllerError) as ei:
        make(registries, sleeps).open()
    assert ei.value.cause == "tls_trust" and fault_of(ei.value) == FAULT_CONTROLLER
    assert "ca_path" in ei.value.remedy and "nothing to do at the rack" in ei.value.remedy
    assert sleeps == [] and len(bmc.requests("GET", "/redfish/v1")) == 1


def test_tls_handshake_cut_short_is_the_bmcs_and_retried(bmc, registries, sleeps):
    bmc.set("GET", "/redfish/v1", requests.exceptions.SSLError(HANDSHAKE_CUT), (200, {}, ROOT))
    with make(registries, sleeps) as c:
        assert c.service_root == ROOT
    assert sleeps == [0.5]


def test_dns_failure_is_the_controllers_and_not_retried(bmc, registries, sleeps):
    bmc.set("GET", "/redfish/v1", requests.exceptions.ConnectionError(DNS))
    with pytest.raises(RedfishControllerError) as ei:
        make(registries, sleeps).open()
    assert ei.value.cause == "dns" and "resolver" in ei.value.remedy and sleeps == []


def test_missing_ca_file_is_the_controllers_before_any_request(bmc, registries, sleeps, tmp_path):
    with pytest.raises(RedfishControllerError) as ei:
        make(registries, sleeps, ca_path=str(tmp_path / "no-such-ca.pem"))
    assert ei.value.cause == "ca_file" and "no-such-ca.pem" in str(ei.value)
    assert bmc.log == []


def test_one_tcp_reset_on_the_login_post_is_resent(bmc, registries, sleeps):
    # issue 25: one reset on the login failed the node with "check the factory password"
    bmc.set("POST", SESSIONS, requests.exceptions.ConnectionError(RESET), lambda request: None)
    with make(registries, sleeps) as c:
        assert c.used_auth == "session" and len(bmc.sessions) == 1
    assert sleeps == [0.5] and len(bmc.requests("POST", SESSIONS)) == 2
    assert bmc.sessions == {} and len(bmc.deleted) == 1   # logged out at close


def test_one_500_on_the_login_post_is_resent_not_a_basic_fallback(bmc, registries, sleeps):
    bmc.set("POST", SESSIONS, (500, {"Content-Type": "text/html"}, "<html>500</html>"), lambda request: None)
    with make(registries, sleeps) as c:
        assert c.used_auth == "session" and c.warnings == []


def test_a_reset_that_persists_on_the_login_is_unreachable_not_a_refused_password(bmc, registries, sleeps):
    bmc.set("POST", SESSIONS, requests.exceptions.ConnectionError(RESET))
    with pytest.raises(RedfishConnectionError) as ei:
        make(registries, sleeps, auth="session").open()
    assert not isinstance(ei.value, RedfishAuthError) and fault_of(ei.value) == FAULT_UNREACHABLE
    assert len(bmc.requests("POST", SESSIONS)) == 4 and sleeps == [0.5, 1.0, 2.0]


def test_a_wrong_password_is_not_resent(bmc, registries, sleeps):
    c = RedfishClient(BASE, "admin", "wrong", registries=registries, sleep=sleeps.append, auth="session")
    with pytest.raises(RedfishAuthError) as ei:
        c.open()
    assert fault_of(ei.value) == FAULT_BMC and len(bmc.requests("POST", SESSIONS)) == 1


def test_entry_check_waits_for_a_bmc_still_rebooting(bmc, registries, sleeps):
    # R-18 (shared/cases/redfish-cases.md): connections reset, then 503 + Retry-After, then the service answers
    reset = requests.exceptions.ConnectionError(RESET)
    bmc.set("GET", "/redfish/v1", *([reset] * 4 + [(503, {"Retry-After": "1"}, "")] * 4 + [(200, {}, ROOT)]))
    with make(registries, sleeps, reboot_wait_s=600) as c:
        assert c.service_root == ROOT
    assert any("still rebooting" in w for w in c.warnings)


def test_entry_check_without_a_wait_or_for_a_refused_connection_does_not_wait(bmc, registries, sleeps):
    reset = requests.exceptions.ConnectionError(RESET)
    bmc.set("GET", "/redfish/v1", *([reset] * 4 + [(200, {}, ROOT)]))
    with pytest.raises(RedfishConnectionError):
        make(registries, sleeps).open()
    # a refused connection is what an absent BMC says too: not waited for
    bmc.set("GET", "/redfish/v1", requests.exceptions.ConnectionError("Connection refused"), (200, {}, ROOT))
    sleeps.clear()
    c = RedfishClient(BASE, "admin", PW, registries=registries, sleep=sleeps.append, retries=0, reboot_wait_s=600)
    with pytest.raises(RedfishConnectionError):
        c.open()
    assert sleeps == []


@pytest.mark.parametrize("exc, status", [
    (RedfishControllerError("TLS verification failed", cause="tls_trust", where="bmc"), BLOCKED),
    (RedfishConnectionError("cannot connect: reset", where="bmc"), BLOCKED),
    (RedfishTimeout("read timeout after 30s", where="bmc"), BLOCKED),
    (RedfishHTTPError("HTTP 500", where="bmc", status=500), BLOCKED),
    (RedfishInvalidResponse("HTTP 200 but the body is not a JSON object", where="bmc", status=200), BLOCKED),
    (RedfishHTTPError("HTTP 404", where="bmc", status=404), FAIL),
    (RedfishAuthError("access denied", where="bmc"), FAIL),
])
def test_a_check_that_raises_is_blocked_only_for_faults_not_the_nodes(exc, status):
    outcome = error_outcome(exc)
    assert outcome.status == status
    if status == BLOCKED:
        assert outcome.evidence["fault"] == fault_of(exc) and outcome.remediation


def test_a_check_blocked_by_its_own_fault_is_kept_when_blocked_is_derived():
    # provisioning re-derives blocked from the graph; a BMC that reset every connection made it raise GateError
    graph = CheckGraph("provisioning", [CheckSpec("inventory_read")])
    outcome = error_outcome(RedfishConnectionError("cannot connect: reset", where="bmc"))
    res = CheckResult("n1", "provisioning", "inventory_read", outcome.status, outcome.reason,
                      remediation=outcome.remediation, evidence=outcome.evidence)
    assert [r.status for r in derive_blocked(graph, [res])] == [BLOCKED]


def test_a_read_cut_short_by_an_unreachable_bmc_is_blocked_never_fail():
    """A BMC that stops answering mid-read (it began to reboot) leaves incomplete entries with the error's fault
    class; a stage turns those into ``blocked`` with the cause, a BMC's own error stays a finding."""
    import pytest as _pytest
    from ansible_collections.symphony.cluster.plugins.module_utils._core.errors import GateError
    from ansible_collections.symphony.cluster.plugins.module_utils._core.gate import fault_blocked_outcome
    from ansible_collections.symphony.cluster.plugins.module_utils._redfish.model import NodeInventory
    from ansible_collections.symphony.cluster.plugins.module_utils._redfish.read_base import ReaderBase, gaps_fault

    reader = ReaderBase.__new__(ReaderBase)
    reader.inv = NodeInventory()
    reader.incomplete("firmware", "/redfish/v1/UpdateService/FirmwareInventory", RedfishHTTPError("HTTP 404", status=404))
    assert "fault" not in reader.inv.incomplete[0] and gaps_fault(reader.inv.incomplete) is None
    # a 5xx that outlived the retries is the unreachable class (as for the service root)
    assert gaps_fault([{"fault": fault_of(RedfishHTTPError("HTTP 500", status=500))}]) == FAULT_UNREACHABLE
    reader.incomplete("bios", "/redfish/v1/Systems/1/Bios", RedfishConnectionError("connection reset"))
    assert gaps_fault(reader.inv.incomplete) == FAULT_UNREACHABLE
    reader.incomplete("bios", "/redfish/v1/Systems/1/Bios", RedfishControllerError("CA file missing", cause="ca_file"))
    assert gaps_fault(reader.inv.incomplete) == FAULT_CONTROLLER   # the operator's remedy comes first
    reader.incomplete("systems", "/redfish/v1/Systems", "system 'Node7' not found")
    assert "fault" not in reader.inv.incomplete[-1]

    out = fault_blocked_outcome(FAULT_UNREACHABLE, "could not re-read bios: connection reset")
    assert out.status == "blocked" and out.reason == "BMC unreachable: could not re-read bios: connection reset"
    assert out.evidence == {"fault": FAULT_UNREACHABLE} and "Manager.Reset" in out.remediation
    with _pytest.raises(GateError):
        fault_blocked_outcome("bmc", "a finding is not a block")
