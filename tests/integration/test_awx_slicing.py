"""AWX job slicing reproduced (issue 19): pre_deployment as 3 concurrent ansible-runner jobs over AWX's slices of the
twin inventory, all writing one PostgreSQL ledger, gives the gates and the dispatch list of one unsliced run; a slice
killed mid-run (SIGKILL of its process group, ansible-runner's cancel) leaves its hosts to a relaunch of that slice.

Emulator only (the molecule scenario's twin, defects and faults; no lab hosts, no lock).  AWX's slicing rule:
tools/symphony_awx/slice.py (AWX docs "Job Slicing", hosts ordered by name, slice k takes hosts[k-1::N]).
"""

import json
import pathlib
import re
import time

import pytest
import yaml

from ansible_collections.symphony.cluster.plugins.module_utils._core.dispatch import dispatch_list
from ansible_collections.symphony.cluster.plugins.module_utils._core.ledger import open_ledger

from symphony_awx.slice import run_sliced, slice_hosts

symphony_emulator = pytest.importorskip("symphony_emulator.fleet")

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCENARIO = ROOT / "molecule" / "pre_deployment" / "data"
PLAYBOOK = ROOT / "playbooks" / "pre_deployment.yml"
SLICES = 3
TIMESTAMP = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)?")


def _source(tmp_path, name, ledger):
    """The molecule twin as an inventory source reading (and so making every stage write) ``ledger``."""
    doc = yaml.safe_load((SCENARIO / "pre_deployment.twin.yml").read_text())
    doc.update(ledger=ledger, sku_dir=str(ROOT / "skus"))
    path = tmp_path / ("%s.twin.yml" % name)
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def _extravars(bmc_map, dispatch_dir):
    # short timeouts so the slow and the broken BMCs finish quickly: 2 s, not the molecule converge's 1 s, as three
    # jobs, the emulator and PostgreSQL share two cores here (pd-u42's 3 s latency still times out)
    return {"pre_deployment_bmc_map": str(bmc_map), "pre_deployment_dispatch_dir": dispatch_dir,
            "pre_deployment_auth": "session", "pre_deployment_read_timeout": 2, "pre_deployment_connect_timeout": 2,
            "pre_deployment_retries": 1, "pre_deployment_optional_checks": ["lease_captured", "address_reserved"]}


def _gates(url):
    # reasons compared without their timestamps (the SEL window "since <now - 30 d>" moves between the runs)
    led = open_ledger(url)
    try:
        return {node: {stage: (v.status, TIMESTAMP.sub("<t>", v.reason), v.failing) for stage, v in by_stage.items()}
                for node, by_stage in led.current_gates().items()}
    finally:
        led.close()


def _dispatch(url):
    led = open_ledger(url)
    try:
        return sorted((r["hostname"], r["stage"], r["check"], TIMESTAMP.sub("<t>", r["reason"]), r["remediation"])
                      for r in dispatch_list(led, {}))
    finally:
        led.close()


def _job_tails(results, lines=40):
    """The end of each slice job's output (ansible-runner's artifacts/<ident>/stdout), for an assertion message."""
    out = []
    for result in results:
        path = pathlib.Path(result.private_data_dir) / "artifacts" / ("slice-%d" % result.slice) / "stdout"
        if path.is_file():
            tail = "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
            out.append("--- slice %d (%s, rc %s):\n%s" % (result.slice, result.status, result.rc, tail))
    return "\n".join(out)


def test_sliced_pre_deployment_equals_one_run_and_a_killed_slice_resumes(tmp_path, pg_server):
    one, sliced = pg_server.create_schema("slicing_one"), pg_server.create_schema("slicing_sliced")
    hosts = sorted(yaml.safe_load((SCENARIO / "pre_deployment.twin.yml").read_text())["sites"][0]["racks"][0]["nodes"],
                   key=lambda n: n["hostname"])
    cuts = slice_hosts([n["hostname"] for n in hosts], SLICES)
    # pd-u06 (its seeded defect: a missing GPU) answers every request 0.5 s late, under the 2 s read timeout, so
    # its slice is surely mid-run when it is killed; both runs see the same faults
    faults = yaml.safe_load((SCENARIO / "faults.yml").read_text())
    faults["faults"]["pd-u06"] = {"latency_ms": 500}
    (tmp_path / "faults.yml").write_text(yaml.safe_dump(faults))
    victim = next(k for k, cut in enumerate(cuts, start=1) if "pd-u06" in cut)
    bmc_map = tmp_path / "bmcs.json"
    killed_at = {}

    def cancel(number):
        # ansible-runner asks again after the kill and takes the last answer: once killed, always killed
        if number != victim or killed_at:
            return bool(killed_at) and number == victim
        led = open_ledger(sliced)
        try:
            if any(lease["node"] in cuts[victim - 1] for lease in led.leases()):
                killed_at.update(gates=set(led.current_gates()), leases=[x["node"] for x in led.leases()])
                return True
        finally:
            led.close()
        return False

    with symphony_emulator.Fleet(str(SCENARIO / "pre_deployment.twin.yml"), str(ROOT / "skus"),
                                 defects=str(SCENARIO / "defects.yml"), faults=str(tmp_path / "faults.yml"),
                                 map_path=str(bmc_map), state_dir=str(tmp_path / "emu")):
        reference = run_sliced(PLAYBOOK, _source(tmp_path, "one", one), 1, tmp_path / "one",
                               extravars=_extravars(bmc_map, str(tmp_path / "one" / "dispatch")))
        started = time.monotonic()
        first = run_sliced(PLAYBOOK, _source(tmp_path, "sliced", sliced), SLICES, tmp_path / "sliced",
                           extravars=_extravars(bmc_map, str(tmp_path / "sliced" / "dispatch-{slice}")), cancel=cancel)
        sliced_s = time.monotonic() - started
        # the dead slice's hosts: no gate of this run, and no live lease in the way of the relaunch
        assert first[victim - 1].status == "canceled", [(r.slice, r.status) for r in first]
        left = [h for h in cuts[victim - 1] if h not in _gates(sliced)]
        assert "pd-u06" in left, ("the killed slice had finished its slow host before it was killed", killed_at)
        relaunch = run_sliced(PLAYBOOK, _source(tmp_path, "sliced", sliced), SLICES, tmp_path / "relaunch",
                              extravars=_extravars(bmc_map, str(tmp_path / "relaunch" / "dispatch-{slice}")),
                              only=[victim])
    # ansible-playbook exits 2 when a host fails its gate (the seeded defects): "failed" is the expected status
    assert reference[0].status == "failed" and reference[0].rc == 2
    assert [r.status for r in first if r.slice != victim] == ["failed"] * (SLICES - 1)
    assert relaunch[victim - 1].status == "failed" and relaunch[victim - 1].rc == 2
    reference_gates = _gates(one)
    assert set(reference_gates) == {n["hostname"] for n in hosts}
    assert _gates(sliced) == reference_gates, _job_tails(first + relaunch)
    assert _dispatch(sliced) == _dispatch(one) and len(_dispatch(one)) >= 5
    # each slice's own dispatch file lists exactly its failing hosts (what each AWX job leaves as its artifact)
    per_slice = set()
    for k in range(1, SLICES + 1):
        folder = tmp_path / ("relaunch" if k == victim else "sliced") / ("dispatch-%d" % k)
        for path in folder.glob("dispatch-pre-*.json"):
            per_slice.update(row["hostname"] for row in json.loads(path.read_text())["rows"])
    assert per_slice == {h for h, gates in reference_gates.items() if gates["pre_deployment"][0] != "pass"}
    # the BMC passwords and the ledger password reach no artifact of any job
    secrets = [n["password"] for n in json.loads(bmc_map.read_text())["nodes"].values()] + [pg_server.password]
    for path in tmp_path.rglob("*"):
        if path.is_file() and "emu" not in path.parts and path != bmc_map:
            blob = path.read_bytes()
            assert not any(s.encode() in blob for s in secrets), path
    print("sliced run: %.1f s for %d slices; killed slice %d with %s leased, gates then: %s" % (
        sliced_s, SLICES, victim, killed_at["leases"], sorted(killed_at["gates"])))
