"""One scheduling cycle's decision, as kube-scheduler's schedule_one: build the pod's context (Filter: where each
GPU-count option fits), then ask the policy (Score, Normalize, select) — unless the pod fits nowhere.

The simulator, the RL env, the extender's and the second scheduler's `Placer` and the fidelity check all build
contexts here, so every policy sees the same `PodContext` contract on every side.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

from drlsched.cluster import Cluster, PodRequest
from drlsched.fragmentation import TypicalPods
from drlsched.policies.base import Decision, Option, PodContext, Policy
from drlsched.workload import PodSpec


def gpu_options(spec: PodSpec) -> tuple[int, ...]:
    """The pod's GPU counts in the `PodContext` contract order: its default count first, then its other options."""
    if not spec.gpu_options:
        return (spec.gpus,)
    if spec.gpus not in spec.gpu_options:
        return spec.gpu_options
    return (spec.gpus, *(g for g in spec.gpu_options if g != spec.gpus))


def pod_context(spec: PodSpec, cluster: Cluster, now: float, *, job_nodes: Mapping[int, int] | None = None,
                typical: TypicalPods | None = None, mask: np.ndarray | None = None,
                default_request: PodRequest | None = None, policy: Policy | None = None,
                data_nodes: Callable[[], dict[int, int]] | None = None) -> PodContext:
    """The pod's options (request and feasible nodes per GPU count; `mask` restricts the candidates) and where its
    job runs. `data_nodes` (where the parent tasks' output lives) is called only if `policy` wants it and the pod
    has parents: counting them costs time on every DAG pod."""
    options = []
    for g in gpu_options(spec):
        r = default_request if default_request is not None and g == spec.gpus else cluster.request(spec, g)
        feasible = cluster.feasible(r)
        options.append(Option(g, r, feasible if mask is None else feasible & mask))
    ctx = PodContext(spec, options, cluster, now, job_nodes if job_nodes is not None else {}, typical)
    if data_nodes is not None and spec.parents and policy is not None and policy.wants_data_nodes:
        ctx.data_nodes = data_nodes()
    return ctx


def fits_somewhere(ctx: PodContext, max_options: int | None = None) -> bool:
    """Whether some node can take the pod now under some option (of the first `max_options`). A pod that fits
    nowhere is not shown to the policy: none could place it, and a learned policy would record a state its
    training never sees."""
    return any(o.feasible.any() for o in ctx.options[:max_options])


def decide(policy: Policy, ctx: PodContext) -> Decision | None:
    """The policy's choice for the pod, or None (leave it pending) without asking when it fits nowhere."""
    return policy.select(ctx) if fits_somewhere(ctx) else None


def hint_request(spec: PodSpec, cluster: Cluster, default_request: PodRequest) -> PodRequest:
    """The least demanding of the pod's options: if it fits no node, no option does (the queueing hint's row)."""
    if not spec.gpu_options:
        return default_request
    return cluster.request(spec, min(spec.gpu_options))
