"""`alibaba-v2018`: raw cluster-trace-v2018 tables (headerless CSV): batch work, services and machines.

- batch_task and batch_instance are sorted by job into scratch Parquet files (external sort) and joined job
  by job: memory is bounded by one job and the sort buffers. One pod per instance row (a retry is a row of its
  own, uid suffixed `#seq_no`).
- A pod arrives with its job: the earliest valid task start_time of the job. Times of 0 mean "before or after
  the 8-day window": they are never used as times. Run time is the instance's end - start, else its task's,
  else unknown (work_s None: runs until the horizon), counted in `info["unknown_duration"]`.
- plan_cpu and cpu_* are 100 = 1 core; plan_mem, mem_* and machine mem_size are normalised to the largest
  machine (`--machine-memory-mib` = 100 units). -1 and 101 mark invalid normalised values: an invalid request
  drops the task's pods (`invalid_request`), an invalid usage leaves the usage unknown (`invalid_usage`).
- Usage: cpu_avg / plan_cpu and mem_avg / plan_mem; usage_cv is estimated from the peak as
  (cpu_max / cpu_avg - 1) / 2, i.e. the peak taken as mean + 2 standard deviations.
- container_meta gives the long-running services (LS, one pod per container, job = app_du): they arrive at
  their first row's time (0 = already running at the trace start) and run until the horizon; requests are the
  latest row's. container_usage (optional) gives their mean cpu/mem_util_percent, read as percent of the
  request, and its coefficient of variation.
- machine_meta gives the cluster (latest row per machine; failure_domain_1 becomes the rack).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from drlsched.traces import dag, extsort
from drlsched.traces.context import Context
from drlsched.traces.csvio import (
    Column,
    integer,
    number,
    optional_integer,
    optional_number,
    read_csv,
    required,
    text,
)
from drlsched.traces.files import Role, need
from drlsched.traces.podtable import PodBuffer
from drlsched.workload import NodeSpec, QoS

NAME = "alibaba-v2018"
ROLES = (
    Role("tasks", ("batch_task*.csv",)),
    Role("instances", ("batch_instance*.csv",)),
    Role("machines", ("machine_meta*.csv",)),
    Role("containers", ("container_meta*.csv",)),
    Role("container_usage", ("container_usage*.csv",)),
)
DEFAULT_MACHINE = (96_000, 524_288)  # 96 cores (machine_meta); 100 memory units assumed to be 512 GiB
DEFAULT_NODES = 4034
SAMPLES_WHILE_READING = True  # --sample-rate shrinks the sorts

TASK_COLUMNS = (Column("task_name", required), Column("instance_num", optional_integer),
                Column("job_name", required), Column("task_type", text), Column("status", text),
                Column("start_time", integer), Column("end_time", integer),
                Column("plan_cpu", optional_number), Column("plan_mem", optional_number))
INSTANCE_COLUMNS = (Column("instance_name", required), Column("task_name", required),
                    Column("job_name", required), Column("task_type", text), Column("status", text),
                    Column("start_time", integer), Column("end_time", integer), Column("machine_id", text),
                    Column("seq_no", optional_integer), Column("total_seq_no", optional_integer),
                    Column("cpu_avg", optional_number), Column("cpu_max", optional_number),
                    Column("mem_avg", optional_number), Column("mem_max", optional_number))
MACHINE_COLUMNS = (Column("machine_id", required), Column("time_stamp", integer),
                   Column("failure_domain_1", text), Column("failure_domain_2", text),
                   Column("cpu_num", integer), Column("mem_size", number), Column("status", text))
CONTAINER_COLUMNS = (Column("container_id", required), Column("machine_id", text),
                     Column("time_stamp", integer), Column("app_du", required), Column("status", text),
                     Column("cpu_request", number),
                     Column("cpu_limit", optional_number), Column("mem_size", number))
USAGE_COLUMNS = (Column("container_id", required), Column("machine_id", text), Column("time_stamp", number),
                 Column("cpu_util_percent", optional_number), Column("mem_util_percent", optional_number),
                 *(Column(name, text) for name in ("cpi", "mem_gps", "mpki", "net_in", "net_out",
                                                   "disk_io_percent")))


def _valid_norm(value: float | None) -> bool:
    return value is not None and 0 <= value <= 100


# Both batch tables are sorted by job into scratch files (external sort) and joined job by job, so neither is
# ever held in memory whole; `line` keeps the source line for error messages and a deterministic order.
TASK_SCHEMA = pa.schema([("job", pa.string()), ("task", pa.string()), ("line", pa.int64()), ("start", pa.int64()),
                         ("end", pa.int64()), ("plan_cpu", pa.float64()), ("plan_mem", pa.float64())])
INSTANCE_SCHEMA = pa.schema([("job", pa.string()), ("task", pa.string()), ("line", pa.int64()),
                             ("instance", pa.string()), ("start", pa.int64()), ("end", pa.int64()),
                             ("seq", pa.int64()), ("total", pa.int64()), ("cpu_avg", pa.float64()),
                             ("cpu_max", pa.float64()), ("mem_avg", pa.float64())])
BY_JOB = [("job", "ascending"), ("task", "ascending"), ("line", "ascending")]


@dataclass(slots=True)
class Task:
    duration: float | None
    cpu_m: int
    mem_mib: int
    plan_cpu: float
    plan_mem: float
    parents: str


def read(ctx: Context) -> Iterator[pa.Table]:
    if "machines" in ctx.files:
        _read_machines(ctx, ctx.files["machines"][0])
    else:
        ctx.homogeneous_nodes("v2018-node")
    if "containers" in ctx.files:
        yield from _services(ctx)
    if "tasks" in ctx.files or "instances" in ctx.files:
        task_path = need(ctx.files, "tasks", NAME, "batch instances need batch_task.csv")[0]
        instance_path = need(ctx.files, "instances", NAME, "pods are built from batch_instance.csv")[0]
        tasks = extsort.sort(_task_rows(ctx, task_path), ctx.scratch / "tasks.parquet", BY_JOB, TASK_SCHEMA)
        instances = extsort.sort(_instance_rows(ctx, instance_path), ctx.scratch / "instances.parquet", BY_JOB,
                                 INSTANCE_SCHEMA)
        yield from _join(ctx, task_path, tasks, instances)


def _read_machines(ctx: Context, path: Path) -> None:
    latest: dict[str, tuple[int, NodeSpec | None]] = {}
    for _, (machine, stamp, domain, _, cores, mem, _) in read_csv(path, MACHINE_COLUMNS, ctx.bad):
        if stamp < latest.get(machine, (-1, None))[0]:
            continue
        if cores <= 0 or not 0 < mem <= 100:
            ctx.count("invalid_machine_rows")
            latest[machine] = (stamp, None)
            continue
        node = NodeSpec(machine, cores * 1000, round(mem / 100 * ctx.machine_mem_mib),
                        rack=f"fd-{domain}" if domain else "rack-0")
        latest[machine] = (stamp, node)
    ctx.nodes.extend(node for _, node in latest.values() if node is not None)


def _task_rows(ctx: Context, path: Path) -> Iterator[pa.Table]:
    def rows() -> Iterator[tuple[Any, ...]]:
        for line, (task, _, job, _, _, start, end, cpu, mem) in read_csv(path, TASK_COLUMNS, ctx.bad):
            if not ctx.keep(job, float(start) if start > 0 else None):
                continue
            if start < 0 or end < 0 or (cpu is not None and cpu < 0):
                ctx.bad.report(path, line, "6-8", f"negative time or plan_cpu ({start}, {end}, {cpu})")
                continue
            yield job, task, line, start, end, cpu, mem

    return extsort.tables(TASK_SCHEMA, rows())


def _instance_rows(ctx: Context, path: Path) -> Iterator[pa.Table]:
    def rows() -> Iterator[tuple[Any, ...]]:
        for line, row in read_csv(path, INSTANCE_COLUMNS, ctx.bad):
            instance, task, job, _, _, start, end, _, seq, total, cpu_avg, cpu_max, mem_avg, _ = row
            if not ctx.keep(job):
                continue
            if 0 < end < start:
                ctx.bad.report(path, line, "7 (end_time)", f"ends at {end}, before its start at {start}")
                continue
            yield job, task, line, instance, start, end, seq, total, cpu_avg, cpu_max, mem_avg

    return extsort.tables(INSTANCE_SCHEMA, rows())


def _job_tasks(ctx: Context, path: Path, rows: extsort.Columns) -> tuple[float | None, dict[str, Task]]:
    """One job's arrival (earliest valid start) and its valid tasks with DAG parents resolved."""
    names = rows["task"]
    starts = [start for start in rows["start"] if start > 0]
    arrival = float(min(starts)) if starts else None
    parents, dangling = dag.job_parents(dict.fromkeys(names))
    if dangling:
        ctx.count("missing_parent_tasks", dangling)
    tasks: dict[str, Task] = {}
    for i, name in enumerate(names):
        if i and names[i - 1] == name:
            ctx.bad.report(path, rows["line"][i], "1 (task_name)", f"task {name} of this job listed twice")
            continue
        start, end, cpu, mem = rows["start"][i], rows["end"][i], rows["plan_cpu"][i], rows["plan_mem"][i]
        if cpu is None or not _valid_norm(mem):
            continue  # an invalid request: its instances are counted as they come
        tasks[name] = Task(float(end - start) if 0 < start <= end else None, round(cpu * 10),
                           round(mem / 100 * ctx.machine_mem_mib), cpu, mem, parents[name])
    return arrival, tasks


def _join(ctx: Context, task_path: Path, task_file: Path, instance_file: Path) -> Iterator[pa.Table]:
    buffer = PodBuffer()
    task_groups = extsort.Cursor(extsort.groups(task_file, ["job"], TASK_SCHEMA.names[1:]))
    columns = ["task", "instance", "start", "end", "seq", "total", "cpu_avg", "cpu_max", "mem_avg"]
    for (job,), rows in extsort.groups(instance_file, ["job"], columns):
        task_rows = task_groups.at((job,))
        if task_rows is None:
            ctx.count("instances_without_task", len(rows["task"]))
            continue
        arrival, tasks = _job_tasks(ctx, task_path, task_rows)
        for i, name in enumerate(rows["task"]):
            task = tasks.get(name)
            if task is None:
                known = name in task_rows["task"]
                ctx.count("invalid_request" if known else "instances_without_task")
                continue
            if arrival is None:
                ctx.count("out_of_window")
                continue
            _add(ctx, buffer, job, arrival, task, *(rows[column][i] for column in columns))
            if buffer.full():
                yield buffer.take()
    ctx.count("pods_without_usage", buffer.without_usage)
    yield buffer.take()


def _add(ctx: Context, buffer: PodBuffer, job: str, arrival: float, task: Task, name: str, instance: str,
         start: int, end: int, seq: int | None, total: int | None, cpu_avg: float | None, cpu_max: float | None,
         mem_avg: float | None) -> None:
    work = float(end - start) if 0 < start <= end else task.duration
    if work is None:
        ctx.count("unknown_duration")
    usage_mem = None
    if mem_avg is not None:
        if _valid_norm(mem_avg) and task.plan_mem > 0:
            usage_mem = mem_avg / task.plan_mem
        else:
            ctx.count("invalid_usage")
    usage_cpu = cv = None
    if cpu_avg is not None and cpu_avg >= 0 and task.plan_cpu > 0:
        usage_cpu = cpu_avg / task.plan_cpu
        if cpu_max is not None and cpu_max >= cpu_avg > 0:
            cv = min(3.0, (cpu_max / cpu_avg - 1) / 2)
    uid = f"{job}/{name}/{instance}" + (f"#{seq}" if total is not None and total > 1 else "")
    buffer.add(uid, job, arrival, task.cpu_m, task.mem_mib, task=name, work_s=work, usage_cpu=usage_cpu,
               usage_mem=usage_mem, usage_cv=cv, parents=task.parents)


@dataclass(slots=True)
class Container:
    app: str
    first: int
    latest: int
    cpu_m: int
    mem_mib: int | None
    samples: int = 0
    cpu_sum: float = 0.0
    cpu_sq: float = 0.0
    mem_sum: float = 0.0


def _services(ctx: Context) -> Iterator[pa.Table]:
    path = ctx.files["containers"][0]
    containers: dict[str, Container] = {}
    for line, (cid, _, stamp, app, _, cpu, _, mem) in read_csv(path, CONTAINER_COLUMNS, ctx.bad):
        if stamp < 0 or cpu < 0:
            ctx.bad.report(path, line, "3,6", f"negative time_stamp or cpu_request ({stamp}, {cpu})")
            continue
        mem_mib = round(mem / 100 * ctx.machine_mem_mib) if _valid_norm(mem) else None
        known = containers.get(cid)
        if known is None:
            containers[cid] = Container(app, stamp, stamp, round(cpu * 10), mem_mib)
        elif stamp >= known.latest:
            known.latest, known.cpu_m, known.mem_mib = stamp, round(cpu * 10), mem_mib
            known.first = min(known.first, stamp)
        else:
            known.first = min(known.first, stamp)
    if "container_usage" in ctx.files:
        _read_usage(ctx, ctx.files["container_usage"][0], containers)
    buffer = PodBuffer()
    for cid, box in containers.items():
        if box.mem_mib is None:
            ctx.count("invalid_request")
            continue
        cpu = cv = mem = None
        if box.samples:
            cpu, mem = box.cpu_sum / box.samples / 100, box.mem_sum / box.samples / 100
            variance = max(0.0, box.cpu_sq / box.samples - (box.cpu_sum / box.samples) ** 2)
            cv = math.sqrt(variance) / (box.cpu_sum / box.samples) if box.cpu_sum > 0 else 0.0
        buffer.add(cid, box.app, float(box.first), box.cpu_m, box.mem_mib, qos=QoS.LS, service=True,
                   usage_cpu=cpu, usage_mem=mem, usage_cv=cv)
        if buffer.full():
            yield buffer.take()
    ctx.count("services_without_usage", buffer.without_usage)
    yield buffer.take()


def _read_usage(ctx: Context, path: Path, containers: dict[str, Container]) -> None:
    for _, (cid, _, _, cpu, mem, *_) in read_csv(path, USAGE_COLUMNS, ctx.bad):
        box = containers.get(cid)
        if box is None:
            ctx.count("usage_without_container")
            continue
        if not (_valid_norm(cpu) and _valid_norm(mem)) or cpu is None or mem is None:
            ctx.count("invalid_usage")
            continue
        box.samples += 1
        box.cpu_sum += cpu
        box.cpu_sq += cpu * cpu
        box.mem_sum += mem
