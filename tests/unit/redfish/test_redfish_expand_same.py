"""``$expand`` is an optimisation only (issue 16): every shipped capture reads the same with and without it,
and members a BMC inlines as excerpts (no ``Id``/``Name``) are read again plainly."""

import pytest
from conftest import SHARED

from ansible_collections.symphony.cluster.plugins.module_utils._redfish.client import RedfishClient
from ansible_collections.symphony.cluster.plugins.module_utils._redfish.paging import is_whole, needs_get
from ansible_collections.symphony.cluster.plugins.module_utils._redfish.reader import read_inventory

from .redfish_mockserver import BASE, MockupBMC

CAPTURES = sorted(p.name for p in (SHARED / "fixtures" / "mockups").iterdir() if p.is_dir())
# An excerpt as a BMC inlines it: health and the odata keys, no Id, no Name, no SerialNumber.
EXCERPT = ("Status",)


def _inventory(root, **kw):
    with MockupBMC(root, **kw):
        with RedfishClient(BASE, "admin", "s3cr3t-Passw0rd") as c:
            inv = read_inventory(c)
    d = inv.to_dict()
    d.pop("requests")
    return d


def _without_capture_defect(name, d):
    # dmtf-public-cooling-unit: Sensors/SecondaryHeatLoad is captured with Id "PrimaryHeatLoad" and that
    # sensor's @odata.id, so an expanded collection holds one resource twice and keeps one: a defect of
    # the capture, not of the read
    if name == "dmtf-public-cooling-unit":
        d["readings"] = [r for r in d["readings"] if r["id"] != "PrimaryHeatLoad"]
    return d


@pytest.mark.parametrize("name", CAPTURES)
def test_inventory_is_the_same_with_and_without_expand(mockups, name):
    plain = _without_capture_defect(name, _inventory(mockups / name, honour_expand=False))
    expanded = _without_capture_defect(name, _inventory(mockups / name))
    excerpts = _without_capture_defect(name, _inventory(mockups / name, expand_excerpt=EXCERPT))
    assert expanded == plain
    assert excerpts == plain


def test_dgx_chassis_keeps_its_serial_when_expand_inlines_excerpts(mockups):
    inv = _inventory(mockups / "libredfish-nvidia_viking", expand_excerpt=EXCERPT)
    dgx = next(ch for ch in inv["chassis"] if ch["id"] == "DGX")
    assert dgx["serial"] == "1663123000052"  # Chassis/DGX SerialNumber as captured


def test_whole_resource_needs_id_and_name():
    assert is_whole({"@odata.id": "/redfish/v1/Chassis/1", "Id": "1", "Name": "Chassis"})
    assert is_whole({"@odata.id": "/redfish/v1/Chassis", "Name": "Chassis Collection", "Members": []})
    assert not is_whole({"@odata.id": "/redfish/v1/Chassis/1", "Status": {"Health": "OK"}})
    assert needs_get({"@odata.id": "/redfish/v1/Chassis/1"})
    assert needs_get({"@odata.id": "/redfish/v1/Chassis/1", "Status": {"Health": "OK"}})
    assert not needs_get({"@odata.id": "/redfish/v1/Chassis/1/Power#/PowerSupplies/0", "MemberId": "0"})
