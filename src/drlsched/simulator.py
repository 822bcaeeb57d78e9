"""Discrete-event cluster simulator: arrivals, a kube-like scheduling queue, cold starts, contention, traffic.

Time is simulated seconds. Model (documented in docs/simulator.md):
- Scheduling: kube-scheduler's queue and cycle (`drlsched.sched`). Pods wait ordered by priority, then by when
  they last entered the queue; a pod that fits nowhere moves to the unschedulable pods and is retried when a
  node where it would fit frees room (its queueing hint), behind the pods that are not within their backoff. A
  pod whose request exceeds every node even when empty is reported unschedulable at once.
- Start: binding is followed by a cold start (normal, mean 1 s, std 0.3 s unless the pod fixes it).
- Contention: every running pod uses request × a usage ratio, resampled at each usage tick. When a node's CPU
  usage exceeds its capacity, its batch pods progress at capacity / usage (a per-node virtual clock, so a
  speed change re-plans one event per node), and latency-sensitive pods accumulate saturated time (SLA).
- Network: a pod reads `shuffle_in_mb` from its parent tasks' pods at start; the share on other nodes is
  cross-node traffic and costs extra run time: bytes / the rate it gets on the NICs and rack uplinks it crosses,
  shared max-min fairly with the transfers active there (`drlsched.network`). Services exchange `traffic_mbps`
  with the job's other running pods, cross-node in proportion to the share of those on other nodes (accounted
  bytes; they do not load the links).
- Rebalancing: optional ticks where the policy may migrate pods (a restart with a new cold start; progress
  is lost unless the pod is checkpointable).

The simulator itself is `drlsched.sim`: an event engine and rooms, one concern each (docs/simulator.md,
"Architecture"). This module is its stable front: `Simulator`, `simulate`, `SimConfig` and `horizon`.
"""

from __future__ import annotations

from collections.abc import Callable

from drlsched.policies.base import Policy
from drlsched.sim.config import SimConfig, horizon
from drlsched.sim.engine import Engine
from drlsched.workload import Workload

__all__ = ["SimConfig", "Simulator", "horizon", "simulate"]


class Simulator(Engine):
    """One workload under one policy: `run()` returns the metrics dict; `decisions()` is the same run as a
    generator for callers that decide placements themselves (drlsched.sim.engine.Engine)."""


def simulate(workload: Workload, policy: Policy | str, seed: int = 0, config: SimConfig | None = None,
             progress: Callable[[float, float], None] | None = None) -> dict[str, object]:
    """Run one workload under one policy; returns the metrics dict (see drlsched.metrics.METRIC_KEYS)."""
    from drlsched.policies import make_policy

    pol = make_policy(policy) if isinstance(policy, str) else policy
    return Simulator(workload, pol, seed, config, progress).run()
