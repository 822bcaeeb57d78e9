"""Classic placement heuristics, each a small scorer over the same feasible nodes."""

from __future__ import annotations

import numpy as np

from drlsched.kube_scoring import most_requested, target_load_packing, weighted_node_score
from drlsched.policies.base import Decision, Option, PodContext, Policy, ScoringPolicy, per_node
from drlsched.policies.k8s_default import K8sDefault
from drlsched.workload import GPU_MILLI


class MostAllocated(ScoringPolicy):
    """Bin packing: NodeResourcesFit MostAllocated over cpu, memory and (for GPU pods) nvidia.com/gpu."""

    name = "most-allocated"

    def score(self, ctx: PodContext, option: Option, nodes: np.ndarray) -> np.ndarray:
        c, r = self.cluster, option.request
        scores = [most_requested(c.nz_cpu[nodes] + r.nz_cpu, c.cap_cpu[nodes]),
                  most_requested(c.nz_mem[nodes] + r.nz_mem, c.cap_mem[nodes])]
        caps = [c.cap_cpu[nodes], c.cap_mem[nodes]]
        if r.gpus:
            cap_gpu = c.cap_gpu_milli[nodes]
            scores.append(most_requested(c.used_gpu_milli[nodes] + r.gpus * r.gpu_milli, cap_gpu))
            caps.append(cap_gpu)
        return weighted_node_score(scores, caps, [1] * len(scores))


class Tetris(ScoringPolicy):
    """Alignment score (Grandl et al., SIGCOMM'14): dot product of the pod's demand and the node's free
    resources, both as fractions of the node's capacity; packs pods where their shape fits the hole."""

    name = "tetris"

    def score(self, ctx: PodContext, option: Option, nodes: np.ndarray) -> np.ndarray:
        c, r = self.cluster, option.request
        cap_cpu, cap_mem = c.cap_cpu[nodes], c.cap_mem[nodes]
        s = (r.cpu / cap_cpu) * ((cap_cpu - c.req_cpu[nodes]) / cap_cpu)
        s += (r.mem / cap_mem) * ((cap_mem - c.req_mem[nodes]) / cap_mem)
        if r.gpus:
            cap_gpu = c.cap_gpu_milli[nodes]
            s += (r.gpus * r.gpu_milli / cap_gpu) * ((cap_gpu - c.used_gpu_milli[nodes]) / cap_gpu)
        return s


class _PickFeasible(Policy):
    """Picks one node among those feasible for the first GPU-count option that fits anywhere."""

    def pick(self, nodes: np.ndarray) -> int:
        raise NotImplementedError

    def select(self, ctx: PodContext) -> Decision | None:
        for option in ctx.options:
            nodes = np.flatnonzero(option.feasible)
            if nodes.size:
                return Decision(int(self.pick(nodes)), option.gpus)
        return None


class FirstFit(_PickFeasible):
    """The lowest-indexed feasible node."""

    name = "first-fit"

    def pick(self, nodes: np.ndarray) -> int:
        return int(nodes[0])


class RandomFit(_PickFeasible):
    """A uniformly random feasible node; with `random_gpu` a share also goes to a random GPU that holds it (the FGD
    paper's Random, set by `fill --protocol paper`), else to the best-fitting one."""

    name = "random"
    random_gpu = False

    def pick(self, nodes: np.ndarray) -> int:
        return int(nodes[self.rng.integers(nodes.size)])

    def select(self, ctx: PodContext) -> Decision | None:
        decision = super().select(ctx)
        if decision is None or not self.random_gpu:
            return decision
        r = next(o.request for o in ctx.options if o.gpus == decision.gpus)
        if not r.gpus or r.gpu_milli >= GPU_MILLI:
            return decision
        fits = np.flatnonzero(self.cluster.gpu_free[decision.node] >= r.gpu_milli)
        return Decision(decision.node, decision.gpus, (int(fits[self.rng.integers(fits.size)]),))


class Trimaran(ScoringPolicy):
    """scheduler-plugins TargetLoadPacking on measured CPU usage: fill nodes up to a target utilisation X.

    Predicted pod usage is its CPU request times 1.5 (1000m without a request), as upstream's defaults; pods
    bound but still starting count with their prediction, as upstream adds recently scheduled pods.
    """

    name = "trimaran"

    def __init__(self, target_utilization: float = 40.0, multiplier: float = 1.5) -> None:
        self.target = target_utilization
        self.multiplier = multiplier

    def score(self, ctx: PodContext, option: Option, nodes: np.ndarray) -> np.ndarray:
        c, r = self.cluster, option.request
        predicted = round(r.cpu * self.multiplier) if r.cpu else 1000
        used = c.use_cpu[nodes] + c.starting_cpu[nodes] * self.multiplier + predicted
        return target_load_packing(100.0 * used / c.cap_cpu[nodes], self.target)


class DataLocal(K8sDefault):
    """`k8s-default` with a dominant locality preference, like a strong preferred pod affinity to the pod's own
    job: first the nodes holding most of the pod's shuffle input (its parent tasks' finished pods), then most of
    its job's running pods; `k8s-default`'s score breaks the remaining ties. The heuristic answer to cross-node
    traffic, and so the bar a learned policy trained on traffic has to clear."""

    name = "data-local"
    wants_data_nodes = True

    def score(self, ctx: PodContext, option: Option, nodes: np.ndarray) -> np.ndarray:
        n = self.cluster.size
        local = (per_node(ctx.data_nodes, n) + per_node(ctx.job_nodes, n)).astype(np.int64)
        # k8s-default's sum of weighted plugin scores stays far below 10,000, so locality always wins.
        return super().score(ctx, option, nodes) + 10_000 * local[nodes]
