"""Passive health: kernel-log records and error counters gained since the last audit, against the ledger's cursor."""

from ansible_collections.symphony.cluster.plugins.module_utils._fleet_audit.exercise import (
    inject_lab, kmsg_record, xid_message)
from ansible_collections.symphony.cluster.plugins.module_utils._fleet_audit.passive import (
    counters_outcome, kernel_outcome, new_records)
from ansible_collections.symphony.cluster.plugins.module_utils._fleet_audit.stage import audit_node
from ansible_collections.symphony.cluster.plugins.module_utils._host.parsers.kmsg import parse_kernel_log

NOTHING = ["gpus", "infiniband"]


def _records(text):
    return [r for r in parse_kernel_log(text) if r["form"] == "kmsg"]


def test_the_real_kmsg_capture_first_audit_judges_everything_then_nothing_is_new(tool_text):
    records = _records(tool_text("kmsg-raw-records-nvswitch-gpud.txt"))
    first = new_records(records, "b1", None)
    assert len(first["records"]) == len(records) and "first audit" in first["notes"][0]
    outcome = kernel_outcome(first)
    again = new_records(records, "b1", outcome.observed["cursor"])
    assert again["records"] == [] and not again["lost"]
    assert kernel_outcome(again).status == "pass"


def test_an_xid_since_the_last_audit_fails_and_stays_open_until_a_re_burn_in():
    base = kmsg_record(10, 1000, "usb 1-1: new device")
    cursor = kernel_outcome(new_records(_records(base), "b1", None)).observed["cursor"]
    text = base + kmsg_record(11, 2000, xid_message(79, "0000:3b:00"))
    detected = kernel_outcome(new_records(_records(text), "b1", cursor), now=100.0)
    assert detected.status == "fail" and "Xid 79" in detected.reason
    later = kernel_outcome(new_records(_records(text), "b1", detected.observed["cursor"]),
                           previous_open=detected.observed["open"], now=200.0)
    assert later.status == "fail" and "still open" in later.reason
    cleared = kernel_outcome(new_records(_records(text), "b1", detected.observed["cursor"]),
                             previous_open=detected.observed["open"], cleared_at=150.0, now=300.0)
    assert cleared.status == "pass"


def test_records_lost_in_the_ring_buffer_are_not_a_pass():
    text = kmsg_record(50, 5000, "eth0: link up")
    delta = new_records(_records(text), "b1", {"boot_id": "b1", "seq": 10})
    assert delta["lost"] == 39
    outcome = kernel_outcome(delta)
    assert outcome.status == "not_run" and "overwritten" in outcome.reason


def test_a_reboot_makes_every_record_new():
    text = kmsg_record(0, 5, xid_message(48, "0000:3b:00"))
    delta = new_records(_records(text), "b2", {"boot_id": "b1", "seq": 900})
    assert len(delta["records"]) == 1 and "booted" in delta["notes"][0]
    assert kernel_outcome(delta).status == "fail"


def test_a_non_fatal_xid_passes_and_is_named():
    text = kmsg_record(3, 5, "NVRM: Xid (PCI:0000:3b:00): 13, pid=1234, name=python, Graphics Exception")
    outcome = kernel_outcome(new_records(_records(text), "b1", {"boot_id": "b1", "seq": 2}))
    assert outcome.status == "pass" and "Xid 13" in outcome.reason


def test_counters_gain_reset_and_baseline():
    before = {"mlx5_0/1": {"link_downed": 2, "symbol_error": 10}}
    gained = counters_outcome({"mlx5_0/1": {"link_downed": 3, "symbol_error": 12}}, before, "IB", "no IB")
    assert gained.status == "fail" and "link_downed +1" in gained.reason
    corrected = counters_outcome({"mlx5_0/1": {"link_downed": 2, "symbol_error": 40}}, before, "IB", "no IB")
    assert corrected.status == "pass"
    reset = counters_outcome({"mlx5_0/1": {"link_downed": 1, "symbol_error": 0}}, before, "IB", "no IB")
    assert reset.status == "fail" and any("reset" in n for n in reset.observed["notes"])
    assert counters_outcome(None, None, "IB", "no IB").status == "not_run"


def test_the_real_a100_capture_gives_a_gpu_counter_baseline(tool_text, fake_node):
    node = fake_node({"nvidia-smi": (0, tool_text("nvidia-smi-q-x-a100-sxm4-80gb-mig-v12.xml.txt"))})
    out = audit_node({"manifest": {}, "not_expected": ["infiniband"]}, node.run, node.read)
    gpu = {c["name"]: c for c in out["checks"]}["gpu_counters"]
    assert gpu["status"] in ("pass", "fail") and gpu["observed"]["baseline"] is True
    assert "0" in gpu["observed"]["counters"]


def test_a_lab_xid_injection_is_detected_and_marked_injected(tmp_path):
    source = tmp_path / "lab1.kmsg"
    source.write_text(kmsg_record(0, 10, "Linux version 6.8.0"))
    params = {"manifest": {}, "not_expected": NOTHING, "kernel_log_source": str(source)}
    first = {c["name"]: c for c in audit_node(params)["checks"]}["kernel_log"]
    assert first["status"] == "pass"
    injection = inject_lab(str(source), xid=79)
    assert injection["injected"] and injection["seq"] == 1
    checks = {c["name"]: c for c in audit_node(dict(params, previous={"kernel_log": first["observed"]},
                                                    injected=[injection["message"]]))["checks"]}
    kernel = checks["kernel_log"]
    assert kernel["status"] == "fail" and "[injected]" in kernel["reason"] and kernel["observed"]["injected"]
    assert checks["gpu_counters"]["status"] == "not_run" and "no GPUs" in checks["gpu_counters"]["reason"]


def test_an_unreadable_kernel_log_is_not_run(tmp_path):
    checks = {c["name"]: c for c in audit_node({"manifest": {}, "not_expected": NOTHING,
                                                "kernel_log_source": str(tmp_path / "absent")})["checks"]}
    assert checks["kernel_log"]["status"] == "not_run" and "not readable" in checks["kernel_log"]["reason"]


DMON = "#Entity   XIDER\nID\nGPU 0     0\nGPU 1     79\n"


def test_a_dcgm_injected_xid_shows_in_the_xid_field_and_is_marked(fake_node):
    node = fake_node({"dcgmi": (0, DMON), "nvidia-smi": (1, "")})
    params = {"manifest": {"software": {"dcgm": {"accepted": ["3.3.5"], "source": "s"}}}, "not_expected": [],
              "injected_xids": [79], "previous": {"dcgm_xid": {"xid": {"0": 0, "1": 0}}}}
    checks = {c["name"]: c for c in audit_node(params, node.run, node.read)["checks"]}
    dcgm = checks["dcgm_xid"]
    assert dcgm["status"] == "fail" and "GPU 1 Xid 79" in dcgm["reason"] and "[injected]" in dcgm["reason"]
    assert dcgm["required"] is True
    again = audit_node(dict(params, previous={"dcgm_xid": dcgm["observed"]}), node.run, node.read)["checks"]
    assert {c["name"]: c for c in again}["dcgm_xid"]["status"] == "pass"


def test_a_dcgm_field_without_a_sample_is_not_run(fake_node):
    node = fake_node({"dcgmi": (0, "#Entity   XIDER\nID\nGPU 0     N/A\n"), "nvidia-smi": (1, "")})
    checks = {c["name"]: c for c in audit_node({"manifest": {}}, node.run, node.read)["checks"]}
    assert checks["dcgm_xid"]["status"] == "not_run" and checks["dcgm_xid"]["required"] is False


def test_a_kernel_log_without_kmsg_records_is_not_run(tmp_path):
    source = tmp_path / "lab1.log"
    source.write_text("[ 12.000000] NVRM: Xid (PCI:0000:3b:00): 79, pid=1, name=x, GPU has fallen off the bus.\n")
    checks = {c["name"]: c for c in audit_node({"manifest": {}, "not_expected": NOTHING,
                                                "kernel_log_source": str(source)})["checks"]}
    assert checks["kernel_log"]["status"] == "not_run" and "no /dev/kmsg records" in checks["kernel_log"]["reason"]


def test_counters_nobody_could_read_are_not_a_pass():
    unread = counters_outcome({"mlx5_0/1": {}}, None, "IB", "no IB")
    assert unread.status == "not_run"
    partly = counters_outcome({"0": {"ecc": None}, "1": {"ecc": 0}}, None, "GPU", "no GPU")
    assert partly.status == "not_run" and "not read for 0" in partly.reason


def test_an_injected_finding_still_open_keeps_its_mark_however_long_the_list():
    base = kmsg_record(10, 1000, "usb 1-1: new device")
    cursor = kernel_outcome(new_records(_records(base), "b1", None)).observed["cursor"]
    injected = xid_message(79, "0000:3b:00")
    text = base + kmsg_record(11, 2000, injected)
    detected = kernel_outcome(new_records(_records(text), "b1", cursor), injected=[injected], now=100.0)
    assert detected.status == "fail" and "[injected]" in detected.reason
    many = detected.observed["open"] + [{"what": "x" * 400, "at": 100.0, "injected": False}] * 4
    later = kernel_outcome(new_records(_records(text), "b1", detected.observed["cursor"]), previous_open=many,
                           now=200.0)
    assert later.status == "fail" and later.reason.startswith(
        "kernel log: %d finding(s) still open since an earlier audit [injected]" % len(many))
    real = kernel_outcome(new_records(_records(text), "b1", detected.observed["cursor"]),
                          previous_open=[f for f in many if not f["injected"]], now=200.0)
    assert "[injected]" not in real.reason   # only an injected finding is marked
