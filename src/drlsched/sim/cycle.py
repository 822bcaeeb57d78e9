"""The scheduling cycle: kube-scheduler's queue (drlsched.sched.queue) and one pass over it, like
schedule_one.go: pop the next pod, filter (skip requests that already fit nowhere in this pass), ask the policy,
bind or park. Pods wait ordered by priority, then by when they last entered the queue; a pod that fits nowhere is
parked until a node where it would fit frees room (its queueing hint), behind the pods not within their backoff.
"""

from __future__ import annotations

from collections.abc import Callable, Generator

import numpy as np

from drlsched.cluster import REQUEST_ROW, Cluster, PodRequest
from drlsched.fragmentation import ShapeCounter
from drlsched.policies.base import Decision, Option, PodContext, Policy, ReclaimSignals
from drlsched.sched.cycle import fits_somewhere, pod_context
from drlsched.sched.queue import SchedulingQueue
from drlsched.sim.entities import PENDING, Run

Bind = Callable[[Run, Decision, list[Option], float], None]


class SchedulingCycle:
    def __init__(self, cluster: Cluster, policy: Policy, shapes: ShapeCounter, backoff: tuple[float, float],
                 bind: Bind, signals: Callable[[], ReclaimSignals] | None) -> None:
        """`bind(run, decision, options, t)` places a decided pod; `signals` (with reclaim, for policies that want
        them) what a pod's context carries about reclaimed resources."""
        self.cluster = cluster
        self.policy = policy
        self.shapes = shapes
        self.bind = bind
        self.signals = signals
        self.queue: SchedulingQueue[Run] = SchedulingQueue(*backoff, hint_width=REQUEST_ROW)
        self.freed: set[int] = set()  # nodes whose room grew since the last scheduling pass
        self.hint_nodes: set[int] = set()  # the nodes the last wake's hint looks at
        self.pending_count = 0  # pods waiting to be bound (in the queue or being relocated)

    def enqueue(self, run: Run, t: float) -> None:
        run.ready_t = t
        run.state = PENDING
        self.pending_count += 1
        run.entry = self.queue.add(run, run.spec.priority, t)

    def room_grew(self, nodes: list[int]) -> None:
        self.freed.update(nodes)

    def settle(self, t: float) -> bool:
        """End of an instant's events: wake the parked pods that may fit where room grew, flush those whose
        backoff ended; True if a pass has pods to try."""
        q = self.queue
        if self.freed:
            if q.parked:
                self.hint_nodes = self.freed
                q.wake(t, self._fit_hint(self.freed))
            self.freed = set()
        if q.parked and q.next_change() <= t:
            q.flush(t)
        return q.has_ready()

    def _fit_hint(self, freed: set[int]) -> Callable[[np.ndarray], np.ndarray]:
        """NodeResourcesFit's queueing hint after pods left the `freed` nodes: a parked pod may fit now only where
        room grew (any other node fits it no better than at its last failed attempt)."""
        nodes = np.fromiter(sorted(freed), np.int64, len(freed))
        return lambda rows: self.cluster.fits_any(rows, nodes)

    def schedule(self, t: float) -> Generator[PodContext, Decision | None, None]:
        """One scheduling pass at time t over the queue: activeQ by priority, then by when a pod (re)entered it,
        then the woken pods still within their backoff (SchedulerPopFromBackoffQ)."""
        c = self.cluster
        q = self.queue
        failed: list[PodRequest] = []
        while (entry := q.pop(t)) is not None:
            run = entry.pod
            r0 = run.req
            assert r0 is not None
            # Nothing frees during a pass: a pod needing at least what already fit nowhere fits nowhere either.
            if not run.spec.gpu_options and any(_dominates(r0, f) for f in failed):
                q.park(entry, t, run.hint)
                continue
            job = run.job
            ctx = pod_context(run.spec, c, t, job_nodes=job.placed, typical=self.shapes.current,
                              default_request=r0, policy=self.policy,
                              data_nodes=lambda job=job, spec=run.spec: job.data_nodes(spec.parents))
            if not fits_somewhere(ctx):
                q.park(entry, t, run.hint)
                if not run.spec.gpu_options:
                    # Keep only the minimal failed requests: the check above stays short.
                    failed = [f for f in failed if not _dominates(f, r0)]
                    failed.append(r0)
                continue
            if self.signals is not None and self.policy.wants_reclaim_signals:
                ctx.reclaim = self.signals()
            decision = yield ctx
            # The policy left it pending although it fits (a hold; for BE pods the admission decision): parked
            # without a hint, so the next cluster event wakes it, with backoff.
            if decision is None:
                q.park(entry, t)
                continue
            q.done(entry, took_hinted_room=decision.node in self.hint_nodes)
            run.entry = None
            self.pending_count -= 1
            self.bind(run, decision, ctx.options, t)


def _dominates(r: PodRequest, failed: PodRequest) -> bool:
    """r needs at least as much as a request that already fit nowhere in this pass, under equal constraints."""
    return (r.cpu >= failed.cpu and r.mem >= failed.mem and r.gpus >= failed.gpus
            and (r.gpus == 0 or r.gpu_milli >= failed.gpu_milli) and r.model_mask == failed.model_mask
            and r.toleration_mask == failed.toleration_mask)
