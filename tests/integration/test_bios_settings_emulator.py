"""bios_settings through ansible-playbook against the Redfish fleet emulator: check -> apply (with reset and
read-back) -> check -> apply; the emulator's write counter says the reruns sent nothing, and --diff shows the
attribute before and after."""

import json
import os
import subprocess
import sys

from symphony_emulator import Fleet
from timescale import scaled

FAST = {"faults": {"*": {"task_duration_s": 0.3, "bmc_reboot_s": 0.5, "bmc_warmup_s": 0.3, "host_boot_s": 0.3}}}

PLAYBOOK = """
- hosts: localhost
  gather_facts: false
  module_defaults:
    symphony.cluster.bios_settings:
      bmc_url: "{url}"
      username: "{username}"
      password: "{password}"
      attributes: {{PCIeACSCTL_1E3C: Disable}}
      reset: true
      poll_s: 0.2
      timeout_s: {timeout_s}
  tasks:
    - {{name: check, symphony.cluster.bios_settings: {{}}, check_mode: true, diff: true, register: check1}}
    - {{name: apply, symphony.cluster.bios_settings: {{}}, diff: true, register: apply1}}
    - {{name: check again, symphony.cluster.bios_settings: {{}}, check_mode: true, register: check2}}
    - {{name: apply again, symphony.cluster.bios_settings: {{}}, register: apply2}}
    - name: keep the results
      ansible.builtin.copy:
        dest: "{out}"
        content: "{{{{ dict(check1=check1, apply1=apply1, check2=check2, apply2=apply2) | to_json }}}}"
        mode: "0600"
"""


def test_check_apply_check_apply_against_the_emulator(repo_root, tmp_path):
    twin = repo_root / "molecule" / "provisioning" / "provisioning.twin.yml"
    defects = {"defects": {"pv-u10": [{"kind": "bios_drift", "attribute": "PCIeACSCTL_1E3C", "value": "Enable"}]}}
    with Fleet(twin, defects=defects, faults=FAST, http=True, credentials="demo", hosts=["pv-u10"],
               map_path=str(tmp_path / "bmcs.json")) as fleet:
        entry = json.loads((tmp_path / "bmcs.json").read_text())["nodes"]["pv-u10"]
        out = tmp_path / "results.json"
        play = tmp_path / "play.yml"
        play.write_text(PLAYBOOK.format(url=entry["url"], username=entry["username"], password=entry["password"],
                                        out=out, timeout_s=int(scaled(60))))
        env = dict(os.environ, ANSIBLE_CONFIG=str(repo_root / "ansible.cfg"),
                   ANSIBLE_COLLECTIONS_PATH=str(repo_root / "build" / "collections"))
        playbook = os.path.join(os.path.dirname(sys.executable), "ansible-playbook")
        proc = subprocess.run([playbook, "-i", "localhost,", "-c", "local", "--diff",
                               "-e", "ansible_python_interpreter=" + sys.executable, str(play)],
                              env=env, capture_output=True, text=True, timeout=scaled(600), check=False)
        assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
        res = json.loads(out.read_text())
        assert res["check1"]["changed"] and res["check1"]["changes"] == {"PCIeACSCTL_1E3C": ["Enable", "Disable"]}
        assert res["apply1"]["changed"] and res["apply1"]["state"] == "applied"
        assert res["apply1"]["diff"] == {"before": {"PCIeACSCTL_1E3C": "Enable"},
                                         "after": {"PCIeACSCTL_1E3C": "Disable"}}
        assert fleet.state("pv-u10")["bios"]["current"]["PCIeACSCTL_1E3C"] == "Disable"
        for name in ("check2", "apply2"):
            assert not res[name]["changed"] and res[name]["state"] == "at_target"
        writes = fleet.stats("pv-u10")["write_log"]
        # exactly one PATCH of the settings object and one reset, all from the first apply
        assert sum(1 for w in writes if "Bios" in w["path"]) == 1, writes
        assert sum(1 for w in writes if w["path"].endswith("ComputerSystem.Reset")) == 1, writes
        assert entry["password"] not in proc.stdout + out.read_text()
