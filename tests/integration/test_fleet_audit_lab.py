"""fleet_audit's exercise for real in the lab: a degraded link injected on lab2 with tc over SSH (the module's
inject_link) is found by the audit's fabric check (iperf3 --bidir between the lab hosts), marked injected, and its
repair clears it; an XID injected into lab2's own kernel-log file (network namespaces
share one kernel, so each lab host has its own file) is detected by the audit, lab2 is drained in Slurm with the
reason and the spare that passed burn-in (lab3) is promoted (node_evict), lab2 returns to service only after a quick
re-burn-in on it passed, and every step's time comes from the ledger.  A second test has a customer job preempt the
active-health job, where the lab's slurm.conf configures preemption.  Needs root (the lab); the lead runs it."""

import json
import os
import pathlib
import subprocess
import sys
import threading
import time

import pytest

from ansible_collections.symphony.cluster.plugins.module_utils._core import gate_ops as _gate_ops
from ansible_collections.symphony.cluster.plugins.module_utils._core import ledger as _ledger
from ansible_collections.symphony.cluster.plugins.module_utils._core.sku import load_manifest
from ansible_collections.symphony.cluster.plugins.module_utils._fabric import rounds as _rounds
from ansible_collections.symphony.cluster.plugins.module_utils._fabric import transports as _transports
from ansible_collections.symphony.cluster.plugins.module_utils._fleet_audit import active as _active
from ansible_collections.symphony.cluster.plugins.module_utils._fleet_audit import exercise as _exercise
from ansible_collections.symphony.cluster.plugins.module_utils._fleet_audit import stage as _stage
from ansible_collections.symphony.cluster.plugins.module_utils._fleet_audit import state as _state
from ansible_collections.symphony.cluster.plugins.module_utils._host import launchers as _launchers
from ansible_collections.symphony.cluster.plugins.module_utils._host import slurm as _slurm
from ansible_collections.symphony.cluster.plugins.module_utils._validation.tasks_evict import run_evict

symphony_lab = pytest.importorskip("symphony_lab")
from timescale import scaled  # noqa: E402

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the lab needs root (network namespaces, sshd, slurmd)")
LAB = ["gpus", "infiniband"]
ROOT = pathlib.Path(__file__).resolve().parents[2]
# The lab profile's gate, as the SKU declares it: lab hosts have no GPUs, InfiniBand or the SKU's software.
LAB_OPTIONAL = load_manifest(str(ROOT / "skus" / "hgx_h100_supermicro.yml"))["gates"]["lab"]["fleet_audit"]["optional"]


@pytest.fixture(scope="module")
def lab():
    with symphony_lab.running(n=4) as running_lab:
        yield running_lab


def _audit(ledger_path, node, source):
    led = _ledger.open_ledger(ledger_path)
    try:
        state = _state.node_state(led, node)
    finally:
        led.close()
    out = _stage.audit_node({"manifest": {}, "not_expected": LAB, "kernel_log_source": str(source),
                             "previous": state["previous"], "injected": state["injected"],
                             "cleared_at": state["cleared_at"]})
    return _gate_ops.gate_record({"ledger": ledger_path, "node": node, "stage": "fleet_audit",
                                  "checks": out["checks"], "optional": LAB_OPTIONAL, "waive": []}, False)


def run_exercise(lab, workdir, ledger_path):
    """Inject on lab2, audit, drain + promote lab3, re-burn-in lab2, resume, audit again; returns the timings.

    Also what tests/bench/bench_fleet_audit.py times.  Asserts each step on the way.
    """
    slurm = _slurm.Slurm(env=lab.slurm_env)
    for node in lab.names:
        if _slurm.is_drained(slurm.node_states([node])[node]["state"]):
            slurm.resume(node)
    source = pathlib.Path(workdir) / "lab2.kmsg"
    source.write_text(_exercise.kmsg_record(0, 1000, "Linux version (lab2)"))
    _gate_ops.gate_record({"ledger": ledger_path, "node": "lab3", "stage": "burn_in", "optional": [], "waive": [],
                           "checks": [{"name": "cpu_stress", "status": "pass"}]}, False)
    assert _audit(ledger_path, "lab2", source)["gate"]["status"] == "pass"

    injection = _exercise.inject_lab(str(source), xid=79)
    _state.exercise_module({"ledger": ledger_path, "node": "lab2", "action": "record_injection",
                            "injection": injection}, False)
    gate = _audit(ledger_path, "lab2", source)["gate"]
    assert gate["status"] == "fail" and "[injected]" in gate["reason"]

    evicted = run_evict({"node": "lab2", "reason": "symphony fleet_audit [injected fault exercise]: Xid 79",
                         "spares": ["lab3"], "exclude": [], "ledger": ledger_path,
                         "slurm_conf": lab.slurm_env["SLURM_CONF"]})
    assert evicted["spare"] == "lab3"
    assert _slurm.is_drained(slurm.node_states(["lab2"])["lab2"]["state"])
    refused = _state.exercise_module({"ledger": ledger_path, "node": "lab2", "action": "resume"}, False, slurm)
    assert refused.get("failed") and "burn_in" in refused["msg"]

    # the quick re-burn-in: the node tier's CPU stress, on lab2 itself
    res = lab.exec("lab2", ["stress-ng", "--cpu", "1", "--timeout", "3s", "--metrics-brief"], check=False, timeout=60)
    status = "pass" if res.returncode == 0 else "fail"
    _gate_ops.gate_record({"ledger": ledger_path, "node": "lab2", "stage": "burn_in", "optional": [], "waive": [],
                           "checks": [{"name": "cpu_stress", "status": status,
                                       "reason": "" if status == "pass" else "stress-ng exited %d" % res.returncode}]},
                          False)
    assert status == "pass"
    assert _state.exercise_module({"ledger": ledger_path, "node": "lab2", "action": "resume"}, False,
                                  slurm)["changed"] is True
    assert not _slurm.is_drained(slurm.node_states(["lab2"])["lab2"]["state"])
    assert _audit(ledger_path, "lab2", source)["gate"]["status"] == "pass"  # the re-burn-in closed the finding

    led = _ledger.open_ledger(ledger_path)
    try:
        return _state.report(led, "lab2")["exercise"]
    finally:
        led.close()


def test_injected_xid_detected_drained_replaced_and_returned(lab, tmp_path, ledger_path):
    timings = run_exercise(lab, tmp_path, ledger_path)
    assert timings["missing"] == [], timings
    assert 0 <= timings["detect_s"] <= timings["drain_s"] <= timings["replace_s"] <= timings["return_s"]


def _preemption_configured(env):
    out = subprocess.run(["scontrol", "show", "config"], env=dict(os.environ, **env), capture_output=True, text=True,
                         timeout=30, check=False).stdout
    line = next((ln for ln in out.splitlines() if ln.startswith("PreemptType")), "")
    return "preempt/none" not in line and line != ""


def _audit_job_running(env, node):
    out = subprocess.run(["squeue", "--noheader", "--format=%i", "--states=RUNNING", "--nodelist=%s" % node,
                          "--name=%s" % _active.JOB_NAME], env=dict(os.environ, **env), capture_output=True,
                         text=True, timeout=30, check=False).stdout
    return any(word.isdigit() for word in out.split())


def test_a_customer_job_preempts_the_active_check(lab, tmp_path):
    if not _preemption_configured(lab.slurm_env):
        pytest.skip("the lab's slurm.conf configures no preemption: it needs PreemptType=preempt/partition_prio, "
                    "PreemptMode=CANCEL and an audit partition with a lower PriorityTier than the customer one")
    slurm = _slurm.Slurm(env=lab.slurm_env)
    customer = tmp_path / "customer.sh"
    customer.write_text("#!/bin/sh\nsleep 20\n")
    shared = tmp_path / "active"
    shared.mkdir()

    def preempt_soon():
        # Submit the customer job only once the active-health job runs: a fixed sleep raced Slurm's scheduler on a
        # busy CI host (the audit job still PENDING, the customer job went first and the audit job ran after it).
        deadline = time.monotonic() + scaled(60)
        while time.monotonic() < deadline and not _audit_job_running(lab.slurm_env, "lab1"):
            time.sleep(0.3)
        slurm.submit(str(customer), nodes=["lab1"], partition=lab.slurm, job_name="customer",
                     extra_args=["--output=%s" % (tmp_path / "customer-%j.out")])

    thread = threading.Thread(target=preempt_soon)
    thread.start()
    out = _active.run_active("lab1", "audit", str(shared / "job.sh"), str(shared / "job.out"), LAB, timeout_s=120,
                             slurm=slurm)
    thread.join()
    assert out["active_memtest"].status == "not_run"
    assert out["active_memtest"].reason.startswith("preempted by job"), out["active_memtest"].reason


def _exercise_on_node(lab, tmp_path, action, extra=""):
    """Run fleet_audit_exercise's ``action`` on lab2 through Ansible over SSH (as the role does, delegated to the
    node), then return the event the module gave back."""
    out = tmp_path / ("%s.json" % action)
    play = tmp_path / ("%s.yml" % action)
    args = {"action": action, "node": "lab2", "link_interface": "eth0"}
    if action == "inject_link":
        args["link_rate_mbit"] = 100
    save = {"content": "{{ step.event | to_json }}", "dest": str(out), "mode": "0600"}
    play.write_text(json.dumps([{"hosts": "lab2", "gather_facts": False, "tasks": [
        {"name": action, "register": "step", "symphony.cluster.fleet_audit_exercise": args},
        {"delegate_to": "localhost", "ansible.builtin.copy": save}]}]))
    bindir = os.path.dirname(sys.executable)
    proc = subprocess.run([os.path.join(bindir, "ansible-playbook"), "-i", str(lab.inventory), str(play)],
                          capture_output=True, text=True, timeout=scaled(120), cwd=ROOT, check=False,
                          env=dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg")))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    return json.loads(out.read_text())


def test_a_degraded_link_is_found_by_the_fabric_check_marked_injected_and_repaired(lab, tmp_path, ledger_path):
    lab.restore()
    nodes = ["lab1", "lab2", "lab3", "lab4"]
    floor = symphony_lab.pair_floor_gbps(lab.calibration, 100)
    addresses = {h["name"]: h["address"] for h in lab.hosts}
    transport = _transports.make_transport("iperf3", _launchers.SSHLauncher(config_file=str(lab.ssh_config)),
                                           addresses, duration_s=1, port=5671, timeout_s=scaled(30))

    def audit(injected):
        out = _rounds.run_fabric_test(nodes, transport, "round_robin", floor=floor, stage="fleet_audit",
                                      injected=injected)
        for node in nodes:
            verdict = out["interfaces"][node]
            _gate_ops.gate_record({"ledger": ledger_path, "node": node, "stage": "fleet_audit", "waive": [],
                                   "optional": LAB_OPTIONAL, "checks": [dict(verdict, name="fabric_interface")]},
                                  False)
        return out["interfaces"]

    try:
        event = _exercise_on_node(lab, tmp_path, "inject_link")
        assert "tbf" in lab.exec("lab2", ["tc", "qdisc", "show", "dev", "eth0"]).stdout
        _state.exercise_module({"ledger": ledger_path, "node": "lab2", "action": "record_injection",
                                "injection": event}, False)
        led = _ledger.open_ledger(ledger_path)
        try:
            open_link = _state.node_state(led, "lab2")["injected_link"]
        finally:
            led.close()
        assert open_link == event["message"]
        found = audit({"lab2": open_link})
        assert found["lab2"]["status"] == "fail" and "[injected]" in found["lab2"]["reason"], found["lab2"]
        assert found["lab2"]["observed"]["injected"] is True
        healthy = ("lab1", "lab3", "lab4")
        assert {n: found[n]["status"] for n in healthy} == dict.fromkeys(healthy, "pass")
        led = _ledger.open_ledger(ledger_path)
        try:
            gate = led.current_gates("lab2")["lab2"]["fleet_audit"]
            assert gate.status == "fail" and "[injected]" in gate.reason
            assert _state.report(led, "lab2")["exercise"]["detect_s"] is not None
        finally:
            led.close()

        cleared = _exercise_on_node(lab, tmp_path, "clear_link")
        _state.exercise_module({"ledger": ledger_path, "node": "lab2", "action": "record_clear",
                                "injection": cleared}, False)
        assert "tbf" not in lab.exec("lab2", ["tc", "qdisc", "show", "dev", "eth0"]).stdout
        again = audit({})
        assert again["lab2"]["status"] == "pass", again["lab2"]
    finally:
        lab.restore()
