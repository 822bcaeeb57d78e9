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
The events are grouped per task in memory (tens of bytes per event), then pods go through the sorted store.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

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
SAMPLES_WHILE_READING = True  # events are grouped in memory: --sample-rate shrinks them

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
    usage = _read_usage(ctx) if "usage" in ctx.files else {}
    events = _read_events(ctx, need(ctx.files, "events", NAME, "pods come from instance_events"))
    yield from _pods(ctx, events, usage)


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


@dataclass(slots=True)
class Usage:
    windows: int = 0
    cpu: float = 0.0
    cpu_sq: float = 0.0
    mem: float = 0.0


def _read_usage(ctx: Context) -> dict[tuple[int, int], Usage]:
    usage: dict[tuple[int, int], Usage] = {}
    for path, line, record in _records(ctx, ctx.files["usage"]):
        try:
            key = (_int(record, "collection_id"), _int(record, "instance_index"))
            if not ctx.keep(str(key[0])):
                continue
            average = _resources(record, "average_usage")
        except _Missing as err:
            ctx.bad.report(path, line, err.field, str(err))
            continue
        if average is None:
            ctx.count("usage_windows_without_average")
            continue
        box = usage.setdefault(key, Usage())
        box.windows += 1
        box.cpu += average[0]
        box.cpu_sq += average[0] * average[0]
        box.mem += average[1]
    return usage


# One event, compact: (time µs, type, cpus, memory, priority, scheduling class); cpus < 0 = no request.
Event = tuple[int, int, float, float, int, int]


def _read_events(ctx: Context, paths: list[Path]) -> dict[tuple[int, int], list[Event]]:
    events: dict[tuple[int, int], list[Event]] = {}
    for path, line, record in _records(ctx, paths):
        try:
            key = (_int(record, "collection_id"), _int(record, "instance_index"))
            time, kind = _int(record, "time"), _int(record, "type")
            if not ctx.keep(str(key[0]), _seconds(time) if kind == SUBMIT and time != AFTER_WINDOW else None):
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
        cpus, memory = request if request is not None else (-1.0, -1.0)
        events.setdefault(key, []).append((time, kind, cpus, memory, priority, klass))
    return events


@dataclass(slots=True)
class Attempt:
    number: int
    submitted: int
    scheduled: int | None = None
    request: tuple[float, float] | None = None
    priority: int = 0
    klass: int = 0


def _emit(ctx: Context, buffer: PodBuffer, key: tuple[int, int], attempt: Attempt, end: int | None,
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
    if usage is not None and usage.windows:
        mean = usage.cpu / usage.windows
        use_cpu = mean / request[0] if request[0] > 0 else None
        use_mem = usage.mem / usage.windows / request[1] if request[1] > 0 else None
        cv = math.sqrt(max(0.0, usage.cpu_sq / usage.windows - mean * mean)) / mean if mean > 0 else 0.0
    uid = f"{key[0]}-{key[1]}" + (f"-{attempt.number}" if attempt.number else "")
    buffer.add(uid, str(key[0]), _seconds(attempt.submitted), round(request[0] * ctx.machine_cpu_m),
               round(request[1] * ctx.machine_mem_mib), qos=QOS_BY_CLASS.get(attempt.klass, QoS.BE),
               priority=attempt.priority, work_s=work, service=attempt.priority >= PRODUCTION_PRIORITY,
               usage_cpu=use_cpu, usage_mem=use_mem, usage_cv=cv)


def _pods(ctx: Context, events: dict[tuple[int, int], list[Event]],
          usage: dict[tuple[int, int], Usage]) -> Iterator[pa.Table]:
    buffer = PodBuffer()
    for key, history in events.items():
        history.sort()
        box = usage.get(key)
        attempt: Attempt | None = None
        count = 0
        last_request: tuple[float, float] | None = None  # a retry without its own request keeps the last
        for time, kind, cpus, memory, priority, klass in history:
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
            if kind in UPDATES and cpus >= 0 and attempt.scheduled is None:
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
    ctx.count("pods_without_usage", buffer.without_usage)
    yield buffer.take()
