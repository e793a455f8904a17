"""Kernel log rules from the driver's own words (_host/parsers/xid.py), on real lines, cited per test."""

from ansible_collections.symphony.cluster.plugins.module_utils._burnin.kernel_log import kernel_findings, xid_outcome
from ansible_collections.symphony.cluster.plugins.module_utils._host.parsers import kmsg as _kmsg
from ansible_collections.symphony.cluster.plugins.module_utils._host.parsers import xid as _xid

# NVIDIA/TensorRT-LLM issue 4816 (B200 HGX) and leptonai/gpud's NVLink XID tests (Test_NVLinkLogCoverage).
NONFATAL_145 = "[ 5120.1] NVRM: Xid (PCI:0000:5f:00): 145, RLW_REMAP Nonfatal XC0 i0 Link 02"
NONFATAL_144 = ("[ 5121.2] NVRM: Xid (PCI:0000:04:00): 144, SAW_MVB Nonfatal XC0 i0 Link 00 "
                "(0x00000001 0x00000001 0x00000000 0x00000000)")
FATAL_144 = ("[ 5122.3] NVRM: Xid (PCI:0000:04:00): 144, SAW_MVB Fatal XC0 i0 Link 00 "
             "(0x00000001 0x00000002 0x00000000 0x00000000)")
# GB200 PCI domain 0018 (leptonai/gpud XID 149 test line), no pid= field.
NONFATAL_149 = ("[ 5123.4] NVRM: Xid (PCI:0018:01:00): 149, NETIR_BER_EVENT Nonfatal XC0 i0 Link 03 "
                "(0x00086226 0x00000001 0x00000000 0x00000000 0x00000000 0x00000000)")
# NVIDIA open-gpu-kernel-modules nv.c: the three-record "fallen off the bus" block, as dmesg prints it
# (the address as in leptonai/gpud's GPU-fallen test).
FALLEN_BLOCK = ("[ 1843.308145] NVRM: The NVIDIA GPU 0000:b3:00.0\n"
                "[ 1843.308150] NVRM: (PCI ID: 10de:26b5) installed in this system has\n"
                "[ 1843.308152] NVRM: fallen off the bus and is not responding to commands.\n")


def _findings(text):
    return kernel_findings(_kmsg.parse_kernel_log(text))


def test_nonfatal_nvlink_xids_warn_and_the_fatal_one_fails():
    findings = _findings("\n".join([NONFATAL_145, NONFATAL_144, NONFATAL_149]))
    assert [(f["xid"], f["severity"], f["severity_source"]) for f in findings["xids"]] == [
        (145, "warn", "driver"), (144, "warn", "driver"), (149, "warn", "driver")]
    assert findings["xids"][2]["pci"] == "0018:01:00"
    assert xid_outcome(findings, "during the gpu tier", {}).status == "pass"
    findings = _findings("\n".join([NONFATAL_144, FATAL_144]))
    assert [(f["xid"], f["severity"]) for f in findings["xids"]] == [(144, "warn"), (144, "fail")]
    assert xid_outcome(findings, "during the gpu tier", {}).status == "fail"


def test_catalog_decides_where_the_line_has_no_severity_word():
    assert _xid.classify(145)["severity"] == "fail" and _xid.classify(145)["severity_source"] == "catalog"


def test_fallen_off_the_bus_block_without_an_xid_line_fails_with_the_gpus_address():
    findings = _findings("[ 1800.0] nvidia 0000:b3:00.0: enabling device\n" + FALLEN_BLOCK)
    (finding,) = findings["xids"]
    assert finding["xid"] == 79 and finding["pci"] == "0000:b3:00" and finding["severity"] == "fail"
    outcome = xid_outcome(findings, "during the power tier", {})
    assert outcome.status == "fail" and "0000:b3:00" in outcome.reason


def test_fallen_off_the_bus_block_and_its_xid_line_are_one_finding():
    text = FALLEN_BLOCK + "[ 1843.4] NVRM: Xid (PCI:0000:b3:00): 79, pid=4242, name=python3, GPU has fallen off the bus.\n"
    (finding,) = _findings(text)["xids"]
    assert finding["count"] == 2 and finding["pids"] == [4242]


def test_one_record_journal_form_keeps_the_address():
    # a journal entry that keeps the driver's message whole (public eGPU notes quote it on one line)
    line = ("NVRM: The NVIDIA GPU 0000:05:00.0 installed in this system has fallen off the bus and is not "
            "responding to commands.")
    (event,) = _xid.parse_xid_events(line)
    assert event["xid"] == 79 and event["pci"] == "0000:05:00"


def test_follow_on_xid_is_linked_to_its_cause_not_counted_again():
    """A fatal NVLink Xid 149, the Xid 45 channel cleanup the driver tags " caused by previous Xid 149"
    (open-gpu-kernel-modules appends that text; the sequence 149 -> 45 -> 154 as a public GB200 fault report
    records it), and the Xid 154 recovery line (wording from leptonai/gpud's test lines)."""
    text = "\n".join([
        "[171168.1] NVRM: Xid (PCI:0018:01:00): 149, NETIR_LINK_EVT Fatal XC0 i0 Link 00 (0x016415c6 0x00000000)",
        "[171168.4] NVRM: Xid (PCI:0018:01:00): 45, pid=5151, name=python3, Ch 00000008 caused by previous Xid 149",
        "[171168.4] NVRM: Xid (PCI:0018:01:00): 45, pid=5151, name=python3, Ch 00000009 caused by previous Xid 149",
        "[171168.5] NVRM: Xid (PCI:0018:01:00): 154, GPU recovery action changed from 0x0 (None) to 0x1 "
        "(GPU Reset Required)",
    ])
    findings = _findings(text)["xids"]
    assert [(f["xid"], f["count"]) for f in findings] == [(149, 1), (154, 1)]
    assert findings[0]["follow_ons"] == {45: 2} and findings[0]["severity"] == "fail"
    # the cause outside the window: the follow-on stands alone and says what caused it
    (alone,) = _findings(text.splitlines()[1])["xids"]
    assert alone["xid"] == 45 and alone["caused_by"] == 149 and alone["severity"] == "info"


def test_a_fail_severity_follow_on_is_not_hidden_behind_a_nonfatal_cause():
    """Constructed (our values) in the driver's follow-on wording: a Nonfatal NVLink Xid 149 whose follow-on is a
    fail-severity Xid 62.  Linked, not counted again, but the finding takes the follow-on's severity."""
    text = "\n".join([NONFATAL_149, "[ 5123.9] NVRM: Xid (PCI:0018:01:00): 62, 0000(0000) caused by previous Xid 149"])
    findings = _findings(text)
    (finding,) = findings["xids"]
    assert finding["follow_ons"] == {62: 1} and finding["count"] == 1
    assert finding["severity"] == "fail" and finding["severity_source"] == "follow_on Xid 62"
    assert xid_outcome(findings, "during the gpu tier", {}).status == "fail"
