"""The slowdown model: a cluster-wide I/O bandwidth that every running task draws on, calibrated on the profiles.

Evidence (docs/simulator.md "Where the slowdown comes from"): in the tpch profiles a query's run time barely
changes with the cores it was allowed (Q1 at 500 GB: 570, 600, 575, 670 s with 50, 75, 100, 200 cores) while its
per-task times grow about in proportion to the cores. That is what a bottleneck shared by all running tasks does
(reading the input from the same storage / network), not a cost only the job pays. So a task of stage s takes

    cpu_s + io_s · N / B

with N tasks reading at once in the whole cluster (all jobs; processor sharing, engine.py) and B the cluster's
bandwidth (1 = the profiled cluster's). Calibration per query and size: the run time alone at C cores is fitted
as R(C) = a / C + b (a: the part that parallelises, CPU; b: the part bounded by the bandwidth) over the profiled
core limits (non-negative least squares); at core limit C the I/O share of every task is φ = b / (a / C + b), and
a stage whose tasks saw on average N̄ running tasks in the profile's own run starts from io_s = φ · t / N̄ and
cpu_s = (1 − φ) · t; a few rounds of the job alone in the model then rescale each stage so its mean task time
is the profile's, and the query alone at C reproduces its profile.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence

import numpy as np

from drlsched.jobs.model import JobSpec, StageSpec
from drlsched.jobs.profiles import ProfiledStage, ProfileSet

MAX_IO_SHARE = 0.98  # keep a CPU floor: a task never runs in zero time when alone


def replay(tasks: Sequence[int], times: Sequence[float], parents: Sequence[tuple[int, ...]], cores: int
           ) -> tuple[float, list[float]]:
    """The profile's own run: `cores` slots, each task the stage's mean time, runnable stages served in Spark's
    order (lowest stage first). Returns the run time and, per stage, the mean number of running tasks its
    tasks saw at their start (themselves included)."""
    n = len(tasks)
    waiting = [len(p) for p in parents]
    children: list[list[int]] = [[] for _ in range(n)]
    for s, ps in enumerate(parents):
        for p in ps:
            children[p].append(s)
    runnable = [s for s in range(n) if waiting[s] == 0]
    launched = [0] * n
    done = [0] * n
    seen = [0.0] * n
    free, t, running = cores, 0.0, 0
    events: list[tuple[float, int]] = []
    while True:
        while free > 0 and runnable:
            s = runnable[0]
            k = min(free, tasks[s] - launched[s])
            for i in range(k):
                seen[s] += running + i + 1
                heapq.heappush(events, (t + times[s], s))
            running += k
            launched[s] += k
            free -= k
            if launched[s] == tasks[s]:
                runnable.pop(0)
        if not events:
            return t, [seen[s] / tasks[s] for s in range(n)]
        t, s = heapq.heappop(events)
        free += 1
        running -= 1
        done[s] += 1
        if done[s] == tasks[s]:
            for c in children[s]:
                waiting[c] -= 1
                if waiting[c] == 0:
                    runnable.append(c)
                    runnable.sort()


def _order(stages: tuple[ProfiledStage, ...], parents: dict[int, tuple[int, ...]]
           ) -> tuple[list[int], list[float], list[tuple[int, ...]]]:
    index = {st.stage_id: i for i, st in enumerate(stages)}
    return ([st.tasks for st in stages], [st.runtime_s for st in stages],
            [tuple(index[p] for p in parents[st.stage_id]) for st in stages])


def fit_split(cores: Sequence[int], runtimes: Sequence[float]) -> tuple[float, float]:
    """Non-negative least squares of R(C) = a / C + b: (a, b)."""
    c = np.asarray(cores, dtype=np.float64)
    r = np.asarray(runtimes, dtype=np.float64)
    if len(c) == 1:
        return 0.0, float(r[0])  # one core limit: no evidence of any parallel part; all bandwidth-bound
    x = np.vstack([1.0 / c, np.ones_like(c)]).T
    best: tuple[float, float, float] | None = None
    for cols in ([0, 1], [0], [1]):  # the two-variable NNLS by its active sets
        sol, *_ = np.linalg.lstsq(x[:, cols], r, rcond=None)
        if np.any(sol < 0):
            continue
        full = np.zeros(2)
        full[cols] = sol
        err = float(np.sum((x @ full - r) ** 2))
        if best is None or err < best[2]:
            best = (float(full[0]), float(full[1]), err)
    assert best is not None  # b alone is the mean run time, never negative
    return best[0], best[1]


CALIBRATION_ROUNDS = 4


def calibrate(profiles: ProfileSet, query: str, size: int, cores: int) -> JobSpec:
    """The job of one profile cell (its stages and task counts), with the I/O model calibrated on the cells of
    the same query and size: the split from R(C) = a / C + b, then a few rounds that run the job alone at
    `cores` in the model and rescale each stage so its mean task time is the profile's."""
    cell = profiles.cells[(query, size)]
    parents = profiles.parents(query)
    limits = sorted(cell)
    runs = [replay(*_order(cell[c], parents), c) for c in limits]
    a, b = fit_split(limits, [r[0] for r in runs])
    total = a / cores + b
    share = min(MAX_IO_SHARE, b / total) if total > 0 else 0.0
    stages_p = cell[cores]
    _, seen = runs[limits.index(cores)]
    _, _, idx_parents = _order(stages_p, parents)
    cpu = [(1.0 - share) * st.runtime_s for st in stages_p]
    io = [share * st.runtime_s / max(seen[i], 1.0) for i, st in enumerate(stages_p)]

    def build() -> JobSpec:
        stages = tuple(StageSpec(stage_id=st.stage_id, tasks=st.tasks, cpu_s=cpu[i], io_s=io[i],
                                 parents=idx_parents[i], profile_s=st.runtime_s) for i, st in enumerate(stages_p))
        return JobSpec(name=f"q{query}-{size}g", query=query, size_gb=size, stages=stages, profile_cores=cores)

    for _ in range(CALIBRATION_ROUNDS):
        means = stage_means_alone(build(), cores)
        for i, st in enumerate(stages_p):
            f = st.runtime_s / means[i] if means[i] > 0 else 1.0
            cpu[i] *= f
            io[i] *= f
    return build()


def stage_means_alone(spec: JobSpec, cores: int) -> list[float]:
    """Mean task time of each stage when the job runs alone on `cores` executors, no cold start."""
    from drlsched.jobs.engine import EngineConfig, JobEngine
    from drlsched.jobs.model import JobArrival
    from drlsched.jobs.policies import Fifo

    engine = JobEngine([JobArrival(0, 0.0, spec)], Fifo(),
                       EngineConfig(executors=cores, startup_mean_s=0.0, startup_std_s=0.0))
    engine.stage_time = {}
    engine.run()
    return [engine.stage_time.get((0, i), [0.0, 1.0])[0] / engine.stage_time.get((0, i), [0.0, 1.0])[1]
            for i in range(len(spec.stages))]


def profile_runtime(profiles: ProfileSet, query: str, size: int, cores: int) -> float:
    """The run time the profile implies for the query alone at `cores` (its replay)."""
    return replay(*_order(profiles.cells[(query, size)][cores], profiles.parents(query)), cores)[0]
