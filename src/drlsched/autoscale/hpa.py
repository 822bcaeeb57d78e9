"""Kubernetes' HorizontalPodAutoscaler controller for one HPA with a CPU Utilization target, with time passed in
(kubernetes/kubernetes v1.36.3 `pkg/controller/podautoscaler/horizontal.go`: `reconcileAutoscaler`,
`normalizeDesiredReplicas[WithBehaviors]`, `stabilizeRecommendation[WithBehaviors]`,
`convertDesiredReplicasWith{Rules,BehaviorRate}`, `storeScaleEvent`; defaults from `pkg/apis/autoscaling/v2`).

Two paths, as upstream:
- `behavior=None`, an HPA without `spec.behavior` (what `kubectl autoscale` and a bare manifest create): the
  highest recommendation of the last `--horizontal-pod-autoscaler-downscale-stabilization` (300 s) wins, and one
  sync may scale up to max(2 × current, 4) replicas.
- a `Behavior` (`Behavior()` = the documented defaults: up by max(4 pods, 100%) per 15 s with no window, down by
  100% per 15 s with the 300 s window, selectPolicy Max): stabilisation windows per direction, and rate limits from
  the scale events of each policy's period.
The controller syncs every `sync_period_s` (15 s). A target at 0 replicas is left alone (scaling disabled), one
outside [min, max] is moved to the nearest bound without reading metrics, and metrics that yield no count hold it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from drlsched.autoscale.replicas import MetricsError, Pod, PodMetric, Tolerances, resource_replicas
from drlsched.errors import UserError

PODS, PERCENT = "Pods", "Percent"
MAX, MIN, DISABLED = "Max", "Min", "Disabled"
_INT32_MAX, _INT32_MIN = 2**31 - 1, -(2**31)


@dataclass(frozen=True)
class Policy:
    kind: str  # Pods or Percent
    value: int
    period_s: int


@dataclass(frozen=True)
class Rules:
    """One direction of `spec.behavior`. `stabilization_s=None` (scale-down only) takes the controller's window."""

    policies: tuple[Policy, ...]
    stabilization_s: int | None
    select: str = MAX
    tolerance: float | None = None  # HPAConfigurableTolerance (beta, on by default since 1.35)


DEFAULT_SCALE_UP = Rules((Policy(PODS, 4, 15), Policy(PERCENT, 100, 15)), 0)
DEFAULT_SCALE_DOWN = Rules((Policy(PERCENT, 100, 15),), None)


@dataclass(frozen=True)
class Behavior:
    scale_up: Rules = DEFAULT_SCALE_UP
    scale_down: Rules = DEFAULT_SCALE_DOWN


@dataclass(frozen=True)
class HPAConfig:
    """An HPA on the CPU utilisation of its pods, and the kube-controller-manager flags that shape it."""

    max_replicas: int
    min_replicas: int = 1
    target_utilization: int = 80  # % of the CPU request; upstream's default metric
    behavior: Behavior | None = None
    sync_period_s: float = 15.0  # --horizontal-pod-autoscaler-sync-period
    tolerance: float = 0.1  # --horizontal-pod-autoscaler-tolerance
    downscale_stabilization_s: float = 300.0  # --horizontal-pod-autoscaler-downscale-stabilization
    cpu_initialization_s: float = 300.0  # --horizontal-pod-autoscaler-cpu-initialization-period
    initial_readiness_delay_s: float = 30.0  # --horizontal-pod-autoscaler-initial-readiness-delay

    def validate(self) -> None:
        if self.min_replicas < 1:
            raise UserError(f"HPA min replicas must be at least 1, got {self.min_replicas}")
        if self.max_replicas < self.min_replicas:
            raise UserError(f"HPA min replicas {self.min_replicas} above max replicas {self.max_replicas}")
        if self.target_utilization < 1:
            raise UserError(f"HPA target utilisation must be a positive percentage, got {self.target_utilization}")
        if not (self.sync_period_s > 0 and self.tolerance >= 0):
            raise UserError("HPA sync period must be positive and tolerance non-negative")


@dataclass(frozen=True)
class Decision:
    """One sync's outcome: the replicas to set (`desired`, the current count when `rescale` is false)."""

    desired: int
    rescale: bool
    reason: str  # upstream's rescale reason, or why nothing changed
    utilization: int | None = None  # observed average utilisation, % (None: not read)
    error: str | None = None  # metrics gave no count: the HPA held the current count


@dataclass
class _Event:
    change: int
    at_s: float
    outdated: bool = False


@dataclass
class HorizontalPodAutoscaler:
    config: HPAConfig
    next_sync_s: float = 0.0
    recommendations: list[tuple[int, float]] = field(default_factory=list)  # (recommendation, time)
    up_events: list[_Event] = field(default_factory=list)
    down_events: list[_Event] = field(default_factory=list)
    last_scale_s: float | None = None

    def __post_init__(self) -> None:
        self.config.validate()

    def due(self, now_s: float) -> bool:
        return now_s >= self.next_sync_s

    def reconcile(self, now_s: float, current: int, pods: Sequence[Pod], metrics: Mapping[str, PodMetric]) -> Decision:
        """One sync at `now_s`: `current` is the target's spec.replicas, `pods` its pods, `metrics` their newest
        metrics.k8s.io samples. The caller sets the returned count (upstream updates the scale subresource).
        Every step of a sync happens at `now_s`, so the first sync's initial recommendation still counts in a zero
        stabilisation window (upstream's clock moves on by microseconds between the two)."""
        cfg = self.config
        self.next_sync_s = now_s + cfg.sync_period_s
        if not self.recommendations:
            self.recommendations.append((current, now_s))
        if current == 0:
            return Decision(0, False, "ScalingDisabled")
        if current > cfg.max_replicas:
            return self._rescale(now_s, current, cfg.max_replicas, "Current number of replicas above Spec.MaxReplicas")
        if current < cfg.min_replicas:
            return self._rescale(now_s, current, cfg.min_replicas, "Current number of replicas below Spec.MinReplicas")
        try:
            count = resource_replicas(current, cfg.target_utilization, pods, metrics, now_s, self._tolerances(),
                                      cfg.cpu_initialization_s, cfg.initial_readiness_delay_s)
        except MetricsError as err:
            return Decision(current, False, "FailedComputeMetricsReplicas", error=str(err))
        metric_desired = count.replicas
        reason = ""
        if metric_desired > current:
            reason = "cpu resource utilization (percentage of request) above target"
        elif metric_desired < current:
            reason = "All metrics below target"
        if cfg.behavior is None:
            desired = self._normalize(now_s, current, metric_desired)
        else:
            desired = self._normalize_with_behavior(now_s, current, metric_desired, cfg.behavior)
        if desired == current:
            return Decision(current, False, "ReadyForNewScale", count.utilization)
        return self._rescale(now_s, current, desired, reason, count.utilization)

    def _rescale(self, now_s: float, current: int, desired: int, reason: str,
                 utilization: int | None = None) -> Decision:
        self._store_event(now_s, current, desired)
        self.last_scale_s = now_s
        return Decision(desired, True, reason, utilization)

    def _tolerances(self) -> Tolerances:
        b, t = self.config.behavior, self.config.tolerance
        if b is None:
            return Tolerances(t, t)
        return Tolerances(t if b.scale_down.tolerance is None else b.scale_down.tolerance,
                          t if b.scale_up.tolerance is None else b.scale_up.tolerance)

    # --- without spec.behavior ---------------------------------------------------------------------------

    def stabilize(self, now_s: float, desired: int) -> int:
        """upstream's `stabilizeRecommendation`: the highest recommendation of the downscale window; the newest
        replaces one that fell out of it (else it is appended)."""
        cutoff = now_s - self.config.downscale_stabilization_s
        highest, old = desired, None
        for i, (rec, at) in enumerate(self.recommendations):
            if at < cutoff:
                old = i
            elif rec > highest:
                highest = rec
        self._record(old, desired, now_s)
        return highest

    def _normalize(self, now_s: float, current: int, desired: int) -> int:
        stabilized = self.stabilize(now_s, desired)
        return convert_with_rules(current, stabilized, self.config.min_replicas, self.config.max_replicas)[0]

    # --- with spec.behavior ------------------------------------------------------------------------------

    def stabilize_with_behavior(self, now_s: float, current: int, desired: int, behavior: Behavior) -> int:
        """upstream's `stabilizeRecommendationWithBehaviors`: clamp the current count between the lowest
        recommendation of the scale-up window and the highest of the scale-down window."""
        up_cutoff = now_s - (behavior.scale_up.stabilization_s or 0)
        down_cutoff = now_s - self._down_window(behavior)
        up_rec = down_rec = desired
        old = None
        for i, (rec, at) in enumerate(self.recommendations):
            if at > up_cutoff:
                up_rec = min(rec, up_rec)
            if at > down_cutoff:
                down_rec = max(rec, down_rec)
            if at < up_cutoff and at < down_cutoff:
                old = i
        self._record(old, desired, now_s)
        return min(max(current, up_rec), down_rec)

    def _down_window(self, behavior: Behavior) -> float:
        window = behavior.scale_down.stabilization_s
        return self.config.downscale_stabilization_s if window is None else float(window)

    def _normalize_with_behavior(self, now_s: float, current: int, desired: int, behavior: Behavior) -> int:
        stabilized = self.stabilize_with_behavior(now_s, current, desired, behavior)
        return self.convert_with_behavior_rate(now_s, current, stabilized, behavior)[0]

    def convert_with_behavior_rate(self, now_s: float, current: int, desired: int,
                                   behavior: Behavior) -> tuple[int, str]:
        """upstream's `convertDesiredReplicasWithBehaviorRate`: (replicas, limiting condition)."""
        cfg = self.config
        if desired > current:
            limit = max(current, scale_up_limit(now_s, current, self.up_events, self.down_events, behavior.scale_up))
            if cfg.max_replicas > limit:
                allowed, reason = limit, "ScaleUpLimit"
            else:
                allowed, reason = cfg.max_replicas, "TooManyReplicas"
            if desired > allowed:
                return allowed, reason
        elif desired < current:
            limit = min(current, scale_down_limit(now_s, current, self.up_events, self.down_events,
                                                  behavior.scale_down))
            if cfg.min_replicas < limit:
                allowed, reason = limit, "ScaleDownLimit"
            else:
                allowed, reason = cfg.min_replicas, "TooFewReplicas"
            if desired < allowed:
                return allowed, reason
        return desired, "DesiredWithinRange"

    def _store_event(self, now_s: float, previous: int, new: int) -> None:
        """upstream's `storeScaleEvent` (only an HPA with a behavior keeps events): outdated events (older than the
        longest policy period) are marked, the newest reuses the last of them."""
        behavior = self.config.behavior
        if behavior is None:
            return
        rules, events = ((behavior.scale_up, self.up_events) if new > previous
                         else (behavior.scale_down, self.down_events))
        cutoff = now_s - max((p.period_s for p in rules.policies), default=0)
        old = None
        for i, event in enumerate(events):
            if event.at_s < cutoff:
                event.outdated = True
            if event.outdated:
                old = i
        event = _Event(abs(new - previous), now_s)
        if old is None:
            events.append(event)
        else:
            events[old] = event

    def _record(self, old: int | None, desired: int, now_s: float) -> None:
        if old is None:
            self.recommendations.append((desired, now_s))
        else:
            self.recommendations[old] = (desired, now_s)


def convert_with_rules(current: int, desired: int, min_replicas: int, max_replicas: int) -> tuple[int, str]:
    """upstream's `convertDesiredReplicasWithRules` (no behavior): within [min, min(max, max(2 × current, 4))]."""
    up_limit = int(max(2.0 * current, 4.0))
    if max_replicas > up_limit:
        allowed, reason = up_limit, "ScaleUpLimit"
    else:
        allowed, reason = max_replicas, "TooManyReplicas"
    if desired < min_replicas:
        return min_replicas, "TooFewReplicas"
    if desired > allowed:
        return allowed, reason
    return desired, "DesiredWithinRange"


def change_in_period(now_s: float, period_s: int, events: Sequence[_Event]) -> int:
    """upstream's `getReplicasChangePerPeriod`: replicas changed by the events after now − period."""
    return sum(e.change for e in events if e.at_s > now_s - period_s)


def scale_up_limit(now_s: float, current: int, up: Sequence[_Event], down: Sequence[_Event], rules: Rules) -> int:
    """upstream's `calculateScaleUpLimitWithScalingRules`: the most replicas the policies allow now."""
    return _policy_limit(now_s, current, up, down, rules, growing=True)


def scale_down_limit(now_s: float, current: int, up: Sequence[_Event], down: Sequence[_Event], rules: Rules) -> int:
    """upstream's `calculateScaleDownLimitWithBehaviors`: the fewest replicas the policies allow now."""
    return _policy_limit(now_s, current, up, down, rules, growing=False)


def _policy_limit(now_s: float, current: int, up: Sequence[_Event], down: Sequence[_Event], rules: Rules,
                  growing: bool) -> int:
    if rules.select == DISABLED:
        return current
    # selectPolicy Max takes the policy that allows the largest change: the highest limit up, the lowest down.
    pick = max if (rules.select != MIN) == growing else min
    result = _INT32_MIN if pick is max else _INT32_MAX
    for policy in rules.policies:
        start = current - change_in_period(now_s, policy.period_s, up) + change_in_period(now_s, policy.period_s, down)
        if policy.kind == PODS:
            proposed = start + policy.value if growing else start - policy.value
        elif growing:
            # Rounded up: a percentage of a small count must still allow one more replica.
            proposed = math.ceil(start * (1 + policy.value / 100))
        else:
            proposed = int(start * (1 - policy.value / 100))  # truncated, as Go's int32() conversion
        result = pick(result, proposed)
    return result
