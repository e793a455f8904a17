"""PyTorchJob and JobSet manifests checked against the CRD-derived schemas."""

import copy

import jsonschema
import pytest

from ansible_collections.symphony.cluster.plugins.module_utils._validation import k8s_render as k8s
from ansible_collections.symphony.cluster.plugins.module_utils._core.errors import ValidationError

JOB = {"name": "cv-llama3-8b", "namespace": "validation", "image": "ghcr.io/pytorch/torchtitan:2026.11",
       "nodes": 4, "gpus_per_node": 8, "module": True, "program": "torchtitan.train",
       "args": ["--job.config_file", "/configs/llama3_8b.toml", "--training.steps", 50],
       "env": {"NCCL_IB_HCA": "mlx5_0,mlx5_3", "NCCL_SOCKET_IFNAME": "eth0"},
       "node_selector": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}}


def test_pytorchjob():
    manifest = k8s.render("pytorchjob", JOB)
    jsonschema.Draft202012Validator(k8s.PYTORCHJOB_SCHEMA).validate(manifest)
    specs = manifest["spec"]["pytorchReplicaSpecs"]
    assert specs["Master"]["replicas"] == 1 and specs["Worker"]["replicas"] == 3
    container = specs["Worker"]["template"]["spec"]["containers"][0]
    assert container["name"] == "pytorch"
    assert container["resources"]["limits"] == {"nvidia.com/gpu": 8}
    assert container["args"][:4] == ["--nnodes=4", "--nproc_per_node=8", "--module", "torchtitan.train"]
    assert {"name": "NCCL_IB_HCA", "value": "mlx5_0,mlx5_3"} in container["env"]
    single = k8s.render("pytorchjob", dict(JOB, nodes=1))
    assert "Worker" not in single["spec"]["pytorchReplicaSpecs"]


def test_jobset():
    manifest = k8s.render("jobset", JOB)
    jsonschema.Draft202012Validator(k8s.JOBSET_SCHEMA).validate(manifest)
    rjob = manifest["spec"]["replicatedJobs"][0]["template"]["spec"]
    assert rjob["parallelism"] == rjob["completions"] == 4 and rjob["completionMode"] == "Indexed"
    script = rjob["template"]["spec"]["containers"][0]["command"][2]
    assert "--master_addr=cv-llama3-8b-node-0-0.cv-llama3-8b" in script and "JOB_COMPLETION_INDEX" in script


def test_schemas_refuse_what_the_crds_refuse():
    bad = copy.deepcopy(k8s.render("pytorchjob", JOB))
    bad["spec"]["pytorchReplicaSpecs"]["Master"]["restartPolicy"] = "Sometimes"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, k8s.PYTORCHJOB_SCHEMA)
    bad = copy.deepcopy(k8s.render("jobset", JOB))
    bad["spec"]["successPolicy"]["operator"] = "Most"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, k8s.JOBSET_SCHEMA)
    with pytest.raises(ValidationError, match="metadata.name"):
        k8s.render("jobset", dict(JOB, name="CV_Llama"))
    with pytest.raises(ValidationError, match="job: missing image"):
        k8s.render("pytorchjob", dict(JOB, image=""))
