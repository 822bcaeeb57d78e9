"""Karpenter on the testbed: its CRDs (from the built module), a KWOKNodeClass, NodePools made from node templates,
and the instance-types file its KWOK provider reads (`--instance-types-file-path`).

Each distinct GPU model gets a NodePool of its own (CPU-only templates share one) whose nodes carry the model's
`drlsched.io/gpu-model` label, so pods that select a model land on it. Instance types are the templates, each
offered on demand in one zone at `NodeTemplate.price` (Karpenter's KWOK generator's price formula). The provider
subtracts a 100m CPU / 10Mi kube-reserved overhead from an instance type's capacity (`kwok/cloudprovider/
helpers.go`), so the file offers the template plus that overhead: a launched node's allocatable is the template,
as a static testbed node's and the simulator's node's are.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import kubernetes
import yaml

from drlsched.autoscale.node_groups import NodeGroup, NodeTemplate, node_templates
from drlsched.errors import UserError
from drlsched.k8s.objects import (
    GPU_MODEL_LABEL,
    GPU_RESOURCE,
    INSTANCE_TYPE_LABEL,
    KARPENTER_GROUP,
    KARPENTER_VERSION,
)
from drlsched.workload import NodeSpec

GROUP, VERSION = KARPENTER_GROUP, KARPENTER_VERSION
NODE_CLASS_GROUP, NODE_CLASS_VERSION = "karpenter.kwok.sh", "v1alpha1"
NODE_CLASS = "default"
ZONE = "test-zone-a"
CAPACITY_TYPE_LABEL = "karpenter.sh/capacity-type"
_CRD_TIMEOUT_S = 60.0
KUBE_RESERVED_CPU_M, KUBE_RESERVED_MEM_MIB = 100, 10  # the KWOK provider's InstanceTypeOverhead


def pools_for(nodes: Sequence[NodeSpec], max_size: int = 100) -> list[NodeGroup]:
    """One NodePool per GPU model of the nodes' templates (and one for CPU-only ones)."""
    by_model: dict[str, list[NodeTemplate]] = {}
    for t in node_templates(nodes):
        by_model.setdefault(t.gpu_model if t.gpus else "", []).append(t)
    return [NodeGroup(f"pool-{model.lower()}" if model else "pool-cpu", tuple(ts), 0, max_size)
            for model, ts in by_model.items()]


def instance_types(pools: Sequence[NodeGroup]) -> list[dict[str, Any]]:
    """The `--instance-types-file-path` JSON (the form of the provider's own `instance_types.json`)."""
    out, seen = [], set()
    for t in (t for p in pools for t in p.templates):
        if t.name in seen:
            continue
        seen.add(t.name)
        resources = {"cpu": f"{t.cpu_m + KUBE_RESERVED_CPU_M}m", "memory": f"{t.mem_mib + KUBE_RESERVED_MEM_MIB}Mi",
                     "pods": str(t.max_pods)}
        if t.gpus:
            resources[GPU_RESOURCE] = str(t.gpus)
        out.append({
            "name": t.name,
            "offerings": [{"Price": t.price, "Available": True, "Requirements": [
                {"key": CAPACITY_TYPE_LABEL, "operator": "In", "values": ["on-demand"]},
                {"key": "topology.kubernetes.io/zone", "operator": "In", "values": [ZONE]},
            ]}],
            "architecture": "amd64",
            "operatingSystems": ["linux"],
            "resources": resources,
        })
    return out


def node_pool(pool: NodeGroup, consolidate_after_s: float = 0.0,
              policy: str = "WhenEmptyOrUnderutilized") -> dict[str, Any]:
    labels = {}
    models = {t.gpu_model for t in pool.templates if t.gpus}
    if len(models) == 1:
        labels[GPU_MODEL_LABEL] = models.pop()
    cpu_limit = pool.max_size * (max(t.cpu_m for t in pool.templates) + KUBE_RESERVED_CPU_M)  # limits count capacity
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "NodePool",
        "metadata": {"name": pool.name},
        "spec": {
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "requirements": [
                        {"key": INSTANCE_TYPE_LABEL, "operator": "In",
                         "values": sorted(t.name for t in pool.templates)},
                        {"key": CAPACITY_TYPE_LABEL, "operator": "In", "values": ["on-demand"]},
                    ],
                    "nodeClassRef": {"group": NODE_CLASS_GROUP, "kind": "KWOKNodeClass", "name": NODE_CLASS},
                    "expireAfter": "Never",
                },
            },
            "limits": {"cpu": f"{cpu_limit}m"},
            "disruption": {"consolidationPolicy": policy, "consolidateAfter": f"{consolidate_after_s:g}s"},
        },
    }


def node_class(registration_delay_s: float) -> dict[str, Any]:
    spec = {"nodeRegistrationDelay": f"{round(registration_delay_s)}s"} if registration_delay_s > 0 else {}
    return {"apiVersion": f"{NODE_CLASS_GROUP}/{NODE_CLASS_VERSION}", "kind": "KWOKNodeClass",
            "metadata": {"name": NODE_CLASS}, "spec": spec}


def install(api: kubernetes.client.ApiClient, crds: Sequence[Path], pools: Sequence[NodeGroup],
            registration_delay_s: float, consolidate_after_s: float) -> None:
    """CRDs (waited until Established), the node class and the NodePools."""
    ext = kubernetes.client.ApiextensionsV1Api(api)
    names = []
    for path in crds:
        for doc in yaml.safe_load_all(path.read_text()):
            if doc and doc.get("kind") == "CustomResourceDefinition":
                _create(lambda b: ext.create_custom_resource_definition(b), doc)
                names.append(doc["metadata"]["name"])
    deadline = time.monotonic() + _CRD_TIMEOUT_S
    for name in names:
        while not _established(ext.read_custom_resource_definition(name)):
            if time.monotonic() > deadline:
                raise UserError(f"CRD {name} not Established after {_CRD_TIMEOUT_S:.0f} s")
            time.sleep(0.2)
    custom = kubernetes.client.CustomObjectsApi(api)
    _create(lambda b: custom.create_cluster_custom_object(NODE_CLASS_GROUP, NODE_CLASS_VERSION, "kwoknodeclasses", b),
            node_class(registration_delay_s))
    for pool in pools:
        _create(lambda b: custom.create_cluster_custom_object(GROUP, VERSION, "nodepools", b),
                node_pool(pool, consolidate_after_s))


def write_instance_types(path: Path, pools: Sequence[NodeGroup]) -> Path:
    path.write_text(json.dumps(instance_types(pools), indent=1) + "\n")
    return path


def _established(crd: Any) -> bool:
    return any(c.type == "Established" and c.status == "True" for c in (crd.status.conditions or []))


def _create(create: Any, body: dict[str, Any]) -> None:
    try:
        create(body)
    except kubernetes.client.ApiException as err:
        if err.status != 409:
            raise
