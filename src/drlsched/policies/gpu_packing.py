"""The GPU-packing baselines the FGD paper (Weng et al., ATC'23) compares against, scored as its simulator
(hkust-adsl/kubernetes-scheduler-simulator, `pkg/simulator/plugin/*_score.go`) scores them: integer node scores
in 0..100 (the plugin's own truncations kept, since they decide ties), the highest wins, ties at random.

Resources are the simulator's two: milli-CPU and milli-GPU; `MAX_CPU` and `MAX_GPU` are its normalising
"largest node" (128 cores, 8 GPUs). A share goes to the GPU with the least free share that holds it and whole
GPUs to the lowest free indices (the simulator's `best` GPU selection; `Cluster.pick_gpus`). Formulas:
docs/policies.md.
"""

from __future__ import annotations

import numpy as np

from drlsched.cluster import Cluster, gpu_kind
from drlsched.errors import UserError
from drlsched.policies.base import Option, PodContext, ScoringPolicy
from drlsched.workload import GPU_MILLI

MAX_CPU = 128_000  # milli-CPU
MAX_GPU = 8_000  # milli-GPU
MAX_SCORE = 100


def check_gpus(cluster: Cluster, name: str) -> None:
    """A GPU packing policy on a cluster without GPUs measures nothing: refuse it (one line, exit 2)."""
    if cluster.total_gpu_milli == 0:
        raise UserError(f"policy {name!r} packs GPUs, but the cluster has no GPU nodes")


class _GpuScorer(ScoringPolicy):
    needs_gpus = True

    def reset(self, cluster: Cluster, rng: np.random.Generator) -> None:
        check_gpus(cluster, self.name)
        super().reset(cluster, rng)

    def free(self, nodes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(free milli-CPU, free milli-GPU summed over the node's GPUs) of `nodes`."""
        c = self.cluster
        return c.cap_cpu[nodes] - c.req_cpu[nodes], c.cap_gpu_milli[nodes] - c.used_gpu_milli[nodes]


class BestFit(_GpuScorer):
    """The node the pod leaves least room on: 100 × (1 − ½·cpu_left_after/MAX_CPU − ½·gpu_left_after/MAX_GPU)."""

    name = "best-fit"

    def score(self, ctx: PodContext, option: Option, nodes: np.ndarray) -> np.ndarray:
        r = option.request
        cpu_left, gpu_left = self.free(nodes)
        left = 0.5 * (cpu_left - r.cpu) / MAX_CPU + 0.5 * (gpu_left - r.gpus * r.gpu_milli) / MAX_GPU
        return ((1.0 - left) * MAX_SCORE).astype(np.int64)


class DotProduct(_GpuScorer):
    """The node whose free (CPU, GPU) vector has the smallest dot product with the pod's request, both divided by
    (MAX_CPU, MAX_GPU): 100 × (1 − dot / 2) (the simulator's `merge` GPU dimension, `max` normalisation)."""

    name = "dot-product"

    def score(self, ctx: PodContext, option: Option, nodes: np.ndarray) -> np.ndarray:
        r = option.request
        cpu_left, gpu_left = self.free(nodes)
        dot = (cpu_left / MAX_CPU) * (r.cpu / MAX_CPU) + (gpu_left / MAX_GPU) * (r.gpus * r.gpu_milli / MAX_GPU)
        return (MAX_SCORE * (1.0 - dot / 2)).astype(np.int64)


class GpuClustering(_GpuScorer):
    """Keeps pods of one GPU kind (a share, or k whole GPUs) together: a band per node class, most used first
    within it. Band 75 for a node holding only the pod's kind, 50 for one holding it among others, 25 for a node
    without GPU pods, 0 for one holding only other kinds; plus 25 × (MAX_GPU − gpu_left) / MAX_GPU (integer).
    CPU-only pods score 0 everywhere (a random feasible node)."""

    name = "gpu-clustering"

    def score(self, ctx: PodContext, option: Option, nodes: np.ndarray) -> np.ndarray:
        r = option.request
        if not r.gpus:
            return np.zeros(nodes.size, dtype=np.int64)
        kinds = self.cluster.gpu_kind_pods[nodes] > 0
        kind = gpu_kind(r.gpus, r.gpu_milli)
        mine = kinds[:, kind] if kind < kinds.shape[1] else np.zeros(nodes.size, dtype=bool)
        n_kinds = kinds.sum(axis=1)
        band = np.where(mine, np.where(n_kinds == 1, 3, 2), np.where(n_kinds == 0, 1, 0)) * (MAX_SCORE // 4)
        _, gpu_left = self.free(nodes)
        return band + (MAX_SCORE // 4) * (MAX_GPU - gpu_left) // MAX_GPU


class GpuPacking(_GpuScorer):
    """Prefers GPUs already shared, then nodes already in use, then idle nodes (fewest GPUs first):
    - the pod's GPUs (least free first among those that hold its share) are all partly used:
      max(100 − Σ ⌊100·free/1000⌋ / 10, 50) over those GPUs;
    - it needs k fully free GPUs on a node with some GPU in use: max(50 − k, 33);
    - every GPU of the node is free (n of them): max(33 − n, n).
    CPU-only pods score 0 everywhere (a random feasible node)."""

    name = "gpu-packing"

    def score(self, ctx: PodContext, option: Option, nodes: np.ndarray) -> np.ndarray:
        r = option.request
        if not r.gpus:
            return np.zeros(nodes.size, dtype=np.int64)
        c = self.cluster
        count, full = c.gpu_count[nodes], c.full_free_gpus[nodes]
        idle_node = np.maximum(MAX_SCORE // 3 - full, full)
        if r.gpu_milli >= GPU_MILLI:  # whole GPUs are always fully free ones
            used_node = np.full(nodes.size, max(MAX_SCORE // 2 - r.gpus, MAX_SCORE // 3))
            return np.where(full == count, idle_node, used_node)
        free = c.gpu_free[nodes]
        # The share goes to the least free GPU that holds it; ties between nodes are by that GPU's free share.
        best = np.where(free >= r.gpu_milli, free, GPU_MILLI + 1).min(axis=1)
        shared = np.maximum(MAX_SCORE - (best * 100 // GPU_MILLI) // 10, MAX_SCORE // 2)
        used_node = np.where(best < GPU_MILLI, shared, max(MAX_SCORE // 2 - 1, MAX_SCORE // 3))
        return np.where(full == count, idle_node, used_node)
