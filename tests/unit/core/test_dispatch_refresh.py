"""Every stage refreshes the technicians' dispatch list (issue 25: only pre_deployment wrote it, so a node burn-in
failed reached no technician until someone ran the handoff report)."""

import json
import os
import subprocess
import sys
import threading

import pytest
import yaml

from ansible_collections.symphony.cluster.plugins.module_utils._core import gate as g
from ansible_collections.symphony.cluster.plugins.module_utils._core.dispatch import write_rows
from ansible_collections.symphony.cluster.plugins.module_utils._core.errors import ReportError
from ansible_collections.symphony.cluster.plugins.module_utils._core.ledger import open_ledger

STAGE_ROLES = ("provisioning", "burn_in", "cluster_validation", "fleet_audit")


def _tasks(items):
    """Every task of a tasks file, blocks flattened, in order."""
    for task in items or []:
        yield task
        for key in ("block", "rescue", "always"):
            yield from _tasks(task.get(key))


def _refreshes(task):
    inc = task.get("ansible.builtin.include_role") or {}
    return inc.get("name") == "symphony.cluster.common" and inc.get("tasks_from") == "dispatch"


@pytest.mark.parametrize("role", STAGE_ROLES)
def test_every_stage_refreshes_the_dispatch_list_before_its_gate_fails_the_host(repo_root, role):
    tasks = []
    for path in sorted((repo_root / "roles" / role / "tasks").glob("*.yml")):
        tasks += list(_tasks(yaml.safe_load(path.read_text())))
    names = [t.get("name") for t in tasks]
    refresh = [i for i, t in enumerate(tasks) if _refreshes(t)]
    assert refresh, "%s never refreshes the dispatch list" % role
    gate_fails = [i for i, t in enumerate(tasks) if "ansible.builtin.fail" in t and t.get("name") == "Gate of this node"]
    # run_once skips a play whose hosts all failed: the refresh must come before the host fails
    assert all(refresh[0] < i for i in gate_fails), names


def test_the_refresh_writes_every_stages_open_problems(repo_root, tmp_path):
    ledger_path = str(tmp_path / "ledger.sqlite")
    ledger = open_ledger(ledger_path)
    graph = g.CheckGraph("burn_in", [g.CheckSpec("fio_seq_read")])
    results = graph.run("n1", "bi1", {"fio_seq_read": lambda c: g.failed("fio read 971 MB/s, floor 5500 MB/s",
                                                                         "replace the NVMe drive")})
    ledger.record_results(results)
    ledger.record_gate(g.compute_gate(graph, results), "bi1")
    ledger.close()
    play = [{"hosts": "localhost", "gather_facts": False, "connection": "local",
             "tasks": [{"name": "refresh", "ansible.builtin.include_role": {"name": "symphony.cluster.common",
                                                                            "tasks_from": "dispatch"}}]}]
    (tmp_path / "play.yml").write_text(yaml.safe_dump(play))
    env = dict(os.environ, ANSIBLE_CONFIG=str(repo_root / "ansible.cfg"),
               ANSIBLE_COLLECTIONS_PATH=str(repo_root / "build" / "collections"), ANSIBLE_NOCOLOR="1")
    cmd = [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", "localhost,",
           str(tmp_path / "play.yml"), "-e", "symphony_ledger=%s" % ledger_path,
           "-e", "handoff_report_dest=%s" % (tmp_path / "report"),
           "-e", "handoff_report_dispatch_dir=%s" % (tmp_path / "dispatch"), "-e", "ansible_python_interpreter=%s" % sys.executable]
    out = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180, check=False)
    assert out.returncode == 0, out.stdout + out.stderr
    rows = json.loads((tmp_path / "dispatch" / "dispatch-latest.json").read_text())["rows"]
    assert [(r["hostname"], r["stage"], r["check"]) for r in rows] == [("n1", "burn_in", "fio_seq_read")]
    assert (tmp_path / "report" / "index.html").is_file()


def test_concurrent_refreshes_never_collide(tmp_path):
    # every stage (and two runs at once) rewrites dispatch-latest: one shared ".tmp" made os.replace race
    errors = []

    def write(i):
        try:
            for _attempt in range(25):
                write_rows(str(tmp_path), "dispatch-latest", [], writer=i)
        except ReportError as exc:  # the race: the other writer's replace took the shared temporary file
            errors.append(exc)
    threads = [threading.Thread(target=write, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and "writer" in json.loads((tmp_path / "dispatch-latest.json").read_text())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dispatch-latest.csv", "dispatch-latest.json"]


@pytest.mark.parametrize("per_gate_reads", [0, 64])
def test_dispatch_list_reads_open_gates_alone_with_the_same_rows(tmp_path, monkeypatch, per_gate_reads):
    """Issue 27: with few open gates only their results are read; the rows are those of the whole read (the latest
    result of each check, a rerun's included), whichever way."""
    from ansible_collections.symphony.cluster.plugins.module_utils._core import dispatch

    ledger = open_ledger(str(tmp_path / "ledger.sqlite"))
    graph = g.CheckGraph("burn_in", [g.CheckSpec("fio_seq_read"), g.CheckSpec("dcgm_diag")])
    for run, host, fio in (("r1", "n1", "fail"), ("r1", "n2", "fail"), ("r1", "n3", "pass"), ("r2", "n2", "pass")):
        results = graph.run(host, run, {"fio_seq_read": lambda c, fio=fio: g.failed("fio read 971 MB/s",
                                                                                    "replace the NVMe drive")
                                        if fio == "fail" else g.passed("ok"),
                                        "dcgm_diag": lambda c: g.passed("ok")})
        ledger.record_results(results)
        ledger.record_gate(g.compute_gate(graph, results), run)
    whole = dispatch.dispatch_list(ledger, results=ledger.current_results())
    reads = []
    real = type(ledger).current_results
    monkeypatch.setattr(type(ledger), "current_results", lambda self, *a: reads.append(a) or real(self, *a))
    monkeypatch.setattr(dispatch, "PER_GATE_READS", per_gate_reads)
    rows = dispatch.dispatch_list(ledger)
    assert rows == whole and [r["hostname"] for r in rows] == ["n1"] and "971" in json.dumps(rows)
    assert reads == ([("n1", "burn_in")] if per_gate_reads else [()])
    ledger.close()
