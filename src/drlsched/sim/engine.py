"""The event engine: the clock, the timeline and the order of one instant, wiring the rooms together.

One instant t (the earliest event or arrival): integrate the gauges up to t; take the arrivals at t; handle the
events due at t in (time, push) order, each by the one room it concerns; queue the pods whose parent tasks
finished; wake parked pods where room grew; run one scheduling pass (yielding each pod needing a decision)."""

from __future__ import annotations

import time
from collections.abc import Callable, Generator

import numpy as np

from drlsched.cluster import Cluster
from drlsched.fragmentation import ShapeCounter
from drlsched.metrics import Accumulator, summarize
from drlsched.policies.base import Decision, Option, PodContext, Policy
from drlsched.sched.cycle import decide
from drlsched.sched.queue import SchedulingQueue
from drlsched.sim.accounting import Accounting
from drlsched.sim.admission import Admission, draw_startup
from drlsched.sim.clocks import Clocks
from drlsched.sim.config import INF, SimConfig, horizon
from drlsched.sim.cycle import SchedulingCycle
from drlsched.sim.entities import DONE, RUNNING, Run, SimJob
from drlsched.sim.qos import QoSEnforcer
from drlsched.sim.relocation import Relocation
from drlsched.sim.runtime import PodRuntime
from drlsched.sim.slots import SlotTable
from drlsched.sim.timeline import NODE_DONE, REBALANCE, SERVICE_END, START, TICK, Timeline
from drlsched.sim.traffic import Traffic
from drlsched.sim.usage import UsageModel
from drlsched.workload import PodSpec, QoS, Workload


class Engine:
    def __init__(self, workload: Workload, policy: Policy, seed: int, config: SimConfig | None = None,
                 progress: Callable[[float, float], None] | None = None) -> None:
        workload.validate_nodes()
        self.workload = workload
        self.policy = policy
        self.seed = seed
        self.cfg = cfg = config or SimConfig()
        self.progress = progress
        self.rc = cfg.reclaim
        self.reclaim = self.rc.enabled
        self.cluster = c = Cluster(workload.nodes, reclaim=self.reclaim)
        seeds = np.random.SeedSequence(seed).spawn(4)  # the 4th: the replay's start in a part of the usage series
        rng_pod = np.random.default_rng(seeds[0])  # per-pod draws in arrival order: same for every policy
        rng_use = np.random.default_rng(seeds[1])
        self.tick_s = cfg.tick_s or max(15.0, max(workload.duration_s, 1.0) / 4000.0)
        self.end_t = horizon(workload.duration_s, cfg.drain_s if cfg.drain_s is not None else workload.drain_s)
        self.timeline = Timeline()
        self.now = 0.0
        self.busy_t = 0.0  # the last usage tick with pods running, starting or still to arrive
        self._build_rooms(c, seed, seeds[3], rng_pod, rng_use)
        policy.reset(c, np.random.default_rng(seeds[2]))

    def _build_rooms(self, c: Cluster, seed: int, start_seed: np.random.SeedSequence, rng_pod: np.random.Generator,
                     rng_use: np.random.Generator) -> None:
        cfg, w = self.cfg, self.workload
        shapes = ShapeCounter()
        self.accounting = Accounting(c, shapes, w.duration_s, cfg.series, cfg.sla_saturated_fraction,
                                     cfg.sla_pending_s)
        self.traffic = Traffic(c.rack, cfg.nic_gbps, cfg.rack_oversubscription, cfg.share_links,
                               self.accounting.traffic)
        self.usage = UsageModel(w.usage, w.load_curve, self.tick_s, seed, np.random.default_rng(start_seed), rng_use)
        self.admission = Admission(c, shapes, rng_pod, (cfg.startup_mean_s, cfg.startup_std_s),
                                   cfg.allow_unschedulable, self.usage.series_for, self.accounting.unschedulable)
        self.clocks = Clocks(c, self.rc if self.reclaim else None, self._plan_clock)
        self.qos = QoSEnforcer(self.rc, c, self.tick_s) if self.reclaim else None
        rows = [self.qos] if self.qos is not None else []
        self.slots = SlotTable(c, [self.usage, *rows], self.accounting.used)
        signals = (lambda: self.qos.signals(self.clocks.use_be)) if self.qos is not None else None  # type: ignore[union-attr]
        self.cycle = SchedulingCycle(c, self.policy, shapes, (cfg.backoff_initial_s, cfg.backoff_max_s), self._bind,
                                     signals)
        self.runtime = PodRuntime(c, self.policy.name, self.clocks, self.slots, self.usage, rows, self.traffic,
                                  self.accounting, self._started, self._service_end, self.cycle.room_grew,
                                  cfg.check_invariants)
        self.relocation = Relocation(c, self.policy, self.runtime, self.clocks,
                                     lambda: draw_startup(rng_use, cfg.startup_mean_s, cfg.startup_std_s),
                                     self._enqueue, self.accounting.migrated, self.accounting.evicted)

    # --- public -----------------------------------------------------------------------------------------------

    def run(self) -> dict[str, object]:
        """Simulate to the end with the policy deciding every placement; returns the metrics dict."""
        gen = self.decisions()
        try:
            ctx = next(gen)
            while True:
                ctx = gen.send(decide(self.policy, ctx))
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]

    def decisions(self) -> Generator[PodContext, Decision | None, dict[str, object]]:
        """The simulation as a generator, for callers that decide placements themselves (an RL env):
        it yields each pod needing a decision, takes a `Decision` or None (leave pending) via `send`, and returns
        the metrics dict when the simulation ends."""
        wall0 = time.perf_counter()
        pods = self.workload.iter_pods()
        nxt = next(pods, None)
        self.timeline.push(0.0, TICK, None)
        if self.cfg.rebalance_s:
            self.timeline.push(self.cfg.rebalance_s, REBALANCE, None)
        while True:
            t = min(self.timeline.next_time(), nxt.arrival_s if nxt is not None else INF)
            if t == INF or t > self.end_t:
                break
            self._advance(t)
            while nxt is not None and nxt.arrival_s <= t:
                self._arrive(nxt)
                nxt = next(pods, None)
            while (event := self.timeline.pop_due(t)) is not None:
                self._dispatch(event[0], event[1], t, nxt is not None)
            for run in self.admission.released():
                self._enqueue(run, t)
            if self.cycle.settle(t):
                yield from self._schedule(t)
        self._finish()
        return self._metrics(time.perf_counter() - wall0)

    # --- views for callers (the RL env, tests) ----------------------------------------------------------------

    @property
    def acc(self) -> Accumulator:
        return self.accounting.acc

    @property
    def series(self) -> list[tuple[float, ...]]:
        return self.accounting.acc.series

    @property
    def jobs(self) -> dict[str, SimJob]:
        return self.admission.jobs

    @property
    def queue(self) -> SchedulingQueue[Run]:
        return self.cycle.queue

    @property
    def slot_runs(self) -> list[Run]:
        return self.slots.runs

    @property
    def s_use(self) -> np.ndarray:
        return self.slots.s_use

    @property
    def saturated(self) -> list[bool]:
        return self.clocks.saturated

    # --- one instant ------------------------------------------------------------------------------------------

    def _advance(self, t: float) -> None:
        self.accounting.advance(self.now, t, self.clocks.sum_eff_cpu, self.clocks.sum_be_eff)
        self.now = t

    def _arrive(self, spec: PodSpec) -> None:
        self.accounting.arrived(spec.arrival_s)
        run = self.admission.arrive(spec)
        if run is not None:
            self._enqueue(run, spec.arrival_s)

    def _dispatch(self, kind: int, data: object, t: float, more_arrivals: bool) -> None:
        if kind == NODE_DONE:
            clk, ver = data  # type: ignore[misc]
            finished = self.clocks.due(clk, t, ver)
            if finished is not None:
                for run in finished:
                    self._complete(run, t, replan=False)
                self.clocks.refresh(clk % self.cluster.size, t, force=True)  # once, after the whole batch
        elif kind == START:
            run, epoch = data  # type: ignore[misc]
            if run.epoch == epoch:
                self.runtime.start(run, t)
        elif kind == SERVICE_END:
            run, epoch = data  # type: ignore[misc]
            if run.epoch == epoch and run.state == RUNNING:
                self._complete(run, t)
        elif kind == TICK:
            self._tick(t)
            # Pending pods with nothing running, starting or arriving can never be placed: stop there. With a
            # reclaim model, not before the usage window has emptied: batch allocatable grows until then.
            if more_arrivals or self.slots.runs or self.runtime.starting:
                self.busy_t = t
                self.timeline.push(t + self.tick_s, TICK, None)
            elif (self.reclaim and self.cycle.pending_count
                  and t <= self.busy_t + self.rc.window_s + self.rc.period_s):
                self.timeline.push(t + self.tick_s, TICK, None)
        elif kind == REBALANCE:
            self.relocation.rebalance(t, self.slots)
            if more_arrivals or self.slots.runs:
                self.timeline.push(t + (self.cfg.rebalance_s or 0.0), REBALANCE, None)

    def _schedule(self, t: float) -> Generator[PodContext, Decision | None, None]:
        yield from self.cycle.schedule(t)

    def _tick(self, t: float) -> None:
        """A usage tick: clocks to t, usage resampled, CPU shares (and with reclaim the reclaim model and its
        evictions), a sample of the series."""
        slots, clocks = self.slots, self.clocks
        clocks.advance_all(t)
        slots.resampled(self.usage.resample(t, len(slots)))
        self.accounting.resampled()
        if self.qos is not None:
            shares, grew = self.qos.tick(t, slots)
            new_speed = clocks.set_shares(shares)
            self.cycle.room_grew(grew)
        else:
            new_speed = clocks.saturation()
        clocks.set_speeds(new_speed, t)
        if self.qos is not None:
            self.qos.evict(t, slots, self.relocation.evict)
        self.accounting.sample(t, clocks.sum_eff_cpu, self.cycle.pending_count, len(slots))
        if self.progress is not None:
            self.progress(t, self.workload.duration_s)

    # --- wiring -----------------------------------------------------------------------------------------------

    def _complete(self, run: Run, t: float, replan: bool = True) -> None:
        self.runtime.stop(run, t, replan)
        run.state = DONE
        self.accounting.finished(run, t)
        jct = self.admission.finish(run, t)
        if jct is not None:
            self.accounting.job_done(jct)

    def _enqueue(self, run: Run, t: float) -> None:
        self.cycle.enqueue(run, t)
        self.accounting.queued(run, t)

    def _bind(self, run: Run, d: Decision, options: list[Option], t: float) -> None:
        self.runtime.bind(run, d, options, t)

    def _started(self, when: float, run: Run) -> None:
        self.timeline.push(when, START, (run, run.epoch))

    def _service_end(self, when: float, run: Run) -> None:
        self.timeline.push(when, SERVICE_END, (run, run.epoch))

    def _plan_clock(self, when: float, clk: int, version: int) -> None:
        self.timeline.push(when, NODE_DONE, (clk, version))

    # --- the end ----------------------------------------------------------------------------------------------

    def _finish(self) -> None:
        now = self.now
        for job in self.admission.jobs.values():
            self.traffic.account(job, now)
        for run in self.slots.runs:
            if run.spec.qos == QoS.LS and run.spec.work_s is None:  # runs to the horizon: its life ends here
                self.clocks.leave(run, now)
                self.accounting.ls_life(run, now)
        stuck = len(self.cycle.queue) + self.admission.waiting()
        self.accounting.close(now, stuck, bool(self.slots.runs or self.runtime.starting))

    def _metrics(self, wall: float) -> dict[str, object]:
        c, a = self.cluster, self.accounting.acc
        out: dict[str, object] = {
            "policy": self.policy.name,
            "scenario": self.workload.name,
            "seed": self.seed,
            "reclaim": self.rc.model,
            "nodes": c.size,
            "pods": a.pods_arrived,
        }
        out.update(summarize(a, total_cpu=c.total_cpu, total_mem=c.total_mem, total_gpu_milli=c.total_gpu_milli))
        out["wall_s"] = wall
        out["placements_per_s"] = a.pods_scheduled / wall if wall > 0 else 0.0
        out["cross_rack_traffic_gb"] = a.cross_rack_mb / 1000.0
        out["cpu_util_window"] = self.accounting.window_util(self.now)
        out.update(self.traffic.summary())
        out["pods_finished"] = a.pods_finished
        out["pods_running_at_end"] = a.pods_scheduled - a.pods_finished
        if a.unschedulable_examples:
            out["unschedulable_examples"] = list(a.unschedulable_examples)
        if "bad_rows" in self.workload.info:
            out["trace_bad_rows"] = self.workload.info["bad_rows"]
        return out
