"""cluster_validation for real in the lab: Slurm runs the CPU smoke workload with torchrun over gloo on two lab
hosts; MFU from the measured throughput vs the measured CPU GEMM peak; a hot reading injected into the lab's
telemetry file for lab2 drains it in Slurm (ledger event), promotes the spare that passed burn-in (lab3, not
lab4 whose burn-in failed) and the rerun passes.  Needs root (the lab)."""

import json
import os
import pathlib

import pytest

from ansible_collections.symphony.cluster.plugins.module_utils._validation import cluster_run as _cluster_run
from ansible_collections.symphony.cluster.plugins.module_utils._core import gate as _gate
from ansible_collections.symphony.cluster.plugins.module_utils._core import ledger as _ledger
from ansible_collections.symphony.cluster.plugins.module_utils._validation import mfu as _mfu
from ansible_collections.symphony.cluster.plugins.module_utils._validation import recipes as _recipes
from ansible_collections.symphony.cluster.plugins.module_utils._host import slurm as _slurm
from timescale import scaled

symphony_lab = pytest.importorskip("symphony_lab")
pytest.importorskip("torch")

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the lab needs root (network namespaces, sshd, slurmd)")

ROOT = pathlib.Path(__file__).resolve().parents[2]
ROLE = ROOT / "roles" / "cluster_validation"


@pytest.fixture(scope="module")
def lab():
    # 8 hosts: the ladder's 8-node rung (issue 18); the other tests use the first ones
    with symphony_lab.running(n=8) as running_lab:
        yield running_lab


def _telemetry_file(path, hot_node):
    """Per-'GPU' readings for each lab host (4 per host), with lab2 GPU 0 running 20 °C hotter."""
    rows = []
    for sample in range(6):
        for index, node in enumerate(("lab1", "lab2", "lab3", "lab4")):
            for gpu in range(4):
                temp = 54.0 + index * 0.4 + gpu * 0.3 + (sample % 2) * 0.2
                if node == hot_node and gpu == 0:
                    temp += 20.0
                rows.append({"node": node, "gpu": gpu, "temp_c": round(temp, 1), "power_w": 300.0 + gpu})
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")


def test_smoke_run_hot_node_drained_spare_promoted_rerun_passes(lab, tmp_path, ledger_path):
    slurm = _slurm.Slurm(env=lab.slurm_env)
    for node in lab.names:
        if _slurm.is_drained(slurm.node_states([node])[node]["state"]):
            slurm.resume(node)
    log_dir = tmp_path / "logs"
    log_dir.mkdir()
    job = {"name": "cv-smoke", "recipe": "smoke", "precision": "fp32", "nodes": 2, "partition": lab.slurm,
           "log_dir": str(log_dir), "time_limit": "00:05:00", "python": str(lab.python),
           "program": str(ROLE / "files" / "smoke_train.py"),
           "args": ["--steps", 5, "--warmup", 2, "--gemm-size", 512],
           # Lab hosts: one interface (eth0), no DNS server reachable: keep resolver waits to 1 s.
           "env": {"GLOO_SOCKET_IFNAME": "eth0", "OMP_NUM_THREADS": "1", "RES_OPTIONS": "timeout:1 attempts:1"},
           "rdzv_interface": "eth0"}
    script = tmp_path / "cluster_validation.sbatch"
    script.write_text(_slurm.render_template(str(ROLE / "templates" / "sbatch.j2"), {"job": job}))
    telemetry = tmp_path / "telemetry.jsonl"
    _telemetry_file(telemetry, "lab2")

    ledger = _ledger.open_ledger(ledger_path)
    ledger.record_gate(_gate.GateVerdict("lab4", "burn_in", "fail", "stress_ng: 1 failure"), "burn-1")
    ledger.record_gate(_gate.GateVerdict("lab3", "burn_in", "pass", "all required checks passed"), "burn-1")
    opts = {"nodes": ["lab1", "lab2"], "spares": ["lab4", "lab3"], "script": str(script), "log_dir": str(log_dir),
            "job_name": "cv-smoke", "partition": lab.slurm, "timeout_s": scaled(120), "log_format": "smoke",
            "targets": [{"recipe": "smoke", "precision": "fp32", "min_mfu_pct": 0.5, "nodes": 2,
                         "convention": "torchtitan"}],
            "telemetry_file": str(telemetry), "thermal": {"z_threshold": 3.5, "delta_c": 10, "max_temp_margin_c": 3},
            "max_operating_temp_c": 85.0, "max_attempts": 3, "cluster": "lab", "sku": "lab",
            "out_dir": str(tmp_path / "handoff"), "poll_s": 1.0,
            # What the role passes in the lab profile: no nccl-tests there, the SKU's lab gate makes it optional.
            "nccl_not_run": "nccl-tests is not installed on lab hosts (no GPUs, no InfiniBand)",
            "optional": ["nccl_sweep"]}
    try:
        out = _cluster_run.run_cluster_validation(opts, ledger, slurm, "cv-lab-1")
        result = out["result"]
        assert result["status"] == "pass", result["reason"]
        # A transient rerun would show here with its reason (a job that failed, an MFU below target).
        assert [a["nodes"] for a in result["attempts"]] == [["lab1", "lab2"], ["lab1", "lab3"]], \
            [(a["nodes"], a["decision"]["reason"]) for a in result["attempts"]]
        assert result["evicted"] == ["lab2"] and result["final_nodes"] == ["lab1", "lab3"]

        # Attempt 1 ran for real on lab1+lab2 and completed; its MFU is recomputed from its log.
        first = result["attempts"][0]["runs"][0]
        assert first["job"]["state"] == "COMPLETED" and first["job"]["exit_code"] == 0
        parsed = _recipes.parse_torchtitan(pathlib.Path(first["log"]).read_text())
        summary = parsed["summary"]
        assert summary["world_size"] == 2 and sorted(h.split("/")[1] for h in summary["hosts"]) == ["lab1", "lab2"]
        tput = _recipes.throughput(parsed, "smoke", warmup=1)
        expect = _mfu.compute_mfu(_mfu.ModelShape(**_recipes.smoke_shape(summary)), "torchtitan",
                                  tput["tokens_per_s_per_device"], summary["gemm_peak_tflops"][0])
        assert first["mfu"]["mfu_pct"] == pytest.approx(expect["mfu_pct"], abs=1e-6)
        assert 0.5 <= first["mfu"]["mfu_pct"] < 100
        second = result["attempts"][1]["runs"][0]
        assert second["status"] == "pass" and sorted(second["nodes"]) == ["lab1", "lab3"]

        # lab2 drained in Slurm with the reason; ledger events and gates.
        state = slurm.node_states(["lab2"])["lab2"]
        assert _slurm.is_drained(state["state"]) and "cluster_validation attempt 1" in state["reason"]
        events = [(e["kind"], e["node"]) for e in ledger.events()]
        assert ("drain", "lab2") in events and ("spare_promoted", "lab3") in events
        assert ("spare_promoted", "lab4") not in events
        assert out["gates"] == {"lab1": "pass", "lab2": "fail", "lab3": "pass"}
        cert = json.loads(pathlib.Path(out["paths"][0]).read_text())
        assert cert["status"] == "pass" and cert["final_nodes"] == ["lab1", "lab3"]
        assert cert["outliers"][0]["node"] == "lab2" and cert["outliers"][0]["gpu"] == 0
        assert "promoted spare lab3" in pathlib.Path(out["paths"][1]).read_text()
        # The certificate's NCCL section says why there is no sweep.
        assert cert["nccl"][0]["status"] == "not_run" and "nccl-tests is not installed" in cert["nccl"][0]["reason"]
    finally:
        for node in ("lab2",):
            if _slurm.is_drained(slurm.node_states([node])[node]["state"]):
                slurm.resume(node)


def test_ladder_on_eight_lab_hosts_samples_during_the_job_and_finds_the_straggler(lab, tmp_path, ledger_path):
    """The 1 -> 2 -> 4 -> 8 ladder on an 8-node play, one script per scale and precision, the node count from the
    allocation; the sampler on every node reads the lab GPU source, into which lab2 GPU 1's heat is injected only
    once a job runs; rank 2 (lab3's, in the 4- and 8-node jobs) is slowed by 1 s per step."""
    slurm = _slurm.Slurm(env=lab.slurm_env)
    for node in lab.names:
        if _slurm.is_drained(slurm.node_states([node])[node]["state"]):
            slurm.resume(node)
    work = tmp_path / "cv"
    (work / "logs").mkdir(parents=True)
    source = tmp_path / "lab_gpus.json"

    def write_source(hot):
        rows = {n: [{"gpu": g, "temp_c": 55.0 + 0.4 * g + (25.0 if (n, g) == hot else 0.0), "power_w": 300.0 + g,
                     "sm_clock_mhz": 1980.0} for g in range(4)] for n in lab.names}
        (tmp_path / "lab_gpus.tmp").write_text(json.dumps(rows))
        os.replace(tmp_path / "lab_gpus.tmp", source)

    write_source(None)
    job = {"name": "cv-ladder", "recipe": "smoke", "partition": lab.slurm, "log_dir": str(work / "logs"),
           "time_limit": "00:05:00", "python": str(lab.python), "program": str(ROLE / "files" / "smoke_train.py"),
           "args": ["--steps", 6, "--warmup", 2, "--gemm-size", 256, "--straggle-rank", 2, "--straggle-s", 1.0],
           "env": {"GLOO_SOCKET_IFNAME": "eth0", "OMP_NUM_THREADS": "1", "RES_OPTIONS": "timeout:1 attempts:1"},
           "rdzv_interface": "eth0", "sampler": str(ROLE / "files" / "gpu_sampler.py"),
           "telemetry_dir": str(work / "telemetry"), "lab_gpu_source": str(source), "sample_interval_ms": 500}
    real_submit = slurm.submit

    def submit_then_inject(*args, **kwargs):
        job_id = real_submit(*args, **kwargs)
        write_source(("lab2", 1))  # after the first submit: nothing hot was written before a job existed
        return job_id

    slurm.submit = submit_then_inject
    ledger = _ledger.open_ledger(ledger_path)
    opts = {"nodes": list(lab.names[:8]), "spares": [], "template": str(ROLE / "templates" / "sbatch.j2"),
            "job": job, "script_dir": str(work), "log_dir": str(work / "logs"), "job_name": "cluster-validation",
            "partition": lab.slurm, "timeout_s": scaled(180), "log_format": "smoke", "ladder_max_nodes": 8,
            "targets": [{"recipe": "smoke", "precision": "fp32", "min_mfu_pct": 0.1, "convention": "torchtitan"}],
            "telemetry_dir": str(work / "telemetry"), "thermal": {"z_threshold": 3.5, "delta_c": 10},
            "stragglers": {"z_threshold": 3.5, "min_slowdown_pct": 100}, "max_attempts": 1, "cluster": "lab",
            "sku": "lab", "out_dir": str(tmp_path / "handoff"), "poll_s": 1.0}
    try:
        out = _cluster_run.run_cluster_validation(opts, ledger, slurm, "cv-ladder-1")
        runs = out["result"]["attempts"][0]["runs"]
        assert [(r["scale_nodes"], r["job"]["state"]) for r in runs] == [
            (1, "COMPLETED"), (2, "COMPLETED"), (4, "COMPLETED"), (8, "COMPLETED")], [r["reason"] for r in runs]
        assert sorted(os.path.basename(p) for p in os.listdir(work) if p.endswith(".sbatch")) == [
            "cluster_validation-fp32-%dn.sbatch" % n for n in (1, 2, 4, 8)]
        rows = {(r.node, r.check): r for r in ledger.current_results(stage="cluster_validation")}
        assert rows[("lab1", "scale_2n_fp32")].evidence["nodes"] == ["lab1", "lab2"]
        assert ("lab3", "scale_2n_fp32") not in rows and rows[("lab3", "scale_4n_fp32")].evidence["scale_nodes"] == 4
        assert rows[("lab8", "scale_8n_fp32")].evidence["scale_nodes"] == 8 and ("lab8", "scale_4n_fp32") not in rows
        # The hot GPU, from samples the job's own samplers took, named as the lab source.
        outlier = rows[("lab2", "telemetry_outliers")]
        assert outlier.status == "fail" and any(o["gpu"] == 1 for o in outlier.observed)
        assert outlier.evidence["samples"]["source"].startswith("lab (injected values from")
        # The straggler, with its measured median step time.
        straggler = rows[("lab3", "stragglers")]
        assert straggler.status == "fail" and straggler.observed[0]["median_s"] > 1.0, straggler.reason
        assert rows[("lab1", "stragglers")].status == "pass"
    finally:
        for node in lab.names:
            if _slurm.is_drained(slurm.node_states([node])[node]["state"]):
                slurm.resume(node)
