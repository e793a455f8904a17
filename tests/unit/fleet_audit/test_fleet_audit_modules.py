"""The fleet_audit modules: documentation that parses and documents exactly the argument spec; the module glue."""

import importlib

import pytest
import yaml

from ansible_collections.symphony.cluster.plugins.module_utils._core.ledger import open_ledger

PKG = "ansible_collections.symphony.cluster.plugins.modules."
NAMES = ["fleet_audit_active", "fleet_audit_exercise", "fleet_audit_node", "fleet_audit_state"]
MODULES = {name: importlib.import_module(PKG + name) for name in NAMES + ["fleet_audit_bmc"]}


@pytest.mark.parametrize("name", NAMES)
def test_documentation_parses_and_matches_the_argument_spec(name):
    module = MODULES[name]
    doc = yaml.safe_load(module.DOCUMENTATION)
    for text in [module.EXAMPLES, module.RETURN]:
        assert yaml.safe_load(text)
    documented = dict(doc.get("options") or {})
    if "symphony.cluster.ledger" in doc.get("extends_documentation_fragment", []):
        documented["ledger"] = {}
    assert sorted(documented) == sorted(module.ARGUMENT_SPEC)
    for option, spec in module.ARGUMENT_SPEC.items():
        if option in doc.get("options", {}):
            assert doc["options"][option].get("type", "str") == spec.get("type", "str"), option
            assert doc["options"][option].get("default") == spec.get("default"), option


def test_the_bmc_module_documents_its_description():
    assert yaml.safe_load(MODULES["fleet_audit_bmc"].DOCUMENTATION)["module"] == "fleet_audit_bmc"


def test_exercise_module_injects_in_the_lab_and_records_it(tmp_path):
    source = tmp_path / "lab2.kmsg"
    ledger = str(tmp_path / "ledger.sqlite")
    params = {"ledger": ledger, "action": "inject_lab", "node": "lab2", "kernel_log_source": str(source),
              "xid": 79, "gpu": 0, "slurm_conf": None, "injection": None}
    assert MODULES["fleet_audit_exercise"]._run(dict(params), True) == {"changed": True, "event": {}}
    assert not source.exists()
    out = MODULES["fleet_audit_exercise"]._run(dict(params), False)
    assert out["changed"] and "Xid (PCI:0000:3b:00): 79" in source.read_text()
    (event,) = open_ledger(ledger).events("lab2", "fault_injected")
    assert event["data"]["injected"] is True and event["data"]["message"] == out["event"]["message"]
    timings = MODULES["fleet_audit_exercise"]._run(dict(params, action="timings"), False)["timings"]
    assert timings["missing"] == ["detect", "drain", "replace", "return"]
