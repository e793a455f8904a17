"""Burn-in runner: plan order, fail-fast, flaky retry, timeouts, evidence, XID scan per tier, gate and ledger.

Node-tier tests run for real on this machine (stress-ng, fio, /proc, the kernel log) with second-long settings."""

import copy
import json
import os

import pytest

from ansible_collections.symphony.cluster.plugins.module_utils._burnin import runner as B
from ansible_collections.symphony.cluster.plugins.module_utils._burnin import checks as C
from ansible_collections.symphony.cluster.plugins.module_utils._burnin import plan as P
from ansible_collections.symphony.cluster.plugins.module_utils._burnin.evidence import EvidenceStore
from ansible_collections.symphony.cluster.plugins.module_utils._burnin.executor import Executor
from ansible_collections.symphony.cluster.plugins.module_utils._burnin.kernel_log import KernelLog
from ansible_collections.symphony.cluster.plugins.module_utils._core import sku as _sku
from ansible_collections.symphony.cluster.plugins.module_utils._core.errors import ManifestError
from ansible_collections.symphony.cluster.plugins.module_utils._core.gate import compute_gate, failed, passed
from ansible_collections.symphony.cluster.plugins.module_utils._core.ledger import open_ledger
from timescale import scaled

FAST = {
    "cpu_stress": {"timeout_s": scaled(30), "params": {"duration_s": 1, "workers": 1}},
    "memory_stress": {"timeout_s": scaled(30), "params": {"duration_s": 1, "workers": 1, "vm_bytes": "32M"}},
    "fio_seq_read": {"params": {"size_mib": 16, "runtime_s": 1}},
    "fio_seq_write": {"params": {"size_mib": 16, "runtime_s": 1}},
    "fio_randread_4k": {"params": {"size_mib": 16, "runtime_s": 1}},
}


@pytest.fixture(scope="module")
def manifest(repo_root):
    return _sku.load_manifest(str(repo_root / "skus" / "hgx_h100_supermicro.yml"))


class FileKernelLog(KernelLog):
    """The kernel log read from a kmsg-format file the test appends to (the real reader, another path)."""

    def __init__(self, path):
        super().__init__(source="kmsg", kmsg_path=str(path))


def _kmsg_file(tmp_path, lines=("6,1,1000000,-;Linux version 6.1",)):
    path = tmp_path / "kmsg"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_plan_orders_by_tier_then_cost_and_merges_profile(manifest):
    plan = P.build_plan(manifest, "lab")
    tiers = [t.tier for t in plan]
    assert tiers == sorted(tiers, key=P.TIER_ORDER.index)
    node = [t for t in plan if t.tier == "node"]
    assert [t.cost_s for t in node] == sorted(t.cost_s for t in node)
    assert node[0].name == "memory_size" and node[-1].name == "pcie_links"
    cpu = next(t for t in plan if t.name == "cpu_stress")
    assert cpu.params == {"method": "matrixprod", "duration_s": 3, "workers": 1} and cpu.timeout_s == 60
    prod = P.build_plan(manifest)
    assert next(t for t in prod if t.name == "cpu_stress").params["duration_s"] == 600
    assert [t.name for t in P.build_plan(manifest, "lab", tiers=["gpu"])] == ["nvidia_smi_health", "nvlink_health",
                                                                              "dcgm_quick",
                                                                              "gpu_burn",
                                                                              "dcgm_diag"]


@pytest.mark.parametrize("kwargs, words", [
    ({"only": ["no_such_test"]}, "no burn-in test named 'no_such_test'"),
    ({"tiers": ["nope"]}, "tier 'nope' is not declared"),
    ({"profile": "staging"}, "profile 'staging' is not declared"),
])
def test_plan_errors_name_the_field(manifest, kwargs, words):
    with pytest.raises(ManifestError) as err:
        P.build_plan(manifest, **dict({"profile": "lab"}, **kwargs))
    assert words in err.value.message and "hgx_h100_supermicro" in str(err.value)


def test_healthy_lab_node_passes_node_tier_and_gpu_power_not_run(manifest, tmp_path):
    plan = P.build_plan(manifest, "lab", tiers=["node", "gpu", "power"], overrides=FAST)
    store = EvidenceStore(str(tmp_path / "ev"), "lab1", "run-a")
    out = B.run_burnin("lab1", manifest, plan, "run-a", store, profile="lab")
    status = {r.check: r for r in out["results"]}
    for name in ("memory_size", "kernel_log", "fio_seq_read", "fio_seq_write", "fio_randread_4k", "cpu_stress",
                 "memory_stress", "node_xid_scan"):
        assert status[name].status == "pass", (name, status[name].reason)
    assert status["pcie_links"].status == "not_run" and "no GPU expected (profile lab" in status["pcie_links"].reason
    for name in ("nvidia_smi_health", "gpu_burn", "dcgm_diag", "power_sustained", "power_pulsating"):
        assert status[name].status == "not_run"
        assert status[name].reason == "no GPU on this host (profile lab: inband_bom.gpus.count 0)"
    assert out["stopped_after"] is None and out["tiers"]["node"] in ("pass", "partial")
    # evidence: raw output and parsed results per test, paths relative to the evidence root
    fio = status["fio_randread_4k"]
    raw = json.loads((tmp_path / "ev" / fio.evidence["fio_stdout"]).read_text())
    assert raw["jobs"][0]["job options"]["rw"] == "randread"
    assert fio.evidence["fio_stdout"].startswith("lab1/run-a/node/fio_randread_4k/attempt-1/")
    assert fio.observed["read"]["iops"] > 500 and fio.observed["read"]["p99_lat_us"] < scaled(200000)
    assert json.loads((tmp_path / "ev" / fio.evidence["result"]).read_text())["status"] == "pass"
    assert status["cpu_stress"].observed["bogo_ops_per_s"]["cpu"] > 0
    verdict = compute_gate(P.gate_graph(manifest, "lab", plan), out["results"])
    assert verdict.status == "pass"
    prod = compute_gate(P.gate_graph(manifest, "production", plan), out["results"])
    assert prod.status == "not_run" and "edac" in prod.failing          # GPU checks required in production


def test_impossible_storage_threshold_fails_fast(manifest, tmp_path):
    overrides = dict(FAST, fio_seq_read={"params": {"size_mib": 16, "runtime_s": 1},
                                         "thresholds": {"min_bw_mbps": 1e9}})
    plan = P.build_plan(manifest, "lab", overrides=overrides)
    store = EvidenceStore(str(tmp_path / "ev"), "lab2", "run-b")
    out = B.run_burnin("lab2", manifest, plan, "run-b", store, profile="lab")
    status = {r.check: r for r in out["results"]}
    assert status["fio_seq_read"].status == "fail"
    assert "read bandwidth" in status["fio_seq_read"].reason and "< 1e+09 MB/s" in status["fio_seq_read"].reason
    assert out["stopped_after"] == "fio_seq_read"
    after = [r for r in out["results"] if r.check in ("fio_seq_write", "cpu_stress", "nvidia_smi_health",
                                                      "power_sustained", "gpu_xid_scan", "fabric_pairwise")]
    assert {r.status for r in after} == {"not_run"}
    assert {r.reason for r in after} == {"stopped by fail-fast after fio_seq_read"}
    assert status["node_xid_scan"].status == "pass"          # the tier's own scan still runs
    assert out["tiers"] == {"node": "fail", "gpu": "not_run", "power": "not_run", "fabric": "not_run"}
    verdict = compute_gate(P.gate_graph(manifest, "lab", plan), out["results"])
    assert verdict.status == "fail" and verdict.failing == ["fio_seq_read"]


def test_flaky_test_is_retried_once_and_both_attempts_kept(manifest, tmp_path):
    m = copy.deepcopy(manifest)
    m["burn_in"]["tiers"] = [{"name": "node", "tests": [
        {"name": "wobbly", "kind": "wobbly", "timeout_s": 5, "flaky": True},
        {"name": "steady_bad", "kind": "bad", "timeout_s": 5, "flaky": True},
        {"name": "never", "kind": "good", "timeout_s": 5, "cost_s": 99}]}]
    calls = []

    def wobbly(ctx):
        calls.append(ctx.rel_dir)
        ctx.save_text("out.txt", "attempt %d" % len(calls))
        return failed("ECC blip", "retry") if len(calls) == 1 else passed(observed={"attempt": 2})

    registry = {"wobbly": wobbly, "bad": lambda ctx: failed("always broken", "replace"),
                "good": lambda ctx: passed()}
    plan = P.build_plan(m, "lab")
    store = EvidenceStore(str(tmp_path), "n1", "r1")
    out = B.run_burnin("n1", m, plan, "r1", store, profile="lab", registry=registry,
                       kernel_log=FileKernelLog(_kmsg_file(tmp_path)))
    status = {r.check: r for r in out["results"]}
    w = status["wobbly"]
    assert w.status == "pass" and w.reason.startswith("passed on retry (flaky-prone test); first attempt failed")
    assert [a["status"] for a in w.observed["attempts"]] == ["fail", "pass"]
    assert calls == ["node/wobbly/attempt-1", "node/wobbly/attempt-2"]
    assert [open(os.path.join(str(tmp_path), ev["out"])).read() for ev in w.evidence["attempts"]] == \
        ["attempt 1", "attempt 2"]
    assert status["steady_bad"].status == "fail"
    assert status["steady_bad"].reason == "failed twice (flaky-prone test retried once): always broken"
    assert status["never"].reason == "stopped by fail-fast after steady_bad"


def test_per_test_timeout_kills_the_tool_and_fails(manifest, tmp_path):
    plan = P.build_plan(manifest, "lab", only=["cpu_stress"],
                        overrides={"cpu_stress": {"timeout_s": 1.5, "params": {"duration_s": int(scaled(30)), "workers": 1}}})
    store = EvidenceStore(str(tmp_path), "n1", "r1")
    out = B.run_burnin("n1", manifest, plan, "r1", store, profile="lab",
                       kernel_log=FileKernelLog(_kmsg_file(tmp_path)))
    res = out["results"][0]
    assert res.status == "fail" and "stress-ng timed out after" in res.reason and "timeout_s 1.5s" in res.reason
    assert res.finished - res.started < scaled(10)
    assert json.loads((tmp_path / res.evidence["stress-ng_command"]).read_text())["timed_out"] is True


def test_xid_logged_during_a_tier_fails_it_and_stops_later_tiers(manifest, tmp_path):
    kmsg = _kmsg_file(tmp_path, ["6,1,1000000,-;Linux version 6.1",
                                 "3,2,2000000,-;NVRM: Xid (PCI:0000:1b:00): 13, pid=1, name=x, old graphics exception"])
    m = copy.deepcopy(manifest)
    m["burn_in"]["tiers"] = [{"name": "node", "tests": [{"name": "load", "kind": "xid_load", "timeout_s": 5}]},
                             {"name": "gpu", "tests": [{"name": "later", "kind": "ok", "timeout_s": 5}]}]

    def xid_load(ctx):
        with open(str(kmsg), "a") as handle:
            handle.write("3,3,3000000,-;NVRM: Xid (PCI:0000:9b:00): 79, pid=77, name=gpu_burn, "
                         "GPU has fallen off the bus.\n")
            handle.write("3,4,3100000,-;NVRM: Xid (PCI:0000:9b:00): 79, pid=77, name=gpu_burn, "
                         "GPU has fallen off the bus.\n")
        return passed()

    out = B.run_burnin("n1", m, P.build_plan(m, "lab"), "r1", EvidenceStore(str(tmp_path), "n1", "r1"),
                       profile="lab", registry={"xid_load": xid_load, "ok": lambda c: passed()},
                       kernel_log=FileKernelLog(kmsg))
    status = {r.check: r for r in out["results"]}
    scan = status["node_xid_scan"]
    assert scan.status == "fail" and "Xid 79 (GPU has fallen off the bus) x2 on PCI 0000:9b:00" in scan.reason
    assert [f["xid"] for f in scan.observed["xids"]] == [79]          # the old Xid 13 was before the tier
    assert "power-cycle" in scan.remediation
    assert status["later"].reason == "stopped by fail-fast after node_xid_scan"


def test_missing_tool_is_not_run_never_pass(manifest, tmp_path):
    m = copy.deepcopy(manifest)   # production profile: 8 GPUs expected, no NVIDIA tools on this machine
    plan = P.build_plan(m, "production", tiers=["gpu"])
    out = B.run_burnin("n1", m, plan, "r1", EvidenceStore(str(tmp_path), "n1", "r1"),
                       kernel_log=FileKernelLog(_kmsg_file(tmp_path)))
    status = {r.check: r for r in out["results"]}
    assert status["nvidia_smi_health"].status == "not_run"
    assert status["nvidia_smi_health"].reason == "nvidia-smi not found on this node (no NVIDIA driver)"
    assert status["dcgm_diag"].reason == "dcgmi not found on this node (DCGM not installed)"
    assert status["gpu_burn"].reason.startswith("gpu_burn / gpu-burn not found")


def test_memory_size_edac_and_pcie_against_fake_sysfs(manifest, tmp_path):
    sysfs = tmp_path / "sys"
    mc = sysfs / "devices/system/edac/mc/mc0"
    (mc / "dimm3").mkdir(parents=True)
    (mc / "ce_count").write_text("4\n")
    (mc / "ue_count").write_text("1\n")
    (mc / "dimm3/dimm_label").write_text("CPU0_DIMM_C1\n")
    (mc / "dimm3/dimm_ce_count").write_text("4\n")
    (mc / "dimm3/dimm_ue_count").write_text("1\n")
    gpu = sysfs / "bus/pci/devices/0000:1b:00.0"
    gpu.mkdir(parents=True)
    for name, value in (("vendor", "0x10de"), ("device", "0x2330"), ("class", "0x030200"),
                        ("current_link_width", "8"), ("max_link_width", "16"),
                        ("current_link_speed", "2.5 GT/s PCIe"), ("max_link_speed", "32.0 GT/s PCIe")):
        (gpu / name).write_text(value + "\n")
    procfs = tmp_path / "proc"
    procfs.mkdir()
    (procfs / "meminfo").write_text("MemTotal:       1981234567 kB\nMemFree: 1 kB\n")   # 1889 GiB < 0.95 x 2048
    plan = P.build_plan(manifest, "production", only=["memory_size", "edac", "pcie_links"])
    out = B.run_burnin("n1", manifest, plan, "r1", EvidenceStore(str(tmp_path / "ev"), "n1", "r1"),
                       kernel_log=FileKernelLog(_kmsg_file(tmp_path)), sysfs=str(sysfs), procfs=str(procfs),
                       fail_fast=False)
    status = {r.check: r for r in out["results"]}
    assert status["memory_size"].status == "fail"
    assert status["memory_size"].reason == ("MemTotal 1889.5 GiB, expected ≥ 1945.6 GiB (95% of the BOM's "
                                            "2048 GiB)")
    assert status["edac"].status == "fail" and status["edac"].reason == "EDAC errors: mc0: 1 UE, 4 CE on CPU0_DIMM_C1"
    pcie = status["pcie_links"]
    assert pcie.status == "fail" and "GPU 0000:1b:00.0 x8 Gen5, expected ≥ x16 Gen5" in pcie.reason
    assert "expected 8 GPU(s), found 1 with a PCIe link" in pcie.reason


def test_record_burnin_writes_results_with_absolute_evidence_and_gate(manifest, tmp_path, ledger_path):
    m = copy.deepcopy(manifest)
    m["burn_in"]["tiers"] = [{"name": "node", "tests": [{"name": "memory_size", "kind": "ok", "timeout_s": 5}]}]
    m["gates"] = {}
    plan = P.build_plan(m, "production")
    out = B.run_burnin("n1", m, plan, "r1", EvidenceStore(str(tmp_path / "node"), "n1", "r1"),
                       registry={"ok": lambda c: passed(observed={"x": 1})},
                       kernel_log=FileKernelLog(_kmsg_file(tmp_path)))
    ledger = open_ledger(ledger_path)
    verdict = B.record_burnin(ledger, m, "production", "n1", "r1", [r.to_dict() for r in out["results"]],
                              evidence_root=str(tmp_path / "controller"))
    assert verdict.status == "pass"
    rows = {r.check: r for r in ledger.current_results("n1", "burn_in")}
    assert rows["memory_size"].evidence["result"] == str(tmp_path / "controller" / "n1/r1/node/memory_size/"
                                                                                   "attempt-1/result.json")
    assert ledger.current_gates("n1")["n1"]["burn_in"].status == "pass"


def test_kinds_of_every_shipped_sku_are_implemented(repo_root):
    fabric_kinds = set()
    for manifest in _sku.load_skus(str(repo_root / "skus")).values():
        for test in P.build_plan(manifest):
            if test.tier == "fabric":
                fabric_kinds.add(test.kind)
                continue
            assert test.kind in C.KINDS, (manifest["sku"], test.name, test.kind)
    assert fabric_kinds          # the fabric tier is run by roles/burn_in/tasks/fabric.yml


def test_executor_timeout_kills_the_tools_children_too():
    """A tool that forks (stress-ng, gpu_burn) is killed as a process group: a child holding the output pipe
    open must not keep the test waiting past its timeout."""
    res = Executor().run(["sh", "-c", "echo started; sleep 30 & sleep 30"], 0.5)
    assert res.timed_out is True and res.rc is None
    assert res.duration_s < 10 and "started" in res.stdout
