"""A failed burn-in gate fails its host, as every other stage's does (issue 25: it exited 0, an AWX job was green).

The real role on localhost with a one-test SKU: memory_size against a floor no machine meets (reads /proc/meminfo,
runs no tool), recorded into a ledger in tmp_path.
"""

import json
import sqlite3
import os
import subprocess
import sys

import yaml

MANIFEST = {"schema_version": 1, "sku": "tiny", "system": {"manufacturer": "x", "model": "y"},
            "bom": {"cpus": {"count": 1, "model": "any"}, "memory": {"dimm_count": 1, "total_gib": 1},
                    "gpus": {"count": 0, "vendor": "none"}},
            "firmware": [],
            "burn_in": {"tiers": [{"name": "node", "tests": [
                {"name": "memory_size", "kind": "memory_size", "timeout_s": 30,
                 "thresholds": {"min_fraction_of_bom": 0, "min_gib": 1000000}}]}]}}


def test_failed_burn_in_gate_fails_the_host(repo_root, tmp_path):
    play = [{"hosts": "localhost", "gather_facts": False, "connection": "local",
             "vars": {"burn_in_manifest": MANIFEST, "burn_in_fabric": False, "burn_in_fetch_evidence": False,
                      "burn_in_evidence_dir": str(tmp_path / "evidence"),
                      "symphony_ledger": str(tmp_path / "ledger.sqlite")},
             "roles": [{"role": "symphony.cluster.burn_in"}]}]
    (tmp_path / "play.yml").write_text(yaml.safe_dump(play))
    env = dict(os.environ, ANSIBLE_CONFIG=str(repo_root / "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_COLLECTIONS_PATH=str(repo_root / "build" / "collections"),
               ANSIBLE_PYTHON_INTERPRETER=sys.executable)
    out = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", "localhost,",
                          str(tmp_path / "play.yml")], cwd=tmp_path, env=env, capture_output=True, text=True,
                         timeout=180, check=False)
    assert out.returncode == 2, out.stdout + out.stderr
    assert "burn_in gate fail: memory_size:" in " ".join(out.stdout.split())
    rows = sqlite3.connect(str(tmp_path / "ledger.sqlite")).execute(
        "SELECT node, stage, status, failing FROM gates").fetchall()
    assert [(n, s, st, json.loads(f)) for n, s, st, f in rows] == [("localhost", "burn_in", "fail", ["memory_size"])]
