"""Fidelity of the simulator's `k8s-default` against a real kube-scheduler: the same pods, one at a time, on the
same nodes; for each placement, is the real node among the nodes the simulator scores highest?

Used by bench/kubernetes/fidelity_k8s_default.py and the testbed tests. Pods are created one at a time, each bound
(or found unschedulable) before the next, and never finish, so both sides see the same cluster state at every decision.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import kubernetes
import numpy as np

from drlsched.cluster import Cluster
from drlsched.k8s.objects import node_specs, pod_manifest
from drlsched.policies.k8s_default import K8sDefault
from drlsched.sched.cycle import pod_context
from drlsched.workload import PodSpec

UNSCHEDULABLE_WAIT_S = 3.0


def wait_bound(core: kubernetes.client.CoreV1Api, namespace: str, name: str, timeout_s: float = 60.0) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        pod = core.read_namespaced_pod(name, namespace)
        if pod.spec.node_name:
            return str(pod.spec.node_name)
        time.sleep(0.02)
    raise TimeoutError(f"pod {name} was not bound within {timeout_s} s")


@dataclass
class Fidelity:
    pods: int = 0
    agree: int = 0
    both_unschedulable: int = 0
    disagreements: list[dict[str, object]] = field(default_factory=list)

    @property
    def agreement(self) -> float:
        return self.agree / self.pods if self.pods else 0.0


def random_pod(rng: np.random.Generator, k: int) -> tuple[int, int, int]:
    """(millicores, MiB, GPUs) from mixed shapes, every third pod possibly asking for GPUs."""
    cpu = int(rng.choice([100, 250, 500, 1000, 2000, 4000, 8000]))
    mem = int(rng.choice([128, 512, 1024, 2048, 4096, 16384, 32768]))
    gpus = int(rng.choice([0, 0, 0, 1, 2])) if k % 3 == 0 else 0
    return cpu, mem, gpus


def compare(core: kubernetes.client.CoreV1Api, namespace: str, pods: int, rng: np.random.Generator,
            minor: int = 36) -> Fidelity:
    """Create `pods` random pods in `namespace` (on an otherwise empty cluster with fewer than 100 nodes, so
    kube-scheduler scores every feasible node) and compare each real placement with the simulator's choice."""
    cluster = Cluster(node_specs(core))
    index = {name: i for i, name in enumerate(cluster.names)}
    policy = K8sDefault(percentage_of_nodes_to_score=100, minor=minor)
    policy.reset(cluster, rng)
    out = Fidelity()
    for k in range(pods):
        cpu, mem, gpus = random_pod(rng, k)
        name = f"p{k:05d}"
        core.create_namespaced_pod(namespace, pod_manifest(name, f"{cpu}m", f"{mem}Mi", gpus, duration=None))
        spec = PodSpec(name, name, 0.0, cpu, mem, gpus=gpus, gpu_milli=1000 if gpus else 0)
        option = pod_context(spec, cluster, 0.0).options[0]
        r, feasible = option.request, option.feasible
        nodes = np.flatnonzero(feasible)
        out.pods += 1
        if nodes.size == 0:
            # The simulator says it fits nowhere: the real scheduler must leave it pending too.
            try:
                bound = wait_bound(core, namespace, name, timeout_s=UNSCHEDULABLE_WAIT_S)
            except TimeoutError:
                out.agree += 1
                out.both_unschedulable += 1
                core.delete_namespaced_pod(name, namespace, grace_period_seconds=0)
                continue
            out.disagreements.append({"pod": name, "real": bound, "sim": "unschedulable"})
            cluster.allocate(index[bound], r, ())
            continue
        real = index[wait_bound(core, namespace, name)]
        scores = policy.score(pod_context(spec, cluster, 0.0), option, nodes)
        top = set(nodes[scores == scores.max()].tolist())
        if real in top:
            out.agree += 1
        else:
            out.disagreements.append({
                "pod": name, "cpu_m": cpu, "mem_mib": mem, "gpus": gpus, "real": cluster.names[real],
                "real_feasible": bool(feasible[real]),
                "real_score": int(scores[nodes == real][0]) if feasible[real] else None,
                "sim_top": sorted(cluster.names[i] for i in top)[:5], "sim_top_score": int(scores.max())})
        cluster.allocate(real, r, cluster.pick_gpus(real, r) if feasible[real] else ())
    return out
