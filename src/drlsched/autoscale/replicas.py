"""The HPA's replica calculator for a CPU utilisation target, as kube-controller-manager computes it
(kubernetes/kubernetes v1.36.3 `pkg/controller/podautoscaler/replica_calculator.go` `GetResourceReplicas`,
`groupPods`, and `metrics/utilization.go` `GetResourceUtilizationRatio`), with upstream's integer arithmetic:
requests and usage in millicores, utilisation an integer percentage (truncated), replicas a float ceiling.

    utilization  = Σ usage_m × 100 // Σ request_m        over the pods with a metric
    ratio        = utilization / target
    desired      = ⌈ratio × ready pods⌉                    unless 1 − tol_down ≤ ratio ≤ 1 + tol_up

Pods are set aside before the ratio is taken: deleted and failed pods are ignored; pending pods, and for CPU pods
not yet ready or whose newest sample predates their readiness (within the CPU initialisation period, 5 min), or
unready pods that never were ready (within the initial readiness delay, 30 s) are "unready"; pods without a
metric are "missing". If any are missing, or unready on a scale-up, the ratio is taken again with missing pods at
100% of their request (max(100, target)% upstream) on a scale-down and at 0% on a scale-up, unready pods at 0%
on a scale-up; no change if that reverses the direction, lands inside the tolerance, or would move the count the
other way.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

PENDING, RUNNING, FAILED = "Pending", "Running", "Failed"


class MetricsError(Exception):
    """No replica count can be computed from these metrics (upstream's FailedGetResourceMetric): the HPA holds."""


@dataclass(frozen=True)
class Pod:
    """A pod of the HPA's target as the controller's pod lister sees it (times in seconds on the caller's clock)."""

    name: str
    request_m: int | None  # CPU request in millicores (all containers); None: a container has none
    phase: str = RUNNING
    ready: bool | None = True  # the Ready condition's status; None: no Ready condition yet
    ready_since_s: float = 0.0  # the Ready condition's lastTransitionTime
    start_s: float | None = 0.0  # status.startTime; None: not started
    deleting: bool = False  # a deletion timestamp is set


@dataclass(frozen=True)
class PodMetric:
    """A pod's metrics.k8s.io sample: average usage over [timestamp − window, timestamp]."""

    value_m: int
    timestamp_s: float
    window_s: float


@dataclass(frozen=True)
class Tolerances:
    down: float = 0.1
    up: float = 0.1

    def within(self, ratio: float) -> bool:
        return 1.0 - self.down <= ratio <= 1.0 + self.up


@dataclass(frozen=True)
class ReplicaCount:
    replicas: int
    utilization: int  # the observed average utilisation, %, before missing / unready pods are filled in
    raw_value_m: int  # the observed average usage per pod, millicores


@dataclass(frozen=True)
class PodGroups:
    ready: int
    unready: frozenset[str]
    missing: frozenset[str]
    ignored: frozenset[str]


def group_pods(pods: Sequence[Pod], metrics: Mapping[str, PodMetric], now_s: float, cpu_initialization_s: float,
               readiness_delay_s: float, cpu: bool = True) -> PodGroups:
    """upstream's `groupPods`."""
    ready = 0
    unready: set[str] = set()
    missing: set[str] = set()
    ignored: set[str] = set()
    for pod in pods:
        if pod.deleting or pod.phase == FAILED:
            ignored.add(pod.name)
            continue
        if pod.phase == PENDING:
            unready.add(pod.name)
            continue
        metric = metrics.get(pod.name)
        if metric is None:
            missing.add(pod.name)
            continue
        if cpu:
            if pod.ready is None or pod.start_s is None:
                is_unready = True
            elif pod.start_s + cpu_initialization_s > now_s:
                # Within the initialisation period: the sample must cover only time after the pod became ready.
                is_unready = pod.ready is False or metric.timestamp_s < pod.ready_since_s + metric.window_s
            else:
                # Unready and never ready since it started (the transition came within the readiness delay).
                is_unready = pod.ready is False and pod.start_s + readiness_delay_s > pod.ready_since_s
            if is_unready:
                unready.add(pod.name)
                continue
        ready += 1
    return PodGroups(ready, frozenset(unready), frozenset(missing), frozenset(ignored))


def utilization_ratio(values: Mapping[str, int], requests: Mapping[str, int], target: int) -> tuple[float, int, int]:
    """upstream's `GetResourceUtilizationRatio`: (ratio to target, utilisation %, average raw value per pod).
    Metrics of pods that have no request (unknown pods) are skipped."""
    total = request_total = entries = 0
    for name, value in values.items():
        request = requests.get(name)
        if request is None:
            continue
        total += value
        request_total += request
        entries += 1
    if request_total == 0:
        raise MetricsError("no metrics returned matched known pods")
    utilization = total * 100 // request_total
    return utilization / target, utilization, total // entries


def resource_replicas(current: int, target_utilization: int, pods: Sequence[Pod], metrics: Mapping[str, PodMetric],
                      now_s: float, tolerances: Tolerances = Tolerances(), cpu_initialization_s: float = 300.0,
                      readiness_delay_s: float = 30.0, cpu: bool = True) -> ReplicaCount:
    """upstream's `GetResourceReplicas` for a Utilization target of `target_utilization` % (current = the scale's
    spec.replicas). Raises MetricsError where upstream returns an error (the HPA then does not scale)."""
    if not metrics:
        raise MetricsError("unable to get metrics for resource cpu: no metrics returned from resource metrics API")
    if not pods:
        raise MetricsError("no pods returned by selector while calculating replica count")
    groups = group_pods(pods, metrics, now_s, cpu_initialization_s, readiness_delay_s, cpu)
    values = {name: m.value_m for name, m in metrics.items() if name not in groups.ignored | groups.unready}
    if not values:
        raise MetricsError("did not receive metrics for targeted pods (pods might be unready)")
    requests: dict[str, int] = {}
    for pod in pods:
        if pod.request_m is None:
            raise MetricsError(f"missing request for cpu in Pod {pod.name}")
        requests[pod.name] = pod.request_m
    ratio, utilization, raw = utilization_ratio(values, requests, target_utilization)

    up_with_unready = bool(groups.unready) and ratio > 1.0
    if not up_with_unready and not groups.missing:
        if tolerances.within(ratio):
            return ReplicaCount(current, utilization, raw)
        return ReplicaCount(math.ceil(ratio * groups.ready), utilization, raw)

    if groups.missing:
        if ratio < 1.0:
            fallback = max(100, target_utilization)
            values.update({name: requests[name] * fallback // 100 for name in groups.missing})
        elif ratio > 1.0:
            values.update(dict.fromkeys(groups.missing, 0))
    if up_with_unready:
        values.update(dict.fromkeys(groups.unready, 0))
    new_ratio, _, _ = utilization_ratio(values, requests, target_utilization)
    if tolerances.within(new_ratio) or (ratio < 1.0 < new_ratio) or (ratio > 1.0 > new_ratio):
        return ReplicaCount(current, utilization, raw)
    replicas = math.ceil(new_ratio * len(values))
    if (new_ratio < 1.0 and replicas > current) or (new_ratio > 1.0 and replicas < current):
        return ReplicaCount(current, utilization, raw)
    return ReplicaCount(replicas, utilization, raw)
