"""Sensor faults in the pre-deployment audit (issue 16 item 7).

A bug in one check fails that check with its traceback, never the node's audit: the emulated
hgx_h100_supermicro BMC of test_predeploy_expand is read once; one temperature threshold is then set
to ``"N/A"`` past the reader (as a reader bug would leave it): ``fans_thermal`` fails as an internal error with the
traceback in its evidence, ``service_root`` and every other check run as before.  A sensor the BMC marks
Warning below its critical threshold passes, said in the reason and the evidence.
"""

import dataclasses

from ansible_collections.symphony.cluster.plugins.module_utils._predeploy.checks_health import parse_cutoff
from ansible_collections.symphony.cluster.plugins.module_utils._predeploy.graph import check_graph
from ansible_collections.symphony.cluster.plugins.module_utils._predeploy.judge import judge

# fleet is the pytest fixture of test_predeploy_expand, used here by name
from .test_predeploy_expand import audit, fleet  # noqa: F401  pylint: disable=unused-import


def _rejudge(node_sku, obs, change):
    temp = next(r for r in obs.inventory.readings if r.kind == "temperature" and r.value is not None)
    obs.inventory.readings[obs.inventory.readings.index(temp)] = dataclasses.replace(temp, **change)
    node, sku = node_sku
    results, _verdict = judge(node, sku, obs, "run-rejudge", check_graph(sku, optional=("lease_captured",)),
                              parse_cutoff("all"))
    return temp, {r.check: r for r in results}


def test_a_string_threshold_past_the_reader_fails_one_check_not_the_node(fleet):  # noqa: F811
    obs, before, _gate, _log = audit(fleet, {})
    assert before["fans_thermal"][0] == "pass"
    _temp, res = _rejudge(fleet, obs, {"upper_critical": "N/A"})
    assert res["fans_thermal"].status == "fail"
    assert res["fans_thermal"].reason.startswith("internal error in check fans_thermal: TypeError")
    assert "Traceback" in res["fans_thermal"].evidence["traceback"]
    assert {c: r.status for c, r in res.items() if c != "fans_thermal"} == \
        {c: s for c, (s, _reason) in before.items() if c != "fans_thermal"}


def test_a_bmc_warning_within_thresholds_is_said_not_silenced(fleet):  # noqa: F811
    obs, _before, _gate, _log = audit(fleet, {})
    temp, res = _rejudge(fleet, obs, {"health": "Warning", "upper_critical": None})
    assert res["fans_thermal"].status == "pass"
    assert res["fans_thermal"].reason.startswith("warning: the BMC marks 1 sensor(s) Warning within critical")
    assert res["fans_thermal"].evidence["bmc_warnings"] == ["%s health Warning at %g Cel" % (temp.name, temp.value)]
