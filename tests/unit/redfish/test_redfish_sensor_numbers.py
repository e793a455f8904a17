"""Sensor and threshold fields that are not numbers are unknown, never a value (issue 16 item 7).

Minimal Sensor bodies in the Sensor.v1 shape (``Reading``, ``ReadingType``, ``ReadingUnits``, ``Thresholds``).
"""

import pytest

from ansible_collections.symphony.cluster.plugins.module_utils._redfish.model import NodeInventory
from ansible_collections.symphony.cluster.plugins.module_utils._redfish.read_power import PowerReader, known_reading


def _sensor(**kw):
    body = {"@odata.id": "/redfish/v1/Chassis/1/Sensors/T1", "Id": "T1", "Name": "Inlet Temp",
            "ReadingType": "Temperature", "ReadingUnits": "Cel", "Reading": 31,
            "Status": {"State": "Enabled", "Health": "OK"}, "Thresholds": {"UpperCritical": {"Reading": 85}}}
    body.update(kw)
    return PowerReader(None, NodeInventory()).sensor(body)


def test_a_whole_sensor_reads_as_numbers():
    r = _sensor()
    assert (r.kind, r.value, r.upper_critical) == ("temperature", 31, 85)


@pytest.mark.parametrize("bad", ["N/A", "85", None, True, float("nan"), 65535, {"Reading": 1}])
def test_a_threshold_that_is_not_a_number_is_unknown(bad):
    assert _sensor(Thresholds={"UpperCritical": {"Reading": bad}}).upper_critical is None


@pytest.mark.parametrize("bad", ["N/A", 65535, 32767, -32768, -300, 5000, float("inf")])
def test_a_temperature_that_no_sensor_reads_is_unknown(bad):
    assert _sensor(Reading=bad).value is None


def test_a_unit_the_reading_type_cannot_have_makes_the_numbers_unknown():
    r = _sensor(ReadingUnits="RPM")
    assert (r.value, r.upper_critical) == (None, None)


def test_malformed_threshold_objects_do_not_crash():
    assert _sensor(Thresholds="N/A").upper_critical is None
    assert _sensor(Thresholds={"UpperCritical": "N/A"}).upper_critical is None


KNOWN = [("fan", -1, None), ("fan", 9800, 9800), ("percent", 140, None), ("humidity", 26, 26), ("power", -5, None),
         ("voltage", -12.1, -12.1), ("voltage", 65535, None)]


@pytest.mark.parametrize("kind, v, known", KNOWN)
def test_known_reading_by_kind(kind, v, known):
    assert known_reading(v, kind) == known


def test_legacy_power_voltages_are_read_with_their_thresholds():
    inv = NodeInventory()
    power = {"PowerControl": [], "Voltages": [
        {"MemberId": "0", "Name": "12V", "ReadingVolts": 12.1, "UpperThresholdCritical": 13.2,
         "Status": {"State": "Enabled", "Health": "OK"}},
        {"MemberId": "1", "Name": "VBAT", "ReadingVolts": "N/A", "UpperThresholdCritical": 65535,
         "Status": {"State": "Enabled", "Health": "Warning"}}]}
    PowerReader(None, inv).legacy_readings({"_legacy_power": power}, frozenset(["power"]))
    assert [(r.kind, r.name, r.value, r.upper_critical, r.health) for r in inv.readings] == [
        ("voltage", "12V", 12.1, 13.2, "OK"), ("voltage", "VBAT", None, None, "Warning")]
