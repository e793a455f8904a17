"""The POST route table: every action target the tree advertises has a route, and only those do."""

import types

import pytest

from symphony_emulator.resources import ROOT


def _advertised(tree):
    """Every ``Actions.*.target`` of the tree, plus the UpdateService's multipart push URI."""
    targets = set()
    for body in tree.values():
        for action in (body.get("Actions") or {}).values():
            targets.add(action["target"])
        if "MultipartHttpPushUri" in body:
            targets.add(body["MultipartHttpPushUri"])
    return targets


@pytest.mark.parametrize("sku", ["hgx_h100_supermicro", "dgx_h100", "cray_ex235a", "gb200_nvl_tray"])
def test_every_advertised_action_has_a_route(make_bmc, demo_twin, real_skus, sku):
    host = sorted(demo_twin.nodes)[0]
    node = dict(demo_twin.nodes[host], sku=sku)
    twin = types.SimpleNamespace(nodes={host: node})   # the demo node, built as this SKU
    bmc, c = make_bmc(twin=twin, host=host)
    assert set(bmc._post_table) == _advertised(bmc.tree)
    for path in bmc._post_table:
        assert c.post(path, {}).status != 404, path


def test_unknown_target_and_malformed_body(make_bmc):
    bmc, c = make_bmc()
    assert c.post(bmc.spec.S + "/Actions/ComputerSystem.Explode", {}).status == 404
    assert c.post(bmc.spec.S, {}).status == 405   # a resource, not an action
    # a body that is not a JSON object is refused before the target is looked at
    for raw in (b"{not json", b"[1, 2]"):
        reply = c.request("POST", ROOT + "/Nope", raw=raw)
        assert reply.status == 400
        assert reply.json()["error"]["@Message.ExtendedInfo"][0]["MessageId"] == "Base.1.22.MalformedJSON"
