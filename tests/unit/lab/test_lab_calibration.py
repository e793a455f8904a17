"""Calibrated lab floors: the lab's calibration document, the relative thresholds of the SKU lab profiles and how
burn-in resolves them, the role's concurrency cap, and the demo's fabric floor between its seeded link and a
healthy pair."""

import copy
import json
import pathlib

import pytest
import yaml

symphony_lab = pytest.importorskip("symphony_lab")
from symphony_lab import LabError, _calibrate, _net, _ssh  # noqa: E402
import symphony_demo.__main__ as demo  # noqa: E402

from ansible_collections.symphony.cluster.plugins.module_utils._burnin import runner as B  # noqa: E402
from ansible_collections.symphony.cluster.plugins.module_utils._burnin.calibration import (  # noqa: E402
    resolve_thresholds)
from ansible_collections.symphony.cluster.plugins.module_utils._core import sku as _sku  # noqa: E402
from ansible_collections.symphony.cluster.plugins.module_utils._core.errors import (  # noqa: E402
    ManifestError, ValidationError)
from ansible_collections.symphony.cluster.plugins.module_utils._host.parsers.stress_ng import (  # noqa: E402
    parse_stress_ng)


def _figures(**values):
    return {"measured": "2026-12-01T21:14:44+00:00",
            "figures": {k.replace("__", "."): {"value": v, "unit": "u", "how": "test"} for k, v in values.items()}}


CALIBRATION = _figures(fio_seq_read__read_bw_mbps=1342.2, fio_seq_write__write_bw_mbps=1961.6,
                       fio_randread_4k__read_iops=42564.9, fio_randread_4k__read_p99_lat_us=3424.3,
                       stress_ng_cpu__bogo_ops_per_s=910.4, stress_ng_vm__bogo_ops_per_s=25723.9,
                       iperf3__tcp_gbps=5.21)


@pytest.fixture(scope="module")
def skus(repo_root):
    return _sku.load_skus(str(repo_root / "skus"))


def test_calibration_figures_from_tool_output(tool_outputs):
    fio = (tool_outputs / "fio-3.16-json-nvme-randrw-superbench.json.txt").read_text().split("\n", 1)[1]
    figures = _calibrate.fio_figures("fio_randread_4k", "randread", fio, "fio ...")
    assert set(figures) == {"fio_randread_4k.read_bw_mbps", "fio_randread_4k.read_iops",
                            "fio_randread_4k.read_p99_lat_us"}
    assert figures["fio_randread_4k.read_iops"]["unit"] == "IOPS" and figures["fio_randread_4k.read_iops"]["value"] > 0
    assert figures["fio_randread_4k.read_p99_lat_us"]["unit"] == "µs"
    stress = (tool_outputs / "stress-ng-metrics-brief-pkb.txt").read_text().split("\n", 1)[1]
    name = parse_stress_ng(stress)["stressors"][0]["name"]
    rate = _calibrate.stress_figures("stress_ng_cpu", name, stress, "stress-ng ...")
    assert list(rate) == ["stress_ng_cpu.bogo_ops_per_s"] and rate["stress_ng_cpu.bogo_ops_per_s"]["value"] > 0
    with pytest.raises(LabError, match="printed no bogo ops/s"):
        _calibrate.stress_figures("stress_ng_vm", "no-such-stressor", stress, "stress-ng ...")


def test_calibration_jobs_use_the_lab_profile_parameters(skus):
    lab = skus["hgx_h100_supermicro"]["profiles"]["lab"]["burn_in"]["tests"]
    argv = _calibrate.fio_argv("fio_randread_4k", "randread", "4k", "/var/tmp/x")
    params = lab["fio_randread_4k"]["params"]
    assert "--size=%dM" % params["size_mib"] in argv and "--iodepth=%d" % params["iodepth"] in argv
    assert "--numjobs=%d" % params["numjobs"] in argv and "--direct=1" in argv
    assert _calibrate.stress_argv("cpu", ["--cpu-method", "matrixprod"])[:3] == ["stress-ng", "--cpu", "1"]
    assert lab["cpu_stress"]["params"]["workers"] == 1 and lab["memory_stress"]["params"]["vm_bytes"] == "64M"


def test_calibration_document_round_trip_and_summary(tmp_path):
    doc = dict(CALIBRATION, version=1, seconds=13.7, machine={"hostname": "vm", "cpus": 2, "mem_gib": 23.5},
               skipped={})
    path = tmp_path / "calibration.json"
    assert _calibrate.read(path) is None
    _calibrate.write(path, doc)
    assert _calibrate.read(path) == doc and not list(tmp_path.glob("*.tmp"))
    text = _calibrate.summary(doc)
    assert "measured 2026-12-01T21:14:44+00:00 in 13.7s on vm (2 CPUs)" in text and "iperf3.tcp_gbps: 5.21 u" in text
    path.write_text("{half")
    with pytest.raises(LabError, match="unreadable calibration"):
        _calibrate.read(path)


def test_lab_inventory_hands_the_calibration_to_burn_in():
    _bridge, hosts = _net.host_plan(2)
    inv = yaml.safe_load(_ssh.render_inventory(hosts, "/k/id", "/k/cfg", "/v/python", "lab", "/b/lab/calibration.json"))
    assert inv["all"]["children"]["lab"]["vars"] == {
        "lab_slurm_partition": "lab",
        "burn_in_calibration": "{{ lookup('ansible.builtin.file', '/b/lab/calibration.json') | from_json }}"}


def test_every_lab_storage_and_cpu_floor_is_relative_with_a_reason(skus):
    for name, manifest in skus.items():
        lab = manifest["profiles"]["lab"]["burn_in"]
        assert lab["max_concurrent_hosts"] == 2, name
        assert manifest["profiles"].get("production", {}).get("burn_in", {}).get("max_concurrent_hosts") is None
        for test, spec in lab["tests"].items():
            for key, value in (spec.get("thresholds") or {}).items():
                if key.startswith(("min_bw", "min_iops", "max_p99", "min_bogo")):
                    assert isinstance(value, dict) and value["of"] in CALIBRATION["figures"], (name, test, key)
                    assert value["why"] and ("fraction" in value) != ("multiple" in value)
        # production floors stay absolute numbers
        for tier in manifest["burn_in"]["tiers"]:
            for spec in tier["tests"]:
                assert all(not isinstance(v, dict) for v in (spec.get("thresholds") or {}).values())


def test_plan_resolves_lab_floors_against_the_calibration(skus):
    manifest = skus["hgx_h100_supermicro"]
    plan = {t.name: t for t in B.build_plan(manifest, "lab", tiers=["node"], calibration=CALIBRATION)}
    assert plan["fio_randread_4k"].thresholds == {"min_iops": 85.1, "max_p99_lat_us": 6850000.0}
    assert plan["fio_seq_read"].thresholds == {"min_bw_mbps": 2.68}
    assert plan["cpu_stress"].thresholds["min_bogo_ops_per_s"] == 18.2
    # without a calibration the relative floors are left out; absolute ones stay
    bare = {t.name: t for t in B.build_plan(manifest, "lab", tiers=["node"])}
    assert bare["fio_randread_4k"].thresholds == {} and bare["cpu_stress"].thresholds == {"max_errors": 0,
                                                                                          "exit_code": 0}
    # an operator's absolute override still wins over the relative floor
    over = B.build_plan(manifest, "lab", only=["fio_randread_4k"], calibration=CALIBRATION,
                        overrides={"fio_randread_4k": {"thresholds": {"min_iops": 1e9}}})
    assert over[0].thresholds["min_iops"] == 1e9
    prod = {t.name: t for t in B.build_plan(manifest, "production", tiers=["node"], calibration=CALIBRATION)}
    assert prod["fio_randread_4k"].thresholds == {"min_iops": 800000, "max_p99_lat_us": 2000}


def test_a_calibration_without_the_figure_names_it():
    with pytest.raises(ManifestError) as err:
        resolve_thresholds({"min_iops": {"of": "fio_randread_4k.read_iops", "fraction": 0.5, "why": "x"}},
                           _figures(iperf3__tcp_gbps=5.0), "sku: burn-in test fio_randread_4k")
    assert "calibration figure 'fio_randread_4k.read_iops'" in err.value.message
    assert "(it has: iperf3.tcp_gbps)" in err.value.message
    assert err.value.where == "sku: burn-in test fio_randread_4k.thresholds.min_iops"


@pytest.mark.parametrize("bad, words", [
    ({"of": "fio_randread_4k.read_iops", "fraction": 2, "why": "x"}, "fraction"),
    ({"of": "fio_randread_4k.read_iops", "fraction": 0.1, "multiple": 10, "why": "x"}, "valid under each of"),
    ({"of": "fio_randread_4k.read_iops", "fraction": 0.1}, "why"),
    ({"of": "no dot", "fraction": 0.1, "why": "x"}, "does not match"),
])
def test_schema_rejects_a_malformed_relative_floor(skus, bad, words):
    manifest = copy.deepcopy(skus["hgx_h100_supermicro"])
    manifest["profiles"]["lab"]["burn_in"]["tests"]["fio_randread_4k"]["thresholds"]["min_iops"] = bad
    with pytest.raises(ValidationError) as err:
        _sku.validate_manifest(manifest, "x.yml")
    assert "profiles" in str(err.value) and (words in str(err.value) or "is not valid" in str(err.value))


def test_burn_in_role_throttles_from_the_profile(repo_root):
    tasks = yaml.safe_load((repo_root / "roles" / "burn_in" / "tasks" / "main.yml").read_text())
    run = next(t for t in tasks if "symphony.cluster.burnin_run" in t)
    assert run["throttle"] == "{{ burn_in_max_concurrent_hosts }}"
    assert run["symphony.cluster.burnin_run"]["calibration"] == "{{ burn_in_calibration }}"
    defaults = yaml.safe_load((repo_root / "roles" / "burn_in" / "defaults" / "main.yml").read_text())
    assert defaults["burn_in_calibration"] == {}
    assert "max_concurrent_hosts | default(0)" in defaults["burn_in_max_concurrent_hosts"]


def test_demo_fabric_floor_sits_between_the_seeded_link_and_a_healthy_pair(repo_root, tmp_path, monkeypatch):
    seeded = yaml.safe_load((repo_root / "inventories" / "demo" / "lab-defects.yml").read_text())["degraded_link"]
    floor = symphony_lab.pair_floor_gbps(CALIBRATION, seeded["rate_mbit"])
    healthy_worst = 5.21 * symphony_lab.HEALTHY_PAIR_FRACTION
    assert floor / (seeded["rate_mbit"] / 1000) == pytest.approx(healthy_worst / floor, rel=0.01)
    assert floor / (seeded["rate_mbit"] / 1000) > 2

    class Lab:
        calibration = CALIBRATION
        calibration_file = tmp_path / "calibration.json"

    monkeypatch.setattr(demo, "CALIBRATED_VARS", tmp_path / "vars.json")
    printed = []
    console = type("C", (), {"print": lambda self, text: printed.append(text)})()
    extra = json.loads(pathlib.Path(demo.write_calibrated_vars(console, Lab())).read_text())
    assert extra == {"burn_in_calibration": CALIBRATION, "burn_in_fabric_floor": floor}
    extra = json.loads(pathlib.Path(demo.write_calibrated_vars(console, Lab(), {"gpu-r01-u02": "lab1"})).read_text())
    assert extra["demo_lab_hosts"] == {"gpu-r01-u02": "lab1"}
    assert "between the seeded %s Mbit/s link" % seeded["rate_mbit"] in printed[0]
    Lab.calibration = _figures(iperf3__tcp_gbps=0.5)
    with pytest.raises(demo.DemoError, match="too slow to tell from the seeded"):
        demo.write_calibrated_vars(console, Lab())
    Lab.calibration = None
    with pytest.raises(demo.DemoError, match="no iperf3 calibration"):
        demo.write_calibrated_vars(console, Lab())
    with pytest.raises(LabError, match="no iperf3 figure"):
        symphony_lab.pair_floor_gbps(_figures(stress_ng_cpu__bogo_ops_per_s=1.0), 100)
