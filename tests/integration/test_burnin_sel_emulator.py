"""Burn-in's BMC SEL scan against the Redfish fleet emulator over HTTPS (its generated CA, its map file).

Three demo-twin nodes: the first carries a ``sel_critical`` defect (a Critical entry seeded before burn-in,
which must not fail it), the second gets a Critical entry written while "burn-in" runs, the third has the
``bmc_unreachable`` defect (connection refused: ``not_run``, never ``pass``).
"""

import pathlib
import re

from ansible_collections.symphony.cluster.plugins.module_utils._burnin.sel_scan import sel_scan

from symphony_emulator import Fleet
from symphony_emulator.fleet import load_twin

ROOT = pathlib.Path(__file__).resolve().parents[2]
DEMO_TWIN = ROOT / "inventories" / "demo" / "demo.twin.yml"


def test_sel_scan_on_the_emulated_fleet(tmp_path):
    hosts = sorted(load_twin(str(DEMO_TWIN)).nodes)[:3]
    defects = {hosts[0]: [{"kind": "sel_critical", "message": "PCIe fatal error on GPU3"}],
               hosts[2]: [{"kind": "bmc_unreachable"}]}
    with Fleet(DEMO_TWIN, defects=defects, hosts=hosts) as fleet:
        bmc_map = fleet.write_map(str(tmp_path / "bmcs.json"))
        params = {"hosts": hosts, "bmc_map": bmc_map, "retries": 0, "connect_timeout": 2, "read_timeout": 10}
        marked = sel_scan(dict(params, mode="mark"))["marks"]
        sel = "/redfish/v1/Managers/1/LogServices/SEL"
        assert marked[hosts[0]]["logs"][sel]["last_id"] == 3   # cleared, ACPI S0, the seeded Critical entry
        assert marked[hosts[0]]["logs"][sel]["last_message"] == "PCIe fatal error on GPU3"
        assert marked[hosts[1]]["logs"][sel]["last_id"] == 2
        assert "Connection refused" in marked[hosts[2]]["error"]
        # During burn-in the second node's BMC logs a Critical GPU temperature event.
        bmc = fleet.bmc(hosts[1])
        fleet.call(lambda: bmc._add_sel("Critical", "GPU5 temperature above upper critical", "Temperature"))
        checked = sel_scan(dict(params, mode="check", marks=marked))
    checks = checked["checks"]
    assert checks[hosts[0]]["status"] == "pass"
    assert checks[hosts[0]]["reason"] == "SEL: no Critical or Warning entries during burn-in (0 new entries)"
    assert checks[hosts[1]]["status"] == "fail"
    assert re.fullmatch(r"SEL: 1 Critical entry during burn-in: 'GPU5 temperature above upper critical' at "
                        r"20\d\d-\d\d-\d\dT\d\d:\d\d:\d\d(Z|\+00:00)", checks[hosts[1]]["reason"]), checks[hosts[1]]["reason"]
    assert checks[hosts[2]]["status"] == "not_run"
    assert checks[hosts[2]]["reason"].startswith("BMC SEL not read before burn-in: RedfishConnectionError at https://")
    assert checked["summary"] == {"pass": 1, "fail": 1, "not_run": 1} and checked["failed_hosts"] == [hosts[1]]
