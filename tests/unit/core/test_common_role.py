"""roles/common: a stage reads SKU manifests only from the twin inventory's symphony_sku_dir (issue 25).

Pre-deployment and provisioning defaulted to the collection's skus/ while the inventory and burn-in read the
twin's sku_dir, so a site's edited SKU was silently not enforced there.
"""

import os
import subprocess
import sys

import pytest
import yaml

PLAY = [{"hosts": "localhost", "gather_facts": False, "connection": "local",
         "roles": [{"role": "symphony.cluster.common"}]}]


def _play(repo_root, tmp_path, extra):
    playbook = tmp_path / "play.yml"
    playbook.write_text(yaml.safe_dump(PLAY))
    env = dict(os.environ, ANSIBLE_CONFIG=str(repo_root / "ansible.cfg"),
               ANSIBLE_COLLECTIONS_PATH=str(repo_root / "build" / "collections"), ANSIBLE_NOCOLOR="1")
    cmd = [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", "localhost,", str(playbook)]
    for key, value in extra.items():
        cmd += ["-e", "%s=%s" % (key, value)]
    return subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False)


def test_a_role_sku_dir_elsewhere_stops_the_play(repo_root, tmp_path):
    site = tmp_path / "site-skus"
    site.mkdir()
    out = _play(repo_root, tmp_path, {"symphony_sku_dir": str(site), "provisioning_sku_dir": str(repo_root / "skus")})
    assert out.returncode != 0, out.stdout
    text = " ".join(out.stdout.split())
    assert "provisioning_sku_dir is %s" % (repo_root / "skus") in text
    assert "the twin inventory loaded the SKU manifests from %s" % site in text


def test_the_same_directory_by_another_path_passes(repo_root, tmp_path):
    link = tmp_path / "skus-link"
    link.symlink_to(repo_root / "skus")
    out = _play(repo_root, tmp_path, {"symphony_sku_dir": str(repo_root / "skus"), "pre_deployment_sku_dir": str(link)})
    assert out.returncode == 0, out.stdout + out.stderr


@pytest.mark.parametrize("role", ["pre_deployment", "provisioning"])
def test_stage_roles_default_to_the_inventory_sku_dir(repo_root, role):
    defaults = yaml.safe_load((repo_root / "roles" / role / "defaults" / "main.yml").read_text())
    assert defaults["%s_sku_dir" % role].startswith("{{ symphony_sku_dir | default(")


def _pre_deployment(repo_root, tmp_path, hosts, args):
    """ansible-playbook of the pre_deployment role on ``hosts`` local hosts n0..n<hosts-1>, with ``args``."""
    inventory = tmp_path / "hosts.ini"
    inventory.write_text("".join("n%d ansible_connection=local\n" % i for i in range(hosts)))
    playbook = tmp_path / "pd.yml"
    playbook.write_text(yaml.safe_dump([{"hosts": "all", "gather_facts": False,
                                         "roles": [{"role": "symphony.cluster.pre_deployment"}]}]))
    env = dict(os.environ, ANSIBLE_CONFIG=str(repo_root / "ansible.cfg"),
               ANSIBLE_COLLECTIONS_PATH=str(repo_root / "build" / "collections"), ANSIBLE_NOCOLOR="1")
    cmd = [os.path.join(os.path.dirname(sys.executable), "ansible-playbook"), "-i", str(inventory), str(playbook)]
    return subprocess.run(cmd + args, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False)


def test_pre_deployment_refuses_the_whole_play_once_not_host_by_host(repo_root, tmp_path):
    """pre_deployment includes common once for the play (its argument validation on 10,000 hosts cost minutes):
    a SKU directory elsewhere still stops every host before any BMC is touched."""
    site = tmp_path / "site-skus"
    site.mkdir()
    out = _pre_deployment(repo_root, tmp_path, 3, [
        "-e", "symphony_sku_dir=%s" % site, "-e", "pre_deployment_sku_dir=%s" % (repo_root / "skus"),
        "-e", "pre_deployment_bmc_username=u", "-e", "pre_deployment_bmc_password=p"])
    assert out.returncode != 0, out.stdout
    assert "the twin inventory loaded the SKU manifests from %s" % site in " ".join(out.stdout.split())
    assert out.stdout.count("Validating arguments against arg spec 'main' - Internal") == 1
    assert "Audit the play's BMCs" not in out.stdout   # no host went on to the audit


def test_digits_only_bmc_credentials_are_strings(repo_root, tmp_path):
    """A digits-only username and password (YAML, JSON extra vars or a vault file read them as numbers) pass the
    credentials check as strings: the check's ``length`` failed on the int and stopped the play."""
    out = _pre_deployment(repo_root, tmp_path, 1, [
        "-e", '{"pre_deployment_bmc_username": 1000, "pre_deployment_bmc_password": 987654321}',
        "-e", "symphony_sku_dir=%s" % (repo_root / "skus")])
    text = " ".join((out.stdout + out.stderr).split())
    assert "has no len()" not in text
    assert "Refuse to start without BMC credentials] *** ok: [n0]" in text, text
    assert "987654321" not in text
