"""ibstat judged per adapter, partial output included (_burnin/checks/devices.py judge_ibstat)."""

from ansible_collections.symphony.cluster.plugins.module_utils._burnin.checks.devices import judge_ibstat
from ansible_collections.symphony.cluster.plugins.module_utils._host.parsers.ibstat import parse_ibstat

SAMPLE = "ibstat-h100-some-down-polling-gpud.txt"
# infiniband-diags ibstat.c IBPANIC wording, as a public cluster guide shows it
# ("ibpanic: [2137592] main: stat of IB device 'mthca0' failed: No such file or directory").
PANIC = "ibpanic: [4242] main: stat of IB device 'mlx5_9' failed: No such file or directory\n"


def _infiniband_cas(text, keep):
    """The first ``keep`` adapters of the real sample, as ibstat printed them before stopping."""
    blocks = ["CA '" + b for b in text.split("CA '")[1:]]
    return "".join(blocks[:keep])


def test_real_sample_judged_per_port(tool_text):
    cas = parse_ibstat(tool_text(SAMPLE))
    ethernet = [p for ca in cas for p in ca["ports"] if p["link_layer"] == "Ethernet"]
    verdict = judge_ibstat(cas, 0, "", len(ethernet), 100, "Ethernet")
    assert verdict.status == "fail" and "Down/Polling" in verdict.reason


def test_partial_output_exit_255_judges_what_was_printed_and_names_the_missing_adapter(tool_text):
    text = _infiniband_cas(tool_text(SAMPLE), 2)
    cas = parse_ibstat(text)
    assert [ca["ca"] for ca in cas] == ["mlx5_0", "mlx5_1"]
    verdict = judge_ibstat(cas, 255, PANIC, 2, 100, "Ethernet")
    assert verdict.status == "fail"
    assert "mlx5_9 could not be read" in verdict.reason and "2 of 2 expected Ethernet ports up" in verdict.reason
    assert verdict.observed["unread"] == ["mlx5_9"] and len(verdict.observed["ports"]) == 2
    # the same output with exit 0 is a pass: the adapters printed are good
    assert judge_ibstat(cas, 0, "", 2, 100, "Ethernet").status == "pass"
