"""The job-level event loop: jobs arrive, executors join them (a new pod each time: cold start), run their tasks
one at a time, and leave when idle for `idle_timeout_s` or, when the job's limit drops, at a task boundary.

Events: arrival, task done, executor ready (after its cold start), idle timeout. The `JobPolicy` is asked at
every event that changes what can run (arrival, stage done, job done); between those, a freed executor keeps
serving its job's runnable stages in Spark's order (lowest stage id first) and free capacity goes to jobs in the
policy's last order. A task first reads its input through the cluster's shared I/O bandwidth B, split equally
among all tasks reading at that moment (processor sharing, every job's tasks together; bandwidth.py), then
computes for cpu_s: with N tasks reading throughout, it takes io_s · N / B + cpu_s. Processor sharing runs on a
virtual clock (the I/O seconds each reading task has received), so a change in N re-plans nothing.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from drlsched.jobs.metrics import JobAccumulator
from drlsched.jobs.model import Executor, Job, JobArrival, JobSpec, Stage
from drlsched.jobs.policies import JobPolicy

INF = math.inf
_ARRIVE, _DONE, _READY, _IDLE = range(4)  # _DONE: a task's CPU part ends


@dataclass(frozen=True)
class EngineConfig:
    executors: int  # executor slots in the cluster (one task each)
    bandwidth: float = 1.0  # the cluster's I/O bandwidth, 1 = the profiled cluster's
    idle_timeout_s: float = 60.0  # Spark's spark.dynamicAllocation.executorIdleTimeout
    startup_mean_s: float = 1.0  # the simulator's cold start (SimConfig.startup_mean_s / _std_s)
    startup_std_s: float = 0.3
    horizon_s: float = INF  # stop here even if jobs remain (they count as unfinished)


def reference_running(config: EngineConfig) -> float:
    """The concurrency at which job sizes are measured: a full cluster (what a task pays when it is busy)."""
    return float(config.executors)


def job_work(spec: JobSpec, config: EngineConfig) -> float:
    return spec.work_s(reference_running(config), config.bandwidth)


class JobEngine:
    def __init__(self, arrivals: Sequence[JobArrival], policy: JobPolicy, config: EngineConfig,
                 seed: int = 0) -> None:
        if config.executors < 1:
            raise ValueError("a cluster needs at least one executor")
        self.cfg = config
        self.policy = policy
        self.rng = np.random.default_rng(np.random.SeedSequence([seed, 0xE3EC]))
        self.arrivals = sorted(arrivals, key=lambda a: (a.arrival_s, a.job_id))
        self.heap: list[tuple[float, int, int, object, int]] = []
        self.seq = itertools.count()
        self.jobs: dict[int, Job] = {}
        self.active: list[Job] = []
        self.order: list[Job] = []
        self.free = config.executors
        self.running = 0  # tasks running in the cluster (reading or computing)
        self.io: list[tuple[float, int, Executor, int]] = []  # reading tasks by virtual finish tag (processor sharing)
        self.vclock = 0.0  # I/O seconds each reading task has received so far
        self.stage_time: dict[tuple[int, int], list[float]] | None = None  # (job, stage) → [Σ durations, tasks]
        self.ex_ids = itertools.count()
        self.acc = JobAccumulator()
        self.t = 0.0
        self._ref = reference_running(config)
        self._task_ref: dict[int, list[float]] = {}  # job → per stage, a task's time at the reference load
        self._topo_cache: dict[int, list[int]] = {}

    # --- event plumbing --------------------------------------------------------------------------------
    def _push(self, t: float, kind: int, obj: object, arg: int = 0) -> None:
        heapq.heappush(self.heap, (t, next(self.seq), kind, obj, arg))

    def run(self) -> dict[str, float]:
        t0 = time.perf_counter()
        self.start()
        self.advance(self.cfg.horizon_s)
        return self.finish(time.perf_counter() - t0)

    def start(self) -> None:
        for a in self.arrivals:
            self._push(a.arrival_s, _ARRIVE, a)

    def advance(self, until: float) -> bool:
        """Runs every event up to `until` (a replay steps it on its clock, jobs/replay.py); whether none is left."""
        heap = self.heap
        io = self.io
        bw = self.cfg.bandwidth
        while heap or io:
            t_io = self.t + max(0.0, io[0][0] - self.vclock) * len(io) / bw if io else INF
            if heap and heap[0][0] <= t_io:
                if heap[0][0] > until:
                    return False
                t, _, kind, obj, arg = heapq.heappop(heap)
            else:
                if t_io > until:
                    return False
                t, kind = t_io, -1
            if io:
                self.vclock += (t - self.t) * bw / len(io)
            self.t = t
            if kind == -1:
                self._read_done(t)
            elif kind == _DONE:
                self._task_done(obj, arg, t)  # type: ignore[arg-type]
            elif kind == _ARRIVE:
                self._arrive(obj, t)  # type: ignore[arg-type]
            elif kind == _READY:
                self._ready(obj, t)  # type: ignore[arg-type]
            else:
                self._idle_timeout(obj, arg, t)  # type: ignore[arg-type]
        return True

    def next_event_s(self) -> float:
        """When the next event falls (INF: none left)."""
        io = self.io
        t_io = self.t + max(0.0, io[0][0] - self.vclock) * len(io) / self.cfg.bandwidth if io else INF
        return min(self.heap[0][0] if self.heap else INF, t_io)

    def clock_to(self, t: float) -> None:
        """Moves the clock to `t` (no event before it left) for an event from outside, e.g. a pod that started."""
        if t <= self.t:
            return
        if self.io:
            self.vclock += (t - self.t) * self.cfg.bandwidth / len(self.io)
        self.t = t

    def finish(self, wall_s: float) -> dict[str, float]:
        for job in self.active:  # the horizon cut them off: executors still held count up to it
            for ex in job.idle:
                self.acc.alloc_s += self.t - ex.alloc_s
        self.acc.wall_s = wall_s
        self.acc.unfinished = len(self.active)
        return self.acc.summary(self.cfg.executors)

    # --- jobs ----------------------------------------------------------------------------------------------
    def _arrive(self, a: JobArrival, t: float) -> None:
        spec = a.spec
        n = len(spec.stages)
        stages = [Stage(s, len(s.parents)) for s in spec.stages]
        children: list[list[int]] = [[] for _ in range(n)]
        for i, s in enumerate(spec.stages):
            for p in s.parents:
                children[p].append(i)
        work = job_work(spec, self.cfg)
        job = Job(a.job_id, t, spec, stages, children, work, remaining_work_s=work, stages_left=n)
        self._task_ref[a.job_id] = [s.task_s(self._ref, self.cfg.bandwidth) for s in spec.stages]
        for i, st in enumerate(stages):
            if st.waiting_on == 0:
                job.runnable.append(i)
                job.pending += st.spec.tasks
        self.jobs[a.job_id] = job
        self.active.append(job)
        self.acc.arrived(t)
        self._decide(t)

    def _stage_done(self, job: Job, s: int, t: float) -> None:
        job.stages_left -= 1
        for c in job.children[s]:
            st = job.stages[c]
            st.waiting_on -= 1
            if st.waiting_on == 0:
                bisect.insort(job.runnable, c)
                job.pending += st.spec.tasks
        if job.stages_left == 0:
            self._finish(job, t)
            return
        while job.idle and job.pending > 0:  # its idle executors take the new stages first, no cold start
            self._launch(job.idle.pop(), job, t)

    def _finish(self, job: Job, t: float) -> None:
        job.finish_s = t
        for ex in job.idle:
            self._release(ex, job, t)
        job.idle.clear()
        self.active.remove(job)
        del self._task_ref[job.ident]
        self.acc.finished(job.arrival_s, t, job.work_s)
        del self.jobs[job.ident]

    def _decide(self, t: float) -> None:
        """Ask the policy for each job's limit and the order in which jobs take free capacity; executors above a
        lowered limit that are idle leave now (busy ones at their task boundary)."""
        order = self.policy.decide(self.active, self.cfg.executors, self._critical_path)
        self.order = []
        for job, limit in order:
            job.limit = limit
            self.order.append(job)
            while job.executors > limit and job.idle:
                ex = job.idle.pop()
                self._release(ex, job, t)
        self._dispatch(t)

    def _critical_path(self, job: Job) -> float:
        """Remaining critical path with known durations: per unfinished stage, its unlaunched tasks in waves of
        the whole cluster (one task time if none are left to launch), the longest chain of those."""
        ref = self._task_ref[job.ident]
        e = self.cfg.executors
        longest = [0.0] * len(job.stages)
        for i in self._topo(job)[::-1]:
            st = job.stages[i]
            if st.done == st.spec.tasks:
                own = 0.0
            else:
                own = ref[i] * max(1, math.ceil((st.spec.tasks - st.launched) / e))
            longest[i] = own + max((longest[c] for c in job.children[i]), default=0.0)
        return max(longest)

    def _topo(self, job: Job) -> list[int]:
        """A topological order of the job's stages (Kahn), cached per job template."""
        key = id(job.spec)
        order = self._topo_cache.get(key)
        if order is None:
            waiting = [len(st.spec.parents) for st in job.stages]
            order = [i for i, w in enumerate(waiting) if w == 0]
            for i in order:  # grows while iterating
                for c in job.children[i]:
                    waiting[c] -= 1
                    if waiting[c] == 0:
                        order.append(c)
            self._topo_cache[key] = order
        return order

    # --- executors --------------------------------------------------------------------------------------
    def _dispatch(self, t: float) -> None:
        """Free executor slots to jobs in the policy's order, up to each job's limit and its unserved tasks."""
        if self.free == 0:
            return
        cfg = self.cfg
        for job in self.order:
            if job.finish_s is not None:
                continue
            want = min(job.limit - job.executors, job.pending - job.starting)
            if want <= 0:
                continue
            k = int(min(want, self.free))
            draws = np.maximum(min(0.05, cfg.startup_mean_s), self.rng.normal(cfg.startup_mean_s, cfg.startup_std_s, k))
            started = 0
            for d in draws:
                ex = Executor(next(self.ex_ids), job.ident, t, False, False, 0)
                if not self._place(ex, job, t):
                    break
                self._push(t + float(d), _READY, ex)
                started += 1
            job.executors += started
            job.starting += started
            self.free -= started
            self.acc.executor_starts += started
            if self.free == 0 or started < k:  # full, or the placement policy held the pod: wait for an event
                return

    def _place(self, ex: Executor, job: Job, t: float) -> bool:
        """Where a new executor pod goes; False leaves it unstarted. Here executors are slots, not placed."""
        return True

    def _task_start(self, ex: Executor, job: Job, s: int, t: float) -> float:
        """Seconds a task of stage s adds before its CPU part (its shuffle read in jobs/placed.py); none here."""
        return 0.0

    def _release(self, ex: Executor, job: Job, t: float) -> None:
        job.executors -= 1
        self.free += 1
        self.acc.alloc_s += t - ex.alloc_s
        ex.job = -1

    def _ready(self, ex: Executor, t: float) -> None:
        job = self.jobs.get(ex.job)
        if job is None:  # its job finished during the cold start: the pod ends unused
            self.free += 1
            self.acc.alloc_s += t - ex.alloc_s
            self._dispatch(t)
            return
        job.starting -= 1
        ex.ready = True
        self._next(ex, job, t)

    def _next(self, ex: Executor, job: Job, t: float) -> None:
        """An executor with nothing running: leave (over the limit), take a task, or wait idle."""
        if job.executors > job.limit:
            self._release(ex, job, t)
            self._dispatch(t)
        elif job.pending > 0:
            self._launch(ex, job, t)
        else:
            ex.token += 1
            job.idle.append(ex)
            self._push(t + self.cfg.idle_timeout_s, _IDLE, ex, ex.token)

    def _idle_timeout(self, ex: Executor, token: int, t: float) -> None:
        if ex.token != token or ex.busy or ex.job < 0:
            return
        job = self.jobs.get(ex.job)
        if job is None or ex not in job.idle:
            return
        job.idle.remove(ex)
        self._release(ex, job, t)
        self._dispatch(t)

    def _launch(self, ex: Executor, job: Job, t: float) -> None:
        s = job.runnable[0]
        st = job.stages[s]
        st.launched += 1
        st.running += 1
        if st.launched == st.spec.tasks:
            job.runnable.pop(0)
        job.pending -= 1
        job.running += 1
        self.running += 1
        spec = st.spec
        job.remaining_work_s -= self._task_ref[job.ident][s]
        ex.busy = True
        ex.token += 1
        ex.started = t
        if spec.io_s > 0:
            heapq.heappush(self.io, (self.vclock + spec.io_s, next(self.seq), ex, s))
        else:
            self._push(t + self._task_start(ex, job, s, t) + spec.cpu_s, _DONE, ex, s)

    def _read_done(self, t: float) -> None:
        """The reading task with the smallest tag has its input; its CPU part follows."""
        _, _, ex, s = heapq.heappop(self.io)
        self._push(t + self.jobs[ex.job].stages[s].spec.cpu_s, _DONE, ex, s)

    def _task_done(self, ex: Executor, s: int, t: float) -> None:
        job = self.jobs[ex.job]
        st = job.stages[s]
        st.running -= 1
        st.done += 1
        job.running -= 1
        self.running -= 1
        ex.busy = False
        self.acc.tasks_done += 1
        self.acc.busy_s += t - ex.started
        if self.stage_time is not None:
            cell = self.stage_time.setdefault((job.ident, s), [0.0, 0.0])
            cell[0] += t - ex.started
            cell[1] += 1
        self._next(ex, job, t)
        if st.done == st.spec.tasks:
            self._stage_done(job, s, t)
            self._decide(t)
