"""pre_deployment on an emulated blade chassis (issue 15): one BMC serves two nodes, each is judged on its own.

The emulator's fleet serves the two twin nodes of skus/blade_h100_2node.yml (same U, serial, BMC MAC and address,
bmc_system_id Node0 / Node1); Node1 has a GPU missing.  The stage engine must pass Node0 and fail Node1 on
``gpus`` alone, never count the BMC's 8 GPUs for either node.
"""

import pathlib

import pytest
import yaml

from ansible_collections.symphony.cluster.plugins.module_utils._core.sku import load_skus
from ansible_collections.symphony.cluster.plugins.module_utils._predeploy.stage import StageSettings, run_stage

symphony_emulator = pytest.importorskip("symphony_emulator.fleet")

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _twin(tmp_path):
    blade = {"u": 5, "sku": "blade_h100_2node", "serial": "ENC-0001", "bmc_mac": "aa:bb:cc:00:05:01"}
    doc = {"twin_version": 1, "sku_dir": str(ROOT / "skus"), "sites": [{"name": "s1", "racks": [{
        "name": "r01", "bmc_subnet": "10.10.1.0/24", "bmc_first_host": 10, "nodes": [
            dict(blade, hostname="blade-n0", bmc_system_id="Node0"),
            dict(blade, hostname="blade-n1", bmc_system_id="Node1")]}]}]}
    path = tmp_path / "blade.twin.yml"
    path.write_text(yaml.safe_dump(doc))
    defects = tmp_path / "defects.yml"
    defects.write_text(yaml.safe_dump({"defects": {"blade-n1": [{"kind": "missing_gpu", "index": 2}]}}))
    return path, defects


def test_each_node_behind_one_bmc_is_judged_on_its_own(tmp_path):
    skus = load_skus(str(ROOT / "skus"))
    twin_path, defects = _twin(tmp_path)
    twin = symphony_emulator.load_twin(str(twin_path), skus.keys())
    bmc_map = tmp_path / "bmcs.json"
    with symphony_emulator.Fleet(twin, str(ROOT / "skus"), defects=str(defects), map_path=str(bmc_map),
                                 state_dir=str(tmp_path / "emu")):
        settings = StageSettings(bmc_map=str(bmc_map), optional=("lease_captured", "address_reserved"), retries=1)
        out = run_stage(dict(twin.nodes), skus, settings, return_details=True)
    assert out["hosts"]["blade-n0"]["gate"] == "pass", out["hosts"]["blade-n0"]["reason"]
    assert out["hosts"]["blade-n1"]["failing"] == ["gpus"]
    gpus = next(c for c in out["hosts"]["blade-n1"]["checks"] if c["check"] == "gpus")
    assert gpus["reason"].startswith("expected 4 × H100 80GB HBM3, found 3")
