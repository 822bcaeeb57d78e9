"""Run several policies on the same workloads (paired seeds) and aggregate: mean and 95% CI per metric."""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass

import numpy as np

from drlsched.metrics import ANOMALY_KEYS, COLOCATION_KEYS, METRIC_KEYS, has_metric, metric_value
from drlsched.simulator import SimConfig, Simulator
from drlsched.workload import Workload

# Two-sided 95% Student t quantiles for 1..30 degrees of freedom; 1.96 beyond.
_T95 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145,
        2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048,
        2.045, 2.042]
MAX_SERIES_POINTS = 400
MAX_JCT_SAMPLES = 5000


def t95(df: int) -> float:
    return _T95[df - 1] if 1 <= df <= len(_T95) else 1.96


def mean_ci(values: list[float | None]) -> dict[str, float | None]:
    """Mean and the half-width of its 95% confidence interval (Student t; 0 for a single value). None values (a
    metric with an empty sample in that run) are missing, not zero; with no value left, mean and ci95 are None."""
    arr = np.asarray([v for v in values if v is not None], dtype=np.float64)
    if not arr.size:
        return {"mean": None, "ci95": None, "n": 0}
    mean = float(arr.mean())
    if arr.size < 2:
        return {"mean": mean, "ci95": 0.0, "n": int(arr.size)}
    half = t95(arr.size - 1) * float(arr.std(ddof=1)) / math.sqrt(arr.size)
    return {"mean": mean, "ci95": half, "n": int(arr.size)}


def ci_cell(stat: dict[str, float | None], mean_fmt: str, ci_fmt: str) -> str:
    """A `mean_ci` result as a report cell, `mean ± ci`, or "n/a" where it has no value."""
    mean, ci = stat["mean"], stat["ci95"]
    return "n/a" if mean is None or ci is None else f"{mean:{mean_fmt}} ± {ci:{ci_fmt}}"


def ratio_or_none(value: object, base: object) -> float | None:
    """A paired ratio; missing (None) where either run has no value or the baseline's is 0."""
    if value is None or base is None or not float(base):  # type: ignore[arg-type]
        return None
    return float(value) / float(base)  # type: ignore[arg-type]


@dataclass(frozen=True)
class RunSpec:
    """One (policy, seed) run; `workload` is a picklable factory so runs can go to worker processes."""

    policy: str
    seed: int
    workload: Callable[[int], Workload]
    config: SimConfig
    label: str | None = None  # reported as the run's policy (e.g. policy@reclaim-model); None = the policy's name


def run_one(spec: RunSpec) -> dict[str, object]:
    """Simulate one run; returns its metrics plus a thinned utilisation series and JCT sample for plots."""
    from drlsched.policies import make_policy

    sim = Simulator(spec.workload(spec.seed), make_policy(spec.policy), spec.seed, spec.config)
    metrics = sim.run()
    if spec.label:
        metrics["policy"] = spec.label
    series = sim.series
    step = max(1, len(series) // MAX_SERIES_POINTS)
    jct = np.frombuffer(sim.acc.jct, dtype=np.float64)
    if jct.size > MAX_JCT_SAMPLES:
        jct = np.quantile(jct, np.linspace(0, 1, MAX_JCT_SAMPLES))
    return {"metrics": to_jsonable(metrics), "series": [list(row) for row in series[::step]],
            "jct": [float(x) for x in jct]}


def run_all(specs: list[RunSpec], jobs: int, on_done: Callable[[RunSpec], None] | None = None
            ) -> list[dict[str, object]]:
    """Runs in parallel worker processes (or inline for jobs=1); results in the order of `specs`."""
    results: list[dict[str, object] | None] = [None] * len(specs)
    if jobs <= 1:
        for i, spec in enumerate(specs):
            results[i] = run_one(spec)
            if on_done:
                on_done(spec)
    else:
        with ProcessPoolExecutor(max_workers=jobs) as pool:
            futures = {pool.submit(run_one, spec): i for i, spec in enumerate(specs)}
            for fut in as_completed(futures):
                i = futures[fut]
                results[i] = fut.result()
                if on_done:
                    on_done(specs[i])
    return [r for r in results if r is not None]


def aggregate(runs: list[dict[str, object]], policies: list[str]) -> dict[str, dict[str, object]]:
    """Per policy: mean and 95% CI of every metric over its seeds."""
    out: dict[str, dict[str, object]] = {}
    for policy in policies:
        mine = [r["metrics"] for r in runs if r["metrics"]["policy"] == policy]  # type: ignore[index]
        entry: dict[str, object] = {"seeds": [m["seed"] for m in mine]}  # type: ignore[index]
        for key in (*METRIC_KEYS, "wall_s", "placements_per_s"):
            entry[key] = mean_ci([_number(m, key) for m in mine])  # type: ignore[arg-type]
        for key in (*ANOMALY_KEYS, *COLOCATION_KEYS):  # absent from metrics files written before they existed
            if mine and all(has_metric(m, key) for m in mine):  # type: ignore[arg-type]
                entry[key] = mean_ci([_number(m, key) for m in mine])  # type: ignore[arg-type]
        out[policy] = entry
    return out


def paired_ratios(runs: list[dict[str, object]], policies: list[str], baseline: str,
                  keys: tuple[str, ...] = METRIC_KEYS) -> dict[str, dict[str, object]]:
    """Per policy and metric (`keys`): mean and 95% CI of policy / baseline over paired seeds (seeds where the
    baseline's value is 0, or either value is null, are left out). Pairing removes the workload-to-workload spread
    that dominates per-policy CIs."""
    by_seed = {(r["metrics"]["policy"], r["metrics"]["seed"]): r["metrics"] for r in runs}  # type: ignore[index]
    base = {seed: m for (p, seed), m in by_seed.items() if p == baseline}
    out: dict[str, dict[str, object]] = {}
    for policy in policies:
        if policy == baseline:
            continue
        entry: dict[str, object] = {}
        for key in keys:
            ratios: list[float | None] = []
            for (p, seed), m in by_seed.items():
                if p != policy or seed not in base:
                    continue
                num, den = _number(m, key), _number(base[seed], key)  # type: ignore[arg-type]
                if num is not None and den:
                    ratios.append(num / den)
            entry[key] = mean_ci(ratios)
        out[policy] = entry
    return out


def _number(metrics: dict[str, object], key: str) -> float | None:
    """A metric as a float, None where it is null (an empty sample) or absent from an older metrics file."""
    try:
        value = metric_value(metrics, key)
    except KeyError:
        return None
    return None if value is None else float(value)  # type: ignore[arg-type]


def default_jobs() -> int:
    return max(1, min(2, os.cpu_count() or 1))


def to_jsonable(value: object) -> object:
    """numpy scalars and arrays to plain Python for json.dump."""
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_jsonable(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    return value
