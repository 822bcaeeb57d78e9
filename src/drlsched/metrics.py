"""Run metrics: what the simulator accumulates while it runs, and the JSON summary with its exact keys."""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field

import numpy as np

from drlsched.workload import GPU_MILLI

# Keys every run reports, in this order (the contract of `simulate --json` and `evaluate`'s results.json).
METRIC_KEYS = ("jct_p50_s", "jct_p99_s", "pending_p99_s", "cpu_util", "mem_util", "gpu_util", "cpu_alloc",
               "gpu_alloc", "sla_violation_rate", "migrations", "cross_node_traffic_gb", "gpu_fragmentation",
               "gpu_fragmented", "gpu_unallocated", "pods_scheduled", "pods_unschedulable", "makespan_s")
RUN_KEYS = ("policy", "scenario", "seed", "nodes", "pods", "wall_s", "placements_per_s")
# Colocation keys (reclaimed resources, QoS enforcement; docs/simulator.md), reported by every simulated run.
COLOCATION_KEYS = ("evictions", "be_pending_p99_s", "cpu_util_reclaimed", "ls_slowdown_p50", "ls_slowdown_p99")
SERIES_KEYS = ("t", "cpu_util", "mem_util", "gpu_util", "cpu_alloc", "gpu_alloc", "pending", "running",
               "gpu_fragmentation")


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


def _pct(values: array, q: float) -> float:
    if len(values) == 0:
        return 0.0
    return float(np.percentile(np.frombuffer(values, dtype=np.float64), q))


def summarize(acc: Accumulator, *, total_cpu: int, total_mem: int, total_gpu_milli: int) -> dict[str, float]:
    busy = acc.busy_s if acc.busy_s > 0 else 1.0
    gpu_cap = total_gpu_milli or 1
    return {
        "jct_p50_s": _pct(acc.jct, 50),
        "jct_p99_s": _pct(acc.jct, 99),
        "pending_p99_s": _pct(acc.pending, 99),
        "cpu_util": acc.cpu_use_s / busy / total_cpu,
        "mem_util": acc.mem_use_s / busy / total_mem,
        "gpu_util": acc.gpu_use_s / busy / gpu_cap if total_gpu_milli else 0.0,
        "cpu_alloc": acc.cpu_alloc_s / busy / total_cpu,
        "gpu_alloc": acc.gpu_alloc_s / busy / gpu_cap if total_gpu_milli else 0.0,
        "sla_violation_rate": acc.ls_violations / acc.ls_pods if acc.ls_pods else 0.0,
        "migrations": acc.migrations,
        "cross_node_traffic_gb": acc.cross_node_mb / 1000.0,
        "gpu_fragmentation": acc.frag_s / acc.frag_time if acc.frag_time > 0 else 0.0,
        "gpu_fragmented": acc.frag_milli_s / acc.frag_time / GPU_MILLI if acc.frag_time > 0 else 0.0,
        "gpu_unallocated": (total_gpu_milli - acc.gpu_alloc_s / busy) / GPU_MILLI if total_gpu_milli else 0.0,
        "pods_scheduled": acc.pods_scheduled,
        "pods_unschedulable": acc.pods_unschedulable,
        "makespan_s": max(0.0, acc.last_finish - (acc.first_arrival or 0.0)),
        **colocation_summary(acc),
    }


def colocation_summary(acc: Accumulator) -> dict[str, float]:
    return {
        "evictions": acc.evictions,
        "be_pending_p99_s": _pct(acc.be_pending, 99),
        "cpu_util_reclaimed": acc.cpu_reclaimed_s / acc.cpu_use_s if acc.cpu_use_s > 0 else 0.0,
        "ls_slowdown_p50": _pct(acc.ls_slowdown, 50),
        "ls_slowdown_p99": _pct(acc.ls_slowdown, 99),
    }
