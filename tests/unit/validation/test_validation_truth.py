"""Cluster validation truth (issue 18): the scale ladder, real precision, stragglers, drained nodes blocked.

Logs are built in the shapes the frameworks print: torchtitan ``components/metrics.py`` step lines
(``step: .. loss: .. tps: .. mfu: ..%``), its ``Running with args: {...}`` line (``job.print_args``,
``torchtitan/train.py``), torchao's float8 converter line ``Float8 training active with recipe <name>``
(``torchtitan/components/quantization/float8.py``); the smoke workload's ``rank_step:`` lines are its own.
"""

import json
import os
import subprocess
import sys
import time

import pytest
from timescale import scaled

from ansible_collections.symphony.cluster.plugins.module_utils._core import gate as _gate
from ansible_collections.symphony.cluster.plugins.module_utils._core import ledger as _ledger
from ansible_collections.symphony.cluster.plugins.module_utils._validation import cluster_run as _cluster_run
from ansible_collections.symphony.cluster.plugins.module_utils._validation import evict as _evict
from ansible_collections.symphony.cluster.plugins.module_utils._validation import ladder as _ladder
from ansible_collections.symphony.cluster.plugins.module_utils._validation import mfu as _mfu
from ansible_collections.symphony.cluster.plugins.module_utils._validation import precision as _precision
from ansible_collections.symphony.cluster.plugins.module_utils._validation import stragglers as _stragglers

# skus/dgx_h100.yml validation.mfu_targets
DGX_TARGETS = [{"recipe": "llama3_8b", "precision": "bf16", "min_mfu_pct": 30, "nodes": 2, "convention": "megatron"},
               {"recipe": "llama3_8b", "precision": "fp8", "min_mfu_pct": 25, "nodes": 2, "convention": "megatron"}]
PREFIX = "[rank0]:[titan] 2026-12-01 10:00:0%d,000 - root - INFO - "
TITAN_ARGS = ("{'job': {'config_file': 'llama3_8b.toml', 'print_args': True}, 'model': {'name': 'llama3', "
              "'flavor': '8B', 'converters': %s}, 'training': {'mixed_precision_param': 'bfloat16', 'seq_len': 8192}}")


def titan_log(tps, float8=True):
    lines = ["Starting job: Llama 3 8B training",
             "Running with args: " + TITAN_ARGS % ("['float8']" if float8 else "[]")]
    if float8:
        lines.append("Float8 training active with recipe tensorwise")
    lines.append("Model llama3 8B size: 8,030,261,248 total parameters")
    lines += ["step: %2d  loss:  7.1234  grad_norm:  1.2345  memory: 33.10GiB(41.80%%)  tps: %s  tflops: 348.20  "
              "mfu: 35.21%%" % (step, "{:,}".format(tps)) for step in range(1, 6)]
    return "\n".join(PREFIX % (i % 10) + line for i, line in enumerate(lines)) + "\n"


class JobSlurm:
    """A Slurm that completes every job at once and writes the given log as its output."""

    def __init__(self, tmp_path, log_text):
        self.tmp_path, self.log_text, self.submitted, self.drained = tmp_path, log_text, [], []

    def submit(self, script, nodes=None, partition=None, job_name=None):
        self.submitted.append((script, list(nodes), job_name))
        return str(len(self.submitted))

    def wait(self, job_id, timeout_s, poll_s=2.0):
        log = self.tmp_path / ("job-%s.out" % job_id)
        text = self.log_text(len(self.submitted)) if callable(self.log_text) else self.log_text
        log.write_text(text)
        return {"job_id": job_id, "state": "COMPLETED", "exit_code": 0, "stdout": str(log), "cluster": None}

    def drain(self, node, reason, cluster=None):
        self.drained.append((node, reason))


def test_ladder_rungs_and_the_target_each_is_judged_against():
    assert _ladder.ladder(4, 8) == [1, 2, 4] and _ladder.ladder(20, 8) == [1, 2, 4, 8] and _ladder.ladder(4, 0) == []
    scales = _evict.scales_from_targets(DGX_TARGETS, pool=4, ladder_max_nodes=8)
    assert [(s.nodes, s.precision, s.ladder) for s in scales] == [
        (1, "bf16", True), (1, "fp8", True), (2, "bf16", False), (2, "fp8", False), (4, "bf16", True), (4, "fp8", True)]
    # A rung above the SKU's scale is judged against the nearest target below it, a rung under it the smallest.
    assert {s.nodes: s.min_mfu_pct for s in scales if s.precision == "fp8"} == {1: 25.0, 2: 25.0, 4: 25.0}
    # The lab's whole-pool target (no nodes): 1, 2 and the whole pool once, not a second 4.
    lab = _evict.scales_from_targets([{"recipe": "smoke", "precision": "fp32", "min_mfu_pct": 1.0}], pool=4,
                                     ladder_max_nodes=8)
    assert [s.nodes for s in lab] == [1, 2, None]


def _run_script(path, tmp_path, nnodes):
    """Run a rendered sbatch script with srun replaced by an echo, in a fake allocation of ``nnodes``."""
    fake = tmp_path / "bin"
    fake.mkdir(exist_ok=True)
    (fake / "srun").write_text("#!/bin/sh\necho srun \"$@\"\n")
    (fake / "srun").chmod(0o755)
    env = dict(os.environ, PATH="%s:%s" % (fake, os.environ["PATH"]), SLURM_NNODES=str(nnodes), SLURM_JOB_ID="41",
               SLURM_JOB_NODELIST="lab[1-%d]" % nnodes)
    return subprocess.run(["bash", str(path)], env=env, capture_output=True, text=True, check=True).stdout


def test_two_node_scale_runs_on_a_four_node_play(repo_root, tmp_path, ledger_path):
    """The 2-node scale is submitted on 2 of the 4 nodes, and its script runs torchrun on the allocation's 2."""
    smoke = "\n".join([
        "[smoke] x - root - INFO - step:  %d  loss:  6.40  tps: 2,500  mfu: 10.00%%" % s for s in (1, 2, 3, 4)] + [
        "[smoke] x - root - INFO - smoke_summary: {\"dtype\": \"fp32\", \"embedding_params\": 65536, "
        "\"gemm_peak_tflops\": [0.03], \"heads\": 4, \"hidden\": 128, \"layers\": 2, \"params\": 533760, "
        "\"seq_len\": 64, \"vocab\": 512}"] + [
        "[rank%d]: rank_step: {\"rank\": %d, \"node\": \"lab%d\", \"step\": %d, \"compute_s\": 0.1}" % (r, r, r + 1, s)
        for r in range(4) for s in (1, 2, 3)]) + "\n"
    slurm = JobSlurm(tmp_path, smoke)
    job = {"name": "cv", "recipe": "smoke", "partition": "lab", "gpus_per_node": 0, "procs_per_node": 1,
           "log_dir": str(tmp_path), "python": "/usr/bin/python3", "program": "smoke_train.py",
           "args": ["--steps", "4"], "env": {}}
    opts = _cluster_run.ValidationOptions(
        nodes=["lab1", "lab2", "lab3", "lab4"], log_dir=str(tmp_path), log_format="smoke",
        targets=[{"recipe": "smoke", "precision": "fp32", "min_mfu_pct": 1.0, "nodes": 2}],
        template=str(repo_root / "roles/cluster_validation/templates/sbatch.j2"), job=job, script_dir=str(tmp_path),
        ladder_max_nodes=0, max_attempts=1, out_dir=str(tmp_path / "handoff"))
    ledger = _ledger.open_ledger(ledger_path)
    out = _cluster_run.run_cluster_validation(opts, ledger, slurm, "run-2of4")
    (script, nodes, name), = slurm.submitted
    assert nodes == ["lab1", "lab2"] and name == "cluster-validation-a1-n2-fp32"
    assert os.path.basename(script) == "cluster_validation-fp32-2n.sbatch"
    ran = _run_script(script, tmp_path, 2)
    assert "--nnodes=2 " in ran and "--nodes=2 " in ran and "--dtype fp32" in ran
    # Its result is its own ledger row on the two nodes it used; the others ran no scale.
    rows = {(r.node, r.check): r for r in ledger.current_results(stage="cluster_validation")}
    assert rows[("lab1", "scale_2n_fp32")].status == "pass"
    assert rows[("lab1", "scale_2n_fp32")].evidence["nodes"] == ["lab1", "lab2"]
    assert ("lab3", "scale_2n_fp32") not in rows and rows[("lab3", "training_run")].status == "not_run"
    assert out["result"]["attempts"][0]["runs"][0]["scale_nodes"] == 2


def _launch(tmp_path, log_text, precision, target=25.0):
    slurm = JobSlurm(tmp_path, log_text)
    launch = _cluster_run.slurm_launcher(slurm, "/tmp/job.sbatch", str(tmp_path), "cv", 60, "torchtitan",
                                         model="llama3_8b", gpu="h100_sxm", gpus_per_node=8)
    scale = _evict.Scale("llama3_8b", precision, target, nodes=2, convention="megatron")
    return _evict._run_scale(scale, ["n1", "n2"], launch, 1)


def test_fp8_target_judged_against_the_fp8_peak_on_a_log_confirming_fp8(tmp_path):
    run = _launch(tmp_path, titan_log(14000), "fp8")
    assert run["precision_used"] == "fp8" and "Float8 training active" in run["precision_evidence"]
    assert run["mfu"]["peak_tflops"] == _mfu.PEAK_TFLOPS["h100_sxm"]["fp8"] == 1978.9
    expected = 100 * 14000 * _mfu.flops_per_token(_mfu.MODELS["llama3_8b"], "megatron") / 1978.9e12
    assert run["mfu_pct"] == pytest.approx(expected, abs=0.01)
    assert run["status"] == "pass", run["reason"]


def test_precision_the_log_does_not_confirm_fails_the_scale(tmp_path):
    # Requested fp8, the run trained in bf16: against the bf16 peak 14,000 tok/s would pass a 25 % floor.
    run = _launch(tmp_path, titan_log(14000, float8=False), "fp8")
    assert run["status"] == "fail" and "requested fp8 but the run trained in bf16" in run["reason"]
    assert "mixed_precision_param bfloat16" in run["reason"] and run.get("mfu_pct") is None
    # Requested bf16, the run converted to float8: MFU against the bf16 peak would be doubled.
    run = _launch(tmp_path, titan_log(14000), "bf16", target=30.0)
    assert run["status"] == "fail" and "requested bf16 but the run trained in fp8" in run["reason"]
    # A log that says nothing about precision confirms nothing.
    bare = "".join(line + "\n" for line in titan_log(14000).splitlines() if "args" not in line and "Float8" not in line)
    run = _launch(tmp_path, bare, "bf16", target=30.0)
    assert run["status"] == "fail" and "does not confirm bf16" in run["reason"]


def test_precision_flags_per_recipe():
    assert _precision.precision_args("torchtitan", "fp8")[-2:] == ["--model.converters", "float8"]
    assert _precision.precision_args("megatron", "fp8") == ["--bf16", "--fp8-format", "hybrid"]
    assert _precision.precision_args("smoke", "bfloat16") == ["--dtype", "bf16"]
    with pytest.raises(Exception, match="no flags for precision fp32"):
        _precision.precision_args("megatron", "fp32")
    # Megatron-LM _print_args block.
    megatron = "------------------------ arguments ------------------------\n  bf16 ............ True\n" \
               "  fp8 ............. hybrid\n  fp16 ............ False\n"
    assert _precision.used_precision(megatron, "megatron")[0] == "fp8"
    assert _precision.used_precision(megatron.replace("hybrid", "None"), "megatron")[0] == "bf16"


def rank_log(medians):
    return "".join("[rank%d]: rank_step: {\"rank\": %d, \"node\": \"lab%d\", \"step\": %d, \"compute_s\": %.4f, "
                   "\"step_s\": 0.5}\n" % (r, r, r + 1, s, m * (1 + 0.01 * s)) for s in (1, 2, 3, 4)
                   for r, m in enumerate(medians))


def test_straggler_rank_fails_its_node_with_the_measured_numbers():
    ranks = _stragglers.per_rank(_stragglers.parse_rank_steps(rank_log([0.10, 0.11, 0.10, 0.31])), warmup=1)
    assert ranks[3]["steps"] == 3 and ranks[3]["median_s"] == pytest.approx(0.31 * 1.03)
    slow, = _stragglers.find_stragglers(ranks)
    assert slow["rank"] == 3 and slow["node"] == "lab4" and slow["slowdown_pct"] > 100
    assert "rank 3 on lab4: median step 0.3193 s vs peers'" in slow["reason"]
    # Jitter within the relative margin is not a straggler, however small the MAD; two ranks are no peers.
    quiet = _stragglers.per_rank(_stragglers.parse_rank_steps(rank_log([0.100, 0.100, 0.100, 0.105])))
    assert _stragglers.find_stragglers(quiet) == []
    assert _stragglers.find_stragglers(dict(list(ranks.items())[2:])) == []


def test_straggler_node_is_drained_and_its_gate_fails():
    straggler = {"rank": 1, "node": "lab2", "median_s": 0.3, "peer_median_s": 0.1, "slowdown_pct": 200.0,
                 "modified_z": 9.0, "reason": "rank 1 on lab2: median step 0.3000 s vs peers' 0.1000 s"}

    def launch(scale, nodes, attempt):
        mfu = _mfu.compute_mfu(_mfu.ModelShape(layers=2, hidden=128, seq_len=64, params=533760), "torchtitan",
                               2500.0, 0.03)
        return {"job": {"job_id": "1", "state": "COMPLETED", "exit_code": 0}, "mfu": mfu,
                "rank_steps": {str(i): {"node": n, "median_s": 0.1, "steps": 3} for i, n in enumerate(nodes)},
                "stragglers": [straggler] if attempt == 1 else []}

    drained = []
    result = _evict.run_validation(["lab1", "lab2", "lab3"], [_evict.Scale("smoke", "fp32", 1.0)], launch,
                                   lambda nodes, attempt: [], lambda n, r: drained.append((n, r)),
                                   lambda count, exclude: ["lab4"], max_attempts=2)
    assert drained[0][0] == "lab2" and "median step 0.3000 s" in drained[0][1]
    assert result["status"] == "pass" and result["final_nodes"] == ["lab1", "lab4", "lab3"]
    swept = {n: {"node": n, "check": "nccl_sweep_all_reduce", "status": "pass", "reason": "ok"}
             for n in ("lab1", "lab2", "lab3", "lab4")}
    results, verdicts = _evict.node_results(result, "r1", nccl=swept)
    gates = {v.node: v.status for v in verdicts}
    assert gates["lab2"] == "fail" and gates["lab4"] == "pass"
    # The NCCL sweep is part of the gate: a node whose sweep failed fails; one never swept is not passed, unless
    # the profile makes the check optional (the lab: no nccl-tests).
    swept["lab1"] = dict(swept["lab1"], status="fail", reason="2 node(s): plateau 210 GB/s below the floor 333")
    del swept["lab3"]
    gates = {v.node: v for v in _evict.node_results(result, "r1", nccl=swept)[1]}
    assert gates["lab1"].status == "fail" and "plateau 210 GB/s" in gates["lab1"].reason
    assert gates["lab3"].status == "not_run" and gates["lab4"].status == "pass"
    lab = {v.node: v.status for v in _evict.node_results(result, "r1", optional=["nccl_sweep"])[1]}
    assert lab["lab3"] == "pass"
    row = next(r for r in results if r.node == "lab2" and r.check == "stragglers")
    assert row.status == "fail" and row.observed[0]["median_s"] == 0.3


def test_drained_node_is_blocked_and_the_others_are_validated(tmp_path, ledger_path):
    slurm_nodes = {"lab1": {"state": "IDLE"}, "lab2": {"state": "IDLE+DRAIN", "reason": "admin: PSU swap"},
                   "lab3": {"state": "IDLE"}}
    blocked = {}
    names, _skipped = _evict.resolve_slurm_names(["lab1", "lab2", "lab3"], [], slurm_nodes, blocked=blocked)
    assert blocked == {"lab2": "Slurm node lab2 is IDLE+DRAIN (admin: PSU swap)"} and "lab2" not in names
    smoke = ("[smoke] x - root - INFO - step:  2  loss:  6.4  tps: 2,500  mfu: 10.00%\n"
             "[smoke] x - root - INFO - smoke_summary: {\"dtype\": \"fp32\", \"embedding_params\": 65536, "
             "\"gemm_peak_tflops\": [0.03], \"heads\": 4, \"hidden\": 128, \"layers\": 2, \"params\": 533760, "
             "\"seq_len\": 64, \"vocab\": 512}\n")
    opts = _cluster_run.ValidationOptions(
        nodes=["lab1", "lab3"], log_dir=str(tmp_path), log_format="smoke", script="/tmp/job.sbatch",
        targets=[{"recipe": "smoke", "precision": "fp32", "min_mfu_pct": 1.0}], blocked=blocked, max_attempts=1,
        out_dir=str(tmp_path / "handoff"), nccl_not_run="nccl-tests is not installed on lab hosts")
    ledger = _ledger.open_ledger(ledger_path)
    out = _cluster_run.run_cluster_validation(opts, ledger, JobSlurm(tmp_path, smoke), "run-b")
    assert out["gates"]["lab2"] == _gate.BLOCKED and out["gates"]["lab1"] == "not_run"  # no telemetry, no ranks
    assert os.path.exists(out["paths"][0]) and any("left out lab2" in a for a in out["result"]["actions"])
    row = next(r for r in ledger.current_results(node="lab2") if r.check == "training_run")
    assert row.status == "blocked" and "admin: PSU swap" in row.reason
    # The certificate's NCCL section carries the sweep's not_run reason.
    assert {(i["node"], i["status"]) for i in out["certificate"]["nccl"]} == {("lab1", "not_run"), ("lab3", "not_run")}
    assert "NCCL results" in open(out["paths"][1]).read() and "nccl-tests is not installed" in open(out["paths"][1]).read()


def _write_lab_source(path, hot=None):
    """The lab's GPU readings, replaced atomically as the demo does: {node: [GPU rows]}."""
    rows = {node: [{"gpu": gpu, "temp_c": 55.0 + 0.4 * gpu + (20.0 if (node, gpu) == hot else 0.0),
                    "power_w": 690.0 + gpu, "sm_clock_mhz": 1980.0} for gpu in range(4)]
            for node in ("lab1", "lab2", "lab3")}
    tmp = str(path) + ".tmp"
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump(rows, handle)
    os.replace(tmp, path)


def test_hot_gpu_injected_while_the_sampler_runs_is_found_from_its_samples(repo_root, tmp_path):
    """gpu_sampler.py on three lab 'nodes' reads the lab source each interval; the hot GPU appears mid-run."""
    source = tmp_path / "lab_gpus.json"
    _write_lab_source(source)
    job_dir = tmp_path / "telemetry" / "77"
    sampler = str(repo_root / "roles/cluster_validation/files/gpu_sampler.py")
    procs = [subprocess.Popen([sys.executable, sampler, "--out", str(job_dir), "--interval-ms", "100",
                               "--duration-s", "3", "--lab-source", str(source)],
                              env=dict(os.environ, SLURMD_NODENAME=node)) for node in ("lab1", "lab2", "lab3")]
    # Inject only once every sampler has written a sample (a fixed sleep raced interpreter start-up on a busy host).
    deadline = time.monotonic() + scaled(30)
    while time.monotonic() < deadline and not all(
            (job_dir / ("%s.jsonl" % node)).exists() and (job_dir / ("%s.jsonl" % node)).stat().st_size
            for node in ("lab1", "lab2", "lab3")):
        time.sleep(0.05)
    _write_lab_source(source, hot=("lab2", 1))  # injected while the "job" runs, never before
    assert [p.wait(timeout=30) for p in procs] == [0, 0, 0]
    info = {}
    telemetry = _cluster_run.sampled_telemetry({1: [str(job_dir)]}, info, {"z_threshold": 3.5, "delta_c": 10.0},
                                               names={"gpu-r01-u07": "lab2"})
    found = telemetry(["lab1", "gpu-r01-u07", "lab3"], 1)
    assert {(o["node"], o["gpu"], o["metric"]) for o in found} >= {("gpu-r01-u07", 1, "temp_c")}
    assert info[1]["source"] == "lab (injected values from %s)" % source and info[1]["samples"] > 30
    first = json.loads((job_dir / "lab2.jsonl").read_text().splitlines()[0])
    assert set(first) >= {"node", "gpu", "t_s", "temp_c", "power_w", "sm_clock_mhz", "throttle", "source"}
    assert first["temp_c"] < 60  # the first samples predate the injection
    # No GPU source on a node: not analysed, with the sampler's reason.
    empty = tmp_path / "telemetry" / "78"
    empty.mkdir(parents=True)
    (empty / "lab1.status.json").write_text(json.dumps({"node": "lab1", "source": None,
                                                        "tried": ["nvml_reader: NVML sees no GPU"]}))
    with pytest.raises(Exception, match="no GPU sample was taken during the run.*NVML sees no GPU"):
        _cluster_run.sampled_telemetry({1: [str(empty)]}, {})(["lab1"], 1)


def test_report_plots_per_rank_step_times():
    from ansible_collections.symphony.cluster.plugins.module_utils._core import report as _report
    from ansible_collections.symphony.cluster.plugins.module_utils._core import report_html as _report_html
    ranks = {"4n_fp32": {"0": {"node": "lab1", "median_s": 0.1, "steps": 3},
                         "2": {"node": "lab3", "median_s": 1.2, "steps": 3}}}
    row = _gate.CheckResult(node="lab3", stage="cluster_validation", check="stragglers", status="fail",
                            reason="rank 2 on lab3", evidence={"rank_steps": ranks}, run_id="cv-1")
    charts = _report._chart_series([row, _gate.CheckResult(**dict(row.to_dict(), node="lab1"))])
    assert charts["rank_steps"] == [
        {"run_id": "cv-1", "scale": "4n_fp32", "rank": 0, "node": "lab1", "median_s": 0.1},
        {"run_id": "cv-1", "scale": "4n_fp32", "rank": 2, "node": "lab3", "median_s": 1.2}]
    figs = _report_html._figures({"charts": dict(charts, traces=[], storage={}, pairs=[], nccl=[], mfu=[],
                                                 outliers=[])})
    assert [name for name, _fig in figs] == ["cluster validation: stragglers"]
