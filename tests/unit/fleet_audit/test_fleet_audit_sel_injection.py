"""The exercise's SEL injection through the emulator (POST /_emulator/sel), end to end in-process: the fleet audit's
SEL mark, the injection recorded in the ledger, the next SEL check finding a new Critical entry marked injected, and
the fleet_audit gate failing for that node only.  The emulator serves over TLS on loopback with its generated CA,
as make demo runs it."""

import json
import pathlib

import pytest

from ansible_collections.symphony.cluster.plugins.module_utils._burnin.sel_scan import sel_scan
from ansible_collections.symphony.cluster.plugins.module_utils._core import gate_ops as _gate_ops
from ansible_collections.symphony.cluster.plugins.module_utils._core.errors import RedfishError, ValidationError
from ansible_collections.symphony.cluster.plugins.module_utils._core.ledger import open_ledger
from ansible_collections.symphony.cluster.plugins.module_utils._fleet_audit import exercise as _exercise
from ansible_collections.symphony.cluster.plugins.module_utils._fleet_audit import state as _state

from symphony_emulator import Fleet
from symphony_emulator.fleet import load_twin

ROOT = pathlib.Path(__file__).resolve().parents[3]
DEMO_TWIN = ROOT / "inventories" / "demo" / "demo.twin.yml"
WINDOW = "since the previous audit"


@pytest.fixture(scope="module")
def hosts():
    return sorted(load_twin(str(DEMO_TWIN)).nodes)[:3]


@pytest.fixture(scope="module")
def fleet(hosts, tmp_path_factory):
    with Fleet(DEMO_TWIN, hosts=hosts) as running:
        running.write_map(str(tmp_path_factory.mktemp("emulator") / "bmcs.json"))
        yield running


@pytest.fixture(scope="module")
def bmc_map(fleet, tmp_path_factory):
    return fleet.write_map(str(tmp_path_factory.mktemp("map") / "bmcs.json"))


def _scan(mode, hosts, bmc_map, **extra):
    return sel_scan(dict({"mode": mode, "hosts": hosts, "bmc_map": bmc_map, "workers": 4, "processes": 1,
                          "connect_timeout": 10, "read_timeout": 10, "retries": 1}, **extra))


def test_the_control_endpoint_and_the_fleet_method_mark_the_entry_injected(fleet, hosts, bmc_map):
    before = fleet.state(hosts[2])["sel_entries"]
    entry = fleet.inject_sel(hosts[2], "Power Supply PS2: Failure detected - Asserted", sensor_type="Power Supply")
    assert entry["Severity"] == "Critical" and entry["Oem"] == {"Symphony": {"Injected": True}}
    assert fleet.state(hosts[2])["sel_entries"] == before + 1
    url = json.loads(pathlib.Path(bmc_map).read_text())["nodes"][hosts[2]]["url"]
    ca = json.loads(pathlib.Path(bmc_map).read_text())["ca_bundle"]
    with pytest.raises(ValidationError, match="severity"):
        _exercise.inject_sel(url, "x", severity="Fatal", ca_path=ca)
    data = _exercise.inject_sel(url, "Memory ECC: uncorrectable on DIMM B3 - Asserted", severity="Warning",
                                sensor_type="Memory", ca_path=ca)
    assert data["kind"] == "sel" and data["injected"] is True and data["severity"] == "Warning"
    assert data["entry_id"] == str(before + 2) and data["bmc"] == url
    with pytest.raises(RedfishError, match="answered 401: .*only the symphony emulator"):
        _exercise.inject_sel(url + "/nothing", "x", ca_path=ca)


def test_the_bmc_answers_400_for_a_bad_body(fleet, hosts):
    reply = fleet.call(lambda: fleet.bmc(hosts[2]).handle("POST", "/_emulator/sel", "", {}, b'{"severity": "Bad"}'))
    assert reply.status == 400


def test_injected_sel_entry_fails_that_node_only_marked_injected(fleet, hosts, bmc_map, ledger_path):
    marks = _scan("mark", hosts, bmc_map)["marks"]
    assert all("error" not in m for m in marks.values()), marks
    led = open_ledger(ledger_path)
    try:
        for host in hosts:   # the previous audit: its SEL marks, kept in the ledger
            led.record_event(host, _state.SEL_MARK, marks[host])
    finally:
        led.close()

    victim = hosts[1]
    url = json.loads(pathlib.Path(bmc_map).read_text())["nodes"][victim]["url"]
    ca = json.loads(pathlib.Path(bmc_map).read_text())["ca_bundle"]
    injection = _exercise.inject_sel(url, ca_path=ca)
    _state.exercise_module({"ledger": ledger_path, "node": victim, "action": "record_injection",
                            "injection": injection}, False)

    led = open_ledger(ledger_path)
    try:
        state = {host: _state.node_state(led, host) for host in hosts}
        events = led.events(victim, "fault_injected")
    finally:
        led.close()
    assert events[-1]["data"]["kind"] == "sel" and events[-1]["data"]["injected"] is True
    assert state[victim]["injected"] == [_exercise.DEFAULT_SEL_MESSAGE]

    checks = _scan("check", hosts, bmc_map, window=WINDOW,
                   marks={h: state[h]["sel_mark"] for h in hosts},
                   injected={h: state[h]["injected"] for h in hosts})["checks"]
    gates = {}
    for host in hosts:
        check = dict(checks[host], name="bmc_sel")
        gates[host] = _gate_ops.gate_record({"ledger": ledger_path, "node": host, "stage": "fleet_audit",
                                             "checks": [check], "optional": [], "waive": []}, False)["gate"]
    sel = checks[victim]
    assert sel["status"] == "fail", sel
    assert sel["reason"] == "SEL: 1 Critical entry since the previous audit: '%s' at %s [injected]" % (
        _exercise.DEFAULT_SEL_MESSAGE, injection["created"])
    assert sel["observed"]["injected"] is True and sel["observed"]["critical"] == 1
    assert sel["observed"]["entries"][0]["injected"] is True
    assert gates[victim]["status"] == "fail" and "[injected]" in gates[victim]["reason"]
    for host in hosts:
        if host != victim:
            assert checks[host]["status"] == "pass", checks[host]
            assert not checks[host]["observed"].get("injected")
            assert gates[host]["status"] == "pass"
