"""The HPA controller emulation against the upstream documentation's worked examples (kubernetes/website
`content/en/docs/concepts/workloads/autoscaling/horizontal-pod-autoscale.md`) and kubernetes/kubernetes v1.36.3
`pkg/controller/podautoscaler/horizontal_test.go` (each test names what it mirrors)."""

from __future__ import annotations

import pytest

from drlsched.autoscale.hpa import (
    DEFAULT_SCALE_DOWN,
    MIN,
    PERCENT,
    PODS,
    Behavior,
    HorizontalPodAutoscaler,
    HPAConfig,
    Policy,
    Rules,
    _Event,
    change_in_period,
    convert_with_rules,
    scale_down_limit,
    scale_up_limit,
)
from drlsched.autoscale.metrics_server import MetricsServer
from drlsched.autoscale.replicas import Pod, PodMetric
from drlsched.errors import UserError

NOW = 1_000_000.0


def pods_at(usage_m: list[int], request_m: int = 1000) -> tuple[list[Pod], dict[str, PodMetric]]:
    """Ready pods started long ago, each with a fresh sample."""
    pods = [Pod(f"p{i}", request_m) for i in range(len(usage_m))]
    return pods, {p.name: PodMetric(u, NOW - 5.0, 15.0) for p, u in zip(pods, usage_m, strict=True)}


def sync(hpa: HorizontalPodAutoscaler, now: float, current: int, usage_m: int, request_m: int = 1000) -> int:
    pods, metrics = pods_at([usage_m] * current, request_m)
    return hpa.reconcile(now, current, pods, metrics).desired


def rules(pods: int, pods_period: int, percent: int, percent_period: int, window: int) -> Rules:
    """upstream's `generateScalingRules` (selectPolicy Max; a zero value leaves the policy out)."""
    policies = ()
    if pods:
        policies += (Policy(PODS, pods, pods_period),)
    if percent:
        policies += (Policy(PERCENT, percent, percent_period),)
    return Rules(policies, window)


def uniform_events(changes: list[int], period: int) -> list[_Event]:
    """upstream's `generateEventsUniformDistribution`: events centred in equal segments of the last `period` s."""
    segment = period / len(changes)
    return [_Event(c, NOW - (period - segment * (i + 1) + segment / 2)) for i, c in enumerate(changes)]


# --- the documentation's worked examples ---------------------------------------------------------------------

def test_docs_ratio_doubles_and_halves() -> None:
    """"if the current metric value is 200m, and the desired value is 100m, the number of replicas will be doubled
    ... If the current value is instead 50m, you'll halve the number of replicas"."""
    up = HorizontalPodAutoscaler(HPAConfig(max_replicas=100, target_utilization=10))
    assert sync(up, NOW, 4, 200) == 8
    down = HorizontalPodAutoscaler(HPAConfig(max_replicas=100, target_utilization=10, downscale_stabilization_s=0))
    assert sync(down, NOW - 15, 4, 100) == 4
    assert sync(down, NOW, 4, 50) == 2


def test_docs_tolerance_skips_small_changes() -> None:
    """"The control plane skips any scaling action if the ratio is sufficiently close to 1.0 (within a configurable
    tolerance, 0.1 by default)"."""
    hpa = HorizontalPodAutoscaler(HPAConfig(max_replicas=100, target_utilization=50, downscale_stabilization_s=0))
    assert sync(hpa, NOW, 10, 550) == 10  # ratio 1.10
    assert sync(hpa, NOW + 15, 10, 450) == 10  # ratio 0.90
    assert sync(hpa, NOW + 30, 10, 560) == 12  # ratio 1.12


def test_docs_scale_down_policies_example() -> None:
    """"if there are 80 replicas and the target has to be scaled down to 10 replicas then during the first step 8
    replicas will be reduced. In the next iteration when the number of replicas is 72, 10% of the pods is 7.2 but
    the number is rounded up to 8 ... When the number of replicas falls below 40 the first policy (Pods) is applied
    and 4 replicas will be reduced at a time" (Pods 4 / Percent 10 per 60 s, selectPolicy Max; no window, so that
    each minute's step shows)."""
    down = Rules((Policy(PODS, 4, 60), Policy(PERCENT, 10, 60)), 0)
    hpa = HorizontalPodAutoscaler(HPAConfig(max_replicas=100, min_replicas=10, target_utilization=50,
                                            behavior=Behavior(scale_down=down)))
    current, seen = 80, [80]
    for step in range(60):  # 15 min of 15 s syncs at 5% utilisation (desired 8, held at min 10)
        current = sync(hpa, NOW + 15 * step, current, 50)
        if current != seen[-1]:
            seen.append(current)
    assert seen == [80, 72, 64, 57, 51, 45, 40, 36, 32, 28, 24, 20, 16, 12, 10]


def test_docs_default_behavior_scale_up_rate() -> None:
    """Default behavior: "4 pods or a 100% of the currently running replicas may at most be added every 15 seconds";
    an HPA without a behavior has upstream's older cap, max(2 × current, 4) per sync."""
    with_behavior = HorizontalPodAutoscaler(HPAConfig(max_replicas=1000, target_utilization=10, behavior=Behavior()))
    without = HorizontalPodAutoscaler(HPAConfig(max_replicas=1000, target_utilization=10))
    got_with, got_without = [1], [1]
    for step in range(5):
        got_with.append(sync(with_behavior, NOW + 15 * step, got_with[-1], 1000))
        got_without.append(sync(without, NOW + 15 * step, got_without[-1], 1000))
    assert got_with == [1, 5, 10, 20, 40, 80]
    assert got_without == [1, 4, 8, 16, 32, 64]


def test_docs_stabilization_window_takes_the_highest_recent_recommendation() -> None:
    """"all desired states from the past 5 minutes will be considered" (the default 300 s scale-down window)."""
    hpa = HorizontalPodAutoscaler(HPAConfig(max_replicas=100, target_utilization=50))
    assert sync(hpa, NOW, 10, 500) == 10  # recommendation 10
    t = NOW
    while t < NOW + 300:
        t += 15
        assert sync(hpa, t, 10, 100) == 10  # desired 2, held by the window
    assert sync(hpa, t + 15, 10, 100) == 2


# --- horizontal_test.go ----------------------------------------------------------------------------------------

def test_convert_desired_replicas_with_rules() -> None:
    """TestConvertDesiredReplicasWithRules."""
    assert convert_with_rules(5, 7, 3, 8) == (7, "DesiredWithinRange")
    assert convert_with_rules(3, 1, 2, 8) == (2, "TooFewReplicas")
    assert convert_with_rules(1, 0, 0, 10) == (0, "DesiredWithinRange")
    assert convert_with_rules(20, 1000, 1, 10) == (10, "TooManyReplicas")
    assert convert_with_rules(3, 1000, 1, 2000) == (6, "ScaleUpLimit")


def test_limits_with_min_select_policy() -> None:
    """TestCalculateScaleUpLimitWithScalingRules, TestCalculateScaleDownLimitWithBehaviors."""
    r = Rules((Policy(PODS, 2, 60), Policy(PERCENT, 50, 60)), 300, select=MIN)
    assert scale_up_limit(NOW, 1, [], [], r) == 2
    assert scale_down_limit(NOW, 5, [], [], r) == 3


# TestScalingWithRules: (name, up events, down events, min, max, up rules, down rules, current, desired, expected,
# condition). Rules of None are the defaults (`GenerateHPAScale{Up,Down}Rules(nil)`).
SCALING = [
    ("prenormalized desired replicas within range", [], [], 3, 8, None, None, 5, 7, 7, "DesiredWithinRange"),
    ("prenormalized desired replicas < minReplicas", [], [], 2, 8, None, None, 3, 1, 2, "TooFewReplicas"),
    ("maxReplicas is the limit because maxReplicas < scaleUpLimit", [], [], 1, 10, None, None, 20, 1000, 10,
     "TooManyReplicas"),
    ("desired replica count is more than the maximum replica count", [], [], 100, 150, None, None, 100, 1000, 150,
     "TooManyReplicas"),
    ("scaleUpLimit is the limit because scaleUpLimit < maxReplicas with user policies", [], [], 1, 2000,
     rules(0, 0, 1, 60, 0), None, 3, 1000, 4, "ScaleUpLimit"),
    ("scaleUp with default behavior", [], [], 1, 1000, None, None, 10, 50, 20, "ScaleUpLimit"),
    ("scaleUp with pods policy larger than percent policy", [], [], 1, 1000, rules(100, 60, 100, 60, 0), None,
     10, 500, 110, "ScaleUpLimit"),
    ("scaleUp with percent policy larger than pods policy", [], [], 1, 1000, rules(2, 60, 100, 60, 0), None,
     10, 500, 20, "ScaleUpLimit"),
    ("scaleUp with pod policy limitation", [], [], 1, 1000, rules(30, 60, 0, 0, 0), None, 10, 50, 40,
     "ScaleUpLimit"),
    ("scaleUp with percent policy limitation", [], [], 1, 1000, rules(0, 0, 200, 60, 0), None, 10, 50, 30,
     "ScaleUpLimit"),
    ("scaleDown with percent policy larger than pod policy", [], [], 1, 1000, None, rules(20, 60, 1, 60, 300),
     100, 2, 80, "ScaleDownLimit"),
    ("scaleDown with pod policy larger than percent policy", [], [], 1, 1000, None, rules(2, 60, 1, 60, 300),
     100, 2, 98, "ScaleDownLimit"),
    ("scaleDown with spec MinReplicas limitation with large percent policy", [], [], 5, 1000, None,
     rules(0, 0, 100, 60, 300), 10, 2, 5, "TooFewReplicas"),
    ("scaleDown with pod policy limitation", [], [], 1, 1000, None, rules(5, 60, 0, 0, 300), 10, 2, 5,
     "ScaleDownLimit"),
    ("scaleDown with percent policy limitation", [], [], 1, 1000, None, rules(0, 0, 50, 60, 300), 10, 5, 5,
     "DesiredWithinRange"),
    ("scaleUp with spec MaxReplicas limitation with large pod policy and events", [1, 5, 9], [], 1, 200,
     rules(300, 60, 0, 0, 0), None, 100, 500, 200, "TooManyReplicas"),
    ("scaleUp with currentReplicas limitation with rate.PeriodSeconds with a lot of recent scale up events",
     [1, 5, 9], [], 1, 1000, rules(5, 120, 0, 0, 0), None, 100, 500, 100, "ScaleUpLimit"),
    ("scaleUp with pod policy and previous scale up events", [1, 5, 9], [], 1, 1000, rules(150, 120, 0, 0, 0), None,
     100, 500, 235, "ScaleUpLimit"),
    ("scaleUp with percent policy and previous scale up events", [1, 5, 9], [], 1, 1000, rules(0, 0, 200, 120, 0),
     None, 100, 500, 255, "ScaleUpLimit"),
    ("scaleUp with percent policy and previous scale up and down events", [4], [2], 1, 1000,
     rules(0, 0, 300, 300, 0), None, 6, 24, 16, "ScaleUpLimit"),
    ("scaleDown with default policy and previous events", [], [1, 5, 9], 1, 1000, None, None, 10, 5, 5,
     "DesiredWithinRange"),
    ("scaleDown with pod policy limitation and previous events", [], [1, 5, 9], 1, 1000, None,
     rules(5, 120, 0, 0, 300), 100, 2, 100, "ScaleDownLimit"),
    ("scaleDown with percent policy limitation and previous events", [], [2, 4, 6], 1, 1000, None,
     rules(0, 0, 50, 120, 300), 100, 0, 56, "ScaleDownLimit"),
    ("scaleDown with percent policy and previous scale up and down events", [2], [4], 1, 1000, None,
     rules(0, 0, 50, 180, 0), 10, 1, 6, "ScaleDownLimit"),
    ("scaleDown with previous events preventing further scale down", [], [10, 10, 10], 1, 1000, None,
     rules(0, 0, 10, 120, 300), 100, 0, 100, "ScaleDownLimit"),
    ("scaleDown with with previous events still allowing more scale down", [], [10, 10, 10], 1, 1000, None,
     rules(0, 0, 1000, 120, 300), 10, 5, 5, "DesiredWithinRange"),
    ("check 'outdated' flag for events for one behavior for up", [8, 12, 9, 11], [], 1, 1000,
     rules(1000, 60, 0, 0, 0), None, 100, 200, 200, "DesiredWithinRange"),
]


@pytest.mark.parametrize(("name", "up_events", "down_events", "lo", "hi", "up", "down", "current", "desired",
                          "expected", "condition"), SCALING, ids=[s[0] for s in SCALING])
def test_scaling_with_rules(name: str, up_events: list[int], down_events: list[int], lo: int, hi: int,
                            up: Rules | None, down: Rules | None, current: int, desired: int, expected: int,
                            condition: str) -> None:
    behavior = Behavior(scale_up=up or Behavior().scale_up, scale_down=down or DEFAULT_SCALE_DOWN)
    hpa = HorizontalPodAutoscaler(HPAConfig(max_replicas=hi, min_replicas=lo, behavior=behavior))
    hpa.up_events = uniform_events(up_events, 120) if up_events else []
    hpa.down_events = uniform_events(down_events, 120) if down_events else []
    assert hpa.convert_with_behavior_rate(NOW, current, desired, behavior) == (expected, condition)


def test_normalize_desired_replicas_without_behavior() -> None:
    """TestNormalizeDesiredReplicas: the highest recommendation of the last 5 min, and the log it leaves."""
    cases = [
        ([], 5, 5, 1),
        ([(4, -120), (5, -60)], 3, 5, 3),
        ([(1, -120), (2, -60)], 3, 3, 3),
        ([(10, -600), (9, -540)], 3, 3, 2),
        ([(10, -600), (4, -60), (5, -120), (9, -540)], 3, 5, 4),
    ]
    for recs, desired, stabilized, log in cases:
        hpa = HorizontalPodAutoscaler(HPAConfig(max_replicas=10))
        hpa.recommendations = [(r, NOW + dt) for r, dt in recs]
        assert hpa.stabilize(NOW, desired) == stabilized
        assert len(hpa.recommendations) == log


def test_normalize_desired_replicas_with_behavior() -> None:
    """TestNormalizeDesiredReplicasWithBehavior: (recommendations, current, desired, up window, down window,
    expected, stored recommendations)."""
    cases = [
        ([], 100, 5, 0, 0, 5, [5]),
        ([(4, -120), (5, -60)], 100, 3, 0, 180, 5, [4, 5, 3]),
        ([(4, -120), (5, -60)], 1, 7, 300, 0, 4, [4, 5, 7]),
        ([(1, -120), (2, -60)], 100, 3, 300, 0, 3, [1, 2, 3]),
        ([(4, -120), (5, -60)], 1, 3, 0, 300, 3, [4, 5, 3]),
        ([(10, -600), (9, -540)], 100, 3, 0, 0, 3, [10, 3]),
        ([(10, -600), (9, -540)], 1, 100, 0, 0, 100, [10, 100]),
        ([(10, -600), (4, -60), (5, -120), (9, -540)], 100, 3, 0, 180, 5, [10, 4, 5, 3]),
        ([(10, -6000), (6, -60), (5, -120), (9, -180)], 1, 100, 300, 0, 5, [100, 6, 5, 9]),
        ([(2, -6000), (3, -180)], 2, 1, 300, 300, 2, None),
        ([(2, -6000), (1, -180)], 2, 3, 300, 300, 2, None),
    ]
    for recs, current, desired, up_w, down_w, expected, stored in cases:
        behavior = Behavior(Rules((), up_w), Rules((), down_w))
        hpa = HorizontalPodAutoscaler(HPAConfig(max_replicas=1000, behavior=behavior))
        hpa.recommendations = [(r, NOW + dt) for r, dt in recs]
        assert hpa.stabilize_with_behavior(NOW, current, desired, behavior) == expected
        if stored is not None:
            assert [r for r, _ in hpa.recommendations] == stored


def test_store_scale_events() -> None:
    """TestStoreScaleEvents ("replace one entry, use policies with different periods"): events older than the
    longest period are marked outdated and the newest reuses the last of them."""
    behavior = Behavior(scale_up=rules(10, 60, 100, 30, 0))
    hpa = HorizontalPodAutoscaler(HPAConfig(max_replicas=100, behavior=behavior))
    hpa.up_events = [_Event(8, NOW - 29), _Event(6, NOW - 59), _Event(7, NOW - 61), _Event(9, NOW - 61)]
    assert change_in_period(NOW, 60, hpa.up_events) == 14
    hpa._store_event(NOW, 10, 15)
    assert [(e.change, e.outdated) for e in hpa.up_events] == [(8, False), (6, False), (7, True), (5, False)]
    no_behavior = HorizontalPodAutoscaler(HPAConfig(max_replicas=100))
    no_behavior._store_event(NOW, 10, 15)
    assert no_behavior.up_events == []


def test_reconcile_cases() -> None:
    """TestUpscaleCap, TestUpscaleCapGreaterThanMaxReplicas, TestScaleDownStabilizeInitialSize,
    TestStabilizeDownscale, TestScaleUpRCImmediately, TestScaleDownRCImmediately."""
    cap = Behavior(scale_up=rules(0, 0, 700, 60, 0))
    pods, metrics = pods_at([100, 200, 300], 100)
    for max_replicas, expected in ((100, 24), (20, 20)):
        hpa = HorizontalPodAutoscaler(HPAConfig(max_replicas=max_replicas, target_utilization=10, behavior=cap))
        assert hpa.reconcile(NOW, 3, pods, metrics).desired == expected

    pods, metrics = pods_at([100, 300, 500, 250, 250])
    hpa = HorizontalPodAutoscaler(HPAConfig(max_replicas=6, min_replicas=2, target_utilization=50))
    assert hpa.reconcile(NOW, 5, pods, metrics).desired == 5  # the initial recommendation holds it

    pods, metrics = pods_at([50, 50, 50], 100)
    hpa = HorizontalPodAutoscaler(HPAConfig(max_replicas=5, target_utilization=100))
    hpa.recommendations = [(10, NOW - 600), (4, NOW - 60)]
    assert hpa.reconcile(NOW, 4, pods, metrics).desired == 4

    hpa = HorizontalPodAutoscaler(HPAConfig(max_replicas=6, min_replicas=2))
    decision = hpa.reconcile(NOW, 1, *pods_at([0, 0, 0, 0]))
    assert (decision.desired, decision.rescale, decision.utilization) == (2, True, None)
    hpa = HorizontalPodAutoscaler(HPAConfig(max_replicas=5, min_replicas=2, target_utilization=50))
    assert hpa.reconcile(NOW, 6, *pods_at([8000, 9500, 1000])).desired == 5


def test_missing_metrics_hold_the_count_and_zero_disables() -> None:
    hpa = HorizontalPodAutoscaler(HPAConfig(max_replicas=10))
    decision = hpa.reconcile(NOW, 3, [Pod("a", 1000)], {})
    assert (decision.desired, decision.rescale) == (3, False)
    assert decision.error is not None and "no metrics" in decision.error
    assert hpa.reconcile(NOW + 15, 0, [], {}).reason == "ScalingDisabled"


def test_sync_period_and_validation() -> None:
    hpa = HorizontalPodAutoscaler(HPAConfig(max_replicas=10))
    assert hpa.due(NOW)
    hpa.reconcile(NOW, 3, *pods_at([800] * 3))
    assert not hpa.due(NOW + 14.9) and hpa.due(NOW + 15)
    with pytest.raises(UserError, match="above max"):
        HorizontalPodAutoscaler(HPAConfig(max_replicas=2, min_replicas=3))


def test_metrics_server_rates_between_scrapes() -> None:
    """Usage is the counter's rate between the last two scrapes (upstream `resourceUsage`), in millicores rounded
    up; a container started 10 s to one resolution before a scrape gets a zero point at its start."""
    ms = MetricsServer(resolution_s=15.0)
    ms.scrape(100.0, {"old": (0.0, 10.0), "new": (95.0, 0.0)})
    assert ms.pod_metrics() == {}  # "new" is only 5 s old: too fresh for a synthetic start point
    ms.scrape(115.0, {"old": (0.0, 17.5), "new": (95.0, 4.0), "fresh": (103.0, 1.2)})
    got = ms.pod_metrics()
    assert got["old"] == PodMetric(500, 115.0, 15.0)
    assert got["new"] == PodMetric(267, 115.0, 15.0)  # 4 core-s over 15 s = 266.67m, rounded up
    assert got["fresh"] == PodMetric(100, 115.0, 12.0)  # from its start 12 s before
    ms.scrape(130.0, {"old": (125.0, 1.0)})  # restarted 5 s ago: no point before its start
    assert ms.pod_metrics() == {}
