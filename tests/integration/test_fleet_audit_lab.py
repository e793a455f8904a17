"""fleet_audit's exercise for real in the lab: an XID injected into lab2's own kernel-log file (network namespaces
share one kernel, so each lab host has its own file) is detected by the audit, lab2 is drained in Slurm with the
reason and the spare that passed burn-in (lab3) is promoted (node_evict), lab2 returns to service only after a quick
re-burn-in on it passed, and every step's time comes from the ledger.  A second test has a customer job preempt the
active-health job, where the lab's slurm.conf configures preemption.  Needs root (the lab); the lead runs it."""

import os
import pathlib
import subprocess
import threading
import time

import pytest

from ansible_collections.symphony.cluster.plugins.module_utils._core import gate_ops as _gate_ops
from ansible_collections.symphony.cluster.plugins.module_utils._core import ledger as _ledger
from ansible_collections.symphony.cluster.plugins.module_utils._core.sku import load_manifest
from ansible_collections.symphony.cluster.plugins.module_utils._fleet_audit import active as _active
from ansible_collections.symphony.cluster.plugins.module_utils._fleet_audit import exercise as _exercise
from ansible_collections.symphony.cluster.plugins.module_utils._fleet_audit import stage as _stage
from ansible_collections.symphony.cluster.plugins.module_utils._fleet_audit import state as _state
from ansible_collections.symphony.cluster.plugins.module_utils._host import slurm as _slurm
from ansible_collections.symphony.cluster.plugins.module_utils._validation.tasks_evict import run_evict

symphony_lab = pytest.importorskip("symphony_lab")

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
        time.sleep(2)
        slurm.submit(str(customer), nodes=["lab1"], partition=lab.slurm, job_name="customer",
                     extra_args=["--output=%s" % (tmp_path / "customer-%j.out")])

    thread = threading.Thread(target=preempt_soon)
    thread.start()
    out = _active.run_active("lab1", "audit", str(shared / "job.sh"), str(shared / "job.out"), LAB, timeout_s=120,
                             slurm=slurm)
    thread.join()
    assert out["active_memtest"].status == "not_run"
    assert out["active_memtest"].reason.startswith("preempted by job"), out["active_memtest"].reason
