"""Helpers for the emulator unit tests: BMCs built in-process with a manual clock (no sockets)."""

import base64

import pytest

from ansible_collections.symphony.cluster.plugins.module_utils._core.sku import load_skus

from symphony_emulator.bmc import BMC
from symphony_emulator.fleet import load_twin
from symphony_emulator.tree import Spec


class ManualClock:
    """A monotonic clock that only moves when told (seconds)."""

    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now

    def advance(self, seconds):
        self.now += seconds


class Client:
    """Calls BMC.handle like an HTTP client would, with Basic auth by default."""

    def __init__(self, bmc, user="admin", password="pw"):
        self.bmc = bmc
        self.auth = {"Authorization": "Basic " + base64.b64encode(("%s:%s" % (user, password)).encode()).decode()}

    def request(self, method, path, json_body=None, headers=None, query="", auth=True, raw=None):
        import json
        h = dict(self.auth) if auth else {}
        h.update(headers or {})
        body = raw if raw is not None else (json.dumps(json_body).encode() if json_body is not None else b"")
        return self.bmc.handle(method, path, query, h, body)

    def get(self, path, **kw):
        return self.request("GET", path, **kw)

    def post(self, path, body=None, **kw):
        return self.request("POST", path, json_body=body if body is not None else {}, **kw)

    def patch(self, path, body, **kw):
        return self.request("PATCH", path, json_body=body, **kw)


@pytest.fixture(scope="session")
def real_skus(repo_root):
    return load_skus(str(repo_root / "skus"))


@pytest.fixture(scope="session")
def demo_twin(repo_root, real_skus):
    return load_twin(str(repo_root / "inventories" / "demo" / "demo.twin.yml"), real_skus.keys())


@pytest.fixture
def clock():
    return ManualClock()


@pytest.fixture
def make_bmc(demo_twin, real_skus, clock):
    """make_bmc(defects=[...], faults={...}, host=None) -> (BMC, Client) for a demo-twin node."""

    def make(defects=(), faults=None, host=None, twin=None, skus=None):
        twin = twin or demo_twin
        skus = skus or real_skus
        host = host or sorted(twin.nodes)[0]
        node = twin.nodes[host]
        spec = Spec(node, skus[node["sku"]], list(defects))
        bmc = BMC(spec, "admin", "pw", {host: dict(faults or {})}, clock=clock, wall=lambda: 1.7e9 + clock.now)
        return bmc, Client(bmc)
    return make
