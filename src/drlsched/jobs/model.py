"""What a job is: a DAG of stages; a stage has tasks; a task's run time has a CPU part and an I/O part that
grows with the cluster's running tasks (bandwidth.py)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class StageSpec:
    """One stage: `tasks` tasks, each reading io_s seconds' worth of the whole bandwidth (shared equally by the
    cluster's reading tasks) then computing for cpu_s: cpu_s + io_s · N / bandwidth with N reading throughout."""

    stage_id: int
    tasks: int
    cpu_s: float
    io_s: float  # its read alone at bandwidth 1 (the profiled cluster's), in seconds
    parents: tuple[int, ...] = ()  # indices into JobSpec.stages
    profile_s: float = 0.0  # the profile's mean task run time (for docs and checks)
    shuffle_mb: float = 0.0  # the stage's whole shuffle read from its parents' outputs (split evenly over its tasks)

    def task_s(self, running: float, bandwidth: float = 1.0) -> float:
        return self.cpu_s + self.io_s * running / bandwidth


@dataclass(frozen=True)
class JobSpec:
    """One job template: a profiled query at one input size (`name` e.g. q3-100g)."""

    name: str
    query: str
    size_gb: int
    stages: tuple[StageSpec, ...]
    profile_cores: int  # the core limit of the profile run whose stages and task counts this job has
    executor_cpu_m: int = 1000
    executor_mem_mib: int = 4096

    @property
    def tasks(self) -> int:
        return sum(s.tasks for s in self.stages)

    def work_s(self, running: float, bandwidth: float = 1.0) -> float:
        """Task-seconds of the whole job when `running` tasks share the bandwidth (its size at that load)."""
        return sum(s.tasks * s.task_s(running, bandwidth) for s in self.stages)


@dataclass(frozen=True)
class JobArrival:
    job_id: int
    arrival_s: float
    spec: JobSpec


@dataclass(slots=True)
class Executor:
    """A pod of one job running one task at a time; leaving the job ends the pod."""

    ident: int
    job: int
    alloc_s: float  # when it joined the job (cold start included)
    ready: bool
    busy: bool
    token: int  # bumps whenever it goes idle, so a stale idle-timeout event is ignored
    started: float = 0.0  # when its current task started
    node: int = -1  # its node, where a placement policy placed it (jobs/placed.py); -1 = not placed


@dataclass(slots=True)
class Stage:
    """A stage's progress inside a running job."""

    spec: StageSpec
    waiting_on: int
    launched: int = 0
    running: int = 0
    done: int = 0


@dataclass
class Job:
    """A job in the system: its stages' progress, its executors and its current limit."""

    ident: int
    arrival_s: float
    spec: JobSpec
    stages: list[Stage]
    children: list[list[int]]
    work_s: float  # task-seconds at full-cluster concurrency: its size for terciles, loads and oracles
    runnable: list[int] = field(default_factory=list)  # stage indices with tasks to launch, in Spark's order
    pending: int = 0  # tasks of runnable stages not yet launched
    running: int = 0
    executors: int = 0  # joined (starting, idle or busy)
    starting: int = 0
    idle: list[Executor] = field(default_factory=list)
    limit: float = float("inf")
    remaining_work_s: float = 0.0
    stages_left: int = 0
    finish_s: float | None = None
