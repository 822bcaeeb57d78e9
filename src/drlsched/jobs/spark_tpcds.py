"""`spark-tpcds` as jobs of stages of tasks (docs/scenarios.md "spark-tpcds with tasks").

The queries are the pod scenario's, drawn from the same seed (drlsched.scenarios): the same arrivals, stage
chains, executor counts and sizes, stage durations and shuffle volumes. Each stage gains tasks: a pod-level stage
of E executors of c cores, each running for d seconds, becomes E · c · `WAVES` one-core tasks of d / `WAVES`
seconds, so a stage served by its original E · c cores still takes d (the pod scenario's stage time) and its
core-seconds are unchanged; with more executors it runs faster, down to one task time. Its shuffle read (the sum
of its pods' reads) is split evenly over its tasks. Executors are 1-core pods with Spark's 2 GiB per core.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from drlsched.jobs.model import JobArrival, JobSpec, StageSpec
from drlsched.scenarios import make_scenario
from drlsched.workload import NodeSpec, PodSpec

NAME = "spark-tpcds"
WAVES = 4  # tasks per core of a pod-level stage: Spark splits a stage into several waves of tasks
EXECUTOR_CPU_M = 1000
EXECUTOR_MEM_MIB = 2048  # 2 GiB per core, the pod scenario's executor sizing


def _stage_index(task: str) -> int:
    return int(task.rsplit("-", 1)[1])


def _job(pods: list[PodSpec]) -> JobSpec:
    """One query's pods (stage-0 … stage-k, E executors each) as a job of k + 1 stages of tasks."""
    by_stage: dict[int, list[PodSpec]] = {}
    for p in pods:
        by_stage.setdefault(_stage_index(p.task), []).append(p)
    stages = []
    for i in sorted(by_stage):
        group = by_stage[i]
        cores = sum(p.cpu_m for p in group) // EXECUTOR_CPU_M
        duration = float(np.mean([p.work_s or 0.0 for p in group]))
        stages.append(StageSpec(stage_id=i, tasks=cores * WAVES, cpu_s=duration / WAVES, io_s=0.0,
                                parents=(i - 1,) if i else (), profile_s=duration / WAVES,
                                shuffle_mb=float(sum(p.shuffle_in_mb for p in group))))
    return JobSpec(name=pods[0].job_id, query="tpcds", size_gb=0, stages=tuple(stages), profile_cores=0,
                   executor_cpu_m=EXECUTOR_CPU_M, executor_mem_mib=EXECUTOR_MEM_MIB)


def _group(pods: Iterable[PodSpec]) -> Iterable[list[PodSpec]]:
    """The scenario streams each query's pods together, in arrival order."""
    current: list[PodSpec] = []
    for p in pods:
        if current and p.job_id != current[0].job_id:
            yield current
            current = []
        current.append(p)
    if current:
        yield current


def spark_tpcds_jobs(nodes: int | None, duration: float | None, load: float, seed: int
                     ) -> tuple[list[NodeSpec], list[JobArrival]]:
    """The scenario's nodes and its queries for a seed, as jobs."""
    w = make_scenario(NAME, nodes=nodes, duration=duration, load=load, seed=seed)
    arrivals = [JobArrival(i, pods[0].arrival_s, _job(pods)) for i, pods in enumerate(_group(w.iter_pods()))]
    return w.nodes, arrivals


def executor_slots(nodes: list[NodeSpec]) -> int:
    """1-core, 2 GiB executors that fit the nodes at once (the cluster's executor capacity)."""
    return sum(min(n.cpu_m // EXECUTOR_CPU_M, n.mem_mib // EXECUTOR_MEM_MIB, n.max_pods) for n in nodes)
