"""Slurm client logic against recorded command outputs (Slurm 22.05 formats), and the sbatch template."""

import shlex
import subprocess

import jinja2
import pytest

from ansible_collections.symphony.cluster.plugins.module_utils._host import slurm as _slurm
from ansible_collections.symphony.cluster.plugins.module_utils._core.errors import SchedulerError, ValidationError

RUNNING = ("JobId=7 JobName=cv-smoke UserId=root(0) GroupId=root(0) MCS_label=N/A Priority=1 Nice=0 Account=(null) "
           "QOS=(null) JobState=RUNNING Reason=None Dependency=(null) Requeue=1 Restarts=0 BatchFlag=1 Reboot=0 "
           "ExitCode=0:0 RunTime=00:00:12 TimeLimit=00:30:00 TimeMin=N/A Partition=lab NodeList=lab[1-2] "
           "BatchHost=lab1 NumNodes=2 NumCPUs=4 TRES=cpu=4,mem=48210M,node=2,billing=4 "
           "StdOut=/tmp/logs/cv-smoke-7.out Power=\n")
FAILED = RUNNING.replace("JobState=RUNNING Reason=None", "JobState=FAILED Reason=NonZeroExitCode") \
                .replace("ExitCode=0:0", "ExitCode=1:0")


class FakeSlurm:
    def __init__(self, answers):
        self.answers = answers
        self.calls = []

    def __call__(self, argv, env=None, timeout=60):
        self.calls.append(argv)
        key = argv[0] if argv[0] != "scontrol" else " ".join(argv[:2])
        answer = self.answers[key]
        return answer.pop(0) if isinstance(answer, list) else answer


def test_submit_wait_collect():
    fake = FakeSlurm({"sbatch": (0, "7\n", ""), "scontrol show": [(0, RUNNING, ""), (0, FAILED, "")]})
    clock = iter(range(0, 100, 5))
    slurm = _slurm.Slurm(run=fake, clock=lambda: next(clock), sleep=lambda s: None)
    job = slurm.submit("/tmp/job.sh", nodes=["lab1", "lab3"], partition="lab")
    assert job == "7"
    assert fake.calls[0] == ["sbatch", "--parsable", "--nodes=2", "--nodelist=lab1,lab3", "--partition=lab",
                             "/tmp/job.sh"]
    rec = slurm.wait(job, timeout_s=60)
    assert (rec["state"], rec["exit_code"], rec["nodes"], rec["timed_out"]) == ("FAILED", 1, "lab[1-2]", False)
    assert rec["stdout"] == "/tmp/logs/cv-smoke-7.out" and rec["reason"] == "NonZeroExitCode"


def test_timeout_cancels():
    fake = FakeSlurm({"scontrol show": (0, RUNNING, ""), "scancel": (0, "", "")})
    clock = iter(range(0, 1000, 30))
    slurm = _slurm.Slurm(run=fake, clock=lambda: next(clock), sleep=lambda s: None)
    rec = slurm.wait("7", timeout_s=60)
    assert rec["timed_out"] and rec["state"] == "CANCELLED" and "was RUNNING" in rec["reason"]
    assert ["scancel", "7"] in fake.calls


def test_sacct_fallback_and_unknown_job():
    fake = FakeSlurm({"scontrol show": (1, "", "slurm_load_jobs error: Invalid job id specified"),
                      "sacct": [(0, "7|COMPLETED|0:0|lab[1-2]|00:01:02\n", ""), (0, "", "")]})
    slurm = _slurm.Slurm(run=fake)
    rec = slurm.job("7")
    assert (rec["state"], rec["exit_code"], rec["elapsed"]) == ("COMPLETED", 0, "00:01:02")
    with pytest.raises(SchedulerError, match="Slurm knows no job 7.*Invalid job id"):
        slurm.job("7")


def test_drain_needs_reason_and_valid_name():
    fake = FakeSlurm({"scontrol update": (0, "", ""),
                      "scontrol show": (0, "NodeName=lab2 Arch=x86_64 CoresPerSocket=2 State=IDLE+DRAIN "
                                           "Reason=hot GPU lab2/0 74.0 C [root@2026-11-29T10:00:00]\n", "")})
    slurm = _slurm.Slurm(run=fake)
    slurm.drain("lab2", "cluster_validation: GPU 0 temp outlier")
    assert fake.calls[-1] == ["scontrol", "update", "nodename=lab2", "state=DRAIN",
                              "reason=cluster_validation: GPU 0 temp outlier"]
    with pytest.raises(ValidationError, match="needs a reason"):
        slurm.drain("lab2", " ")
    with pytest.raises(ValidationError, match="not a Slurm node name"):
        slurm.drain("lab2 state=resume", "x")
    states = slurm.node_states(["lab2"])
    assert states["lab2"]["state"] == "IDLE+DRAIN" and states["lab2"]["reason"].startswith("hot GPU lab2/0 74.0 C")
    assert _slurm.is_drained(states["lab2"]["state"])


def test_sbatch_refusal_is_scheduler_error():
    fake = FakeSlurm({"sbatch": (1, "", "sbatch: error: Batch job submission failed: Requested node "
                                        "configuration is not available\n")})
    with pytest.raises(SchedulerError, match="Requested node configuration is not available"):
        _slurm.Slurm(run=fake).submit("/tmp/job.sh")


def test_missing_client_is_tool_not_found():
    from ansible_collections.symphony.cluster.plugins.module_utils._core.errors import ToolNotFoundError
    with pytest.raises(ToolNotFoundError, match="not installed"):
        _slurm.run_command(["sbatch-does-not-exist", "--version"])


def render_sbatch(repo_root, job):
    from ansible.plugins.filter.core import FilterModule
    env = jinja2.Environment(undefined=jinja2.StrictUndefined, trim_blocks=True, keep_trailing_newline=True)
    env.filters.update({k: v for k, v in FilterModule().filters().items() if k != "default"})
    return env.from_string((repo_root / "roles/cluster_validation/templates/sbatch.j2").read_text()).render(job=job)


def test_sbatch_template_renders_nccl_env_and_torchrun(repo_root, tmp_path):
    job = {"name": "cv-llama3-8b", "recipe": "torchtitan", "precision": "bf16", "nodes": 4, "gpus_per_node": 8,
           "procs_per_node": 8, "partition": "gpu", "log_dir": str(tmp_path), "python": "/opt/venv/bin/python",
           "module": True, "program": "torchtitan.train", "args": ["--job.config_file", "/opt/titan/llama3_8b.toml"],
           "env": {"NCCL_IB_HCA": "mlx5_0,mlx5_3", "NCCL_SOCKET_IFNAME": "bond0", "UCX_TLS": "rc"},
           "rdzv_interface": "bond0"}
    text = render_sbatch(repo_root, job)
    assert "#SBATCH --nodes=4\n" in text and "#SBATCH --gpus-per-node=8\n" in text
    assert "export NCCL_IB_HCA=mlx5_0,mlx5_3\n" in text and "export NCCL_SOCKET_IFNAME=bond0\n" in text
    assert "--nproc_per_node=8" in text and "--master_addr=\"${RDZV_HOST}\"" in text
    assert "--module torchtitan.train --job.config_file /opt/titan/llama3_8b.toml" in text
    path = tmp_path / "job.sh"
    path.write_text(text)
    assert subprocess.run(["bash", "-n", str(path)], check=False).returncode == 0
    # A value with spaces stays one word for the shell.
    job["env"]["NCCL_DEBUG_SUBSYS"] = "INIT NET"
    assert "export NCCL_DEBUG_SUBSYS=%s\n" % shlex.quote("INIT NET") in render_sbatch(repo_root, job)


def _rdzv_port(text, job_id):
    """Evaluate the script's RDZV_PORT line the way bash would for one Slurm job id."""
    line = next(row for row in text.splitlines() if row.startswith("RDZV_PORT="))
    out = subprocess.run(["bash", "-c", "%s; echo $RDZV_PORT" % line], env={"SLURM_JOB_ID": str(job_id)},
                         capture_output=True, text=True, check=True)
    return int(out.stdout)


def test_sbatch_rendezvous_port_per_job_unless_fixed(repo_root, tmp_path):
    """Two attempts on the same first node get different ports (the last one's socket may linger)."""
    job = {"name": "cv", "recipe": "smoke", "precision": "fp32", "nodes": 2, "log_dir": str(tmp_path),
           "python": "/usr/bin/python3", "program": "smoke_train.py"}
    text = render_sbatch(repo_root, job)
    assert _rdzv_port(text, 41) == 20041 and _rdzv_port(text, 42) == 20042
    assert 20000 <= _rdzv_port(text, 123456789) < 30000
    job["rdzv_port"] = 29400
    assert _rdzv_port(render_sbatch(repo_root, job), 41) == 29400


# sbatch(1): "--parsable ... job id number and the cluster name are separated by a semicolon"; without
# --parsable sbatch prints "Submitted batch job N" (plus " on cluster X" with -M, src/sbatch/sbatch.c).
@pytest.mark.parametrize("stdout, expected", [
    ("7\n", ("7", None)),
    ("8123;gpu-west\n", ("8123", "gpu-west")),
    ("Submitted batch job 42\n", ("42", None)),
    ("Submitted batch job 42 on cluster gpu-east\n", ("42", "gpu-east")),
    ("job_submit/lua: partition set to lab\n9;lab\n", ("9", "lab")),
    ("", None),
    ("sbatch: warning: no job id\n", None),
])
def test_parse_submitted_answers(stdout, expected):
    assert _slurm.parse_submitted(stdout) == expected


def test_federated_answer_follows_with_dash_m():
    """A job answered "N;cluster" is followed, cancelled and its node drained on that cluster (-M)."""
    fake = FakeSlurm({"sbatch": (0, "8123;gpu-west\n", "sbatch: warning: can't honor --gpus-per-node\n"),
                      "scontrol show": (0, "CLUSTER: gpu-west\n" + RUNNING.replace("JobId=7", "JobId=8123"), ""),
                      "scontrol -M": (0, "CLUSTER: gpu-west\n" + RUNNING.replace("JobId=7", "JobId=8123"), ""),
                      "scancel": (0, "", "")})
    clock = iter(range(0, 1000, 30))
    slurm = _slurm.Slurm(run=fake, clock=lambda: next(clock), sleep=lambda s: None)
    job = slurm.submit("/tmp/job.sh")
    assert job == "8123" and slurm.cluster_of(job) == "gpu-west"
    rec = slurm.wait(job, timeout_s=60)
    assert fake.calls[1] == ["scontrol", "-M", "gpu-west", "show", "job", "-o", "8123"]
    assert rec["state"] == "CANCELLED" and rec["cluster"] == "gpu-west" and rec["nodes"] == "lab[1-2]"
    assert ["scancel", "-M", "gpu-west", "8123"] in fake.calls
    # A job reference given as "N;cluster" (training_launch state=cancelled) goes to its cluster too.
    _slurm.Slurm(run=fake).cancel("77;gpu-east")
    assert fake.calls[-1] == ["scancel", "-M", "gpu-east", "77"]
    fake.answers["scontrol -M"] = (0, "", "")
    slurm.drain("lab2", "hot", cluster=slurm.cluster_of(job))
    assert fake.calls[-1] == ["scontrol", "-M", "gpu-west", "update", "nodename=lab2", "state=DRAIN", "reason=hot"]


def test_sbatch_without_job_id_says_the_job_may_be_queued():
    fake = FakeSlurm({"sbatch": (0, "queued\n", "")})
    with pytest.raises(SchedulerError, match="may be queued.*squeue --name=cv-a1"):
        _slurm.Slurm(run=fake).submit("/tmp/job.sh", job_name="cv-a1")


def test_configured_cluster_goes_to_every_command():
    fake = FakeSlurm({"sbatch": (0, "5\n", ""), "squeue": (0, "CLUSTER: b\n11\n12\n", "")})
    slurm = _slurm.Slurm(run=fake, cluster="b")
    assert slurm.submit("/tmp/j.sh") == "5" and fake.calls[0][:4] == ["sbatch", "--parsable", "-M", "b"]
    assert slurm.running_jobs("lab1") == ["11", "12"] and fake.calls[-1][:3] == ["squeue", "-M", "b"]
