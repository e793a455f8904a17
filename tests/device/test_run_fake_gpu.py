"""tests/device/run.sh where there is no GPU: a fake ``nvidia-smi`` on PATH prints real captures, and every step that
needs NVML or CUDA says ``not_run`` and why, with no figure (issue 20).

``test_run_sh_on_a_fake_gpu`` and ``test_the_guard_*`` share one run of run.sh with this interpreter
(SYMPHONY_DEVICE_PYTHON: no venv), about 20 s.  ``test_offline_bundle_install`` runs it again the device's way: a
Python 3.12 venv installed with ``--no-index`` from build/device/wheels alone; it needs the bundle
(``make device-wheels``) and a python3.12, and runs only when SYMPHONY_DEVICE_BUNDLE names the bundle
(``make device-check`` sets it), since the install takes a minute or more.
"""

import glob
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys

import jsonschema
import pytest

from timescale import scaled

HERE = pathlib.Path(__file__).resolve().parent
XML = "nvidia-smi-q-x-rtx4000-ada-v13.xml.txt"
CSV = "nvidia-smi-query-power-csv-pkb.txt"
FAKE = """#!/bin/sh
# fake nvidia-smi: real captures without their provenance line; anything else is logged and refused
case "$*" in
  *"-q -x"*) tail -n +2 '{xml}' ;;
  *--query-gpu*) tail -n +2 '{csv}' ;;
  *) echo "$*" >> '{log}'; exit 2 ;;
esac
"""
# What comes back from the device: at most 8 files, names of letters, digits, '.', '_' and '-'.
OUT_NAME = re.compile(r"^[A-Za-z0-9._-]+$")


def _fake_bin(tool_outputs, base):
    bindir = base / "fakebin"
    bindir.mkdir()
    fake = bindir / "nvidia-smi"
    fake.write_text(FAKE.format(xml=tool_outputs / XML, csv=tool_outputs / CSV, log=base / "fake-asked.log"))
    fake.chmod(0o755)
    return bindir


def _env(base, bindir, **extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PIP_", "ANSIBLE_", "SYMPHONY_DEVICE_"))}
    env.update(OUT=str(base / "out"), SYMPHONY_DEVICE_WORK=str(base / "work"), PIP_CONFIG_FILE=os.devnull,
               PATH="%s:%s" % (bindir, env.get("PATH", "/usr/bin:/bin")), **extra)
    return env


def _run_sh(repo_root, env, timeout_s):
    return subprocess.run(["bash", str(repo_root / "tests" / "device" / "run.sh")], env=env, capture_output=True,
                          text=True, timeout=scaled(timeout_s), check=False, cwd=str(repo_root))


@pytest.fixture(scope="module")
def fake_run(repo_root, tool_outputs, tmp_path_factory):
    base = tmp_path_factory.mktemp("device")
    bindir = _fake_bin(tool_outputs, base)
    proc = _run_sh(repo_root, _env(base, bindir, SYMPHONY_DEVICE_PYTHON=sys.executable), 240)
    return base, proc


def _doc(base):
    doc = json.loads((base / "out" / "validation_gpu.json").read_text())
    jsonschema.validate(doc, json.loads((HERE / "validation_gpu.schema.json").read_text()))
    return doc


def _assert_fake_gpu_results(base, proc, tool_outputs):
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    doc = _doc(base)
    out = base / "out"
    # The capture is read by the collection's parsers as a real nvidia-smi's output would be.
    assert doc["gpu"]["status"] == "ran" and doc["gpu"]["model"] == "NVIDIA RTX 4000 SFF Ada Generation"
    assert doc["gpu"]["driver_version"] == "595.84" and doc["gpu"]["tdp_w"] == 70.0
    xml_fixture = next(f for f in doc["gpu"]["fixtures"] if f.startswith("nvidia-smi-q-x-"))
    first, raw = (out / xml_fixture).read_text().split("\n", 1)
    assert first.startswith("# SOURCE: symphony.cluster tests/device/run.sh | nvidia-smi -q -x |")
    assert "fakebin/nvidia-smi" in first          # a fake shows as one
    assert raw == (tool_outputs / XML).read_text().split("\n", 1)[1]
    # The burn_in role judged that card for real: it is not the SKU's H200.
    checks = doc["burn_in"]["checks"]
    assert checks["nvidia_smi_health"]["status"] == "fail" and "expected 'H200'" in checks["nvidia_smi_health"]["reason"]
    assert checks["dcgm_diag"]["status"] == "not_run" and checks["gpu_burn"]["status"] == "not_run"
    # No NVML, no CUDA: not_run with the reason, and no figure at all.
    for part in doc["power"].values():
        assert part["status"] == "not_run" and "nvml:" in part["reason"], part
        assert part.get("mean_power_w") is None and part.get("fraction_of_tdp") is None
    for part in list(doc["smoke"].values()) + [doc["matmul"]]:
        assert part["status"] in ("not_run", "error") and part["reason"], part
        assert part.get("tokens_per_s") is None and part.get("bf16_tflops") is None
    assert doc["complete"] is False
    files = sorted(os.listdir(out))
    assert len(files) <= 8 and all(OUT_NAME.match(f) for f in files), files
    assert "evidence.tar.gz" in files and "run.log" in files
    # The table is printed last.
    table = (out / "summary.txt").read_text()
    assert proc.stdout.endswith(table) and "sustained power   not_run: no GPU telemetry source" in table
    return doc


def test_run_sh_on_a_fake_gpu(fake_run, tool_outputs):
    base, proc = fake_run
    _assert_fake_gpu_results(base, proc, tool_outputs)


def test_the_guard_refuses_every_option_that_changes_the_card(fake_run):
    base, _proc = fake_run
    guard = base / "work" / "bin" / "nvidia-smi"
    # gpu_tunings ran in check mode: it planned its nvidia-smi calls and made none; the fake saw only queries.
    tunings = json.loads((base / "work" / "gpu_tunings.json").read_text())
    assert tunings["status"] == "not_run" and tunings["changes"] and "change(s) to make" in tunings["reason"]
    assert not (base / "work" / "nvidia-smi-refused.log").exists()
    assert not (base / "fake-asked.log").exists()
    for argv in (["-pm", "1"], ["-i", "0", "-pl", "500"], ["-lgc", "1980"], ["-r"], ["-mig", "1"], ["-c", "3"],
                 ["-ac", "2619,1980"], ["--gpu-reset"], ["-e", "0"]):
        res = subprocess.run([str(guard)] + argv, capture_output=True, text=True, check=False)
        assert res.returncode == 9 and "refused nvidia-smi" in res.stderr, argv
    assert not (base / "fake-asked.log").exists()
    res = subprocess.run([str(guard), "-q", "-x"], capture_output=True, text=True, check=False)
    assert res.returncode == 0 and "<nvidia_smi_log>" in res.stdout


def _python312():
    """The real interpreter's path (a pyenv shim behind a link named python3 would start another Python)."""
    for candidate in sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.12*/bin/python3.12"))) + [
            shutil.which("python3.12")]:
        if not candidate:
            continue
        res = subprocess.run([candidate, "-c", "import sys; print(sys.version_info[:2] == (3, 12), sys.executable)"],
                             capture_output=True, text=True, check=False)
        if res.returncode == 0 and res.stdout.startswith("True "):
            return res.stdout.split(" ", 1)[1].strip()
    return None


@pytest.mark.skipif(not os.environ.get("SYMPHONY_DEVICE_BUNDLE"),
                    reason="set SYMPHONY_DEVICE_BUNDLE=build/device/wheels (make device-check) to install it offline")
def test_offline_bundle_install(repo_root, tool_outputs, tmp_path):
    """The device's way: python3 is 3.12, a --system-site-packages venv, pip --no-index from the bundle alone."""
    bundle = pathlib.Path(os.environ["SYMPHONY_DEVICE_BUNDLE"]).resolve()
    python = _python312()
    if not python:
        pytest.skip("no python3.12 here (the device's Python)")
    size_mib = sum(f.stat().st_size for f in bundle.glob("*.whl")) / 2 ** 20
    assert 0 < size_mib < 48, "%.1f MiB: the bundle and the tree travel in 64 MiB" % size_mib
    bindir = _fake_bin(tool_outputs, tmp_path)
    (bindir / "python3").symlink_to(python)
    proc = _run_sh(repo_root, _env(tmp_path, bindir, SYMPHONY_DEVICE_WHEELS=str(bundle)), 480)
    setup = json.loads((tmp_path / "work" / "steps" / "setup.json").read_text())
    log = (tmp_path / "work" / "steps" / "setup.log").read_text()
    assert setup["rc"] == 0, log
    venv_python = tmp_path / "work" / "venv" / "bin" / "python"
    version = subprocess.run([str(venv_python), "-c", "import sys, ansible.release, sushy, jsonschema; "
                              "print(sys.version_info[:2], ansible.release.__version__)"],
                             capture_output=True, text=True, check=True).stdout
    assert version.startswith("(3, 12)"), version
    doc = _assert_fake_gpu_results(tmp_path, proc, tool_outputs)
    assert doc["burn_in"]["status"] == "ran"
