"""Lab lifecycle: `up` after a crash cleans up first, `down` removes every namespace, link, process and file.

Leaves the lab as it found it (brought back up if it was up before). Needs root (CI is root).
"""

import os
import pathlib
import subprocess
import sys

import pytest

symphony_lab = pytest.importorskip("symphony_lab")
from symphony_lab import _lab, _proc  # noqa: E402  (after importorskip)
from timescale import scaled

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the lab needs root (network namespaces, sshd, slurmd)")


def _netns():
    return set(subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=True).stdout.split())


def _links():
    out = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True, check=True).stdout
    return {line.split(":", 2)[1].strip().split("@")[0] for line in out.splitlines()}


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "symphony_lab"] + list(args), capture_output=True, text=True,
                          timeout=scaled(120), check=False)


def test_lab_up_after_crash_then_down_leaves_nothing():
    before = None
    try:
        loaded = symphony_lab.Lab.load()
        if loaded.is_up():
            before = loaded.n
    except symphony_lab.LabError:
        pass
    lab = symphony_lab.Lab(n=2).up(fresh=True)
    try:
        state = lab._read_state()
        old_pids = {p["role"]: p["pid"] for p in state["pids"]}
        assert set(old_pids) >= {"sshd@lab1", "sshd@lab2", "slurmctld", "slurmd@lab1", "slurmd@lab2"}
        # A crash: slurmctld killed hard and the state file lost, namespaces and the other daemons left behind.
        os.kill(old_pids["slurmctld"], 9)
        lab.state_file.unlink()
        assert not lab.is_up()
        up = _cli("up", "-n", "2")
        assert up.returncode == 0, up.stderr
        assert "lab1=10.77.0.11, lab2=10.77.0.12" in up.stdout
        relab = symphony_lab.Lab.load()
        assert relab.is_up()
        new_pids = {p["role"]: p["pid"] for p in relab._read_state()["pids"]}
        stale = [role for role, pid in old_pids.items() if _proc.alive(pid) and new_pids.get(role) != pid]
        assert stale == [], "processes of the crashed lab still running: %s" % stale
        assert relab.node_states() == {"lab1": "idle", "lab2": "idle"}
        assert relab.ssh("lab2", "hostname").stdout.strip() == "lab2"
    finally:
        down = _cli("down")
    assert down.returncode == 0, down.stderr
    assert not _netns() & {"lab1", "lab2"}
    assert not {name for name in _links() if name.startswith("symlab")}
    assert not lab.root.exists()
    assert not _lab.UTS_DIR.exists()
    assert _proc.pids_with_marker(str(lab.root)) == []
    assert _proc.pids_with_marker(_lab.MUNGE_MARKER) == []
    etc = pathlib.Path("/etc/slurm/slurm.conf")
    assert not (etc.is_symlink() and os.readlink(etc) == str(lab.slurm_conf))
    assert _cli("status").returncode == 1
    if before:
        symphony_lab.Lab(n=before).up()
