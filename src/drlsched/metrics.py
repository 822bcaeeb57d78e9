"""Run metrics: what the simulator accumulates while it runs, and the JSON summary with its exact keys."""

from __future__ import annotations

from array import array
from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from enum import IntFlag

import numpy as np

from drlsched.workload import GPU_MILLI

# Keys every run reports, in this order (the contract of `simulate --json` and `evaluate`'s results.json).
METRIC_KEYS = ("jct_mean_s", "jct_p50_s", "jct_p99_s", "pending_p99_s", "cpu_util", "mem_util", "gpu_util",
               "cpu_alloc", "gpu_alloc", "sla_violation_rate", "migrations", "cross_node_traffic_gb",
               "gpu_fragmentation", "gpu_fragmented", "gpu_unallocated", "pods_scheduled", "pods_unschedulable",
               "makespan_s", "anomaly_rate")
# The parts of `anomaly_rate`: pod counts, nested in the metrics dict as `anomalies: {part: count}`. Consumers that
# want flat keys name them `anomalies.<part>` (ANOMALY_KEYS) and read them with `metric_value`.
ANOMALY_PARTS = ("unschedulable_60s", "bind_failed", "evicted", "preempted_or_migrated", "sla_breach",
                 "startup_slow")
ANOMALY_KEYS = tuple(f"anomalies.{part}" for part in ANOMALY_PARTS)
UNSCHEDULABLE_S = 60.0  # a pod pending longer than this in total is a scheduling anomaly
STARTUP_SLO_S = 5.0  # Kubernetes' pod-startup SLO: creation → running, image pulls excluded
RUN_KEYS = ("policy", "scenario", "seed", "nodes", "pods", "wall_s", "placements_per_s")
# Colocation keys (reclaimed resources, QoS enforcement; docs/simulator.md), reported by every simulated run.
COLOCATION_KEYS = ("evictions", "be_pending_p99_s", "cpu_util_reclaimed", "ls_slowdown_p50", "ls_slowdown_p99")
# Statistics over a sample of pods or jobs: null (None) when the sample is empty, never 0.0; why, for the warning.
NULLABLE_KEYS = {
    "jct_p50_s": "no job finished", "jct_p99_s": "no job finished", "pending_p99_s": "no pod was placed",
    "sla_violation_rate": "no LS pod ran", "anomaly_rate": "no pod arrived",
    "be_pending_p99_s": "no BE pod was placed", "cpu_util_reclaimed": "no CPU was used",
    "ls_slowdown_p50": "no LS pod ran", "ls_slowdown_p99": "no LS pod ran",
    "submit_lag_p99_s": "no pod was created", "makespan_s": "no pod finished",
    "jct_mean_s": "no job finished", "jct_mean_small_s": "no job finished",
    "jct_mean_medium_s": "no job finished", "jct_mean_large_s": "no job finished",
}
SERIES_KEYS = ("t", "cpu_util", "mem_util", "gpu_util", "cpu_alloc", "gpu_alloc", "pending", "running",
               "gpu_fragmentation")


class Anomaly(IntFlag):
    """What can go wrong for one pod (docs/simulator.md, "Scheduling anomalies"); a pod may collect several."""

    UNSCHEDULABLE_60S = 1
    BIND_FAILED = 2
    EVICTED = 4
    PREEMPTED_OR_MIGRATED = 8
    SLA_BREACH = 16
    STARTUP_SLOW = 32


_PART_FLAGS = tuple(Anomaly[part.upper()] for part in ANOMALY_PARTS)


@dataclass
class Accumulator:
    """Sums kept while simulating; percentiles need the raw JCT and pending samples (compact arrays)."""

    jct: array = field(default_factory=lambda: array("d"))
    pending: array = field(default_factory=lambda: array("d"))
    ls_pods: int = 0
    ls_violations: int = 0
    migrations: int = 0
    evictions: int = 0
    be_pending: array = field(default_factory=lambda: array("d"))
    ls_slowdown: array = field(default_factory=lambda: array("d"))  # per LS pod: mean slowdown over its life
    cpu_reclaimed_s: float = 0.0  # Σ CPU granted to BE pods on reclaimed resources · dt
    cross_node_mb: float = 0.0
    cross_rack_mb: float = 0.0
    pods_arrived: int = 0
    pods_scheduled: int = 0
    pods_finished: int = 0
    pods_unschedulable: int = 0
    first_arrival: float | None = None
    last_finish: float = 0.0
    # Time integrals over the busy window: Σ value·dt.
    busy_s: float = 0.0
    cpu_use_s: float = 0.0
    mem_use_s: float = 0.0
    gpu_use_s: float = 0.0
    cpu_alloc_s: float = 0.0
    gpu_alloc_s: float = 0.0
    frag_s: float = 0.0  # fragmented share of idle GPU capacity
    frag_milli_s: float = 0.0  # fragmented milli-GPU
    frag_time: float = 0.0  # the time both integrals cover: from the first GPU pod's arrival
    series: list[tuple[float, ...]] = field(default_factory=list)
    unschedulable_examples: list[str] = field(default_factory=list)
    # Scheduling anomalies, keyed by the pod's uid: its flags (only pods with at least one), the start of its
    # current stay in the queue, and the time it waited in earlier stays (kept while the pod lives, since an
    # eviction sends it back to the queue; dropped when it finishes or passes the 60 s).
    anomalies: dict[Hashable, int] = field(default_factory=dict)
    waiting_since: dict[Hashable, float] = field(default_factory=dict)
    waited: dict[Hashable, float] = field(default_factory=dict)

    def flag(self, pod: Hashable, kind: Anomaly) -> None:
        """Record an anomaly of a pod (a pod with several counts once in `anomaly_rate`)."""
        self.anomalies[pod] = self.anomalies.get(pod, 0) | kind

    def wait_start(self, pod: Hashable, t: float) -> None:
        """The pod entered the scheduling queue (or, never placeable, arrived) at t."""
        self.waiting_since[pod] = t

    def wait_end(self, pod: Hashable, t: float) -> None:
        """The pod was bound at t (a bind without a stay in the queue, a migration, is ignored)."""
        since = self.waiting_since.pop(pod, None)
        if since is None:
            return
        total = self.waited.pop(pod, 0.0) + t - since
        if total > UNSCHEDULABLE_S:
            self.flag(pod, Anomaly.UNSCHEDULABLE_60S)
        elif total > 0:
            self.waited[pod] = total

    def finished(self, pod: Hashable) -> None:
        """The pod completed: it will not wait again."""
        self.waited.pop(pod, None)

    def close_waits(self, t: float, forever: bool = False) -> None:
        """The run ended at t: pods still pending have waited until then, or, `forever` (nothing was left running
        that could make room for them), would wait for ever."""
        for pod in list(self.waiting_since):
            if forever:
                self.waiting_since.pop(pod)
                self.flag(pod, Anomaly.UNSCHEDULABLE_60S)
            else:
                self.wait_end(pod, t)

    def started(self, pod: Hashable, latency_s: float) -> None:
        """The pod's first start; `latency_s`: creation → running less its image pull (the pod-startup SLO)."""
        if latency_s > STARTUP_SLO_S:
            self.flag(pod, Anomaly.STARTUP_SLOW)


def _pct(values: array, q: float) -> float | None:
    """A percentile of a sample; None (JSON null) for an empty sample, which has none."""
    if len(values) == 0:
        return None
    return float(np.percentile(np.frombuffer(values, dtype=np.float64), q))


def anomaly_summary(acc: Accumulator) -> dict[str, object]:
    """`anomaly_rate` (the share of arrived pods with at least one anomaly) and `anomalies` (pods per part)."""
    flags = np.fromiter(acc.anomalies.values(), dtype=np.int64, count=len(acc.anomalies))
    parts = {part: int(np.count_nonzero(flags & bit)) for part, bit in zip(ANOMALY_PARTS, _PART_FLAGS, strict=True)}
    rate = int(np.count_nonzero(flags)) / acc.pods_arrived if acc.pods_arrived else None
    return {"anomaly_rate": rate, "anomalies": parts}


def metric_value(metrics: Mapping[str, object], key: str) -> object:
    """A metric by its flat name: `anomalies.evicted` reads the nested `anomalies` dict. KeyError if absent."""
    head, dot, part = key.partition(".")
    if dot:
        inner = metrics[head]
        if not isinstance(inner, Mapping):
            raise KeyError(key)
        return inner[part]
    return metrics[key]


def has_metric(metrics: Mapping[str, object], key: str) -> bool:
    try:
        metric_value(metrics, key)
    except KeyError:
        return False
    return True


def null_keys(metrics: Mapping[str, object]) -> list[str]:
    """The metrics of a run reported as null because their sample was empty."""
    return [key for key in NULLABLE_KEYS if key in metrics and metrics[key] is None]


def null_warning(runs: list[Mapping[str, object]]) -> str | None:
    """One line naming the metrics reported as null (empty samples) in these runs, and why; None if none."""
    counts: dict[str, int] = {}
    for metrics in runs:
        for key in null_keys(metrics):
            counts[key] = counts.get(key, 0) + 1
    if not counts:
        return None
    by_why: dict[str, list[str]] = {}
    for key, n in counts.items():
        by_why.setdefault(NULLABLE_KEYS[key], []).append(key if len(runs) == 1 else f"{key} in {n} of {len(runs)} runs")
    parts = "; ".join(f"{', '.join(keys)} ({why})" for why, keys in by_why.items())
    return f"drlsched: warning: empty samples, reported as null (n/a), not 0: {parts}"


def summarize(acc: Accumulator, *, total_cpu: int, total_mem: int, total_gpu_milli: int) -> dict[str, object]:
    busy = acc.busy_s if acc.busy_s > 0 else 1.0
    gpu_cap = total_gpu_milli or 1
    return {
        "jct_mean_s": float(np.frombuffer(acc.jct, dtype=np.float64).mean()) if len(acc.jct) else None,
        "jct_p50_s": _pct(acc.jct, 50),
        "jct_p99_s": _pct(acc.jct, 99),
        "pending_p99_s": _pct(acc.pending, 99),
        "cpu_util": acc.cpu_use_s / busy / total_cpu,
        "mem_util": acc.mem_use_s / busy / total_mem,
        "gpu_util": acc.gpu_use_s / busy / gpu_cap if total_gpu_milli else 0.0,
        "cpu_alloc": acc.cpu_alloc_s / busy / total_cpu,
        "gpu_alloc": acc.gpu_alloc_s / busy / gpu_cap if total_gpu_milli else 0.0,
        "sla_violation_rate": acc.ls_violations / acc.ls_pods if acc.ls_pods else None,
        "migrations": acc.migrations,
        "cross_node_traffic_gb": acc.cross_node_mb / 1000.0,
        "gpu_fragmentation": acc.frag_s / acc.frag_time if acc.frag_time > 0 else 0.0,
        "gpu_fragmented": acc.frag_milli_s / acc.frag_time / GPU_MILLI if acc.frag_time > 0 else 0.0,
        "gpu_unallocated": (total_gpu_milli - acc.gpu_alloc_s / busy) / GPU_MILLI if total_gpu_milli else 0.0,
        "pods_scheduled": acc.pods_scheduled,
        "pods_unschedulable": acc.pods_unschedulable,
        "makespan_s": max(0.0, acc.last_finish - (acc.first_arrival or 0.0)) if acc.pods_finished else None,
        **anomaly_summary(acc),
        **colocation_summary(acc),
    }


def colocation_summary(acc: Accumulator) -> dict[str, object]:
    return {
        "evictions": acc.evictions,
        "be_pending_p99_s": _pct(acc.be_pending, 99),
        "cpu_util_reclaimed": acc.cpu_reclaimed_s / acc.cpu_use_s if acc.cpu_use_s > 0 else None,
        "ls_slowdown_p50": _pct(acc.ls_slowdown, 50),
        "ls_slowdown_p99": _pct(acc.ls_slowdown, 99),
    }
