"""NVLink / fabric health (kind nvlink): parsers on public output shapes, the verdict, the check end to end."""

from ansible_collections.symphony.cluster.plugins.module_utils._burnin import runner as B
from ansible_collections.symphony.cluster.plugins.module_utils._burnin.checks import KINDS
from ansible_collections.symphony.cluster.plugins.module_utils._burnin.checks import nvlink as N
from ansible_collections.symphony.cluster.plugins.module_utils._burnin.evidence import EvidenceStore
from ansible_collections.symphony.cluster.plugins.module_utils._burnin.executor import CommandResult, Executor
from ansible_collections.symphony.cluster.plugins.module_utils._burnin.kernel_log import KernelLog
from ansible_collections.symphony.cluster.plugins.module_utils._burnin.plan import build_plan
from ansible_collections.symphony.cluster.plugins.module_utils._core import sku as _sku
from ansible_collections.symphony.cluster.plugins.module_utils._host.parsers import nvlink as P

H100 = "GPU %d: NVIDIA H100 80GB HBM3 (UUID: GPU-abcdefab-cdef-abdc-abcd-abababababa%d)\n"


def status_text(gpus=8, inactive=()):
    """``nvidia-smi nvlink --status`` as stas00/ml-engineering (compute/accelerator/nvidia/debug.md) shows it for an
    H100 80GB HBM3 (18 links at 26.562 GB/s); ``<inactive>`` as a public DL380a H100 note prints a down link."""
    out = ""
    for g in range(gpus):
        out += H100 % (g, g)
        for link in range(18):
            rate = "<inactive>" if (g, link) in inactive else "26.562 GB/s"
            out += "\t Link %d: %s\n" % (link, rate)
    return out


def errors_text(gpus=8, crc=None):
    """``nvidia-smi nvlink -e`` in the same source's shape (Replay/Recovery/CRC Errors per link)."""
    out = ""
    for g in range(gpus):
        out += H100 % (g, g)
        for link in range(18):
            value = (crc or {}).get((g, link), 0)
            out += ("\t Link %d: Replay Errors: 0\n\t Link %d: Recovery Errors: 0\n\t Link %d: CRC Errors: %s\n\n"
                    % (link, link, link, value))
    return out


# nvidia-smi -q Fabric block: the Completed/Success shape of a public nvidia-smi -q dump; N/A as on parts without
# an NVLink fabric (public GeForce dumps); CliqueId/ClusterUUID values in NVIDIA/topograph's clique tests.
FABRIC = """GPU 00000008:01:00.0
    Product Name                          : NVIDIA GB200
    Fabric
        State                             : {state}
        Status                            : {status}
        CliqueId                          : {clique}
        ClusterUUID                       : 50000000-0000-0000-0000-000000000005
        Health
            Bandwidth                     : {bandwidth}
    Processes                             : None
"""


def fabric_text(n=4, **kw):
    values = dict(dict(state="Completed", status="Success", clique="4000000004", bandwidth="Full"), **kw)
    return "\n".join(FABRIC.replace("00000008:01", "00000008:%02x" % (1 + i)).format(**values) for i in range(n))


def test_status_parser_reads_rates_and_inactive_links():
    (gpu,) = P.parse_nvlink_status(status_text(1, inactive={(0, 4)}))
    assert gpu["index"] == 0 and gpu["name"] == "NVIDIA H100 80GB HBM3" and gpu["uuid"].startswith("GPU-")
    assert len(gpu["links"]) == 18 and gpu["links"][0] == 26.562 and gpu["links"][4] is None


def test_error_parser_both_layouts():
    (gpu,) = P.parse_nvlink_errors(errors_text(1, crc={(0, 3): 7}))
    assert gpu["links"][3] == {"replay": 0, "recovery": 0, "crc": 7}
    # newer drivers: "Link 0:" then one counter per line (shape of a public nvidia-smi wrapper's test fixture)
    (gpu,) = P.parse_nvlink_errors("GPU 0: H100\n Link 0:\n  CRC Flit Error: 0\n  Replay Error: 2\n")
    assert gpu["links"][0] == {"crc_flit": 0, "replay": 2}


def test_fabric_parser_na_is_unknown():
    (gpu,) = P.parse_fabric(FABRIC.format(state="N/A", status="N/A", clique="N/A", bandwidth="N/A"))
    assert gpu == {"pci": "00000008:01:00.0", "state": None, "status": None, "clique_id": None,
                   "cluster_uuid": "50000000-0000-0000-0000-000000000005", "bandwidth": None}


def test_judge_links_and_fabric():
    thresholds = {"min_active_links": 18, "min_link_gbps": 26.562, "max_crc_errors": 0}
    status = P.parse_nvlink_status(status_text(8, inactive={(3, 17)}))
    errors = P.parse_nvlink_errors(errors_text(8, crc={(5, 2): 12}))
    problems, unjudged = N.judge_links(status, errors, 8, thresholds)
    assert problems == ["GPU 3: 17 of 18 links active (inactive: 17)", "GPU 5 link 2: crc_errors 12 > 0"]
    assert unjudged == []
    assert N.judge_links(P.parse_nvlink_status(status_text(7)), None, 8, thresholds)[0] == [
        "7 GPU(s) listed by nvlink --status, 8 expected"]
    na = P.parse_nvlink_errors("GPU 0: H100\n Link 0: CRC Errors: N/A\n")
    assert N.judge_links(P.parse_nvlink_status(status_text(1)), na, 1, thresholds) == ([], ["GPU 0 link 0 max_crc_errors"])
    assert N.judge_fabric(P.parse_fabric(fabric_text()), 4) == []
    problems = N.judge_fabric(P.parse_fabric(fabric_text(state="In Progress", status="N/A")), 4)
    assert "fabric state In Progress" in problems[0]
    assert N.judge_fabric(P.parse_fabric(fabric_text(clique="N/A")), 4)[-1].startswith("GPUs not in one NVLink clique")


class FakeSmi(Executor):
    def __init__(self, outputs):
        super().__init__()
        self.outputs = outputs

    def which(self, tool):
        return "/usr/bin/" + tool

    def run(self, argv, timeout_s, cwd=None):
        return CommandResult(list(argv), 0, self.outputs[" ".join(argv[1:])], "", 0.1)


def _run(repo_root, tmp_path, sku, outputs):
    manifest = _sku.load_manifest(str(repo_root / "skus" / sku))
    test = [t for t in build_plan(manifest, "production") if t.name == "nvlink_health"][0]
    fake = FakeSmi(outputs)
    return B.run_test(test, "n1", manifest, "production", fake, EvidenceStore(str(tmp_path), "n1", "r1"),
                      KernelLog(fake), KINDS[test.kind])


def test_h100_sku_check_end_to_end(repo_root, tmp_path):
    outputs = {"nvlink --status": status_text(), "nvlink -e": errors_text(), "is-active nvidia-fabricmanager": "active\n"}
    assert _run(repo_root, tmp_path, "hgx_h100_supermicro.yml", outputs).status == "pass"
    outputs["is-active nvidia-fabricmanager"] = "inactive\n"
    outcome = _run(repo_root, tmp_path, "hgx_h100_supermicro.yml", outputs)
    assert outcome.status == "fail" and "nvidia-fabricmanager is inactive" in outcome.reason


def test_gb200_sku_reads_the_fabric_state(repo_root, tmp_path):
    outputs = {"nvlink --status": status_text(4), "nvlink -e": errors_text(4), "-q": fabric_text()}
    assert _run(repo_root, tmp_path, "gb200_nvl_tray.yml", outputs).status == "pass"
    outputs["-q"] = fabric_text(state="Not Started", status="N/A")
    assert _run(repo_root, tmp_path, "gb200_nvl_tray.yml", outputs).status == "fail"


def test_a_declared_counter_the_driver_did_not_print_is_unjudged_not_zero():
    """A link listing only CRC counters (the newer one-counter-per-line layout above) says nothing about replays: with
    max_replay_errors declared that link is unjudged; so is a GPU missing from nvlink -e."""
    status = P.parse_nvlink_status(status_text(2))
    only_crc = P.parse_nvlink_errors("GPU 0: H100\n Link 0:\n  CRC Flit Error: 0\n")
    problems, unjudged = N.judge_links(status[:1], only_crc, 1, {"max_replay_errors": 0, "max_crc_errors": 0})
    assert problems == [] and unjudged == ["GPU 0 link 0 max_replay_errors"]
    problems, unjudged = N.judge_links(status, P.parse_nvlink_errors(errors_text(1)), 2, {"max_crc_errors": 0})
    assert unjudged == ["max_crc_errors: 1 GPU(s) in nvlink -e, 2 expected"]
