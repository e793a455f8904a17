"""pre_deployment followed by more work in the same play: by default a host whose gate passed ends the play at the
end of the role (cheap at 10,000 hosts), so nothing after the role runs on it; with pre_deployment_end_passed_hosts
false the passing hosts go on and the failing ones still fail with their reason.

Emulator only (the molecule pre_deployment scenario's twin and defects, a SQLite ledger; no lab hosts).
"""

import os
import pathlib
import subprocess
import sys

import pytest
import yaml

from timescale import scaled

symphony_emulator = pytest.importorskip("symphony_emulator.fleet")

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCENARIO = ROOT / "molecule" / "pre_deployment" / "data"


def _ansible(tmp_path, name, bmc_map, plays, **extra_vars):
    """ansible-playbook of ``plays`` over the scenario's twin (its own ledger) against the emulated BMCs."""
    doc = yaml.safe_load((SCENARIO / "pre_deployment.twin.yml").read_text())
    doc.update(ledger=str(tmp_path / ("%s.sqlite" % name)), sku_dir=str(ROOT / "skus"))
    inventory = tmp_path / ("%s.twin.yml" % name)
    inventory.write_text(yaml.safe_dump(doc, sort_keys=False))
    playbook = tmp_path / ("%s.play.yml" % name)
    playbook.write_text(yaml.safe_dump(plays))
    extra = {"pre_deployment_bmc_map": str(bmc_map), "pre_deployment_dispatch_dir": str(tmp_path / name),
             "pre_deployment_read_timeout": 2, "pre_deployment_connect_timeout": 2, "pre_deployment_retries": 1,
             "pre_deployment_optional_checks": ["lease_captured", "address_reserved"]}
    extra.update(extra_vars)
    (tmp_path / ("%s.vars.yml" % name)).write_text(yaml.safe_dump(extra))
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_COLLECTIONS_PATH=str(ROOT / "build" / "collections"))
    cmd = [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", str(inventory), str(playbook),
           "-e", "@%s" % (tmp_path / ("%s.vars.yml" % name))]
    return subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=scaled(600),
                          check=False)


def _run(tmp_path, name, bmc_map, end_passed):
    return _ansible(tmp_path, name, bmc_map, [{
        "name": "pre_deployment, then more work on the same hosts", "hosts": "all", "gather_facts": False,
        "roles": [{"role": "symphony.cluster.pre_deployment"}],
        "tasks": [{"name": "After the role", "ansible.builtin.debug": {"msg": "after-the-role {{ inventory_hostname }}"}}],
    }], pre_deployment_end_passed_hosts=end_passed)


def _after(out):
    return {line.split("after-the-role ")[1].strip().strip('"') for line in out.stdout.splitlines()
            if "msg: after-the-role " in line or '"msg": "after-the-role ' in line}


def test_passing_hosts_end_by_default_and_go_on_when_asked(tmp_path):
    bmc_map = tmp_path / "bmcs.json"
    with symphony_emulator.Fleet(str(SCENARIO / "pre_deployment.twin.yml"), str(ROOT / "skus"),
                                 defects=str(SCENARIO / "defects.yml"), map_path=str(bmc_map),
                                 state_dir=str(tmp_path / "emu")):
        ended = _run(tmp_path, "ended", bmc_map, True)
        going = _run(tmp_path, "going", bmc_map, False)
    # exit 2: the seeded defects fail their hosts' gates in both runs
    assert ended.returncode == 2 and going.returncode == 2, ended.stdout[-3000:] + going.stdout[-3000:]
    assert _after(ended) == set()
    passed = _after(going)
    assert passed, going.stdout[-3000:]
    for host in passed:   # the hosts that went on are exactly the passing ones: no failed host slips through
        assert "fatal: [%s]" % host not in going.stdout
    assert "pre_deployment gate fail" in going.stdout


def _run_playbook(tmp_path, name, bmc_map, batch):
    """playbooks/pre_deployment.yml (its two plays), then one more play over every host, as site.yml goes on."""
    return _ansible(tmp_path, name, bmc_map, [
        {"name": "Stage 1", "ansible.builtin.import_playbook": str(ROOT / "playbooks" / "pre_deployment.yml")},
        {"name": "The next stage", "hosts": "all", "gather_facts": False,
         "tasks": [{"name": "Next", "ansible.builtin.debug": {"msg": "after-the-role {{ inventory_hostname }}"}}]}],
        pre_deployment_batch=batch)


def test_the_playbook_gates_in_a_second_play_and_the_next_stage_runs_on_the_passing_hosts(tmp_path):
    """playbooks/pre_deployment.yml: nothing host by host over the fleet (tasks_from batch), then the gate play on
    the hosts that did not pass and one that did, so the playbook goes on (Ansible stops at a play whose every
    host failed).  Batch and per-host mode gate alike."""
    bmc_map = tmp_path / "bmcs.json"
    with symphony_emulator.Fleet(str(SCENARIO / "pre_deployment.twin.yml"), str(ROOT / "skus"),
                                 defects=str(SCENARIO / "defects.yml"), map_path=str(bmc_map),
                                 state_dir=str(tmp_path / "emu")):
        runs = {batch: _run_playbook(tmp_path, "batch" if batch else "per-host", bmc_map, batch)
                for batch in (True, False)}
    outcomes = {}
    for batch, out in runs.items():
        assert out.returncode == 2, out.stdout[-3000:]   # the seeded defects fail their hosts' gates
        assert "PLAY [Pre-deployment gate of the hosts that did not pass]" in out.stdout
        failed = {line.split("[", 1)[1].split("]", 1)[0] for line in out.stdout.splitlines()
                  if line.startswith("fatal: [")}
        went_on = _after(out)
        assert failed and went_on, out.stdout[-3000:]
        assert not failed & went_on            # no failed host reaches the next stage
        assert "pre_deployment gate fail" in out.stdout
        outcomes[batch] = (failed, went_on)
    assert outcomes[True] == outcomes[False]
