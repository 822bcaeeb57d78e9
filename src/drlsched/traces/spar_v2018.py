"""`alibaba-v2018-spar`: the transformed v2018 batch sample shipped by spar (SoCC'19), tasks + instances.

Both files list jobs in the same order, each job's rows contiguous (spar's own reader relies on it), so they
are joined job by job while streaming. With an instances file there is one pod per instance row (its own
duration and mean usage); with the task file alone each task expands to `inst_num` pods of the task's
duration, without usage. Every pod arrives with its job; DAG parents come from the task names. plan_cpu 100 =
1 core; plan_mem and mem_avg are normalised to one machine's memory (`--machine-memory-mib`). Invalid
normalised values (-1, or over 100) drop the task's pods, counted in `info["invalid_request"]`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa

from drlsched.traces import dag
from drlsched.traces.context import Context
from drlsched.traces.csvio import Column, integer, number, read_csv, required
from drlsched.traces.files import Role, need
from drlsched.traces.podtable import PodBuffer

NAME = "alibaba-v2018-spar"
ROLES = (
    Role("tasks", ("sample_tasks*.csv", "batch_task*.csv")),
    Role("instances", ("sample_instances*.csv", "batch_instace*.csv", "batch_instance*.csv")),
)
DEFAULT_MACHINE = (96_000, 524_288)  # 96 cores (the v2018 machines); memory is an assumption, 512 GiB
DEFAULT_NODES = 4034  # machines in cluster-trace-v2018

TASK_COLUMNS = (Column("arrival", number), Column("job", required), Column("task", required),
                Column("duration", number), Column("plan_cpu", number), Column("plan_mem", number),
                Column("inst_num", integer))
INSTANCE_COLUMNS = (Column("arrival", number), Column("job", required), Column("task", required),
                    Column("instance", required), Column("duration", number), Column("cpu_avg", number),
                    Column("mem_avg", number))


@dataclass
class Task:
    duration: float
    cpu_m: int
    mem_mib: int
    plan_cpu: float
    plan_mem: float
    instances: int
    parents: str = ""
    seen: int = 0


@dataclass
class Job:
    name: str
    arrival: float
    tasks: dict[str, Task] = field(default_factory=dict)


def _jobs(ctx: Context, path: Path) -> Iterator[Job]:
    """Task rows grouped by job, with DAG parents resolved; a job split across the file is an error."""
    done: set[str] = set()
    job: Job | None = None
    for line, (arrival, name, task, duration, cpu, mem, count) in read_csv(path, TASK_COLUMNS, ctx.bad):
        if job is None or name != job.name:
            if job is not None:
                yield _finish(ctx, job)
            if name in done:
                ctx.bad.report(path, line, "2 (job)", f"job {name} appears again after other jobs; the file "
                                                      f"must keep each job's tasks together")
                job = None
                continue
            done.add(name)
            job = Job(name, arrival)
        if arrival < 0 or duration < 0 or cpu < 0 or count < 0:
            ctx.bad.report(path, line, "1,4,5,7", "negative arrival, duration, plan_cpu or inst_num")
            continue
        if not 0 <= mem <= 100:  # -1 and 101 mark invalid normalised values in v2018
            ctx.count("invalid_request", count)
            continue
        job.tasks[task] = Task(duration, round(cpu * 10), round(mem / 100 * ctx.machine_mem_mib), cpu, mem,
                               count)
    if job is not None:
        yield _finish(ctx, job)


def _finish(ctx: Context, job: Job) -> Job:
    parents, dangling = dag.job_parents(job.tasks)
    for name, task in job.tasks.items():
        task.parents = parents[name]
    if dangling:
        ctx.count("missing_parent_tasks", dangling)
    return job


def read(ctx: Context) -> Iterator[pa.Table]:
    ctx.homogeneous_nodes("v2018-node")
    tasks = need(ctx.files, "tasks", NAME, "pass the directory holding sample_tasks.csv")[0]
    if "instances" in ctx.files:
        yield from _instances(ctx, _jobs(ctx, tasks), ctx.files["instances"][0])
    else:
        yield from _expand(ctx, _jobs(ctx, tasks))


def _expand(ctx: Context, jobs: Iterator[Job]) -> Iterator[pa.Table]:
    buffer = PodBuffer()
    for job in jobs:
        for name, task in job.tasks.items():
            for i in range(task.instances):
                buffer.add(f"{job.name}/{name}/{i}", job.name, job.arrival, task.cpu_m, task.mem_mib,
                           task=name, work_s=task.duration, parents=task.parents)
            if buffer.full():
                yield buffer.take()
    ctx.count("pods_without_usage", buffer.without_usage)
    yield buffer.take()


def _ratio(used: float, planned: float) -> float | None:
    return used / planned if planned > 0 else None


def _instances(ctx: Context, jobs: Iterator[Job], path: Path) -> Iterator[pa.Table]:
    buffer = PodBuffer()
    job: Job | None = None
    for line, (_, name, task_name, instance, duration, cpu_avg, mem_avg) in read_csv(path, INSTANCE_COLUMNS,
                                                                                     ctx.bad):
        if job is None or name != job.name:
            if job is not None:
                _tally(ctx, job)
            job = _advance(ctx, jobs, name)
            if job is None:
                ctx.bad.report(path, line, "2 (job)", f"job {name} has no task rows after the previous job's "
                                                      f"(the two files must list jobs in the same order)")
                continue
        task = job.tasks.get(task_name)
        if task is None:
            ctx.bad.report(path, line, "3 (task)", f"task {task_name} of job {name} is not in the task file "
                                                   f"(or its request is invalid)")
            continue
        if duration < 0 or cpu_avg < 0:
            ctx.bad.report(path, line, "5-6", f"negative duration or cpu_avg ({duration}, {cpu_avg})")
            continue
        task.seen += 1
        mem_ok = 0 <= mem_avg <= 100
        if not mem_ok:
            ctx.count("invalid_usage")
        buffer.add(instance, name, job.arrival, task.cpu_m, task.mem_mib, task=task_name, work_s=duration,
                   usage_cpu=_ratio(cpu_avg, task.plan_cpu),
                   usage_mem=_ratio(mem_avg, task.plan_mem) if mem_ok else None, parents=task.parents)
        if buffer.full():
            yield buffer.take()
    if job is not None:
        _tally(ctx, job)
    for _ in jobs:
        ctx.count("jobs_without_instances")
    ctx.count("pods_without_usage", buffer.without_usage)
    yield buffer.take()


def _advance(ctx: Context, jobs: Iterator[Job], name: str) -> Job | None:
    """The task file's next job called `name`; jobs passed over have no instance rows and are counted."""
    for job in jobs:
        if job.name == name:
            return job
        ctx.count("jobs_without_instances")
    return None


def _tally(ctx: Context, job: Job) -> None:
    missing = sum(max(0, task.instances - task.seen) for task in job.tasks.values())
    if missing:
        ctx.count("instances_missing", missing)
