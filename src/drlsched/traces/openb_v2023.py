"""`alibaba-gpu-v2023`: the FGD "openb" pod list and node list (cluster-trace-gpu-v2023, ATC'23).

Units are already Kubernetes' (millicores, MiB, milli-GPU). One pod per row, its own job. Run time is
deletion - scheduled (deletion - creation for pods still Pending when the trace was taken); a missing
deletion time means it ran past the trace end (work_s None). LS and Guaranteed pods are long-running
services (their run time is a lifetime); Burstable and BE pods are batch. Pod lists of the five-column form
(`name,cpu_milli,memory_mib,num_gpu,gpu_milli`, as FGD's own simulator reads) have no times: a population
to submit, every pod arriving at 0 and never leaving (the `fill` experiment's input).
"""

from __future__ import annotations

import csv
from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa

from drlsched.traces.context import Context
from drlsched.traces.csvio import (
    BadRows,
    Column,
    decoding,
    integer,
    open_text,
    optional_integer,
    read_csv,
    required,
    text,
)
from drlsched.traces.files import Role, need
from drlsched.traces.podtable import PodBuffer
from drlsched.workload import GPU_MILLI, NodeSpec, QoS

NAME = "alibaba-gpu-v2023"
ROLES = (
    Role("pods", ("openb_pod_list*.csv", "*pod_list*.csv")),
    Role("nodes", ("openb_node_list_all_node.csv", "openb_node_list_gpu_node.csv", "*node_list*.csv")),
)
DEFAULT_MACHINE = (96_000, 393_216)  # the most common openb node (G2: 96 cores, 384 GiB)
DEFAULT_NODES = 1523

POD_COLUMNS = (
    Column("name", required), Column("cpu_milli", integer), Column("memory_mib", integer),
    Column("num_gpu", integer), Column("gpu_milli", integer), Column("gpu_spec", text),
    Column("qos", QoS.parse),
    Column("pod_phase", text), Column("creation_time", integer), Column("deletion_time", optional_integer),
    Column("scheduled_time", optional_integer),
)
POPULATION_COLUMNS = POD_COLUMNS[:5]  # name,cpu_milli,memory_mib,num_gpu,gpu_milli (the multigpu* lists)
NODE_COLUMNS = (Column("sn", required), Column("cpu_milli", integer), Column("memory_mib", integer),
                Column("gpu", integer), Column("model", text))


def read(ctx: Context) -> Iterator[pa.Table]:
    if "nodes" in ctx.files:
        _read_nodes(ctx)
    else:
        ctx.homogeneous_nodes("openb-node")
    yield from _read_pods(ctx)


PAPER_NODES = "openb_node_list_gpu_node.csv"  # the FGD paper's cluster: 1,213 GPU nodes, 6,212 GPUs


def _read_nodes(ctx: Context) -> None:
    ctx.nodes.extend(read_node_list(ctx.files["nodes"][0], ctx.bad))


def read_node_list(path: Path, bad: BadRows) -> list[NodeSpec]:
    """The nodes of an openb node list (`sn,cpu_milli,memory_mib,gpu,model`)."""
    nodes = []
    for line, (name, cpu, mem, gpus, model) in read_csv(path, NODE_COLUMNS, bad,
                                                         header=[c.name for c in NODE_COLUMNS]):
        if cpu <= 0 or mem <= 0 or not 0 <= gpus <= 64:
            bad.report(path, line, "2-4 (cpu_milli, memory_mib, gpu)",
                       f"capacity out of range ({cpu}m, {mem}Mi, {gpus} GPUs)")
            continue
        nodes.append(NodeSpec(name, cpu, mem, gpus, model if gpus else ""))
    return nodes


def _pod_columns(path: Path) -> tuple[Column, ...]:
    """The full pod-list form, or the five-column population form (`multigpu*`: no spec, QoS, phase or times),
    told apart by the header: a file naming any column beyond the five is read (and checked) as the full form."""
    with open_text(path) as handle, decoding(path, lambda: 0):
        first = next(csv.reader(handle), [])
    names = {name.strip().lstrip("\ufeff") for name in first}
    extra = {c.name for c in POD_COLUMNS[len(POPULATION_COLUMNS):]}
    return POD_COLUMNS if names & extra else POPULATION_COLUMNS


def _request_problem(cpu: int, mem: int, gpus: int, milli: int) -> tuple[str, str] | None:
    """(column, reason) when a pod's request is out of range or its GPU count and share disagree."""
    if cpu < 0 or mem < 0:
        return "2-3 (cpu_milli, memory_mib)", f"negative request ({cpu}m, {mem}Mi)"
    if not 0 <= gpus <= 64:
        return "4 (num_gpu)", f"GPU count {gpus} outside 0..64"
    if (gpus == 0 and milli != 0) or (gpus == 1 and not 0 < milli <= GPU_MILLI) or \
            (gpus > 1 and milli != GPU_MILLI):
        return "5 (gpu_milli)", (f"gpu_milli {milli} does not fit num_gpu {gpus} (0 for none, 1..1000 for one "
                                 f"GPU, 1000 for several)")
    return None


def _read_pods(ctx: Context) -> Iterator[pa.Table]:
    path = need(ctx.files, "pods", NAME, "pass the directory holding openb_pod_list_*.csv")[0]
    columns = _pod_columns(path)
    timed = columns is POD_COLUMNS
    buffer = PodBuffer()
    report = ctx.bad.report
    for line, row in read_csv(path, columns, ctx.bad, header=[c.name for c in columns]):
        name, cpu, mem, gpus, milli = row[:5]
        problem = _request_problem(cpu, mem, gpus, milli)
        if problem is not None:
            report(path, line, *problem)
            continue
        if not timed:
            # A population to submit, not a timeline: every pod arrives at 0 and runs until the horizon.
            buffer.add(name, name, 0.0, cpu, mem, gpus=gpus, gpu_milli=milli)
            ctx.count("pods_without_times")
        else:
            spec, qos, _, created, deleted, scheduled = row[5:]
            if created < 0:
                report(path, line, "9 (creation_time)", f"negative time {created}")
                continue
            begin = created if scheduled is None else scheduled
            if scheduled is not None and scheduled < created:
                report(path, line, "11 (scheduled_time)",
                       f"scheduled at {scheduled}, before creation at {created}")
                continue
            if deleted is not None and deleted < begin:
                report(path, line, "10 (deletion_time)", f"deleted at {deleted}, before it started at {begin}")
                continue
            if deleted is None:
                ctx.count("unknown_duration")
            if scheduled is None:
                ctx.count("pending_in_trace")
            models = "" if spec.lower() in ("", "nan") else spec
            buffer.add(name, name, float(created), cpu, mem, gpus=gpus, gpu_milli=milli, gpu_models=models,
                       qos=qos, work_s=None if deleted is None else float(deleted - begin),
                       service=qos == QoS.LS)
        if buffer.full():
            yield buffer.take()
    ctx.count("pods_without_usage", buffer.without_usage)
    yield buffer.take()
