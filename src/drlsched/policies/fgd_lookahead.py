"""FGD with a one-step lookahead (`fgd-lookahead`): place the pod where FGD's expected fragmentation growth is
least once the next pod, a typical shape drawn by frequency, has also been placed by FGD.

For a candidate node n, cost(n) = Δ_pod(n) + Σ_k p_k · min(min_{m≠n} Δ_k(m), Δ_k(n after the pod)): the pod's
own growth, plus, for each typical shape k, the growth FGD would then pay for k — on the best other node, whose
state the pod does not change, or on n as the pod leaves it. A shape that fits somewhere now but nowhere once the
pod is on n costs its whole GPU request (the next pod would fail and leave that much unallocated). The FGD
repository's unpublished `NodeGpuFragBellman` recurses further on one node; this looks one pod ahead across the
cluster.

Cost bound: the lookahead is evaluated on FGD's `LOOK_NODES` best candidates and the `LOOK_SHAPES` most frequent
shapes (per-shape growth on the other nodes comes from FGD's per-request score cache, so only changed nodes are
recomputed).
"""

from __future__ import annotations

import numpy as np

from drlsched.cluster import PodRequest
from drlsched.fragmentation import TypicalPods
from drlsched.policies.fgd import FGD, fgd_delta
from drlsched.workload import GPU_MILLI

LOOK_NODES = 16
LOOK_SHAPES = 16


def hostable(free: np.ndarray, cpu_left: np.ndarray, model_bit: np.ndarray, cpu: int, gpus: int, milli: int,
             mask: int) -> np.ndarray:
    """bool[R]: rows that can host a (cpu, gpus, milli, model mask) shape, as FGD's measure decides it."""
    ok = cpu_left >= cpu
    if mask:
        ok &= (model_bit & mask) != 0
    if gpus:
        ok &= np.count_nonzero(free >= milli, axis=1) >= gpus
    return ok


def place_rows(free: np.ndarray, gpus: int, milli: int, choice: np.ndarray) -> np.ndarray:
    """The rows' free milli per GPU once a (gpus, milli) request is on each: a share on `choice`, whole GPUs on the
    lowest fully free ones (as `fgd_delta` places them)."""
    out = free.copy()
    if not gpus:
        return out
    if gpus == 1 and milli < GPU_MILLI:
        out[np.arange(out.shape[0]), choice] -= milli
        return out
    full = out == GPU_MILLI
    return np.where(full & (np.cumsum(full, axis=1) <= gpus), 0, out)


def shape_request(typical: TypicalPods, k: int) -> PodRequest:
    cpu = int(typical.cpu[k])
    return PodRequest(cpu=cpu, mem=0, gpus=int(typical.gpus[k]), gpu_milli=int(typical.gpu_milli[k]),
                      model_mask=int(typical.model_mask[k]), toleration_mask=0, nz_cpu=cpu, nz_mem=0)


class FGDLookahead(FGD):
    name = "fgd-lookahead"
    look_nodes = LOOK_NODES
    look_shapes = LOOK_SHAPES

    def cost(self, r: PodRequest, nodes: np.ndarray, delta: np.ndarray, choice: np.ndarray,
             typical: TypicalPods) -> np.ndarray:
        """float64[len(nodes)]: the lookahead cost of each candidate (nodes feasible for r, FGD's delta/choice)."""
        c = self.cluster
        cpu_left = c.cap_cpu - c.req_cpu
        after = place_rows(c.gpu_free[nodes], r.gpus, r.gpu_milli, choice)
        cpu_after = cpu_left[nodes] - r.cpu
        bits = c.node_model_bit[nodes]
        total = delta.astype(np.float64).copy()
        for k in np.argsort(-typical.freq, kind="stable")[: self.look_shapes]:
            s = shape_request(typical, int(k))
            now = np.flatnonzero(hostable(c.gpu_free, cpu_left, c.node_model_bit, s.cpu, s.gpus, s.gpu_milli,
                                          s.model_mask))
            if now.size == 0:
                continue  # fits nowhere whatever this pod does
            d_now, _ = self.scores.get(s, now, typical)
            i1 = int(np.argmin(d_now))
            best, arg = float(d_now[i1]), int(now[i1])
            second = float(np.min(np.delete(d_now, i1))) if now.size > 1 else np.inf
            others = np.where(nodes == arg, second, best)
            fits = hostable(after, cpu_after, bits, s.cpu, s.gpus, s.gpu_milli, s.model_mask)
            on_n = np.full(nodes.size, np.inf)
            if fits.any():
                on_n[fits] = fgd_delta(after[fits], cpu_after[fits], bits[fits], s.cpu, s.gpus, s.gpu_milli,
                                       typical)[0]
            nxt = np.minimum(others, on_n)
            nxt[~np.isfinite(nxt)] = s.gpus * s.gpu_milli  # the next pod would fail
            total += typical.freq[k] * nxt
        return total

    def best(self, request: PodRequest, nodes: np.ndarray, delta: np.ndarray, choice: np.ndarray,
             typical: TypicalPods) -> np.ndarray:
        if nodes.size > self.look_nodes:
            top = np.argpartition(delta, self.look_nodes - 1)[: self.look_nodes]
            top.sort()
        else:
            top = np.arange(nodes.size)
        cost = self.cost(request, nodes[top], delta[top], choice[top], typical)
        return top[cost <= cost.min() + 1e-9]
