"""The one endpoint resolver and the BMC map it reads: the map wins, then the DHCP lease, then the twin's address."""

import json

import pytest

from ansible_collections.symphony.cluster.plugins.module_utils._core.errors import ValidationError
from ansible_collections.symphony.cluster.plugins.module_utils._fleet.bmcmap import load_bmc_map, map_secrets
from ansible_collections.symphony.cluster.plugins.module_utils._fleet.endpoint import resolve_endpoint


def test_map_then_lease_then_twin():
    bmc_map = {"n1": {"url": "https://10.0.0.9:8443", "password": "pw"}}
    assert resolve_endpoint("n1", bmc_map, "10.0.0.5", "10.0.0.3") == (
        {"url": "https://10.0.0.9:8443", "source": "map"}, bmc_map["n1"])
    assert resolve_endpoint("n2", bmc_map, "10.0.0.5", "10.0.0.3") == (
        {"url": "https://10.0.0.5", "source": "lease"}, {})
    assert resolve_endpoint("n2", None, None, "10.0.0.3") == ({"url": "https://10.0.0.3", "source": "twin"}, {})
    # an address given as a URL keeps its scheme (bmc_sel_scan's bmc_addresses accept both)
    assert resolve_endpoint("n2", {}, address="http://bmc.test:8000")[0]["url"] == "http://bmc.test:8000"
    assert resolve_endpoint("n2", {}, address="") == (None, {})


def test_bmc_map_shapes_and_secrets(tmp_path):
    path = tmp_path / "bmcs.json"
    path.write_text(json.dumps({"ca_bundle": "/ca.pem", "nodes": {
        "n1": {"address": "10.0.0.1", "port": 8443, "credentials": {"user": "admin", "password": "pw1"}},
        "n2": {"url": "https://10.0.0.2", "password": "pw2", "validate_certs": False}}}))
    bmc_map = load_bmc_map(str(path))
    assert bmc_map["n1"] == {"url": "https://10.0.0.1:8443", "username": "admin", "password": "pw1",
                             "ca_path": "/ca.pem", "validate_certs": None}
    assert bmc_map["n2"]["validate_certs"] is False
    assert map_secrets("top", bmc_map) == ["top", "pw1", "pw2"]
    path.write_text(json.dumps({"n3": {"username": "admin"}}))
    with pytest.raises(ValidationError, match=r"\$\.n3 has no url or address"):
        load_bmc_map(str(path))
