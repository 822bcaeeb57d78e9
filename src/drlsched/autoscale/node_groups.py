"""What the node autoscalers see and decide: node templates (a scenario's node shapes, Cluster Autoscaler's node
groups and Karpenter's instance types), pods' requests, nodes with their pods, and provision / remove actions.

Both autoscalers are called with the pods that are pending and the nodes that exist, those still provisioning
included (`ready=False`): pending pods that fit a provisioning node's room trigger nothing more, as Cluster
Autoscaler's "upcoming nodes" and Karpenter's in-flight NodeClaims do. They name the nodes they ask for; the
caller creates them under those names after its provisioning delay.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from drlsched.workload import NodeSpec

# On-demand price per hour: Karpenter's KWOK provider's instance-type generator (sigs.k8s.io/karpenter v1.15.0
# `kwok/tools/gen_instance_types.go` `priceFromResources`: 0.025 per core and 0.001 per GB of memory); it leaves
# GPUs out, we add 1.0 per GPU (the generator's commented-out GPU term).
PRICE_PER_CORE = 0.025
PRICE_PER_GB = 0.001
PRICE_PER_GPU = 1.0


def price_per_hour(cpu_m: int, mem_mib: int, gpus: int = 0) -> float:
    return PRICE_PER_CORE * cpu_m / 1000 + PRICE_PER_GB * mem_mib * 2**20 / 1e9 + PRICE_PER_GPU * gpus


@dataclass(frozen=True)
class NodeTemplate:
    """A node shape that can be provisioned (allocatable resources)."""

    name: str
    cpu_m: int
    mem_mib: int
    gpus: int = 0
    gpu_model: str = ""
    max_pods: int = 110

    @property
    def price(self) -> float:
        return price_per_hour(self.cpu_m, self.mem_mib, self.gpus)

    def node_spec(self, name: str, rack: str = "rack-0") -> NodeSpec:
        return NodeSpec(name, self.cpu_m, self.mem_mib, self.gpus, self.gpu_model, rack, max_pods=self.max_pods)


def template_name(cpu_m: int, mem_mib: int, gpus: int = 0, gpu_model: str = "") -> str:
    """`c<cores>-m<GiB>[-g<gpus><model>]`, e.g. c32-m128, c96-m512-g8v100 (a DNS label: instance types are
    label values)."""
    name = f"c{cpu_m / 1000:g}-m{mem_mib / 1024:g}".replace(".", "p")
    return name + (f"-g{gpus}{gpu_model.lower()}" if gpus else "")


def node_templates(nodes: Sequence[NodeSpec]) -> list[NodeTemplate]:
    """The distinct node shapes of a cluster, in order of first appearance."""
    seen: dict[tuple[int, int, int, str, int], NodeTemplate] = {}
    for n in nodes:
        key = (n.cpu_m, n.mem_mib, n.gpus, n.gpu_model, n.max_pods)
        if key not in seen:
            seen[key] = NodeTemplate(template_name(n.cpu_m, n.mem_mib, n.gpus, n.gpu_model), *key)
    return list(seen.values())


@dataclass(frozen=True)
class NodeGroup:
    """A Cluster Autoscaler node group (one template) or a Karpenter NodePool (several)."""

    name: str
    templates: tuple[NodeTemplate, ...]
    min_size: int = 0
    max_size: int = 1000


@dataclass(frozen=True)
class PodRequest:
    name: str
    cpu_m: int
    mem_mib: int
    gpus: int = 0
    gpu_model: str = ""  # "" = any
    movable: bool = True  # owned by a controller, so it may be evicted to drain its node
    since_s: float = 0.0  # pending: when the scheduler marked it unschedulable


@dataclass(frozen=True)
class NodeView:
    """A node as the autoscaler sees it: allocatable resources and the pods bound to it."""

    name: str
    group: str | None  # None: not managed by this autoscaler
    cpu_m: int
    mem_mib: int
    gpus: int = 0
    gpu_model: str = ""
    max_pods: int = 110
    pods: tuple[PodRequest, ...] = ()
    ready: bool = True  # False: still provisioning (requested, not yet registered and Ready)
    created_s: float = 0.0
    template: str = ""  # the template it was provisioned from ("" for nodes the autoscaler did not create)

    @functools.cached_property
    def requested(self) -> tuple[int, int, int]:
        cpu = mem = gpus = 0
        for p in self.pods:
            cpu, mem, gpus = cpu + p.cpu_m, mem + p.mem_mib, gpus + p.gpus
        return cpu, mem, gpus

    def utilization(self) -> float:
        """Cluster Autoscaler's: max(CPU, memory) requests / allocatable; GPU requests / GPUs on a GPU node."""
        cpu, mem, gpus = self.requested
        if self.gpus:
            return gpus / self.gpus
        return max(cpu / self.cpu_m, mem / self.mem_mib)


@dataclass(frozen=True)
class Provision:
    group: str
    template: NodeTemplate
    names: tuple[str, ...]  # the nodes to create, named by the autoscaler
    reason: str = "unschedulable pods"


@dataclass(frozen=True)
class Remove:
    node: str
    reason: str


Action = Provision | Remove


@dataclass
class Room:
    """Free capacity of a set of bins (nodes or planned nodes), for first-fit packing: one numpy row per bin."""

    cpu: np.ndarray
    mem: np.ndarray
    gpus: np.ndarray
    pods: np.ndarray
    model: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, nodes: Sequence[NodeView]) -> Room:
        used = np.array([n.requested for n in nodes], dtype=np.int64).reshape(len(nodes), 3)
        return cls(np.array([n.cpu_m for n in nodes], dtype=np.int64) - used[:, 0],
                   np.array([n.mem_mib for n in nodes], dtype=np.int64) - used[:, 1],
                   np.array([n.gpus for n in nodes], dtype=np.int64) - used[:, 2],
                   np.array([n.max_pods - len(n.pods) for n in nodes], dtype=np.int64),
                   [n.gpu_model for n in nodes])

    def fits(self, pod: PodRequest, mask: np.ndarray | None = None) -> np.ndarray:
        ok = (self.cpu >= pod.cpu_m) & (self.mem >= pod.mem_mib) & (self.gpus >= pod.gpus) & (self.pods >= 1)
        if pod.gpu_model and pod.gpus:
            ok &= np.array([m == pod.gpu_model for m in self.model], dtype=bool)
        return ok if mask is None else ok & mask

    def take(self, i: int, pod: PodRequest) -> None:
        self.cpu[i] -= pod.cpu_m
        self.mem[i] -= pod.mem_mib
        self.gpus[i] -= pod.gpus
        self.pods[i] -= 1

    def place(self, pod: PodRequest, mask: np.ndarray | None = None) -> int:
        """First bin the pod fits (taken), or -1."""
        hits = np.flatnonzero(self.fits(pod, mask))
        if hits.size == 0:
            return -1
        self.take(int(hits[0]), pod)
        return int(hits[0])


def template_fits(t: NodeTemplate, pods: Sequence[PodRequest]) -> bool:
    """Whether these pods fit together on an empty node of template t."""
    return (sum(p.cpu_m for p in pods) <= t.cpu_m and sum(p.mem_mib for p in pods) <= t.mem_mib
            and sum(p.gpus for p in pods) <= t.gpus and len(pods) <= t.max_pods
            and all(not p.gpus or not p.gpu_model or p.gpu_model == t.gpu_model for p in pods))


def by_size(pods: Sequence[PodRequest]) -> list[PodRequest]:
    """Largest first (GPUs, then CPU, then memory): the order both autoscalers' bin-packing uses."""
    return sorted(pods, key=lambda p: (-p.gpus, -p.cpu_m, -p.mem_mib, p.name))
