"""Calibrated synthetic workloads, the embedded default: no file, no download.

Each scenario draws from distributions fitted to published trace statistics (../shared/reference/traces.md;
docs/scenarios.md says which statistic sets which parameter). `load` scales the arrival rate; at load 1 the
offered demand (requests × run time) is about 80% of the cluster's bottleneck resource.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

from drlsched.errors import UserError
from drlsched.workload import GPU_MILLI, NodeSpec, PodSpec, QoS, Workload

TARGET_OFFERED_LOAD = 0.8
MAX_NODES = 100_000
MAX_DURATION_S = 30 * 86_400.0


def quantile_sampler(qs: list[float], values: list[float]) -> Callable[[np.random.Generator, int], np.ndarray]:
    """Draws by log-linear interpolation of published percentiles (inverse CDF through the points)."""
    q = np.asarray(qs, dtype=np.float64)
    logv = np.log(np.asarray(values, dtype=np.float64))

    def draw(rng: np.random.Generator, n: int) -> np.ndarray:
        return np.exp(np.interp(rng.random(n), q, logv))

    return draw


def lognormal_from_median(rng: np.random.Generator, median: float, sigma: float, n: int) -> np.ndarray:
    return median * np.exp(sigma * rng.standard_normal(n))


def rack_of(i: int, per_rack: int) -> str:
    return f"rack-{i // per_rack}"


def uniform_nodes(n: int, cpu_m: int, mem_mib: int, per_rack: int = 10, prefix: str = "node") -> list[NodeSpec]:
    return [NodeSpec(f"{prefix}-{i:04d}", cpu_m, mem_mib, rack=rack_of(i, per_rack)) for i in range(n)]


# --- job generators: each returns the pods of one job submitted at time t ----------------------------------

JobGen = Callable[[np.random.Generator, str, float], list[PodSpec]]


def _batch_job(rng: np.random.Generator, job: str, t: float, max_s: float = 3600.0) -> list[PodSpec]:
    """Alibaba v2018 batch job: a DAG of tasks, each with instances (traces.md §6a); Burstable (`_be_jobs` marks
    some jobs best-effort)."""
    tasks = int(min(40, max(1, round(float(lognormal_from_median(rng, 3.0, 0.857, 1)[0])))))
    pods: list[PodSpec] = []
    for k in range(tasks):
        name = f"M{k + 1}"
        parents: tuple[str, ...] = ()
        if k > 0:
            picks = {int(rng.integers(k))}
            if rng.random() < 0.3:
                picks.add(int(rng.integers(k)))
            parents = tuple(f"M{p + 1}" for p in sorted(picks))
        instances = int(min(64, max(1, round(float(lognormal_from_median(rng, 1.0, 3.0, 1)[0])))))
        duration = float(np.clip(lognormal_from_median(rng, 10.0, 1.95, 1)[0], 1.0, max_s))
        cpu = int(rng.choice([1000, 500, 50, 100, 300, 2000], p=[0.523, 0.445, 0.009, 0.009, 0.009, 0.005]))
        mem = int(np.clip(lognormal_from_median(rng, 0.003, 0.4, 1)[0], 0.001, 0.01) * 131_072)
        shuffle = float(lognormal_from_median(rng, 8.0, 1.0, 1)[0]) if parents else 0.0
        for i in range(instances):
            pods.append(PodSpec(
                uid=f"{job}-{name}-{i}", job_id=job, task=name, arrival_s=t, cpu_m=cpu, mem_mib=mem,
                work_s=duration * float(np.exp(0.1 * rng.standard_normal())),
                usage_cpu=float(np.clip(rng.normal(0.75, 0.2), 0.1, 1.5)),
                usage_cv=0.3, usage_mem=0.8, shuffle_in_mb=shuffle, parents=parents))
    return pods


# Share of batch jobs and Spark queries submitted as best-effort (BE: with a reclaim model they run on reclaimed
# resources). A modelling choice, not a trace statistic: Koordinator marks whole workloads (a batch job's or a Spark
# application's pods share one priority class), and operators move the deferrable part of their batch work there;
# 30% keeps `batch`'s share of BE pods (it used to mark 30% of the pods, each on its own).
BATCH_BE_SHARE = 0.3
SPARK_BE_SHARE = 0.3


def _be_jobs(gen: JobGen, share: float, rng: np.random.Generator) -> JobGen:
    """`gen` with every pod of a `share` of its jobs best-effort, drawn from `rng` (its own stream: the jobs
    themselves are those `gen` draws without it)."""

    def marked(job_rng: np.random.Generator, job: str, t: float) -> list[PodSpec]:
        pods = gen(job_rng, job, t)
        if rng.random() < share:
            for p in pods:
                p.qos = QoS.BE
        return pods

    return marked


def _spark_job(rng: np.random.Generator, job: str, t: float) -> list[PodSpec]:
    """A TPC-DS-like Spark query: 2-4 stages of executors; each stage reads the previous stage's shuffle."""
    stages = int(rng.integers(2, 5))
    executors = int(rng.choice([4, 8, 16], p=[0.4, 0.4, 0.2]))
    cpu = int(rng.choice([2000, 4000], p=[0.6, 0.4]))
    mem = cpu * 2  # 2 GiB per core, Spark's usual executor sizing
    pods: list[PodSpec] = []
    for s in range(stages):
        name = f"stage-{s}"
        parents = (f"stage-{s - 1}",) if s else ()
        duration = float(np.clip(lognormal_from_median(rng, 15.0, 0.6, 1)[0], 3.0, 300.0))
        volume_mb = float(lognormal_from_median(rng, 14.0, 0.8, 1)[0]) if s else 0.0
        for i in range(executors):
            pods.append(PodSpec(
                uid=f"{job}-s{s}-e{i}", job_id=job, task=name, arrival_s=t, cpu_m=cpu, mem_mib=mem,
                qos=QoS.BURSTABLE, work_s=duration * float(np.exp(0.15 * rng.standard_normal())),
                usage_cpu=float(np.clip(rng.normal(0.85, 0.15), 0.3, 1.4)), usage_cv=0.25, usage_mem=0.75,
                shuffle_in_mb=volume_mb / executors, parents=parents))
    return pods


_GPU_CPU = quantile_sampler([0.0, 0.10, 0.25, 0.50, 0.75, 0.90, 0.99, 1.0],
                            [1000, 3152, 4000, 11300, 12000, 16400, 32000, 64000])
_GPU_MEM = quantile_sampler([0.0, 0.10, 0.50, 0.90, 0.99, 1.0], [2048, 12000, 41560, 58368, 125952, 250000])
_GPU_LIFE = quantile_sampler([0.0, 0.10, 0.25, 0.50, 0.75, 0.90, 0.99, 1.0],
                             [10, 80, 167, 540, 1971, 6568, 93426, 200000])
_SHARE_MILLI = np.array([230, 320, 470, 650, 810])
_SHARE_P = np.array([140, 328, 750, 253, 1078], dtype=np.float64) / 2549
_MODEL_SETS = [("G2",), ("T4",), ("P100",), ("V100M16", "V100M32")]


def _gpu_job(rng: np.random.Generator, job: str, t: float, max_s: float = 4 * 3600.0,
             fit: dict[tuple[str, ...], tuple[int, int, int]] | None = None) -> list[PodSpec]:
    """An openb-like GPU pod (traces.md §6d); a few distributed jobs have several 8-GPU workers.

    `fit` (GPU model set → the most CPU, memory and GPUs of a node offering it) keeps every pod placeable on the
    cluster at hand: a model constraint whose nodes the cluster lacks or whose nodes have too few GPUs is dropped,
    and a constrained pod's CPU and memory are capped at its largest node (otherwise e.g. a 25-core P100 pod fits
    no 16-core P100 node)."""
    u = rng.random()
    if u < 0.1335:
        gpus, milli = 0, 0
    elif u < 0.1335 + 0.378:
        gpus, milli = 1, int(rng.choice(_SHARE_MILLI, p=_SHARE_P))
    elif u < 0.9892:
        gpus, milli = 1, GPU_MILLI
    else:
        gpus, milli = int(rng.choice([2, 4, 8], p=[0.2, 0.2, 0.6])), GPU_MILLI
    workers = int(rng.choice([2, 4])) if gpus == 8 and rng.random() < 0.3 else 1
    cpu = int(_GPU_CPU(rng, 1)[0]) // 100 * 100
    if gpus == 0:
        cpu = min(cpu, 16000)
    mem = int(_GPU_MEM(rng, 1)[0])
    life = float(min(_GPU_LIFE(rng, 1)[0], max_s))
    models = _MODEL_SETS[int(rng.integers(len(_MODEL_SETS)))] if gpus and rng.random() < 0.2 else ()
    if models and fit is not None:
        if models in fit and gpus <= fit[models][2]:
            cpu, mem = min(cpu, fit[models][0]), min(mem, fit[models][1])
        else:
            models = ()
    elastic = gpus == 1 and milli == GPU_MILLI and rng.random() < 0.15
    qos = QoS.LS if rng.random() < 0.57 else (QoS.BE if rng.random() < 0.97 else QoS.BURSTABLE)
    return [PodSpec(
        uid=f"{job}-w{i}", job_id=job, task="worker", arrival_s=t, cpu_m=cpu, mem_mib=mem, gpus=gpus,
        gpu_milli=milli, gpu_models=models, qos=qos, work_s=life,
        usage_cpu=float(np.clip(rng.normal(0.5, 0.2), 0.05, 1.2)), usage_cv=0.3, usage_mem=0.6,
        usage_gpu=float(np.clip(rng.gamma(0.8, 0.3), 0.0, 1.0)),
        traffic_mbps=500.0 if workers > 1 else 0.0,
        gpu_options=(1, 2) if elastic else (), elastic_speedup=1.6 if elastic else 1.0,
        checkpointable=gpus > 0) for i in range(workers)]


def _service_job(rng: np.random.Generator, job: str, t: float, life: float) -> list[PodSpec]:
    """A latency-sensitive Java-like service deployment: replicas exchanging RPC traffic."""
    replicas = int(rng.choice([2, 3, 4, 6], p=[0.3, 0.3, 0.25, 0.15]))
    cpu = int(rng.choice([500, 1000, 2000, 4000], p=[0.2, 0.4, 0.3, 0.1]))
    mem = cpu * 2
    return [PodSpec(
        uid=f"{job}-r{i}", job_id=job, task="svc", arrival_s=t, cpu_m=cpu, mem_mib=mem, qos=QoS.LS,
        priority=100, work_s=life, service=True, usage_cpu=float(np.clip(rng.normal(0.35, 0.1), 0.05, 0.9)),
        usage_cv=0.25, usage_mem=0.6, traffic_mbps=float(lognormal_from_median(rng, 4.0, 0.5, 1)[0]))
        for i in range(replicas)]


class DiurnalDemand:
    """One compressed day over the window (peak/trough 2.5x, traces.md §6c) with bursts: the request rate
    ramps to x5 within a minute and stays a few minutes. Scale-out replicas follow the request rate; the
    usage of running replicas rises x2 at a burst's peak until the new replicas absorb the rest."""

    def __init__(self, duration: float, rng: np.random.Generator) -> None:
        self.duration = duration
        n_bursts = max(1, int(duration / 1200))
        self.starts = np.sort(rng.uniform(0.1 * duration, 0.9 * duration, n_bursts))
        self.lengths = rng.uniform(120.0, 300.0, n_bursts)

    def diurnal(self, t: float) -> float:
        return 1.0 - 0.43 * math.cos(2 * math.pi * t / self.duration)  # 0.57 .. 1.43

    def burst(self, t: float) -> float:
        for s, ln in zip(self.starts, self.lengths, strict=True):
            if s <= t < s + ln:
                return min(1.0, (t - s) / 60.0)
        return 0.0

    def request_rate(self, t: float) -> float:
        return self.diurnal(t) * (1.0 + 4.0 * self.burst(t))

    def usage(self, t: float) -> float:
        return self.diurnal(t) * (1.0 + 1.0 * self.burst(t))


# --- scenarios -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Scenario:
    name: str
    description: str
    default_nodes: int
    default_duration_s: float
    build: Callable[[int, float, float, np.random.Generator], tuple[list[NodeSpec], Iterator[PodSpec],
                                                                      Callable[[float], float] | None]]
    drain_s: float | None = None  # simulated time after the window; None = the simulator's default


def _poisson_jobs(rng: np.random.Generator, gen: JobGen, rate: float, duration: float, prefix: str,
                  whole_seconds: bool = False) -> Iterator[PodSpec]:
    t = 0.0
    k = 0
    while True:
        t += float(rng.exponential(1.0 / rate))
        if t >= duration:
            return
        at = math.floor(t) if whole_seconds else t
        yield from gen(rng, f"{prefix}{k:07d}", at)
        k += 1


def _demand(gen: JobGen, seed_rng: np.random.Generator, resource: str, jobs: int = 400) -> float:
    """Mean request × run time per job of a generator, from a pilot sample (its own random stream)."""
    rng = np.random.default_rng(seed_rng.integers(2**63))
    total = 0.0
    for k in range(jobs):
        for p in gen(rng, f"pilot{k}", 0.0):
            amount = {"cpu": p.cpu_m, "gpu": p.gpus * p.gpu_milli}[resource]
            total += amount * (p.work_s or 0.0)
    return total / jobs


def _rate(gen: JobGen, rng: np.random.Generator, capacity: float, load: float, resource: str) -> float:
    return TARGET_OFFERED_LOAD * load * capacity / max(_demand(gen, rng, resource), 1e-9)


def _capped(gen: Callable[..., list[PodSpec]], duration: float) -> JobGen:
    """Run times capped at half the arrival window, so the drain after it stays short (docs/scenarios.md)."""
    return functools.partial(gen, max_s=max(1.0, 0.5 * duration))


def _build_batch(n: int, duration: float, load: float, rng: np.random.Generator):  # type: ignore[no-untyped-def]
    nodes = uniform_nodes(n, 32_000, 131_072)
    gen = _capped(_batch_job, duration)
    rate = _rate(gen, rng, sum(x.cpu_m for x in nodes), load, "cpu")
    be = _be_jobs(gen, BATCH_BE_SHARE, rng.spawn(1)[0])
    return nodes, _poisson_jobs(rng, be, rate, duration, "j", whole_seconds=True), None


def _build_spark(n: int, duration: float, load: float, rng: np.random.Generator):  # type: ignore[no-untyped-def]
    nodes = uniform_nodes(n, 16_000, 65_536, per_rack=5)
    rate = _rate(_spark_job, rng, sum(x.cpu_m for x in nodes), load, "cpu")
    be = _be_jobs(_spark_job, SPARK_BE_SHARE, rng.spawn(1)[0])
    return nodes, _poisson_jobs(rng, be, rate, duration, "q"), None


# openb node shapes (traces.md §6d): (model, GPUs, cores, GiB, share of nodes)
_OPENB_SHAPES = [("G2", 8, 96, 384, 0.36), ("T4", 2, 104, 512, 0.25), ("", 0, 32, 256, 0.085),
                 ("P100", 2, 16, 120, 0.07), ("", 0, 96, 512, 0.04), ("G3", 8, 128, 768, 0.026),
                 ("V100M16", 4, 32, 128, 0.018), ("V100M32", 8, 96, 768, 0.014)]


def openb_nodes(n: int) -> list[NodeSpec]:
    """n nodes in the openb cluster's shape mix (largest-remainder apportionment, at least one G2)."""
    shares = np.array([s[4] for s in _OPENB_SHAPES])
    shares = shares / shares.sum()
    counts = np.floor(shares * n).astype(int)
    for i in np.argsort(-(shares * n - counts))[: n - counts.sum()]:
        counts[i] += 1
    nodes: list[NodeSpec] = []
    for (model, gpus, cores, gib, _), count in zip(_OPENB_SHAPES, counts, strict=True):
        for _ in range(count):
            i = len(nodes)
            nodes.append(NodeSpec(f"{(model or 'cpu').lower()}-{i:04d}", cores * 1000, gib * 1024, gpus, model,
                                  rack=rack_of(i, 8)))
    return nodes


def _build_ml_gpu(n: int, duration: float, load: float, rng: np.random.Generator):  # type: ignore[no-untyped-def]
    nodes = openb_nodes(n)
    gpu_cap = sum(x.gpus * GPU_MILLI for x in nodes)
    fit = {}
    for models in _MODEL_SETS:
        offering = [x for x in nodes if x.gpu_model in models and x.gpus]
        if offering:
            fit[models] = (max(x.cpu_m for x in offering), max(x.mem_mib for x in offering),
                           max(x.gpus for x in offering))
    gen = functools.partial(_capped(_gpu_job, duration), fit=fit)
    rate = _rate(gen, rng, gpu_cap, load, "gpu")
    return nodes, _poisson_jobs(rng, gen, rate, duration, "g"), None


def _services(rng: np.random.Generator, nodes: list[NodeSpec], duration: float, load: float,
              share: float, demand: DiurnalDemand) -> Iterator[PodSpec]:
    """A base deployment at t=0 for the whole window, then scale-out replicas arriving with the load."""
    cpu_cap = sum(x.cpu_m for x in nodes) * share
    pilot = np.random.default_rng(rng.integers(2**63))
    mean_cpu = np.mean([sum(p.cpu_m for p in _service_job(pilot, "p", 0.0, 1.0)) for _ in range(200)])
    base_jobs = max(1, int(0.5 * TARGET_OFFERED_LOAD * min(load, 1.0) * cpu_cap / mean_cpu))
    for k in range(base_jobs):
        yield from _service_job(rng, f"svc{k:05d}", 0.0, duration)
    # Scale-out: short-lived replicas (5-20 min) adding ~15% more on average at load 1, arriving with the request rate
    # (a non-homogeneous Poisson process drawn by thinning).
    rate = 0.15 * TARGET_OFFERED_LOAD * load * cpu_cap / (mean_cpu * 750.0)
    peak = 1.43 * 5.0
    t, k = 0.0, 0
    while True:
        t += float(rng.exponential(1.0 / (rate * peak)))
        if t >= duration:
            return
        if rng.random() * peak > demand.request_rate(t):
            continue
        yield from _service_job(rng, f"hpa{k:06d}", t, float(rng.uniform(300.0, 1200.0)))
        k += 1


def _build_ecommerce(n: int, duration: float, load: float, rng: np.random.Generator):  # type: ignore[no-untyped-def]
    nodes = uniform_nodes(n, 32_000, 131_072)
    demand = DiurnalDemand(duration, np.random.default_rng(rng.integers(2**63)))
    return nodes, _services(rng, nodes, duration, load, 1.0, demand), demand.usage


def _merge(*streams: Iterator[PodSpec]) -> Iterator[PodSpec]:
    import heapq

    return heapq.merge(*streams, key=lambda p: p.arrival_s)


def _build_mixed(n: int, duration: float, load: float, rng: np.random.Generator):  # type: ignore[no-untyped-def]
    nodes = uniform_nodes(n, 32_000, 131_072)
    demand = DiurnalDemand(duration, np.random.default_rng(rng.integers(2**63)))
    svc = _services(np.random.default_rng(rng.integers(2**63)), nodes, duration, load, 0.5, demand)
    gen = _capped(_batch_job, duration)
    rate = 0.5 * _rate(gen, rng, sum(x.cpu_m for x in nodes), load, "cpu")
    be = _be_jobs(gen, BATCH_BE_SHARE, rng.spawn(1)[0])
    batch = _poisson_jobs(np.random.default_rng(rng.integers(2**63)), be, rate, duration, "j", True)
    return nodes, _merge(svc, batch), demand.usage


# --- colocation: Alibaba v2018's online services on requests, batch jobs as BE pods (../traces/usage/README.md) --

# Online containers' CPU usage as a share of their request (Alibaba v2018 container_usage snapshot, 60,035
# containers: 9.4% idle, p50 7%, p90 27%, p95 35%, p99 49%; mean 11%).
_LS_USAGE = quantile_sampler([0.0, 0.094, 0.5, 0.9, 0.95, 0.99, 1.0], [0.002, 0.004, 0.07, 0.27, 0.35, 0.49, 0.9])
COLOCATION_LS_SHARE = 0.80  # online containers' requests / machine cores (mean 0.80, p90 1.29)
COLOCATION_BE_SHARE = 0.6  # BE demand (requests × run time) offered per second, share of the cluster's CPU


def _online_app(rng: np.random.Generator, job: str, t: float) -> list[PodSpec]:
    """An online application: replicas of one container shape (78% ask 4 cores, 20% 8, 2% 16; 2 GiB per core),
    each with its own usage level drawn from the snapshot; they run until the end of the simulation."""
    replicas = int(rng.choice([1, 2, 4, 8], p=[0.4, 0.3, 0.2, 0.1]))
    cpu = int(rng.choice([4000, 8000, 16000], p=[0.78, 0.20, 0.02]))
    usage = _LS_USAGE(rng, replicas)
    return [PodSpec(uid=f"{job}-r{i}", job_id=job, task="app", arrival_s=t, cpu_m=cpu, mem_mib=cpu * 2,
                    qos=QoS.LS, priority=100, work_s=None, service=True, usage_cpu=float(usage[i]), usage_cv=0.4,
                    usage_mem=0.6) for i in range(replicas)]


def _be_batch_job(rng: np.random.Generator, job: str, t: float, max_s: float = 3600.0) -> list[PodSpec]:
    """An Alibaba v2018 batch job (`batch` scenario's statistics) whose pods are all best-effort."""
    pods = _batch_job(rng, job, t, max_s)
    for p in pods:
        p.qos = QoS.BE
    return pods


def _build_colocation(n: int, duration: float, load: float, rng: np.random.Generator):  # type: ignore[no-untyped-def]
    nodes = uniform_nodes(n, 96_000, 393_216)  # Alibaba v2018 machines: 96 cores
    cap = sum(x.cpu_m for x in nodes)
    app_rng = np.random.default_rng(rng.integers(2**63))
    apps: list[PodSpec] = []
    while sum(p.cpu_m for p in apps) < COLOCATION_LS_SHARE * cap:
        apps.extend(_online_app(app_rng, f"app{len(apps):05d}", 0.0))
    demand = DiurnalDemand(duration, np.random.default_rng(rng.integers(2**63)))
    gen = _capped(_be_batch_job, duration)
    rate = COLOCATION_BE_SHARE / TARGET_OFFERED_LOAD * _rate(gen, rng, cap, load, "cpu")
    batch = _poisson_jobs(np.random.default_rng(rng.integers(2**63)), gen, rate, duration, "be", True)
    return nodes, _merge(iter(apps), batch), demand.usage


SCENARIOS: dict[str, Scenario] = {s.name: s for s in [
    Scenario("ecommerce", "long-running latency-sensitive services, diurnal load with x5 bursts", 30, 3600.0,
             _build_ecommerce),
    Scenario("batch", "Alibaba-v2018-like batch DAG jobs, heavy-tailed durations", 40, 900.0, _build_batch),
    Scenario("spark-tpcds", "Spark-like queries: executor stages with shuffle traffic", 20, 1800.0,
             _build_spark),
    Scenario("ml-gpu", "openb/PAI-like GPU pods: shared GPUs, multi-GPU, model constraints, elastic", 40,
             7200.0, _build_ml_gpu),
    Scenario("mixed", "latency-sensitive services co-located with batch jobs", 30, 1800.0, _build_mixed),
    Scenario("colocation", "Alibaba-v2018-like online services (requests 80% of CPU, usage 11% of requests) with "
             "best-effort batch jobs: the reclaim models' world (--reclaim)", 10, 1800.0, _build_colocation,
             drain_s=0.0),
]}


def make_scenario(name: str, *, nodes: int | None = None, duration: float | None = None, load: float = 1.0,
                  seed: int = 0) -> Workload:
    """The named scenario's workload for a seed (same seed, same workload; pods generated lazily)."""
    scenario = SCENARIOS.get(name)
    if scenario is None:
        raise UserError(f"unknown scenario {name!r}; known scenarios: {', '.join(SCENARIOS)}")
    n = scenario.default_nodes if nodes is None else nodes
    dur = scenario.default_duration_s if duration is None else duration
    if not 1 <= n <= MAX_NODES:
        raise UserError(f"--nodes must be between 1 and {MAX_NODES}, got {n}")
    if not (math.isfinite(dur) and 0 < dur <= MAX_DURATION_S):
        raise UserError(f"--duration must be between 0 and {MAX_DURATION_S:.0f} seconds, got {dur}")
    if not (math.isfinite(load) and 0 < load <= 100):
        raise UserError(f"--load must be a positive factor of at most 100, got {load}")
    rng = np.random.default_rng(np.random.SeedSequence([seed, 0x5CE]))
    node_specs, pods, curve = scenario.build(n, dur, load, rng)
    return Workload(name=name, nodes=node_specs, pods=pods, duration_s=dur, load_curve=curve,
                    info={"seed": seed, "load": load}, drain_s=scenario.drain_s)
