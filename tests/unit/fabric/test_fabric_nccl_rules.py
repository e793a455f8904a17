"""nccl-tests verdict rules shared by every fabric judge (_host/nccl.py, used by _fabric declared/transports/sweep):
the rank count decides whether a run can be judged, ``Test ... failure`` lines fail quoting them, a curve with no
plateau fails, and nothing passes without a floor met."""

from ansible_collections.symphony.cluster.plugins.module_utils._fabric import sweep as W
from ansible_collections.symphony.cluster.plugins.module_utils._fabric import transports as T
from ansible_collections.symphony.cluster.plugins.module_utils._fabric.pairs import ERROR, OK
from ansible_collections.symphony.cluster.plugins.module_utils._host import launchers as H
from ansible_collections.symphony.cluster.plugins.module_utils._host import nccl as N

NCCL_8X = "nccl-tests-all_reduce_perf-8xA100-superbench.txt"
# nccl-tests src/common.h NCCLCHECK: printf("%s: Test NCCL failure %s:%d '%s / %s'\n", hostname, __FILE__, ...)
FAILURE = ("node1: Test NCCL failure common.cu:1279 'remote process exited or there was a network error / "
           "NET/IB : Got completion from peer 10.0.0.2 with status=12'")


def _text(tool_outputs):
    return (tool_outputs / NCCL_8X).read_text()


def _one_rank(text):
    return "\n".join(line for line in text.splitlines() if "Rank  " not in line or "Rank  0 " in line)


def test_failure_lines_are_found_in_nccl_tests_wording():
    text = "# nThread 1 nGpus 8\n%s\nnode2: Test CUDA failure common.cu:892 'an illegal memory access'\n" % FAILURE
    assert N.failure_lines(text) == [FAILURE, "node2: Test CUDA failure common.cu:892 'an illegal memory access'"]
    assert N.failure_lines("# Out of bounds values : 0 OK\n") == []


def test_rank_problem_on_the_real_8_rank_run(tool_outputs):
    """microsoft/superbenchmark nccl_allreduce.log: 8 '# Rank n ... device' lines under '# Using devices'."""
    parsed = N.parse(_text(tool_outputs))
    assert N.rank_problem(parsed, 8) is None
    assert "8 rank(s)" in N.rank_problem(parsed, 16)
    assert "1 rank(s)" in N.rank_problem(N.parse(_one_rank(_text(tool_outputs))))


def test_a_curve_still_rising_at_its_largest_sizes_fails():
    rising = [(2 ** k, 10.0 * 1.5 ** i) for i, k in enumerate(range(20, 34))]
    res = N.check_sweep(rising, floor_gbps=50.0)
    assert res["flat"] is False and res["below_floor"] is False and res["ok"] is False
    assert any("no plateau" in r for r in res["reasons"])


def test_analyse_without_a_floor_is_not_judged(tool_outputs):
    res = N.analyse(N.parse(_text(tool_outputs)))
    assert res["ok"] is None and "no busbw floor" in res["reasons"][-1]


def test_sweep_without_a_floor_or_with_one_rank_is_not_run(tool_outputs):
    text = _text(tool_outputs)
    res = W.run_nccl_sweep(["n1"], None, "all_reduce", outputs={1: text})
    assert res["ok"] is None and res["runs"][0]["status"] == "not_run"
    res = W.run_nccl_sweep(["n1"], None, "all_reduce", floors={1: 200.0}, outputs={1: _one_rank(text)})
    assert res["ok"] is None and "invalid configuration" in res["runs"][0]["reason"]
    res = W.run_nccl_sweep(["n1"], None, "all_reduce", floors={1: 200.0}, outputs={1: text + FAILURE + "\n"})
    assert res["ok"] is False and "common.cu:1279" in res["runs"][0]["reason"]


def test_a_sweep_with_a_count_that_could_not_run_does_not_pass(tool_outputs):
    """1 node passes, 2 nodes cannot run over ssh: the sweep is unjudged, not a pass of the part that ran."""
    res = W.run_nccl_sweep(["n1", "n2"], H.SSHLauncher(), "all_reduce", floors={1: 200.0, 2: 200.0},
                           outputs={1: _text(tool_outputs)})
    assert [r["status"] for r in res["runs"]] == ["pass", "not_run"] and res["ok"] is None


class _Printing(H.LocalLauncher):
    """A launcher whose multi-node job prints ``text`` (what srun would hand back)."""

    def __init__(self, text, rc=0):
        super().__init__()
        self.text, self.rc = text, rc

    def group(self, hosts, tasks_per_node, argv, env=None):
        return ["sh", "-c", 'printf "%%s" "$0"; exit %d' % self.rc, self.text]


def test_pair_transport_one_rank_is_an_error_not_a_zero(tool_outputs):
    transport = T.NcclPairTransport(_Printing(_one_rank(_text(tool_outputs))), gpus_per_node=1, timeout_s=10)
    test = transport.measure("a", "b")
    assert test.status == ERROR and test.value is None and "invalid configuration" in test.reason
    # 8 ranks where 2 nodes x 8 GPUs were asked for: half the GPUs are missing, not a measurement
    test = T.NcclPairTransport(_Printing(_text(tool_outputs)), gpus_per_node=8, timeout_s=10).measure("a", "b")
    assert test.status == ERROR and "expected 16" in test.reason
    test = T.NcclPairTransport(_Printing(_text(tool_outputs)), gpus_per_node=4, timeout_s=10).measure("a", "b")
    assert test.status == OK and test.value == 235.26


def test_pair_transport_failure_lines_measure_zero_quoting_them(tool_outputs):
    transport = T.NcclPairTransport(_Printing("# nThread 1 nGpus 1\n" + FAILURE + "\n", rc=1), gpus_per_node=1,
                                    timeout_s=10)
    test = transport.measure("a", "b")
    assert test.status == OK and test.value == 0.0 and "common.cu:1279" in test.reason


def test_nccl_tests_own_min_bw_verdict_fails_the_run(tool_outputs):
    """With NCCL_TESTS_MIN_BW set nccl-tests appends OK/FAILED to '# Avg bus bandwidth' (common.cu; numbers.md 3.2):
    its FAILED is a failed run even where the SKU's floor is met at the largest size."""
    text = _text(tool_outputs).replace("# Avg bus bandwidth    : 68.4048", "# Avg bus bandwidth    : 68.4048 FAILED")
    parsed = N.parse(text)
    assert parsed["avg_busbw_failed"] is True and parsed["avg_busbw"] == 68.4048
    res = N.analyse(parsed, floor_gbps=200.0)
    assert res["ok"] is False and "NCCL_TESTS_MIN_BW" in res["reasons"][-1]
    assert N.parse(_text(tool_outputs))["avg_busbw_failed"] is False
