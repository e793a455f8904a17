"""bios_settings against a scripted BMC: only differing attributes are PATCHed, pending ones are not sent twice,
check mode writes nothing, and after a reset only a fresh read decides (a BMC that accepts the PATCH but never
applies it fails with both values)."""

from types import SimpleNamespace

import pytest

from ansible_collections.symphony.cluster.plugins.module_utils._core.gate import CheckResult
from ansible_collections.symphony.cluster.plugins.module_utils._provision import bios as _bios
from ansible_collections.symphony.cluster.plugins.module_utils._provision import verify as _verify
from ansible_collections.symphony.cluster.plugins.module_utils._core.errors import RedfishError, ValidationError
from ansible_collections.symphony.cluster.plugins.module_utils._redfish.errors import RedfishHTTPError, RedfishTaskError
from ansible_collections.symphony.cluster.plugins.module_utils._redfish.model import NodeInventory

BIOS = "/redfish/v1/Systems/1/Bios"
SETTINGS = BIOS + "/SD"


class ScriptedBmc:
    """Current and pending attributes; a reset applies pending unless ``broken``."""

    host = "bmc.test"

    def __init__(self, current, pending=None, broken=False, apply_times=("OnReset", "Immediate")):
        self.current, self.pending, self.broken, self.apply_times = dict(current), dict(pending or {}), broken, \
            list(apply_times)
        self.writes = []

    def inventory(self, client, system_id=None, sections=()):
        assert client is self and "bios" in sections
        return NodeInventory(
            systems=[{"id": "1", "uri": "/redfish/v1/Systems/1", "power_state": "On"}],
            bios={"uri": BIOS, "attributes": dict(self.current), "settings_object": SETTINGS,
                  "supported_apply_times": self.apply_times, "notes": []},
            capabilities={"power_actions": ["On", "ForceOff", "GracefulRestart", "ForceRestart"],
                          "power_target": "/redfish/v1/Systems/1/Actions/ComputerSystem.Reset"})

    def get(self, path):
        assert path == SETTINGS
        return {"Attributes": dict(self.pending)}

    def patch(self, path, body):
        self.writes.append(("PATCH", path, body))
        self.pending.update(body["Attributes"])
        return {"status": 200}

    def post(self, path, body):
        self.writes.append(("POST", path, body))
        if not self.broken:
            self.current.update(self.pending)
            self.pending = {}
        return {"status": 204}


@pytest.fixture
def bmc(monkeypatch):
    def make(**kwargs):
        fake = ScriptedBmc(**kwargs)
        monkeypatch.setattr(_bios, "read_inventory", fake.inventory)
        return fake
    return make


def _apply(fake, attributes, **kwargs):
    kwargs.setdefault("poll_s", 0)
    return _bios.apply_bios_settings(fake, attributes, sleep=lambda s: None, **kwargs)


def test_check_apply_check_apply(bmc):
    fake = bmc(current={"PCIeACSCTL_1E3C": "Enable", "SMTControl": "Enabled"})
    wanted = {"PCIeACSCTL_1E3C": "Disable", "SMTControl": "Enabled"}
    check = _apply(fake, wanted, check_mode=True, reset=True)
    assert check["changed"] and check["changes"] == {"PCIeACSCTL_1E3C": ["Enable", "Disable"]}
    assert check["diff"] == {"before": {"PCIeACSCTL_1E3C": "Enable"}, "after": {"PCIeACSCTL_1E3C": "Disable"}}
    assert fake.writes == []
    applied = _apply(fake, wanted, reset=True)
    assert applied["state"] == "applied" and applied["reset"] == "ForceRestart"
    # only the differing attribute, at the apply time the service lists
    assert fake.writes[0] == ("PATCH", SETTINGS, {"Attributes": {"PCIeACSCTL_1E3C": "Disable"},
                                                  "@Redfish.SettingsApplyTime": {"ApplyTime": "OnReset"}})
    assert applied["diff"]["after"] == {"PCIeACSCTL_1E3C": "Disable"}  # the fresh read
    writes = len(fake.writes)
    for check_mode in (True, False):
        again = _apply(fake, wanted, reset=True, check_mode=check_mode)
        assert not again["changed"] and again["state"] == "at_target"
    assert len(fake.writes) == writes


def test_pending_values_are_not_sent_twice_and_no_apply_time_when_unlisted(bmc):
    fake = bmc(current={"A": "1", "B": "1"}, pending={"A": "2"}, apply_times=())
    out = _apply(fake, {"A": "2", "B": "2"})
    assert out["state"] == "pending" and out["pending"] == ["A", "B"] and out["apply_time"] is None
    assert fake.writes == [("PATCH", SETTINGS, {"Attributes": {"B": "2"}})]
    # a rerun without reset: both already pending, nothing sent
    again = _apply(fake, {"A": "2", "B": "2"})
    assert not again["changed"] and again["pending"] == ["A", "B"] and len(fake.writes) == 1


def test_values_that_never_read_back_fail_with_both(bmc):
    fake = bmc(current={"PCIeACSCTL_1E3C": "Enable"}, broken=True)
    ticks = iter(range(0, 10000, 100))
    with pytest.raises(RedfishError, match=r"not applied 300s after ForceRestart: PCIeACSCTL_1E3C reads 'Enable', "
                                           r"wanted 'Disable'"):
        _bios.apply_bios_settings(fake, {"PCIeACSCTL_1E3C": "Disable"}, reset=True, timeout_s=300, poll_s=0,
                                  clock=lambda: next(ticks), sleep=lambda s: None)


def test_no_attribute_is_a_clear_error(bmc):
    with pytest.raises(ValidationError, match="no BIOS attribute given"):
        _apply(bmc(current={}), {})


def test_no_read_after_the_reset_says_so_with_the_last_error(bmc, monkeypatch):
    """Every read after the reset fails: the error is the read's, never the pre-reset values as if read back."""
    fake = bmc(current={"PCIeACSCTL_1E3C": "Enable"})
    calls = {"n": 0}
    real = fake.inventory

    def flaky(client, system_id=None, sections=()):
        calls["n"] += 1
        if calls["n"] > 1:
            raise RedfishError("connection refused", where="bmc.test /redfish/v1")
        return real(client, system_id, sections)
    monkeypatch.setattr(_bios, "read_inventory", flaky)
    ticks = iter(range(0, 10000, 100))
    with pytest.raises(RedfishError, match=r"could not read the BIOS in the 300s after ForceRestart: .*connection "
                                           r"refused") as info:
        _bios.apply_bios_settings(fake, {"PCIeACSCTL_1E3C": "Disable"}, reset=True, timeout_s=300, poll_s=0,
                                  clock=lambda: next(ticks), sleep=lambda s: None)
    assert info.value.details == {"changed": True}


@pytest.mark.parametrize("kwargs,where", [({"poll_s": -1}, "poll_s"), ({"timeout_s": 0}, "timeout_s")])
def test_bad_timings_refused_before_any_write(bmc, kwargs, where):
    fake = bmc(current={"A": "1"})
    with pytest.raises(ValidationError) as info:
        _bios.apply_bios_settings(fake, {"A": "2"}, reset=True, sleep=lambda s: None, **kwargs)
    assert info.value.where == where and fake.writes == []


# ------------------------------------------------------------------ issue 16: BIOS configuration jobs (Dell)
class DellJobBmc(ScriptedBmc):
    """Dell: the PATCH answer names a job; ``Bios`` shows the pending values at once, the job runs later."""

    def __init__(self, job_states, **kwargs):
        super().__init__(**kwargs)
        self.job_states = list(job_states)
        self.job_reads = 0

    def inventory(self, client, system_id=None, sections=()):
        inv = super().inventory(client, system_id, sections)
        inv.bios["attributes"].update(self.pending)   # pending values shown before the job ran
        return inv

    def patch(self, path, body):
        out = super().patch(path, body)
        out.update(status=202, task_monitor="/redfish/v1/Managers/iDRAC.Embedded.1/Jobs/JID_1")
        return out

    def post(self, path, body):
        self.writes.append(("POST", path, body))
        return {"status": 204}

    def wait_task(self, uri, timeout_s, poll_s):
        self.job_reads += 1
        state = self.job_states.pop(0)
        if state != "Completed":
            raise RedfishTaskError("task %s ended %s: Unable to apply BIOS settings" % (uri, state))
        return {"state": state}


def test_reset_waits_for_the_bios_job_before_reading_back(bmc, monkeypatch):
    fake = DellJobBmc(["Failed"], current={"ProcTurboMode": "Disabled"})
    monkeypatch.setattr(_bios, "read_inventory", fake.inventory)
    # before: the early read of Bios showed the pending value and the run said "applied"
    with pytest.raises(RedfishError, match="BIOS configuration job .*JID_1 failed: .*ended Failed"):
        _bios.apply_bios_settings(fake, {"ProcTurboMode": "Enabled"}, reset=True, poll_s=0, timeout_s=5,
                                  sleep=lambda s: None)
    assert fake.job_reads == 1


def test_completed_bios_job_then_fresh_read(bmc, monkeypatch):
    fake = DellJobBmc(["Completed"], current={"ProcTurboMode": "Disabled"})
    monkeypatch.setattr(_bios, "read_inventory", fake.inventory)
    out = _bios.apply_bios_settings(fake, {"ProcTurboMode": "Enabled"}, reset=True, poll_s=0, timeout_s=5,
                                    sleep=lambda s: None)
    assert out["state"] == "applied" and out["job"] == "Completed"


class CommittedBmc(ScriptedBmc):
    """Dell SYS011: an earlier configuration job holds the settings."""

    def patch(self, path, body):
        raise RedfishHTTPError("HTTP 400; IDRAC.2.8.SYS011: Pending configuration values are already "
                               "committed, unable to perform another set operation.", status=400,
                               extended_info=[{"MessageId": "IDRAC.2.8.SYS011"}])

    def members(self, uri):
        assert uri == "/redfish/v1/Managers/iDRAC.Embedded.1/Jobs"
        return [{"Id": "JID_0", "JobState": "Completed"},
                {"Id": "JID_7", "JobState": "Scheduled", "Message": "Task successfully scheduled."}]


def test_committed_settings_name_the_blocking_job(bmc, monkeypatch):
    fake = CommittedBmc(current={"ProcTurboMode": "Disabled"})
    monkeypatch.setattr(_bios, "read_inventory", fake.inventory)
    with pytest.raises(RedfishError, match=r"SYS011.*held by JID_7 \(Scheduled: Task successfully scheduled.\)"):
        _bios.apply_bios_settings(fake, {"ProcTurboMode": "Enabled"})


def test_verify_reads_the_bios_only_after_its_job(monkeypatch):
    fake = DellJobBmc(["Failed"], current={})
    monkeypatch.setattr(_verify, "read_inventory", lambda *a, **k: pytest.fail("read before the job ended"))
    row = CheckResult("n1", "provisioning", "bios_settings", "pass", "pending",
                      evidence={"job": "/redfish/v1/Managers/iDRAC.Embedded.1/Jobs/JID_1"})
    nd = SimpleNamespace(client=fake, results=[row], settings=SimpleNamespace(task_timeout_s=5, poll_s=0))
    out = _verify.verify(nd)
    assert out.status == "fail" and "JID_1 failed" in out.reason and out.evidence["job"].endswith("JID_1")
