"""`drlsched trace-info PATH --trace-format FMT`: what a trace (window) holds, as text or JSON.

Percentiles are lower-rank values (`sorted[floor((n-1)q)]`), the convention of the reference figures in
traces.md, so the two can be compared directly.
"""

from __future__ import annotations

import argparse
import json
import math
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from drlsched.cluster import Cluster
from drlsched.traces import FORMATS, TracePods, TraceSelection, add_selection_arguments, load_window
from drlsched.traces.window import batches
from drlsched.workload import PodSpec

QUANTILES = (0.1, 0.5, 0.9, 0.99)
_REQUEST = ["cpu_m", "mem_mib", "gpus", "gpu_milli", "gpu_models"]
_COLUMNS = ["uid", "job_id", "cpu_m", "mem_mib", "gpus", "gpu_milli", "gpu_models", "work_s", "service", "parents"]
MAX_EXAMPLES = 5


class _Unplaceable:
    """Pods whose request no node of the cluster could hold even empty: a count and a few examples, checked
    once per distinct request."""

    def __init__(self, cluster: Cluster | None) -> None:
        self.cluster = cluster
        self.reasons: dict[tuple, str | None] = {}  # request -> why it fits nowhere (None: it fits)
        self.count = 0
        self.examples: list[str] = []

    def add(self, table: pa.Table) -> None:
        if self.cluster is None or not table.num_rows:
            return
        for row in table.group_by(_REQUEST).aggregate([("uid", "count")]).to_pylist():
            key = tuple(row[name] for name in _REQUEST)
            if key not in self.reasons:
                cpu, mem, gpus, milli, models = key
                pod = PodSpec("", "", 0.0, cpu, mem, gpus=gpus, gpu_milli=milli,
                              gpu_models=tuple(models.split("|")) if models else ())
                r = self.cluster.request(pod)
                self.reasons[key] = None if self.cluster.fits_when_empty(r) else self.cluster.infeasible_reason(r)
            reason = self.reasons[key]
            if reason is None:
                continue
            self.count += row["uid_count"]
            if len(self.examples) < MAX_EXAMPLES:
                match = [pc.equal(table.column(name), value) for name, value in zip(_REQUEST, key, strict=True)]
                mask = match[0]
                for more in match[1:]:
                    mask = pc.and_(mask, more)
                for uid in table.column("uid").filter(mask).to_pylist()[:MAX_EXAMPLES - len(self.examples)]:
                    self.examples.append(f"{uid} ({cpu}m CPU, {mem}Mi, {gpus} GPU"
                                         f"{' x ' + str(milli) + 'm' if gpus else ''}"
                                         f"{' model ' + models if models else ''}): {reason}")


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = sub.add_parser("trace-info", help="summarise a cluster trace (pods, jobs, span, percentiles)",
                            description=__doc__)
    parser.add_argument("path", metavar="PATH", help="trace directory or file")
    parser.add_argument("--trace-format", metavar="FMT", required=True, choices=FORMATS,
                        help=f"trace format: {', '.join(FORMATS)}")
    add_selection_arguments(parser)
    parser.add_argument("--nodes", type=int, metavar="N", help="scale the cluster to N nodes")
    parser.add_argument("--duration", type=float, metavar="S", help="window length, seconds")
    parser.add_argument("--seed", type=int, default=0, help="seed for --sample-rate (default 0)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(func=run)


def _percentiles(values: np.ndarray) -> dict[str, float] | None:
    if values.size == 0:
        return None
    result = {f"p{round(q * 100)}": float(np.quantile(values, q, method="lower")) for q in QUANTILES}
    result.update(mean=float(values.mean()), max=float(values.max()))
    return result


def summarise(args: argparse.Namespace) -> dict[str, Any]:
    workload = load_window(TraceSelection.from_args(args, args.path, nodes=args.nodes, duration=args.duration,
                                                    seed=args.seed), allow_empty=True)
    pods = workload.pods
    assert isinstance(pods, TracePods)
    parts: dict[str, list[np.ndarray]] = {name: [] for name in ("cpu_m", "mem_mib", "gpu_milli", "work_s")}
    jobs: set[str] = set()
    count = gpu_pods = shared = services = with_parents = unknown_duration = 0
    first = last = math.nan
    unplaceable = _Unplaceable(Cluster(workload.nodes) if workload.nodes else None)
    for table in batches(pods.source, pods.window, columns=_COLUMNS):
        unplaceable.add(table)
        arrivals = table.column("arrival_s").to_numpy()
        first = arrivals[0] if not count else first
        last = arrivals[-1]
        count += table.num_rows
        jobs.update(pc.unique(table.column("job_id")).to_pylist())
        gpus = table.column("gpus").to_numpy()
        milli = table.column("gpu_milli").to_numpy()
        gpu_pods += int((gpus > 0).sum())
        shared += int(((gpus == 1) & (milli < 1000)).sum())
        services += int(pc.sum(table.column("service")).as_py() or 0)
        with_parents += int(pc.sum(pc.not_equal(table.column("parents"), "")).as_py() or 0)
        work = table.column("work_s")
        unknown_duration += work.null_count
        parts["cpu_m"].append(table.column("cpu_m").to_numpy())
        parts["mem_mib"].append(table.column("mem_mib").to_numpy())
        parts["gpu_milli"].append((gpus * milli)[gpus > 0])
        parts["work_s"].append(pc.drop_null(work).to_numpy())
    gpus_total = sum(node.gpus for node in workload.nodes)
    return {
        "format": args.trace_format, "source": args.path, "pods": count, "jobs": len(jobs),
        "nodes": len(workload.nodes), "node_gpus": gpus_total,
        "node_cpu_m": sum(node.cpu_m for node in workload.nodes),
        "span_s": [float(first), float(last)] if count else None, "duration_s": workload.duration_s,
        "gpu_pods": gpu_pods, "gpu_sharing_pods": shared, "service_pods": services,
        "pods_with_parents": with_parents, "pods_unknown_duration": unknown_duration,
        "bad_rows": workload.info.get("bad_rows", 0),
        "pods_fitting_no_node": unplaceable.count, "pods_fitting_no_node_examples": unplaceable.examples,
        "percentiles": {name: _percentiles(np.concatenate(arrays) if arrays else np.empty(0))
                        for name, arrays in parts.items()},
        "info": workload.info,
    }


def _row(label: str, stats: dict[str, float] | None) -> str:
    if stats is None:
        return f"  {label:<16} -"
    return f"  {label:<16}" + "".join(f"{stats[key]:>12,.6g}" for key in (*_keys(), "mean", "max"))


def _keys() -> list[str]:
    return [f"p{round(q * 100)}" for q in QUANTILES]


def run(args: argparse.Namespace) -> int:
    summary = summarise(args)
    if args.json:
        print(json.dumps(summary, indent=2, sort_keys=True, default=str))
        return 0
    span = summary["span_s"]
    lines = [
        f"trace       {summary['source']} ({summary['format']})",
        f"pods        {summary['pods']:,} in {summary['jobs']:,} jobs; {summary['gpu_pods']:,} with GPUs "
        f"({summary['gpu_sharing_pods']:,} sharing one), {summary['service_pods']:,} services, "
        f"{summary['pods_with_parents']:,} with DAG parents, {summary['pods_unknown_duration']:,} without "
        f"an end",
        f"nodes       {summary['nodes']:,} ({summary['node_cpu_m'] / 1000:,.0f} cores, "
        f"{summary['node_gpus']:,} GPUs)",
        "time span   " + (f"{span[0]:,.0f} .. {span[1]:,.0f} s ({(span[1] - span[0]) / 3600:,.2f} h) "
                          f"after the window start" if span else "empty"),
        f"bad rows    {summary['bad_rows']:,}",
        f"unplaceable {summary['pods_fitting_no_node']:,} pods fit no node even on the empty cluster"
        + (" (simulate/evaluate stop at the first unless --allow-unschedulable)"
           if summary["pods_fitting_no_node"] else ""),
        *(f"            e.g. {example}" for example in summary["pods_fitting_no_node_examples"]),
        "percentiles " + "".join(f"{key:>12}" for key in (*_keys(), "mean", "max")),
        _row("cpu (m)", summary["percentiles"]["cpu_m"]),
        _row("memory (MiB)", summary["percentiles"]["mem_mib"]),
        _row("GPU (milli)", summary["percentiles"]["gpu_milli"]),
        _row("duration (s)", summary["percentiles"]["work_s"]),
    ]
    skip = {"bad_rows", "format", "source", "pods", "seed", "sample_rate"}
    notes = [f"{key}={value}" for key, value in sorted(summary["info"].items()) if key not in skip]
    lines.append("info        " + ", ".join(notes))
    print("\n".join(lines))
    return 0
