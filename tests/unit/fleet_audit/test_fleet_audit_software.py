"""In-band drift against the SKU's software pins, tunings and NCCL recipe: the rows and the verdict."""

import pytest

from ansible_collections.symphony.cluster.plugins.module_utils._core.sku import load_skus
from ansible_collections.symphony.cluster.plugins.module_utils._fleet_audit import observe
from ansible_collections.symphony.cluster.plugins.module_utils._fleet_audit.software import (
    recipe_rows, rows_outcome, software_rows, tuning_rows)

PINS = {"gpu_driver": {"accepted": ["535.161.08"], "source": "R535 release notes"},
        "kernel": {"accepted": ["5.15.0-105-generic"], "source": "Ubuntu"}}


@pytest.fixture(scope="module")
def skus(repo_root):
    return load_skus(str(repo_root / "skus"))


def test_every_shipped_sku_pins_software_with_sources(skus):
    for sku, manifest in skus.items():
        assert manifest.get("software"), sku
        for component, pin in manifest["software"].items():
            assert pin["accepted"] and pin["source"], (sku, component)


def test_the_real_a100_capture_reads_as_drift_against_the_h100_pins(skus, tool_text, fake_node):
    node = fake_node({"nvidia-smi": (0, tool_text("nvidia-smi-q-x-a100-sxm4-80gb-mig-v12.xml.txt"))})
    pins = skus["hgx_h100_supermicro"]["software"]
    seen = observe.read_software(["gpu_driver", "cuda"], node.run, node.read)
    assert seen["gpu_driver"]["value"] == "535.54.03" and seen["cuda"]["value"] == "12.2"
    rows = {r["component"]: r for r in software_rows({k: pins[k] for k in ("gpu_driver", "cuda")}, seen)}
    assert rows["gpu_driver"]["status"] == "drift" and rows["cuda"]["status"] == "ok"
    outcome = rows_outcome(list(rows.values()), "software")
    assert outcome.status == "fail" and "gpu_driver is 535.54.03, the SKU accepts 535.161.08" in outcome.reason


@pytest.mark.parametrize("value", ["N/A", "", None, "[Not Supported]", "-1"])
def test_a_placeholder_version_is_unknown_never_ok(value):
    rows = software_rows(PINS, {"gpu_driver": {"value": value, "note": "nvidia-smi said so"},
                                "kernel": {"value": "5.15.0-105-generic"}})
    assert [r["status"] for r in rows] == ["unknown", "ok"]
    outcome = rows_outcome(rows, "software")
    assert outcome.status == "not_run" and "gpu_driver could not be read" in outcome.reason


def test_drift_fails_even_when_another_reading_is_missing():
    rows = software_rows(PINS, {"gpu_driver": {"value": None, "note": "timeout"},
                                "kernel": {"value": "6.8.0-31-generic"}})
    outcome = rows_outcome(rows, "software")
    assert outcome.status == "fail" and "not read: gpu_driver" in outcome.reason


def test_a_pinned_tool_that_is_not_installed_is_drift():
    rows = software_rows(PINS, {"gpu_driver": {"value": None, "absent": True, "note": "nvidia-smi not found"},
                                "kernel": {"value": "5.15.0-105-generic"}})
    assert rows[0]["status"] == "drift" and "not installed" in rows[0]["reason"]


def test_a_profile_without_gpus_does_not_judge_gpu_software():
    rows = software_rows(PINS, {"kernel": {"value": "5.15.0-105-generic"}}, not_expected=["gpus"])
    assert rows[0]["status"] == "unknown" and "no gpus" in rows[0]["reason"]
    assert rows_outcome(rows, "software").status == "not_run"


def test_tunings_cmdline_sysctl_persistence_and_power_limit():
    tunings = {"kernel_cmdline": ["iommu=pt", "intel_iommu=on"],
               "sysctl": {"vm.max_map_count": 1048576, "net.ipv4.tcp_rmem": "4096 87380 6291456"},
               "persistence_mode": True, "gpu_power_limit_w": 700}
    observed = {"cmdline": "BOOT_IMAGE=/vmlinuz ro iommu=pt quiet\n",
                "sysctl": {"vm.max_map_count": "1048576", "net.ipv4.tcp_rmem": "4096\t87380\t6291456"},
                "gpus": [{"index": 0, "persistence_mode": "Enabled", "power_limit_w": 700.0},
                         {"index": 1, "persistence_mode": "Disabled", "power_limit_w": 699.8}]}
    rows = {r["component"]: r for r in tuning_rows(tunings, observed)}
    assert rows["cmdline:iommu=pt"]["status"] == "ok"
    assert rows["cmdline:intel_iommu=on"]["status"] == "drift"
    assert rows["sysctl:vm.max_map_count"]["status"] == rows["sysctl:net.ipv4.tcp_rmem"]["status"] == "ok"
    assert rows["persistence_mode"]["status"] == "drift" and "GPU 1" in rows["persistence_mode"]["reason"]
    assert rows["gpu_power_limit_w"]["status"] == "ok"


def test_a_gpu_without_a_power_limit_reading_is_unknown():
    rows = tuning_rows({"gpu_power_limit_w": 700}, {"gpus": [{"index": 0, "power_limit_w": None}]})
    assert rows[0]["status"] == "unknown"


def test_the_nccl_recipe_file_against_the_sku():
    env = {"NCCL_IB_HCA": "=mlx5_0,mlx5_1", "NCCL_NVLS_ENABLE": "1"}
    rows = recipe_rows(env, "# site recipe\nNCCL_IB_HCA==mlx5_0,mlx5_1\nNCCL_NVLS_ENABLE=0\n")
    assert [r["status"] for r in rows] == ["ok", "drift"]
    missing = recipe_rows(env, None, note="No such file")
    assert rows_outcome(missing, "NCCL recipe").status == "not_run"


def test_tool_version_lines(fake_node):
    node = fake_node({"dcgmi": (0, "dcgmi  version: 3.3.5\n"), "ofed_info": (0, "MLNX_OFED_LINUX-23.10-2.1.3.1:\n"),
                      "nvidia-ctk": (0, "NVIDIA Container Toolkit CLI version 1.14.6\ncommit: 5605d19\n"),
                      "ldconfig": (0, "\tlibnccl.so.2 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libnccl.so.2\n")},
                     {"/proc/sys/kernel/osrelease": "5.15.0-105-generic\n"})
    seen = observe.read_software(["kernel", "dcgm", "ofed", "container_toolkit", "nccl"], node.run, node.read,
                                 smi={}, realpath=lambda p: p + ".21.5")
    assert {k: v["value"] for k, v in seen.items()} == {
        "kernel": "5.15.0-105-generic", "dcgm": "3.3.5", "ofed": "MLNX_OFED_LINUX-23.10-2.1.3.1",
        "container_toolkit": "1.14.6", "nccl": "2.21.5"}


def test_a_failing_tool_is_unknown_and_a_missing_one_absent(fake_node):
    node = fake_node({"dcgmi": (1, "Error: unable to connect to host engine\n")})
    seen = observe.read_software(["dcgm", "ofed"], node.run, node.read, smi={})
    assert seen["dcgm"]["value"] is None and not seen["dcgm"].get("absent")
    assert seen["ofed"]["absent"] is True
