# -*- coding: utf-8 -*-
# Copyright: symphony.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Kubernetes manifests for the pretraining run: Kubeflow PyTorchJob and JobSet.

Rendered as plain dicts (applied by ``kubernetes.core.k8s``).  The unit tests validate them against the
``openAPIV3Schema`` of the CRDs exactly as their projects publish them (``shared/reference/k8s/``); the
collection carries no copy of those schemas, the API server applies them on submit:

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
import re

from .._core.errors import ValidationError

# RFC 1123 label (Kubernetes "DNS label names", kubernetes.io/docs/concepts/overview/working-with-objects/names):
# the API server refuses any other metadata.name for these kinds.
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


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
    return manifest


def _check(job):
    for key in ("name", "image", "nodes", "program"):
        if not job.get(key):
            raise ValidationError("missing %s" % key, where="job")
    if int(job["nodes"]) < 1:
        raise ValidationError("nodes must be at least 1", where="job.nodes")
    for key in ("name", "namespace"):
        value = str(job.get(key, "default"))
        if len(value) > 63 or not _DNS_LABEL.match(value):
            raise ValidationError("%r is not a DNS label (lower-case letters, digits and '-', at most 63)" % value,
                                  where="metadata.%s" % key)


def render(kind, job):
    """``kind``: ``pytorchjob`` or ``jobset``."""
    if kind == "pytorchjob":
        return render_pytorchjob(job)
    if kind == "jobset":
        return render_jobset(job)
    raise ValidationError("unknown manifest kind %r (pytorchjob, jobset)" % kind, where="kind")
