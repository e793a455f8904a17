# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Kubernetes manifests for the pretraining run: Kubeflow PyTorchJob and JobSet.

Rendered as plain dicts (applied by ``kubernetes.core.k8s``) and validated against
JSON Schemas written from the CRDs' published OpenAPI v3 schemas (the subset a run
uses; CRDs are structural, so unknown fields are pruned by the API server and are
refused here):

* ``kubeflow.org/v1`` PyTorchJob (kubeflow/training-operator
  ``manifests/base/crds/kubeflow.org_pytorchjobs.yaml``): ``spec.pytorchReplicaSpecs``
  with ``Master``/``Worker`` ReplicaSpecs (``replicas``, ``restartPolicy`` in
  Always/OnFailure/Never/ExitCode, ``template``), ``spec.runPolicy``
  (``cleanPodPolicy`` in All/Running/None, ``backoffLimit``), ``spec.nprocPerNode``.
  The operator requires the training container to be named ``pytorch``.
* ``jobset.x-k8s.io/v1alpha2`` JobSet (kubernetes-sigs/jobset
  ``config/components/crd/bases/jobset.x-k8s.io_jobsets.yaml``): ``spec.replicatedJobs[]``
  (``name``, ``replicas``, ``template`` = JobTemplateSpec), ``spec.network``
  (``enableDNSHostnames``, ``subdomain``), ``spec.failurePolicy.maxRestarts``,
  ``spec.successPolicy`` (``operator`` All/Any).  Pod hostnames are
  ``<jobset>-<replicatedJob>-<jobIndex>-<podIndex>.<subdomain>``.
"""

from __future__ import annotations

import copy

from .._core.errors import ValidationError
from .._core.schema import validate_document

_NAME = {"type": "string", "pattern": "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", "maxLength": 63}
_ENV = {"type": "array", "items": {"type": "object", "required": ["name"], "additionalProperties": False,
                                   "properties": {"name": {"type": "string", "minLength": 1},
                                                  "value": {"type": "string"},
                                                  "valueFrom": {"type": "object"}}}}
_CONTAINER = {
    "type": "object", "required": ["name", "image"],
    "properties": {"name": {"type": "string"}, "image": {"type": "string", "minLength": 1},
                   "command": {"type": "array", "items": {"type": "string"}},
                   "args": {"type": "array", "items": {"type": "string"}}, "env": _ENV,
                   "resources": {"type": "object", "additionalProperties": False,
                                 "properties": {"limits": {"type": "object"}, "requests": {"type": "object"}}},
                   "volumeMounts": {"type": "array"}, "ports": {"type": "array"},
                   "securityContext": {"type": "object"}},
}
_POD_TEMPLATE = {
    "type": "object", "required": ["spec"],
    "properties": {"metadata": {"type": "object"},
                   "spec": {"type": "object", "required": ["containers"],
                            "properties": {"containers": {"type": "array", "minItems": 1, "items": _CONTAINER},
                                           "restartPolicy": {"enum": ["Always", "OnFailure", "Never"]},
                                           "nodeSelector": {"type": "object",
                                                            "additionalProperties": {"type": "string"}},
                                           "tolerations": {"type": "array"}, "volumes": {"type": "array"},
                                           "hostNetwork": {"type": "boolean"},
                                           "subdomain": {"type": "string"}}}},
}
_REPLICA_SPEC = {
    "type": "object", "additionalProperties": False, "required": ["template"],
    "properties": {"replicas": {"type": "integer", "minimum": 0},
                   "restartPolicy": {"enum": ["Always", "OnFailure", "Never", "ExitCode"]},
                   "template": _POD_TEMPLATE},
}
_METADATA = {"type": "object", "required": ["name"],
             "properties": {"name": _NAME, "namespace": _NAME, "labels": {"type": "object"},
                            "annotations": {"type": "object"}}}

PYTORCHJOB_SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "kubeflow.org/v1 PyTorchJob (subset)",
    "type": "object", "additionalProperties": False, "required": ["apiVersion", "kind", "metadata", "spec"],
    "properties": {
        "apiVersion": {"const": "kubeflow.org/v1"}, "kind": {"const": "PyTorchJob"}, "metadata": _METADATA,
        "spec": {"type": "object", "additionalProperties": False, "required": ["pytorchReplicaSpecs"],
                 "properties": {
                     "nprocPerNode": {"type": ["string", "integer"]},
                     "runPolicy": {"type": "object", "additionalProperties": False,
                                   "properties": {"cleanPodPolicy": {"enum": ["All", "Running", "None"]},
                                                  "backoffLimit": {"type": "integer", "minimum": 0},
                                                  "activeDeadlineSeconds": {"type": "integer", "minimum": 1},
                                                  "ttlSecondsAfterFinished": {"type": "integer", "minimum": 0}}},
                     "pytorchReplicaSpecs": {"type": "object", "additionalProperties": False,
                                             "required": ["Master"],
                                             "properties": {"Master": _REPLICA_SPEC, "Worker": _REPLICA_SPEC}}}},
    },
}

_REPLICATED_JOB = {
    "type": "object", "additionalProperties": False, "required": ["name", "template"],
    "properties": {
        "name": _NAME,
        "replicas": {"type": "integer", "minimum": 0},
        "template": {
            "type": "object", "required": ["spec"],
            "properties": {
                "metadata": {"type": "object"},
                "spec": {
                    "type": "object", "required": ["template"],
                    "properties": {
                        "parallelism": {"type": "integer", "minimum": 0},
                        "completions": {"type": "integer", "minimum": 0},
                        "backoffLimit": {"type": "integer", "minimum": 0},
                        "completionMode": {"enum": ["NonIndexed", "Indexed"]},
                        "template": _POD_TEMPLATE,
                    },
                },
            },
        },
    },
}

JOBSET_SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "jobset.x-k8s.io/v1alpha2 JobSet (subset)",
    "type": "object", "additionalProperties": False, "required": ["apiVersion", "kind", "metadata", "spec"],
    "properties": {
        "apiVersion": {"const": "jobset.x-k8s.io/v1alpha2"}, "kind": {"const": "JobSet"}, "metadata": _METADATA,
        "spec": {"type": "object", "additionalProperties": False, "required": ["replicatedJobs"],
                 "properties": {
                     "network": {"type": "object", "additionalProperties": False,
                                 "properties": {"enableDNSHostnames": {"type": "boolean"},
                                                "subdomain": {"type": "string"},
                                                "publishNotReadyAddresses": {"type": "boolean"}}},
                     "failurePolicy": {"type": "object", "additionalProperties": False,
                                       "properties": {"maxRestarts": {"type": "integer", "minimum": 0}}},
                     "successPolicy": {"type": "object", "additionalProperties": False, "required": ["operator"],
                                       "properties": {"operator": {"enum": ["All", "Any"]},
                                                      "targetReplicatedJobs": {"type": "array",
                                                                               "items": {"type": "string"}}}},
                     "replicatedJobs": {"type": "array", "minItems": 1, "items": _REPLICATED_JOB}}},
    },
}


def _env_list(env):
    return [{"name": str(k), "value": str(v)} for k, v in sorted((env or {}).items())]


def _container(job, command, args):
    container = {"name": "pytorch", "image": job["image"], "command": command, "args": args,
                 "env": _env_list(job.get("env"))}
    gpus = int(job.get("gpus_per_node", 0) or 0)
    if gpus:
        resource = job.get("gpu_resource", "nvidia.com/gpu")
        container["resources"] = {"limits": {resource: gpus}, "requests": {resource: gpus}}
    return container


def _pod(job, container, restart="Never", extra=None):
    spec = {"containers": [container], "restartPolicy": restart}
    if job.get("node_selector"):
        spec["nodeSelector"] = dict(job["node_selector"])
    spec.update(extra or {})
    return {"metadata": {"labels": {"app.kubernetes.io/part-of": "symphony-cluster-validation"}}, "spec": spec}


def render_pytorchjob(job):
    """PyTorchJob for ``job`` = ``{name, namespace?, image, nodes, gpus_per_node, program, args?, env?,
    node_selector?, module?}``.  The operator sets MASTER_ADDR/MASTER_PORT/RANK/WORLD_SIZE."""
    _check(job)
    command = ["torchrun"]
    args = ["--nnodes=%d" % job["nodes"], "--nproc_per_node=%d" % max(1, int(job.get("gpus_per_node", 1) or 1))]
    args += (["--module"] if job.get("module") else []) + [job["program"]] + [str(a) for a in job.get("args", [])]
    container = _container(job, command, args)
    specs = {"Master": {"replicas": 1, "restartPolicy": "OnFailure", "template": _pod(job, container)}}
    if job["nodes"] > 1:
        specs["Worker"] = {"replicas": job["nodes"] - 1, "restartPolicy": "OnFailure",
                           "template": _pod(job, copy.deepcopy(container))}
    manifest = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
                "metadata": {"name": job["name"], "namespace": job.get("namespace", "default")},
                "spec": {"nprocPerNode": str(max(1, int(job.get("gpus_per_node", 1) or 1))),
                         "runPolicy": {"cleanPodPolicy": "None", "backoffLimit": 0},
                         "pytorchReplicaSpecs": specs}}
    validate_document(manifest, PYTORCHJOB_SCHEMA, "PyTorchJob %s" % job["name"], ValidationError)
    return manifest


def render_jobset(job):
    """JobSet with one replicated job of ``nodes`` indexed pods; rank 0's DNS name is the rendezvous."""
    _check(job)
    name = job["name"]
    master = "%s-node-0-0.%s" % (name, name)
    procs = max(1, int(job.get("gpus_per_node", 1) or 1))
    command = ["bash", "-c", 'exec torchrun --nnodes=%d --nproc_per_node=%d --node_rank="${JOB_COMPLETION_INDEX}" '
               '--rdzv_backend=static --master_addr=%s --master_port=%d "$@"'
               % (job["nodes"], procs, master, int(job.get("rdzv_port", 29500))), "torchrun"]
    args = (["--module"] if job.get("module") else []) + [job["program"]] + [str(a) for a in job.get("args", [])]
    pod = _pod(job, _container(job, command, args), extra={"subdomain": name})
    manifest = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet",
                "metadata": {"name": name, "namespace": job.get("namespace", "default")},
                "spec": {"network": {"enableDNSHostnames": True, "subdomain": name},
                         "failurePolicy": {"maxRestarts": 0},
                         "successPolicy": {"operator": "All", "targetReplicatedJobs": ["node"]},
                         "replicatedJobs": [{"name": "node", "replicas": 1, "template": {"spec": {
                             "parallelism": job["nodes"], "completions": job["nodes"], "backoffLimit": 0,
                             "completionMode": "Indexed", "template": pod}}}]}}
    validate_document(manifest, JOBSET_SCHEMA, "JobSet %s" % name, ValidationError)
    return manifest


def _check(job):
    for key in ("name", "image", "nodes", "program"):
        if not job.get(key):
            raise ValidationError("missing %s" % key, where="job")
    if int(job["nodes"]) < 1:
        raise ValidationError("nodes must be at least 1", where="job.nodes")


def render(kind, job):
    """``kind``: ``pytorchjob`` or ``jobset``."""
    if kind == "pytorchjob":
        return render_pytorchjob(job)
    if kind == "jobset":
        return render_jobset(job)
    raise ValidationError("unknown manifest kind %r (pytorchjob, jobset)" % kind, where="kind")
