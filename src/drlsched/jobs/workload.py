"""Job workloads: the `tpch` scenario (the embedded profiles) and `--trace DIR --trace-format spark-profiles`
(any directory in that format). Queries and sizes are drawn uniformly per job (Decima's TPC-H setup); arrivals
are Poisson at the offered load, or a batch of N jobs at once (Decima's batched arrivals). `spark-tpcds` with a
job policy: the pod scenario's queries with tasks, executors placed on its nodes (jobs/spark_tpcds.py, placed.py).

Load: the offered load of the bottleneck resource, as the other scenarios define it. A job asks Σ tasks · io_s
of the cluster's bandwidth (seconds of the whole bandwidth at B = 1) and Σ tasks · cpu_s executor-seconds; the
arrival rate is load / max(mean I/O / B, mean CPU / executors), so at load 1 the busier of the two is just
saturated. (In these profiles the bandwidth is the bottleneck for every query.)
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from drlsched.errors import UserError
from drlsched.jobs.alibaba import load_jobs
from drlsched.jobs.bandwidth import calibrate
from drlsched.jobs.engine import EngineConfig, JobEngine
from drlsched.jobs.model import JobArrival, JobSpec
from drlsched.jobs.placed import PlacedJobEngine
from drlsched.jobs.policies import make_job_policy
from drlsched.jobs.profiles import load_profiles
from drlsched.jobs.spark_tpcds import NAME as SPARK_TPCDS
from drlsched.jobs.spark_tpcds import executor_slots, spark_tpcds_jobs
from drlsched.network import check_link_options
from drlsched.scenarios import make_scenario
from drlsched.workload import NodeSpec

EXECUTORS_PER_NODE = 8  # 8-core nodes, 1-core executors (one task slot each)
PROFILED_CLUSTER_CORES = 200  # the profiles' largest core limit: the bandwidth B = 1 is that cluster's
STRUCTURE_CORES = 100  # job stages and task counts from the profile run at this core limit (nearest if absent)
DEFAULT_NODES = 25  # 200 executors: Decima's 25-node Spark cluster, the profiled cluster's size
DEFAULT_DURATION_S = 6 * 3600.0  # ~100 jobs at load 0.85 on the default cluster
MAX_JOBS = 200_000
DEFAULT_PLACEMENT = "k8s-default"


@functools.lru_cache(maxsize=4)
def job_library(directory: str | None) -> tuple[JobSpec, ...]:
    """Every (query, size) of a profile directory as a calibrated job (None = the embedded tpch set)."""
    profiles = load_profiles(directory)
    specs = []
    for (query, size), cells in sorted(profiles.cells.items(), key=lambda kv: (int(kv[0][0]), kv[0][1])):
        cores = min(cells, key=lambda c: (abs(c - STRUCTURE_CORES), c))
        specs.append(calibrate(profiles, query, size, cores))
    return tuple(specs)


@dataclass(frozen=True)
class JobSource:
    """A job workload (picklable: evaluation workers rebuild it per seed)."""

    profiles: str | None = None  # a spark-profiles directory; None = the embedded tpch set
    nodes: int = DEFAULT_NODES
    duration_s: float = DEFAULT_DURATION_S
    load: float = 0.85
    batch: int | None = None
    idle_timeout_s: float = 60.0
    alibaba: str | None = None  # an alibaba-v2018 batch_task directory: its jobs as recorded (jobs/alibaba.py)
    skip_bad_rows: bool = False
    # A pod scenario's queries as jobs on its nodes, executors placed by a placement policy (jobs/spark_tpcds.py);
    # nodes and duration None there = the scenario's defaults.
    scenario: str | None = None
    nic_gbps: float = 10.0
    rack_oversubscription: float = 1.0

    @property
    def placed(self) -> bool:
        """Executors are pods on nodes, placed by a placement policy, with shuffle reads over the network."""
        return self.scenario == SPARK_TPCDS

    @property
    def name(self) -> str:
        if self.scenario is not None:
            return self.scenario
        if self.alibaba is not None:
            return f"alibaba-v2018:{self.alibaba}"
        return "tpch" if self.profiles is None else f"spark-profiles:{self.profiles}"

    def config(self) -> EngineConfig:
        if self.placed:
            return EngineConfig(executors=executor_slots(self.nodes_for(0)), idle_timeout_s=self.idle_timeout_s)
        executors = self.nodes * EXECUTORS_PER_NODE
        return EngineConfig(executors=executors, bandwidth=executors / PROFILED_CLUSTER_CORES,
                            idle_timeout_s=self.idle_timeout_s)

    def nodes_for(self, seed: int) -> list[NodeSpec]:
        return make_scenario(SPARK_TPCDS, nodes=self.nodes, duration=self.duration_s, load=self.load, seed=seed).nodes

    def arrivals(self, seed: int) -> list[JobArrival]:
        if self.placed:
            return spark_tpcds_jobs(self.nodes, self.duration_s, self.load, seed)[1]
        if self.alibaba is not None:  # recorded arrivals and durations: the seed moves nothing
            return list(load_jobs(self.alibaba, self.skip_bad_rows)[0])
        lib = job_library(self.profiles)
        cfg = self.config()
        rng = np.random.default_rng(np.random.SeedSequence([seed, 0x7C4]))
        if self.batch is not None:
            picks = rng.integers(len(lib), size=self.batch)
            return [JobArrival(i, 0.0, lib[int(k)]) for i, k in enumerate(picks)]
        rate = self.load / bottleneck_s(lib, cfg)
        expected = rate * self.duration_s
        if expected > MAX_JOBS:
            raise UserError(f"--load {self.load:g} over {self.duration_s:g} s would submit ~{expected:.0f} jobs "
                            f"(at most {MAX_JOBS})")
        out: list[JobArrival] = []
        t = float(rng.exponential(1.0 / rate))
        while t < self.duration_s:
            out.append(JobArrival(len(out), t, lib[int(rng.integers(len(lib)))]))
            t += float(rng.exponential(1.0 / rate))
        return out


def bottleneck_s(lib: tuple[JobSpec, ...], cfg: EngineConfig) -> float:
    """Seconds of the bottleneck resource a mean job occupies: its reads over the bandwidth or its CPU over the
    executors, whichever is larger."""
    io = float(np.mean([sum(st.tasks * st.io_s for st in s.stages) for s in lib])) / cfg.bandwidth
    cpu = float(np.mean([sum(st.tasks * st.cpu_s for st in s.stages) for s in lib])) / cfg.executors
    return max(io, cpu)


def run_jobs(source: JobSource, policy: str, seed: int, placement: str = DEFAULT_PLACEMENT) -> dict[str, object]:
    """One run: the metrics with the run keys."""
    return run_jobs_full(source, policy, seed, placement)[0]


def run_jobs_full(source: JobSource, policy: str, seed: int, placement: str = DEFAULT_PLACEMENT
                  ) -> tuple[dict[str, object], list[float]]:
    """One run: its metrics and every finished job's JCT. `placement` places the executors where they are pods on
    nodes (`source.placed`); elsewhere executor pods are identical slots and it moves nothing."""
    from drlsched.policies import make_policy

    cfg = source.config()
    engine: JobEngine
    if source.placed:
        nodes, arrivals = spark_tpcds_jobs(source.nodes, source.duration_s, source.load, seed)
        engine = PlacedJobEngine(arrivals, make_job_policy(policy), cfg, seed, nodes, make_policy(placement),
                                 source.nic_gbps, source.rack_oversubscription)
    else:
        arrivals = source.arrivals(seed)
        engine = JobEngine(arrivals, make_job_policy(policy), cfg, seed)
    metrics: dict[str, object] = {"job_policy": policy, "policy": placement, "scenario": source.name,
                                  "seed": seed, "nodes": source.nodes,
                                  "executors": cfg.executors, "jobs": len(arrivals), "load": source.load,
                                  "batch": source.batch}
    metrics.update(engine.run())
    if isinstance(engine, PlacedJobEngine):
        metrics.update(engine.network_summary())
    metrics["wall_s"] = engine.acc.wall_s
    return metrics, list(engine.acc.jct)


def check_source(source: JobSource) -> None:
    if not (math.isfinite(source.load) and 0 < source.load <= 100):
        raise UserError(f"--load must be a positive factor of at most 100, got {source.load}")
    if source.placed:
        if source.batch is not None:
            raise UserError(f"--batch is for the profiled job workloads, not {source.name} (its arrivals are the "
                            "scenario's)")
        check_link_options(source.nic_gbps, source.rack_oversubscription)
        source.nodes_for(0)  # bad sizes fail here, before any run
        return
    if source.alibaba is not None:
        load_jobs(source.alibaba, source.skip_bad_rows)  # bad rows fail here, before any run
        return
    job_library(source.profiles)  # bad profiles fail here, before any run
