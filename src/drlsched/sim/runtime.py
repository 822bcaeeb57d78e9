"""The pod runtime: binding a decided pod, its cold start, its run on its node (slot, usage, progress clock,
traffic) and taking it off its node again. Pods that finish by a clock or a deletion time are found by the
engine's events; this room only starts and stops them."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from drlsched.cluster import Cluster
from drlsched.policies.base import Decision, Option
from drlsched.sim.config import INF
from drlsched.sim.entities import RUNNING, STARTING, Run
from drlsched.sim.ports import ClockOps, Ledger, PodRows, PodUsage, SlotOps, TrafficOps


class PodRuntime:
    def __init__(self, cluster: Cluster, policy_name: str, clocks: ClockOps, slots: SlotOps, usage: PodUsage,
                 rows: Sequence[PodRows], traffic: TrafficOps, ledger: Ledger,
                 started: Callable[[float, Run], None], service_end: Callable[[float, Run], None],
                 freed: Callable[[list[int]], None], check_invariants: bool) -> None:
        """`usage.start` returns a starting pod's usage; `rows` are the other rooms with per-pod rows to fill;
        `started(when, run)` and `service_end(when, run)` schedule a pod's start and a service's deletion;
        `freed(nodes)` tells the scheduling cycle where room grew."""
        self.cluster = cluster
        self.policy_name = policy_name
        self.clocks = clocks
        self.slots = slots
        self.usage = usage
        self.rows = list(rows)
        self.traffic = traffic
        self.ledger = ledger
        self.started = started
        self.service_end = service_end
        self.freed = freed
        self.check_invariants = check_invariants
        self.starting = 0  # pods bound and still in their cold start
        self.by_uid: dict[str, Run] = {}  # running pods

    def bind(self, run: Run, d: Decision, options: list[Option], t: float) -> None:
        option = next((o for o in options if o.gpus == d.gpus), None)
        if option is None or not (0 <= d.node < self.cluster.size) or not option.feasible[d.node]:
            raise RuntimeError(f"policy {self.policy_name} chose infeasible node {d.node} for {run.spec.uid}")
        c = self.cluster
        r = option.request
        ids = d.gpu_ids if d.gpu_ids is not None else c.pick_gpus(d.node, r)
        c.allocate(d.node, r, ids)
        c.starting_cpu[d.node] += r.cpu
        run.req, run.node, run.gpu_ids, run.gpus = r, d.node, ids, d.gpus
        first = run.bind_t < 0
        if first:
            run.bind_t = t
        self.ledger.bound(run, t, first)
        run.state = STARTING
        self.starting += 1
        self.traffic.place(run.job, d.node, t)
        self.ledger.allocated(d.node, r, 1)
        self.started(t + run.startup, run)
        if self.check_invariants:
            c.check_invariants()

    def start(self, run: Run, t: float) -> None:
        """The cold start ended: the pod reads its shuffle input, takes a slot and runs on its clock."""
        spec, c, node = run.spec, self.cluster, run.node
        self.starting -= 1
        c.starting_cpu[node] -= run.req.cpu  # type: ignore[union-attr]
        run.state = RUNNING
        if run.start_t < 0:
            run.start_t = t
            self.ledger.started(run, t)
        self.by_uid[spec.uid] = run
        read_s = self.traffic.shuffle_read(run, t)
        work = spec.work_s if spec.work_s is not None else INF
        if spec.gpu_options and run.gpus > 1 and spec.gpus <= 1:
            work /= max(spec.elastic_speedup, 1e-9)
        if not spec.service and math.isfinite(work):
            work = (run.work or work) + read_s
        run.work = work
        clocks = self.clocks
        run.clk = clocks.clock_of(run)
        clocks.touch(run.clk, t)
        self._take_slot(run, t)
        clocks.join(run)
        if spec.service or not math.isfinite(work):
            if math.isfinite(work):
                if run.service_end == INF:  # a migrated service keeps its deletion time
                    run.service_end = t + work
                self.service_end(max(t, run.service_end), run)
            clocks.refresh(node, t)
        else:
            # The planned completion event stays valid unless this pod finishes first (or the speed changed).
            clocks.refresh(node, t, force=clocks.add_work(run, work))
        self.traffic.talk(run, t)

    def _take_slot(self, run: Run, t: float) -> None:
        self.slots.add(run)
        use_cpu, use_mem, use_gpu = self.usage.start(run, t)
        for room in self.rows:
            room.start(run, t)
        self.clocks.add_demand(run, use_cpu)
        self.slots.place_use(run, use_cpu, use_mem, use_gpu)

    def stop(self, run: Run, t: float, replan: bool = True) -> None:
        """Take a running pod off its node (finished, evicted or migrated)."""
        c, node = self.cluster, run.node
        self.clocks.leave(run, t)
        use_cpu = self.slots.remove(run)
        self.clocks.add_demand(run, -use_cpu)
        if replan:
            self.clocks.refresh(node, t)
        c.release(node, run.req, run.gpu_ids)  # type: ignore[arg-type]
        self.ledger.allocated(node, run.req, -1)  # type: ignore[arg-type]
        self.traffic.unplace(run, t)
        self.by_uid.pop(run.spec.uid, None)
        run.epoch += 1
        self.freed([node])
