"""A cluster's nodes, read from the API, in the simulator's terms."""

from __future__ import annotations

import json

import kubernetes

from drlsched.k8s.state import node_spec
from drlsched.workload import NodeSpec


def node_specs(core: kubernetes.client.CoreV1Api) -> list[NodeSpec]:
    """Every node as a NodeSpec (allocatable cpu, memory, GPUs; GPU model and rack labels), sorted by name."""
    raw = json.loads(core.list_node(_preload_content=False).data)
    return sorted((node_spec(n) for n in raw.get("items", [])), key=lambda s: s.name)
