"""A generated BMC (demo SKU, with seeded defects) passes the DMTF Redfish Service Validator with zero
errors, offline against the CSDL in ../shared/reference/redfish-csdl."""

import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

from symphony_emulator import Fleet
from timescale import scaled

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_generated_bmc_passes_the_dmtf_service_validator(shared, tmp_path):
    validator = shutil.which("rf_service_validator", path=os.path.dirname(sys.executable) + os.pathsep
                             + os.environ.get("PATH", ""))
    if validator is None:
        pytest.skip("rf_service_validator (PyPI redfish-service-validator) is not installed")
    from symphony_emulator.fleet import load_twin
    twin = ROOT / "inventories" / "demo" / "demo.twin.yml"
    host = sorted(load_twin(str(twin)).nodes)[0]
    defects = {host: [{"kind": "missing_gpu", "index": 2}, {"kind": "pcie_downtrain", "index": 3, "width": 8, "gen": 4},
                      {"kind": "psu_failed", "index": 1}, {"kind": "fan_failed", "index": 2},
                      {"kind": "sel_critical", "message": "PCIe fatal error on GPU3"},
                      {"kind": "gpu_hot", "index": 4, "temp_c": 95}, {"kind": "missing_dimm", "index": 3}]}
    with Fleet(twin, http=True, hosts=[host], defects=defects) as fleet:
        node = fleet.nodes[host]
        run = subprocess.run([validator, "--rhost", node.url,
                              # "=" form: a generated password may start with "-", which argparse reads as an option
                              f"--user={node.username}", f"--password={node.password}",
                              "--authtype", "Session", "--skipschema",
                              "--schema_directory", str(shared / "reference" / "redfish-csdl"),
                              "--logdir", str(tmp_path),
                              # every resource type is validated; repeated members of long collections are
                              # capped (the defected DIMM3, GPU2..4, PSU1 and FAN2 stay inside the caps)
                              "--collectionlimit", "Memory", "4", "Drive", "2", "Sensor", "14",
                              "SoftwareInventory", "8", "Port", "2", "NetworkAdapter", "2"], capture_output=True, text=True, timeout=scaled(600), check=False)
        assert fleet.state(host)["sessions"] == 0      # the validator logged out
    out = re.sub(r"\x1b\[[0-9;]*m", "", run.stdout + run.stderr)
    rows = [line for line in out.splitlines() if re.match(r"^\|\s+\d+\s+\|", line)]
    assert rows, out[-3000:]
    passed, warned, failed, _other = [int(x) for x in re.findall(r"\d+", rows[-1])]
    assert failed == 0, out[-5000:]
    assert passed > 1000
    assert run.returncode == 0
