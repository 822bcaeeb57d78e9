"""Pods taken off their node and started again: the policy's migrations at rebalancing ticks (straight to the
new node) and QoS evictions (back to the queue). Either way the pod restarts with a new cold start and loses its
progress unless it is checkpointable."""

from __future__ import annotations

import math
from collections.abc import Callable

from drlsched.cluster import Cluster
from drlsched.policies.base import Decision, Migration, Option, Policy
from drlsched.sim.entities import Run
from drlsched.sim.ports import Progress, RuntimeOps, SlotView


class Relocation:
    def __init__(self, cluster: Cluster, policy: Policy, runtime: RuntimeOps, clocks: Progress,
                 redraw: Callable[[], float], enqueue: Callable[[Run, float], None],
                 migrated: Callable[[str], None], evicted: Callable[[str], None]) -> None:
        """`redraw()` draws a new cold start; `enqueue` puts an evicted pod back in the queue; `migrated` and
        `evicted` count each move."""
        self.cluster = cluster
        self.policy = policy
        self.runtime = runtime
        self.clocks = clocks
        self.redraw = redraw
        self.enqueue = enqueue
        self.migrated = migrated
        self.evicted = evicted

    def rebalance(self, t: float, slots: SlotView) -> None:
        """A rebalancing tick: the policy's migrations of the running pods."""
        running = [(slots.run(i).spec.uid, slots.run(i).node) for i in range(len(slots))]
        for m in self.policy.rebalance(self.cluster, running, t):
            self.migrate(m, t)

    def migrate(self, m: Migration, t: float) -> None:
        run = self.runtime.by_uid.get(m.pod_uid)
        if run is None or m.node == run.node:
            return
        c = self.cluster
        done = self._progress(run, t)
        self.runtime.stop(run, t)
        if not c.feasible(run.req)[m.node]:  # type: ignore[arg-type]
            raise RuntimeError(f"policy {self.policy.name} migrated {m.pod_uid} to infeasible node {m.node}")
        self.migrated(m.pod_uid)
        self._restart(run, done)
        self.runtime.bind(run, Decision(m.node, run.gpus), [Option(run.gpus, run.req, c.feasible(run.req))], t)

    def evict(self, run: Run, t: float) -> None:
        done = self._progress(run, t)
        self.runtime.stop(run, t)
        self.evicted(run.spec.uid)
        self._restart(run, done)
        self.enqueue(run, t)

    def _progress(self, run: Run, t: float) -> float:
        """Seconds of work a running batch pod has done (0 for services and pods still starting)."""
        if run.spec.service or run.slot < 0 or not math.isfinite(run.work):
            return 0.0
        return self.clocks.progress(run, t)

    def _restart(self, run: Run, done: float) -> None:
        """A pod taken off its node restarts: its remaining work if checkpointable, else all of it; a new cold
        start."""
        if run.spec.service:
            run.work = 0.0
        else:
            run.work = max(run.work - done, 0.0) if run.spec.checkpointable else 0.0
        if run.spec.startup_s is None:
            run.startup = self.redraw()
