"""AWX/AAP as code (issue 19): the execution environment's build context, bindep on the RPM base, playbooks/awx.

A container build cannot run here (no container engine on the test machines): ``ansible-builder create`` writes the
build context (Containerfile + _build/) and the test checks what the build would install.  bindep rules: the
bindep README, https://docs.opendev.org/opendev/bindep/latest/readme.html (profiles, platform:rpm / platform:dpkg).
"""

import os
import pathlib
import shutil
import subprocess
import sys
import tarfile

import yaml
from bindep.depends import Depends

ROOT = pathlib.Path(__file__).resolve().parents[2]
BIN = pathlib.Path(sys.executable).parent


class _Loader(yaml.SafeLoader):
    """YAML with Ansible's ``!unsafe`` (a string kept as it is: the AWX injector templates)."""


_Loader.add_constructor("!unsafe", lambda loader, node: loader.construct_scalar(node))


def _run(argv, **kwargs):
    proc = subprocess.run([str(a) for a in argv], cwd=ROOT, capture_output=True, text=True, timeout=600, check=False,
                          **kwargs)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc.stdout + proc.stderr


def test_bindep_resolves_on_the_rpm_base_and_on_debian():
    deps = Depends((ROOT / "bindep.txt").read_text())
    # the awx-ee base image is CentOS Stream: what ansible-builder's install-from-bindep installs there
    rpm = {rule[0] for rule in deps.active_rules(["platform:rpm", "platform:redhat", "platform:centos"])}
    assert {"openssh-clients", "rsync"} <= rpm and not rpm & {"openssh-client", "fio", "slurm-wlm"}
    rpm_compile = {rule[0] for rule in deps.active_rules(["platform:rpm", "platform:redhat", "compile"])}
    assert {"gcc", "python3-devel"} <= rpm_compile
    dpkg_test = {rule[0] for rule in deps.active_rules(["platform:dpkg", "platform:debian", "test"])}
    assert {"openssh-client", "postgresql", "fio", "slurm-wlm"} <= dpkg_test


def test_ansible_builder_creates_the_execution_environment_context():
    src, context = ROOT / "build" / "ee-src", ROOT / "build" / "ee"
    shutil.rmtree(src, ignore_errors=True)
    shutil.rmtree(context, ignore_errors=True)
    src.mkdir(parents=True)
    _run([BIN / "ansible-galaxy", "collection", "build", "--output-path", src, "--force", "."])
    built = sorted(src.glob("symphony-cluster-*.tar.gz"))
    assert len(built) == 1
    os.replace(built[0], src / "symphony-cluster.tar.gz")  # the name meta/execution-environment.yml copies
    _run([BIN / "ansible-builder", "create", "-f", "meta/execution-environment.yml", "-c", context,
          "--output-filename", "Containerfile"])
    definition = yaml.safe_load((ROOT / "meta" / "execution-environment.yml").read_text())
    assert definition["version"] == 3
    containerfile = (context / "Containerfile").read_text()
    assert "ARG EE_BASE_IMAGE=\"quay.io/ansible/awx-ee:latest\"" in containerfile
    assert "ansible-galaxy collection install" in containerfile and "install-from-bindep" in containerfile
    assert "psycopg[binary]" in (context / "_build" / "requirements.txt").read_text()
    assert "openssh-clients [platform:rpm]" in (context / "_build" / "bindep.txt").read_text()
    assert "/build/src/symphony-cluster.tar.gz" in (context / "_build" / "requirements.yml").read_text()
    with tarfile.open(context / "_build" / "src" / "symphony-cluster.tar.gz") as tar:
        names = set(tar.getnames())
    assert {"plugins/module_utils/_core/ledger_pg.py", "plugins/modules/ledger_migrate.py",
            "playbooks/awx/configure.yml"} <= names
    assert not any(n.startswith(("tools/", "tests/", "build/")) for n in names)


def test_playbooks_awx_syntax_and_lint():
    _run([BIN / "ansible-playbook", "--syntax-check", "playbooks/awx/configure.yml"])
    out = _run([BIN / "ansible-lint", "--profile", "production", "--offline", "--nocolor", "playbooks/awx"])
    assert "0 failure(s), 0 warning(s)" in out and "Profile 'production' was required, and it passed" in out, out


def test_playbooks_awx_configures_what_a_fleet_team_needs():
    play = yaml.load((ROOT / "playbooks" / "awx" / "configure.yml").read_text(), Loader=_Loader)[0]
    tasks = {t["name"]: t for t in play["tasks"]}
    modules = {next(k for k in t if k.startswith("awx.awx.")) for t in tasks.values()}
    assert {"awx.awx.credential_type", "awx.awx.credential", "awx.awx.inventory_source", "awx.awx.job_template",
            "awx.awx.workflow_job_template", "awx.awx.schedule", "awx.awx.execution_environment"} <= modules
    # secrets: the credential task is no_log, the BMC type injects environment variables, its password is secret
    assert tasks["BMC and ledger credentials"]["no_log"] is True
    bmc = tasks["Credential type for the BMCs, injected as environment variables"]["awx.awx.credential_type"]
    assert set(bmc["injectors"]["env"]) == {"SYMPHONY_BMC_USERNAME", "SYMPHONY_BMC_PASSWORD"}
    assert [f["id"] for f in bmc["inputs"]["fields"] if f.get("secret")] == ["password"]
    ledger = tasks["Credential type for the shared PostgreSQL ledger"]["awx.awx.credential_type"]
    assert set(ledger["injectors"]["env"]) == {"SYMPHONY_LEDGER_PASSWORD"}  # what ledger_pg reads
    # one job template per stage, each playbook real, with slicing, forks and a survey on the stage's hosts variable
    stages = play["vars"]["symphony_awx_stages"]
    assert [s["name"] for s in stages] == ["pre_deployment", "provisioning", "burn_in", "cluster_validation",
                                           "fleet_audit"]
    for stage in stages:
        playbook = (ROOT / "playbooks" / ("%s.yml" % stage["name"])).read_text()
        assert stage["hosts_var"] in playbook, stage  # the survey sets the variable the play's hosts reads
    jt = tasks["One job template per stage"]["awx.awx.job_template"]
    assert {"job_slice_count", "forks", "survey_spec", "ask_limit_on_launch"} <= set(jt)
    # the workflow: site order, each stage after the previous one
    nodes = tasks["Site workflow, stage after stage"]["awx.awx.workflow_job_template"]["workflow_nodes"]
    order = [n["identifier"] for n in nodes]
    assert order == ["pre_deployment", "provisioning", "burn_in", "cluster_validation"]
    for here, after in zip(nodes, nodes[1:]):
        assert here["related"]["always_nodes"] == [{"identifier": after["identifier"]}]
    assert tasks["Fleet audit on a schedule"]["awx.awx.schedule"]["unified_job_template"] == "symphony fleet_audit"
