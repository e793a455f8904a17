"""The fault-injection exercise: timings from the ledger's timestamps, drain and resume through Slurm (fakes)."""

import time

from ansible_collections.symphony.cluster.plugins.module_utils._core.gate import CheckResult, GateVerdict
from ansible_collections.symphony.cluster.plugins.module_utils._core.ledger import open_ledger
from ansible_collections.symphony.cluster.plugins.module_utils._fleet_audit import exercise
from ansible_collections.symphony.cluster.plugins.module_utils._fleet_audit.state import (
    exercise_module, state_module)
from ansible_collections.symphony.cluster.plugins.module_utils._host.parsers.xid import parse_xid_events
from ansible_collections.symphony.cluster.plugins.module_utils._host.slurm import Slurm


class Recorder:
    def __init__(self):
        self.argv = []

    def __call__(self, argv, env=None, timeout=60):
        self.argv.append(argv)
        return 0, "", ""


def test_the_lab_record_is_a_real_kernel_xid_line(tmp_path):
    data = exercise.inject_lab(str(tmp_path / "k.log"), xid=79, pci="0000:3b:00", uptime_s=12.5)
    (event,) = parse_xid_events((tmp_path / "k.log").read_text())
    assert event["xid"] == 79 and event["pci"] == "0000:3b:00" and event["ts_s"] == 12.5
    assert data["injected"] is True and data["method"] == "lab_kernel_log"


def test_the_dcgm_injection_targets_the_xid_field():
    assert exercise.dcgm_inject_argv(3, 79) == ["dcgmi", "test", "--inject", "--gpuid", "3", "-f", "230", "-v", "79"]


def _kernel_row(status, finished, injected):
    return CheckResult("lab1", "fleet_audit", "kernel_log", status, "x", observed={"injected": injected},
                       started=finished, finished=finished, run_id="r%d" % finished)


def test_timings_come_from_the_ledger_and_missing_steps_are_named():
    t0 = 1000.0
    events = [{"node": "lab1", "kind": "fault_injected", "data": {}, "recorded_at": t0},
              {"node": "lab1", "kind": "drain", "data": {}, "recorded_at": t0 + 20},
              {"node": "spare1", "kind": "spare_promoted", "data": {"replaces": "lab1"}, "recorded_at": t0 + 30}]
    rows = [_kernel_row("fail", t0 - 50, False), _kernel_row("fail", t0 + 8, True)]
    out = exercise.timings("lab1", events, rows)
    assert (out["detect_s"], out["drain_s"], out["replace_s"], out["return_s"]) == (8.0, 20.0, 30.0, None)
    assert out["missing"] == ["return"]


def test_resume_needs_a_re_burn_in_after_the_drain(ledger_path):
    fake = Recorder()
    slurm = Slurm(run=fake)
    base = {"ledger": ledger_path, "node": "lab1"}
    exercise_module(dict(base, action="record_injection", injection={"message": "NVRM: Xid ..."}), False)
    ledger = open_ledger(ledger_path)
    try:  # what node_evict records when the audit drains the node
        ledger.record_event("lab1", "drain", {"reason": "symphony fleet_audit [injected fault exercise]: Xid 79"})
    finally:
        ledger.close()
    refused = exercise_module(dict(base, action="resume"), False, slurm)
    assert refused["failed"] and "burn_in gate is absent" in refused["msg"]
    ledger = open_ledger(ledger_path)
    try:
        now = time.time() + 1
        ledger.record_results([CheckResult("lab1", "burn_in", "cpu_stress", "pass", started=now, finished=now,
                                           run_id="rb")])
        ledger.record_gate(GateVerdict("lab1", "burn_in", "pass", "all required checks passed"), "rb")
    finally:
        ledger.close()
    assert exercise_module(dict(base, action="resume"), False, slurm)["changed"] is True
    assert fake.argv[-1] == ["scontrol", "update", "nodename=lab1", "state=RESUME"]
    kinds = [e["kind"] for e in open_ledger(ledger_path).events("lab1")]
    assert kinds == ["fault_injected", "drain", "resume"]


def test_resume_leaves_a_node_symphony_did_not_drain_alone(ledger_path):
    fake = Recorder()
    out = exercise_module({"ledger": ledger_path, "node": "lab1", "action": "resume"}, False, Slurm(run=fake))
    assert out["changed"] is False and not out.get("failed") and fake.argv == []


def test_check_mode_changes_nothing(ledger_path):
    fake = Recorder()
    out = exercise_module({"ledger": ledger_path, "node": "lab1", "action": "record_injection",
                           "injection": {"message": "NVRM: Xid ..."}}, True, Slurm(run=fake))
    assert out["changed"] is False and fake.argv == [] and open_ledger(ledger_path).events("lab1") == []


def test_state_before_an_audit_carries_cursor_injections_and_sel_mark(ledger_path):
    ledger = open_ledger(ledger_path)
    try:
        ledger.record_results([CheckResult("lab1", "fleet_audit", "kernel_log", "fail", "Xid 79",
                                           observed={"cursor": {"boot_id": "b", "seq": 7}, "open": []},
                                           finished=5.0, run_id="a1")])
        ledger.record_event("lab1", "fault_injected", {"message": "NVRM: Xid (PCI:0000:3b:00): 79, ..."})
    finally:
        ledger.close()
    state_module({"ledger": ledger_path, "hosts": ["lab1"], "mode": "mark_sel",
                  "sel_marks": {"lab1": {"marked_at": "x", "logs": {}}}})
    out = state_module({"ledger": ledger_path, "hosts": ["lab1"], "mode": "before"})["hosts"]["lab1"]
    assert out["previous"]["kernel_log"]["cursor"]["seq"] == 7
    assert out["injected"] == ["NVRM: Xid (PCI:0000:3b:00): 79, ..."]
    assert out["sel_mark"] == {"marked_at": "x", "logs": {}} and out["cleared_at"] is None


def test_the_drift_table_says_since_when_and_first_run(ledger_path):
    def row(run, at, found):
        return CheckResult("n1", "fleet_audit", "software_drift", "fail" if found else "pass", "r",
                           evidence={"rows": [{"component": "gpu_driver", "status": "drift" if found else "ok",
                                               "found": found or "535.161.08", "expected": ["535.161.08"]}]},
                           finished=at, run_id=run)
    ledger = open_ledger(ledger_path)
    try:
        ledger.record_results([row("a1", 1.0, "535.54.03"), row("a2", 2.0, None), row("a3", 3.0, "550.54.15"),
                               row("a4", 4.0, "550.54.15")])
    finally:
        ledger.close()
    after = state_module({"ledger": ledger_path, "hosts": ["n1"], "mode": "after"})["hosts"]["n1"]
    (entry,) = after["drift"]
    assert 'symphony_fleet_audit_drift_components{node="n1"} 1.0' in after["metrics"]
    found = (entry["component"], entry["found"], entry["since"], entry["first_run"])
    assert found == ("gpu_driver", "550.54.15", 3.0, "a3")


# ---------------------------------------------------------------- a degraded link (method link)
def test_the_link_injection_is_one_tbf_qdisc_and_its_repair_removes_it():
    assert exercise.link_inject_argv("eth0", 100) == [
        ["tc", "qdisc", "replace", "dev", "eth0", "root", "tbf", "rate", "100mbit", "burst", "64kb", "latency",
         "100ms"]]
    assert exercise.link_clear_argv("eth0") == [["tc", "qdisc", "del", "dev", "eth0", "root"]]
    event = exercise.link_event("eth0", 100, "lab2")
    assert event["kind"] == "link" and event["injected"] is True and "eth0" in event["message"]


def test_a_bad_interface_name_or_rate_is_refused_naming_the_field():
    import pytest
    from ansible_collections.symphony.cluster.plugins.module_utils._core.errors import ValidationError
    for iface, rate, field in (("", 100, "link_interface"), ("eth0; reboot", 100, "link_interface"),
                               ("a" * 16, 100, "link_interface"), ("eth0", 0, "link_rate_mbit")):
        with pytest.raises(ValidationError) as err:
            exercise.link_inject_argv(iface, rate)
        assert err.value.where == field


def test_a_link_injection_stays_open_until_its_repair_is_recorded(ledger_path):
    event = exercise.link_event("eth0", 100, "lab2")
    exercise_module({"ledger": ledger_path, "node": "lab2", "action": "record_injection", "injection": event}, False)
    state = state_module({"ledger": ledger_path, "hosts": ["lab2", "lab1"], "mode": "before"})["hosts"]
    assert state["lab2"]["injected_link"] == event["message"] and state["lab1"]["injected_link"] is None
    exercise_module({"ledger": ledger_path, "node": "lab2", "action": "record_clear",
                     "injection": {"kind": "link", "interface": "eth0", "cleared": True}}, False)
    state = state_module({"ledger": ledger_path, "hosts": ["lab2"], "mode": "before"})["hosts"]
    assert state["lab2"]["injected_link"] is None
    import pytest
    from ansible_collections.symphony.cluster.plugins.module_utils._core.errors import ValidationError
    with pytest.raises(ValidationError):   # only a link is repaired this way
        exercise_module({"ledger": ledger_path, "node": "lab2", "action": "record_clear",
                         "injection": {"kind": "xid"}}, False)


def test_a_link_exercise_is_timed_by_the_fabric_check_not_the_kernel_log(ledger_path):
    led = open_ledger(ledger_path)
    try:
        led.record_event("lab2", "fault_injected", exercise.link_event("eth0", 100, "lab2"))
        t0 = led.events("lab2", "fault_injected")[-1]["recorded_at"]
        # an injected kernel_log fail would not time this exercise; the fabric check's does
        led.record_results([CheckResult("lab2", "fleet_audit", "kernel_log", "fail", "Xid 79 [injected]",
                                        observed={"injected": True}, started=t0 + 1, finished=t0 + 1, run_id="a"),
                            CheckResult("lab2", "fleet_audit", "fabric_interface", "fail", "slow [injected] x",
                                        observed={"injected": True}, started=t0 + 5, finished=t0 + 5, run_id="a")])
    finally:
        led.close()
    timings = state_module({"ledger": ledger_path, "hosts": ["lab2"], "mode": "after"})["hosts"]["lab2"]["exercise"]
    assert timings["detect_s"] == 5.0, timings


def test_only_a_failing_node_that_the_exercise_degraded_is_marked_injected():
    from ansible_collections.symphony.cluster.plugins.module_utils._fabric.rounds import mark_injected
    outcomes = {"lab1": {"status": "pass", "reason": "ok", "observed": {}},
                "lab2": {"status": "fail", "reason": "all pairs slow", "observed": {"value": 0.09}},
                "lab3": {"status": "fail", "reason": "slow", "observed": None}}
    mark_injected(outcomes, {"lab1": "eth0 shaped", "lab2": "lab2: eth0 transmit shaped", "lab3": ""})
    assert outcomes["lab1"] == {"status": "pass", "reason": "ok", "observed": {}}   # a miss stays a pass
    assert outcomes["lab2"]["reason"] == "all pairs slow [injected] lab2: eth0 transmit shaped"
    assert outcomes["lab2"]["observed"] == {"value": 0.09, "injected": True}
    assert outcomes["lab3"]["reason"] == "slow" and not (outcomes["lab3"]["observed"] or {}).get("injected")
