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
"""

from __future__ import annotations

import heapq
import itertools
import math
import time
from collections import Counter
from collections.abc import Callable, Generator
from dataclasses import dataclass, field

import numpy as np

from drlsched.cluster import REQUEST_ROW, Cluster, PodRequest
from drlsched.errors import UserError
from drlsched.fragmentation import FragmentationTracker, ShapeCounter
from drlsched.kube_scoring import POD_INITIAL_BACKOFF_S, POD_MAX_BACKOFF_S
from drlsched.metrics import Accumulator, Anomaly, summarize
from drlsched.network import Network
from drlsched.policies.base import Decision, Migration, Option, PodContext, Policy, ReclaimSignals
from drlsched.reclaim import (
    RHO_MAX,
    NodeForecast,
    ReclaimConfig,
    UsageWindow,
    batch_allocatable,
    borg_reservations,
    cpu_shares,
    ls_slowdown,
)
from drlsched.sched.cycle import decide, fits_somewhere, gpu_options, hint_request, pod_context
from drlsched.sched.jobs import Job, JobBook
from drlsched.sched.queue import Entry, SchedulingQueue
from drlsched.workload import PodSpec, QoS, Workload

INF = math.inf
EPS = 1e-7

# Event kinds, in the order they are handled at one instant.
_START, _NODE_DONE, _SERVICE_END, _TICK, _REBALANCE = range(5)
# Pod states.
_WAITING, _PENDING, _STARTING, _RUNNING, _DONE = range(5)


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


class _Job(Job["_Run"]):
    __slots__ = ("done", "last_done", "placed", "racks", "service", "submit", "talkers", "total", "unplaceable")

    def __init__(self, submit: float) -> None:
        super().__init__()
        self.submit = submit
        self.total = 0
        self.done = 0
        self.last_done = submit
        self.placed: Counter[int] = Counter()  # node -> this job's bound pods
        self.racks: Counter[int] = Counter()
        self.talkers: dict[_Run, None] = {}  # running pods with service traffic (ordered: deterministic sums)
        self.unplaceable = False
        self.service = False  # has long-running pods: not a job that finishes, left out of the JCT


class _Run:
    __slots__ = ("bind_t", "clk", "entry", "epoch", "gpu_ids", "gpus", "hint", "job", "node", "ready_t", "req",
                 "sat0", "sat_time", "series", "service_end", "slot", "slow0", "slow_sum", "spec", "start_t",
                 "startup", "state", "traffic_t", "work")

    def __init__(self, spec: PodSpec, job: _Job, startup: float) -> None:
        self.spec = spec
        self.job = job
        self.startup = startup
        self.ready_t = spec.arrival_s
        self.entry: Entry[_Run] | None = None  # while in the scheduling queue
        self.hint: tuple[int, ...] = ()  # its queueing-hint row (the least demanding option's request)
        self.bind_t = -1.0
        self.start_t = -1.0
        self.node = -1
        self.clk = -1  # its progress clock: its node's, or with reclaim its node's BE clock (node + nodes) for BE
        self.gpu_ids: tuple[int, ...] = ()
        self.gpus = spec.gpus
        self.req: PodRequest | None = None
        self.state = _WAITING
        self.epoch = 0
        self.slot = -1
        self.sat0 = 0.0
        self.sat_time = 0.0
        self.slow0 = 0.0
        self.slow_sum = 0.0  # ∫ slowdown dt while running (LS latency relative to an idle node)
        self.series = -1  # the real usage series driving its CPU (--usage-trace), -1 = none
        self.work = 0.0
        self.service_end = INF
        self.traffic_t = 0.0  # service traffic is accounted up to here


class Simulator:
    def __init__(self, workload: Workload, policy: Policy, seed: int, config: SimConfig | None = None,
                 progress: Callable[[float, float], None] | None = None) -> None:
        workload.validate_nodes()
        self.workload = workload
        self.policy = policy
        self.seed = seed
        self.cfg = config or SimConfig()
        self.progress = progress
        self.rc = self.cfg.reclaim
        self.reclaim = self.rc.enabled
        self.cluster = Cluster(workload.nodes, reclaim=self.reclaim)
        self.net = Network(self.cluster.rack, self.cfg.nic_gbps, self.cfg.rack_oversubscription,
                           self.cfg.share_links)
        seeds = np.random.SeedSequence(seed).spawn(4)  # the 4th: the replay's start in a part of the usage series
        self.rng_pod = np.random.default_rng(seeds[0])  # per-pod draws in arrival order: same for every policy
        self.rng_use = np.random.default_rng(seeds[1])
        policy.reset(self.cluster, np.random.default_rng(seeds[2]))
        dur = max(workload.duration_s, 1.0)
        self.tick_s = self.cfg.tick_s or max(15.0, dur / 4000.0)
        self.end_t = horizon(workload.duration_s, self.cfg.drain_s if self.cfg.drain_s is not None
                             else workload.drain_s)
        self.load_curve = workload.load_curve
        self.shapes = ShapeCounter()
        self.frag = FragmentationTracker(self.cluster, self.shapes) if self.cluster.total_gpu_milli else None
        self.acc = Accumulator()
        n = self.cluster.size
        # Per-clock contention state: virtual clock of batch progress, cumulative CPU-saturated time, cumulative
        # LS slowdown. One clock per node; with reclaim a second one per node (index node + n) for its BE pods,
        # which progress at their own share (CPU suppression).
        # Python lists, not arrays: they are read and written one node at a time on every pod event, where
        # numpy scalar access costs several times more; usage ticks convert them to arrays once.
        k = 2 * n if self.reclaim else n
        self.speed = [1.0] * k
        self.clock = [0.0] * k
        self.sat_cum = [0.0] * k
        self.slow = [1.0] * k  # LS slowdown on the node (ls_slowdown of its CPU utilisation)
        self.slow_cum = [0.0] * k
        self.node_t = [0.0] * k
        self.saturated = [False] * k
        self.node_heap: list[list] = [[] for _ in range(k)]
        self.node_ver = [0] * k
        self.eff_cpu = [0.0] * n  # min(usage, capacity); with reclaim, what the CPU shares grant
        self.be_eff = [0.0] * n  # of which BE pods (with reclaim)
        self.use_be = [0.0] * n  # BE pods' CPU demand (with reclaim)
        self.cap_cpu = [float(x) for x in self.cluster.cap_cpu]
        # Cluster-wide sums kept current as pods come and go, integrated over time by _advance.
        self.sum_eff_cpu = 0.0
        self.sum_be_eff = 0.0
        self._mem_now = 0.0
        self._gpu_now = 0.0
        self._req_cpu_now = 0
        self._gpu_alloc_now = 0
        # Running pods in slots, so usage ticks are array operations.
        self.slot_runs: list[_Run] = []
        cap = 1024
        self.s_node = np.zeros(cap, dtype=np.int64)
        self.s_base = np.zeros((cap, 3))  # request × mean usage ratio: cpu, mem, gpu
        self.s_sigma = np.zeros(cap)
        self.s_service = np.zeros(cap, dtype=bool)
        self.s_use = np.zeros((cap, 3))
        self._slot_arrays = ["s_node", "s_base", "s_sigma", "s_service", "s_use"]
        if self.reclaim:
            # Per running pod: BE or not, requests (cpu, mem), start time, Borg reservation, CPU usage history.
            self.hist_w = max(1, math.ceil(self.rc.window_s / self.tick_s))
            self.s_be = np.zeros(cap, dtype=bool)
            self.s_req = np.zeros((cap, 2))
            self.s_start = np.zeros(cap)
            self.s_resv = np.zeros((cap, 2))
            self.s_hist = np.zeros((cap, self.hist_w))
            self._slot_arrays += ["s_be", "s_req", "s_start", "s_resv", "s_hist"]
            self.window = UsageWindow(n, self.hist_w)
            self.forecast = NodeForecast(self.rc, n, self.tick_s) if self.rc.model == "forecast" else None
            self.hist_i = 0
            self.reclaim_t = self.rc.period_s  # batch allocatable is 0 until the first usage report
            self.resv_t = 0.0
            self.low_since = np.full(n, INF)  # since when BE CPU satisfaction has been low, per node
            self.satisfaction = np.ones(n)
            self.node_evictions = np.zeros(n)
        self.usage = workload.usage
        if self.usage is not None:
            # Real usage series, resampled to the tick, handed to LS pods in arrival order from a seeded start.
            self.u_grid, self.u_len = self.usage.grid(self.tick_s)
            self.u_next = seed % len(self.u_len)
            # A part of the series (--usage-window/--usage-series): each seed replays it from its own point, so the
            # seeds cover the part, not only its first minutes; the same point for every series keeps them in step.
            drawn = int(np.random.default_rng(seeds[3]).integers(int(self.u_len.max())))
            self.u_off = drawn if self.usage.drawn_start else 0
            self.s_series = np.full(cap, -1, dtype=np.int64)
            self._slot_arrays.append("s_series")
        self.by_uid: dict[str, _Run] = {}
        self._fit_cache: dict[tuple, bool] = {}
        self.jobs: dict[str, _Job] = {}
        self.book: JobBook[_Run] = JobBook()
        self.events: list[tuple] = []
        self.seq = itertools.count()
        self.queue: SchedulingQueue[_Run] = SchedulingQueue(self.cfg.backoff_initial_s, self.cfg.backoff_max_s,
                                                             hint_width=REQUEST_ROW)
        self.freed: set[int] = set()  # nodes whose room grew since the last scheduling pass
        self.now = 0.0
        self.window_cpu_s: float | None = None
        self.busy_t = 0.0  # the last usage tick with pods running, starting or still to arrive
        self.starting = 0
        self.pending_count = 0

    # --- public -------------------------------------------------------------------------------------------

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
        self._push(0.0, _TICK, None)
        if self.cfg.rebalance_s:
            self._push(self.cfg.rebalance_s, _REBALANCE, None)
        while True:
            t_ev = self.events[0][0] if self.events else INF
            t_arr = nxt.arrival_s if nxt is not None else INF
            t = min(t_ev, t_arr)
            if t == INF or t > self.end_t:
                break
            self._advance(t)
            while nxt is not None and nxt.arrival_s <= t:
                self._arrive(nxt)
                nxt = next(pods, None)
            while self.events and self.events[0][0] <= t:
                _, _, kind, data = heapq.heappop(self.events)
                self._dispatch(kind, data, t, nxt is not None)
            if self.book.pending_release:
                for run in self.book.release():
                    self._enqueue(run, t)
            q = self.queue
            if self.freed:
                if q.parked:
                    q.wake(t, self._fit_hint(self.freed))
                self.freed = set()
            if q.parked and q.next_change() <= t:
                q.flush(t)
            if q.has_ready():
                yield from self._schedule(t)
        self._finish()
        wall = time.perf_counter() - wall0
        out: dict[str, object] = {
            "policy": self.policy.name,
            "scenario": self.workload.name,
            "seed": self.seed,
            "reclaim": self.rc.model,
            "nodes": self.cluster.size,
            "pods": self.acc.pods_arrived,
        }
        out.update(summarize(self.acc, total_cpu=self.cluster.total_cpu, total_mem=self.cluster.total_mem,
                             total_gpu_milli=self.cluster.total_gpu_milli))
        out["wall_s"] = wall
        out["placements_per_s"] = self.acc.pods_scheduled / wall if wall > 0 else 0.0
        out["cross_rack_traffic_gb"] = self.acc.cross_rack_mb / 1000.0
        out["cpu_util_window"] = self._window_util()
        out.update(self.net.summary())
        out["pods_finished"] = self.acc.pods_finished
        out["pods_running_at_end"] = self.acc.pods_scheduled - self.acc.pods_finished
        if self.acc.unschedulable_examples:
            out["unschedulable_examples"] = list(self.acc.unschedulable_examples)
        if "bad_rows" in self.workload.info:
            out["trace_bad_rows"] = self.workload.info["bad_rows"]
        return out

    def _window_util(self) -> float:
        """CPU used / capacity from the first arrival to the end of the arrival window (or of the run if sooner)."""
        a = self.acc
        if a.first_arrival is None:
            return 0.0
        used = self.window_cpu_s if self.window_cpu_s is not None else a.cpu_use_s
        span = min(self.workload.duration_s, self.now) - a.first_arrival
        return used / (span * self.cluster.total_cpu) if span > 0 else 0.0

    @property
    def series(self) -> list[tuple[float, ...]]:
        return self.acc.series

    # --- event plumbing -----------------------------------------------------------------------------------

    def _push(self, t: float, kind: int, data: object) -> None:
        heapq.heappush(self.events, (t, next(self.seq), kind, data))

    def _dispatch(self, kind: int, data: object, t: float, more_arrivals: bool) -> None:
        if kind == _NODE_DONE:
            node, ver = data  # type: ignore[misc]
            if ver == self.node_ver[node]:
                self._node_done(node, t)
        elif kind == _START:
            run, epoch = data  # type: ignore[misc]
            if run.epoch == epoch:
                self._start(run, t)
        elif kind == _SERVICE_END:
            run, epoch = data  # type: ignore[misc]
            if run.epoch == epoch and run.state == _RUNNING:
                self._complete(run, t)
        elif kind == _TICK:
            self._tick(t)
            # Pending pods with nothing running, starting or arriving can never be placed: stop there. With a
            # reclaim model, not before the usage window has emptied: batch allocatable grows until then.
            if more_arrivals or self.slot_runs or self.starting:
                self.busy_t = t
                self._push(t + self.tick_s, _TICK, None)
            elif self.reclaim and self.pending_count and t <= self.busy_t + self.rc.window_s + self.rc.period_s:
                self._push(t + self.tick_s, _TICK, None)
        elif kind == _REBALANCE:
            self._rebalance(t)
            if more_arrivals or self.slot_runs:
                self._push(t + (self.cfg.rebalance_s or 0.0), _REBALANCE, None)

    # --- time integration ---------------------------------------------------------------------------------

    def _advance(self, t: float) -> None:
        dt = t - self.now
        if dt > 0 and self.acc.first_arrival is not None:
            a = self.acc
            a.cpu_use_s += self.sum_eff_cpu * dt
            a.cpu_reclaimed_s += self.sum_be_eff * dt
            a.mem_use_s += self._mem_now * dt
            a.gpu_use_s += self._gpu_now * dt
            a.cpu_alloc_s += self._req_cpu_now * dt
            a.gpu_alloc_s += self._gpu_alloc_now * dt
            if self.frag is not None:
                self.frag.integrate(a, dt)
            if self.window_cpu_s is None and t >= self.workload.duration_s:
                # CPU used by the end of the arrival window: the steady state, without the drain.
                self.window_cpu_s = a.cpu_use_s - self.sum_eff_cpu * (t - max(self.workload.duration_s, self.now))
        self.now = t

    def _touch(self, node: int, t: float) -> None:
        """Bring a clock (its virtual time, saturated time and slowdown integral) up to t before its state
        changes."""
        dt = t - self.node_t[node]
        if dt > 0:
            self.clock[node] += dt * self.speed[node]
            if self.saturated[node]:
                self.sat_cum[node] += dt
            self.slow_cum[node] += dt * self.slow[node]
            self.node_t[node] = t

    def _refresh(self, node: int, t: float, force: bool = False) -> None:
        """Recompute a node's speed and saturation after its usage changed; re-plan its next completion."""
        if self.reclaim:
            self._refresh_shared(node, t, force)
            return
        use = float(self.cluster.use_cpu[node])
        cap = self.cap_cpu[node]
        eff = min(use, cap)
        self.sum_eff_cpu += eff - self.eff_cpu[node]
        self.eff_cpu[node] = eff
        self.saturated[node] = use > cap * (1 + 1e-9)
        self.slow[node] = 1.0 / (1.0 - min(eff / cap, RHO_MAX))
        speed = cap / use if use > cap else 1.0
        if speed != self.speed[node] or force:
            self.speed[node] = speed
            self._plan_node(node, t)

    def _refresh_shared(self, node: int, t: float, force: bool) -> None:
        """With reclaim: the node's CPU shared between its non-BE and BE pods (`cpu_shares`); both clocks move."""
        be = node + self.cluster.size
        self._touch(node, t)
        self._touch(be, t)
        d_be = self.use_be[node]
        d_ls = max(float(self.cluster.use_cpu[node]) - d_be, 0.0)
        share = cpu_shares(self.cap_cpu[node], d_ls, d_be, self.rc.suppress, self._crowd(node), min, max)
        ls_speed, be_speed, ls_alloc, be_alloc, slow = share
        eff = ls_alloc + be_alloc
        self.sum_eff_cpu += eff - self.eff_cpu[node]
        self.sum_be_eff += be_alloc - self.be_eff[node]
        self.eff_cpu[node] = eff
        self.be_eff[node] = be_alloc
        self.slow[node] = slow
        self.saturated[node] = slow > self.rc.ls_slowdown_target
        for clk, speed in ((node, ls_speed), (be, be_speed)):
            if speed != self.speed[clk] or force:
                self.speed[clk] = speed
                self._plan_node(clk, t)

    def _crowd(self, node: int) -> float:
        """Interference: 1 + the configured slowdown per co-running pod (Borg's CPI study: ~0.3% each)."""
        f = self.rc.interference
        return 1.0 + f * max(int(self.cluster.pods[node]) - 1, 0) if f else 1.0

    def _plan_node(self, node: int, t: float) -> None:
        heap = self.node_heap[node]
        while heap and heap[0][2].epoch != heap[0][3]:
            heapq.heappop(heap)
        self.node_ver[node] += 1
        if heap:
            when = t + max(0.0, heap[0][0] - self.clock[node]) / self.speed[node]
            self._push(when, _NODE_DONE, (node, self.node_ver[node]))

    # --- arrivals and the queue ---------------------------------------------------------------------------

    def _arrive(self, spec: PodSpec) -> None:
        a = self.acc
        a.pods_arrived += 1
        if a.first_arrival is None:
            a.first_arrival = spec.arrival_s
        job = self.jobs.get(spec.job_id)
        if job is None:
            job = self.jobs[spec.job_id] = _Job(spec.arrival_s)
        job.total += 1
        job.service |= spec.service
        startup = spec.startup_s if spec.startup_s is not None else self._draw_startup(self.rng_pod)
        run = _Run(spec, job, startup)
        run.req = self.cluster.request(spec)
        if self.usage is not None and spec.qos == QoS.LS:
            run.series = self.u_next
            self.u_next = (self.u_next + 1) % len(self.u_len)
        run.hint = hint_request(spec, self.cluster, run.req).row()
        self.shapes.add(run.req.cpu, run.req.gpus, run.req.gpu_milli, run.req.model_mask)
        if not self._fits_somewhere_empty(run):
            job.count(spec.task)  # its task never finishes: the job's later tasks wait for ever, as in Kubernetes
            self._reject(run)
            return
        if self.book.arrive(job, spec, run):
            self._enqueue(run, spec.arrival_s)

    def _draw_startup(self, rng: np.random.Generator) -> float:
        return max(0.05, float(rng.normal(self.cfg.startup_mean_s, self.cfg.startup_std_s)))

    def _fits_somewhere_empty(self, run: _Run) -> bool:
        spec = run.spec
        key = (spec.cpu_m, spec.mem_mib, spec.gpus, spec.gpu_milli, spec.gpu_models, spec.tolerations,
               spec.gpu_options)
        fits = self._fit_cache.get(key)
        if fits is None:
            fits = self._fit_cache[key] = self._fits_empty_uncached(run)
        return fits

    def _fits_empty_uncached(self, run: _Run) -> bool:
        c = self.cluster
        return any(c.fits_when_empty(c.request(run.spec, g)) for g in gpu_options(run.spec))

    def _reject(self, run: _Run) -> None:
        spec = run.spec
        reason = self.cluster.infeasible_reason(run.req)  # type: ignore[arg-type]
        msg = (f"pod {spec.uid} (job {spec.job_id}: {spec.cpu_m}m CPU, {spec.mem_mib}Mi, {spec.gpus} GPU"
               f"{' x ' + str(spec.gpu_milli) + 'm' if spec.gpus else ''}"
               f"{' model ' + '|'.join(spec.gpu_models) if spec.gpu_models else ''}) fits no node even on an "
               f"empty cluster: {reason}")
        if not self.cfg.allow_unschedulable:
            raise UserError(msg + "; pass --allow-unschedulable to count such pods and go on")
        self.acc.pods_unschedulable += 1
        self.acc.wait_start(spec.uid, spec.arrival_s)
        run.job.unplaceable = True
        if len(self.acc.unschedulable_examples) < 5:
            self.acc.unschedulable_examples.append(msg)

    def _enqueue(self, run: _Run, t: float) -> None:
        run.ready_t = t
        run.state = _PENDING
        self.pending_count += 1
        run.entry = self.queue.add(run, run.spec.priority, t)
        self.acc.wait_start(run.spec.uid, t)

    def _fit_hint(self, freed: set[int]) -> Callable[[np.ndarray], np.ndarray]:
        """NodeResourcesFit's queueing hint after pods left the `freed` nodes: a parked pod may fit now only where
        room grew (any other node fits it no better than at its last failed attempt)."""
        nodes = np.fromiter(sorted(freed), np.int64, len(freed))
        return lambda rows: self.cluster.fits_any(rows, nodes)

    def _schedule(self, t: float) -> Generator[PodContext, Decision | None, None]:
        """One scheduling pass at time t over the queue (`drlsched.sched.queue`): activeQ by priority, then by when
        a pod (re)entered it, then the woken pods still within their backoff (SchedulerPopFromBackoffQ). A pod
        that fits nowhere is parked until room grows where it would fit."""
        c = self.cluster
        q = self.queue
        failed: list[PodRequest] = []
        while (entry := q.pop(t)) is not None:
            run = entry.pod
            r0 = run.req
            assert r0 is not None
            # Nothing frees during a pass: a pod needing at least what already fit nowhere fits nowhere either.
            if not run.spec.gpu_options and any(_dominates(r0, f) for f in failed):
                q.park(entry, t, run.hint)  # type: ignore[arg-type]
                continue
            job = run.job
            ctx = pod_context(run.spec, c, t, job_nodes=job.placed, typical=self.shapes.current,
                              default_request=r0, policy=self.policy,
                              data_nodes=lambda job=job, spec=run.spec: job.data_nodes(spec.parents))
            if not fits_somewhere(ctx):
                q.park(entry, t, run.hint)  # type: ignore[arg-type]
                if not run.spec.gpu_options:
                    # Keep only the minimal failed requests: the check above stays short.
                    failed = [f for f in failed if not _dominates(f, r0)]
                    failed.append(r0)
                continue
            if self.reclaim and self.policy.wants_reclaim_signals:
                ctx.reclaim = ReclaimSignals(np.maximum(c.use_cpu - np.asarray(self.use_be), 0.0),
                                             np.minimum(self.satisfaction, 1.0), self.node_evictions.copy())
            decision = yield ctx
            # The policy left it pending although it fits (a hold; for BE pods the admission decision): parked
            # without a hint, so the next cluster event wakes it, with backoff.
            if decision is None:
                q.park(entry, t)
                continue
            q.done(entry)
            run.entry = None
            self._bind(run, decision, ctx.options, t)

    def _bind(self, run: _Run, d: Decision, options: list[Option], t: float) -> None:
        option = next((o for o in options if o.gpus == d.gpus), None)
        if option is None or not (0 <= d.node < self.cluster.size) or not option.feasible[d.node]:
            raise RuntimeError(f"policy {self.policy.name} chose infeasible node {d.node} for {run.spec.uid}")
        c = self.cluster
        r = option.request
        ids = d.gpu_ids if d.gpu_ids is not None else c.pick_gpus(d.node, r)
        c.allocate(d.node, r, ids)
        if self.frag is not None:
            self.frag.touch(d.node)
        c.starting_cpu[d.node] += r.cpu
        run.req, run.node, run.gpu_ids, run.gpus = r, d.node, ids, d.gpus
        self.acc.wait_end(run.spec.uid, t)
        if run.bind_t < 0:
            run.bind_t = t
            self.acc.pods_scheduled += 1
            self.acc.pending.append(t - run.ready_t)
        if run.spec.qos == QoS.BE:
            self.acc.be_pending.append(t - run.ready_t)
        self.pending_count -= 1
        run.state = _STARTING
        self.starting += 1
        self._account_traffic(run.job, t)
        run.job.placed[d.node] += 1
        run.job.racks[int(c.rack[d.node])] += 1
        self._req_cpu_now += r.cpu
        self._gpu_alloc_now += r.gpus * r.gpu_milli
        self._push(t + run.startup, _START, (run, run.epoch))
        if self.cfg.check_invariants:
            c.check_invariants()

    # --- running pods -------------------------------------------------------------------------------------

    def _start(self, run: _Run, t: float) -> None:
        spec, c, node = run.spec, self.cluster, run.node
        self.starting -= 1
        c.starting_cpu[node] -= run.req.cpu  # type: ignore[union-attr]
        run.state = _RUNNING
        if run.start_t < 0:
            run.start_t = t
            self.acc.started(spec.uid, t - run.ready_t)  # creation → running (no image pulls modelled)
        self.by_uid[spec.uid] = run
        read_s = self._shuffle_read(run, t)
        work = spec.work_s if spec.work_s is not None else INF
        if spec.gpu_options and run.gpus > 1 and spec.gpus <= 1:
            work /= max(spec.elastic_speedup, 1e-9)
        if not spec.service and math.isfinite(work):
            work = (run.work or work) + read_s
        run.work = work
        # usage slot
        clk = run.clk = node + c.size if c.reclaim and spec.qos == QoS.BE else node
        self._touch(clk, t)
        self._add_slot(run, t)
        run.sat0 = self.sat_cum[clk]
        run.slow0 = self.slow_cum[clk]
        if spec.service or not math.isfinite(work):
            if math.isfinite(work):
                if run.service_end == INF:  # a migrated service keeps its deletion time
                    run.service_end = t + work
                self._push(max(t, run.service_end), _SERVICE_END, (run, run.epoch))
            self._refresh(node, t)
        else:
            heap = self.node_heap[clk]
            heapq.heappush(heap, (self.clock[clk] + work, next(self.seq), run, run.epoch))
            # The planned completion event stays valid unless this pod finishes first (or the speed changed).
            self._refresh(node, t, force=heap[0][2] is run)
        if spec.traffic_mbps > 0:
            run.traffic_t = t
            run.job.talkers[run] = None

    def _shuffle_read(self, run: _Run, t: float) -> float:
        """Seconds the pod's shuffle read takes (the links' shares at t); counts its cross-node and cross-rack MB."""
        spec = run.spec
        if spec.shuffle_in_mb <= 0:
            return 0.0
        sources: list[int] = []
        for p in spec.parents:
            info = run.job.tasks.get(p)
            if info:
                sources.extend(info.nodes)
        if not spec.parents:
            sources = run.job.tasks[spec.task].nodes
        seconds, remote_mb, cross_mb = self.net.read(t, run.node, sources, spec.shuffle_in_mb)
        self.acc.cross_node_mb += remote_mb
        self.acc.cross_rack_mb += cross_mb
        return seconds

    def _add_slot(self, run: _Run, t: float) -> None:
        i = len(self.slot_runs)
        if i == self.s_node.shape[0]:
            self._grow_slots()
        spec, r = run.spec, run.req
        self.slot_runs.append(run)
        run.slot = i
        self.s_node[i] = run.node
        base_cpu = r.cpu * spec.usage_cpu  # type: ignore[union-attr]
        base_mem = r.mem * spec.usage_mem  # type: ignore[union-attr]
        base_gpu = r.gpus * r.gpu_milli * spec.usage_gpu  # type: ignore[union-attr]
        self.s_base[i] = (base_cpu, base_mem, base_gpu)
        self.s_sigma[i] = math.sqrt(math.log1p(spec.usage_cv ** 2))
        self.s_service[i] = spec.service
        # As at usage ticks, the load curve scales the CPU of services; memory and GPU keep their mean.
        use_cpu = base_cpu * self.load_curve(t) if (spec.service and self.load_curve) else base_cpu
        if self.usage is not None:
            self.s_series[i] = run.series
            if run.series >= 0:  # a real series drives its CPU: request × the series (× its mean ratio if a shape)
                base_cpu = r.cpu * (spec.usage_cpu if self.usage.relative else 1.0)  # type: ignore[union-attr]
                self.s_base[i, 0] = base_cpu
                self.s_sigma[i] = 0.0
                k = (int(t // self.tick_s) + self.u_off) % self.u_len[run.series]
                use_cpu = base_cpu * float(self.u_grid[run.series, k])
        self.s_use[i] = (use_cpu, base_mem, base_gpu)
        if self.reclaim:
            be = spec.qos == QoS.BE
            self.s_be[i] = be
            self.s_req[i] = (r.cpu, r.mem)  # type: ignore[union-attr]
            self.s_start[i] = t
            self.s_resv[i] = (r.cpu, r.mem)  # type: ignore[union-attr]
            self.s_hist[i] = r.cpu  # type: ignore[union-attr]  # the peak predictor starts from the request
            if be:
                self.use_be[run.node] += use_cpu
        self._apply_use(run.node, use_cpu, base_mem, base_gpu)

    def _remove_slot(self, run: _Run) -> None:
        i, last = run.slot, len(self.slot_runs) - 1
        use_cpu, use_mem, use_gpu = self.s_use[i].tolist()
        if self.reclaim and self.s_be[i]:
            self.use_be[run.node] -= use_cpu
        self._apply_use(run.node, -use_cpu, -use_mem, -use_gpu)
        moved = self.slot_runs[last]
        self.slot_runs[i] = moved
        moved.slot = i
        for name in self._slot_arrays:
            arr = getattr(self, name)
            arr[i] = arr[last]
        self.slot_runs.pop()
        run.slot = -1

    def _apply_use(self, node: int, cpu: float, mem: float, gpu: float) -> None:
        """Add a pod's usage to its node (negative amounts remove it) and keep the cluster sums current."""
        c = self.cluster
        c.use_cpu[node] += cpu
        cap_mem = c.cap_mem[node]
        old_mem = c.use_mem[node]
        new_mem = old_mem + mem
        c.use_mem[node] = new_mem
        self._mem_now += min(new_mem, cap_mem) - min(old_mem, cap_mem)
        if gpu:
            c.use_gpu[node] += gpu
            self._gpu_now += gpu

    def _grow_slots(self) -> None:
        for name in self._slot_arrays:
            arr = getattr(self, name)
            new = np.zeros((arr.shape[0] * 2, *arr.shape[1:]), dtype=arr.dtype)
            new[: arr.shape[0]] = arr
            setattr(self, name, new)

    def _node_done(self, clk: int, t: float) -> None:
        self._touch(clk, t)
        heap = self.node_heap[clk]
        clock = self.clock[clk]
        finished = []
        while heap and (heap[0][2].epoch != heap[0][3] or heap[0][0] <= clock + EPS * max(1.0, clock)):
            _, _, run, epoch = heapq.heappop(heap)
            if run.epoch == epoch:
                finished.append(run)
        for run in finished:
            self._complete(run, t, replan=False)
        self._refresh(clk % self.cluster.size, t, force=True)  # once, after the whole batch of completions

    def _stop(self, run: _Run, t: float, replan: bool = True) -> None:
        """Take a running pod off its node (finished or migrated)."""
        c, node = self.cluster, run.node
        self._touch(run.clk, t)
        run.sat_time += self.sat_cum[run.clk] - run.sat0
        run.slow_sum += self.slow_cum[run.clk] - run.slow0
        self._remove_slot(run)
        if replan:
            self._refresh(node, t)
        c.release(node, run.req, run.gpu_ids)  # type: ignore[arg-type]
        if self.frag is not None:
            self.frag.touch(node)
        self._req_cpu_now -= run.req.cpu  # type: ignore[union-attr]
        self._gpu_alloc_now -= run.req.gpus * run.req.gpu_milli  # type: ignore[union-attr]
        self._account_traffic(run.job, t)
        run.job.talkers.pop(run, None)
        run.job.placed[node] -= 1
        run.job.racks[int(c.rack[node])] -= 1
        self.by_uid.pop(run.spec.uid, None)
        run.epoch += 1
        self.freed.add(node)

    def _complete(self, run: _Run, t: float, replan: bool = True) -> None:
        self._stop(run, t, replan)
        run.state = _DONE
        spec, job, a = run.spec, run.job, self.acc
        a.pods_finished += 1
        a.finished(spec.uid)
        a.last_finish = max(a.last_finish, t)
        if spec.qos == QoS.LS:
            self._account_ls(run, t)
        self.book.finish(job, spec.task, run.node)
        job.done += 1
        job.last_done = t
        if job.done == job.total and not job.n_waiting:
            if not job.unplaceable and not job.service:
                a.jct.append(t - job.submit)
            self.jobs.pop(spec.job_id, None)

    def _account_ls(self, run: _Run, t: float) -> None:
        """An LS pod's SLA (saturated, or with reclaim too slow, for more than a share of its life; or pending too
        long) and its mean slowdown over its life."""
        a = self.acc
        a.ls_pods += 1
        life = t - run.start_t
        pend = run.bind_t - run.ready_t
        if run.sat_time > self.cfg.sla_saturated_fraction * life or pend > self.cfg.sla_pending_s:
            a.ls_violations += 1
            a.flag(run.spec.uid, Anomaly.SLA_BREACH)
        if life > 0:
            a.ls_slowdown.append(run.slow_sum / life)

    # --- ticks --------------------------------------------------------------------------------------------

    def _tick(self, t: float) -> None:
        n = len(self.slot_runs)
        c = self.cluster
        # Bring every clock to t under the old usage, then resample usage.
        dt = t - np.array(self.node_t)
        self.clock = (np.array(self.clock) + dt * np.array(self.speed)).tolist()
        self.sat_cum = (np.array(self.sat_cum) + np.where(self.saturated, dt, 0.0)).tolist()
        self.slow_cum = (np.array(self.slow_cum) + dt * np.array(self.slow)).tolist()
        self.node_t = [t] * len(self.node_t)
        if n:
            sigma = self.s_sigma[:n]
            noise = np.exp(self.rng_use.standard_normal(n) * sigma - 0.5 * sigma * sigma)
            use = self.s_base[:n] * noise[:, None]
            use[:, 1] = self.s_base[:n, 1]  # memory holds steady; CPU and GPU fluctuate
            series = self.s_series[:n] if self.usage is not None else None
            if self.load_curve is not None:
                load = self.load_curve(t)
                use[self.s_service[:n] if series is None else self.s_service[:n] & (series < 0), 0] *= load
            if series is not None:
                rows = np.flatnonzero(series >= 0)
                j = series[rows]
                use[rows, 0] *= self.u_grid[j, (int(t // self.tick_s) + self.u_off) % self.u_len[j]]
            self.s_use[:n] = use
            nodes = self.s_node[:n]
            size = c.size
            c.use_cpu = np.bincount(nodes, weights=use[:, 0], minlength=size)
            c.use_mem = np.bincount(nodes, weights=use[:, 1], minlength=size)
            c.use_gpu = np.bincount(nodes, weights=use[:, 2], minlength=size)
        else:
            c.use_cpu[:] = 0.0
            c.use_mem[:] = 0.0
            c.use_gpu[:] = 0.0
        self._mem_now = float(np.minimum(c.use_mem, c.cap_mem).sum())
        self._gpu_now = float(c.use_gpu.sum())
        new_speed = self._reclaim_tick(t, n) if self.reclaim else self._saturation(t)
        changed = np.flatnonzero(new_speed != np.array(self.speed))
        self.speed = new_speed.tolist()
        for node in changed:
            if self.node_heap[node]:
                self._plan_node(int(node), t)
        if self.reclaim:
            self._evict_be(t)
        self._sample(t)
        if self.progress is not None:
            self.progress(t, self.workload.duration_s)

    def _saturation(self, t: float) -> np.ndarray:
        """Without reclaim: pods on a node whose CPU demand exceeds its capacity progress at capacity / demand."""
        c = self.cluster
        cap = c.cap_cpu
        eff = np.minimum(c.use_cpu, cap)
        self.eff_cpu = eff.tolist()
        self.sum_eff_cpu = float(eff.sum())
        self.slow = ls_slowdown(eff / cap).tolist()
        saturated = c.use_cpu > cap * (1 + 1e-9)
        self.saturated = saturated.tolist()
        return np.where(saturated, cap / np.maximum(c.use_cpu, 1e-9), 1.0)

    def _reclaim_tick(self, t: float, n: int) -> np.ndarray:
        """With reclaim: CPU shares on every node, the reclaim model's usage window and Borg reservations, and
        every `period_s` the batch allocatable; returns the speeds of all clocks (non-BE, then BE)."""
        c, rc = self.cluster, self.rc
        size = c.size
        be = self.s_be[:n]
        nodes = self.s_node[:n]
        use = self.s_use[:n]
        use_be = np.bincount(nodes, weights=use[:, 0] * be, minlength=size)
        self.use_be = use_be.tolist()
        d_ls = np.maximum(c.use_cpu - use_be, 0.0)
        crowd = 1.0 + rc.interference * np.maximum(c.pods - 1, 0)
        ls_speed, be_speed, ls_alloc, be_alloc, slow = cpu_shares(c.cap_cpu, d_ls, use_be, rc.suppress, crowd,
                                                                  np.minimum, np.maximum)
        eff = ls_alloc + be_alloc
        self.eff_cpu = eff.tolist()
        self.be_eff = be_alloc.tolist()
        self.sum_eff_cpu = float(eff.sum())
        self.sum_be_eff = float(be_alloc.sum())
        self.slow = np.concatenate([slow, np.ones(size)]).tolist()
        self.saturated = np.concatenate([slow > rc.ls_slowdown_target, np.zeros(size, dtype=bool)]).tolist()
        # What the reclaim model sees: the non-BE pods' usage per node and per pod.
        hp = ~be
        hp_mem = np.bincount(nodes, weights=use[:, 1] * hp, minlength=size)
        self.window.add(d_ls, hp_mem)
        if self.forecast is not None:
            self.forecast.add(d_ls, hp_mem)
        self.s_hist[:n, self.hist_i] = use[:, 0]
        self.hist_i = (self.hist_i + 1) % self.hist_w
        if rc.model == "borg":
            self.s_resv[:n] = borg_reservations(rc, self.s_resv[:n], self.s_req[:n], use[:, :2], t - self.s_start[:n],
                                                t - self.resv_t)
            self.resv_t = t
        if t >= self.reclaim_t:
            self.reclaim_t = t + rc.period_s
            free0 = c.batch_cpu - c.be_cpu, c.batch_mem - c.be_mem
            c.batch_cpu, c.batch_mem = batch_allocatable(rc, c.cap_cpu, c.cap_mem, self.window, nodes[hp],
                                                         self.s_resv[:n][hp], self.s_hist[:n][hp], self.forecast)
            # Room for BE pods grew on these nodes: parked BE pods may fit there now (the queueing hint).
            grew = (c.batch_cpu - c.be_cpu > free0[0]) | (c.batch_mem - c.be_mem > free0[1])
            self.freed.update(np.flatnonzero(grew).tolist())
        # Koordinator's CPU eviction: BE satisfaction (what suppression grants / BE requests) low while BE pods
        # use what they are granted, for long enough.
        be_lim = np.maximum(c.cap_cpu * rc.suppress - ls_alloc, 0.0)
        satisfaction = be_lim / np.maximum(c.be_cpu, 1)
        low = (c.be_cpu > 0) & (satisfaction < rc.evict_cpu_satisfaction) & (be_alloc >= 0.9 * be_lim)
        self.low_since = np.where(low, np.minimum(self.low_since, t), INF)
        self.satisfaction = satisfaction
        return np.concatenate([ls_speed, be_speed])

    def _evict_be(self, t: float) -> None:
        """Koordinator's BE evictions: on a node above the memory threshold, BE pods by memory use (largest
        first) until under it; on a node whose BE satisfaction stayed low for the window, BE pods by CPU use until
        (target − satisfaction) × BE requests of CPU are freed. Evicted pods go back to the queue."""
        c, rc = self.cluster, self.rc
        mem_over = c.use_mem - rc.evict_mem_threshold * c.cap_mem
        cpu_fire = t - self.low_since >= rc.evict_cpu_window_s
        hot = np.flatnonzero(((mem_over > 0) | cpu_fire) & (c.be_cpu > 0))
        if not hot.size:
            return
        for node in hot.tolist():
            n = len(self.slot_runs)  # evictions on the previous node moved slots
            mine = np.flatnonzero(self.s_be[:n] & (self.s_node[:n] == node))
            if mem_over[node] > 0:
                col, need = 1, mem_over[node]
            else:
                col, need = 0, (rc.evict_cpu_target - self.satisfaction[node]) * c.be_cpu[node]
                self.low_since[node] = INF
            order = mine[np.argsort(-self.s_use[mine, col], kind="stable")]
            amount = self.s_use[order, col] if col else self.s_req[order, 0]
            k = int(np.searchsorted(np.cumsum(amount), need)) + 1
            for run in [self.slot_runs[i] for i in order[:k].tolist()]:
                self._evict(run, t)

    def _evict(self, run: _Run, t: float) -> None:
        self.node_evictions[run.node] += 1
        done = self._progress(run, t)
        self._stop(run, t)
        self.acc.evictions += 1
        self.acc.flag(run.spec.uid, Anomaly.EVICTED)
        self._restart_work(run, done)
        self._enqueue(run, t)

    def _account_traffic(self, job: _Job, t: float) -> None:
        """Service traffic of the job's running pods up to t, at the job's spread over nodes and racks since the
        last accounting; called before every change of that spread, so the integral is exact."""
        others = sum(job.placed.values()) - 1
        for run in job.talkers:
            dt, run.traffic_t = t - run.traffic_t, t
            if others <= 0 or dt <= 0:
                continue
            remote = (others + 1 - job.placed[run.node]) / others
            remote_rack = (others + 1 - job.racks[int(self.cluster.rack[run.node])]) / others
            mb = run.spec.traffic_mbps * dt / 8.0
            self.acc.cross_node_mb += mb * remote
            self.acc.cross_rack_mb += mb * remote_rack

    def _sample(self, t: float) -> None:
        c, a = self.cluster, self.acc
        if self.cfg.series:
            frag = self.frag.ratio() if self.frag is not None else 0.0
            gcap = c.total_gpu_milli or 1
            a.series.append((t, self.sum_eff_cpu / c.total_cpu, self._mem_now / c.total_mem,
                             self._gpu_now / gcap, self._req_cpu_now / c.total_cpu, self._gpu_alloc_now / gcap,
                             float(self.pending_count), float(len(self.slot_runs)), frag))

    def _rebalance(self, t: float) -> None:
        running = [(r.spec.uid, r.node) for r in self.slot_runs]
        for m in self.policy.rebalance(self.cluster, running, t):
            self._migrate(m, t)

    def _migrate(self, m: Migration, t: float) -> None:
        run = self.by_uid.get(m.pod_uid)
        if run is None or m.node == run.node:
            return
        c = self.cluster
        done = self._progress(run, t)
        self._stop(run, t)
        if not c.feasible(run.req)[m.node]:  # type: ignore[arg-type]
            raise RuntimeError(f"policy {self.policy.name} migrated {m.pod_uid} to infeasible node {m.node}")
        self.acc.migrations += 1
        self.acc.flag(m.pod_uid, Anomaly.PREEMPTED_OR_MIGRATED)
        self._restart_work(run, done)
        self.pending_count += 1
        self._bind(run, Decision(m.node, run.gpus), [Option(run.gpus, run.req, c.feasible(run.req))], t)

    def _progress(self, run: _Run, t: float) -> float:
        """Seconds of work a running batch pod has done (0 for services and pods still starting)."""
        if run.spec.service or run.slot < 0 or not math.isfinite(run.work):
            return 0.0
        self._touch(run.clk, t)
        target = next((e[0] for e in self.node_heap[run.clk] if e[2] is run and e[3] == run.epoch), None)
        return max(0.0, run.work - (target - self.clock[run.clk])) if target is not None else 0.0

    def _restart_work(self, run: _Run, done: float) -> None:
        """A pod taken off its node restarts: its remaining work if checkpointable, else all of it; a new cold
        start."""
        if run.spec.service:
            run.work = 0.0
        else:
            run.work = max(run.work - done, 0.0) if run.spec.checkpointable else 0.0
        if run.spec.startup_s is None:
            run.startup = self._draw_startup(self.rng_use)

    def _finish(self) -> None:
        a = self.acc
        for job in self.jobs.values():
            self._account_traffic(job, self.now)
        for run in self.slot_runs:
            if run.spec.qos == QoS.LS and run.spec.work_s is None:  # runs to the horizon: its life ends here
                self._touch(run.clk, self.now)
                run.sat_time += self.sat_cum[run.clk] - run.sat0
                run.slow_sum += self.slow_cum[run.clk] - run.slow0
                self._account_ls(run, self.now)
        stuck = len(self.queue)
        waiting = sum(j.n_waiting for j in self.jobs.values())
        a.pods_unschedulable += stuck + waiting
        # Pods still pending waited until the end; with nothing left running or starting, for ever.
        a.close_waits(self.now, forever=not self.slot_runs and not self.starting)
        if a.first_arrival is not None:
            # Busy window: first arrival to the last completion, or to the end if pods still run.
            end = self.now if self.slot_runs or self.starting else a.last_finish
            a.busy_s = max(0.0, end - a.first_arrival)


def horizon(duration_s: float, drain_s: float | None = None) -> float:
    """When a simulation of an arrival window of `duration_s` stops: the window, then `drain_s` (default 10 × it)."""
    dur = max(duration_s, 1.0)
    return dur + (drain_s if drain_s is not None else 10.0 * dur)


def _dominates(r: PodRequest, failed: PodRequest) -> bool:
    """r needs at least as much as a request that already fit nowhere in this pass, under equal constraints."""
    return (r.cpu >= failed.cpu and r.mem >= failed.mem and r.gpus >= failed.gpus
            and (r.gpus == 0 or r.gpu_milli >= failed.gpu_milli) and r.model_mask == failed.model_mask
            and r.toleration_mask == failed.toleration_mask)


def simulate(workload: Workload, policy: Policy | str, seed: int = 0, config: SimConfig | None = None,
             progress: Callable[[float, float], None] | None = None) -> dict[str, object]:
    """Run one workload under one policy; returns the metrics dict (see drlsched.metrics.METRIC_KEYS)."""
    from drlsched.policies import make_policy

    pol = make_policy(policy) if isinstance(policy, str) else policy
    return Simulator(workload, pol, seed, config, progress).run()
