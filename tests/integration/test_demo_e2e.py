"""make demo, end to end: every seeded defect is caught at the stage where it belongs with the right reason, no
healthy node fails, a rerun changes no firmware and gives the same verdicts, and the report opens cleanly.

Runs the real demo (emulated fleet + 10 lab hosts + Slurm + ansible-playbook site.yml), twice: about 6 minutes.
Needs root (the lab's network namespaces), like make demo itself.
"""

import json
import os
import re
import ssl
import subprocess
import sys
import urllib.request

import pytest

from ansible_collections.symphony.cluster.plugins.module_utils._core.ledger import open_ledger
from timescale import scaled

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the demo's lab hosts need root (network namespaces)")

HEALTHY = ["gpu-r01-u02", "gpu-r01-u26", "gpu-r02-u02"]


def _run_demo(repo_root, *args):
    proc = subprocess.run([sys.executable, "-m", "symphony_demo", *args], cwd=repo_root, capture_output=True,
                          text=True, timeout=scaled(900), check=False)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    return proc.stdout, json.loads((repo_root / "build" / "demo" / "summary.json").read_text())


def _emulator_stats(repo_root, method="GET"):
    bmc_map = json.loads((repo_root / "build" / "demo" / "bmcs.json").read_text())
    context = ssl.create_default_context(cafile=bmc_map["ca_bundle"]) if bmc_map.get("ca_bundle") else None
    out = {}
    for host, node in bmc_map["nodes"].items():
        request = urllib.request.Request(node["url"] + "/_emulator/stats", method=method)
        with urllib.request.urlopen(request, context=context, timeout=scaled(10)) as response:
            out[host] = json.loads(response.read() or b"{}")
    return out


@pytest.fixture(scope="module")
def first_run(repo_root):
    yield _run_demo(repo_root, "--fresh")
    # Leave no emulator or lab behind for the tests that follow (the demo keeps both up for a rerun).
    subprocess.run([sys.executable, "-m", "symphony_demo", "down"], cwd=repo_root, capture_output=True,
                   timeout=scaled(120), check=False)


def test_every_seeded_defect_is_caught_where_it_belongs(first_run, repo_root):
    stdout, summary = first_run
    nodes = summary["nodes"]

    # pre_deployment (out-of-band audit): a missing GPU and a downtrained PCIe link
    assert (nodes["gpu-r01-u10"]["last_stage"], nodes["gpu-r01-u10"]["gate"]) == ("pre_deployment", "fail")
    assert nodes["gpu-r01-u10"]["reason"].startswith("gpus: expected 8 × H100 80GB HBM3, found 7; slot GPU5 empty")
    assert (nodes["gpu-r02-u18"]["last_stage"], nodes["gpu-r02-u18"]["gate"]) == ("pre_deployment", "fail")
    assert nodes["gpu-r02-u18"]["reason"].startswith("gpu_pcie_links: PCIe link downtrained: GPU3 at x8")

    # provisioning: a firmware task that fails; a BMC behind the manifest that provisioning brings up to it
    assert (nodes["gpu-r02-u10"]["last_stage"], nodes["gpu-r02-u10"]["gate"]) == ("provisioning", "fail")
    assert nodes["gpu-r02-u10"]["reason"].startswith("firmware:bios: firmware task failed")
    assert "Critical" in nodes["gpu-r02-u10"]["reason"]
    ledger = open_ledger(str(repo_root / "build" / "demo" / "ledger.sqlite"))
    bmc_steps = [r for r in ledger.history("gpu-r01-u18", "provisioning", "firmware:bmc") if r.status == "pass"]
    assert bmc_steps and "01.01.10" in json.dumps(bmc_steps[0].to_dict()) and "11.01.01" in json.dumps(
        bmc_steps[0].to_dict())
    assert nodes["gpu-r01-u18"]["gates"]["provisioning"] == "pass"

    # burn_in cabling check, on real LLDP frames: gpu-r01-u18's two lab cables are swapped (lab3's rail0 on leaf2,
    # rail1 on leaf1); one swapped pair, one technician action, the rest of its lab cables as planned
    assert (nodes["gpu-r01-u18"]["last_stage"], nodes["gpu-r01-u18"]["gate"]) == ("burn_in", "fail")
    assert nodes["gpu-r01-u18"]["reason"].startswith("cabling: "), nodes["gpu-r01-u18"]["reason"]
    assert "rail0 reaches leaf2 port swp3; the plan says leaf1 port 3" in nodes["gpu-r01-u18"]["reason"]
    cabling = {r.node: r for r in ledger.current_results(stage="burn_in") if r.check == "cabling"}
    assert cabling["gpu-r01-u18"].status == "fail" and len(cabling["gpu-r01-u18"].evidence["actions"]) == 1
    assert cabling["gpu-r01-u18"].remediation.startswith("swap the cables at leaf1 port 3 and leaf2 port 3")
    for host in HEALTHY:   # lab cables as planned; the InfiniBand HCAs cannot be read here, and say so
        assert cabling[host].status == "not_run" and "no ibstat reading" in cabling[host].reason, cabling[host].reason
        assert [p["status"] for p in cabling[host].evidence["ports"] if p["port"].startswith("rail")] == ["pass"] * 2
    report = (repo_root / "build" / "demo" / "report" / "index.html").read_text(encoding="utf-8")
    assert "swap the cables at leaf1 port 3 and leaf2 port 3" in report
    # the report's topology section: switch -> nodes, from what the ports were found on (not the plan)
    topology = json.loads((repo_root / "build" / "demo" / "report" / "report.json").read_text())["topology"]
    assert {"leaf1", "leaf2"} <= set(topology) and "gpu-r01-u02" in topology["leaf1"]

    # burn_in fabric tier: only the path gpu-r01-u26 <-> gpu-r02-u02 is slow: that link is blamed, no node is
    # (a fresh ledger: the fabric tier of this one run)
    bad_links = {tuple(sorted(e["data"]["info"]["nodes"])) for e in ledger.events(kind="fabric_link")
                 if e["data"]["verdict"] == "bad"}
    assert bad_links == {("gpu-r01-u26", "gpu-r02-u02")}
    for host in ("gpu-r01-u26", "gpu-r02-u02"):
        assert nodes[host]["gates"]["burn_in"] == "pass"

    # cluster_validation: the hot GPU's node is drained, a spare that passed burn-in replaces it, the rerun passes
    assert nodes["gpu-r02-u26"]["gates"]["cluster_validation"] == "fail"
    assert nodes["gpu-r02-u26"]["reason"].startswith("telemetry_outliers: gpu-r02-u26 GPU 7")
    drains = list(ledger.events(node="gpu-r02-u26", kind="drain"))
    assert drains and "GPU 7" in json.dumps(drains[-1]["data"])
    # the cluster_validation spare is the one that replaces the hot node (the fleet audit's exercise promotes another)
    promoted = [e["node"] for e in ledger.events(kind="spare_promoted") if e["data"].get("replaces") == "gpu-r02-u26"]
    assert promoted and promoted[-1] in ("gpu-r01-u34", "gpu-r02-u34")
    assert nodes[promoted[-1]]["gates"]["cluster_validation"] == "pass"

    # no healthy node fails a handoff stage, and what cannot run here says so
    for host in HEALTHY:
        assert {s: g for s, g in nodes[host]["gates"].items() if s != "fleet_audit"} == {
            "pre_deployment": "pass", "provisioning": "pass", "burn_in": "pass", "cluster_validation": "pass"}, host

    # fleet_audit after handoff: the BMC flashed out of band and the injected XID are found, the rest passes
    audit = {(r.node, r.check): r for r in ledger.current_results(stage="fleet_audit")}
    for host in ("gpu-r01-u02", promoted[-1]):
        assert nodes[host]["gates"]["fleet_audit"] == "pass", nodes[host]
    assert (nodes["gpu-r02-u02"]["last_stage"], nodes["gpu-r02-u02"]["gate"]) == ("fleet_audit", "fail")
    drift = audit[("gpu-r02-u02", "firmware_drift")]
    assert drift.status == "fail" and drift.reason == "firmware drift: bmc runs 01.01.10, the SKU accepts 11.01.01"
    # the injected XID: detected (an injected kernel_log fail), drained, a spare promoted, re-burnt-in, resumed: the
    # node ends the demo back in service with its last audit passed, every step timed from the ledger
    assert (nodes["gpu-r01-u26"]["last_stage"], nodes["gpu-r01-u26"]["gate"]) == ("fleet_audit", "pass")
    xid = [r for r in ledger.history("gpu-r01-u26", "fleet_audit", "kernel_log") if r.status == "fail"]
    assert xid and "Xid 79 (GPU has fallen off the bus)" in xid[-1].reason and "[injected]" in xid[-1].reason
    assert audit[("gpu-r01-u26", "kernel_log")].status == "pass"
    exercise = summary["fleet_audit_exercise"]
    assert exercise["node"] == "gpu-r01-u26" and exercise["missing"] == [], exercise
    assert 0 <= exercise["detect_s"] <= exercise["drain_s"] <= exercise["replace_s"] <= exercise["return_s"]
    assert exercise["spare"] in ("gpu-r01-u34", "gpu-r02-u34") and exercise["spare"] != promoted[-1]
    drained = ledger.events(node="gpu-r01-u26", kind="drain")
    assert drained and "[injected fault exercise]" in drained[-1]["data"]["reason"]
    assert [e["node"] for e in ledger.events(kind="drain") if e["recorded_at"] >= exercise["injected_at"]] == [
        "gpu-r01-u26"]   # the drift node is not drained: only the exercise node's pass drains
    assert ledger.events(node=exercise["spare"], kind="spare_returned")   # back in the pool
    assert audit[("gpu-r01-u26", "firmware_drift")].status == "pass"
    assert audit[("gpu-r01-u02", "kernel_log")].status == "pass"
    assert (repo_root / "build" / "demo" / "report" / "fleet_audit.html").is_file()
    gpu_checks = [r for r in ledger.current_results(node="gpu-r01-u02", stage="burn_in")
                  if r.check in ("dcgm_diag", "gpu_burn", "power_sustained")]
    assert gpu_checks and all(r.status == "not_run" and "no GPU" in r.reason for r in gpu_checks)
    assert "symphony.cluster demo: gates per node" in stdout and "build/demo/report/index.html" in stdout

    # the technicians' dispatch list has every stage's open problem, the bad cable included, and no healthy node
    rows = json.loads((repo_root / "build" / "demo" / "dispatch" / "dispatch-latest.json").read_text())["rows"]
    listed = {(r["hostname"], r["stage"], r["check"]) for r in rows}
    assert {("gpu-r01-u10", "pre_deployment", "gpus"), ("gpu-r02-u18", "pre_deployment", "gpu_pcie_links"),
            ("gpu-r02-u10", "provisioning", "firmware:bios"), ("gpu-r01-u18", "burn_in", "cabling"),
            ("gpu-r01-u26 <-> gpu-r02-u02", "burn_in", "fabric_link"),
            ("gpu-r02-u26", "cluster_validation", "telemetry_outliers")} <= listed, sorted(listed)
    assert not {r["hostname"] for r in rows if r["stage"] != "fleet_audit"} & set(HEALTHY)
    swap_rows = [r for r in rows if r["check"] == "cabling"]
    assert len(swap_rows) == 1 and swap_rows[0]["reason"] == "swap: gpu-r01-u18 rail0, gpu-r01-u18 rail1", swap_rows


def test_rerun_changes_no_firmware_and_gives_the_same_verdicts(first_run, repo_root):
    _stdout, summary = first_run
    _emulator_stats(repo_root, "DELETE")
    _stdout, again = _run_demo(repo_root)

    def verdicts(nodes):
        # the same words, but a new firmware task has a new id on the BMC; a fleet_audit finding names its own
        # times and counts, so only its gate is compared
        return {h: (n["last_stage"], n["gate"], "" if n["last_stage"] == "fleet_audit" else
                    re.sub(r"Tasks/\w+", "Tasks/N", n["reason"])) for h, n in nodes.items()}

    assert verdicts(again["nodes"]) == verdicts(summary["nodes"])
    # the spare went back to the pool when the node returned, so the rerun's exercise promotes one again
    assert again["fleet_audit_exercise"]["missing"] == [], again["fleet_audit_exercise"]
    writes = {h: s["writes"] for h, s in _emulator_stats(repo_root).items()}
    # only the node whose BIOS update keeps failing is written to again (it retries the failed update), and the
    # one whose BMC the fleet audit found flashed out of band (provisioning brings it back to the SKU's version)
    assert {h for h, w in writes.items() if w} <= {"gpu-r02-u10", "gpu-r02-u02"}
    assert writes["gpu-r01-u18"] == 0
    # the spare promoted in the first run is in service: the rerun validates it with the healthy nodes
    ledger = open_ledger(str(repo_root / "build" / "demo" / "ledger.sqlite"))
    spare = [e["node"] for e in ledger.events(kind="spare_promoted") if e["data"].get("replaces") == "gpu-r02-u26"][-1]

    def runs(node):
        return {r.run_id for r in ledger.history(node, "cluster_validation")}
    assert len(runs("gpu-r01-u02")) == 2 and runs(spare) == runs("gpu-r01-u02")


def test_report_opens_without_console_errors(first_run, repo_root, tmp_path):
    playwright = pytest.importorskip("playwright.sync_api")
    report = repo_root / "build" / "demo" / "report" / "index.html"
    junit = (repo_root / "build" / "demo" / "report" / "junit.xml").read_text()
    assert '<testsuite name="pre_deployment"' in junit and "slot GPU5 empty" in junit
    errors = []
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=[
            "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update"])
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error" else None)
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(report.as_uri())
        page.wait_for_load_state("load")
        summary_text = page.inner_text("#summary + .cards")
        charts = page.locator(".plotly-graph-div").count()
        page.screenshot(path=str(repo_root / "build" / "demo" / "report" / "summary.png"))
        browser.close()
    assert errors == []
    assert "10 nodes" in summary_text and "handed off" in summary_text
    assert charts >= 3
