"""The one interface every placement policy implements: baselines and learned policies alike.

Mirrors kube-scheduler's framework: the simulator filters (feasible-node mask per allowed GPU count), a policy
scores the feasible nodes, the best score wins with a uniform random tie-break, and the simulator binds.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from drlsched.cluster import Cluster, PodRequest
from drlsched.fragmentation import TypicalPods
from drlsched.workload import PodSpec


@dataclass(frozen=True, slots=True)
class Option:
    """One way to run the pod: a GPU count (elastic pods have several), its request and where it fits."""

    gpus: int
    request: PodRequest
    feasible: np.ndarray  # bool[N]


@dataclass(frozen=True, slots=True)
class ReclaimSignals:
    """What a node-resource controller knows about reclaimed resources, per node (float64[N] each); given to
    policies that ask for them (`wants_reclaim_signals`) in the simulator when a reclaim model is on
    (`PodContext.reclaim`), None elsewhere.

    - `ls_cpu`: CPU usage of the non-BE (LS and Burstable) pods in millicores, as last measured;
    - `be_satisfaction`: what CPU suppression grants BE pods / their batch-CPU requests (1 = not throttled;
      Koordinator's BE CPU satisfaction, whose low values trigger evictions);
    - `evictions`: BE pods evicted from the node so far in the run.
    """

    ls_cpu: np.ndarray
    be_satisfaction: np.ndarray
    evictions: np.ndarray


@dataclass(slots=True)
class PodContext:
    pod: PodSpec
    options: list[Option]  # the pod's default GPU count first
    cluster: Cluster
    now: float
    job_nodes: dict[int, int] = field(default_factory=dict)  # node -> pods of the same job placed there
    typical: TypicalPods | None = None
    # node -> finished pods of the parent tasks there (where the pod's shuffle input lives); filled only for
    # policies whose `wants_data_nodes` is set, since counting them costs time on every DAG pod.
    data_nodes: dict[int, int] = field(default_factory=dict)
    # Filled only for policies whose `wants_reclaim_signals` is set (the per-node arrays cost time on every pod).
    reclaim: ReclaimSignals | None = None


def per_node(counts: dict[int, int], n: int) -> np.ndarray:
    """float64[n]: a node -> count mapping of a `PodContext` (`job_nodes`, `data_nodes`) as an array over nodes."""
    out = np.zeros(n)
    if counts:
        out[np.fromiter(counts.keys(), np.int64, len(counts))] = np.fromiter(counts.values(), np.float64, len(counts))
    return out


@dataclass(frozen=True, slots=True)
class Decision:
    node: int
    gpus: int  # the chosen GPU count
    gpu_ids: tuple[int, ...] | None = None  # device choice; None lets the cluster pick (best fit)


@dataclass(frozen=True, slots=True)
class Migration:
    pod_uid: str
    node: int


class Policy:
    """Chooses a node (and GPU count) for one pod, or None to leave it pending. For a pod that fits, None is a
    hold (the admission decision for BE pods on reclaimed resources): the pod is parked like an unschedulable one
    and retried after the next cluster event, with backoff."""

    name = "policy"
    wants_data_nodes = False
    wants_reclaim_signals = False
    needs_gpus = False  # GPU packing policies refuse a cluster without GPUs (`reset` raises UserError)
    # How equal best scores are broken: "random" (kube-scheduler's selectHost) or "rank", the best node by a fixed
    # order (`node_rank`, lowest first; the nodes' names when None). The FGD paper's simulator patches selectHost
    # to take the smallest node name and prefixes each name with a random permutation index drawn per run, so its
    # ties go to a fixed random node order (`fill --protocol paper` sets both).
    tie_break = "random"
    node_rank: np.ndarray | None = None

    def reset(self, cluster: Cluster, rng: np.random.Generator) -> None:
        self.cluster = cluster
        self.rng = rng
        self._rank: np.ndarray | None = None

    def break_tie(self, best: np.ndarray) -> int:
        """One of `best` (indices into the nodes, all with the best score) by the policy's `tie_break`."""
        if best.size == 1:
            return int(best[0])
        if self.tie_break == "rank":
            rank = getattr(self, "_rank", None)
            if rank is None or rank.size != self.cluster.size:
                rank = self.node_rank
                if rank is None or rank.size != self.cluster.size:
                    rank = np.argsort(np.argsort(np.array(self.cluster.names), kind="stable"))
                self._rank = rank
            return int(best[np.argmin(rank[best])])
        return int(best[self.rng.integers(best.size)])

    def select(self, ctx: PodContext) -> Decision | None:
        raise NotImplementedError

    def rebalance(self, cluster: Cluster, running: list[tuple[str, int]], now: float) -> list[Migration]:
        """Called at rebalancing ticks with (pod uid, node) of running pods; default: never migrate."""
        del cluster, running, now
        return []


class ScoringPolicy(Policy):
    """A scorer over the feasible nodes of the first GPU-count option that fits anywhere."""

    def candidates(self, option: Option) -> np.ndarray:
        return np.flatnonzero(option.feasible)

    def score(self, ctx: PodContext, option: Option, nodes: np.ndarray) -> np.ndarray:
        """Higher is better; one value per node in `nodes`."""
        raise NotImplementedError

    def select(self, ctx: PodContext) -> Decision | None:
        for option in ctx.options:
            nodes = self.candidates(option)
            if nodes.size == 0:
                continue
            if nodes.size == 1:
                return Decision(int(nodes[0]), option.gpus)
            scores = self.score(ctx, option, nodes)
            return Decision(self.break_tie(nodes[scores == scores.max()]), option.gpus)
        return None
