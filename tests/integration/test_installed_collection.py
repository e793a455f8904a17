"""The collection as a fleet engineer gets it: built, installed, documented and run from the installed copy.

``ansible-galaxy collection build`` makes the tarball, ``ansible-galaxy collection install --offline`` installs it
into an empty collections path (Galaxy is unreachable here: the declared dependencies resolve against the
collections bundled in the ``ansible`` package), then, with nothing of the source tree on any path:
``ansible-doc`` renders every module, plugin and role, and ``playbooks/pre_deployment.yml`` runs from the
installed copy (``symphony.cluster.pre_deployment``) against the Redfish fleet emulator and gates two nodes.
"""

import json
import os
import pathlib
import sqlite3
import subprocess
import sys
import tarfile

import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
BIN = pathlib.Path(sys.executable).parent
GALAXY = yaml.safe_load((ROOT / "galaxy.yml").read_text())
NAME = "%s-%s-%s.tar.gz" % (GALAXY["namespace"], GALAXY["name"], GALAXY["version"])


def _env(collections, extra_pythonpath=""):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANSIBLE_", "PYTHONPATH", "MOLECULE_"))}
    env.update(ANSIBLE_COLLECTIONS_PATH=str(collections), ANSIBLE_NOCOLOR="1", ANSIBLE_FORCE_COLOR="0",
               PATH="%s:%s" % (BIN, env.get("PATH", "")))
    if extra_pythonpath:
        env["PYTHONPATH"] = extra_pythonpath
    return env


def _run(argv, env, cwd, timeout=300):
    proc = subprocess.run(argv, env=env, cwd=str(cwd), capture_output=True, text=True, timeout=timeout, check=False)
    assert proc.returncode == 0, "%s exited %d\n%s\n%s" % (argv, proc.returncode, proc.stdout[-3000:], proc.stderr[-3000:])
    return proc


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    work = tmp_path_factory.mktemp("installed")
    dist, path = work / "dist", work / "collections"
    env = _env(path)
    _run([str(BIN / "ansible-galaxy"), "collection", "build", "--output-path", str(dist), str(ROOT)], env, work)
    tarball = dist / NAME
    _run([str(BIN / "ansible-galaxy"), "collection", "install", "--offline", "-p", str(path), str(tarball)], env, work)
    return {"work": work, "tarball": tarball, "path": path, "env": env,
            "root": path / "ansible_collections" / GALAXY["namespace"] / GALAXY["name"]}


def test_tarball_holds_the_collection_and_nothing_else(installed):
    with tarfile.open(installed["tarball"]) as tar:
        tops = {m.name.split("/")[0] for m in tar.getmembers()}
    assert {"plugins", "roles", "playbooks", "skus", "schemas", "meta", "MANIFEST.json", "FILES.json"} <= tops
    assert not tops & {"tests", "tools", "build", "molecule", ".venv", ".ci", ".git", ".mypy_cache"}, tops
    manifest = json.loads((installed["root"] / "MANIFEST.json").read_text())
    deps = manifest["collection_info"]["dependencies"]
    assert set(deps) == {"ansible.posix", "kubernetes.core"}, deps
    for dep in deps:  # resolved offline from the collections the ansible package bundles
        out = _run([str(BIN / "ansible-galaxy"), "collection", "list", dep], installed["env"], installed["work"])
        assert dep in out.stdout, out.stdout


def _names(kind, env, cwd):
    out = _run([str(BIN / "ansible-doc"), "-t", kind, "-l", "-j", "symphony.cluster"], env, cwd)
    return sorted(json.loads(out.stdout))


def test_ansible_doc_renders_every_module_plugin_and_role(installed):
    env, cwd = installed["env"], installed["work"]
    source = ROOT / "plugins"
    for kind, folder in (("module", "modules"), ("inventory", "inventory")):
        expected = sorted("symphony.cluster." + p.stem for p in (source / folder).glob("*.py") if p.stem != "__init__")
        names = _names(kind, env, cwd)
        assert names == expected, (kind, names)
        for name in names:
            doc = json.loads(_run([str(BIN / "ansible-doc"), "-t", kind, "-j", name], env, cwd).stdout)[name]
            assert doc["doc"]["short_description"], name
            assert doc["doc"].get("options") or kind == "inventory", name
    roles = json.loads(_run([str(BIN / "ansible-doc"), "-t", "role", "-l", "-j", "symphony.cluster"], env, cwd).stdout)
    assert sorted(roles) == sorted("symphony.cluster." + p.name for p in (ROOT / "roles").iterdir()
                                   if (p / "meta" / "argument_specs.yml").exists()), roles


TWIN = """\
plugin: symphony.cluster.twin
profile: production
twin_version: 1
sites:
  - name: installed
    racks:
      - name: i01
        location: test hall
        bmc_subnet: 10.98.1.0/24
        bmc_first_host: 10
        nodes:
          - {hostname: inst-u02, u: 2, sku: hgx_h100_supermicro, serial: C8010MM21A98002, bmc_mac: "3c:ec:ef:98:01:02"}
          - {hostname: inst-u06, u: 6, sku: hgx_h100_supermicro, serial: C8010MM21A98006, bmc_mac: "3c:ec:ef:98:01:06"}
"""

CFG = """\
[defaults]
host_key_checking = False
retry_files_enabled = False
[inventory]
enable_plugins = symphony.cluster.twin, ansible.builtin.host_list
any_unparsed_is_failed = true
"""


def test_a_stage_playbook_runs_from_the_installed_copy(installed, tmp_path):
    """No sku_dir in the twin: the SKUs come from the installed collection, as the inventory plugin documents."""
    twin = tmp_path / "installed.twin.yml"
    twin.write_text(TWIN)
    (tmp_path / "ansible.cfg").write_text(CFG)
    bmc_map, pid = tmp_path / "bmcs.json", tmp_path / "emulator.pid"
    ledger = tmp_path / "ledger.sqlite"
    # the emulator is project tooling from the checkout; it imports the installed collection
    emu_env = _env(installed["path"], "%s:%s" % (installed["path"], ROOT / "tools"))
    _run([sys.executable, "-m", "symphony_emulator", "serve", "--twin", str(twin), "--skus",
          str(installed["root"] / "skus"), "--map", str(bmc_map), "--background", "--pidfile", str(pid)],
         emu_env, tmp_path, timeout=120)
    try:
        env = dict(installed["env"], ANSIBLE_CONFIG=str(tmp_path / "ansible.cfg"), SYMPHONY_LEDGER=str(ledger))
        proc = subprocess.run(
            [str(BIN / "ansible-playbook"), "-i", str(twin), "symphony.cluster.pre_deployment",
             "-e", "pre_deployment_bmc_map=%s" % bmc_map, "-e", "symphony_ledger=%s" % ledger,
             "-e", "pre_deployment_dispatch_dir=%s" % (tmp_path / "dispatch"),
             "-e", json.dumps({"pre_deployment_optional_checks": ["lease_captured", "address_reserved"]})],
            env=env, cwd=str(tmp_path), capture_output=True, text=True, timeout=600, check=False)
    finally:
        if pid.exists():
            subprocess.run(["kill", pid.read_text().strip()], check=False)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    listed = _run([str(BIN / "ansible-galaxy"), "collection", "list", "symphony.cluster"], env, tmp_path).stdout
    assert str(installed["path"]) in listed and str(ROOT) not in listed, listed
    with sqlite3.connect(str(ledger)) as db:
        gates = dict(db.execute("SELECT node, status FROM gates WHERE stage = 'pre_deployment' ORDER BY id").fetchall())
    assert gates == {"inst-u02": "pass", "inst-u06": "pass"}, gates
