"""Kubernetes API objects in the simulator's terms: quantities, nodes as NodeSpec."""

from __future__ import annotations

import kubernetes

from drlsched.testbed.nodes import GPU_MODEL_LABEL, GPU_RESOURCE, RACK_LABEL
from drlsched.workload import NodeSpec


_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50}
_DECIMAL = {"k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15}


def mib(quantity: str) -> int:
    """A memory quantity ("512Mi", "16Gi", "1G", "1048576") in MiB, rounded down."""
    for table in (_BINARY, _DECIMAL):
        for suffix, factor in table.items():
            if quantity.endswith(suffix):
                return int(float(quantity[: -len(suffix)]) * factor) // 2**20
    return int(float(quantity)) // 2**20


def millicores(quantity: str) -> int:
    return int(quantity[:-1]) if quantity.endswith("m") else int(float(quantity) * 1000)


def node_specs(core: kubernetes.client.CoreV1Api) -> list[NodeSpec]:
    """The API's nodes as simulator node specs (allocatable cpu, memory, GPUs; GPU model and rack labels)."""
    specs = []
    for n in sorted(core.list_node().items, key=lambda n: n.metadata.name):
        alloc = n.status.allocatable
        labels = n.metadata.labels or {}
        specs.append(NodeSpec(n.metadata.name, millicores(alloc["cpu"]), mib(alloc["memory"]),
                              int(alloc.get(GPU_RESOURCE, "0")), labels.get(GPU_MODEL_LABEL, ""),
                              labels.get(RACK_LABEL, "rack-0"), max_pods=int(alloc.get("pods", "110"))))
    return specs
