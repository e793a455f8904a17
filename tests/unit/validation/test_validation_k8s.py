"""PyTorchJob and JobSet manifests checked against the CRDs' published schemas.

``shared/reference/k8s/`` holds the CRDs exactly as kubeflow/training-operator (v1.9.0) and kubernetes-sigs/jobset
publish them; the served version's ``openAPIV3Schema`` is OpenAPI 3.0 (a JSON Schema draft 4 dialect), validated
with jsonschema's Draft4Validator (``x-kubernetes-*`` extensions are annotations it ignores).
"""

import copy
import os

import jsonschema
import pytest
import yaml

from ansible_collections.symphony.cluster.plugins.module_utils._validation import k8s_render as k8s
from ansible_collections.symphony.cluster.plugins.module_utils._core.errors import ValidationError

JOB = {"name": "cv-llama3-8b", "namespace": "validation", "image": "ghcr.io/pytorch/torchtitan:2026.11",
       "nodes": 4, "gpus_per_node": 8, "module": True, "program": "torchtitan.train",
       "args": ["--job.config_file", "/configs/llama3_8b.toml", "--training.steps", 50],
       "env": {"NCCL_IB_HCA": "mlx5_0,mlx5_3", "NCCL_SOCKET_IFNAME": "eth0"},
       "node_selector": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}}


def crd_validator(filename):
    """Draft-4 validator of the served version of a published CRD in shared/reference/k8s."""
    path = os.path.join(os.environ.get("SYMPHONY_SHARED", "/work/shared"), "reference", "k8s", filename)
    with open(path, encoding="utf-8") as handle:
        crd = yaml.safe_load(handle)
    version = next(v for v in crd["spec"]["versions"] if v.get("served"))
    return jsonschema.Draft4Validator(version["schema"]["openAPIV3Schema"])


PYTORCHJOB_CRD = crd_validator("kubeflow.org_pytorchjobs.yaml")
JOBSET_CRD = crd_validator("jobset.x-k8s.io_jobsets.yaml")


def test_pytorchjob():
    manifest = k8s.render("pytorchjob", JOB)
    PYTORCHJOB_CRD.validate(manifest)
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
    JOBSET_CRD.validate(manifest)
    rjob = manifest["spec"]["replicatedJobs"][0]["template"]["spec"]
    assert rjob["parallelism"] == rjob["completions"] == 4 and rjob["completionMode"] == "Indexed"
    script = rjob["template"]["spec"]["containers"][0]["command"][2]
    assert "--master_addr=cv-llama3-8b-node-0-0.cv-llama3-8b" in script and "JOB_COMPLETION_INDEX" in script


def test_published_crds_refuse_a_broken_manifest():
    # The PyTorchJob CRD types replicas as an integer and requires a container's name (core/v1 Container);
    # it leaves restartPolicy a free string (the operator's webhook checks it), so that is not tested here.
    bad = copy.deepcopy(k8s.render("pytorchjob", JOB))
    bad["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = "three"
    with pytest.raises(jsonschema.ValidationError, match="'three' is not of type 'integer'"):
        PYTORCHJOB_CRD.validate(bad)
    bad = copy.deepcopy(k8s.render("pytorchjob", JOB))
    del bad["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0]["name"]
    with pytest.raises(jsonschema.ValidationError, match="'name' is a required property"):
        PYTORCHJOB_CRD.validate(bad)
    bad = copy.deepcopy(k8s.render("jobset", JOB))
    bad["spec"]["successPolicy"]["operator"] = "Most"
    with pytest.raises(jsonschema.ValidationError, match="'Most' is not one of"):
        JOBSET_CRD.validate(bad)
    with pytest.raises(ValidationError, match="metadata.name"):
        k8s.render("jobset", dict(JOB, name="CV_Llama"))
    with pytest.raises(ValidationError, match="job: missing image"):
        k8s.render("pytorchjob", dict(JOB, image=""))
