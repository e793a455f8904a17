"""Every module through its argument spec: one invalid option each, and the shape ``run_module`` gives them all.

The minimal arguments below are each module's required options; when a module's spec gains a required option
or loses one of these, its row fails here (argspec drift), not first in molecule.
"""

import ast
import importlib
import pathlib

import pytest

PKG = "ansible_collections.symphony.cluster.plugins.modules."
MODULES_DIR = pathlib.Path(__file__).resolve().parents[3] / "plugins" / "modules"
BMC = {"bmc_url": "https://bmc.invalid", "username": "admin", "password": "x"}

MINIMAL = {
    "bios_settings": dict(BMC, attributes={"A": "B"}),
    "bmc_discover": {"lease_file": "/nonexistent", "nodes": []},
    "bmc_sel_scan": {"mode": "check", "hosts": []},
    "burnin_fleet": {"node": "n1", "sku": "s", "checks": []},
    "burnin_run": {"node": "n1", "manifest": {}},
    "cluster_validate": {"nodes": ["n1"], "script": "/x", "log_dir": "/x", "targets": [], "dest": "/x"},
    "fabric_test": {"nodes": ["n1"]},
    "firmware_plan": {"sku_dir": "/x", "nodes": []},
    "firmware_reconcile": {"sku_dir": "/x", "nodes": []},
    "fleet_audit_active": {"node": "n1", "partition": "audit", "work_dir": "/x"},
    "fleet_audit_bmc": {"sku_dir": "/x", "nodes": []},
    "fleet_audit_exercise": {"action": "timings", "node": "n1"},
    "fleet_audit_node": {"manifest": {}},
    "fleet_audit_state": {"hosts": []},
    "gate_info": {},
    "gate_record": {"node": "n1", "stage": "burn_in", "checks": [{"name": "c", "status": "pass"}]},
    "gpu_tunings": {},
    "handoff_report": {"dest": "/x"},
    "inband_firmware": {"steps": []},
    "ledger_migrate": {"source": "/nonexistent.sqlite", "target": "/nonexistent-target.sqlite"},
    "mfu_calc": {"tokens_per_s_per_device": 1.0},
    "nccl_sweep": {"nodes": ["n1"]},
    "node_evict": {"node": "n1", "reason": "r"},
    "redfish_inventory_info": dict(BMC),
    "telemetry_outliers": {},
    "training_launch": {},
    "training_manifest": {"name": "j", "image": "i", "nodes": 1, "program": "p"},
    "twin_audit": {"sku_dir": "/x", "nodes": []},
}


# Imported at collection time: a test elsewhere may install Ansible's collection finder, which cannot load them later.
MODULES = {name: importlib.import_module(PKG + name) for name in MINIMAL}


def test_every_module_has_a_row():
    assert sorted(MINIMAL) == sorted(p.stem for p in MODULES_DIR.glob("*.py"))


@pytest.mark.parametrize("name", sorted(MINIMAL))
def test_unknown_option_fails_in_the_argument_spec(run_main, name):
    ok, res = run_main(MODULES[name], dict(MINIMAL[name], no_such_option=1))
    assert not ok and res["failed"] is True
    assert res["msg"].startswith("Unsupported parameters") and "no_such_option" in res["msg"], res["msg"]


@pytest.mark.parametrize("name", sorted(MINIMAL))
def test_main_hands_its_work_to_run_module(name):
    """No module ends itself: ``main()`` builds the AnsibleModule and calls ``run_module``; nothing calls
    ``exit_json``/``fail_json`` directly."""
    tree = ast.parse((MODULES_DIR / (name + ".py")).read_text())
    calls = [n.func for n in ast.walk(tree) if isinstance(n, ast.Call)]
    attrs = {c.attr for c in calls if isinstance(c, ast.Attribute)}
    assert not attrs & {"exit_json", "fail_json"}
    main = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "main")
    build, hand_over = main.body
    assert isinstance(build, ast.Assign) and build.value.func.id == "AnsibleModule"
    assert isinstance(hand_over, ast.Expr) and hand_over.value.func.id == "run_module"
