"""Issue 16: the emulator's Dell job shape: SimpleUpdate -> 202 + Location of a DellJob (JobState/Message), an image
that activates at a host reset leaves its job Scheduled until that reset."""

import copy
import types

from symphony_emulator.resources import ROOT


def _dell(make_bmc, demo_twin, real_skus):
    host = sorted(demo_twin.nodes)[0]
    skus = copy.deepcopy(real_skus)
    skus["dgx_h100"]["system"]["bmc_vendor"] = "Dell"
    node = dict(demo_twin.nodes[host], sku="dgx_h100")
    return make_bmc(twin=types.SimpleNamespace(nodes={host: node}), host=host, skus=skus,
                    faults={"task_duration_s": 1})


def test_simple_update_answers_a_dell_job_scheduled_until_the_host_reset(make_bmc, demo_twin, real_skus, clock):
    bmc, c = _dell(make_bmc, demo_twin, real_skus)
    comp = next(f for f in bmc.spec.sku["firmware"] if f["id"] == "bios")
    simple = c.get(ROOT + "/UpdateService").json()["Actions"]["#UpdateService.SimpleUpdate"]["target"]
    resp = c.post(simple, {"ImageURI": comp["image"]["uri"], "TransferProtocol": "HTTPS"})
    assert resp.status == 202
    job = resp.headers["Location"]
    assert job.startswith(bmc.spec.M + "/Jobs/JID_")
    assert c.get(job).json()["JobState"] == "Running" and "TaskState" not in c.get(job).json()
    clock.advance(2)
    body = c.get(job).json()
    assert (body["JobState"], body["Message"]) == ("Scheduled", "Task successfully scheduled.")
    assert c.post(bmc.spec.S + "/Actions/ComputerSystem.Reset", {"ResetType": "PowerCycle"}).status == 204
    assert c.get(job).json()["JobState"] == "Completed"
    assert bmc.describe()["firmware"]["bios"] == comp["target"]


def test_unknown_job_is_404(make_bmc, demo_twin, real_skus):
    bmc, c = _dell(make_bmc, demo_twin, real_skus)
    assert c.get(bmc.spec.M + "/Jobs/JID_999").status == 404
