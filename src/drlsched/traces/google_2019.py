"""`google-2019`: Google ClusterData2019 (trace v3) as the JSON-lines export (one object per line, often
.json.gz shards): instance_events, machine_events and, optionally, instance_usage.

- Times are microseconds since 600 s before the trace start: t = (time - 600e6) / 1e6 seconds. 0 means before
  the window (a pod submitted then arrives at 0, counted in `submitted_before_window`) and 2^63-1 after it
  (no end: work_s None). INT64 fields may be JSON strings, as BigQuery exports them.
- A task is (collection_id, instance_index). Each SUBMIT opens an attempt (a retry after EVICT/FAIL/KILL is
  a new pod, uid suffixed `-<attempt>`); its request is the latest SUBMIT/QUEUE/ENABLE/UPDATE_* request before
  it is scheduled; the attempt ends at EVICT, FAIL, FINISH, KILL or LOST. Run time = end - SCHEDULE. Attempts
  that end without ever being scheduled are dropped (`never_scheduled`); instances of alloc sets
  (collection_type 1) are reservations, not work, and are dropped (`alloc_instances`).
- CPU (NCU) and memory are normalised to the largest machine: multiplied by `--machine-cpu-millis` and
  `--machine-memory-mib`. scheduling_class 2-3 is LS, 1 Burstable, 0 BE; priority is kept, and the
  production tier (priority >= 120) is treated as long-running services.
- Usage (instance_usage): mean over the 5-minute windows of average_usage / request, and the coefficient of
  variation of the windows' CPU averages.
- Machines: every machine with a known capacity (latest ADD/UPDATE), removed ones included.
Events and usage windows are sorted by task (external sort) and walked task by task: memory is bounded by one
task's events, not by the trace.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from drlsched.traces import extsort
from drlsched.traces.context import Context
from drlsched.traces.csvio import read_json_lines
from drlsched.traces.files import Role, need
from drlsched.traces.podtable import PodBuffer
from drlsched.workload import NodeSpec, QoS

NAME = "google-2019"
ROLES = (
    Role("events", ("instance_events*.json",), many=True),
    Role("machines", ("machine_events*.json",), many=True),
    Role("usage", ("instance_usage*.json",), many=True),
)
DEFAULT_MACHINE = (96_000, 524_288)  # assumed size of the largest machine (the trace does not disclose it)
DEFAULT_NODES = 10_000
SAMPLES_WHILE_READING = True  # --sample-rate shrinks the sorts

OFFSET_US = 600_000_000
AFTER_WINDOW = 2**63 - 1
SUBMIT, QUEUE, ENABLE, SCHEDULE = 0, 1, 2, 3
ENDS = frozenset({4, 5, 6, 7, 8})  # EVICT, FAIL, FINISH, KILL, LOST
UPDATES = frozenset({SUBMIT, QUEUE, ENABLE, 9, 10})  # events that may carry a new request
ALLOC_SET = 1
QOS_BY_CLASS = {0: QoS.BE, 1: QoS.BURSTABLE, 2: QoS.LS, 3: QoS.LS}
PRODUCTION_PRIORITY = 120


class _Missing(Exception):
    def __init__(self, field: str, reason: str) -> None:
        super().__init__(reason)
        self.field = field


def _int(record: Mapping[str, Any], name: str, default: int | None = None) -> int:
    value = record.get(name)
    if value is None or value == "":
        if default is None:
            raise _Missing(name, "missing field")
        return default
    try:
        return int(value)
    except (TypeError, ValueError):
        raise _Missing(name, f"not an integer: {value!r}") from None


def _resources(record: Mapping[str, Any], name: str) -> tuple[float, float] | None:
    value = record.get(name)
    if not value:
        return None
    if not isinstance(value, Mapping):
        raise _Missing(name, f"expected an object with cpus and memory, got {value!r}")
    try:
        cpus, memory = float(value.get("cpus") or 0.0), float(value.get("memory") or 0.0)
    except (TypeError, ValueError):
        raise _Missing(name, f"cpus/memory are not numbers: {value!r}") from None
    if not (math.isfinite(cpus) and math.isfinite(memory)) or cpus < 0 or memory < 0:
        raise _Missing(name, f"cpus/memory out of range: {value!r}")
    return cpus, memory


def _seconds(time_us: int) -> float:
    return max(0.0, (time_us - OFFSET_US) / 1e6)


def _records(ctx: Context, paths: list[Path]) -> Iterator[tuple[Path, int, Mapping[str, Any]]]:
    for path in paths:
        for line, record in read_json_lines(path, ctx.bad):
            yield path, line, record


def read(ctx: Context) -> Iterator[pa.Table]:
    if "machines" in ctx.files:
        _read_machines(ctx)
    else:
        ctx.homogeneous_nodes("google-node")
    paths = need(ctx.files, "events", NAME, "pods come from instance_events")
    events = extsort.sort(extsort.tables(EVENT_SCHEMA, _event_rows(ctx, paths)), ctx.scratch / "events.parquet",
                          EVENT_ORDER, EVENT_SCHEMA)
    usage = extsort.Cursor(iter(()))
    if "usage" in ctx.files:
        windows = extsort.sort(extsort.tables(USAGE_SCHEMA, _usage_rows(ctx)), ctx.scratch / "usage.parquet",
                               TASK_ORDER, USAGE_SCHEMA)
        usage = extsort.Cursor(extsort.groups(windows, TASK_KEY, ["cpus", "memory"]))
    yield from _pods(ctx, extsort.groups(events, TASK_KEY, EVENT_SCHEMA.names[2:]), usage)


def _read_machines(ctx: Context) -> None:
    latest: dict[int, tuple[int, tuple[float, float] | None]] = {}
    for path, line, record in _records(ctx, ctx.files["machines"]):
        try:
            time, machine, kind = _int(record, "time"), _int(record, "machine_id"), _int(record, "type")
            capacity = _resources(record, "capacity")
        except _Missing as err:
            ctx.bad.report(path, line, err.field, str(err))
            continue
        if kind == 2:
            ctx.count("machine_removals")
        if capacity is not None and time >= latest.get(machine, (-1, None))[0]:
            latest[machine] = (time, capacity)
    for machine, (_, capacity) in sorted(latest.items()):
        assert capacity is not None
        cpu_m, mem_mib = round(capacity[0] * ctx.machine_cpu_m), round(capacity[1] * ctx.machine_mem_mib)
        if cpu_m <= 0 or mem_mib <= 0:
            ctx.count("machines_without_capacity")
            continue
        ctx.nodes.append(NodeSpec(f"m{machine}", cpu_m, mem_mib))


# Events and usage windows are sorted by task into scratch files (external sort) and walked task by task, so
# neither table is held in memory; a null cpus means the event carries no request.
EVENT_SCHEMA = pa.schema([("collection", pa.int64()), ("index", pa.int64()), ("time", pa.int64()),
                          ("type", pa.int64()), ("cpus", pa.float64()), ("memory", pa.float64()),
                          ("priority", pa.int64()), ("klass", pa.int64())])
USAGE_SCHEMA = pa.schema([("collection", pa.int64()), ("index", pa.int64()), ("cpus", pa.float64()),
                          ("memory", pa.float64())])
TASK_KEY = ["collection", "index"]
TASK_ORDER = [("collection", "ascending"), ("index", "ascending")]
EVENT_ORDER = [*TASK_ORDER, ("time", "ascending"), ("type", "ascending")]  # SUBMIT before SCHEDULE at a tie


@dataclass(slots=True)
class Usage:
    windows: int
    cpu: float  # mean of the windows' average CPU
    mem: float
    cv: float  # coefficient of variation of the windows' average CPU


def _usage_rows(ctx: Context) -> Iterator[tuple[Any, ...]]:
    for path, line, record in _records(ctx, ctx.files["usage"]):
        try:
            collection, index = _int(record, "collection_id"), _int(record, "instance_index")
            if not ctx.keep(str(collection)):
                continue
            average = _resources(record, "average_usage")
        except _Missing as err:
            ctx.bad.report(path, line, err.field, str(err))
            continue
        if average is None:
            ctx.count("usage_windows_without_average")
            continue
        yield collection, index, average[0], average[1]


def _usage(columns: extsort.Columns) -> Usage:
    cpu = columns["cpus"]
    mean = sum(cpu) / len(cpu)
    spread = math.sqrt(max(0.0, sum(c * c for c in cpu) / len(cpu) - mean * mean))
    return Usage(len(cpu), mean, sum(columns["memory"]) / len(cpu), spread / mean if mean > 0 else 0.0)


def _event_rows(ctx: Context, paths: list[Path]) -> Iterator[tuple[Any, ...]]:
    for path, line, record in _records(ctx, paths):
        try:
            collection, index = _int(record, "collection_id"), _int(record, "instance_index")
            time, kind = _int(record, "time"), _int(record, "type")
            if not ctx.keep(str(collection), _seconds(time) if kind == SUBMIT and time != AFTER_WINDOW else None):
                continue
            if not 0 <= kind <= 10:
                raise _Missing("type", f"unknown event type {kind}")
            if _int(record, "collection_type", 0) == ALLOC_SET:
                ctx.count("alloc_instances")
                continue
            request = _resources(record, "resource_request")
            priority, klass = _int(record, "priority", 0), _int(record, "scheduling_class", 0)
        except _Missing as err:
            ctx.bad.report(path, line, err.field, str(err))
            continue
        cpus, memory = request if request is not None else (None, None)
        yield collection, index, time, kind, cpus, memory, priority, klass


@dataclass(slots=True)
class Attempt:
    number: int
    submitted: int
    scheduled: int | None = None
    request: tuple[float, float] | None = None
    priority: int = 0
    klass: int = 0


def _emit(ctx: Context, buffer: PodBuffer, key: tuple[Any, ...], attempt: Attempt, end: int | None,
          usage: Usage | None) -> None:
    """Adds the pod of one attempt, or counts why it has none."""
    request, scheduled = attempt.request, attempt.scheduled
    if request is None:
        ctx.count("no_request")
        return
    if scheduled is None and end is not None:
        ctx.count("never_scheduled")
        return
    if attempt.submitted == AFTER_WINDOW:
        ctx.count("after_window")
        return
    if attempt.submitted == 0:
        ctx.count("submitted_before_window")
    work = None
    if end is None or end == AFTER_WINDOW or scheduled is None:
        ctx.count("unknown_duration")
    else:
        work = _seconds(end) - _seconds(scheduled)
    use_cpu = use_mem = cv = None
    if usage is not None:
        use_cpu = usage.cpu / request[0] if request[0] > 0 else None
        use_mem = usage.mem / request[1] if request[1] > 0 else None
        cv = usage.cv
    uid = f"{key[0]}-{key[1]}" + (f"-{attempt.number}" if attempt.number else "")
    buffer.add(uid, str(key[0]), _seconds(attempt.submitted), round(request[0] * ctx.machine_cpu_m),
               round(request[1] * ctx.machine_mem_mib), qos=QOS_BY_CLASS.get(attempt.klass, QoS.BE),
               priority=attempt.priority, work_s=work, service=attempt.priority >= PRODUCTION_PRIORITY,
               usage_cpu=use_cpu, usage_mem=use_mem, usage_cv=cv)


def _pods(ctx: Context, events: Iterator[tuple[tuple[Any, ...], extsort.Columns]],
          usage: extsort.Cursor) -> Iterator[pa.Table]:
    buffer = PodBuffer()
    for key, columns in events:
        windows = usage.at(key)
        box = None if windows is None else _usage(windows)
        attempt: Attempt | None = None
        count = 0
        last_request: tuple[float, float] | None = None  # a retry without its own request keeps the last
        for time, kind, cpus, memory, priority, klass in zip(*columns.values(), strict=True):
            if kind == SUBMIT:
                if attempt is not None:
                    _emit(ctx, buffer, key, attempt, None, box)  # resubmitted without an end in the trace
                attempt = Attempt(count, time, request=last_request)
                count += 1
            elif attempt is None:
                if count:
                    ctx.count("events_after_end")
                    continue
                ctx.count("implicit_submit")  # the task existed before its first event in the trace
                attempt = Attempt(count, 0)
                count += 1
            if kind in UPDATES and cpus is not None and attempt.scheduled is None:
                attempt.request = last_request = (cpus, memory)
            attempt.priority, attempt.klass = priority, klass
            if kind == SCHEDULE and attempt.scheduled is None:
                attempt.scheduled = time
            elif kind in ENDS:
                _emit(ctx, buffer, key, attempt, time, box)
                attempt = None
        if attempt is not None:
            _emit(ctx, buffer, key, attempt, None, box)
        if buffer.full():
            yield buffer.take()
    ctx.count("usage_without_events", usage.rest())
    ctx.count("pods_without_usage", buffer.without_usage)
    yield buffer.take()
