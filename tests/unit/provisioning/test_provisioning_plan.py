"""The firmware plan (pure) on the real BMC captures.

Each capture is served by the Redfish area's MockupBMC (requests-mock), read with the real client and
inventory reader, and planned against the SKU manifest written from it.  The values asserted are what
a person reads in the capture files (FirmwareInventory member Version, Bios Attributes).
"""

import copy
import importlib.util
import pathlib

import pytest

from ansible_collections.symphony.cluster.plugins.module_utils._core.errors import ManifestError
from ansible_collections.symphony.cluster.plugins.module_utils._core.fwplan import (
    FOLLOWS, MISSING, NO_IMAGE, REFUSE, SKIP, UPDATE, build_plan, compare_versions, diff_after, diff_of, format_plan,
    members_of)
from ansible_collections.symphony.cluster.plugins.module_utils._redfish.model import FirmwareItem, NodeInventory
from ansible_collections.symphony.cluster.plugins.module_utils._redfish.client import RedfishClient
from ansible_collections.symphony.cluster.plugins.module_utils._redfish.reader import read_inventory
from ansible_collections.symphony.cluster.plugins.module_utils._core.sku import load_manifest

_SERVER = pathlib.Path(__file__).resolve().parents[1] / "redfish" / "redfish_mockserver.py"
_CACHE = {}


def _srv():
    if "srv" not in _CACHE:
        spec = importlib.util.spec_from_file_location("provisioning_redfish_mockserver", _SERVER)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        _CACHE["srv"] = module
    return _CACHE["srv"]


def inventory_of(mockups, capture):
    key = ("inv", capture)
    if key not in _CACHE:
        srv = _srv()
        with srv.MockupBMC(srv.mockup_root(mockups, capture)):
            with RedfishClient(srv.BASE, "admin", "s3cr3t-Passw0rd", retries=0) as client:
                _CACHE[key] = read_inventory(client, sections=("firmware", "bios", "capabilities"))
    return copy.deepcopy(_CACHE[key])


def manifest(repo_root, sku):
    return load_manifest(str(repo_root / "skus" / ("%s.yml" % sku)))


def test_supermicro_capture_is_at_the_manifest(mockups, repo_root):
    inv = inventory_of(mockups, "libredfish-supermicro")
    plan = build_plan(inv, manifest(repo_root, "hgx_h100_supermicro"))
    assert plan.summary() == {"skip": 23, "bios_changes": 0}
    assert plan.step("firmware:bmc").observed == {"BMC": "11.01.01"}
    assert plan.step("firmware:bios").reason == "at accepted version BIOS Date: 08/04/2023 Ver 1.4"
    # the 16 GPU members (GPU1..8 and HGX_FW_GPU_SXM_1..8) all read 96.00.61.00.01
    gpu = plan.step("firmware:gpu")
    assert len(gpu.observed) == 16 and set(gpu.observed.values()) == {"96.00.61.00.01"}
    # strict order: every out-of-band step, then bios_settings, then in-band, then tunings
    phases = [s.phase for s in plan.steps]
    assert phases == sorted(phases, key=["out_of_band", "in_band", "os"].index)
    assert [s.check for s in plan.steps][:2] == ["firmware:bmc", "firmware:bios"]
    assert plan.steps[-1].check == "tunings"
    names = [s.check for s in plan.steps]
    assert names.index("bios_settings") < names.index("firmware:gpu") < names.index("firmware:nic_cx7") \
        < names.index("firmware:nvme")
    # members the manifest does not manage are reported, not failed: the BMC's backup/golden/staging images
    assert [u["id"] for u in plan.unknown][:3] == ["Backup_BMC", "Golden_BMC", "Staging_BMC"]
    assert len(plan.unknown) == 12
    assert not plan.changes_needed and not plan.inband_work


def test_supermicro_drift_and_bios(mockups, repo_root):
    inv = inventory_of(mockups, "libredfish-supermicro")
    for item in inv.firmware:
        if item.id == "BMC":
            item.version = "01.01.10"
        if item.id == "NIC3":
            item.version = "28.36.1010"
    inv.bios["attributes"]["PCIeACSCTL_1E3C"] = "Enable"
    plan = build_plan(inv, manifest(repo_root, "hgx_h100_supermicro"))
    bmc = plan.step("firmware:bmc")
    assert bmc.action == UPDATE and bmc.target == "11.01.01" and bmc.method == "redfish_multipart"
    assert bmc.activation == "bmc_reset"
    assert bmc.reason == "01.01.10 not accepted (accepted: 11.01.01); update to 11.01.01"
    nic = plan.step("firmware:nic_cx7")
    assert nic.action == UPDATE and nic.phase == "in_band" and nic.observed["NIC3"] == "28.36.1010"
    assert nic.observed["NIC1"] == "28.37.10.14"
    assert plan.step("bios_settings").changes == {"PCIeACSCTL_1E3C": ["Enable", "Disable"]}
    assert [s.check for s in plan.changes_needed] == ["firmware:bmc", "bios_settings", "firmware:nic_cx7"]
    diff = diff_of(plan)
    assert diff["before"]["firmware"] == {"bmc": ["01.01.10"], "nic_cx7": ["28.36.1010", "28.37.10.14"]}
    assert diff["after"]["bios"] == {"PCIeACSCTL_1E3C": "Disable"}
    lines = format_plan("n1", plan)
    assert lines[0] == ("n1: firmware:bmc [update] 01.01.10 -> 11.01.01 via redfish_multipart (bmc_reset): "
                        "01.01.10 not accepted (accepted: 11.01.01); update to 11.01.01")
    assert "n1: bios_settings: PCIeACSCTL_1E3C 'Enable' -> 'Disable'" in lines


def test_diff_after_is_the_fresh_read_not_the_target(mockups, repo_root):
    """A BIOS update that failed shows its old version after; the BMC update that worked shows the new one."""
    inv = inventory_of(mockups, "libredfish-supermicro")
    for item in inv.firmware:
        if item.id == "BMC":
            item.version = "01.01.10"
        if item.id == "BIOS":
            item.version = "BIOS Date: 01/12/2023 Ver 1.2"
    inv.bios["attributes"]["PCIeACSCTL_1E3C"] = "Enable"
    sku = manifest(repo_root, "hgx_h100_supermicro")
    before = diff_of(build_plan(inv, sku))
    assert before["after"]["firmware"]["bios"] == ["BIOS Date: 08/04/2023 Ver 1.4"]  # the plan's target
    fresh = inventory_of(mockups, "libredfish-supermicro")
    for item in fresh.firmware:  # the BMC reached its target; the BIOS task failed
        if item.id == "BIOS":
            item.version = "BIOS Date: 01/12/2023 Ver 1.2"
    fresh.bios["attributes"]["PCIeACSCTL_1E3C"] = "Disable"
    after = diff_after(before, build_plan(fresh, sku), fresh.bios["attributes"])
    assert after["before"] == before["before"]
    assert after["after"]["firmware"] == {"bmc": ["11.01.01"], "bios": ["BIOS Date: 01/12/2023 Ver 1.2"]}
    assert after["after"]["bios"] == {"PCIeACSCTL_1E3C": "Disable"}


def test_downgrade_refused_unless_allowed(mockups, repo_root):
    inv = inventory_of(mockups, "libredfish-supermicro")
    for item in inv.firmware:
        if item.id == "BMC":
            item.version = "11.02.05"
    m = manifest(repo_root, "hgx_h100_supermicro")
    step = build_plan(inv, m).step("firmware:bmc")
    assert step.action == REFUSE
    assert step.reason.startswith("target 11.01.01 is older than the running 11.02.05; downgrade refused")
    assert build_plan(inv, m, allow_downgrade=True).step("firmware:bmc").action == UPDATE
    m["firmware"][0]["allow_downgrade"] = True
    assert build_plan(inv, m).step("firmware:bmc").reason.endswith("downgrade to 11.01.01")


def _dell_manifest(bios_target, bios_accepted):
    return {"sku": "dell_r750", "firmware": [
        {"id": "idrac", "kind": "bmc", "phase": "out_of_band", "accepted": ["7.00.00.00"], "target": "7.00.00.00",
         "image": {"uri": "https://fw.example/idrac.exe", "sha256": "0" * 64}, "method": "redfish_simple_update",
         "activation": "bmc_reset", "match": {"id": r"(Installed|Current|Previous)-25227-.*__iDRAC\.Embedded\.1-1"}},
        {"id": "bios", "kind": "bios", "phase": "out_of_band", "accepted": bios_accepted, "target": bios_target,
         "image": {"uri": "https://fw.example/bios.exe", "sha256": "0" * 64}, "method": "redfish_simple_update",
         "activation": "host_reset", "match": {"id": r"(Installed|Current|Previous)-159-.*__BIOS\.Setup\.1-1"}},
        {"id": "cx6", "kind": "nic", "phase": "in_band", "accepted": ["20.31.10.14"], "target": "20.31.10.14",
         "image": {"uri": "https://fw.example/cx6.bin", "sha256": "0" * 64}, "method": "mlxfwmanager",
         "activation": "host_reset", "match": {"id": r"Installed-0-.*__InfiniBand\.Slot\.7-[12]", "count": 2}},
        {"id": "gpu", "kind": "gpu", "phase": "in_band", "accepted": ["96.00.61.00.01"], "target": "96.00.61.00.01",
         "image": {"uri": "https://fw.example/gpu.fwpkg", "sha256": "0" * 64}, "method": "nvfwupd",
         "activation": "host_reset", "match": {"id": "GPU[1-8]", "count": 8}}]}


def test_dell_previous_and_current_do_not_make_bios_look_outdated(mockups):
    inv = inventory_of(mockups, "libredfish-dell")
    plan = build_plan(inv, _dell_manifest("1.8.2", ["1.8.2"]))
    bios = plan.step("firmware:bios")
    # the capture holds Installed-159-1.8.2, Current-159-1.8.2 and Previous-159-1.2.4 for BIOS: only the
    # running (Installed) entry counts
    assert bios.action == SKIP and bios.observed == {"Installed-159-1.8.2__BIOS.Setup.1-1": "1.8.2"}
    idrac = plan.step("firmware:idrac")
    assert idrac.action == UPDATE and idrac.observed == {"Installed-25227-6.00.30.00__iDRAC.Embedded.1-1":
                                                         "6.00.30.00"}
    assert plan.step("firmware:cx6").action == SKIP
    # a manifest component the node does not have
    gpu = plan.step("firmware:gpu")
    assert gpu.action == MISSING and plan.missing == ["gpu"]
    assert gpu.reason == "the node reports 0 of 8 FirmwareInventory members matching GPU[1-8]"
    # the raw capture really holds the Previous entry: without normalisation it would have matched
    assert len(inv.firmware) == 21
    # target older than what runs: refused
    older = build_plan(inv, _dell_manifest("1.2.4", ["1.2.4"])).step("firmware:bios")
    assert older.action == REFUSE and "older than the running 1.8.2" in older.reason


def test_cray_bios_attributes_objects_and_gb200(mockups, repo_root):
    plan = build_plan(inventory_of(mockups, "cray-EX235a"), manifest(repo_root, "cray_ex235a"))
    assert plan.step("bios_settings").action == SKIP  # OEM {"current_value": ...} objects are read through
    assert [u["id"] for u in plan.unknown] == ["Node0.ManagementEthernet"]
    gb = build_plan(inventory_of(mockups, "libredfish-nvidia_gb200"), manifest(repo_root, "gb200_nvl_tray"))
    assert gb.summary()["skip"] == 15 and gb.summary()["bios_changes"] == 0


def test_unknown_versions_follow_and_no_image():
    m = {"sku": "t", "firmware": [
        {"id": "bmc", "kind": "bmc", "phase": "out_of_band", "accepted": ["2.0"], "target": "2.0",
         "image": {"uri": "u", "sha256": "0" * 64}, "method": "redfish_multipart", "activation": "bmc_reset",
         "match": {"id": "BMC"}},
        {"id": "me", "kind": "other", "phase": "out_of_band", "accepted": ["6.0"], "method": "none",
         "activation": "none", "updated_with": "bmc", "match": {"id": "ME"}},
        {"id": "psu", "kind": "psu", "phase": "out_of_band", "accepted": ["1.3"], "method": "redfish_multipart",
         "activation": "none", "match": {"id": "PSU"}}]}
    inv = NodeInventory(firmware=[FirmwareItem("BMC", version=None), FirmwareItem("ME", version="5.9"),
                                  FirmwareItem("PSU", version="1.0")])
    plan = build_plan(inv, m)
    assert plan.step("firmware:bmc").action == UPDATE
    assert plan.step("firmware:bmc").reason == "version not reported by BMC; update to 2.0"
    assert plan.step("firmware:me").action == FOLLOWS
    assert plan.step("firmware:me").reason == "5.9 not accepted (accepted: 6.0); updated with bmc"
    assert plan.step("firmware:psu").action == NO_IMAGE
    m["firmware"][0]["match"] = {"id": "BMC["}
    with pytest.raises(ManifestError, match="not a valid regex"):
        members_of(m["firmware"][0], inv.firmware)


@pytest.mark.parametrize("a,b,want", [
    ("28.37.10.14", "28.36.1010", 1), ("11.01.01", "11.02.05", -1), ("1.8.2", "1.8.2", 0),
    ("BIOS Date: 08/04/2023 Ver 1.4", "BIOS Date: 01/02/2023 Ver 1.3", 1), ("GDC5602Q", "GDC5302Q", 1),
    ("F5.11.CB", "F5.11.10", None), (None, "1.0", None), ("1.0", "1.0.1", -1)])
def test_compare_versions(a, b, want):
    assert compare_versions(a, b) == want
