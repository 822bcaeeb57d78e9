"""`alibaba-gpu-v2020`: the PAI tables of cluster-trace-gpu-v2020 (NSDI'22), headerless CSV.

- One pod per pai_instance_table row (uid = worker_name), with its task's requests; without an instance table
  each task expands to `inst_num` pods of the task's run time.
- Arrival = the job's start_time in pai_job_table (its submission); times share one shifted clock, and the
  window is taken relative to the first arrival. Run time = instance end - start; missing ends leave it
  unknown (work_s None), counted in `info["unknown_duration"]`.
- plan_cpu is percent of a core (x10 = millicores), plan_mem GB (x1024 = MiB), plan_gpu percent of a GPU:
  below 100 a shared GPU (gpu_milli = plan_gpu x 10), multiples of 100 whole GPUs; other values above 100
  (e.g. 150) cannot be expressed and are rounded up to whole GPUs, counted in `info["gpu_rounded_up"]`.
- gpu_type is the type the task ran on, not a constraint, so it is not turned into `gpu_models`.
- Usage from pai_sensor_table (optional, joined on worker_name): cpu_usage / plan_cpu, avg_mem / plan_mem,
  gpu_wrk_util / plan_gpu.
- Every table is sorted by job (external sort) and the tables are walked job by job: memory is bounded by
  one job, not by the trace.
- pai_machine_spec gives the cluster (cap_cpu cores, cap_mem GB, cap_gpu, gpu_type; `CPU` = no GPU).
A `.header` file beside a table, when present, must list the expected columns.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from drlsched.errors import UserError
from drlsched.traces import extsort
from drlsched.traces.context import Context
from drlsched.traces.csvio import (
    Column,
    decoding,
    integer,
    open_text,
    optional_number,
    read_csv,
    required,
    text,
)
from drlsched.traces.files import Role, need
from drlsched.traces.podtable import PodBuffer
from drlsched.workload import GPU_MILLI, NodeSpec

NAME = "alibaba-gpu-v2020"
ROLES = (
    Role("jobs", ("pai_job_table*.csv",)),
    Role("tasks", ("pai_task_table*.csv",)),
    Role("instances", ("pai_instance_table*.csv",)),
    Role("sensors", ("pai_sensor_table*.csv",)),
    Role("machines", ("pai_machine_spec*.csv",)),
)
DEFAULT_MACHINE = (96_000, 524_288)  # the common PAI machine: 96 cores, 512 GB
DEFAULT_NODES = 1897
SAMPLES_WHILE_READING = True  # --sample-rate shrinks the sorts

JOB_COLUMNS = (Column("job_name", required), Column("inst_id", text), Column("user", text),
               Column("status", text), Column("start_time", optional_number),
               Column("end_time", optional_number))
TASK_COLUMNS = (Column("job_name", required), Column("task_name", required),
                Column("inst_num", optional_number), Column("status", text),
                Column("start_time", optional_number), Column("end_time", optional_number),
                Column("plan_cpu", optional_number), Column("plan_mem", optional_number),
                Column("plan_gpu", optional_number), Column("gpu_type", text))
INSTANCE_COLUMNS = (Column("job_name", required), Column("task_name", required), Column("inst_name", text),
                    Column("worker_name", required), Column("inst_id", text), Column("status", text),
                    Column("start_time", optional_number), Column("end_time", optional_number),
                    Column("machine", text))
SENSOR_COLUMNS = (Column("job_name", text), Column("task_name", text), Column("worker_name", required),
                  *(Column(name, text) for name in ("inst_id", "machine", "gpu_name")),
                  Column("cpu_usage", optional_number), Column("gpu_wrk_util", optional_number),
                  Column("avg_mem", optional_number),
                  *(Column(name, text) for name in ("max_mem", "avg_gpu_wrk_mem", "max_gpu_wrk_mem", "read",
                                                    "write", "read_count", "write_count")))
MACHINE_COLUMNS = (Column("machine", required), Column("gpu_type", text), Column("cap_cpu", integer),
                   Column("cap_mem", integer), Column("cap_gpu", integer))


@dataclass(slots=True)
class Task:
    cpu_m: int
    mem_mib: int
    gpus: int
    gpu_milli: int
    plan_cpu: float
    plan_mem: float
    plan_gpu: float
    instances: int
    duration: float | None


def _check_header(path: Path, columns: tuple[Column, ...]) -> None:
    header = path.with_name(path.name.split(".csv")[0] + ".header")
    if not header.is_file():
        return
    with open_text(header) as handle, decoding(header, lambda: 0):
        names = [name.strip() for name in handle.readline().split(",")]
    expected = [column.name for column in columns]
    if names != expected:
        raise UserError(f"{header}: columns {','.join(names)} differ from the expected {','.join(expected)}")


def _table(ctx: Context, role: str, columns: tuple[Column, ...]) -> Iterator[tuple[int, list[Any]]]:
    path = ctx.files[role][0]
    _check_header(path, columns)
    return read_csv(path, columns, ctx.bad)


def read(ctx: Context) -> Iterator[pa.Table]:
    if "machines" in ctx.files:
        _read_machines(ctx)
    else:
        ctx.homogeneous_nodes("pai-node")
    if "jobs" not in ctx.files and "tasks" not in ctx.files:
        return  # a machine table alone: a cluster without pods
    need(ctx.files, "jobs", NAME, "pods arrive at their job's start_time in pai_job_table")
    need(ctx.files, "tasks", NAME, "pods take their requests from pai_task_table")
    jobs = _sorted(ctx, "jobs", JOB_SCHEMA, _job_rows(ctx))
    tasks = extsort.Cursor(extsort.groups(_sorted(ctx, "tasks", TASK_SCHEMA, _task_rows(ctx)), ["job"],
                                          TASK_SCHEMA.names[1:]))
    instances = sensors = None
    if "instances" in ctx.files:
        instances = extsort.Cursor(extsort.groups(_sorted(ctx, "instances", INSTANCE_SCHEMA, _instance_rows(ctx)),
                                                  ["job"], INSTANCE_SCHEMA.names[1:]))
    if "sensors" in ctx.files:
        sensors = extsort.Cursor(extsort.groups(_sorted(ctx, "sensors", SENSOR_SCHEMA, _sensor_rows(ctx)),
                                                ["job"], SENSOR_SCHEMA.names[1:]))
    buffer = PodBuffer()
    for (job,), rows in extsort.groups(jobs, ["job"], ["arrival"]):
        job_tasks = _job_tasks(ctx, tasks.at((job,)))
        if instances is None:
            _expand(ctx, buffer, job, rows["arrival"][0], job_tasks)
        else:
            usage = sensors.at((job,)) if sensors is not None else None
            _instances(ctx, buffer, job, rows["arrival"][0], job_tasks, instances.at((job,)), usage)
        if buffer.full():
            yield buffer.take()
    if instances is not None:
        ctx.count("instances_without_task_or_job", instances.rest())
    ctx.count("tasks_without_job", tasks.rest())
    ctx.count("pods_without_usage", buffer.without_usage)
    yield buffer.take()


# Every table is sorted by job into a scratch file (external sort) and the tables are walked job by job, so
# none is held in memory whole; `line` keeps the source order within a job.
JOB_SCHEMA = pa.schema([("job", pa.string()), ("line", pa.int64()), ("arrival", pa.float64())])
TASK_SCHEMA = pa.schema([("job", pa.string()), ("task", pa.string()), ("line", pa.int64()),
                         ("count", pa.int64()), ("duration", pa.float64()), ("plan_cpu", pa.float64()),
                         ("plan_mem", pa.float64()), ("plan_gpu", pa.float64())])
INSTANCE_SCHEMA = pa.schema([("job", pa.string()), ("task", pa.string()), ("line", pa.int64()),
                             ("worker", pa.string()), ("start", pa.float64()), ("end", pa.float64())])
SENSOR_SCHEMA = pa.schema([("job", pa.string()), ("worker", pa.string()), ("line", pa.int64()),
                           ("cpu", pa.float64()), ("gpu", pa.float64()), ("mem", pa.float64())])


def _sorted(ctx: Context, role: str, schema: pa.Schema, rows: Iterator[tuple[Any, ...]]) -> Path:
    order = [("job", "ascending"), ("line", "ascending")]  # within a job, the file's order
    return extsort.sort(extsort.tables(schema, rows), ctx.scratch / f"{role}.parquet", order, schema)


def _read_machines(ctx: Context) -> None:
    path = ctx.files["machines"][0]
    for line, (machine, gpu_type, cores, mem_gb, gpus) in _table(ctx, "machines", MACHINE_COLUMNS):
        if cores <= 0 or mem_gb <= 0 or not 0 <= gpus <= 64:
            ctx.bad.report(path, line, "3-5",
                           f"capacity out of range ({cores} cores, {mem_gb} GB, {gpus} GPUs)")
            continue
        model = "" if gpus == 0 or gpu_type == "CPU" else str(gpu_type)
        ctx.nodes.append(NodeSpec(str(machine), int(cores) * 1000, int(mem_gb) * 1024,
                                  int(gpus), model))


def _job_rows(ctx: Context) -> Iterator[tuple[Any, ...]]:
    path = ctx.files["jobs"][0]
    for line, (job, _, _, _, start, _) in _table(ctx, "jobs", JOB_COLUMNS):
        if not ctx.keep(job, start if start is not None and start >= 0 else None):
            continue
        if start is None or start < 0:
            ctx.bad.report(path, line, "5 (start_time)", f"missing or negative submission time {start!r}")
            continue
        yield job, line, float(start)


def _task_rows(ctx: Context) -> Iterator[tuple[Any, ...]]:
    path = ctx.files["tasks"][0]
    for line, row in _table(ctx, "tasks", TASK_COLUMNS):
        job, name, count, _, start, end, cpu, mem, gpu, _ = row
        if not ctx.keep(job):
            continue
        cpu, mem, gpu = cpu or 0.0, mem or 0.0, gpu or 0.0
        if min(cpu, mem, gpu) < 0 or (count is not None and count < 0):
            ctx.bad.report(path, line, "3,7-9", "negative inst_num or request")
            continue
        duration = end - start if start is not None and end is not None and end >= start else None
        yield job, name, line, int(count or 0), duration, cpu, mem, gpu


def _instance_rows(ctx: Context) -> Iterator[tuple[Any, ...]]:
    path = ctx.files["instances"][0]
    for line, (job, name, _, worker, _, _, start, end, _) in _table(ctx, "instances", INSTANCE_COLUMNS):
        if not ctx.keep(job):
            continue
        if start is not None and end is not None and end < start:
            ctx.bad.report(path, line, "8 (end_time)", f"ends at {end}, before its start at {start}")
            continue
        yield job, name, line, worker, start, end


def _sensor_rows(ctx: Context) -> Iterator[tuple[Any, ...]]:
    for line, row in _table(ctx, "sensors", SENSOR_COLUMNS):
        if not row[0]:
            ctx.count("sensors_without_job")
            continue
        if ctx.keep(row[0]):
            yield row[0], row[2], line, row[6], row[7], row[8]


def _gpus(ctx: Context, plan_gpu: float) -> tuple[int, int]:
    if plan_gpu <= 0:
        return 0, 0
    if plan_gpu < 100:
        return 1, max(1, round(plan_gpu * GPU_MILLI / 100))
    whole = plan_gpu / 100
    if whole != int(whole):
        ctx.count("gpu_rounded_up")
    return math.ceil(whole), GPU_MILLI


def _job_tasks(ctx: Context, rows: extsort.Columns | None) -> dict[str, Task]:
    tasks: dict[str, Task] = {}
    if rows is None:
        return tasks
    for i, name in enumerate(rows["task"]):
        cpu, mem, gpu = rows["plan_cpu"][i], rows["plan_mem"][i], rows["plan_gpu"][i]
        gpus, milli = _gpus(ctx, gpu)
        tasks[name] = Task(round(cpu * 10), round(mem * 1024), gpus, milli, cpu, mem, gpu, rows["count"][i],
                           rows["duration"][i])
    return tasks


def _ratio(used: float | None, planned: float) -> float | None:
    return used / planned if used is not None and used >= 0 and planned > 0 else None


def _instances(ctx: Context, buffer: PodBuffer, job: str, arrival: float, tasks: dict[str, Task],
               rows: extsort.Columns | None, sensors: extsort.Columns | None) -> None:
    if rows is None:
        return
    usage = {} if sensors is None else {worker: (sensors["cpu"][i], sensors["gpu"][i], sensors["mem"][i])
                                        for i, worker in enumerate(sensors["worker"])}
    for name, worker, start, end in zip(rows["task"], rows["worker"], rows["start"], rows["end"], strict=True):
        task = tasks.get(name)
        if task is None:
            ctx.count("instances_without_task_or_job")
            continue
        work = end - start if start is not None and end is not None else None
        if work is None:
            ctx.count("unknown_duration")
        cpu, gpu, mem = usage.get(worker, (None, None, None))
        buffer.add(worker, job, arrival, task.cpu_m, task.mem_mib, task=name, gpus=task.gpus,
                   gpu_milli=task.gpu_milli, work_s=work, usage_cpu=_ratio(cpu, task.plan_cpu),
                   usage_mem=_ratio(mem, task.plan_mem), usage_gpu=_ratio(gpu, task.plan_gpu))


def _expand(ctx: Context, buffer: PodBuffer, job: str, arrival: float, tasks: dict[str, Task]) -> None:
    for name, task in tasks.items():
        if task.duration is None:
            ctx.count("unknown_duration", task.instances)
        for i in range(task.instances):
            buffer.add(f"{job}/{name}/{i}", job, arrival, task.cpu_m, task.mem_mib, task=name, gpus=task.gpus,
                       gpu_milli=task.gpu_milli, work_s=task.duration)
