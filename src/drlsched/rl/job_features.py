"""What the learned job policy sees at a decision (docs/learning.md "Learned job policy"): one node per unfinished
stage of every job in the system, the DAG edges between them, per-job features, which jobs can take freed
capacity, and the executor limits it may give.

Every feature is a ratio to the cluster's executor count E, a share, a rank fraction or a log of seconds, so the
same network reads any node count and any job count. A job without stages (the admission controller's view:
`drlsched admit` knows pods, not stages) is one stage holding its pending and running tasks.

Shapes (one decision, S stages, J jobs, C child→parent edges, L limit levels):
    stage_x float32[S, STAGE_WIDTH], stage_job int64[S] (its job's row), edges int64[2, C] (child, parent rows),
    job_x float32[J, JOB_WIDTH], eligible bool[J] (has tasks to launch), limits float64[L], limit_mask bool[L];
    with `--history lstm` also history float32[T, HISTORY_WIDTH] (rl.job_history).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from drlsched.jobs.model import Job, JobSpec

# Bump on any change to the features below (a checkpoint trained on another version is refused).
JOB_FEATURE_VERSION = 1
STAGE_FEATURES = ("remaining_tasks", "unlaunched_tasks", "running_tasks", "log_task_s", "log_stage_work",
                  "runnable", "log_critical_path", "job_executors", "job_limit")
JOB_FEATURES = ("executors", "pending", "running", "log_remaining_work", "work_share", "log_job_critical_path",
                "log_age", "arrival_rank", "eligible", "log_jobs", "size_rank", "log_work_over_smallest",
                "inverse_work_share")
STAGE_WIDTH = len(STAGE_FEATURES)
JOB_WIDTH = len(JOB_FEATURES)
# Executor limits as shares of the cluster: ⌈E · 2^-k⌉, k = 0..7 (duplicates at small E are masked).
LIMIT_SHARES = tuple(2.0 ** -k for k in range(8))


def feature_spec(history: str = "none") -> dict[str, object]:
    """What a checkpoint records so a different layout is refused (without history: the layout of every
    checkpoint before the history input, so those keep loading)."""
    from drlsched.rl.job_history import history_spec

    spec: dict[str, object] = {"version": JOB_FEATURE_VERSION, "stage": list(STAGE_FEATURES),
                               "job": list(JOB_FEATURES), "limit_shares": list(LIMIT_SHARES)}
    hist = history_spec(history)
    if hist is not None:
        spec["history"] = hist
    return spec


def limit_levels(executors: int) -> tuple[np.ndarray, np.ndarray]:
    """float64[L] limits ⌈E · share⌉ and bool[L]: the first of equal values (so each limit is one action)."""
    values = np.array([max(1.0, math.ceil(executors * s - 1e-9)) for s in LIMIT_SHARES])
    mask = np.ones(values.size, dtype=bool)
    mask[1:] = values[1:] != values[:-1]
    return values, mask


@dataclass
class JobObs:
    stage_x: np.ndarray
    stage_job: np.ndarray
    edges: np.ndarray
    job_x: np.ndarray
    eligible: np.ndarray
    limits: np.ndarray
    limit_mask: np.ndarray
    history: np.ndarray | None = None  # float32[STEPS, HISTORY_WIDTH] where the policy has one (rl.job_history)

    @property
    def jobs(self) -> int:
        return int(self.job_x.shape[0])


@dataclass(frozen=True)
class _Template:
    """A job template's static arrays: per stage tasks, cpu, io and height (longest path to a sink, in edges);
    child→parent edges; Σ tasks·cpu and Σ tasks·io."""

    tasks: np.ndarray
    cpu: np.ndarray
    io: np.ndarray
    height: np.ndarray
    child: np.ndarray
    parent: np.ndarray
    cpu_work: float
    io_work: float


_TEMPLATES: dict[int, tuple[JobSpec, _Template]] = {}


def _template(spec: JobSpec) -> _Template:
    hit = _TEMPLATES.get(id(spec))
    if hit is not None and hit[0] is spec:
        return hit[1]
    n = len(spec.stages)
    children: list[list[int]] = [[] for _ in range(n)]
    for i, s in enumerate(spec.stages):
        for p in s.parents:
            children[p].append(i)
    height = [-1] * n

    def h(i: int) -> int:  # DAGs of a few dozen stages: recursion depth stays small
        if height[i] < 0:
            height[i] = 1 + max((h(c) for c in children[i]), default=-1)
        return height[i]

    for i in range(n):
        h(i)
    pairs = [(c, p) for p in range(n) for c in children[p]]
    tasks = np.array([s.tasks for s in spec.stages], dtype=np.float64)
    cpu = np.array([s.cpu_s for s in spec.stages], dtype=np.float64)
    io = np.array([s.io_s for s in spec.stages], dtype=np.float64)
    t = _Template(tasks, cpu, io, np.array(height, dtype=np.int64),
                  np.array([c for c, _ in pairs], dtype=np.int64), np.array([p for _, p in pairs], dtype=np.int64),
                  float((tasks * cpu).sum()), float((tasks * io).sum()))
    if len(_TEMPLATES) > 4096:
        _TEMPLATES.clear()
    _TEMPLATES[id(spec)] = (spec, t)
    return t


def _log_s(x: np.ndarray | float, scale: float) -> np.ndarray:
    return np.log1p(np.maximum(np.asarray(x, dtype=np.float64), 0.0) / scale)


def observe(jobs: Sequence[Job], executors: int, critical_path: Callable[[Job], float]) -> JobObs:
    """The decision's graph over `jobs` (the engine's live jobs, in arrival order); vectorised over all their
    stages at once (a decision with 100 jobs has ~700 stage rows)."""
    e = float(max(executors, 1))
    n_jobs = len(jobs)
    executors_of = np.array([j.executors for j in jobs], dtype=np.float64)
    limit = np.minimum(np.array([j.limit for j in jobs], dtype=np.float64), e) / e
    staged = [k for k, j in enumerate(jobs) if j.stages]
    x_s, owner_s, edges, paths = _stage_rows([jobs[k] for k in staged], np.array(staged, dtype=np.int64), e,
                                             executors_of, limit)
    virtual = [k for k, j in enumerate(jobs) if not j.stages]
    x_v = np.array([_virtual_stage(jobs[k], e, limit[k], critical_path) for k in virtual],
                   dtype=np.float32).reshape(len(virtual), STAGE_WIDTH)
    pending = np.array([j.pending for j in jobs], dtype=np.float64)
    starting = np.array([j.starting if j.stages else 0 for j in jobs], dtype=np.float64)
    eligible = pending - starting > 0
    remaining = np.array([max(j.remaining_work_s, 0.0) for j in jobs], dtype=np.float64)
    arrivals = np.array([j.arrival_s for j in jobs], dtype=np.float64)
    job_x = np.zeros((n_jobs, JOB_WIDTH), dtype=np.float32)
    if n_jobs:
        job_x[:, 0] = executors_of / e
        job_x[:, 1] = pending / e
        job_x[:, 2] = np.array([j.running for j in jobs], dtype=np.float64) / e
        job_x[:, 3] = _log_s(remaining / e, 10.0)
        total = remaining.sum()
        job_x[:, 4] = remaining / total if total > 0 else 1.0 / n_jobs
        # The engine's critical path (its definition, computed here with the stages' for all jobs at once).
        path = np.zeros(n_jobs)
        path[staged] = paths
        path[virtual] = [critical_path(jobs[k]) for k in virtual]
        job_x[:, 5] = _log_s(path, 60.0)
        job_x[:, 6] = _log_s(arrivals.max() - arrivals, 60.0)
        job_x[:, 7] = np.argsort(np.argsort(arrivals, kind="stable"), kind="stable") / max(n_jobs - 1, 1)
        job_x[:, 8] = eligible
        job_x[:, 9] = math.log1p(n_jobs) / 5.0
        job_x[:, 10] = np.argsort(np.argsort(remaining, kind="stable"), kind="stable") / max(n_jobs - 1, 1)
        floor = np.maximum(remaining, 1e-3)  # a job's size against the others' (what a fair share weighs)
        job_x[:, 11] = np.log(floor / floor.min()) / 5.0
        job_x[:, 12] = (1.0 / floor) / (1.0 / floor).sum()
    limits, mask = limit_levels(executors)
    return JobObs(np.concatenate([x_s, x_v]), np.concatenate([owner_s, np.array(virtual, dtype=np.int64)]), edges,
                  job_x, eligible, limits, mask)


def _stage_rows(jobs: list[Job], rows: np.ndarray, e: float, executors_of: np.ndarray, limit: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """float32[S, STAGE_WIDTH] for the unfinished stages of `jobs` (their rows in the decision: `rows`), the job row
    of each, the child→parent edges between them, and each job's remaining critical path float64[len(jobs)]."""
    if not jobs:
        return (np.zeros((0, STAGE_WIDTH), np.float32), np.zeros(0, np.int64), np.zeros((2, 0), np.int64),
                np.zeros(0))
    ts = [_template(j.spec) for j in jobs]
    sizes = np.array([t.tasks.size for t in ts])
    base = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    job_of = np.repeat(np.arange(len(jobs)), sizes)
    tasks = np.concatenate([t.tasks for t in ts])
    io = np.concatenate([t.io for t in ts])
    height = np.concatenate([t.height for t in ts])
    done = np.array([st.done for j in jobs for st in j.stages], dtype=np.float64)
    launched = np.array([st.launched for j in jobs for st in j.stages], dtype=np.float64)
    running = np.array([st.running for j in jobs for st in j.stages], dtype=np.float64)
    waiting = np.array([st.waiting_on for j in jobs for st in j.stages])
    # Each stage's task time at the job's reference load: cpu + io · c, with c (concurrency over bandwidth) read back
    # from the job's size (work_s = Σ tasks · (cpu + io · c)), which the engine measured at a busy cluster.
    io_work = np.array([t.io_work for t in ts])
    cpu_work = np.array([t.cpu_work for t in ts])
    work = np.array([j.work_s for j in jobs], dtype=np.float64)
    c = np.where(io_work > 0, np.maximum(0.0, (work - cpu_work) / np.where(io_work > 0, io_work, 1.0)), 0.0)
    task_s = np.concatenate([t.cpu for t in ts]) + io * c[job_of]
    left = tasks - done
    unlaunched = tasks - launched
    own = np.where(left > 0, task_s * np.maximum(1.0, np.ceil(unlaunched / e)), 0.0)
    child = np.concatenate([t.child + b for t, b in zip(ts, base, strict=True)])
    parent = np.concatenate([t.parent + b for t, b in zip(ts, base, strict=True)])
    # The longest chain below each stage, in waves of the whole cluster: heights upward, children first.
    cp = own.copy()
    below = np.zeros_like(own)
    edge_height = height[parent]
    for h in range(1, int(height.max()) + 1):
        sel = edge_height == h
        np.maximum.at(below, parent[sel], cp[child[sel]])
        at = height == h
        cp[at] = own[at] + below[at]
    keep = left > 0
    row_of = np.cumsum(keep) - 1
    x = np.empty((int(keep.sum()), STAGE_WIDTH), dtype=np.float32)
    x[:, 0] = left[keep] / e
    x[:, 1] = unlaunched[keep] / e
    x[:, 2] = running[keep] / e
    x[:, 3] = _log_s(task_s[keep], 10.0)
    x[:, 4] = _log_s(left[keep] * task_s[keep] / e, 10.0)
    x[:, 5] = (waiting[keep] == 0) & (unlaunched[keep] > 0)
    x[:, 6] = _log_s(cp[keep], 60.0)
    owner = rows[job_of[keep]]
    x[:, 7] = executors_of[owner] / e
    x[:, 8] = limit[owner]
    live = keep[child] & keep[parent]
    edges = np.stack([row_of[child[live]], row_of[parent[live]]]).astype(np.int64)
    paths = np.zeros(len(jobs))
    np.maximum.at(paths, job_of, cp)
    return x, owner, edges, paths


def _virtual_stage(job: Job, e: float, limit: float, critical_path: Callable[[Job], float]) -> list[float]:
    """A job known only by its counts and remaining work (the admission controller's)."""
    tasks = job.pending + job.running
    task_s = job.remaining_work_s / tasks if tasks else 0.0
    return [tasks / e, job.pending / e, job.running / e, float(_log_s(task_s, 10.0)),
            float(_log_s(job.remaining_work_s / e, 10.0)), float(job.pending > 0),
            float(_log_s(critical_path(job), 60.0)), job.executors / e, limit]
