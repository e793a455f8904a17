"""Every shipped capture × {the SKU that matches it, one that does not} (issue 15 "Proof"): zero false passes,
zero false fails on the checks that decide what the node is.

The matching SKU is the shipped manifest written from the capture (``skus/``) or, for captures no SKU ships for,
a minimal one written here from what a person reads in the capture files.  The non-matching SKU is the next
row's (rows ordered so that no two neighbours are the same server model).  With the matching SKU every identity
and bill-of-materials check passes; with the other one the checks that tell the two apart fail.
"""

import pathlib

import pytest

from ansible_collections.symphony.cluster.plugins.module_utils._core.gate import FAIL, PASS
from ansible_collections.symphony.cluster.plugins.module_utils._core.sku import load_manifest

from .test_predeploy_mockups import audit_manifest

REPO = pathlib.Path(__file__).resolve().parents[3]
BOM_CHECKS = ("chassis_serial", "system_model", "cpus", "memory", "gpus")


def _sku(name):
    return load_manifest(str(REPO / "skus" / ("%s.yml" % name)))


def _inline(sku, manufacturer, model, cpus, cpu_model, dimms, total_gib, gpus=0, gpu_model=None, **system):
    gpu = {"count": gpus}
    if gpu_model:
        gpu["model"] = gpu_model
    return {"sku": sku, "schema_version": 1,
            "system": dict({"manufacturer": manufacturer, "model": model}, **system),
            "bom": {"cpus": {"count": cpus, "model": cpu_model}, "memory": {"dimm_count": dimms, "total_gib": total_gib},
                    "gpus": gpu},
            "firmware": []}


CONTOSO = dict(manufacturer="Contoso", model="3500", cpus=1,
               cpu_model="Multi-Core Intel(R) Xeon(R) processor 7xxx Series", dimms=3, total_gib=96)
# (capture, SKU manifest, the chassis serial the capture reports (None: it reports none))
ROWS = [
    ("libredfish-supermicro", lambda: _sku("hgx_h100_supermicro"), "C8010MM21A30331"),
    ("libredfish-nvidia_viking", lambda: _sku("dgx_h100"), "1663123000052"),
    ("libredfish-nvidia_gb200", lambda: _sku("gb200_nvl_tray"), "1333024020524"),
    ("cray-EX235a", lambda: _sku("cray_ex235a"), None),
    ("dmtf-public-rackmount1", lambda: _inline("contoso_3500", **CONTOSO), "437XR1138R2"),
    ("cray-OpenBMC-stock", lambda: _inline("openbmc_qemu", None, None, 0, "none", 0, 0), None),
    ("dmtf-public-smartnic", lambda: _inline("contoso_3500_smartnic", system_id="437XR1138R2", **CONTOSO),
     "437XR1138R2"),
    ("libredfish-dell", lambda: _inline("dell_r750", "Dell Inc.", "PowerEdge R750", 2,
                                        "Intel(R) Xeon(R) Gold 6354 CPU @ 3.00GHz", 16, 512, 1, "NVIDIA H100 PCIe"),
     "CNIVC0014M0388"),
    ("libredfish-nvidia_dpu", lambda: _inline("bluefield3", "https://www.mellanox.com",
                                              "BlueField-3 SmartNIC Main Card", 0, "none", 0, 0), "MT2423600ANG"),
    ("dmtf-public-liquid-cooled-server", lambda: _inline("contoso_3500_lc", **CONTOSO), "437XR1138R2"),
]
# Not a server: the DMTF cooling unit (a CDU) has no ComputerSystem, so no SKU of a node can pass on it.
NOT_A_NODE = ["dmtf-public-cooling-unit"]


def _row(capture):
    return next(r for r in ROWS if r[0] == capture)


def _other(capture):
    i = [r[0] for r in ROWS].index(capture)
    return ROWS[(i + 1) % len(ROWS)]


def test_every_shipped_capture_is_in_the_table(mockups):
    shipped = sorted(p.name for p in mockups.iterdir() if (p / "redfish" / "v1").is_dir())
    assert shipped == sorted([r[0] for r in ROWS] + NOT_A_NODE)


@pytest.mark.parametrize("capture", [r[0] for r in ROWS])
def test_matching_sku_passes(mockups, capture):
    _name, manifest, serial = _row(capture)
    res, _gate, obs = audit_manifest(mockups, capture, manifest(), serial or "none")
    assert obs.errors == {}
    for check in BOM_CHECKS:
        if check == "chassis_serial" and serial is None:
            continue   # the capture reports no chassis serial at all (Cray Node0, OpenBMC QEMU)
        assert res[check].status == PASS, (check, res[check].reason)


@pytest.mark.parametrize("capture", [r[0] for r in ROWS])
def test_other_sku_fails_on_the_checks_that_tell_them_apart(mockups, capture):
    _name, manifest, serial = _row(capture)
    _other_name, other, other_serial = _other(capture)
    mine, theirs = manifest(), other()
    res, gate, _obs = audit_manifest(mockups, capture, theirs, other_serial or "none")
    assert gate.status != PASS
    assert res["system_model"].status == FAIL, res["system_model"].reason
    if serial != other_serial:
        assert res["chassis_serial"].status == FAIL, res["chassis_serial"].reason
    for check, key in (("cpus", "cpus"), ("memory", "memory"), ("gpus", "gpus")):
        differs = {k: v for k, v in theirs["bom"][key].items() if k in ("count", "dimm_count", "total_gib")} != \
            {k: v for k, v in mine["bom"][key].items() if k in ("count", "dimm_count", "total_gib")}
        if differs:
            assert res[check].status == FAIL, (check, res[check].reason)


@pytest.mark.parametrize("capture", NOT_A_NODE)
def test_a_capture_that_is_no_node_never_passes(mockups, capture):
    for _name, manifest, serial in ROWS[:2]:
        res, gate, _obs = audit_manifest(mockups, capture, manifest(), serial)
        assert res["service_root"].status == FAIL and "no link to Systems" in res["service_root"].reason
        assert gate.status == FAIL and not any(res[c].status == PASS for c in BOM_CHECKS)
