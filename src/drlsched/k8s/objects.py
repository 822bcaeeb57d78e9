"""Kubernetes vocabulary in drlsched's terms: the labels and annotations it reads and writes, Pod and Node objects
decoded into `PodSpec` / `NodeSpec`, pod manifests built from specs, and a cluster's nodes read from the API.

The product (state, extender, second scheduler, replay, fidelity) and the testbed import this module; it imports
neither of them.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from datetime import datetime
from typing import Any

import kubernetes

from drlsched.k8s import quantity
from drlsched.workload import NodeSpec, PodSpec, QoS

GPU_RESOURCE = "nvidia.com/gpu"
# Koordinator's batch resources: what the reclaim controller lends to best-effort pods on each node. A pod that
# requests either is a BE pod; it is counted on batch resources only (Koordinator's webhook moves a BE pod's
# cpu/memory requests there), in millicores (an integer count, "2500") and bytes.
BATCH_CPU_RESOURCE = "kubernetes.io/batch-cpu"
BATCH_MEMORY_RESOURCE = "kubernetes.io/batch-memory"
GPU_MODEL_LABEL = "drlsched.io/gpu-model"
RACK_LABEL = "drlsched.io/rack"
# KWOK's pod annotations: run time (drlsched's stage) and emulated usage (kwok's usage metrics).
DURATION_ANNOTATION = "drlsched.io/run-duration"  # a Go duration ("90s", "2m") or an RFC3339 deadline
CPU_USAGE_ANNOTATION = "kwok.x-k8s.io/usage-cpu"  # a quantity ("500m"), reported as the pod's CPU use
MEMORY_USAGE_ANNOTATION = "kwok.x-k8s.io/usage-memory"  # a quantity ("1Gi")
GPU_UTIL_ANNOTATION = "drlsched.io/gpu-util"  # a fraction of the pod's GPUs in use, "0.35"
# GPU feature discovery's label, for real clusters that lack drlsched's own.
GFD_MODEL_LABEL = "nvidia.com/gpu.product"
KARPENTER_GROUP, KARPENTER_VERSION = "karpenter.sh", "v1"  # NodePools and NodeClaims
NODEPOOL_LABEL = "karpenter.sh/nodepool"  # on a NodeClaim and its Node
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"
JOB_LABEL = "drlsched.io/job"
# A pod's task in its job and the tasks whose output it reads (comma-separated): where the parents' finished pods
# ran is where its shuffle input lives (`PodContext.data_nodes`).
TASK_ANNOTATION = "drlsched.io/task"
PARENTS_ANNOTATION = "drlsched.io/parents"
_LABEL_VALUE = re.compile(r"(?:[A-Za-z0-9](?:[-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?")
TERMINAL_PHASES = ("Succeeded", "Failed")
_BLOCKING_EFFECTS = ("NoSchedule", "NoExecute")
MAX_GPUS = 256  # per node or pod: the Cluster keeps one column per GPU slot


class ObjectError(ValueError):
    """An API object that lacks or mistypes a field drlsched needs."""


def rfc3339_seconds(text: str) -> float:
    """A Kubernetes timestamp ("2026-12-01T17:42:49Z") as Unix seconds (ValueError if it is not one)."""
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def job_label_value(job_id: str) -> str:
    """`job_id` as a valid label value (63 characters of [-A-Za-z0-9_.]); other ids become a stable digest."""
    if _LABEL_VALUE.fullmatch(job_id):
        return job_id
    return "job-" + hashlib.sha256(job_id.encode()).hexdigest()[:32]


def as_dict(obj: Any, where: str) -> dict[str, Any]:
    if obj is None:
        return {}
    if not isinstance(obj, dict):
        raise ObjectError(f"{where} must be an object")
    return obj


def _list(obj: Any, where: str) -> list[Any]:
    if obj is None:
        return []
    if not isinstance(obj, list):
        raise ObjectError(f"{where} must be a list")
    return obj


def _name(obj: dict[str, Any], what: str) -> str:
    name = as_dict(obj.get("metadata"), f"{what}.metadata").get("name")
    if not isinstance(name, str) or not name:
        raise ObjectError(f"{what}.metadata.name must be a non-empty string")
    return name


def node_spec(node: dict[str, Any]) -> NodeSpec:
    """A Node's allocatable resources, GPU model, rack and blocking taints."""
    if not isinstance(node, dict):
        raise ObjectError("node must be an object")
    name = _name(node, "node")
    meta = as_dict(node.get("metadata"), "node.metadata")
    labels = as_dict(meta.get("labels"), "node.metadata.labels")
    alloc = as_dict(as_dict(node.get("status"), "node.status").get("allocatable"), "node.status.allocatable")
    spec = as_dict(node.get("spec"), "node.spec")
    taints = tuple(
        sorted(
            str(as_dict(t, "node.spec.taints[]").get("key", ""))
            for t in _list(spec.get("taints"), "node.spec.taints")
            if as_dict(t, "node.spec.taints[]").get("effect") in _BLOCKING_EFFECTS
        )
    )
    try:
        gpus = quantity.count(alloc.get(GPU_RESOURCE, 0), MAX_GPUS)
        return NodeSpec(
            name=name,
            cpu_m=quantity.milli_cpu(alloc.get("cpu", 0), up=False),
            mem_mib=quantity.mebibytes(alloc.get("memory", 0), up=False),
            gpus=gpus,
            gpu_model=str(labels.get(GPU_MODEL_LABEL) or labels.get(GFD_MODEL_LABEL) or ("GPU" if gpus else "")),
            rack=str(labels.get(RACK_LABEL, "rack-0")),
            taints=taints,
            max_pods=quantity.count(alloc.get("pods", 110)),
        )
    except quantity.QuantityError as err:
        raise ObjectError(f"node {name}: {err}") from None


def _requests(container: Any, where: str) -> dict[str, Any]:
    resources = as_dict(as_dict(container, where).get("resources"), f"{where}.resources")
    # The apiserver defaults missing requests to the limits; objects in extender requests are already defaulted,
    # but objects built by hand may carry limits only (as GPUs must).
    limits = as_dict(resources.get("limits"), f"{where}.resources.limits")
    return {**limits, **as_dict(resources.get("requests"), f"{where}.resources.requests")}


def pod_spec(pod: dict[str, Any]) -> PodSpec:
    """A Pod's effective request (containers summed, init containers' max, overhead), GPU and model needs."""
    if not isinstance(pod, dict):
        raise ObjectError("pod must be an object")
    name = _name(pod, "pod")
    meta = as_dict(pod.get("metadata"), "pod.metadata")
    spec = as_dict(pod.get("spec"), "pod.spec")
    labels = as_dict(meta.get("labels"), "pod.metadata.labels")
    annotations = as_dict(meta.get("annotations"), "pod.metadata.annotations")
    totals = {"cpu": 0.0, "memory": 0.0, GPU_RESOURCE: 0.0, BATCH_CPU_RESOURCE: 0.0, BATCH_MEMORY_RESOURCE: 0.0}
    init_max = dict(totals)
    try:
        for c in _list(spec.get("containers"), "pod.spec.containers"):
            req = _requests(c, "pod.spec.containers[]")
            for key in totals:
                totals[key] += quantity.parse(req.get(key, 0))
        for c in _list(spec.get("initContainers"), "pod.spec.initContainers"):
            req = _requests(c, "pod.spec.initContainers[]")
            for key in init_max:
                init_max[key] = max(init_max[key], quantity.parse(req.get(key, 0)))
        overhead = as_dict(spec.get("overhead"), "pod.spec.overhead")
        effective = {k: max(totals[k], init_max[k]) + quantity.parse(overhead.get(k, 0)) for k in totals}
        batch = effective[BATCH_CPU_RESOURCE] > 0 or effective[BATCH_MEMORY_RESOURCE] > 0
        if batch:
            cpu_m = quantity.count(effective[BATCH_CPU_RESOURCE])
            mem_mib = quantity.mebibytes(effective[BATCH_MEMORY_RESOURCE])
        else:
            cpu_m = quantity.milli_cpu(effective["cpu"])
            mem_mib = quantity.mebibytes(effective["memory"])
        gpus = quantity.count(effective[GPU_RESOURCE], MAX_GPUS)
        if gpus != effective[GPU_RESOURCE]:
            # The apiserver refuses fractional extended resources; GPU shares need a device plugin's own
            # resource name, which drlsched does not read. Rounding down would make a GPU pod a CPU pod.
            raise quantity.QuantityError(f"{GPU_RESOURCE} request {effective[GPU_RESOURCE]:g} is not a whole "
                                         f"number of GPUs")
    except quantity.QuantityError as err:
        raise ObjectError(f"pod {name}: {err}") from None
    selector = as_dict(spec.get("nodeSelector"), "pod.spec.nodeSelector")
    model = selector.get(GPU_MODEL_LABEL) or selector.get(GFD_MODEL_LABEL)
    models = (str(model),) if model else _affinity_models(spec)
    tolerations = tuple(
        str(t.get("key", ""))
        for t in (as_dict(t, "pod.spec.tolerations[]") for t in _list(spec.get("tolerations"), "pod.spec.tolerations"))
        if t.get("effect") in (None, "", *_BLOCKING_EFFECTS)
    )
    priority = spec.get("priority", 0)
    uid = meta.get("uid")
    namespace = meta.get("namespace", "default")
    return PodSpec(
        uid=str(uid) if uid else f"{namespace}/{name}",
        job_id=str(labels.get(JOB_LABEL) or name),
        task=str(annotations.get(TASK_ANNOTATION) or ""),
        parents=tuple(p for p in (x.strip() for x in str(annotations.get(PARENTS_ANNOTATION) or "").split(",")) if p),
        arrival_s=0.0,
        cpu_m=cpu_m,
        mem_mib=mem_mib,
        gpus=gpus,
        gpu_milli=1000 if gpus else 0,
        gpu_models=models,
        priority=priority if isinstance(priority, int) and not isinstance(priority, bool) else 0,
        tolerations=tolerations,
        qos=QoS.BE if batch else QoS.BURSTABLE,
    )


def _affinity_models(spec: dict[str, Any]) -> tuple[str, ...]:
    """GPU models a pod accepts through required node affinity: `In` on the model label in its only term (more
    terms are alternatives, which the Cluster's one model set per pod cannot express: then no constraint)."""
    affinity = as_dict(as_dict(spec.get("affinity"), "pod.spec.affinity").get("nodeAffinity"), "nodeAffinity")
    required = as_dict(affinity.get("requiredDuringSchedulingIgnoredDuringExecution"), "nodeAffinity.required")
    terms = _list(required.get("nodeSelectorTerms"), "nodeSelectorTerms")
    if len(terms) != 1:
        return ()
    for expr in _list(as_dict(terms[0], "nodeSelectorTerms[]").get("matchExpressions"), "matchExpressions"):
        expr = as_dict(expr, "matchExpressions[]")
        if expr.get("key") in (GPU_MODEL_LABEL, GFD_MODEL_LABEL) and expr.get("operator") == "In":
            return tuple(str(v) for v in _list(expr.get("values"), "matchExpressions[].values"))
    return ()


def batch_allocatable(node: dict[str, Any]) -> tuple[int, int]:
    """A Node's batch allocatable (millicores, MiB rounded down); 0 where the reclaim controller set none."""
    alloc = as_dict(as_dict(node.get("status"), "node.status").get("allocatable"), "node.status.allocatable")
    try:
        return (quantity.count(alloc.get(BATCH_CPU_RESOURCE, 0)),
                quantity.mebibytes(alloc.get(BATCH_MEMORY_RESOURCE, 0), up=False))
    except quantity.QuantityError as err:
        raise ObjectError(f"node {_name(node, 'node')}: {err}") from None


def is_batch(pod: dict[str, Any]) -> bool:
    """Whether a pod requests batch resources (a BE pod on reclaimed capacity)."""
    for c in _list(as_dict(pod.get("spec"), "pod.spec").get("containers"), "pod.spec.containers"):
        req = _requests(c, "pod.spec.containers[]")
        if BATCH_CPU_RESOURCE in req or BATCH_MEMORY_RESOURCE in req:
            return True
    return False


def node_specs(core: kubernetes.client.CoreV1Api) -> list[NodeSpec]:
    """Every node as a NodeSpec (allocatable cpu, memory, GPUs; GPU model and rack labels), sorted by name."""
    raw = json.loads(core.list_node(_preload_content=False).data)
    return sorted((node_spec(n) for n in raw.get("items", [])), key=lambda s: s.name)


def pod_manifest(
    name: str,
    cpu: str = "1",
    memory: str = "1Gi",
    gpus: int = 0,
    duration: str | None = "30s",
    annotations: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
    batch: bool = False,
) -> dict[str, Any]:
    """A single-container pod; on KWOK nodes it is marked Succeeded `duration` after it runs (never, if None).
    With `batch` (a BE pod on reclaimed capacity) it asks `cpu` and `memory` as batch resources instead."""
    requests = {"cpu": cpu, "memory": memory}
    if batch:
        requests = {BATCH_CPU_RESOURCE: str(quantity.milli_cpu(cpu)),
                    BATCH_MEMORY_RESOURCE: str(math.ceil(quantity.parse(memory)))}
    if gpus:
        requests[GPU_RESOURCE] = str(gpus)
    meta_annotations = dict(annotations or {})
    if duration is not None:
        meta_annotations[DURATION_ANNOTATION] = duration
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels or {}, "annotations": meta_annotations},
        "spec": {
            "containers": [
                # Extended resources must be given as limits too (requests alone are rejected).
                {
                    "name": "main",
                    "image": "fake.invalid/job",
                    "resources": {"requests": requests, "limits": requests},
                }
            ],
            "restartPolicy": "Never",
        },
    }
