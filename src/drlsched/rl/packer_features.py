"""Per-node observation for a learned GPU packer (issue 26 item 3; the policy itself is not built yet): what FGD
sees, node by node, so a network scoring nodes can learn FGD's choice and correct it.

Per candidate node: its per-GPU free shares sorted from most to least free and padded to the cluster's largest GPU
count (a GPU the node lacks reads -1, a fully used one 0), its GPU count, its GPU model one-hot, its free CPU and
memory (shares of the cluster's largest node), and FGD's fragmentation growth for placing this pod there (in
GPUs; the caller passes it, e.g. from `drlsched.policies.fgd._Scores.get`). The pod's request and the workload's
typical shapes with their frequencies (the quantity FGD's score is built from) are the same for every node and
come separately (`context_features`).
"""

from __future__ import annotations

import numpy as np

from drlsched.cluster import Cluster, PodRequest
from drlsched.fragmentation import TypicalPods
from drlsched.workload import GPU_MILLI

CONTEXT_SHAPES = 8  # typical shapes in the context vector (most frequent first), padded with zeros


def node_feature_count(cluster: Cluster) -> int:
    return cluster.gpu_exists.shape[1] + 1 + len(cluster.model_bit) + 3


def node_features(cluster: Cluster, nodes: np.ndarray, fgd_growth: np.ndarray) -> np.ndarray:
    """float32[len(nodes), node_feature_count(cluster)] for the candidate `nodes` (indices into the cluster);
    fgd_growth: FGD's fragmentation growth (milli-GPU) of this pod on each of them."""
    c = cluster
    g = c.gpu_exists.shape[1]
    free = np.where(c.gpu_exists[nodes], c.gpu_free[nodes] / GPU_MILLI, -1.0)
    shares = -np.sort(-free, axis=1)  # most free first; missing GPUs (-1) last
    count = (c.gpu_count[nodes] / g)[:, None]
    bits = np.array(sorted(c.model_bit.values()), dtype=np.int64)
    models = (c.node_model_bit[nodes][:, None] == bits[None, :]).astype(np.float64)
    cpu = ((c.cap_cpu[nodes] - c.req_cpu[nodes]) / max(int(c.cap_cpu.max(initial=1)), 1))[:, None]
    mem = ((c.cap_mem[nodes] - c.req_mem[nodes]) / max(int(c.cap_mem.max(initial=1)), 1))[:, None]
    growth = (np.asarray(fgd_growth, dtype=np.float64) / GPU_MILLI)[:, None]
    return np.hstack((shares, count, models, cpu, mem, growth)).astype(np.float32)


def context_features(cluster: Cluster, r: PodRequest, typical: TypicalPods | None) -> np.ndarray:
    """float32[3 + 3 * CONTEXT_SHAPES]: the pod's CPU (share of the largest node), GPU count (of the largest GPU
    count) and per-GPU share, then the most frequent typical shapes as (GPU count, share, frequency)."""
    c = cluster
    g = c.gpu_exists.shape[1]
    out = np.zeros(3 + 3 * CONTEXT_SHAPES)
    out[:3] = (r.cpu / max(int(c.cap_cpu.max(initial=1)), 1), r.gpus / g, r.gpu_milli / GPU_MILLI)
    if typical is not None and typical.freq.size:
        top = np.argsort(-typical.freq, kind="stable")[:CONTEXT_SHAPES]
        shapes = np.column_stack((typical.gpus[top] / g, typical.gpu_milli[top] / GPU_MILLI, typical.freq[top]))
        out[3:3 + shapes.size] = shapes.reshape(-1)
    return out.astype(np.float32)
