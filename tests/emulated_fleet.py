"""The molecule pre_deployment scenario's nodes served by the Redfish fleet emulator in this process (HTTPS on free
ports), with the scenario's defects and faults: what the stage tests run the engine against."""

import contextlib
import pathlib

from symphony_emulator import fleet as emulator_fleet

ROOT = pathlib.Path(__file__).resolve().parents[1]
SCENARIO = ROOT / "molecule" / "pre_deployment" / "data"


@contextlib.contextmanager
def scenario_fleet(tmp_path, hosts, skus):
    """Serve ``hosts`` of the scenario twin; yields ``(twin, bmc_map path)`` while the BMCs answer."""
    twin = emulator_fleet.load_twin(str(SCENARIO / "pre_deployment.twin.yml"), skus.keys())
    bmc_map = tmp_path / "bmcs.json"
    with emulator_fleet.Fleet(twin, str(ROOT / "skus"), defects=str(SCENARIO / "defects.yml"),
                              faults=str(SCENARIO / "faults.yml"), hosts=hosts, map_path=str(bmc_map),
                              state_dir=str(tmp_path / "emu")):
        yield twin, bmc_map
