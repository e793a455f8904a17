"""In-band adapters against fake vendor tools on PATH printing the tools' documented output formats.

Each fake keeps the device's running firmware in a state file so an update can be observed (or not:
``stuck`` makes the tool report success while nothing changes, which must fail the step)."""

import hashlib
import json
import os
import sys
import textwrap

import pytest

from ansible_collections.symphony.cluster.plugins.module_utils._core.errors import ParseError
from ansible_collections.symphony.cluster.plugins.module_utils._provision.inband_fw import (
    parse_flint_query, parse_mlxfwmanager_query, parse_nvfwupd_show_version, parse_nvme_fw_log, parse_nvme_list,
    plan_inband, run_inband)

MLX_QUERY = """Querying Mellanox devices firmware ...

Device #1:
----------

  Device Type:      ConnectX7
  Part Number:      MCX75310AAS-NEA_Ax
  Description:      NVIDIA ConnectX-7 HHHL Adapter Card; 400Gb/s NDR IB; Single-port OSFP; PCIe 5.0 x16
  PSID:             MT_0000000838
  PCI Device Name:  /dev/mst/mt4129_pciconf0
  Base GUID:        b83fd20300a1b2c4
  Versions:         Current        Available
     FW             {fw0}     N/A
     PXE            3.7.0201       N/A
     UEFI           14.30.0013     N/A

  Status:           No matching image found

Device #2:
----------

  Device Type:      ConnectX7
  Part Number:      MCX75310AAS-NEA_Ax
  Description:      NVIDIA ConnectX-7 HHHL Adapter Card; 400Gb/s NDR IB; Single-port OSFP; PCIe 5.0 x16
  PSID:             MT_0000000838
  PCI Device Name:  /dev/mst/mt4129_pciconf1
  Base GUID:        b83fd20300a1b2d4
  Versions:         Current        Available
     FW             {fw1}     N/A
     PXE            3.7.0201       N/A

  Status:           No matching image found

Device #3:
----------

  Device Type:      BlueField2
  Part Number:      MBF2M516C-CECO_Ax
  Description:      BlueField-2 P-Series DPU 100GbE Dual-Port QSFP56
  PSID:             MT_0000000561
  PCI Device Name:  /dev/mst/mt41686_pciconf0
  Versions:         Current        Available
     FW             24.38.1402     N/A

  Status:           No matching image found
"""

NVFWUPD_JSON = {"Connection Status": "Successful", "System Model": "HGX H100", "Firmware Devices": [
    {"AP Name": "HGX_FW_GPU_SXM_%d" % i, "Sys Version": "{gpu}", "Pkg Version": "N/A", "Up-To-Date": "No"}
    for i in range(1, 9)] + [{"AP Name": "HGX_FW_BMC_0", "Sys Version": "24.01.05", "Pkg Version": "N/A",
                              "Up-To-Date": "No"}]}


def _fake(bindir, name, body):
    path = bindir / name
    path.write_text("#!%s\n%s" % (sys.executable, textwrap.dedent(body)))
    path.chmod(0o755)


@pytest.fixture
def tools(tmp_path, monkeypatch):
    bindir = tmp_path / "bin"
    bindir.mkdir()
    state = tmp_path / "state.json"
    state.write_text(json.dumps({"fw0": "28.36.1010", "fw1": "28.37.10.14", "gpu": "96.00.5E.00.01",
                                 "nvme": "GDC5302Q", "stuck": False}))
    header = "import json, sys\nSTATE = %r\ns = json.load(open(STATE))\nargv = sys.argv[1:]\n" % str(state)
    _fake(bindir, "mlxfwmanager", header + textwrap.dedent("""
        if "--query" in argv:
            print(%r.format(**s))
        elif "-u" in argv:
            dev = argv[argv.index("-d") + 1]
            img = argv[argv.index("-i") + 1]
            key = "fw0" if dev.endswith("pciconf0") else "fw1"
            if not s["stuck"]:
                s[key] = open(img).read().split(":")[-1]
            json.dump(s, open(STATE, "w"))
            print("Device #1: Updating FW ...\\nDone")
        """ % MLX_QUERY))
    _fake(bindir, "nvfwupd", header + textwrap.dedent("""
        if "show_version" in argv:
            print(%r.replace("{gpu}", s["gpu"]))
        elif "update_fw" in argv:
            if not s["stuck"]:
                s["gpu"] = open(argv[argv.index("-p") + 1]).read().split(":")[-1]
            json.dump(s, open(STATE, "w"))
            print("FW update started, Task Id: HGX_9")
        """ % json.dumps(NVFWUPD_JSON, indent=4)))
    _fake(bindir, "nvme", header + textwrap.dedent("""
        if argv[:1] == ["list"]:
            print(json.dumps({"Devices": [{"NameSpace": 1, "DevicePath": "/dev/nvme%dn1" % i, "Firmware": s["nvme"],
                   "Index": i, "ModelNumber": "SAMSUNG MZQL27T6HBLA-00A07", "SerialNumber": "S6CKNE0W%03d" % i,
                   "UsedBytes": 0, "MaximumLBA": 15002931888, "PhysicalSize": 7681501126656, "SectorSize": 512}
                   for i in range(2)]}, indent=2))
        elif argv[:1] == ["fw-download"]:
            s["staged"] = open(argv[2].split("=", 1)[1]).read().split(":")[-1]
            json.dump(s, open(STATE, "w"))
            print("Firmware download success")
        elif argv[:1] == ["fw-commit"]:
            if not s["stuck"]:
                s["nvme"] = s["staged"]
            json.dump(s, open(STATE, "w"))
            print("Success committing firmware action:3 slot:2")
            print("Multiple Update Detected (MUD) Value: 0")
        elif argv[:1] == ["fw-log"]:
            v = s["nvme"]
            print("Firmware Log for device:%s" % argv[1].rsplit("/", 1)[-1])
            print("afi  : 0x2")
            print("frs1 : 0x%s (GDC5302Q)" % "GDC5302Q"[::-1].encode().hex())
            print("frs2 : 0x%s (%s)" % (v[::-1].encode().hex(), v))
        """))
    monkeypatch.setenv("PATH", "%s:%s" % (bindir, os.environ.get("PATH", "")))
    images = tmp_path / "images"
    images.mkdir()
    return {"state": state, "images": images, "bindir": bindir}


def _step(images, check, component, kind, method, target, accepted, match, name):
    data = ("symphony-demo-image:hgx_h100_supermicro:%s:%s" % (component, target)).encode()
    (images / name).write_bytes(data)
    return {"check": check, "component": component, "kind": kind, "method": method, "target": target,
            "accepted": accepted, "activation": "host_reset", "match": match,
            "image": {"uri": "https://firmware.example.internal/x/%s" % name,
                      "sha256": hashlib.sha256(data).hexdigest()}}


def test_parsers_on_documented_formats():
    devices = parse_mlxfwmanager_query(MLX_QUERY.format(fw0="28.36.1010", fw1="28.37.10.14"))
    assert [(d["type"], d["device"], d["fw"]) for d in devices] == [
        ("ConnectX7", "/dev/mst/mt4129_pciconf0", "28.36.1010"), ("ConnectX7", "/dev/mst/mt4129_pciconf1",
                                                                  "28.37.10.14"),
        ("BlueField2", "/dev/mst/mt41686_pciconf0", "24.38.1402")]
    assert devices[0]["psid"] == "MT_0000000838" and devices[0]["status"] == "No matching image found"
    table = """System Model: DGXH100
Firmware Devices:
AP Name                        Sys Version                    Pkg Version                  Up-To-Date
-------                        -----------                    -----------                  ----------
CPLDMB_0                       0.2.1.6                        0.2.1.6                        Yes
EROT_BIOS_0                    00.04.0011.0000_n00            00.04.0018.0000_n00            No
"""
    assert parse_nvfwupd_show_version(table) == {"CPLDMB_0": "0.2.1.6", "EROT_BIOS_0": "00.04.0011.0000_n00"}
    assert parse_nvme_fw_log("Firmware Log for device:nvme0n1\nafi  : 0x1\nfrs1 : 0x3532504431564456 "
                             "(VDV1DP25)\nfrs2 : 0x3532504431564456 (VDV1DP25)\n")["running"] == "VDV1DP25"
    assert parse_nvme_fw_log("Firmware Log for device:nvme0n1\nafi  : 0x1\nfrs1 : 5B2QGXA7\n")["running"] == "5B2QGXA7"
    assert parse_flint_query("Image type:            FS4\nFW Version:            28.37.1014\n") == "28.37.1014"
    assert parse_nvme_list('{"Devices": [{"Subsystems": [{"Controllers": [{"Controller": "nvme0", '
                           '"ModelNumber": "M", "Firmware": "F1"}]}]}]}') == [
        {"device": "/dev/nvme0", "model": "M", "firmware": "F1"}]
    with pytest.raises(ParseError, match="no 'Device #N:' block"):
        parse_mlxfwmanager_query("Querying Mellanox devices firmware ...\n-E- No devices found\n")
    with pytest.raises(ParseError, match="Firmware Devices"):
        parse_nvfwupd_show_version('{"Connection Status": "Failed"}')


def _gpu_nic_nvme(img, nvme_target="GDC5602Q"):
    return [
        _step(img, "firmware:gpu", "gpu", "gpu", "nvfwupd", "96.00.61.00.01", ["96.00.61.00.01"],
              {"id": "GPU[1-8]|HGX_FW_GPU_SXM_[1-8]", "count": 16}, "96.00.61.00.01.bin"),
        _step(img, "firmware:nic_cx7", "nic_cx7", "nic", "mlxfwmanager", "28.37.10.14", ["28.37.10.14"],
              {"id": "NIC[1-8]", "count": 2}, "28.37.10.14.bin"),
        _step(img, "firmware:nvme", "nvme", "nvme", "nvme_cli", nvme_target, [nvme_target],
              {"id": "NVMe.*", "count": 2}, nvme_target + ".bin")]


def test_update_then_verify_with_fresh_queries(tools):
    img = tools["images"]
    steps = _gpu_nic_nvme(img)
    out = run_inband(steps, str(img))
    assert out["firmware:gpu"]["status"] == "pass"
    assert out["firmware:gpu"]["observed"] == {"HGX_FW_GPU_SXM_%d" % i: "96.00.61.00.01" for i in range(1, 9)}
    assert out["firmware:nic_cx7"]["reason"] == "2 adapters at 28.37.10.14 (mlxfwmanager)"
    assert out["firmware:nvme"]["observed"] == {"/dev/nvme0n1": "GDC5602Q", "/dev/nvme1n1": "GDC5602Q"}
    # second run: everything already at the accepted version, nothing flashed
    again = run_inband(steps, str(img))
    assert again["firmware:nic_cx7"]["reason"] == "at accepted version (mlxfwmanager)"


def test_tool_says_success_but_version_unchanged_fails(tools):
    state = json.loads(tools["state"].read_text())
    state["stuck"] = True
    tools["state"].write_text(json.dumps(state))
    img = tools["images"]
    steps = [_step(img, "firmware:nic_cx7", "nic_cx7", "nic", "mlxfwmanager", "28.37.10.14", ["28.37.10.14"],
                   {"id": "NIC[1-8]", "count": 2}, "28.37.10.14.bin"),
             _step(img, "firmware:nvme", "nvme", "nvme", "nvme_cli", "GDC5602Q", ["GDC5602Q"], {"count": 2},
                   "GDC5602Q.bin")]
    out = run_inband(steps, str(img))
    assert out["firmware:nic_cx7"]["status"] == "fail"
    assert out["firmware:nic_cx7"]["reason"] == (
        "after mlxfwmanager (exit 0) the adapters report /dev/mst/mt4129_pciconf0=28.36.1010, "
        "/dev/mst/mt4129_pciconf1=28.37.10.14, expected 28.37.10.14")
    assert out["firmware:nvme"] == {"status": "blocked", "reason": "blocked by firmware:nic_cx7 (fail)"}


def test_sha256_mismatch_and_absent_tool(tools, monkeypatch):
    img = tools["images"]
    step = _step(img, "firmware:nvme", "nvme", "nvme", "nvme_cli", "GDC5602Q", ["GDC5602Q"], {"count": 2},
                 "GDC5602Q.bin")
    (img / "GDC5602Q.bin").write_bytes(b"tampered")
    out = run_inband([step], str(img))
    assert out["firmware:nvme"]["status"] == "fail"
    assert "differs from the manifest's %s; not flashed" % step["image"]["sha256"] in out["firmware:nvme"]["reason"]
    assert json.loads(tools["state"].read_text())["nvme"] == "GDC5302Q"
    monkeypatch.setenv("PATH", "/nonexistent")
    out = run_inband([step], str(img))
    assert out["firmware:nvme"] == {
        "status": "not_run", "reason": "nvme not found on PATH; the runtime lacks the vendor tool for nvme",
        "observed": None, "expected": None, "remediation": "", "evidence": {}}


def test_check_mode_plans_from_the_tools_versions_and_flashes_nothing(tools):
    """Check mode reads each tool's versions: what is at an accepted version passes, the rest is planned."""
    steps = _gpu_nic_nvme(tools["images"], nvme_target="GDC5302Q")  # the drives already run GDC5302Q
    before = tools["state"].read_text()
    plan = plan_inband(steps)
    gpu = plan["firmware:gpu"]
    assert gpu["status"] == "not_run" and gpu["expected"] == "96.00.61.00.01"
    assert gpu["plan"] == {"HGX_FW_GPU_SXM_%d" % i: {"from": "96.00.5E.00.01", "to": "96.00.61.00.01"}
                           for i in range(1, 9)}
    assert gpu["reason"].startswith("check mode: would update HGX_FW_GPU_SXM_1=96.00.5E.00.01, ")
    # only the adapter that is not at an accepted version would be flashed
    nic = plan["firmware:nic_cx7"]
    assert nic["plan"] == {"/dev/mst/mt4129_pciconf0": {"from": "28.36.1010", "to": "28.37.10.14"}}
    assert nic["reason"] == ("check mode: would update /dev/mst/mt4129_pciconf0=28.36.1010 to 28.37.10.14 "
                             "(mlxfwmanager)")
    assert nic["observed"] == {"/dev/mst/mt4129_pciconf0": "28.36.1010", "/dev/mst/mt4129_pciconf1": "28.37.10.14"}
    # a planned step does not block the next; a step already accepted is the pass a run would record
    assert plan["firmware:nvme"]["status"] == "pass" and "plan" not in plan["firmware:nvme"]
    assert plan["firmware:nvme"]["reason"] == "at accepted version (nvme-cli)"
    assert tools["state"].read_text() == before


def test_check_mode_blocks_after_a_step_a_run_would_fail(tools, monkeypatch):
    img = tools["images"]
    steps = [_step(img, "firmware:nic_cx7", "nic_cx7", "nic", "mlxfwmanager", "28.37.10.14", ["28.37.10.14"],
                   {"count": 3}, "28.37.10.14.bin"),
             _step(img, "firmware:nvme", "nvme", "nvme", "nvme_cli", "GDC5602Q", ["GDC5602Q"], {"count": 2},
                   "GDC5602Q.bin")]
    plan = plan_inband(steps)
    assert plan["firmware:nic_cx7"]["status"] == "fail"
    assert plan["firmware:nic_cx7"]["reason"] == "mlxfwmanager sees 2 nic devices, the manifest expects 3"
    assert plan["firmware:nvme"] == {"status": "blocked", "reason": "blocked by firmware:nic_cx7 (fail)"}
    monkeypatch.setenv("PATH", "/nonexistent")
    assert plan_inband(steps[1:])["firmware:nvme"]["status"] == "not_run"
