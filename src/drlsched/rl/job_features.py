"""What the learned job policy sees at a decision (docs/learning.md "Learned job policy"): one node per unfinished
stage of every job in the system, the DAG edges between them, per-job features, which jobs can take freed
capacity, and the executor limits it may give.

Every feature is a ratio to the cluster's executor count E, a share, a rank fraction or a log of seconds, so the
same network reads any node count and any job count. A job without stages (the admission controller's view:
`drlsched admit` knows pods, not stages) is one stage holding its pending and running tasks.

Shapes (one decision, S stages, J jobs, C child→parent edges, L limit levels):
    stage_x float32[S, STAGE_WIDTH], stage_job int64[S] (its job's row), edges int64[2, C] (child, parent rows),
    job_x float32[J, JOB_WIDTH], eligible bool[J] (has tasks to launch), limits float64[L], limit_mask bool[L].
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


def feature_spec() -> dict[str, object]:
    """What a checkpoint records so a different layout is refused."""
    return {"version": JOB_FEATURE_VERSION, "stage": list(STAGE_FEATURES), "job": list(JOB_FEATURES),
            "limit_shares": list(LIMIT_SHARES)}


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

    @property
    def jobs(self) -> int:
        return int(self.job_x.shape[0])


@dataclass(frozen=True)
class _Template:
    """A job template's static arrays: parents' edges and topological order."""

    tasks: np.ndarray
    cpu: np.ndarray
    io: np.ndarray
    children: tuple[tuple[int, ...], ...]
    reverse_topo: tuple[int, ...]


_TEMPLATES: dict[int, tuple[JobSpec, _Template]] = {}


def _template(spec: JobSpec) -> _Template:
    hit = _TEMPLATES.get(id(spec))
    if hit is not None and hit[0] is spec:
        return hit[1]
    n = len(spec.stages)
    children: list[list[int]] = [[] for _ in range(n)]
    waiting = [len(s.parents) for s in spec.stages]
    for i, s in enumerate(spec.stages):
        for p in s.parents:
            children[p].append(i)
    order = [i for i in range(n) if waiting[i] == 0]
    for i in order:  # grows while iterating (Kahn)
        for c in children[i]:
            waiting[c] -= 1
            if waiting[c] == 0:
                order.append(c)
    t = _Template(np.array([s.tasks for s in spec.stages], dtype=np.float64),
                  np.array([s.cpu_s for s in spec.stages], dtype=np.float64),
                  np.array([s.io_s for s in spec.stages], dtype=np.float64),
                  tuple(tuple(c) for c in children), tuple(order[::-1]))
    if len(_TEMPLATES) > 4096:
        _TEMPLATES.clear()
    _TEMPLATES[id(spec)] = (spec, t)
    return t


def _task_seconds(job: Job, t: _Template) -> np.ndarray:
    """Each stage's task time at the job's reference load: cpu + io · c, with c (concurrency over bandwidth) read
    back from the job's size (work_s = Σ tasks · (cpu + io · c)), which the engine measured at a busy cluster."""
    io_total = float((t.tasks * t.io).sum())
    c = max(0.0, (job.work_s - float((t.tasks * t.cpu).sum())) / io_total) if io_total > 0 else 0.0
    return t.cpu + t.io * c


def _log_s(x: np.ndarray | float, scale: float) -> np.ndarray:
    return np.log1p(np.maximum(np.asarray(x, dtype=np.float64), 0.0) / scale)


def observe(jobs: Sequence[Job], executors: int, critical_path: Callable[[Job], float]) -> JobObs:
    """The decision's graph over `jobs` (the engine's live jobs, in arrival order)."""
    e = float(max(executors, 1))
    rows: list[np.ndarray] = []
    owners: list[np.ndarray] = []
    edge_lists: list[np.ndarray] = []
    base = 0
    n_jobs = len(jobs)
    job_x = np.zeros((n_jobs, JOB_WIDTH), dtype=np.float32)
    eligible = np.zeros(n_jobs, dtype=bool)
    remaining = np.array([max(j.remaining_work_s, 0.0) for j in jobs], dtype=np.float64)
    arrivals = np.array([j.arrival_s for j in jobs], dtype=np.float64)
    for k, job in enumerate(jobs):
        limit = min(job.limit, e) / e
        x = _stage_rows(job, e, limit, critical_path) if job.stages else _virtual_stage(job, e, limit, critical_path)
        feats, edges = x
        rows.append(feats)
        owners.append(np.full(feats.shape[0], k, dtype=np.int64))
        if edges.size:
            edge_lists.append(edges + base)
        base += feats.shape[0]
        eligible[k] = job.pending - job.starting > 0 if job.stages else job.pending > 0
        job_x[k, :4] = (job.executors / e, job.pending / e, job.running / e, _log_s(remaining[k] / e, 10.0))
        job_x[k, 5] = _log_s(critical_path(job), 60.0)
    if n_jobs:
        total = remaining.sum()
        job_x[:, 4] = remaining / total if total > 0 else 1.0 / n_jobs
        job_x[:, 6] = _log_s(arrivals.max() - arrivals, 60.0)
        job_x[:, 7] = np.argsort(np.argsort(arrivals, kind="stable"), kind="stable") / max(n_jobs - 1, 1)
        job_x[:, 8] = eligible
        job_x[:, 9] = math.log1p(n_jobs) / 5.0
        job_x[:, 10] = np.argsort(np.argsort(remaining, kind="stable"), kind="stable") / max(n_jobs - 1, 1)
        floor = np.maximum(remaining, 1e-3)  # a job's size against the others' (what a fair share weighs)
        job_x[:, 11] = np.log(floor / floor.min()) / 5.0
        job_x[:, 12] = (1.0 / floor) / (1.0 / floor).sum()
    limits, mask = limit_levels(executors)
    return JobObs(np.concatenate(rows) if rows else np.zeros((0, STAGE_WIDTH), np.float32),
                  np.concatenate(owners) if owners else np.zeros(0, np.int64),
                  np.concatenate(edge_lists, axis=1) if edge_lists else np.zeros((2, 0), np.int64),
                  job_x, eligible, limits, mask)


def _stage_rows(job: Job, e: float, limit: float, critical_path: Callable[[Job], float]
                ) -> tuple[np.ndarray, np.ndarray]:
    t = _template(job.spec)
    task_s = _task_seconds(job, t)
    n = len(job.stages)
    done = np.array([st.done for st in job.stages], dtype=np.float64)
    launched = np.array([st.launched for st in job.stages], dtype=np.float64)
    running = np.array([st.running for st in job.stages], dtype=np.float64)
    waiting = np.array([st.waiting_on for st in job.stages])
    left = t.tasks - done
    unlaunched = t.tasks - launched
    own = np.where(left > 0, task_s * np.maximum(1.0, np.ceil(unlaunched / e)), 0.0)
    cp = np.zeros(n)
    for i in t.reverse_topo:  # the longest chain below each stage, in waves of the whole cluster
        cp[i] = own[i] + max((cp[c] for c in t.children[i]), default=0.0)
    keep = np.flatnonzero(left > 0)
    row_of = np.full(n, -1, dtype=np.int64)
    row_of[keep] = np.arange(keep.size)
    x = np.empty((keep.size, STAGE_WIDTH), dtype=np.float32)
    x[:, 0] = left[keep] / e
    x[:, 1] = unlaunched[keep] / e
    x[:, 2] = running[keep] / e
    x[:, 3] = _log_s(task_s[keep], 10.0)
    x[:, 4] = _log_s(left[keep] * task_s[keep] / e, 10.0)
    x[:, 5] = (waiting[keep] == 0) & (unlaunched[keep] > 0)
    x[:, 6] = _log_s(cp[keep], 60.0)
    x[:, 7] = job.executors / e
    x[:, 8] = limit
    pairs = [(row_of[c], row_of[p]) for p in keep for c in t.children[p] if row_of[c] >= 0]
    edges = np.array(pairs, dtype=np.int64).T if pairs else np.zeros((2, 0), np.int64)
    return x, edges


def _virtual_stage(job: Job, e: float, limit: float, critical_path: Callable[[Job], float]
                   ) -> tuple[np.ndarray, np.ndarray]:
    """A job known only by its counts and remaining work (the admission controller's)."""
    tasks = job.pending + job.running
    task_s = job.remaining_work_s / tasks if tasks else 0.0
    x = np.array([[tasks / e, job.pending / e, job.running / e, _log_s(task_s, 10.0),
                   _log_s(job.remaining_work_s / e, 10.0), float(job.pending > 0), _log_s(critical_path(job), 60.0),
                   job.executors / e, limit]], dtype=np.float32)
    return x, np.zeros((2, 0), np.int64)
