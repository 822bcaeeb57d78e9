"""Fake node manifests: shapes (cpu, memory, GPUs, GPU model) drawn deterministically from a node profile.

Profiles follow the published machine mixes: `openb` the Alibaba GPU v2023 (FGD) node list, `pai` the
Alibaba PAI v2020 machine spec (see shared/reference/traces.md §6d and §2); `uniform` is one GPU shape and
one CPU shape. Shapes are dealt by smooth weighted round-robin, so any node count keeps the profile's
proportions without RNG.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from drlsched.k8s.objects import GPU_MODEL_LABEL, GPU_RESOURCE, RACK_LABEL
from drlsched.workload import NodeSpec

KWOK_ANNOTATION = "kwok.x-k8s.io/node"
NODES_PER_RACK = 20
MAX_PODS = 110


@dataclass(frozen=True)
class Shape:
    model: str  # "" for CPU-only nodes
    gpus: int
    cpus: int
    memory_gib: int
    weight: int  # how many nodes of this shape the source cluster has


PROFILES: dict[str, tuple[tuple[Shape, ...], tuple[Shape, ...]]] = {
    "uniform": ((Shape("V100", 8, 96, 512, 1),), (Shape("", 0, 96, 512, 1),)),
    "openb": (
        (
            Shape("G2", 8, 96, 384, 549),
            Shape("T4", 2, 104, 512, 387),
            Shape("P100", 2, 16, 120, 107),
            Shape("G3", 8, 128, 768, 39),
            Shape("V100M16", 4, 32, 128, 28),
            Shape("V100M32", 8, 96, 768, 21),
        ),
        (Shape("", 0, 32, 256, 129), Shape("", 0, 96, 512, 59)),
    ),
    "pai": (
        (
            Shape("P100", 2, 64, 512, 798),
            Shape("T4", 2, 96, 512, 497),
            Shape("MISC", 8, 96, 512, 280),
            Shape("V100M32", 8, 96, 384, 135),
            Shape("V100", 8, 96, 512, 59),
            Shape("V100", 8, 96, 384, 45),
        ),
        (Shape("", 0, 96, 512, 83),),
    ),
}


SCENARIO_PREFIX = "scenario:"


def profile_names() -> list[str]:
    from drlsched.scenarios import SCENARIOS

    return sorted(PROFILES) + [SCENARIO_PREFIX + name for name in sorted(SCENARIOS)]


def node_manifests(nodes: int, gpu_nodes: int, profile: str) -> list[dict[str, Any]]:
    """`nodes` fake nodes in all, the first `gpu_nodes` of them with GPUs; a `scenario:NAME` profile takes the
    scenario's own cluster of that size instead (its shapes, GPU models and racks; `gpu_nodes` is ignored), so
    a replay of the scenario runs on the cluster it was simulated on."""
    if profile.startswith(SCENARIO_PREFIX):
        return _scenario_nodes(profile[len(SCENARIO_PREFIX):], nodes)
    gpu_shapes, cpu_shapes = PROFILES[profile]
    shapes = _deal(gpu_shapes, gpu_nodes) + _deal(cpu_shapes, nodes - gpu_nodes)
    manifests = []
    for index, shape in enumerate(shapes):
        kind = "gpu" if shape.gpus else "cpu"
        manifests.append(_node(f"kwok-{kind}-{index:05d}", shape, f"rack-{index // NODES_PER_RACK:03d}"))
    return manifests


def _scenario_nodes(name: str, nodes: int) -> list[dict[str, Any]]:
    from drlsched.scenarios import make_scenario

    return exact_node_manifests(make_scenario(name, nodes=nodes).nodes)


def exact_node_manifests(specs: Sequence[NodeSpec]) -> list[dict[str, Any]]:
    """Fake nodes exactly as given (names, sizes, GPU models, racks): e.g. a trace's cluster, for a replay on the
    nodes it is simulated on."""
    manifests = []
    for spec in specs:
        m = _node(spec.name, Shape(spec.gpu_model, spec.gpus, 1, 1, 1), spec.rack)
        # Exact sizes (the shape's whole cores and GiB are placeholders here).
        for key in ("allocatable", "capacity"):
            m["status"][key]["cpu"] = f"{spec.cpu_m}m"
            m["status"][key]["memory"] = f"{spec.mem_mib}Mi"
            m["status"][key]["pods"] = str(spec.max_pods)
        manifests.append(m)
    return manifests


def _deal(shapes: tuple[Shape, ...], count: int) -> list[Shape]:
    total = sum(s.weight for s in shapes)
    credit = [0] * len(shapes)
    dealt = []
    for _ in range(count):
        credit = [c + s.weight for c, s in zip(credit, shapes, strict=True)]
        best = max(range(len(shapes)), key=lambda i: credit[i])
        credit[best] -= total
        dealt.append(shapes[best])
    return dealt


def _node(name: str, shape: Shape, rack: str) -> dict[str, Any]:
    resources = {"cpu": str(shape.cpus), "memory": f"{shape.memory_gib}Gi", "pods": str(MAX_PODS)}
    labels = {
        "type": "kwok",
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        RACK_LABEL: rack,
    }
    if shape.gpus:
        resources[GPU_RESOURCE] = str(shape.gpus)
        labels[GPU_MODEL_LABEL] = shape.model
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": labels,
            "annotations": {
                KWOK_ANNOTATION: "fake",
                "node.alpha.kubernetes.io/ttl": "0",
                # metrics-server (>= 0.7) follows this to kwok's emulated kubelet endpoint.
                "metrics.k8s.io/resource-metrics-path": f"/metrics/nodes/{name}/metrics/resource",
            },
        },
        "spec": {},
        "status": {
            "allocatable": resources,
            "capacity": dict(resources),
        },
    }
