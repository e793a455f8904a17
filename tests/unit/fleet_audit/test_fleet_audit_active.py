"""Active health as a preemptible Slurm job: the sbatch options, preemption, a busy node, no Slurm."""

from ansible_collections.symphony.cluster.plugins.module_utils._fleet_audit import active
from ansible_collections.symphony.cluster.plugins.module_utils._host.slurm import Slurm


class FakeSlurm:
    """``sbatch``/``scontrol``/``squeue`` answers: ``state`` the job ends in, ``running`` on the node afterwards."""

    def __init__(self, state="COMPLETED", running="", refuse=None):
        self.state, self.running, self.refuse, self.argv = state, running, refuse, []

    def __call__(self, argv, env=None, timeout=60):
        self.argv.append(argv)
        if argv[0] == "sbatch":
            return (1, "", self.refuse) if self.refuse else (0, "4242\n", "")
        if argv[:3] == ["scontrol", "show", "job"]:
            return 0, "JobId=4242 JobState=%s ExitCode=0:0 NodeList=gpu01\n" % self.state, ""
        if argv[0] == "squeue":
            return 0, self.running, ""
        return 1, "", "unexpected %s" % argv


def _run(tmp_path, fake, output="", not_expected=()):
    out_path = tmp_path / "job.out"
    out_path.write_text(output)
    return active.run_active("gpu01", "audit", str(tmp_path / "job.sh"), str(out_path), not_expected, qos="scavenger",
                             slurm=Slurm(run=fake, sleep=lambda s: None))


def test_the_job_asks_for_an_idle_node_and_yields(tmp_path):
    fake = FakeSlurm()
    _run(tmp_path, fake, "".join("SYMPHONY_CHECK %s 0\n" % c for c in active.CHECKS))
    sbatch = fake.argv[0]
    # sbatch(1) has no --immediate (salloc/srun only): the deadline keeps the job from waiting for the node.
    for option in ("--deadline=now+11minutes", "--exclusive", "--no-requeue", "--partition=audit", "--qos=scavenger",
                   "--nodelist=gpu01"):
        assert option in sbatch
    script = (tmp_path / "job.sh").read_text()
    assert "dcgmi diag -r 1" in script and script.count("SYMPHONY_CHECK") == len(active.CHECKS)


def test_a_preempted_check_is_not_run_naming_the_customer_job(tmp_path):
    out = _run(tmp_path, FakeSlurm(state="PREEMPTED", running="5151\n"), "SYMPHONY_CHECK active_gpu_query 0\n")
    assert {o.status for o in out.values()} == {"not_run"}
    assert out["active_dcgm_r1"].reason.startswith("preempted by job 5151")


def test_exit_statuses_pass_fail_and_tool_absent(tmp_path):
    text = ("SYMPHONY_CHECK active_gpu_query 0\nSYMPHONY_CHECK active_dcgm_r1 226\n"
            "SYMPHONY_CHECK active_nccl_single 127\n")
    out = _run(tmp_path, FakeSlurm(), text)
    assert out["active_gpu_query"].status == "pass"
    assert out["active_dcgm_r1"].status == "fail" and "exited 226" in out["active_dcgm_r1"].reason
    assert out["active_nccl_single"].status == "not_run"
    assert out["active_memtest"].status == "not_run" and "before reporting" in out["active_memtest"].reason


def test_a_job_removed_at_its_deadline_is_node_busy(tmp_path):
    # squeue/scontrol JOB STATE CODES: DEADLINE "terminated on deadline".
    out = _run(tmp_path, FakeSlurm(state="DEADLINE"))
    assert {o.status for o in out.values()} == {"not_run"} and "node busy" in out["active_memtest"].reason


def test_a_busy_node_is_not_run(tmp_path):
    out = _run(tmp_path, FakeSlurm(refuse="sbatch: error: Unable to allocate resources: Requested nodes are busy "
                                          "(--immediate)"))
    assert {o.status for o in out.values()} == {"not_run"} and "busy" in out["active_memtest"].reason


def test_the_lab_runs_only_the_memory_test(tmp_path):
    fake = FakeSlurm()
    out = _run(tmp_path, fake, "SYMPHONY_CHECK active_memtest 0\n", not_expected=["gpus"])
    assert out["active_memtest"].status == "pass"
    assert out["active_gpu_query"].status == "not_run" and "no gpus" in out["active_gpu_query"].reason
    assert "nvidia-smi" not in (tmp_path / "job.sh").read_text()


def test_without_slurm_every_check_is_not_run(tmp_path, monkeypatch):
    monkeypatch.setattr(active, "which", lambda tool: None)
    out = active.run_active("gpu01", "audit", str(tmp_path / "job.sh"), str(tmp_path / "job.out"))
    assert {o.reason for o in out.values()} == {"Slurm is not installed on the submit host (no sbatch)"}
