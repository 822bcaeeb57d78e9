"""Loads the real trace samples in ../shared/traces (when present) and prints their statistics next to the
reference figures of ../shared/reference/traces.md, as one JSON object ("ours" vs "reference").

Percentiles are lower-rank (`sorted[floor((n-1)q)]`), the convention of traces.md. Missing samples are
skipped. Usage: python bench/traces/traces_real_samples.py [--samples DIR]
"""

from __future__ import annotations

import argparse
import csv
import json
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from drlsched.traces import TracePods, add_trace_arguments, load_window
from drlsched.traces.window import batches
from drlsched.workload import Workload

DEFAULT = Path(__file__).resolve().parents[2].parent / "shared" / "traces"


def _load(trace: Path, fmt: str) -> Workload:
    parser = argparse.ArgumentParser()
    add_trace_arguments(parser)
    args = parser.parse_args(["--trace", str(trace), "--trace-format", fmt])
    args.nodes, args.duration, args.seed = None, None, 0
    return load_window(args, allow_empty=True)  # a machine table alone has no pods


def _table(workload: Workload) -> pa.Table:
    pods = workload.pods
    assert isinstance(pods, TracePods)
    return pa.concat_tables(list(batches(pods.source, pods.window)))


def _pct(values: np.ndarray, qs: tuple[float, ...] = (0.1, 0.25, 0.5, 0.75, 0.9, 0.99)) -> dict[str, float]:
    if values.size == 0:
        return {}
    return {f"p{round(q * 100)}": float(np.quantile(values, q, method="lower")) for q in qs}


def openb(root: Path) -> dict[str, object]:
    workload = _load(root, "alibaba-gpu-v2023")
    table = _table(workload)
    gpus = table.column("gpus").to_numpy()
    milli = table.column("gpu_milli").to_numpy()
    sharing = (gpus == 1) & (milli < 1000)
    with (root / "openb_pod_list_default.csv").open() as handle:
        rows = list(csv.DictReader(handle))
    lifetime = np.array([int(r["deletion_time"]) - int(r["creation_time"]) for r in rows])
    models = Counter(node.gpu_model or "CPU" for node in workload.nodes)
    return {
        "ours": {
            "pods": table.num_rows, "num_gpu_counts": dict(sorted(Counter(gpus.tolist()).items())),
            "sharing_share": round(float(sharing.mean()), 4),
            "cpu_m": _pct(table.column("cpu_m").to_numpy()), "mem_mib": _pct(table.column("mem_mib").to_numpy()),
            "sharing_gpu_milli": _pct(milli[sharing]),
            "service_pods(LS+Guaranteed)": int(pc.sum(table.column("service")).as_py()),
            "lifetime_deletion_minus_creation_s": _pct(lifetime),
            "work_s_deletion_minus_scheduled": _pct(pc.drop_null(table.column("work_s")).to_numpy()),
            "nodes": len(workload.nodes), "node_gpus": sum(n.gpus for n in workload.nodes),
            "node_cores": sum(n.cpu_m for n in workload.nodes) // 1000, "node_models": dict(models),
            "pending_in_trace": workload.info.get("pending_in_trace"),
        },
        "reference": {
            "pods": 8152, "num_gpu_counts": {0: 1088, 1: 6989, 2: 16, 4: 15, 8: 44}, "sharing_share": 0.378,
            "cpu_m": {"p10": 3152, "p25": 4000, "p50": 11300, "p75": 12000, "p90": 16400, "p99": 32000},
            "mem_mib": {"p50": 41560, "p90": 58368, "p99": 125952},
            "sharing_gpu_milli": {"p10": 230, "p25": 460, "p50": 470, "p75": 810},
            "service_pods(LS+Guaranteed)": 4647 + 7, "lifetime_deletion_minus_creation_s": {"p50": 540, "p99": 93426},
            "nodes": 1523, "node_gpus": 6212, "node_cores": 125514,
            "node_models": {"G2": 549, "T4": 404, "P100": 134, "V100M16": 55, "G3": 39, "V100M32": 30, "A10": 2,
                            "CPU": 310},
            "pending_in_trace": 897,
        },
    }


def pai_machines(root: Path) -> dict[str, object]:
    nodes = _load(root / "pai_machine_spec.csv", "alibaba-gpu-v2020").nodes
    by_model: Counter[str] = Counter()
    for node in nodes:
        by_model[node.gpu_model or "CPU"] += node.gpus
    return {
        "ours": {"machines": len(nodes), "gpus": sum(n.gpus for n in nodes),
                 "cores": sum(n.cpu_m for n in nodes) // 1000, "gpus_by_type": dict(by_model)},
        "reference": {"machines": 1897, "gpus": 6742, "cores": 156576,
                      "gpus_by_type": {"MISC": 2240, "P100": 1596, "V100M32": 1080, "T4": 994, "V100": 832}},
    }


def spar_tasks(root: Path) -> dict[str, object]:
    workload = _load(root / "sample_tasks.csv", "alibaba-v2018-spar")
    table = _table(workload).select(["job_id", "task", "work_s", "cpu_m", "mem_mib", "parents"])
    tasks = table.group_by(["job_id", "task"]).aggregate([("work_s", "min"), ("cpu_m", "min"),
                                                          ("mem_mib", "min"), ("work_s", "count")])
    per_job = tasks.group_by("job_id").aggregate([("task", "count")]).column("task_count").to_numpy()
    names = tasks.column("task").to_pylist()
    prefixes = Counter("task_" if n.startswith("task_") else n[0] for n in names)
    mem_units = tasks.column("mem_mib_min").to_numpy() / 524_288 * 100
    cpu = tasks.column("cpu_m_min").to_numpy()
    return {
        "ours": {
            "pods": table.num_rows, "jobs": len(per_job), "tasks": tasks.num_rows,
            "task_duration_s": {**_pct(tasks.column("work_s_min").to_numpy()),
                                "mean": round(float(tasks.column("work_s_min").to_numpy().mean()), 1)},
            "plan_cpu_mean": round(float(cpu.mean()) / 10, 1),
            "plan_cpu_share_100": round(float((cpu == 1000).mean()), 3),
            "plan_cpu_share_50": round(float((cpu == 500).mean()), 3),
            "plan_mem_p50(units, ±rounding)": round(float(np.quantile(mem_units, 0.5, method="lower")), 2),
            "inst_num": {**_pct(tasks.column("work_s_count").to_numpy(), (0.5, 0.99)),
                         "mean": round(float(tasks.column("work_s_count").to_numpy().mean()), 1)},
            "tasks_per_job": {**_pct(per_job, (0.5,)), "mean": round(float(per_job.mean()), 2)},
            "prefixes": dict(prefixes), "info": {k: v for k, v in workload.info.items() if isinstance(v, int)},
        },
        "reference": {
            "pods": 3_056_536, "jobs": 16_749, "tasks": 67_634, "task_duration_s": {"p50": 10, "p99": 741,
                                                                                  "mean": 63.8},
            "plan_cpu_mean": 76.0, "plan_cpu_share_100": 0.523, "plan_cpu_share_50": 0.445,
            "plan_mem_p50(units, ±rounding)": 0.3, "inst_num": {"p50": 1, "p99": 877, "mean": 45.2},
            "tasks_per_job": {"p50": 3, "mean": 4.04},
            "prefixes": {"M": 29_691, "R": 27_714, "J": 7_455, "task_": 2_774},
        },
    }


def spar_head(root: Path) -> dict[str, object]:
    workload = _load(root, "alibaba-v2018-spar")
    table = _table(workload)
    work = table.column("work_s").to_numpy()
    return {
        "ours": {"pods": table.num_rows, "jobs": len(pc.unique(table.column("job_id"))),
                 "instances_missing": workload.info.get("instances_missing"),
                 "instance_duration_range": [float(work.min()), float(work.max())],
                 "last_arrival_s": float(table.column("arrival_s").to_numpy().max())},
        "reference": {"pods": 150_000, "jobs": 838, "instances_missing": 27_616 - 24_139,
                      "instance_duration_range": [0, 1499], "last_arrival_s": 163},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--samples", type=Path, default=DEFAULT)
    root = parser.parse_args().samples
    checks = {
        "alibaba-gpu-v2023": (root / "alibaba-gpu-v2023", openb),
        "alibaba-gpu-v2020 machine spec": (root / "alibaba-gpu-v2020", pai_machines),
        "alibaba-v2018-spar tasks only": (root / "alibaba-v2018-sample", spar_tasks),
        "alibaba-v2018-spar with instances head": (root / "alibaba-v2018-sample", spar_head),
    }
    result: dict[str, object] = {}
    for name, (path, check) in checks.items():
        if not path.is_dir():
            result[name] = "sample not present"
            continue
        began = time.perf_counter()
        result[name] = {**check(path), "seconds": round(time.perf_counter() - began, 2)}
    print(json.dumps(result, indent=2, default=str))


if __name__ == "__main__":
    main()
