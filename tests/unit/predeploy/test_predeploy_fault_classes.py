"""Issue 25: pre-deployment judges whose fault it is.  The Supermicro SYS-821GE-TNHR capture
(shared/fixtures/mockups/libredfish-supermicro) is served by the requests-mock BMC with one fault on top; a
controller-side cause (TLS trust, DNS, a missing CA file) is ``blocked`` with the operator's remedy and reaches no
technician's dispatch list, a fault that outlived the retries is ``blocked`` "BMC unreachable", one transient
fault is retried and judged as if it had not happened.
"""

import requests

from ansible_collections.symphony.cluster.plugins.module_utils._core.dispatch import dispatch_rows
from ansible_collections.symphony.cluster.plugins.module_utils._core.gate import BLOCKED, FAIL, PASS
from ansible_collections.symphony.cluster.plugins.module_utils._core.sku import load_manifest
from ansible_collections.symphony.cluster.plugins.module_utils._predeploy.checks_health import parse_cutoff
from ansible_collections.symphony.cluster.plugins.module_utils._predeploy.graph import check_graph
from ansible_collections.symphony.cluster.plugins.module_utils._predeploy.judge import judge
from ansible_collections.symphony.cluster.plugins.module_utils._predeploy.observe import observe_node
from ansible_collections.symphony.cluster.plugins.module_utils._predeploy.stage import StageSettings

from .test_predeploy_mockups import PASSWORD, _mockserver

SESSIONS = "/redfish/v1/SessionService/Sessions"
NODE = {"hostname": "n1", "site": "s1", "rack": "r1", "u": 3, "sku": "hgx_h100_supermicro",
        "serial": "C8010MM21A30331", "bmc_mac": "aa:bb:cc:dd:ee:ff", "bmc_address": "10.0.0.3"}
TRUST = ("HTTPSConnectionPool(host='bmc.test', port=443): Max retries exceeded (Caused by SSLError("
         "SSLCertVerificationError(1, '[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: unable to get "
         "local issuer certificate (_ssl.c:1006)')))")
RESET = "('Connection aborted.', ConnectionResetError(104, 'Connection reset by peer'))"


def audit(mockups, repo_root, faults=(), probe=None, **settings):
    """Observe the Supermicro capture with ``faults`` ((method, path, answers...)) and judge it."""
    srv = _mockserver()
    manifest = load_manifest(str(repo_root / "skus" / "hgx_h100_supermicro.yml"))
    settings = StageSettings(**dict({"username": "admin", "password": PASSWORD, "retries": 1}, **settings))
    with srv.MockupBMC(srv.mockup_root(mockups, "libredfish-supermicro")) as bmc:
        for method, path, *answers in faults:
            bmc.set(method, path, *answers)
        obs, _warnings = observe_node(NODE, {"url": srv.BASE, "source": "map"}, {}, settings,
                                      probe=probe or (lambda host, port, timeout: (True, "")))
    graph = check_graph(manifest, optional=("lease_captured", "address_reserved"))
    results, gate = judge(NODE, manifest, obs, "run-faults", graph, parse_cutoff("all"))
    rows = dispatch_rows({"n1": NODE}, {"n1": {"gate": gate.to_dict(), "results": [r.to_dict() for r in results]}},
                         "pre_deployment")
    return {r.check: r for r in results}, gate, rows


def test_tls_trust_failure_blocks_with_the_controllers_remedy_and_dispatches_nobody(mockups, repo_root):
    res, gate, rows = audit(mockups, repo_root, [("GET", "/redfish/v1", requests.exceptions.SSLError(TRUST))])
    assert res["service_root"].status == BLOCKED and res["service_root"].evidence["fault"] == "controller"
    assert "ca_path" in res["service_root"].remediation and "reset the BMC" not in res["service_root"].remediation
    assert gate.status == BLOCKED and FAIL not in {r.status for r in res.values()}
    assert rows == []


def test_missing_ca_file_blocks_and_dispatches_nobody(mockups, repo_root, tmp_path):
    res, gate, rows = audit(mockups, repo_root, ca_path=str(tmp_path / "ca.pem"))
    assert res["service_root"].status == BLOCKED and "ca.pem" in res["service_root"].reason
    assert gate.status == BLOCKED and rows == []


def test_dns_failure_of_the_tcp_probe_is_the_controllers(mockups, repo_root):
    res, gate, rows = audit(mockups, repo_root, probe=lambda host, port, timeout: (
        False, "TCP connect to bmc-r01-u03.mgmt:443 failed: [errno -2] name or service not known"))
    assert res["bmc_reachable"].status == BLOCKED and "resolver" in res["bmc_reachable"].remediation
    assert rows == []


def test_one_reset_on_the_login_is_retried_and_the_node_judged(mockups, repo_root):
    res, gate, _rows = audit(mockups, repo_root, [("POST", SESSIONS, requests.exceptions.ConnectionError(RESET),
                                                   lambda request: None)])
    assert res["login"].status == PASS and res["inventory_read"].status == PASS
    # the capture's own finding stays the only one (test_predeploy_mockups.test_supermicro_hgx_h100)
    assert gate.status == FAIL and gate.failing == ["sel_clean"]


def test_one_500_on_a_sel_page_does_not_touch_sel_clean(mockups, repo_root):
    # issue 25: one HTTP 500 on a SEL page failed sel_clean; the capture's SEL is Systems/1/LogServices/Log1
    seen = []

    def first_page_500(request):
        seen.append(request.url)
        return (500, {"Content-Type": "text/html"}, "<html>500</html>") if len(seen) == 1 else None
    sel = "/redfish/v1/Systems/1/LogServices/Log1/Entries"
    res, _gate, _rows = audit(mockups, repo_root, [("GET", sel, first_page_500)])
    assert len(seen) >= 2
    assert res["sel_clean"].status == FAIL and res["sel_clean"].reason.startswith("11 critical SEL entries")


def test_a_reset_that_persists_on_the_login_is_bmc_unreachable_not_the_password(mockups, repo_root):
    res, gate, rows = audit(mockups, repo_root, [("POST", SESSIONS, requests.exceptions.ConnectionError(RESET))],
                            auth="session")
    assert res["login"].status == BLOCKED and res["login"].reason.startswith("BMC unreachable")
    assert "password" not in res["login"].remediation
    assert gate.status == BLOCKED
    # the technician can reset a BMC that stays unreachable: one row, the login, not every blocked check
    assert [r["check"] for r in rows] == ["login"]


def test_validate_certs_false_is_on_every_row(mockups, repo_root):
    # issue 25: an unverified-TLS read was a console warning only
    res, _gate, _rows = audit(mockups, repo_root, validate_certs=False)
    assert res and all(r.evidence.get("tls_unverified") is True for r in res.values())
    res, _gate, _rows = audit(mockups, repo_root)
    assert not any("tls_unverified" in r.evidence for r in res.values())
