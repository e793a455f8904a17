"""The shipped SKU manifests validate and match the real BMC captures they were written from."""

import hashlib
import json
import re

import pytest

from ansible_collections.symphony.cluster.plugins.module_utils._core import sku as _sku
from ansible_collections.symphony.cluster.plugins.module_utils._core.errors import ManifestError

CAPTURES = {
    "hgx_h100_supermicro": "libredfish-supermicro",
    "dgx_h100": "libredfish-nvidia_viking",
    "gb200_nvl_tray": "libredfish-nvidia_gb200",
    "cray_ex235a": "cray-EX235a",
}


@pytest.fixture(scope="module")
def skus(repo_root):
    return _sku.load_skus(str(repo_root / "skus"))


def _get(mockups, capture, path):
    with open(mockups / capture / "redfish" / "v1" / path / "index.json", encoding="utf-8") as handle:
        return json.load(handle)


def _firmware_inventory(mockups, capture):
    coll = _get(mockups, capture, "UpdateService/FirmwareInventory")
    out = {}
    for member in coll["Members"]:
        rel = member["@odata.id"].replace("/redfish/v1/", "").rstrip("/")
        item = _get(mockups, capture, rel)
        out[item["Id"]] = item
    return out


# SKUs of a shape the emulator builds, written from no capture (issue 15: a blade chassis of two nodes).
EMULATED_SHAPES = ("blade_h100_2node",)


def test_four_manifests_ship(skus):
    assert sorted(skus) == sorted(list(CAPTURES) + list(EMULATED_SHAPES))


@pytest.mark.parametrize("sku", sorted(CAPTURES))
def test_firmware_matches_capture(skus, mockups, sku):
    """Every match.ids member exists in the capture, reads an accepted version, and the regexes find exactly them."""
    inventory = _firmware_inventory(mockups, CAPTURES[sku])
    claimed = set()
    for comp in skus[sku]["firmware"]:
        match = comp["match"]
        assert len(match["ids"]) == match["count"], comp["id"]
        for member_id in match["ids"]:
            assert member_id in inventory, "%s: %s not in capture" % (comp["id"], member_id)
            assert inventory[member_id]["Version"] in comp["accepted"], (comp["id"], member_id)
            assert member_id not in claimed, "%s claimed twice" % member_id
            claimed.add(member_id)
        if "id" in match:
            found = {i for i in inventory if re.fullmatch(match["id"], i)}
            assert found == set(match["ids"]), comp["id"]
        if "name" in match:
            for member_id in match["ids"]:
                assert re.fullmatch(match["name"], inventory[member_id]["Name"]), (comp["id"], member_id)


def test_supermicro_gpu_firmware_reported_twice(skus):
    gpu = next(c for c in skus["hgx_h100_supermicro"]["firmware"] if c["id"] == "gpu")
    assert gpu["match"]["count"] == 16
    assert gpu["match"]["ids"][:2] == ["GPU1", "GPU2"] and gpu["match"]["ids"][-1] == "HGX_FW_GPU_SXM_8"
    assert gpu["accepted"] == ["96.00.61.00.01"]


@pytest.mark.parametrize("sku", sorted(CAPTURES))
def test_image_sha256_is_reproducible(skus, sku):
    for comp in skus[sku]["firmware"]:
        if comp["method"] == "none":
            assert "image" not in comp
            continue
        expected = hashlib.sha256(("symphony-demo-image:%s:%s:%s" % (sku, comp["id"], comp["target"]))
                                  .encode()).hexdigest()
        assert comp["image"]["sha256"] == expected, comp["id"]
        assert comp["image"]["uri"].startswith("https://firmware.example.internal/%s/%s/" % (sku, comp["id"]))


@pytest.mark.parametrize("sku", sorted(CAPTURES))
def test_bios_attributes_exist_with_capture_values(skus, mockups, sku):
    system_id = skus[sku]["system"]["system_id"]
    attributes = _get(mockups, CAPTURES[sku], "Systems/%s/Bios" % system_id)["Attributes"]
    for name, wanted in skus[sku]["bios"]["attributes"].items():
        assert name in attributes, name
        current = attributes[name]
        if isinstance(current, dict):  # Cray: {current_value, AllowableValues, ...}
            current = current["current_value"]
        assert current == wanted, name


def test_supermicro_bom_from_capture(skus, mockups):
    bom = skus["hgx_h100_supermicro"]["bom"]
    system = _get(mockups, "libredfish-supermicro", "Systems/1")
    assert system["Model"] == skus["hgx_h100_supermicro"]["system"]["model"] == "SYS-821GE-TNHR"
    assert system["MemorySummary"]["TotalSystemMemoryGiB"] == bom["memory"]["total_gib"] == 2048
    gpu = _get(mockups, "libredfish-supermicro", "Chassis/1/PCIeDevices/GPU1")
    assert gpu["Model"] == bom["gpus"]["model"]
    assert (gpu["PCIeInterface"]["LanesInUse"], gpu["PCIeInterface"]["PCIeType"]) == (16, "Gen5")
    cpu = _get(mockups, "libredfish-supermicro", "Systems/1/Processors/1")
    assert cpu["Model"] == bom["cpus"]["model"] and cpu["TotalCores"] == bom["cpus"]["cores"]


def test_dgx_and_cray_gpu_models_from_capture(skus, mockups):
    dgx = _get(mockups, "libredfish-nvidia_viking", "Systems/HGX_Baseboard_0/Processors/GPU_SXM_1")
    assert dgx["Model"] == skus["dgx_h100"]["bom"]["gpus"]["model"]
    cray = _get(mockups, "cray-EX235a", "Systems/Node0/Processors/GPU0")
    assert cray["Model"] == skus["cray_ex235a"]["bom"]["gpus"]["model"]


def test_lab_profile_and_gates(skus):
    for sku, manifest in skus.items():
        assert manifest["profiles"]["lab"]["inband_bom"]["gpus"]["count"] == 0
        optional = _sku.required_optional_checks(manifest, "burn_in", "lab")
        names = {t["name"] for tier in manifest["burn_in"]["tiers"] for t in tier["tests"]}
        assert optional and set(optional) <= names, sku
        gpu_tier = [t["name"] for tier in manifest["burn_in"]["tiers"] if tier["name"] == "gpu" for t in tier["tests"]]
        assert set(gpu_tier) <= set(optional)


def test_in_band_after_out_of_band_rejected(skus, tmp_path):
    import copy
    manifest = copy.deepcopy(skus["hgx_h100_supermicro"])
    manifest["firmware"].append(dict(manifest["firmware"][0], id="late_bmc"))
    with pytest.raises(ManifestError) as err:
        _sku.validate_manifest(manifest, "x.yml")
    assert "x.yml: $.firmware" in str(err.value) and "update order" in str(err.value)


def test_two_images_with_one_file_name_and_different_sha256_are_refused(skus):
    # The DGX SKU once named its BMC and BIOS ERoT images both 00.04.0026.0000_n00.bin: with one local copy per file
    # name in image_dir, one of the two failed its sha256 check on every run.
    import copy
    manifest = copy.deepcopy(skus["dgx_h100"])
    erot = {c["id"]: c for c in manifest["firmware"]}
    erot["erot_bios"]["image"]["uri"] = erot["erot_bmc"]["image"]["uri"].replace("erot_bmc/", "erot_bios/")
    with pytest.raises(ManifestError) as err:
        _sku.validate_manifest(manifest, "dgx.yml")
    assert "dgx.yml: $.firmware[" in str(err.value) and "also firmware 'erot_bmc'" in str(err.value)
    # the same image under two URIs (same sha256) is one local file: accepted
    erot["erot_bios"]["image"]["sha256"] = erot["erot_bmc"]["image"]["sha256"]
    _sku.validate_manifest(manifest, "dgx.yml")
