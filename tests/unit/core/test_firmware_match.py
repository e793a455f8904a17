"""SKU firmware ``match``: one rule for the audit and the plan, JMESPath ``query`` checked at SKU load.

Input: the real Supermicro HGX H100 capture's FirmwareInventory (../shared/fixtures/mockups/libredfish-supermicro).
"""

import copy
import json

import pytest

from ansible_collections.symphony.cluster.plugins.module_utils._core.errors import ManifestError
from ansible_collections.symphony.cluster.plugins.module_utils._core.sku import load_manifest, validate_manifest
from ansible_collections.symphony.cluster.plugins.module_utils._core.fwplan import members_of, plan_component
from ansible_collections.symphony.cluster.plugins.module_utils._core.match import firmware_members
from ansible_collections.symphony.cluster.plugins.module_utils._redfish.model import FirmwareItem


@pytest.fixture(scope="module")
def sku(repo_root):
    return load_manifest(str(repo_root / "skus" / "hgx_h100_supermicro.yml"))


@pytest.fixture(scope="module")
def inventory(mockups):
    base = mockups / "libredfish-supermicro" / "redfish" / "v1" / "UpdateService" / "FirmwareInventory"
    items = []
    for member in sorted(p for p in base.iterdir() if p.is_dir()):
        doc = json.loads((member / "index.json").read_text())
        items.append(FirmwareItem(id=doc["Id"], name=doc.get("Name", ""), version=doc.get("Version"),
                                  updateable=doc.get("Updateable"),
                                  state=(doc.get("Status") or {}).get("State"),
                                  related=[r.get("@odata.id") for r in doc.get("RelatedItem") or []]))
    return items


def _component(sku, cid):
    return next(c for c in sku["firmware"] if c["id"] == cid)


def test_shipped_sku_matches_its_nics_by_part_number(sku, inventory):
    nic = _component(sku, "nic_cx7")
    assert "query" in nic["match"]
    found = firmware_members(nic, inventory)
    assert [i.id for i in found] == ["NIC%d" % n for n in range(1, 9)]
    assert members_of(nic, inventory) == found  # the plan and the audit use one rule
    assert plan_component(nic, inventory).action == "skip"


def test_a_nic_of_another_part_is_not_counted(sku, inventory):
    swapped = [FirmwareItem(id=i.id, name=i.name.replace("MCX75310AAS-NEAT", "MCX75310AAS-HEAT"),
                            version=i.version) if i.id == "NIC3" else i for i in inventory]
    nic = _component(sku, "nic_cx7")
    assert [i.id for i in firmware_members(nic, swapped)] == ["NIC%d" % n for n in (1, 2, 4, 5, 6, 7, 8)]
    step = plan_component(nic, swapped)
    assert step.action == "missing" and "7 of 8" in step.reason and "MCX75310AAS-NEAT" in step.reason


def test_id_or_name_regex_without_query_keeps_matching(sku, inventory):
    bmc = _component(sku, "bmc")
    assert [i.id for i in firmware_members(bmc, inventory)] == ["BMC"]
    by_name_only = dict(bmc, match={"name": "BMC", "count": 1})
    assert [i.id for i in firmware_members(by_name_only, inventory)] == ["BMC"]


@pytest.mark.parametrize("match, words", [
    ({"id": "NIC[1-8]", "query": "contains(Name, 'x'"}, "not a valid JMESPath expression"),
    ({"id": "NIC[1-8"}, "not a valid regex"),
])
def test_a_bad_match_fails_the_sku_at_load_naming_the_path(sku, match, words):
    broken = copy.deepcopy(sku)
    index = next(i for i, c in enumerate(broken["firmware"]) if c["id"] == "nic_cx7")
    broken["firmware"][index]["match"] = dict(match, count=8)
    with pytest.raises(ManifestError) as info:
        validate_manifest(broken, "skus/hgx_h100_supermicro.yml")
    assert words in str(info.value)
    assert "skus/hgx_h100_supermicro.yml: $.firmware[%d].match" % index in str(info.value)


def test_member_list_without_bodies_judges_presence_by_id_and_leaves_the_query_to_the_plan(sku, inventory):
    ids_only = [FirmwareItem(id=i.id) for i in inventory]
    nic = _component(sku, "nic_cx7")
    assert len(firmware_members(nic, ids_only, bodies=False)) == 8
    assert firmware_members(nic, ids_only) == []  # with bodies expected, a nameless member never passes the query


def test_patterns_compiled_once_still_match_either_key_and_a_bad_one_names_each_place():
    """Issue 27: the compiled patterns are kept across calls; matching and errors are what they were."""
    items = [FirmwareItem(id="GPU0_FW", name="GPU Firmware"), FirmwareItem(id="BMC", name="BMC Image"),
             FirmwareItem(id=None, name="CPLD Motherboard")]
    both = {"id": "firmware_gpu", "match": {"id": "GPU.*", "name": "CPLD.*"}}
    for _round in range(2):
        assert [i.name for i in firmware_members(both, items)] == ["GPU Firmware", "CPLD Motherboard"]
    assert [i.id for i in firmware_members({"id": "bmc", "match": {"name": "BMC.*"}}, items)] == ["BMC"]
    assert [i.id for i in firmware_members({"id": "BMC", "match": {}}, items)] == ["BMC"]
    for where in ("firmware[a].match", "firmware[b].match"):
        with pytest.raises(ManifestError) as ei:
            firmware_members({"id": "x", "match": {"id": "GPU(["}}, items, where=where)
        assert where in str(ei.value)
