"""The HPA replica calculator against upstream's own fixtures: kubernetes/kubernetes v1.36.3
`pkg/controller/podautoscaler/replica_calculator_test.go` (each test below names the upstream test it mirrors).

Upstream's harness gives every pod two containers, each with the listed request and usage, so a pod's request and
usage are twice the listed values (`makePodMetricLevels`); its pods have no readiness transition time, metrics are
stamped at the zero time with a one-minute window, and the CPU initialisation period is 2 min and the readiness
delay 10 s (`defaultTesting*`). "Hot" pods started now, "cool" ones 3 min ago, others at the zero time.
"""

from __future__ import annotations

import math

import pytest

from drlsched.autoscale.replicas import (
    FAILED,
    PENDING,
    RUNNING,
    MetricsError,
    Pod,
    PodMetric,
    ReplicaCount,
    Tolerances,
    group_pods,
    resource_replicas,
)

NOW = 1_000_000.0
HOT, COOL = NOW, NOW - 180.0
DEFAULT = Tolerances()
T, F = True, False


def calc(current: int, requests: list[float], levels: list[int], target: int, ready: list[bool] | None = None,
         start: list[float] | None = None, phase: list[str] | None = None, deleting: list[bool] | None = None,
         tolerances: Tolerances = DEFAULT) -> ReplicaCount:
    count = max(current, len(phase or []))
    pods = [Pod(f"test-pod-{i}",
                request_m=2 * round(requests[i] * 1000) if i < len(requests) else None,
                phase=phase[i] if phase else RUNNING,
                ready=ready[i] if ready and i < len(ready) else True,
                start_s=start[i] if start else 0.0,
                deleting=deleting[i] if deleting else False)
            for i in range(count)]
    metrics = {f"test-pod-{i}": PodMetric(2 * level, 0.0, 60.0) for i, level in enumerate(levels)}
    return resource_replicas(current, target, pods, metrics, NOW, tolerances, cpu_initialization_s=120.0,
                             readiness_delay_s=10.0)


# (upstream test, arguments, expected replicas, utilization %, raw value per pod in millicores)
CASES = [
    ("TestReplicaCalcScaleUp", dict(current=3, requests=[1, 1, 1], levels=[300, 500, 700], target=30), 5, 50, 1000),
    ("TestReplicaCalcScaleUpUnreadyLessScale",
     dict(current=3, requests=[1, 1, 1], levels=[300, 500, 700], target=30, ready=[F, T, T]), 4, 60, 1200),
    ("TestReplicaCalcScaleUpHotCpuLessScale",
     dict(current=3, requests=[1, 1, 1], levels=[300, 500, 700], target=30, start=[HOT, COOL, COOL]), 4, 60, 1200),
    ("TestReplicaCalcScaleUpUnreadyNoScale",
     dict(current=3, requests=[1, 1, 1], levels=[400, 500, 700], target=30, ready=[T, F, F]), 3, 40, 800),
    ("TestReplicaCalcScaleHotCpuNoScale",
     dict(current=3, requests=[1, 1, 1], levels=[400, 500, 700], target=30, ready=[T, F, F],
          start=[COOL, HOT, HOT]), 3, 40, 800),
    ("TestReplicaCalcScaleUpIgnoresFailedPods",
     dict(current=2, requests=[1] * 4, levels=[500, 700], target=30, ready=[T, T, F, F],
          phase=[RUNNING, RUNNING, FAILED, FAILED]), 4, 60, 1200),
    ("TestReplicaCalcScaleUpIgnoresDeletionPods",
     dict(current=2, requests=[1] * 4, levels=[500, 700], target=30, ready=[T, T, F, F], phase=[RUNNING] * 4,
          deleting=[F, F, T, T]), 4, 60, 1200),
    ("TestReplicaCalcScaleDown",
     dict(current=5, requests=[1] * 5, levels=[100, 300, 500, 250, 250], target=50), 3, 28, 560),
    ("TestReplicaCalcScaleDownExcludeUnreadyPods",
     dict(current=5, requests=[1] * 5, levels=[100, 300, 500, 250, 250], target=50, ready=[T, T, T, F, F]),
     2, 30, 600),
    ("TestReplicaCalcScaleDownExcludeUnscheduledPods",
     dict(current=5, requests=[1] * 5, levels=[100], target=50, ready=[T, F, F, F, F],
          phase=[RUNNING] + [PENDING] * 4), 1, 10, 200),
    ("TestReplicaCalcScaleDownIgnoreHotCpuPods",
     dict(current=5, requests=[1] * 5, levels=[100, 300, 500, 250, 250], target=50,
          start=[COOL, COOL, COOL, HOT, HOT]), 2, 30, 600),
    ("TestReplicaCalcScaleDownIgnoresFailedPods",
     dict(current=5, requests=[1] * 7, levels=[100, 300, 500, 250, 250], target=50, ready=[T] * 5 + [F, F],
          phase=[RUNNING] * 5 + [FAILED] * 2), 3, 28, 560),
    ("TestReplicaCalcScaleDownIgnoresDeletionPods",
     dict(current=5, requests=[1] * 7, levels=[100, 300, 500, 250, 250], target=50, ready=[T] * 5 + [F, F],
          phase=[RUNNING] * 7, deleting=[F] * 5 + [T, T]), 3, 28, 560),
    ("TestReplicaCalcTolerance",
     dict(current=3, requests=[0.9, 1.0, 1.1], levels=[1010, 1030, 1020], target=100), 3, 102, 2040),
    ("TestReplicaCalcSuperfluousMetrics",
     dict(current=4, requests=[1] * 4, levels=[4000, 9500, 3000, 7000, 3200, 2000], target=100), 24, 587, 11750),
    ("TestReplicaCalcMissingMetrics", dict(current=4, requests=[1] * 4, levels=[400, 95], target=100), 3, 24, 495),
    ("TestReplicaCalcMissingMetricsNoChangeEq", dict(current=2, requests=[1, 1], levels=[1000], target=100),
     2, 100, 2000),
    ("TestReplicaCalcMissingMetricsNoChangeGt", dict(current=2, requests=[1, 1], levels=[1900], target=100),
     2, 190, 3800),
    ("TestReplicaCalcMissingMetricsNoChangeLt", dict(current=2, requests=[1, 1], levels=[600], target=100),
     2, 60, 1200),
    ("TestReplicaCalcMissingMetricsUnreadyChange",
     dict(current=3, requests=[1] * 3, levels=[100, 450], target=50, ready=[F, T, T]), 3, 45, 900),
    ("TestReplicaCalcMissingMetricsHotCpuNoChange",
     dict(current=3, requests=[1] * 3, levels=[100, 450], target=50, start=[HOT, COOL, COOL]), 3, 45, 900),
    ("TestReplicaCalcMissingMetricsUnreadyScaleUp",
     dict(current=3, requests=[1] * 3, levels=[100, 2000], target=50, ready=[F, T, T]), 4, 200, 4000),
    ("TestReplicaCalcMissingMetricsHotCpuScaleUp",
     dict(current=3, requests=[1] * 3, levels=[100, 2000], target=50, ready=[F, T, T], start=[HOT, COOL, COOL]),
     4, 200, 4000),
    ("TestReplicaCalcMissingMetricsUnreadyScaleDown",
     dict(current=4, requests=[1] * 4, levels=[100, 100, 100], target=50, ready=[F, T, T, T]), 3, 10, 200),
    ("TestReplicaCalcMissingMetricsScaleDownTargetOver100",
     dict(current=4, requests=[1, 1, 2, 2], levels=[200, 100, 100], target=300, ready=[F, T, T, T]), 2, 6, 200),
    ("TestReplicaCalcDuringRollingUpdateWithMaxSurge",
     dict(current=2, requests=[1] * 3, levels=[100, 100], target=50, phase=[RUNNING] * 3), 2, 10, 200),
]


@pytest.mark.parametrize(("upstream", "args", "replicas", "utilization", "raw"), CASES, ids=[c[0] for c in CASES])
def test_replica_calculator_matches_upstream_fixtures(upstream: str, args: dict, replicas: int, utilization: int,
                                                      raw: int) -> None:
    assert calc(**args) == ReplicaCount(replicas, utilization, raw)


def test_errors_where_upstream_errors() -> None:
    """TestReplicaCalcDisjointResourcesMetrics, TestReplicaCalcEmptyMetrics, TestReplicaCalcEmptyCPURequest."""
    pod = Pod("test-pod-0", 2000)
    with pytest.raises(MetricsError, match="no metrics returned matched known pods"):
        resource_replicas(1, 100, [pod], {"an-older-pod-name": PodMetric(200, 0.0, 60.0)}, NOW)
    with pytest.raises(MetricsError, match="no metrics returned from resource metrics API"):
        calc(current=4, requests=[1, 1, 1], levels=[], target=100)
    with pytest.raises(MetricsError, match="missing request for"):
        calc(current=1, requests=[], levels=[200], target=100)


def test_computed_tolerance() -> None:
    """TestReplicaCalcComputedToleranceAlgImplementation: a target just past the tolerance scales, one just inside
    does not."""
    start_pods, used = 10, 10 * 150
    requested = 2 * used
    per_pod = requested // start_pods
    requests = [(per_pod + d) / 1000 for d in (100, -100, 10, -10, 2, -2, 1, -1, 0, 0)]
    target = abs(1 / ((requested // used) * (1 - 0.1))) + 0.01
    final_pods = math.ceil(used / (requested * target) * start_pods)
    got = calc(current=start_pods, requests=requests, levels=[used // 10] * 10, target=int(target * 100))
    assert got == ReplicaCount(final_pods, used * 100 // requested, 2 * used // 10)
    assert final_pods < start_pods
    inside = abs(1 / ((requested // used) * (1 - 0.1))) + 0.004
    assert calc(current=start_pods, requests=requests, levels=[used // 10] * 10,
                target=int(inside * 100)).replicas == start_pods


def test_configurable_tolerance() -> None:
    """TestReplicaCalcConfigurableTolerance's idea and the docs' example: a 5% scale-up tolerance scales at 107%
    of target where the default 10% does not."""
    args = dict(current=3, requests=[1] * 3, levels=[1070] * 3, target=100)
    assert calc(**args).replicas == 3
    assert calc(**args, tolerances=Tolerances(down=0.1, up=0.05)).replicas == 4


def _pod(name: str, start: float | None, ready: bool | None, since: float = 0.0, phase: str = "Succeeded",
         deleting: bool = False) -> Pod:
    return Pod(name, 1000, phase=phase, ready=ready, ready_since_s=since, start_s=start, deleting=deleting)


# TestGroupPods (2 min initialisation period, 10 s readiness delay): pod, metric (timestamp, window) or None, expected
# group of the pod: ready, unready, missing or ignored.
GROUPS = [
    ("unready a pod without ready condition - CPU", _pod("lucretius", NOW, None), (0.0, 0.0), "unready"),
    ("count in a ready pod with fresh metrics during initialization period - CPU",
     _pod("bentham", NOW - 60, True, NOW - 30), (NOW, 30.0), "ready"),
    ("unready a ready pod without fresh metrics during initialization period - CPU",
     _pod("bentham", NOW - 60, True, NOW - 30), (NOW, 60.0), "unready"),
    ("unready an unready pod during initialization period - CPU",
     _pod("lucretius", NOW - 600, False, NOW - 594), (0.0, 0.0), "unready"),
    ("count in a ready pod without fresh metrics after initialization period - CPU",
     _pod("bentham", NOW - 180, True, NOW - 180), (NOW - 120, 60.0), "ready"),
    ("count in an unready pod that was ready after initialization period - CPU",
     _pod("lucretius", NOW - 600, False, NOW - 540), (0.0, 0.0), "ready"),
    ("unready pod that has never been ready after initialization period - CPU",
     _pod("lucretius", NOW - 600, False, NOW - 590), (0.0, 0.0), "ready"),
    ("a missing pod", _pod("epicurus", NOW - 180, None), None, "missing"),
    ("pending pods are unreadied", _pod("unscheduled", None, None, phase=PENDING), None, "unready"),
    ("ignore pods with deletion timestamps", _pod("deleted", None, None, phase=PENDING, deleting=True), (0.0, 0.0),
     "ignored"),
    ("ignore pods in a failed state", _pod("failed", None, None, phase=FAILED), (0.0, 0.0), "ignored"),
]


@pytest.mark.parametrize(("name", "pod", "metric", "group"), GROUPS, ids=[g[0] for g in GROUPS])
def test_group_pods_matches_upstream(name: str, pod: Pod, metric: tuple[float, float] | None, group: str) -> None:
    metrics = {} if metric is None else {pod.name: PodMetric(1, *metric)}
    got = group_pods([pod], metrics, NOW, 120.0, 10.0)
    assert {"ready": got.ready == 1, "unready": pod.name in got.unready, "missing": pod.name in got.missing,
            "ignored": pod.name in got.ignored} == {k: k == group for k in ("ready", "unready", "missing", "ignored")}


def test_memory_ignores_readiness() -> None:
    """TestGroupPods "count in a ready pod - memory": readiness only matters for CPU."""
    got = group_pods([_pod("bentham", None, None)], {"bentham": PodMetric(1, NOW, 60.0)}, NOW, 120.0, 10.0, cpu=False)
    assert got.ready == 1
