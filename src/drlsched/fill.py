"""The fill experiment of FGD (Weng et al., ATC'23, §6): submit a workload's pods one at a time in a seeded random
order, none ever leaves, and measure the cluster's GPUs as it fills, as a function of the GPU demand submitted.

Demand = GPUs requested by the pods submitted so far / the cluster's GPUs. The pods are the workload's population
in a random order (a permutation per seed); when the population's demand is below the limit, further pods are
drawn from it uniformly with replacement, as the FGD simulator's workload inflation does
(hkust-adsl/kubernetes-scheduler-simulator, `GenerateWorkloadInflationPods`). After every pod the run records the
allocated and fragmented milli-GPU (FGD's measure for the population's typical shapes) and the pods that did not
fit. Every policy sees the same order for a seed (paired seeds). Docs: docs/fill.md.
"""

from __future__ import annotations

import math
import time
from collections.abc import Generator, Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

import numpy as np

from drlsched.cluster import Cluster
from drlsched.errors import UserError
from drlsched.evaluate import mean_ci
from drlsched.fragmentation import FragmentationTracker, ShapeCounter
from drlsched.policies import make_policy
from drlsched.policies.base import Decision, PodContext
from drlsched.policies.heuristics import RandomFit
from drlsched.policies.k8s_default import K8sDefault
from drlsched.sched.cycle import fits_somewhere, pod_context
from drlsched.workload import GPU_MILLI, NodeSpec, PodSpec

BASELINE = "k8s-default"
# Per-pod series a run records, and the keys of the points derived from them (GPUs, shares, pods).
SERIES = ("demand", "allocated_milli", "fragmented_milli", "pods_failed")
POINT_KEYS = ("gpu_unallocated", "gpu_fragmented", "pods_failed", "gpu_allocated", "gpu_unallocated_share",
              "gpu_fragmented_share", "gpu_allocated_share", "gpu_fragmentation")
CURVE_STEP = 0.01  # demand grid of the plotted curves


@dataclass(frozen=True)
class FillRun:
    """One (policy, seed) fill; picklable so runs can go to worker processes."""

    policy: str
    seed: int
    nodes: list[NodeSpec]
    pods: list[PodSpec]
    max_demand: float
    protocol: str = "default"  # or "paper" (PROTOCOLS)
    score_all_nodes: bool = False  # k8s-default scores every feasible node (percentageOfNodesToScore 100)


PROTOCOLS = ("default", "paper")
PAPER_LEVELS = (90, 95, 100, 130)  # arrived workload (%) of the FGD paper's table
PAPER_CURVE = range(75, 131)  # the x axis of its figure (and past it, to 130%)


def gpu_milli(pod: PodSpec) -> int:
    """The milli-GPU a pod requests with its default GPU count (what demand counts), as `Cluster.request` sizes it."""
    if pod.gpus == 1:
        return pod.gpu_milli or GPU_MILLI
    return pod.gpus * GPU_MILLI


def check_inputs(nodes: list[NodeSpec], pods: list[PodSpec], max_demand: float) -> None:
    if not (math.isfinite(max_demand) and max_demand > 0):
        raise UserError(f"--max-demand must be a positive number (1.3 = 130% of the cluster's GPUs), got {max_demand}")
    if not any(n.gpus for n in nodes):
        raise UserError("the cluster has no GPUs: the fill experiment measures GPUs (use a trace or scenario with "
                        "GPU nodes)")
    if not any(p.gpus for p in pods):
        raise UserError("the workload has no GPU pods: the submitted GPU demand would never grow")


def never_fit(nodes: list[NodeSpec], pods: list[PodSpec]) -> int:
    """Pods of the population that no node could hold even empty (they count as failed whenever submitted)."""
    cluster = Cluster(nodes)
    fits: dict[tuple, bool] = {}
    count = 0
    for pod in pods:
        key = (pod.cpu_m, pod.mem_mib, pod.gpus, pod.gpu_milli, pod.gpu_models, pod.tolerations)
        if key not in fits:
            fits[key] = cluster.fits_when_empty(cluster.request(pod))
        count += not fits[key]
    return count


def submission_order(pods: list[PodSpec], total_milli: int, max_demand: float,
                     rng: np.random.Generator) -> Iterator[PodSpec]:
    """A permutation of the population, then uniform draws with replacement, until the demand reaches the limit."""
    goal = max_demand * total_milli
    submitted = 0
    for i in rng.permutation(len(pods)):
        if submitted >= goal:
            return
        yield pods[i]
        submitted += gpu_milli(pods[i])
    while submitted < goal:
        pod = pods[int(rng.integers(len(pods)))]
        yield pod
        submitted += gpu_milli(pod)


def paper_order(pods: list[PodSpec], total_milli: int, ratio: float, rng: np.random.Generator) -> list[PodSpec]:
    """The FGD simulator's `--shuffle-pod` then its `-tune` workload (`SortClusterPods`, then
    `TunePodsByNodeTotalResource`, in that order): the population in a random order, then pods drawn from it with
    replacement appended while the next draw keeps the requested milli-GPU within ratio × the cluster's (the
    simulator checks the draw's per-GPU share there, not its total: kept, as it decides where the list ends); for a
    population above the ratio, pods removed at random until it is within instead."""
    pool = [pods[i] for i in rng.permutation(len(pods))]
    requested = sum(gpu_milli(p) for p in pool)
    goal = ratio * total_milli
    if requested < goal:
        while True:
            pod = pods[int(rng.integers(len(pods)))]
            share = (pod.gpu_milli or GPU_MILLI) if pod.gpus else 0
            if requested + share > goal:
                break
            pool.append(pod)
            requested += gpu_milli(pod)
    while requested > goal and pool:
        requested -= gpu_milli(pool.pop(int(rng.integers(len(pool)))))
    return pool


class Fill:
    """One fill of a cluster by a population, decisions taken by the caller: `decisions()` yields each pod that
    fits somewhere and takes a `Decision` or None (the pod fails); pods that fit nowhere fail without a question.
    The submission order comes from the seed's first `SeedSequence` child; `policy_rng` (the second) is for the
    policy's tie-breaks; the third gives the paper protocol's node order (`node_rank`)."""

    def __init__(self, nodes: list[NodeSpec], pods: list[PodSpec], seed: int, max_demand: float,
                 protocol: str = "default") -> None:
        if protocol not in PROTOCOLS:
            raise UserError(f"unknown --protocol {protocol!r}; known: {', '.join(PROTOCOLS)}")
        self.cluster = Cluster(nodes)
        self.pods, self.max_demand, self.protocol = pods, max_demand, protocol
        # spawn(3)'s first two children are spawn(2)'s: the default protocol's orders are unchanged
        order_seed, policy_seed, rank_seed = np.random.SeedSequence(seed).spawn(3)
        self.order_rng = np.random.default_rng(order_seed)
        self.policy_rng = np.random.default_rng(policy_seed)
        # The paper protocol's tie-break order: the simulator prefixes the name-sorted nodes with a random
        # permutation index (`syncClusterResourceList`) and takes the smallest name among equal scores.
        self.node_rank = np.random.default_rng(rank_seed).permutation(len(nodes))
        self.shapes = ShapeCounter()
        for pod in pods:  # FGD's target workload: the population's GPU shapes, known up front
            r = self.cluster.request(pod)
            self.shapes.add(r.cpu, r.gpus, r.gpu_milli, r.model_mask)
        self.shapes.settle()
        self.tracker = FragmentationTracker(self.cluster, self.shapes)
        self.submitted = self.allocated = self.failed = self.failed_milli = 0
        self.series: dict[str, list[float]] = {key: [] for key in SERIES}

    def decisions(self) -> Generator[PodContext, Decision | None, dict[str, np.ndarray]]:
        c = self.cluster
        if self.protocol == "paper":
            order: Iterator[PodSpec] = iter(paper_order(self.pods, c.total_gpu_milli, self.max_demand,
                                                        self.order_rng))
        else:
            order = submission_order(self.pods, c.total_gpu_milli, self.max_demand, self.order_rng)
        for pod in order:
            milli = gpu_milli(pod)
            self.submitted += milli
            ctx = pod_context(pod, c, 0.0, typical=self.shapes.current)
            decision = (yield ctx) if fits_somewhere(ctx) else None
            if decision is None:
                self.failed += 1
                self.failed_milli += milli
            else:
                option = next((o for o in ctx.options if o.gpus == decision.gpus), None)
                if option is None or not (0 <= decision.node < c.size) or not option.feasible[decision.node]:
                    raise RuntimeError(f"infeasible node {decision.node} chosen for {pod.uid}")
                r = option.request
                ids = decision.gpu_ids if decision.gpu_ids is not None else c.pick_gpus(decision.node, r)
                c.allocate(decision.node, r, ids)
                self.tracker.touch(decision.node)
                self.allocated += r.gpu_milli * len(ids)
            for key, value in zip(SERIES, (self.submitted / c.total_gpu_milli, self.allocated,
                                           self.tracker.fragmented_milli(), self.failed), strict=True):
                self.series[key].append(value)
        return self.curve()

    def curve(self) -> dict[str, np.ndarray]:
        s = self.series
        return {"demand": np.array(s["demand"]), "allocated_milli": np.array(s["allocated_milli"], dtype=np.int64),
                "fragmented_milli": np.array(s["fragmented_milli"]),
                "pods_failed": np.array(s["pods_failed"], dtype=np.int64),
                "total_milli": np.array(self.cluster.total_gpu_milli),
                "placed": np.array(len(s["demand"]) - self.failed)}


def fill_once(run: FillRun) -> dict[str, np.ndarray]:
    """Fills the cluster once under a policy: per submitted pod, the series named in SERIES; and the cluster's
    milli-GPU (`total_milli`), the pods placed and the wall time of the placements (`placed`, `wall_s`)."""
    fill = Fill(run.nodes, run.pods, run.seed, run.max_demand, run.protocol)
    policy = make_policy(run.policy)
    if run.score_all_nodes and isinstance(policy, K8sDefault):
        policy.percentage = 100
    if run.protocol == "paper":
        policy.tie_break, policy.node_rank = "rank", fill.node_rank  # the simulator's selectHost (Fill)
        if isinstance(policy, RandomFit):
            policy.random_gpu = True  # its Random runs with the random GPU choice (`-gpusel random`)
    policy.reset(fill.cluster, fill.policy_rng)
    wall0 = time.perf_counter()
    gen = fill.decisions()
    try:
        ctx = next(gen)
        while True:
            ctx = gen.send(policy.select(ctx))
    except StopIteration as stop:
        curve: dict[str, np.ndarray] = stop.value
    curve["wall_s"] = np.array(time.perf_counter() - wall0)
    return curve


def demand_levels(max_demand: float) -> list[float]:
    """The report's demand points: 0.5, 0.6, ... up to the limit (the limit alone when it is below 0.5)."""
    levels = [round(0.1 * k, 1) for k in range(5, math.floor(max_demand * 10 + 1e-9) + 1)]
    return levels or [max_demand]


def values_at(curve: dict[str, np.ndarray], level: float) -> dict[str, float]:
    """The cluster right after the first pod whose submission brought the demand to `level` (else the last)."""
    i = min(int(np.searchsorted(curve["demand"], level - 1e-12)), curve["demand"].size - 1)
    total = float(curve["total_milli"])
    alloc, frag = float(curve["allocated_milli"][i]), float(curve["fragmented_milli"][i])
    idle = total - alloc
    return {"gpu_unallocated": idle / GPU_MILLI, "gpu_fragmented": frag / GPU_MILLI,
            "pods_failed": float(curve["pods_failed"][i]), "gpu_allocated": alloc / GPU_MILLI,
            "gpu_unallocated_share": idle / total, "gpu_fragmented_share": frag / total,
            "gpu_allocated_share": alloc / total, "gpu_fragmentation": frag / idle if idle > 0 else 0.0}


def _points(curves: list[dict[str, np.ndarray]], levels: list[float]) -> list[dict[str, object]]:
    out: list[dict[str, object]] = []
    for level in levels:
        at = [values_at(c, level) for c in curves]
        point: dict[str, object] = {"demand": level}
        point.update({key: mean_ci([v[key] for v in at]) for key in POINT_KEYS})
        out.append(point)
    return out


def _paired(curves: dict[int, dict[str, np.ndarray]], base: dict[int, dict[str, np.ndarray]],
            levels: list[float]) -> list[dict[str, object]]:
    """Policy / baseline unallocated GPUs on the same seed (same submission order), mean and 95% CI."""
    out: list[dict[str, object]] = []
    for level in levels:
        ratios = []
        for seed, curve in curves.items():
            ref = values_at(base[seed], level)["gpu_unallocated"] if seed in base else 0.0
            if ref > 0:
                ratios.append(values_at(curve, level)["gpu_unallocated"] / ref)
        out.append({"demand": level, "gpu_unallocated_ratio": mean_ci(ratios)})
    return out


def summarise(runs: dict[tuple[str, int], dict[str, np.ndarray]], policies: list[str],
              max_demand: float) -> dict[str, dict[str, object]]:
    """Per policy: `points` at the demand levels, a fine `curve` for plots, and `paired_vs_k8s-default`."""
    levels = demand_levels(max_demand)
    grid = [round(CURVE_STEP * k, 2) for k in range(1, math.floor(max_demand / CURVE_STEP + 1e-9) + 1)]
    out: dict[str, dict[str, object]] = {}
    for policy in policies:
        mine = {seed: c for (p, seed), c in runs.items() if p == policy}
        curves = [mine[s] for s in sorted(mine)]
        entry: dict[str, object] = {"seeds": sorted(mine), "points": _points(curves, levels)}
        entry["curve"] = [{"demand": p["demand"], **{k: p[k] for k in ("gpu_unallocated", "gpu_fragmented")}}
                          for p in _points(curves, grid)]
        if policy != BASELINE and any(p == BASELINE for p, _ in runs):
            base = {seed: c for (p, seed), c in runs.items() if p == BASELINE}
            entry[f"paired_vs_{BASELINE}"] = _paired(mine, base, levels)
        out[policy] = entry
    return out


def paper_value(curve: dict[str, np.ndarray], level: int) -> float | None:
    """Unallocated GPU % at an arrived workload of `level` %, as the FGD paper's analysis reads a run: the mean
    allocated % (rounded to 0.01) over the pods after which the arrived % rounds to `level` (else to within 1),
    taken from 100; None when no pod is that near."""
    arrived = np.round(100.0 * curve["demand"])
    alloc = np.round(100.0 * curve["allocated_milli"] / float(curve["total_milli"]), 2)
    at = alloc[arrived == level]
    if at.size == 0:
        at = alloc[np.abs(arrived - level) <= 1]
    return None if at.size == 0 else float(100.0 - round(float(at.mean()), 2))


def quartiles(values: list[float]) -> dict[str, float]:
    """Median and the 25-75% band over seeds (the paper's plotted statistics)."""
    if not values:
        return {"median": math.nan, "q25": math.nan, "q75": math.nan, "n": 0}
    q25, med, q75 = np.percentile(values, [25, 50, 75])
    return {"median": float(med), "q25": float(q25), "q75": float(q75), "n": len(values)}


def paper_summary(runs: dict[tuple[str, int], dict[str, np.ndarray]], policies: list[str]
                  ) -> dict[str, dict[str, list[dict[str, object]]]]:
    """Per policy: the unallocated GPU % at the paper's arrived levels (`table`) and on its x axis (`curve`),
    median and 25-75% band over the seeds."""
    out = {}
    for policy in policies:
        curves = [c for (p, _), c in sorted(runs.items(), key=lambda kv: kv[0][1]) if p == policy]

        def stat(level: int, curves: list[dict[str, np.ndarray]] = curves) -> dict[str, object]:
            values = [v for v in (paper_value(c, level) for c in curves) if v is not None]
            return {"arrived": level, "gpu_unallocated_pct": quartiles(values)}

        out[policy] = {"table": [stat(level) for level in PAPER_LEVELS],
                       "curve": [stat(level) for level in PAPER_CURVE]}
    return out


def run_all(runs: list[FillRun], jobs: int) -> list[dict[str, np.ndarray]]:
    if jobs <= 1 or len(runs) == 1:
        return [fill_once(r) for r in runs]
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        return list(pool.map(fill_once, runs))
