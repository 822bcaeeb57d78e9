"""One policy object answering for the extender and the second scheduler: filter, scores 0–10, a node choice.

Policies are not thread-safe (they keep an rng and, for k8s-default, a rotating start index), so every call
holds the placer's lock and the state's; calls are short (numpy over all nodes).
"""

from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from drlsched.cluster import Cluster
from drlsched.fragmentation import ShapeCounter
from drlsched.k8s.metrics_pipeline import MetricsStore
from drlsched.k8s.state import ClusterState
from drlsched.policies import PodContext, Policy, ScoringPolicy
from drlsched.sched.cycle import decide, fits_somewhere, pod_context
from drlsched.workload import PodSpec

MAX_EXTENDER_PRIORITY = 10  # k8s.io/kube-scheduler/extender/v1 MaxExtenderPriority
SEEN_PODS = 65_536  # pods remembered so a retried one is counted once in the typical shapes


@dataclass(frozen=True, slots=True)
class Choice:
    node: str | None  # None: no node fits
    gpus: int
    reason: str  # why nothing fits, in kube-scheduler's words (empty when a node was chosen)


class Placer:
    def __init__(self, policy: Policy, seed: int = 0, metrics: MetricsStore | None = None,
                 refresh_s: float = 1.0) -> None:
        """`metrics`: live usage for load-aware policies, applied to the Cluster at most every `refresh_s`
        (a pass over every node); without it, usage stays zero as in a cluster without metrics."""
        self.policy = policy
        self.seed = seed
        self.metrics = metrics
        self.refresh_s = refresh_s
        self.lock = threading.Lock()
        self._cluster: Cluster | None = None
        self._applied_at = -math.inf
        self.last_value: float | None = None  # the policy's value estimate for its last choice, if it has one
        # The typical pod shapes (FGD's and the learned packer's target workload), counted per pod the first
        # time it is asked about, as the simulator counts each pod when it arrives.
        self.shapes = ShapeCounter()
        self._seen: OrderedDict[str, None] = OrderedDict()

    def _context(self, state: ClusterState, pod: PodSpec, names: list[str] | None) -> PodContext:
        """Holds both locks when called. `names` restricts the candidates (None: every node)."""
        cluster = state.cluster()
        if cluster is not self._cluster:  # a rebuilt (or another request's) Cluster: the policy must see it
            self.policy.reset(cluster, np.random.default_rng(self.seed))
            self._cluster = cluster
            self._applied_at = -math.inf
        if self.metrics is not None and time.monotonic() - self._applied_at >= self.refresh_s:
            self.metrics.apply(cluster)
            self._applied_at = time.monotonic()
        self._count_shape(cluster, pod)
        return pod_context(pod, cluster, time.time(), job_nodes=state.job_nodes(pod.job_id),
                           typical=self.shapes.current, mask=None if names is None else state.mask(names),
                           policy=self.policy, data_nodes=lambda: state.data_nodes(pod.job_id, pod.parents))

    def _count_shape(self, cluster: Cluster, pod: PodSpec) -> None:
        if pod.uid in self._seen:
            return
        self._seen[pod.uid] = None
        if len(self._seen) > SEEN_PODS:
            self._seen.popitem(last=False)
        r = cluster.request(pod)
        self.shapes.add(r.cpu, r.gpus, r.gpu_milli, r.model_mask)

    def filter(self, state: ClusterState, pod: PodSpec, names: list[str]) -> tuple[list[str], dict[str, str]]:
        """The named nodes where the pod fits by the policy's model, and a reason for each of the others."""
        with self.lock, state.lock:
            ctx = self._context(state, pod, names)
            fits = np.zeros(ctx.cluster.size, dtype=bool)
            for option in ctx.options:
                fits |= option.feasible
            rows = state.indices(names)
            ok = _take(fits, rows, False)
            passed = [name for name, good in zip(names, ok.tolist(), strict=True) if good]
            failed = {
                name: "node has too little free capacity for the pod" if row >= 0 else "node not in drlsched's cache"
                for name, row, good in zip(names, rows.tolist(), ok.tolist(), strict=True)
                if not good
            }
            return passed, failed

    def prioritize(
        self, state: ClusterState, pod: PodSpec, names: list[str]
    ) -> tuple[list[tuple[str, int]], str | None]:
        """Scores 0–10 for the named nodes, and the policy's choice. The choice gets 10 and, for scoring
        policies, the other feasible nodes 0–9 by their score: with a large enough extender weight
        kube-scheduler places the pod where the policy says, and still ranks the rest sensibly."""
        with self.lock, state.lock:
            ctx = self._context(state, pod, names)
            decision = decide(self.policy, ctx)
            scores = np.zeros(ctx.cluster.size, dtype=np.int64)
            if decision is not None:
                option = next(o for o in ctx.options if o.gpus == decision.gpus)
                nodes = np.flatnonzero(option.feasible)
                if isinstance(self.policy, ScoringPolicy) and nodes.size > 1:
                    raw = np.nan_to_num(np.asarray(self.policy.score(ctx, option, nodes), dtype=np.float64))
                    span = float(raw.max() - raw.min())
                    if span > 0:
                        scores[nodes] = np.floor((raw - raw.min()) / span * (MAX_EXTENDER_PRIORITY - 1))
                scores[decision.node] = MAX_EXTENDER_PRIORITY
            rows = state.indices(names)
            result = list(zip(names, _take(scores, rows, 0).tolist(), strict=True))
            chosen = ctx.cluster.names[decision.node] if decision is not None else None
            return result, chosen

    def choose(self, state: ClusterState, pod: PodSpec, names: list[str] | None = None) -> Choice:
        """The second scheduler's decision over every node (or the named ones)."""
        with self.lock, state.lock:
            ctx = self._context(state, pod, names)
            size = ctx.cluster.size
            if size == 0:
                return Choice(None, pod.gpus, "0/0 nodes are available: no nodes available to schedule pods")
            if names is not None and not names:
                return Choice(None, pod.gpus,
                              f"0/{size} nodes are available: {size} node(s) didn't match Pod's node selector")
            decision = decide(self.policy, ctx)
            self.last_value = None
            if fits_somewhere(ctx):  # the policy was asked: its value estimate of what it saw
                estimate = getattr(self.policy, "predicted_value", None)
                self.last_value = float(estimate(ctx)) if callable(estimate) else None
            if decision is None:
                r = ctx.options[0].request
                why = ctx.cluster.infeasible_reason(r) if not ctx.cluster.fits_when_empty(r) else "no free capacity"
                return Choice(None, pod.gpus, f"0/{size} nodes are available: {why}")
            return Choice(ctx.cluster.names[decision.node], decision.gpus, "")


def _take(values: np.ndarray, rows: np.ndarray, default: object) -> np.ndarray:
    """values[rows], with `default` where a row is -1 (a node the cluster does not hold)."""
    out = np.full(rows.size, default, dtype=values.dtype)
    known = rows >= 0
    out[known] = values[rows[known]]
    return out
