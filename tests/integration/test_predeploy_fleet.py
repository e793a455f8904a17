"""pre_deployment against the Redfish fleet emulator: per-node faults stay per node, and no password leaks.

Serves three nodes of the molecule scenario's twin (clean, wrong credentials, 5xx) with the emulator's
Python API, runs the stage engine (the twin_audit module's code), then greps the returned data, the ledger
files and the dispatch list for every BMC password of the emulator's map.
"""

import json

from ansible_collections.symphony.cluster.plugins.module_utils._predeploy.stage import StageSettings, run_stage
from ansible_collections.symphony.cluster.plugins.module_utils._core.sku import load_skus

from emulated_fleet import ROOT, scenario_fleet

HOSTS = ["pd-u02", "pd-u22", "pd-u30"]


def test_stage_isolates_faulty_bmcs_and_never_leaks_passwords(tmp_path):
    skus = load_skus(str(ROOT / "skus"))
    with scenario_fleet(tmp_path, HOSTS, skus) as (twin, bmc_map):
        settings = StageSettings(bmc_map=str(bmc_map), optional=("lease_captured", "address_reserved"), retries=1,
                                 ledger=str(tmp_path / "ledger.sqlite"), dispatch_dir=str(tmp_path / "dispatch"))
        out = run_stage({h: twin.nodes[h] for h in HOSTS}, skus, settings)
    # pd-u30 answers 500 to every request: a fault that outlives the retries is blocked, not a fail (issue 25)
    assert out["summary"] == {"pass": 1, "fail": 1, "blocked": 1}
    # $expand (MaxLevels 2) and the cache: 18 requests for a clean Supermicro HGX BMC (157 member by member)
    assert out["hosts"]["pd-u02"]["gate"] == "pass" and out["hosts"]["pd-u02"]["requests"] == 18
    assert out["hosts"]["pd-u22"]["failing"] == ["login"]
    assert "HTTP 401" in out["hosts"]["pd-u22"]["reason"]
    assert out["hosts"]["pd-u30"]["failing"][0] == "service_root"   # then every check it blocks
    assert out["hosts"]["pd-u30"]["reason"].startswith("service_root: BMC unreachable") and \
        "HTTP 500" in out["hosts"]["pd-u30"]["reason"]
    assert [r["hostname"] for r in out["dispatch"]["items"]] == ["pd-u22", "pd-u30"]
    passwords = [n["password"] for n in json.loads(bmc_map.read_text())["nodes"].values()]
    assert len(passwords) == 3 and all(len(p) >= 12 for p in passwords)
    blobs = [json.dumps(out).encode()]
    blobs += [p.read_bytes() for p in tmp_path.glob("ledger.sqlite*")]
    blobs += [p.read_bytes() for p in (tmp_path / "dispatch").iterdir()]
    assert len(blobs) >= 6
    for password in passwords:
        assert not any(password.encode() in blob for blob in blobs)
