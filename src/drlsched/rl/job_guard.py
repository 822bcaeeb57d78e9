"""Distribution-shift guard for the learned job policy (issue 24 §4): Decima's policy lost to the tuned heuristic
when the arrival rate moved, so the served policy delegates to a heuristic while what it sees leaves what it was
trained on.

The training range: over the arrivals of `RANGE_SEEDS` training seeds, the arrival rate of every window of
`WINDOW` consecutive arrivals ((WINDOW − 1) / their time span) and the mean job work (`Job.work_s`) of the same
windows; the central `SPREAD` percent of each (the extremes of thousands of overlapping windows are the noise of
the estimate, not the load: their max admits 2.4× the training rate). `drlsched train-jobs` records it in the
checkpoint's meta (`guard_range`); for a checkpoint without it, `range_for` rebuilds it from the meta's workload,
nodes, load, duration and seed (the same computation; the embedded tpch set only). Serving: the last `WINDOW`
arrivals seen are judged the same way; while either statistic is outside the range widened by `MARGIN` (lower
bound / (1 + MARGIN), upper · (1 + MARGIN)), the fallback decides. Until a window is full nothing is judged.
Each switch is logged once.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from drlsched.errors import UserError
from drlsched.jobs.engine import job_work
from drlsched.jobs.model import Job, JobArrival
from drlsched.jobs.policies import Decision, JobPolicy
from drlsched.jobs.workload import JobSource

WINDOW = 30  # arrivals: the rate estimate's relative spread is ~1/√(WINDOW − 1)
SPREAD = 95.0
MARGIN = 0.1
RANGE_SEEDS = 50
TRAIN_SEED = 1000  # = job_train.TRAIN_SEED (training episodes use TRAIN_SEED + 100000 · seed + n)
DEFAULT_FALLBACK = "weighted-fair:-2"  # the best tuned heuristic at every measured load (job_policy_lever.json)
log = logging.getLogger("drlsched.jobs")


@dataclass(frozen=True)
class TrainRange:
    rate_per_s: tuple[float, float]
    work_s: tuple[float, float]
    window: int = WINDOW

    def to_dict(self) -> dict[str, Any]:
        return {"rate_per_s": list(self.rate_per_s), "work_s": list(self.work_s), "window": self.window,
                "seeds": RANGE_SEEDS, "spread_pct": SPREAD}

    @staticmethod
    def from_dict(path: Path, raw: object) -> TrainRange:
        try:
            assert isinstance(raw, dict)
            rate, work, window = raw["rate_per_s"], raw["work_s"], raw["window"]
            lo_r, hi_r, lo_w, hi_w = (float(v) for v in (*rate, *work))
            assert len(rate) == len(work) == 2 and isinstance(window, int) and window >= 2
            assert 0 < lo_r <= hi_r and 0 < lo_w <= hi_w
        except (AssertionError, KeyError, TypeError, ValueError):
            raise UserError(f"{path}: meta.guard_range must hold rate_per_s and work_s as [low, high] (positive) "
                            "and an integer window ≥ 2") from None
        return TrainRange((lo_r, hi_r), (lo_w, hi_w), window)


def window_stats(times: np.ndarray, work: np.ndarray, window: int) -> tuple[np.ndarray, np.ndarray]:
    """Arrival rate and mean work of every `window` consecutive arrivals (rate inf where they arrive at once)."""
    if times.size < window:
        return np.empty(0), np.empty(0)
    span = times[window - 1:] - times[:times.size - window + 1]
    with np.errstate(divide="ignore"):
        rate = np.where(span > 0, (window - 1) / np.maximum(span, 1e-300), np.inf)
    csum = np.concatenate([[0.0], np.cumsum(work)])
    return rate, (csum[window:] - csum[:-window]) / window


def training_range(source: JobSource, seed: int, window: int = WINDOW) -> TrainRange | None:
    """The range over `RANGE_SEEDS` of the training seeds of `drlsched train-jobs --seed seed` on `source`; None
    when its episodes are too short to fill a window."""
    cfg = source.config()
    rates, works = [], []
    for n in range(RANGE_SEEDS):
        arrivals: list[JobArrival] = source.arrivals(TRAIN_SEED + 100_000 * seed + n)
        r, w = window_stats(np.array([a.arrival_s for a in arrivals]),
                            np.array([job_work(a.spec, cfg) for a in arrivals]), window)
        rates.append(r)
        works.append(w)
    rate, work = np.concatenate(rates), np.concatenate(works)
    if rate.size == 0:
        return None
    cut = [(100 - SPREAD) / 2, (100 + SPREAD) / 2]
    (lo_r, hi_r), (lo_w, hi_w) = np.percentile(rate, cut), np.percentile(work, cut)
    return TrainRange((float(lo_r), float(hi_r)), (float(lo_w), float(hi_w)), window)


def range_for(path: Path, meta: object) -> TrainRange | None:
    """The checkpoint's recorded range, else the one its training settings imply (embedded tpch only); None
    where training filled no window."""
    if not isinstance(meta, dict):
        raise UserError(f"{path}: no training meta to take a guard range from (serve it with :fallback=none)")
    if "guard_range" in meta:
        raw = meta["guard_range"]
        return None if raw is None else TrainRange.from_dict(path, raw)
    settings = meta.get("settings")
    seed = settings.get("seed") if isinstance(settings, dict) else None
    facts = (meta.get("nodes"), meta.get("load"), meta.get("duration_s"))
    if meta.get("workload") != "tpch" or not isinstance(seed, int) or not all(
            isinstance(v, int | float) and not isinstance(v, bool) and v > 0 for v in facts):
        raise UserError(f"{path}: records no guard range and was not trained on the embedded tpch set with known "
                        "nodes, load, duration and seed (serve it with :fallback=none)")
    nodes, load, duration = facts
    return training_range(JobSource(nodes=int(nodes), load=float(load), duration_s=float(duration)), seed)


class GuardedJobPolicy:
    """`learned` while the last `window` arrivals look like training, `fallback` otherwise."""

    def __init__(self, learned: JobPolicy, fallback: JobPolicy, bounds: TrainRange, margin: float = MARGIN) -> None:
        self.learned = learned
        self.fallback = fallback
        self.name = learned.name
        self.bounds = bounds
        self.margin = margin
        self.times: deque[float] = deque(maxlen=bounds.window)
        self.work: deque[float] = deque(maxlen=bounds.window)
        self.live: set[int] = set()
        self.delegating = False
        self.switches = 0
        self.decisions = 0
        self.delegated = 0

    def _inside(self, value: float, bounds: tuple[float, float]) -> bool:
        return bounds[0] / (1 + self.margin) <= value <= bounds[1] * (1 + self.margin)

    def observe(self, jobs: Sequence[Job]) -> bool:
        """Takes in the jobs not seen before; True when the window is full and outside the range."""
        for j in jobs:
            if j.ident not in self.live:
                self.times.append(j.arrival_s)
                self.work.append(j.work_s)
        self.live = {j.ident for j in jobs}
        if len(self.times) < self.bounds.window:
            return False
        rate, work = window_stats(np.sort(np.array(self.times)), np.array(self.work), self.bounds.window)
        return not (self._inside(float(rate[0]), self.bounds.rate_per_s)
                    and self._inside(float(work[0]), self.bounds.work_s))

    def decide(self, jobs: Sequence[Job], executors: int, critical_path: Callable[[Job], float]) -> Decision:
        outside = self.observe(jobs)
        if outside != self.delegating:
            self.delegating = outside
            self.switches += 1
            rate, work = window_stats(np.sort(np.array(self.times)), np.array(self.work), self.bounds.window)
            log.warning("%s: last %d arrivals at %.3g/s, mean work %.3g s (trained %.3g–%.3g/s, %.3g–%.3g s): %s",
                        self.name, self.bounds.window, rate[0], work[0], *self.bounds.rate_per_s,
                        *self.bounds.work_s, f"delegating to {self.fallback.name}" if outside
                        else "back to the learned policy")
        self.decisions += 1
        if outside:
            self.delegated += 1
            see = getattr(self.learned, "see", None)
            if see is not None:  # a policy with a history input keeps its window whole while it is not asked
                see(jobs, executors)
            return self.fallback.decide(jobs, executors, critical_path)
        return self.learned.decide(jobs, executors, critical_path)
