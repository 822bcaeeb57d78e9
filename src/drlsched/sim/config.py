"""The simulator's configuration and the horizon of a run (shared by the engine and the replayer)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from drlsched.kube_scoring import POD_INITIAL_BACKOFF_S, POD_MAX_BACKOFF_S
from drlsched.reclaim import ReclaimConfig

INF = math.inf


@dataclass
class SimConfig:
    startup_mean_s: float = 1.0
    startup_std_s: float = 0.3
    tick_s: float | None = None  # usage resampling and metric sampling; None = max(15 s, duration / 4000)
    rebalance_s: float | None = None  # None = no rebalancing ticks
    nic_gbps: float = 10.0
    rack_oversubscription: float = 1.0  # rack uplink = nodes in the rack × NIC / this (1 = non-blocking)
    share_links: bool = True  # False: every remote read gets the whole NIC (the model before link sharing)
    sla_saturated_fraction: float = 0.01
    sla_pending_s: float = 5.0
    drain_s: float | None = None  # simulated time after the arrival window; None = 10 × the window
    # kube-scheduler's podInitialBackoffSeconds / podMaxBackoffSeconds (0 disables backoff).
    backoff_initial_s: float = POD_INITIAL_BACKOFF_S
    backoff_max_s: float = POD_MAX_BACKOFF_S
    allow_unschedulable: bool = False  # pods that fit no empty node: count them instead of failing
    check_invariants: bool = False
    series: bool = True
    reclaim: ReclaimConfig = field(default_factory=ReclaimConfig)  # BE pods on reclaimed resources; off by default


def horizon(duration_s: float, drain_s: float | None = None) -> float:
    """When a simulation of an arrival window of `duration_s` stops: the window, then `drain_s` (default 10 × it)."""
    dur = max(duration_s, 1.0)
    return dur + (drain_s if drain_s is not None else 10.0 * dur)
