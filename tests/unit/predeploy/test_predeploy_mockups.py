"""The whole audit of one node (observe over Redfish, then judge) against real BMC captures.

Each capture in shared/fixtures/mockups is served through requests-mock (the Redfish area's MockupBMC),
read by the real RedfishClient and inventory reader, and judged against the SKU manifest written from it.
The expected outcomes are what a person reads in the capture files: e.g. the Supermicro SEL holds 11
Critical entries, the GB200 Chassis_0 LeakDetector_1_ColdPlate reads DetectorState Critical, the DGX
Systems/DGX/Storage collection has no Members, the Cray Reset action offers On/ForceOff/Off only.
"""

import importlib.util
import pathlib

from ansible_collections.symphony.cluster.plugins.module_utils._core.gate import BLOCKED, FAIL, NOT_RUN, PASS
from ansible_collections.symphony.cluster.plugins.module_utils._predeploy.checks_health import parse_cutoff
from ansible_collections.symphony.cluster.plugins.module_utils._predeploy.graph import check_graph
from ansible_collections.symphony.cluster.plugins.module_utils._predeploy.judge import judge
from ansible_collections.symphony.cluster.plugins.module_utils._predeploy.observe import observe_node
from ansible_collections.symphony.cluster.plugins.module_utils._predeploy.stage import StageSettings
from ansible_collections.symphony.cluster.plugins.module_utils._core.sku import load_manifest

_SERVER = pathlib.Path(__file__).resolve().parents[1] / "redfish" / "redfish_mockserver.py"
PASSWORD = "s3cr3t-Passw0rd"


def _mockserver():
    spec = importlib.util.spec_from_file_location("predeploy_redfish_mockserver", _SERVER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def audit(mockups, repo_root, capture, sku, serial, **bmc_kw):
    return audit_manifest(mockups, capture, load_manifest(str(repo_root / "skus" / ("%s.yml" % sku))), serial,
                          **bmc_kw)


def audit_manifest(mockups, capture, manifest, serial, **bmc_kw):
    """Observe ``capture`` and judge it against ``manifest`` (a SKU dict): ``({check: result}, gate, obs)``."""
    srv = _mockserver()
    node = {"hostname": "n1", "site": "s1", "rack": "r1", "u": 3, "sku": manifest["sku"], "serial": serial,
            "bmc_mac": "aa:bb:cc:dd:ee:ff", "bmc_address": "10.0.0.3"}
    settings = StageSettings(username="admin", password=PASSWORD, retries=0)
    with srv.MockupBMC(srv.mockup_root(mockups, capture), **bmc_kw):
        obs, warnings = observe_node(node, {"url": srv.BASE, "source": "map"}, {}, settings,
                                     probe=lambda host, port, timeout: (True, ""))
    graph = check_graph(manifest, optional=("lease_captured", "address_reserved"))
    results, gate = judge(node, manifest, obs, "run-mockup", graph, parse_cutoff("all"))
    return {r.check: r for r in results}, gate, obs


def test_supermicro_hgx_h100(mockups, repo_root):
    res, gate, obs = audit(mockups, repo_root, "libredfish-supermicro", "hgx_h100_supermicro", "C8010MM21A30331")
    assert obs.errors == {} and obs.requests > 20
    for check in ("bmc_reachable", "service_root", "login", "inventory_read", "chassis_serial", "system_model",
                  "cpus", "memory", "gpus", "gpu_pcie_links", "nvme", "psus", "fans_thermal", "health_rollup",
                  "firmware_inventory", "power_control"):
        assert res[check].status == PASS, (check, res[check].reason)
    assert res["gpu_pcie_links"].reason == "8 GPU links at expected width/speed"
    assert res["firmware_inventory"].reason == "106 FirmwareInventory members"
    # NetworkAdapters/10 (BlueField-2 MBF2M516C-CECOT) reports NetworkPortCount 1, as the SKU now plans.
    assert res["nics"].status == PASS
    dpu = [n for n in res["nics"].observed if n["model"] == "MBF2M516C-CECOT"]
    assert dpu == [{"id": "10", "model": "MBF2M516C-CECOT", "ports": 1, "speed_gbps": None}]
    assert res["sel_clean"].reason.startswith("11 critical SEL entries since the start of the log; latest "
                                              "2023-11-09T22:52:34Z: [GS-0001] NVSwitch Temp, 1 is not present")
    assert gate.status == FAIL and gate.failing == ["sel_clean"]


def test_dgx_h100_two_systems(mockups, repo_root):
    res, gate, _ignored = audit(mockups, repo_root, "libredfish-nvidia_viking", "dgx_h100", "1663123000052")
    assert res["chassis_serial"].status == PASS and res["chassis_serial"].reason == "Chassis/DGX serial 1663123000052"
    assert res["gpus"].status == PASS and res["gpus"].observed == {"count": 8, "models": ["H100 80GB HBM3"]}
    # Processors Model null; ProcessorId.EffectiveFamily holds "Intel(R) Xeon(R) Platinum 8480CL", the SKU's model
    assert res["cpus"].status == PASS and res["cpus"].observed["models"] == ["Intel(R) Xeon(R) Platinum 8480CL"]
    assert res["cpus"].reason == "Model null on DevType1_CPU0, DevType1_CPU1; model read from ProcessorId.EffectiveFamily"
    assert res["nics"].status == PASS and res["fans_thermal"].status == PASS
    # Systems/DGX/Storage answers without Members: unreadable, never "0 drives".
    # (issue 15: not_run, was FAIL: a partial read is never judged)
    assert res["nvme"].status == NOT_RUN
    assert res["nvme"].reason.startswith("Storage could not be read completely (/redfish/v1/Systems/DGX/Storage: ")
    assert "what was read: expected 10 NVMe drives, found 0" in res["nvme"].reason
    assert gate.failing == ["sel_clean"] and gate.status == FAIL


def test_gb200_null_model_and_leak(mockups, repo_root):
    res, gate, _ignored = audit(mockups, repo_root, "libredfish-nvidia_gb200", "gb200_nvl_tray", "1333024020524")
    assert res["system_model"].reason == "Model null on Systems/System_0 as the SKU says; GB200 NVL found"
    assert res["cpus"].reason == "as Systems/HGX_Baseboard_0 reports them"
    assert res["nvme"].status == PASS  # 9 drives listed under both System_0 Storage and Chassis: counted once
    assert res["gpu_pcie_links"].status == NOT_RUN
    assert res["fans_thermal"].reason == "leak detector Chassis 0 LeakDetector 1 ColdPlate reports a leak"
    assert res["health_rollup"].reason == "health roll-up Critical: Chassis/HGX_CPU_0 Critical, Chassis/HGX_CPU_1 Critical"
    assert gate.status == FAIL


def test_cray_ex235a_power_control_without_restart(mockups, repo_root):
    res, _ignored, _ignored = audit(mockups, repo_root, "cray-EX235a", "cray_ex235a", "ANY")
    assert res["power_control"].status == PASS
    assert res["power_control"].reason == "no restart type; a restart is done as power off then on"
    assert res["chassis_serial"].reason == "twin says chassis serial ANY at r1 U3, BMC reports Chassis/Node0=none"
    assert res["gpus"].status == PASS and res["gpus"].observed["count"] == 8
    # a port collection is unreadable: not judged (issue 15; was a PASS that named the gap)
    assert res["nics"].status == NOT_RUN and "NetworkAdapters could not be read completely" in res["nics"].reason


def test_wrong_password_fails_login_and_blocks_inventory(mockups, repo_root):
    res, gate, obs = audit(mockups, repo_root, "libredfish-supermicro", "hgx_h100_supermicro", "C8010MM21A30331",
                           password="another-password")
    assert res["service_root"].status == PASS
    assert res["login"].status == FAIL and "401" in res["login"].reason
    assert PASSWORD not in res["login"].reason
    assert res["inventory_read"].status == BLOCKED and res["gpus"].status == BLOCKED
    assert gate.failing == ["login"]
