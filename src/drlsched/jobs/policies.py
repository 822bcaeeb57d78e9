"""Job policies: at each event that changes what can run, each job's executor limit and the order in which
jobs take freed capacity (docs/policies.md "Job policies" cites each baseline).

`decide(jobs, executors, critical_path)` returns (job, limit) pairs in priority order; `jobs` are the engine's
live `Job` objects (read only), `critical_path(job)` its remaining critical path with known durations.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Sequence
from typing import Protocol

from drlsched.errors import UserError
from drlsched.jobs.model import Job

INF = math.inf
Decision = list[tuple[Job, float]]


class JobPolicy(Protocol):
    name: str

    def decide(self, jobs: Sequence[Job], executors: int, critical_path: Callable[[Job], float]) -> Decision: ...


def _demand(job: Job) -> int:
    """Executors the job can use now: its running tasks plus those of its runnable stages not yet launched."""
    return job.running + job.pending


class Fifo:
    """Spark's and Kubernetes' default: arrival order, each job takes what its runnable tasks can use."""

    name = "fifo"

    def decide(self, jobs: Sequence[Job], executors: int, critical_path: Callable[[Job], float]) -> Decision:
        return [(j, INF) for j in jobs]  # engine keeps jobs in arrival order


class Fair:
    """Spark FAIR pools / equal share: limit = ⌈share · executors / running jobs⌉, arrival order."""

    def __init__(self, share: float = 1.0) -> None:
        self.share = share
        self.name = "fair" if share == 1.0 else f"fair:{share:g}"

    def decide(self, jobs: Sequence[Job], executors: int, critical_path: Callable[[Job], float]) -> Decision:
        if not jobs:
            return []
        limit = float(math.ceil(self.share * executors / len(jobs)))
        return [(j, limit) for j in jobs]


class Drf:
    """Dominant resource fairness (YuniKorn's and Volcano's fair ordering): progressive filling, each next
    executor to the job with the lowest dominant share that can still use one; limits are the fill."""

    name = "drf"

    def __init__(self, cluster_cpu_m: float = 0.0, cluster_mem_mib: float = 0.0) -> None:
        self.cluster_cpu_m = cluster_cpu_m
        self.cluster_mem_mib = cluster_mem_mib

    def _per_executor(self, job: Job, executors: int) -> float:
        cpu = self.cluster_cpu_m or executors * job.spec.executor_cpu_m
        mem = self.cluster_mem_mib or executors * job.spec.executor_mem_mib
        return max(job.spec.executor_cpu_m / cpu, job.spec.executor_mem_mib / mem)

    def decide(self, jobs: Sequence[Job], executors: int, critical_path: Callable[[Job], float]) -> Decision:
        alloc = [0] * len(jobs)
        demand = [_demand(j) for j in jobs]
        step = [self._per_executor(j, executors) for j in jobs]
        heap = [(0.0, j.arrival_s, i) for i, j in enumerate(jobs) if demand[i] > 0]
        heapq.heapify(heap)
        left = executors
        while heap and left > 0:
            share, _, i = heapq.heappop(heap)
            alloc[i] += 1
            left -= 1
            if alloc[i] < demand[i]:
                heapq.heappush(heap, (share + step[i], jobs[i].arrival_s, i))
        ranked = sorted(range(len(jobs)), key=lambda i: (alloc[i] * step[i], jobs[i].arrival_s))
        return [(jobs[i], float(alloc[i])) for i in ranked]


class SjfCp:
    """Shortest remaining critical path first (known durations); each job takes what it can use, in that order."""

    name = "sjf-cp"

    def decide(self, jobs: Sequence[Job], executors: int, critical_path: Callable[[Job], float]) -> Decision:
        return [(j, INF) for j in sorted(jobs, key=lambda j: (critical_path(j), j.arrival_s))]


class WeightedFair:
    """Limit ∝ remaining work^α (Decima's "opt. weighted fair"; α < 0 favours small jobs), arrival order."""

    def __init__(self, alpha: float = -1.0) -> None:
        self.alpha = alpha
        self.name = f"weighted-fair:{alpha:g}"

    def decide(self, jobs: Sequence[Job], executors: int, critical_path: Callable[[Job], float]) -> Decision:
        if not jobs:
            return []
        weights = [max(j.remaining_work_s, 1e-3) ** self.alpha for j in jobs]
        total = sum(weights)
        return [(j, float(math.ceil(executors * w / total))) for j, w in zip(jobs, weights, strict=True)]


class SrptOracle:
    """Clairvoyant shortest remaining processing time: jobs by remaining work, each granted what it can use
    before the next gets any. An optimistic reference, not a deployable policy."""

    name = "srpt-oracle"

    def decide(self, jobs: Sequence[Job], executors: int, critical_path: Callable[[Job], float]) -> Decision:
        left = executors
        out: Decision = []
        for j in sorted(jobs, key=lambda j: (j.remaining_work_s, j.arrival_s)):
            take = min(left, _demand(j))
            out.append((j, float(take)))
            left -= take
        return out


JOB_POLICIES = ("fifo", "fair", "drf", "sjf-cp", "weighted-fair", "srpt-oracle")
LEARNED = "ppo"  # ppo:DIR/policy.pt, a learned job policy (`drlsched train-jobs`)
LEARNED_DQN = "dqn"  # dqn:DIR/policy.pt, one trained by `drlsched train-jobs --algo dqn`


def make_job_policy(spec: str) -> JobPolicy:
    """A policy from its name, with a parameter after a colon: `weighted-fair:-1` (α), `fair:1.5` (share),
    `ppo:DIR/policy.pt[:fallback=NAME]` (a learned job policy behind its distribution-shift guard,
    drlsched.rl.job_policy and job_guard; `dqn:` for one trained with `--algo dqn`)."""
    name, _, param = spec.partition(":")
    if name in (LEARNED, LEARNED_DQN):
        if not param:
            raise UserError(f"job policy {name} needs its checkpoint: {name}:DIR/policy.pt")
        from drlsched.rl.job_policy import load_job_policy

        return load_job_policy(param, name)
    if name not in JOB_POLICIES:
        raise UserError(f"unknown job policy {spec!r}; known job policies: {', '.join(JOB_POLICIES)} "
                        f"(weighted-fair:ALPHA, fair:SHARE) and {LEARNED}|{LEARNED_DQN}:DIR/policy.pt")
    value: float | None = None
    if param:
        if name not in ("weighted-fair", "fair"):
            raise UserError(f"job policy {name} takes no parameter, got {spec!r}")
        try:
            value = float(param)
        except ValueError:
            raise UserError(f"job policy {spec!r}: {'α' if name == 'weighted-fair' else 'share'} must be a number, "
                            f"got {param!r}") from None
        if not math.isfinite(value) or (name == "fair" and value <= 0):
            raise UserError(f"job policy {spec!r}: parameter must be a finite number"
                            f"{' above 0' if name == 'fair' else ''}, got {param!r}")
    if name == "fifo":
        return Fifo()
    if name == "fair":
        return Fair(1.0 if value is None else value)
    if name == "drf":
        return Drf()
    if name == "sjf-cp":
        return SjfCp()
    if name == "weighted-fair":
        return WeightedFair(-1.0 if value is None else value)
    return SrptOracle()
