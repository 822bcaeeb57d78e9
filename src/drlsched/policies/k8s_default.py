"""kube-scheduler's default profile, for what the simulator models.

Filter: NodeResourcesFit (plus GPU count/share, model and NoSchedule taints, done by the cluster). Score:
NodeResourcesFit LeastAllocated (cpu:1, memory:1, NonZero requests) + NodeResourcesBalancedAllocation
(actual requests), each weight 1. BalancedAllocation follows the release being mirrored: v1.36+ (the default,
and the testbed's kube-scheduler) scores the change in balance the pod brings and skips best-effort pods
(no cpu or memory request; since v1.33); v1.30-1.32 score the balance with the pod, best-effort pods included
(`k8s-default-1.32`). The other default Score plugins (TaintToleration, NodeAffinity,
PodTopologySpread, InterPodAffinity, ImageLocality) give every node the same score for the pods we model (no
PreferNoSchedule taints, affinities, spread constraints or images), so they cannot change the choice.
Only the first `numFeasibleNodesToFind` feasible nodes from a rotating start index are scored
(percentageOfNodesToScore, adaptive by default), walking the nodes in the scheduler's node-tree order (one zone:
the order the API lists them, by name), and ties break uniformly at random.
"""

from __future__ import annotations

import numpy as np

from drlsched.cluster import Cluster
from drlsched.kube_scoring import MAX_NODE_SCORE, num_feasible_nodes_to_find
from drlsched.policies.base import Option, PodContext, ScoringPolicy


class K8sDefault(ScoringPolicy):
    name = "k8s-default"

    def __init__(self, percentage_of_nodes_to_score: int = 0, minor: int = 36) -> None:
        self.percentage = percentage_of_nodes_to_score
        self.minor = minor
        if minor < 36:
            self.name = f"k8s-default-1.{minor}"

    def reset(self, cluster: Cluster, rng: np.random.Generator) -> None:
        super().reset(cluster, rng)
        self.next_start = 0
        self.to_find = num_feasible_nodes_to_find(cluster.size, self.percentage)
        order = np.argsort(np.array(cluster.names), kind="stable")
        self.order = None if np.array_equal(order, np.arange(cluster.size)) else order

    def candidates(self, option: Option) -> np.ndarray:
        n = self.cluster.size
        if self.to_find >= n:
            return np.flatnonzero(option.feasible)
        # Filtering walks the nodes round-robin from next_start (a position in the walk order) and stops after
        # to_find feasible ones.
        feasible = np.flatnonzero(option.feasible if self.order is None else option.feasible[self.order])
        split = int(np.searchsorted(feasible, self.next_start))
        ordered = np.concatenate((feasible[split:], feasible[:split]))
        chosen = ordered[: self.to_find]
        processed = n if ordered.size < self.to_find else (int(chosen[-1]) - self.next_start) % n + 1
        self.next_start = (self.next_start + processed) % n
        return chosen if self.order is None else self.order[chosen]

    def score(self, ctx: PodContext, option: Option, nodes: np.ndarray) -> np.ndarray:
        # The formulas of drlsched.kube_scoring, specialised for capacities > 0 (validated) on the hot path:
        # a negative (cap - req) * 100 // cap is exactly upstream's "req > cap -> 0" once clamped at 0. In place
        # where a temporary can be reused (the same operations in the same order: the same values).
        c, r = self.cluster, option.request
        cap_cpu, cap_mem = c.cap_cpu[nodes], c.cap_mem[nodes]
        least = cap_cpu - c.nz_cpu[nodes]
        least -= r.nz_cpu
        least *= MAX_NODE_SCORE
        least //= cap_cpu
        np.maximum(least, 0, out=least)
        least_mem = cap_mem - c.nz_mem[nodes]
        least_mem -= r.nz_mem
        least_mem *= MAX_NODE_SCORE
        least_mem //= cap_mem
        np.maximum(least_mem, 0, out=least_mem)
        least += least_mem
        least //= 2
        if self.minor >= 33 and r.cpu == 0 and r.mem == 0:
            return least  # BalancedAllocation skips best-effort pods (PreScore returns Skip)
        alloc_cpu, alloc_mem = c.req_cpu[nodes], c.req_mem[nodes]
        with_pod = _balance((alloc_cpu + r.cpu) / cap_cpu, (alloc_mem + r.mem) / cap_mem)
        if self.minor < 36:
            least += with_pod
            return least
        without_pod = _balance(alloc_cpu / cap_cpu, alloc_mem / cap_mem)
        half = MAX_NODE_SCORE // 2
        with_pod += half
        with_pod -= without_pod
        with_pod //= 2
        least += half
        least += with_pod
        return least


def _balance(f_cpu: np.ndarray, f_mem: np.ndarray) -> np.ndarray:
    """BalancedAllocation's score from the requested fractions (fresh arrays, overwritten):
    int((1 - |min(f_cpu, 1) - min(f_mem, 1)| / 2) * MAX_NODE_SCORE)."""
    np.minimum(f_cpu, 1.0, out=f_cpu)
    np.minimum(f_mem, 1.0, out=f_mem)
    f_cpu -= f_mem
    np.abs(f_cpu, out=f_cpu)
    f_cpu /= 2
    np.subtract(1.0, f_cpu, out=f_cpu)
    f_cpu *= MAX_NODE_SCORE
    return f_cpu.astype(np.int64)
