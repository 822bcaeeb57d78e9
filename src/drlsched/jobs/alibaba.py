"""`--trace DIR --trace-format alibaba-v2018 --job-policy NAME`: raw v2018 batch_task rows as jobs.

One job per job_name, one stage per valid task (tasks = instance_num), stage parents from the task names
(traces/dag.py, as the pod loader resolves them). A task's run time is its measured end_time - start_time, the
same as the pod loader's task duration; it runs at that time whatever else runs (cpu_s = duration, io_s = 0:
the profiles' shared-bandwidth model does not apply to measured durations). A job arrives at its earliest valid
start_time, shifted so the trace's first job arrives at 0. Rows are read and validated by the pod loader's
column table and rules (traces/alibaba_v2018.py); a task without a usable duration or request (0 times,
-1/101 plan_mem, missing plan_cpu or instance_num) is dropped and counted, and a job left without tasks or
whose task names form a cycle (it could never finish) is dropped and counted. The executor shape is the
job's largest per-instance request (plan_cpu 100 = 1 core, plan_mem 100 =
one 512 GiB machine).

spar's transformed one-hour sample (`../shared/traces/alibaba-v2018-sample/`, a directory holding
sample_tasks*.csv and no batch_task*.csv: arrival_s, job, task, duration_s, plan_cpu, plan_mem, inst_num) is read
the same way: every task of a job starts with the job's arrival and runs its recorded duration_s.
"""

from __future__ import annotations

import functools
from pathlib import Path

from drlsched.errors import UserError
from drlsched.jobs.model import JobArrival, JobSpec, StageSpec
from drlsched.traces import dag, spar_v2018
from drlsched.traces.alibaba_v2018 import DEFAULT_MACHINE, NAME, ROLES, TASK_COLUMNS, _valid_norm
from drlsched.traces.csvio import BadRows, read_csv
from drlsched.traces.files import discover, need

MACHINE_MEM_MIB = DEFAULT_MACHINE[1]

Row = tuple[str, int, float, float, float, float]  # task, instances, start, duration, plan_cpu, plan_mem


Dropped = tuple[tuple[str, int], ...]


@functools.lru_cache(maxsize=4)
def load_jobs(directory: str, skip_bad_rows: bool = False) -> tuple[tuple[JobArrival, ...], Dropped]:
    """The trace's jobs in arrival order, and what was dropped (counter, amount)."""
    root = Path(directory)
    bad = BadRows(skip=skip_bad_rows)
    dropped: dict[str, int] = {}
    jobs: dict[str, list[Row]] = {}
    spar = sorted(root.glob("sample_tasks*.csv")) if root.is_dir() else []
    if spar and not any(root.glob("batch_task*.csv")):
        return _arrivals(spar[0], _spar_rows(spar[0], bad, dropped), dropped)
    files = discover(root, ROLES, NAME)
    path = need(files, "tasks", NAME, "jobs are built from batch_task.csv")[0]
    for line, (task, count, job, _, _, start, end, cpu, mem) in read_csv(path, TASK_COLUMNS, bad):
        if start < 0 or end < 0 or (cpu is not None and cpu < 0):
            bad.report(path, line, "6-8", f"negative time or plan_cpu ({start}, {end}, {cpu})")
            continue
        if 0 < end < start:
            bad.report(path, line, "7 (end_time)", f"ends at {end}, before its start at {start}")
            continue
        rows = jobs.setdefault(job, [])
        if any(r[0] == task for r in rows):
            bad.report(path, line, "1 (task_name)", f"task {task} of job {job} listed twice")
            continue
        if not (0 < start <= end) or cpu is None or not _valid_norm(mem) or not count:
            dropped["tasks_dropped"] = dropped.get("tasks_dropped", 0) + 1
            continue
        rows.append((task, count, float(start), float(end - start), cpu, mem))  # type: ignore[arg-type]
    return _arrivals(path, jobs, dropped)


def _spar_rows(path: Path, bad: BadRows, dropped: dict[str, int]) -> dict[str, list[Row]]:
    """spar's rows by job: a task starts with its job's arrival (spar keeps no per-task start)."""
    jobs: dict[str, list[Row]] = {}
    for line, (arrival, job, task, duration, cpu, mem, count) in read_csv(path, spar_v2018.TASK_COLUMNS, bad):
        if arrival < 0 or duration < 0 or cpu < 0:
            bad.report(path, line, "1,4,5", f"negative arrival, duration or plan_cpu ({arrival}, {duration}, {cpu})")
            continue
        rows = jobs.setdefault(job, [])
        if any(r[0] == task for r in rows):
            bad.report(path, line, "3 (task)", f"task {task} of job {job} listed twice")
            continue
        if not duration or not _valid_norm(mem) or not count:
            dropped["tasks_dropped"] = dropped.get("tasks_dropped", 0) + 1
            continue
        rows.append((task, count, float(arrival), float(duration), cpu, mem))
    return jobs


def _arrivals(path: Path, jobs: dict[str, list[Row]], dropped: dict[str, int]
              ) -> tuple[tuple[JobArrival, ...], Dropped]:
    specs: list[tuple[float, JobSpec]] = []
    for job, rows in jobs.items():
        if not rows:
            dropped["jobs_dropped"] = dropped.get("jobs_dropped", 0) + 1
            continue
        spec = _spec(job, rows, dropped)
        if spec is None:  # a cycle in its task names: it could never finish
            dropped["cyclic_jobs"] = dropped.get("cyclic_jobs", 0) + 1
            continue
        specs.append((min(r[2] for r in rows), spec))
    if not specs:
        raise UserError(f"{path}: no job with a valid task (start/end times, plan_cpu, plan_mem, instance_num)")
    specs.sort(key=lambda s: (s[0], s[1].name))
    first = specs[0][0]
    arrivals = tuple(JobArrival(i, t - first, spec) for i, (t, spec) in enumerate(specs))
    return arrivals, tuple(sorted(dropped.items()))


def _spec(job: str, rows: list[Row], dropped: dict[str, int]) -> JobSpec | None:
    names = [r[0] for r in rows]
    parents, dangling = dag.job_parents(names)
    if dangling:
        dropped["missing_parent_tasks"] = dropped.get("missing_parent_tasks", 0) + dangling
    index = {name: i for i, name in enumerate(names)}
    stages = tuple(StageSpec(stage_id=i, tasks=count, cpu_s=duration, io_s=0.0, profile_s=duration,
                             parents=tuple(index[p] for p in parents[name].split("|") if p))
                   for i, (name, count, _, duration, _, _) in enumerate(rows))
    if _cyclic([s.parents for s in stages]):
        return None
    cpu_m = max(1, round(max(r[4] for r in rows) * 10))
    mem_mib = max(1, round(max(r[5] for r in rows) / 100 * MACHINE_MEM_MIB))
    return JobSpec(name=job, query=job, size_gb=0, stages=stages, profile_cores=0, executor_cpu_m=cpu_m,
                   executor_mem_mib=mem_mib)


def _cyclic(parents: list[tuple[int, ...]]) -> bool:
    """Whether the stage graph has a cycle (Kahn's algorithm: some stage is never freed)."""
    waiting = [len(p) for p in parents]
    children: list[list[int]] = [[] for _ in parents]
    for child, ps in enumerate(parents):
        for p in ps:
            children[p].append(child)
    ready = [i for i, w in enumerate(waiting) if w == 0]
    freed = 0
    while ready:
        i = ready.pop()
        freed += 1
        for c in children[i]:
            waiting[c] -= 1
            if waiting[c] == 0:
                ready.append(c)
    return freed < len(parents)
