"""Burn-in's BMC SEL scan (check bmc_sel_scan) on the real Supermicro HGX H100 SEL capture.

The capture's Systems/1/LogServices/Log1 holds 82 entries (Managers/1 Log1 is the BMC's own OEM event log,
LogEntryType OEM, which the reader leaves out).  What a person reads in it: entries 18-25, 27, 28 (PS1/2/3/5
"Power Supply Failure detected" / "input lost") and 43 ("[GS-0001] NVSwitch Temp, 1 is not present") are
Critical; 1, 2, 26, 33, 37 ("Dedicated LAN Link Down", "First AC Power on") and 72, 73, 75, 76 (ROT-0016/0017
lockout "changed to Unlock") are Warning; entry 82 of 2023-11-30T20:35:05Z is the newest.  "Burn-in" is
replayed by serving the Entries collection cut after entry N for the mark and whole for the check.
"""

import importlib.util
import json
import pathlib
import socket

import pytest

from ansible_collections.symphony.cluster.plugins.module_utils._core.errors import ValidationError
from ansible_collections.symphony.cluster.plugins.module_utils._core.gate import FAIL, NOT_RUN, PASS
from ansible_collections.symphony.cluster.plugins.module_utils._redfish.model import NodeInventory
from ansible_collections.symphony.cluster.plugins.module_utils._redfish.client import RedfishClient
from ansible_collections.symphony.cluster.plugins.module_utils._burnin.sel_scan import (
    CHECK, NOT_CONFIGURED, judge_sel, new_entries, not_configured, observe, read_sel, sel_mark, sel_scan)

_SERVER = pathlib.Path(__file__).resolve().parents[1] / "redfish" / "redfish_mockserver.py"
PASSWORD = "s3cr3t-Passw0rd"
LOG = "/redfish/v1/Systems/1/LogServices/Log1"
ENTRIES = LOG + "/Entries"
SETTINGS = {"username": "admin", "password": PASSWORD, "retries": 0, "connect_timeout": 2, "read_timeout": 5}


def _mockserver():
    spec = importlib.util.spec_from_file_location("burnin_sel_redfish_mockserver", _SERVER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


SRV = _mockserver()


@pytest.fixture(scope="module")
def capture(mockups):
    return SRV.mockup_root(mockups, "libredfish-supermicro")


def _cut(capture, upto):
    """The Entries collection as the BMC served it when entry ``upto`` was its newest."""
    with open(capture / ENTRIES.strip("/") / "index.json", encoding="utf-8") as handle:
        body = json.load(handle)
    body["Members"] = [m for m in body["Members"] if int(m["Id"]) <= upto]
    body["Members@odata.count"] = len(body["Members"])
    return lambda request: (200, {"Content-Type": "application/json"}, body)


def _read(capture, upto=None, overrides=None):
    with SRV.MockupBMC(capture) as bmc:
        if upto is not None:
            bmc.set("GET", ENTRIES, _cut(capture, upto))
        for (method, path), answer in (overrides or {}).items():
            bmc.set(method, path, answer)
        inv, error = observe("n1", SRV.BASE, {}, SETTINGS)
    assert error is None
    return inv


@pytest.fixture(scope="module")
def whole(capture):
    return _read(capture)


def test_read_sel_reads_the_system_sel_only(capture):
    with SRV.MockupBMC(capture) as bmc:
        with RedfishClient(SRV.BASE, "admin", PASSWORD, retries=0) as client:
            inv = read_sel(client)
        assert not any("/Chassis" in path or "/UpdateService" in path for _m, path, _h in bmc.log)
    assert len(inv.sel) == 82 and inv.incomplete == [] and inv.components == []
    assert {e.log for e in inv.sel} == {LOG}
    assert inv.requests <= 8
    e43 = [e for e in inv.sel if e.id == "43"][0]
    assert (e43.severity, e43.created, e43.message) == ("Critical", "2023-11-09T22:52:34Z",
                                                        "[GS-0001] NVSwitch Temp, 1 is not present")


def test_mark_records_the_newest_entry(whole):
    mark = sel_mark(whole, now=1772445600)
    assert mark == {"marked_at": "2026-03-02T10:00:00Z", "logs": {LOG: {
        "entries": 82, "last_id": 82, "last_created": "2023-11-30T20:35:05Z",
        "last_message": "[PWR-0000] PS8 Status, Power Supply Installed"}}}
    # Ids decide, not times: entry 5 (00:51:09) is older than entry 4 (02:51:09), the clock-sync pair.
    times = {e.id: e.created for e in whole.sel}
    assert times["5"] < times["4"]


def test_critical_entries_during_burn_in_fail(capture, whole):
    before = _read(capture, upto=17)
    assert len(before.sel) == 17
    outcome = judge_sel(sel_mark(before), whole)
    assert outcome.status == FAIL
    assert outcome.reason.startswith(
        "SEL: 11 Critical entries during burn-in: '[PWR-0001] PS5 Status, Power Supply Failure detected' at "
        "2023-10-10T20:26:08Z, '[PWR-0003] PS5 Status, Power Supply input lost (AC/DC)' at 2023-10-10T20:26:08Z, "
        "'[PWR-0001] PS1 Status, Power Supply Failure detected' x2 from 2023-10-10T20:26:13Z to "
        "2023-10-11T21:17:41Z, ")
    assert outcome.reason.endswith(", and 4 more")
    assert "ClearLog" in outcome.remediation and "PSU" in outcome.remediation
    assert outcome.observed["new_entries"] == 65
    assert (outcome.observed["critical"], outcome.observed["warning"]) == (11, 7)
    crit = [e["id"] for e in outcome.observed["entries"] if e["severity"] == "Critical"]
    assert crit == ["18", "19", "20", "21", "22", "23", "24", "25", "27", "28", "43"]


def test_older_critical_entries_do_not_count_warnings_listed(capture, whole):
    # Marked at entry 43 (the NVSwitch Critical entry): burn-in added 44-82, Warnings 72, 73, 75, 76 only.
    outcome = judge_sel(sel_mark(_read(capture, upto=43)), whole)
    assert outcome.status == PASS
    assert outcome.reason == (
        "SEL: no Critical entries during burn-in; 4 Warning entries: '[ROT-0017] Security State of BMC JTAG "
        "Lockout changed to Unlock' x2 from 2023-11-29T20:31:15Z to 2023-11-30T20:35:03Z, '[ROT-0016] Security "
        "State of BMC Console Lockout changed to Unlock' x2 from 2023-11-29T20:31:15Z to 2023-11-30T20:35:03Z")
    assert [e["id"] for e in outcome.observed["entries"]] == ["72", "73", "75", "76"]


def test_nothing_new_passes(whole):
    outcome = judge_sel(sel_mark(whole), whole)
    assert outcome.status == PASS
    assert outcome.reason == "SEL: no Critical or Warning entries during burn-in (0 new entries)"


def test_sel_cleared_during_burn_in_counts_whole(capture, whole):
    # Cleared after the mark (newest id 82) and refilled up to id 25: every entry is new, the PSU failures fail.
    outcome = judge_sel(sel_mark(whole), _read(capture, upto=25))
    assert outcome.status == FAIL and outcome.reason.startswith("SEL: 8 Critical entries during burn-in: ")
    assert outcome.observed["notes"] == ["the SEL %s was cleared or wrapped during burn-in (newest id 25, 82 "
                                         "before): all its 25 entries count" % LOG]
    # Refilled only with ids 1-10 (two Warnings): a pass that says so.
    outcome = judge_sel(sel_mark(whole), _read(capture, upto=10))
    assert outcome.status == PASS
    assert outcome.reason.startswith("SEL: no Critical entries during burn-in; 2 Warning entries: "
                                     "'[LAN-0006] Dedicated LAN Link Down' at 2023-07-21T15:35:03Z, "
                                     "'[PWR-0020] First AC Power on' at 2023-08-04T16:16:11Z; the SEL ")


def test_same_id_other_entry_means_cleared(whole):
    before = NodeInventory()
    before.sel = list(whole.sel)
    mark = sel_mark(before)
    mark["logs"][LOG]["last_created"] = "2026-03-02T09:00:00Z"   # id 82 then was another entry
    entries, notes = new_entries(mark, whole)
    assert len(entries) == 82 and "cleared or wrapped" in notes[0]


def test_unreachable_bmc_is_not_run_never_pass(whole):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = "http://127.0.0.1:%d" % port   # nothing listens there: connection refused
    inv, error = observe("n1", url, {}, SETTINGS)
    assert inv is None and error.startswith("RedfishConnectionError at %s: " % url)
    before = judge_sel({"error": error}, whole)
    assert before.status == NOT_RUN and before.reason.startswith("BMC SEL not read before burn-in: "
                                                                 "RedfishConnectionError at ")
    after = judge_sel(sel_mark(whole), None, error)
    assert after.status == NOT_RUN and after.reason.startswith("BMC SEL not read after burn-in: RedfishConnectionError")
    assert judge_sel(None, whole).status == NOT_RUN
    inv, error = observe("n1", None, {}, SETTINGS)
    assert error == "no BMC address for n1 (not in the BMC map, no bmc_address)"


def test_unreadable_entries_are_not_run(capture, whole):
    broken = {("GET", ENTRIES): (500, {"Content-Type": "text/html"}, "<html>Internal Server Error</html>")}
    partial = _read(capture, overrides=broken)
    assert partial.sel == [] and partial.incomplete[0]["uri"] == ENTRIES
    after = judge_sel(sel_mark(whole), partial)
    assert after.status == NOT_RUN
    assert after.reason.startswith("BMC SEL could not be read completely after burn-in (%s: " % ENTRIES)
    before = judge_sel(sel_mark(partial), whole)
    assert before.status == NOT_RUN and "could not be read completely before burn-in" in before.reason
    # Critical entries read despite a gap still fail: the evidence is there.
    partial.incomplete.append({"part": "sel", "uri": "/redfish/v1/Systems/2/LogServices", "reason": "HTTP 503"})
    with_gap = judge_sel(sel_mark(_read(capture, upto=17)), NodeInventory(sel=whole.sel, incomplete=partial.incomplete))
    assert with_gap.status == FAIL and with_gap.reason.endswith("(and 1 more))")
    assert "; part of the SEL could not be read (%s: " % ENTRIES in with_gap.reason


def test_not_configured_is_not_run_and_not_required():
    check = not_configured()
    assert check["name"] == CHECK == "bmc_sel_scan"
    assert (check["status"], check["required"], check["reason"]) == (NOT_RUN, False, NOT_CONFIGURED)


def test_batch_mark_then_check(capture, tmp_path):
    bmc_map = tmp_path / "bmcs.json"
    bmc_map.write_text(json.dumps({"nodes": {"gpu-a": {"url": SRV.BASE, "username": "admin", "password": PASSWORD},
                                             "gpu-b": {"url": SRV.BASE, "username": "admin", "password": "wrong-pw"}}}))
    params = dict(SETTINGS, mode="mark", hosts=["gpu-a", "gpu-b", "gpu-c"], bmc_map=str(bmc_map),
                  bmc_addresses={"gpu-c": ""}, password=None, workers=4)
    with SRV.MockupBMC(capture) as bmc:
        bmc.set("GET", ENTRIES, _cut(capture, 17))
        marked = sel_scan(params)
    assert marked["marks"]["gpu-a"]["logs"][LOG]["last_id"] == 17
    assert marked["marks"]["gpu-b"]["error"].startswith("RedfishAuthError at https://bmc.test: ")
    assert "wrong-pw" not in json.dumps(marked)
    assert marked["marks"]["gpu-c"]["error"] == "no BMC address for gpu-c (not in the BMC map, no bmc_address)"
    with SRV.MockupBMC(capture):
        checked = sel_scan(dict(params, mode="check", marks=marked["marks"]))
    checks = checked["checks"]
    assert checks["gpu-a"]["status"] == FAIL and checks["gpu-a"]["name"] == "bmc_sel_scan"
    assert checks["gpu-a"]["reason"].startswith("SEL: 11 Critical entries during burn-in: ")
    assert checks["gpu-b"]["status"] == NOT_RUN and checks["gpu-b"]["reason"].startswith(
        "BMC SEL not read before burn-in: RedfishAuthError")
    assert checked["summary"] == {"fail": 1, "not_run": 2} and checked["failed_hosts"] == ["gpu-a"]
    with pytest.raises(ValidationError):
        sel_scan(dict(params, mode="scan"))
