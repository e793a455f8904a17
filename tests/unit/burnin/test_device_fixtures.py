"""The GPU machine's own nvidia-smi outputs (tests/device/run.sh keeps them; committed under tests/fixtures/ with the
date and driver version in their names) read by the parsers as the burn-in checks read them (issue 20).

Each fixture's line 1 is run.sh's provenance header naming the command, product and driver; the parsers must find
the same product and driver in the output, every GPU with its power limits, and the query CSV's rows.  Until a
device run has been committed there is no fixture and the tests say so.
"""

import pathlib
import re

import pytest

from ansible_collections.symphony.cluster.plugins.module_utils._host.parsers.nvidia_smi import parse_nvidia_smi_xml
from ansible_collections.symphony.cluster.plugins.module_utils._host.parsers.power_csv import parse_query_csv

FIXTURES = pathlib.Path(__file__).resolve().parents[2] / "fixtures"
HEADER = re.compile(r"^# SOURCE: symphony\.cluster tests/device/run\.sh \| (?P<argv>[^|]+) \| (?P<product>[^|]+) \| "
                    r"driver (?P<driver>[^|]+) \| (?P<date>\d{8}) \|")


def _fixtures(kind):
    found = sorted(FIXTURES.glob("nvidia-smi-%s-*.txt" % kind))
    return found or [pytest.param(None, marks=pytest.mark.skip(reason="no device fixture yet: run tests/device/run.sh "
                                                               "on a GPU machine and commit its nvidia-smi-*.txt"))]


def _read(path):
    first, body = path.read_text(encoding="utf-8").split("\n", 1)
    match = HEADER.match(first)
    assert match, "%s: line 1 is not run.sh's provenance header: %s" % (path.name, first)
    return match, body


@pytest.mark.parametrize("path", _fixtures("q-x"), ids=lambda p: getattr(p, "name", "none"))
def test_device_q_x_fixture(path):
    header, body = _read(path)
    parsed = parse_nvidia_smi_xml(body)
    assert parsed["driver_version"] == header["driver"].strip() and parsed["gpus"]
    assert parsed["attached_gpus"] == len(parsed["gpus"])
    gpu = parsed["gpus"][0]
    assert gpu["product_name"] == header["product"].strip()
    for g in parsed["gpus"]:
        assert g["default_power_limit_w"] and g["power_limit_w"] and g["power_draw_w"] is not None, g["pci_bus_id"]
        assert g["fb_total_mib"] and g["temp_c"] is not None and g["ecc"]["mode"] is not None
        assert set(g["hardware_throttle"]) <= set(g["active_throttle"])


@pytest.mark.parametrize("path", _fixtures("query-gpu"), ids=lambda p: getattr(p, "name", "none"))
def test_device_query_gpu_fixture(path):
    header, body = _read(path)
    parsed = parse_query_csv(body)
    fields = [c["name"] for c in parsed["columns"]]
    assert header["argv"].strip().startswith("nvidia-smi --query-gpu=%s " % ",".join(fields))
    assert parsed["rows"] and all(row["power.draw"] is not None for row in parsed["rows"])
    if "driver_version" in fields:
        assert {row["driver_version"] for row in parsed["rows"]} == {header["driver"].strip()}
