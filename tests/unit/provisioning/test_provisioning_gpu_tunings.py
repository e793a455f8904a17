"""GPU tunings against a fake nvidia-smi on PATH that keeps each GPU's settings in a state file.

The fake prints ``--query-gpu ... --format=csv,nounits`` the way nvidia-smi does (header with units, ``Enabled`` /
``Disabled``, two-decimal watts) and honours ``-i N -pm 0|1`` and ``-i N -pl W`` within the GPU's limits.  ``stuck``
makes it report success while nothing changes (the step must still fail: verify, don't trust)."""

import json
import os
import sys
import textwrap

import pytest

from ansible_collections.symphony.cluster.plugins.module_utils._core.errors import ParseError, ValidationError
from ansible_collections.symphony.cluster.plugins.module_utils._provision.gpu_tunings import (
    missing_cmdline, plan, query_gpus, run_tunings)
from timescale import scaled

FAKE = textwrap.dedent('''\
    #!{python}
    import json, sys
    state_path = {state!r}
    state = json.load(open(state_path))
    args = sys.argv[1:]
    calls = state.setdefault("calls", [])
    calls.append(args)
    if args and args[0].startswith("--query-gpu="):
        fields = args[0].split("=", 1)[1].split(",")
        units = {{"power.limit": " [W]", "power.min_limit": " [W]", "power.max_limit": " [W]"}}
        print(", ".join(f + units.get(f, "") for f in fields))
        for i, gpu in enumerate(state["gpus"]):
            values = {{"index": str(i), "persistence_mode": "Enabled" if gpu["pm"] else "Disabled",
                      "power.limit": "%.2f" % gpu["pl"], "power.min_limit": "200.00", "power.max_limit": "700.00"}}
            print(", ".join(values[f] for f in fields))
    elif len(args) == 4 and args[0] == "-i":
        gpu = state["gpus"][int(args[1])]
        if args[2] == "-pl":
            watts = float(args[3])
            if not 200 <= watts <= 700:
                print("Provided power limit %.2f W is not a valid power limit which should be between "
                      "200.00 W and 700.00 W for GPU %s" % (watts, args[1]))
                sys.exit(2)
            if not state.get("stuck"):
                gpu["pl"] = watts
            print("Power limit for GPU %s was set to %.2f W from %.2f W." % (args[1], watts, gpu["pl"]))
        elif args[2] == "-pm":
            if not state.get("stuck"):
                gpu["pm"] = args[3] == "1"
            print("Enabled persistence mode for GPU %s." % args[1])
    else:
        print("unexpected arguments", args)
        sys.exit(3)
    json.dump(state, open(state_path, "w"))
''')


@pytest.fixture
def fake_smi(tmp_path, monkeypatch):
    """``make(gpus=[{"pm": bool, "pl": W}], stuck=False)`` -> read_state(); nvidia-smi on PATH."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    state_path = tmp_path / "smi-state.json"
    monkeypatch.setenv("PATH", "%s%s%s" % (bin_dir, os.pathsep, os.environ["PATH"]))

    def make(gpus, stuck=False):
        state_path.write_text(json.dumps({"gpus": gpus, "stuck": stuck}))
        exe = bin_dir / "nvidia-smi"
        exe.write_text(FAKE.format(python=sys.executable, state=str(state_path)))
        exe.chmod(0o755)
        return lambda: json.loads(state_path.read_text())
    return make


def _cmdline(tmp_path, text="BOOT_IMAGE=/vmlinuz root=tmpfs iommu=pt intel_iommu=on pci=realloc=off quiet\n"):
    path = tmp_path / "cmdline"
    path.write_text(text)
    return str(path)


def test_query_reads_modes_and_watts(fake_smi):
    fake_smi([{"pm": False, "pl": 700.0}, {"pm": True, "pl": 650.0}])
    assert query_gpus() == {
        0: {"persistence_mode": False, "power_limit_w": 700.0, "min_limit_w": 200.0, "max_limit_w": 700.0},
        1: {"persistence_mode": True, "power_limit_w": 650.0, "min_limit_w": 200.0, "max_limit_w": 700.0}}


def test_plan_only_what_differs_and_refuses_out_of_range():
    gpus = {0: {"persistence_mode": True, "power_limit_w": 700.0, "min_limit_w": 200.0, "max_limit_w": 700.0},
            1: {"persistence_mode": False, "power_limit_w": 699.8, "min_limit_w": 200.0, "max_limit_w": 700.0},
            2: {"persistence_mode": True, "power_limit_w": 650.0, "min_limit_w": 200.0, "max_limit_w": 700.0}}
    changes = plan(gpus, persistence_mode=True, power_limit_w=700)
    # 699.8 W is 700 W as nvidia-smi rounds it; GPU 2 is 50 W low
    assert [(c["gpu"], c["setting"], c["argv"][-2:]) for c in changes] == [
        (1, "persistence_mode", ["-pm", "1"]), (2, "power_limit_w", ["-pl", "700"])]
    assert plan(gpus) == []
    with pytest.raises(ValidationError, match=r"GPU 0 accepts a power limit of 200.0..700.0 W, not 750 W"):
        plan(gpus, power_limit_w=750)


def test_missing_cmdline_tokens_in_order():
    assert missing_cmdline(["iommu=pt", "pci=realloc=off", "amd_iommu=on"], "ro iommu=pt quiet") == \
        ["pci=realloc=off", "amd_iommu=on"]


def test_check_apply_check_apply(fake_smi, tmp_path):
    """community.crypto style: check reports the change and makes none; apply makes it; both again report none."""
    state = fake_smi([{"pm": False, "pl": 650.0}, {"pm": True, "pl": 700.0}])
    cmdline = _cmdline(tmp_path)
    kwargs = {"persistence_mode": True, "power_limit_w": 700, "kernel_cmdline": ["iommu=pt", "intel_iommu=on"],
              "cmdline_path": cmdline}

    check = run_tunings(check_mode=True, **kwargs)
    assert check["status"] == "not_run" and len(check["changes"]) == 2
    assert all(c[0].startswith("--query-gpu") for c in state()["calls"])  # nothing but queries
    assert state()["gpus"][0] == {"pm": False, "pl": 650.0}

    applied = run_tunings(**kwargs)
    assert applied["status"] == "pass", applied["reason"]
    assert [c["argv"][1:] for c in applied["changes"]] == [["-i", "0", "-pm", "1"], ["-i", "0", "-pl", "700"]]
    assert state()["gpus"] == [{"pm": True, "pl": 700.0}, {"pm": True, "pl": 700.0}]
    assert "2 GPU(s) now at persistence mode on, power limit 700 W" in applied["reason"]
    assert applied["parts"]["kernel_cmdline"]["status"] == "pass"

    calls = len(state()["calls"])
    again = run_tunings(check_mode=True, **kwargs)
    assert again["status"] == "pass" and again["changes"] == []
    rerun = run_tunings(**kwargs)
    assert rerun["status"] == "pass" and rerun["changes"] == []
    assert "already at" in rerun["reason"]
    # the reruns only queried
    assert all(c[0].startswith("--query-gpu") for c in state()["calls"][calls:])


def test_a_setting_the_fresh_query_does_not_read_fails(fake_smi):
    fake_smi([{"pm": True, "pl": 600.0}], stuck=True)
    out = run_tunings(power_limit_w=700)
    assert out["status"] == "fail"
    assert "GPU 0 power_limit_w reads 600.0, wanted 700" in out["reason"]
    assert out["remediation"]


def test_out_of_range_limit_changes_nothing(fake_smi):
    state = fake_smi([{"pm": True, "pl": 600.0}])
    with pytest.raises(ValidationError, match="not 900 W") as info:
        run_tunings(power_limit_w=900)
    assert info.value.where == "power_limit_w"
    assert all(c[0].startswith("--query-gpu") for c in state()["calls"])


def test_no_nvidia_smi_is_not_run_and_cmdline_still_checked(tmp_path, monkeypatch):
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    out = run_tunings(persistence_mode=True, power_limit_w=700, kernel_cmdline=["iommu=pt", "nvme_core.multipath=N"],
                      cmdline_path=_cmdline(tmp_path))
    assert out["parts"]["gpu"]["status"] == "not_run" and "nvidia-smi not found on PATH" in out["reason"]
    # a missing kernel parameter outranks the part that could not run
    assert out["status"] == "fail" and "kernel command line lacks nvme_core.multipath=N" in out["reason"]
    assert "boot entry" in out["remediation"]


def test_nothing_asked_passes_without_tools(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    out = run_tunings()
    assert out["status"] == "pass" and out["parts"] == {} and "no GPU tuning" in out["reason"]


def test_unreadable_cmdline_names_the_file(tmp_path):
    with pytest.raises(ParseError) as info:
        run_tunings(kernel_cmdline=["iommu=pt"], cmdline_path=str(tmp_path / "nope"))
    assert info.value.where == str(tmp_path / "nope")


PLAYBOOK = """
- hosts: localhost
  gather_facts: false
  environment:
    PATH: "{bin}:{{{{ ansible_env.PATH | default('/usr/bin:/bin') }}}}"
  tasks:
    - name: check
      symphony.cluster.gpu_tunings: &args
        persistence_mode: true
        power_limit_w: 700
        kernel_cmdline: [iommu=pt]
        cmdline_path: {cmdline}
      check_mode: true
      diff: true
      register: check1
    - name: apply
      symphony.cluster.gpu_tunings: *args
      diff: true
      register: apply1
    - name: check again
      symphony.cluster.gpu_tunings: *args
      check_mode: true
      register: check2
    - name: apply again
      symphony.cluster.gpu_tunings: *args
      register: apply2
    - name: a kernel parameter the running kernel lacks fails the task
      symphony.cluster.gpu_tunings:
        kernel_cmdline: [nvme_core.multipath=N]
        cmdline_path: {cmdline}
      register: missing
      ignore_errors: true
    - name: out of range fails the task, naming the field
      symphony.cluster.gpu_tunings:
        power_limit_w: 900
      register: bad
      ignore_errors: true
    - ansible.builtin.copy:
        dest: {out}
        content: "{{{{ dict(check1=check1, apply1=apply1, check2=check2, apply2=apply2, bad=bad, missing=missing) | to_json }}}}"
        mode: "0644"
"""


def test_module_check_apply_check_apply_with_diff(fake_smi, tmp_path, repo_root):
    """The module through ansible-playbook: changed only on the first apply; --diff shows GPU 1 before/after."""
    import subprocess
    state = fake_smi([{"pm": True, "pl": 700.0}, {"pm": False, "pl": 600.0}])
    out = tmp_path / "results.json"
    play = tmp_path / "play.yml"
    play.write_text(PLAYBOOK.format(bin=tmp_path / "bin", cmdline=_cmdline(tmp_path), out=out))
    env = dict(os.environ, ANSIBLE_CONFIG=str(repo_root / "ansible.cfg"),
               ANSIBLE_COLLECTIONS_PATH=str(repo_root / "build" / "collections"))
    playbook = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
    proc = subprocess.run([playbook, "-i", "localhost,", "-c", "local",
                           "-e", "ansible_python_interpreter=" + sys.executable, str(play)],
                          env=env, capture_output=True, text=True, timeout=scaled(300), check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    res = json.loads(out.read_text())
    assert res["check1"]["changed"] and res["check1"]["status"] == "not_run"
    assert res["check1"]["diff"] == {"before": {"GPU1.persistence_mode": False, "GPU1.power_limit_w": 600.0},
                                     "after": {"GPU1.persistence_mode": True, "GPU1.power_limit_w": 700.0}}
    assert res["apply1"]["changed"] and res["apply1"]["status"] == "pass"
    assert not res["check2"]["changed"] and not res["apply2"]["changed"] and res["apply2"]["status"] == "pass"
    assert state()["gpus"][1] == {"pm": True, "pl": 700.0}
    assert res["bad"]["failed"] and "not 900 W" in res["bad"]["msg"]
    assert res["missing"]["failed"] and res["missing"]["status"] == "fail"
    assert res["missing"]["msg"] == "kernel command line lacks nvme_core.multipath=N"


def test_na_power_limit_that_never_sets_reads_na(fake_smi, monkeypatch):
    """A GPU that reports [N/A] and refuses -pl: the step fails and says [N/A], not None."""
    fake_smi([{"pm": True, "pl": 600.0}], stuck=True)
    real = query_gpus

    def na(timeout_s=60.0):
        gpus = real(timeout_s)
        gpus[0]["power_limit_w"] = None
        return gpus
    monkeypatch.setattr("ansible_collections.symphony.cluster.plugins.module_utils._provision.gpu_tunings.query_gpus", na)
    out = run_tunings(power_limit_w=500)
    assert out["status"] == "fail" and "GPU 0 power_limit_w reads [N/A], wanted 500" in out["reason"]
