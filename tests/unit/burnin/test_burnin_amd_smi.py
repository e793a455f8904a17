"""amd-smi metric --json across ROCm versions (_host/parsers/amd_smi.py) and the telemetry backend on it.

Shapes as public amd-smi consumers record them: a top-level list with {value, unit} leaves after a
"WARNING: amd_smi not in render group" banner, "hotspot": "N/A"; the {"gpu_data": [...]} envelope with bare numbers
(ROCm 6.x); "500 MHz"-style strings (older releases)."""

import pytest

from ansible_collections.symphony.cluster.plugins.module_utils._core.errors import ParseError
from ansible_collections.symphony.cluster.plugins.module_utils._host import telemetry as T
from ansible_collections.symphony.cluster.plugins.module_utils._host.parsers.amd_smi import parse_amd_smi_metric, quantity

LIST_FORM = """WARNING: amd_smi not in render group
[
  {"gpu": 1, "temperature": {"edge": {"value": 45, "unit": "C"}, "hotspot": {"value": 61, "unit": "C"}},
   "power": {"socket_power": {"value": 142, "unit": "W"}}, "clock": {"gfx_0": {"clk": {"value": 2100, "unit": "MHz"}}}},
  {"gpu": 0, "temperature": {"edge": {"value": 30}, "hotspot": "N/A"}, "power": {"average_socket_power": {"value": 90}}},
  "N/A"
]"""
WRAPPED = '{"gpu_data":[{"gpu":0,"temperature":{"edge":40},"power":{"socket_power":100}}]}'
STRINGS = '{"gpu_data": [{"gpu": 0, "power": {"socket_power": "542 W"}, "temperature": {"hotspot": "71 C"},' \
          ' "clock": {"gfx_0": {"clk": "500 MHz"}}}]}'


def test_quantity_shapes():
    assert quantity({"value": 142, "unit": "W"}) == 142.0 and quantity("500 MHz") == 500.0 and quantity(7) == 7.0
    assert quantity("N/A") is None and quantity(None) is None and quantity({"value": None}) is None


def test_list_form_with_banner_and_na():
    assert parse_amd_smi_metric(LIST_FORM) == [
        {"gpu": 1, "power_w": 142.0, "temp_c": 61.0, "sm_clock_mhz": 2100.0},
        {"gpu": 0, "power_w": 90.0, "temp_c": 30.0, "sm_clock_mhz": None}]


def test_wrapped_and_string_forms():
    assert parse_amd_smi_metric(WRAPPED) == [{"gpu": 0, "power_w": 100.0, "temp_c": 40.0, "sm_clock_mhz": None}]
    assert parse_amd_smi_metric(STRINGS) == [{"gpu": 0, "power_w": 542.0, "temp_c": 71.0, "sm_clock_mhz": 500.0}]
    with pytest.raises(ParseError):
        parse_amd_smi_metric('{"devices": []}')


def test_backend_reads_amd_smi(monkeypatch):
    class Result:
        stdout = LIST_FORM

    monkeypatch.setattr(T, "which", lambda name: "/opt/rocm/bin/amd-smi")
    monkeypatch.setattr(T, "run", lambda argv, timeout: Result())
    backend = T.AmdSmiBackend()
    assert [r["power_w"] for r in backend.read()] == [142.0, 90.0]
    assert T.PREFERENCE.index("amd-smi") < T.PREFERENCE.index("rocm-smi")
