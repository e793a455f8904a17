"""The pre-deployment checks as pure functions over an Observation, the twin node and the real SKU manifest.

The clean inventory below mirrors what the Supermicro SYS-821GE-TNHR capture
(shared/fixtures/mockups/libredfish-supermicro) reports: Systems/1, Chassis/1, GPU1..8 as PCIeDevices
"H100 80GB HBM3" at x16 Gen5, 32 × 64 GiB DIMMs, MCX75310AAS-NEAT NICs.  Tests that read the capture
itself through the Redfish reader are in test_predeploy_mockups.py.
"""

from datetime import datetime, timezone

import pytest

from ansible_collections.symphony.cluster.plugins.module_utils._core.gate import BLOCKED, FAIL, NOT_RUN, PASS
from ansible_collections.symphony.cluster.plugins.module_utils._redfish.model import (
    Component, FirmwareItem, NodeInventory, Reading, SelEntry)
from ansible_collections.symphony.cluster.plugins.module_utils._predeploy.checks_access import validate_service_root
from ansible_collections.symphony.cluster.plugins.module_utils._predeploy.checks_health import parse_cutoff
from ansible_collections.symphony.cluster.plugins.module_utils._predeploy.graph import CHECKS, Observation, check_graph
from ansible_collections.symphony.cluster.plugins.module_utils._predeploy.judge import judge
from ansible_collections.symphony.cluster.plugins.module_utils._predeploy.parts import missing_slots, model_matches
from ansible_collections.symphony.cluster.plugins.module_utils._core.sku import load_manifest
from ansible_collections.symphony.cluster.plugins.module_utils._core.errors import ValidationError

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=timezone.utc).timestamp()
NODE = {"hostname": "gpu-r01-u02", "site": "demo", "rack": "r01", "u": 2, "sku": "hgx_h100_supermicro",
        "serial": "C8010MM21A30102", "bmc_mac": "3c:ec:ef:11:02:01", "bmc_address": "10.10.1.12",
        "bmc_subnet": "10.10.1.0/24"}
ROOT = {"@odata.id": "/redfish/v1", "RedfishVersion": "1.11.0", "Vendor": "Supermicro",
        "Systems": {"@odata.id": "/redfish/v1/Systems"}, "Chassis": {"@odata.id": "/redfish/v1/Chassis"},
        "Managers": {"@odata.id": "/redfish/v1/Managers"}}


@pytest.fixture(scope="module")
def manifest(repo_root):
    return load_manifest(str(repo_root / "skus" / "hgx_h100_supermicro.yml"))


def clean_inventory(manifest):
    bom = manifest["bom"]
    comps = [Component("cpu", "CPU%d" % i, model=bom["cpus"]["model"], state="Enabled", health="OK",
                       extra={"cores": 32}) for i in (1, 2)]
    comps += [Component("dimm", "DIMM%d" % i, memory_gib=64.0, state="Enabled", health="OK",
                        location="P%d-DIMM%s%d" % (1 + i // 16, "ABCDEFGH"[i % 8], 1 + (i // 8) % 2))
              for i in range(32)]
    comps += [Component("gpu", "GPU%d" % i, model="H100 80GB HBM3", state="Enabled", health="OK", pcie_width=16,
                        pcie_width_max=16, pcie_gen=5, pcie_gen_max=5) for i in range(1, 9)]
    comps += [Component("nic", "NIC%d" % i, model="MCX75310AAS-NEAT", ports=1, speed_gbps=400, state="Enabled",
                        health="OK") for i in range(1, 9)]
    comps += [Component("nic", "NIC9", model="AOC-STGS-i2T", ports=2, speed_gbps=10, state="Enabled", health="OK"),
              Component("dpu", "NIC10", model="MBF2M516C-CECOT", ports=2, speed_gbps=100, state="Enabled",
                        health="OK")]
    comps += [Component("nvme", "Disk.Bay.%d" % i, model="MZQL27T6HBLA-00A07", capacity_gb=7681.5,
                        state="Enabled", health="OK") for i in range(8)]
    comps += [Component("psu", "PSU%d" % i, state="Enabled", health="OK") for i in range(1, 9)]
    comps += [Component("fan", "FAN%d" % i, state="Enabled", health="OK") for i in range(1, 11)]
    firmware = []
    for comp in manifest["firmware"]:
        names = comp["match"].get("names") or []  # the member Names as the capture gives them
        for index, mid in enumerate(comp["match"].get("ids", [])):
            firmware.append(FirmwareItem(mid, name=names[index] if index < len(names) else mid,
                                         version=comp["accepted"][0]))
    return NodeInventory(
        service={"vendor": "Supermicro"},
        systems=[{"id": "1", "manufacturer": "Supermicro", "model": "SYS-821GE-TNHR", "serial": "S454857X3A01234",
                  "health": "OK", "power_state": "On"}],
        capabilities={"power_actions": ["On", "ForceOff", "GracefulShutdown", "GracefulRestart", "ForceRestart",
                                        "Nmi", "ForceOn"], "power_target": "/redfish/v1/Systems/1/Actions/"
                                                                           "ComputerSystem.Reset"},
        chassis=[{"id": "1", "serial": "C8010MM21A30102", "health": "OK", "model": "X13DEG-OAD"}],
        managers=[{"id": "1", "firmware_version": "01.01.01"}],
        components=comps, firmware=firmware,
        sel=[SelEntry("1", created="2026-01-03T10:00:00+00:00", severity="Critical",
                      message="Power Supply PS2 AC lost"),  # old: before the 30-day cutoff
             SelEntry("2", created="2026-11-28T10:00:00+00:00", severity="OK", message="Log cleared")],
        readings=[Reading("CPU1_Temp", "temperature", 45.0, "Cel", "CPU1 Temp", "OK", 100.0),
                  Reading("GPU1_Temp", "temperature", 38.0, "Cel", "GPU1 Temp", "OK", 87.0)])


def observation(manifest, **changes):
    obs = Observation(endpoint={"url": "https://10.10.1.12", "source": "lease"},
                      discovery={"lease": {"address": "10.10.1.12", "mac": NODE["bmc_mac"], "source": "isc",
                                           "hostname": None},
                                 "note": "", "leased_address": "10.10.1.12", "planned_address": "10.10.1.12",
                                 "conflict": None, "reservation": {"isc": "", "kea": {}}},
                      lease_source="dhcpd.leases", reachable=(True, ""), service_root=ROOT, login=True,
                      inventory=clean_inventory(manifest))
    for key, value in changes.items():
        setattr(obs, key, value)
    return obs


def run(manifest, obs, node=None, **kw):
    node = node or NODE
    results, gate = judge(node, manifest, obs, "run-test", sel_cutoff=parse_cutoff("30d", NOW), now=NOW, **kw)
    return {r.check: r for r in results}, gate


def test_stage_has_at_least_15_checks_with_dependencies():
    graph = check_graph()
    assert len(CHECKS) == 20
    assert graph.specs["gpu_pcie_links"].depends_on == ("gpus",)
    assert graph.order().index("login") < graph.order().index("inventory_read") < graph.order().index("gpus")


def test_clean_node_passes_every_check(manifest):
    res, gate = run(manifest, observation(manifest))
    assert {r.status for r in res.values()} == {PASS}, {c: r.reason for c, r in res.items() if r.status != PASS}
    assert gate.status == PASS
    assert res["sel_clean"].reason == "no critical SEL entries since 2026-10-30T12:00:00Z"
    assert res["gpu_pcie_links"].reason == "8 GPU links at expected width/speed"


def test_missing_gpu_names_the_empty_slot(manifest):
    obs = observation(manifest)
    obs.inventory.components = [c for c in obs.inventory.components if c.id != "GPU5"]
    res, gate = run(manifest, obs)
    assert res["gpus"].status == FAIL
    assert res["gpus"].reason == "expected 8 × H100 80GB HBM3, found 7; slot GPU5 empty"
    assert "reseat or replace the GPU" in res["gpus"].remediation
    assert res["gpu_pcie_links"].status == BLOCKED and res["gpu_pcie_links"].reason == "blocked by gpus (fail)"
    assert gate.status == FAIL and gate.reason.startswith("gpus: expected 8 × H100 80GB HBM3, found 7")


def test_absent_gpu_state_is_an_empty_slot(manifest):
    obs = observation(manifest)
    gpu = [c for c in obs.inventory.components if c.id == "GPU3"][0]
    gpu.state, gpu.location = "Absent", "GPU_SXM_3"
    res, _ignored = run(manifest, obs)
    assert res["gpus"].reason == "expected 8 × H100 80GB HBM3, found 7; slot GPU_SXM_3 empty"


def test_pcie_downtrain(manifest):
    obs = observation(manifest)
    gpu = [c for c in obs.inventory.components if c.id == "GPU3"][0]
    gpu.pcie_width = 8
    res, gate = run(manifest, obs)
    assert res["gpus"].status == PASS
    assert res["gpu_pcie_links"].status == FAIL
    assert res["gpu_pcie_links"].reason == "PCIe link downtrained: GPU3 at x8 Gen5, expected x16 Gen5"
    assert gate.failing == ["gpu_pcie_links"]


def test_serial_mismatch_says_rack_and_u(manifest):
    obs = observation(manifest)
    obs.inventory.chassis[0]["serial"] = "C8010MM21A39999"
    res, _ignored = run(manifest, obs)
    assert res["chassis_serial"].reason == (
        "twin says chassis serial C8010MM21A30102 at r01 U2, BMC reports Chassis/1=C8010MM21A39999")
    assert "pull-out tag" in res["chassis_serial"].remediation


def test_sel_critical_within_cutoff(manifest):
    obs = observation(manifest)
    obs.inventory.sel.append(SelEntry("3", created="2026-11-29T09:15:00+00:00", severity="Critical",
                                      message="GPU5 Uncorrectable ECC error"))
    res, _ignored = run(manifest, obs)
    assert res["sel_clean"].status == FAIL
    assert res["sel_clean"].reason == ("1 critical SEL entry since 2026-10-30T12:00:00Z; latest "
                                       "2026-11-29T09:15:00+00:00: GPU5 Uncorrectable ECC error")
    # 'all' makes the old PSU entry count too
    results, _ignored = judge(NODE, manifest, obs, "r", sel_cutoff=parse_cutoff("all"), now=NOW)
    assert [r.reason for r in results if r.check == "sel_clean"][0].startswith("2 critical SEL entries since the "
                                                                               "start of the log")


def test_undated_critical_entry_counts(manifest):
    obs = observation(manifest)
    obs.inventory.sel.append(SelEntry("9", created=None, severity="Critical", message="Fan1 failure"))
    res, _ignored = run(manifest, obs)
    assert res["sel_clean"].status == FAIL and "undated" in res["sel_clean"].reason


def test_unreachable_bmc_blocks_everything_after(manifest):
    obs = observation(manifest, reachable=(False, "TCP connect to 10.10.1.12:443 timed out after 5.0 s"),
                      service_root=None, login=None, inventory=None)
    res, gate = run(manifest, obs)
    assert res["bmc_reachable"].status == FAIL
    assert res["bmc_reachable"].reason == ("BMC not reachable at https://10.10.1.12: TCP connect to "
                                           "10.10.1.12:443 timed out after 5.0 s")
    assert res["service_root"].reason == "blocked by bmc_reachable (fail)"
    assert res["gpus"].status == BLOCKED and res["gpus"].reason == "blocked by inventory_read (blocked)"
    assert res["lease_captured"].status == PASS
    assert gate.status == FAIL and gate.failing == ["bmc_reachable"]


def test_wrong_credentials(manifest):
    obs = observation(manifest, login=None, inventory=None,
                      errors={"login": "127.0.0.1:8443 POST /redfish/v1/SessionService/Sessions: HTTP 401"})
    res, gate = run(manifest, obs)
    assert res["login"].status == FAIL
    assert res["login"].reason.startswith("login failed: 127.0.0.1:8443 POST")
    assert "vault/AWX credential" in res["login"].remediation
    assert res["inventory_read"].status == BLOCKED
    assert gate.failing == ["login"]


def test_missing_lease_source_is_not_run_and_keeps_gate_closed(manifest):
    obs = observation(manifest, discovery=None)
    res, gate = run(manifest, obs)
    assert res["lease_captured"].status == NOT_RUN
    assert res["address_reserved"].status == BLOCKED
    assert gate.status == BLOCKED
    assert gate.reason == "address_reserved: blocked by lease_captured (not_run)"
    _ignored, opt_gate = run(manifest, obs, graph=check_graph(manifest, optional=("lease_captured", "address_reserved")))
    assert opt_gate.status == PASS


def test_address_conflict(manifest):
    obs = observation(manifest)
    obs.discovery["conflict"] = "3c:ec:ef:99:99:99"
    res, _ignored = run(manifest, obs)
    assert res["address_reserved"].reason == "planned BMC address 10.10.1.12 is leased to another MAC 3c:ec:ef:99:99:99"


def test_memory_psu_fan_health_nic_nvme(manifest):
    obs = observation(manifest)
    inv = obs.inventory
    inv.components = [c for c in inv.components if c.location != "P1-DIMMC1"]
    [p for p in inv.components if p.id == "PSU2"][0].health = "Critical"
    [f for f in inv.components if f.id == "FAN3"][0].health = "Critical"
    inv.components = [c for c in inv.components if c.id != "NIC4"]
    [d for d in inv.components if d.kind == "nvme"][0].capacity_gb = 3840.7
    inv.readings.append(Reading("GPU2_Temp", "temperature", 91.0, "Cel", "GPU2 Temp", "Critical", 87.0))
    res, gate = run(manifest, obs)
    assert res["memory"].reason == "expected 32 DIMMs, found 31; 1984 GiB total, expected 2048 GiB"
    assert res["psus"].reason == "PSU2 health Critical"
    assert res["fans_thermal"].reason == "fan FAN3 health Critical; GPU2 Temp at 91 °C, critical 87 °C"
    assert res["nics"].reason == "expected 8 × MCX75310AAS-NEAT, found 7"
    assert res["nvme"].reason == "Disk.Bay.0 holds 3841 GB, expected 7682 GB"
    assert res["health_rollup"].reason == "health roll-up Critical: PSU2 Critical, FAN3 Critical"
    assert gate.failing == ["memory", "nics", "nvme", "psus", "fans_thermal", "health_rollup"]


def test_wrong_system_model_and_power_control(manifest):
    obs = observation(manifest)
    obs.inventory.systems[0]["model"] = "SYS-421GE-TNRT"
    obs.inventory.capabilities["power_actions"] = ["On", "GracefulRestart"]
    res, _ignored = run(manifest, obs)
    assert res["system_model"].reason == ("Systems/1 reports model 'SYS-421GE-TNRT', expected 'SYS-821GE-TNHR' "
                                          "(SKU hgx_h100_supermicro)")
    assert res["power_control"].reason == "ComputerSystem.Reset offers On, GracefulRestart, no way to power off"


def test_firmware_inventory_missing_component(manifest):
    obs = observation(manifest)
    obs.inventory.firmware = [f for f in obs.inventory.firmware if f.id != "BIOS"]
    res, _ignored = run(manifest, obs)
    assert res["firmware_inventory"].status == FAIL
    assert res["firmware_inventory"].reason == "FirmwareInventory has no member for bios (BIOS: 0 of 1)"


def test_incomplete_inventory_is_not_absent(manifest):
    obs = observation(manifest)
    obs.inventory.incomplete = [{"part": "pcie", "uri": "/redfish/v1/Chassis/1/PCIeDevices", "reason": "HTTP 500"}]
    obs.inventory.components = [c for c in obs.inventory.components if c.kind != "gpu"]
    res, _ignored = run(manifest, obs)
    # a partial read is never judged: not a "0 GPUs" fail (was FAIL before issue 15)
    assert res["gpus"].status == NOT_RUN
    assert res["gpus"].reason == ("the GPU inventory could not be read completely (/redfish/v1/Chassis/1/PCIeDevices: "
                                  "HTTP 500), so it is not judged; what was read: expected 8 × H100 80GB HBM3, found 0; "
                                  "rerun the stage (reset the BMC with Manager.Reset if it persists)")


def test_systems_read_cut_short_is_never_a_fail(manifest):
    """A BMC that begins to reboot between the service root and the Systems read (chaos scenario
    bmc_reboot_before_run) failed the node on inventory_read: now blocked (BMC unreachable) with the cause
    (DESIGN.md "Verdict rules": controller and unreachable faults are not hardware faults)."""
    from ansible_collections.symphony.cluster.plugins.module_utils._redfish.errors import (
        FAULT_UNREACHABLE, RedfishConnectionError)
    from ansible_collections.symphony.cluster.plugins.module_utils._redfish.read_base import ReaderBase
    obs = observation(manifest)
    obs.inventory.incomplete = []
    reader = ReaderBase.__new__(ReaderBase)
    reader.inv = obs.inventory
    reader.incomplete("systems", "/redfish/v1/Systems", RedfishConnectionError(
        "127.0.0.1:1 /redfish/v1/Systems: cannot connect: Connection aborted", where="127.0.0.1:1"))
    assert obs.inventory.incomplete[0]["fault"] == FAULT_UNREACHABLE
    res, verdict = run(manifest, obs)
    assert res["inventory_read"].status == BLOCKED and verdict.status == BLOCKED
    assert res["inventory_read"].reason.startswith("BMC unreachable: reading the Redfish inventory was cut short: "
                                                   "/redfish/v1/Systems: ")
    assert res["inventory_read"].evidence["fault"] == FAULT_UNREACHABLE
    assert "reset it (Manager.Reset" in res["inventory_read"].remediation

    # a BMC that answers, but not with the twin's system (or keeps answering 500), is still a finding
    obs = observation(manifest)
    obs.inventory.incomplete = [{"part": "systems", "uri": "/redfish/v1/Systems", "reason": "HTTP 500"}]
    res, verdict = run(manifest, obs)
    assert res["inventory_read"].status == FAIL


def test_service_root_validation():
    assert validate_service_root(ROOT) == []
    assert validate_service_root({"@odata.id": "/redfish/v1/"}) == [
        "no RedfishVersion", "no link to Systems", "no link to Chassis", "no link to Managers"]
    assert validate_service_root(["x"]) == ["the service root is not a JSON object"]


def test_helpers():
    assert model_matches("H100 80GB HBM3", "NVIDIA H100 80GB HBM3")
    assert not model_matches("H100 80GB HBM3", "H100 NVL")
    assert not model_matches("H100", None)
    assert missing_slots(["GPU_SXM_1", "GPU_SXM_2", "GPU_SXM_4"], 4) == ["GPU_SXM_3"]
    assert missing_slots(["GPU0", "GPU1"], 3) == ["GPU2"]
    assert missing_slots(["a", "GPU1"], 3) == []
    assert parse_cutoff("12h", NOW) == datetime(2026, 11, 29, 0, 0, tzinfo=timezone.utc)
    assert parse_cutoff("2026-11-01T00:00:00Z") == datetime(2026, 11, 1, tzinfo=timezone.utc)
    assert parse_cutoff("all") is None
    with pytest.raises(ValidationError, match="sel_since: SEL cutoff 'yesterday'"):
        parse_cutoff("yesterday")
