"""Reclaimed resources: how much CPU and memory a node can lend to best-effort (BE) pods, estimated from the
measured usage of the pods that hold requests on it (LS and Burstable, "high priority" in Koordinator's words).

Models (docs/simulator.md gives each formula with its source and the source's figures):
- `none`: no reclaim; BE pods need their requests like every pod (kube-scheduler's NodeResourcesFit).
- `koordinator`: batch allocatable = capacity × threshold − Σ usage of non-BE pods, the usage averaged over the
  last 300 s (Koordinator's slo-controller `batchresource` plugin; thresholds CPU 60%, memory 65%).
- `borg`: each non-BE pod's reservation starts at its limit (= request here) and, after 300 s, decays toward its
  usage plus a safety margin; it jumps back up when usage exceeds it (Verma et al., EuroSys'15 §5.5).
  Reclaimable = capacity × threshold − Σ reservations.
- `peak`: predicted node peak = max(mean + N·σ of the non-BE usage over the window, Σ of each non-BE pod's
  p-th percentile usage over the window) (Bashir et al., EuroSys'21, the max of the N-sigma and per-task
  percentile predictors). Reclaimable = capacity × threshold − predicted peak.
- `forecast`: each node's non-BE usage forecast by Holt's linear trend method (drlsched.forecast; Holt 1957,
  Hyndman & Athanasopoulos FPP3 §8.2), the upper bound of its prediction interval (z = `forecast_sigmas`) over
  the next `forecast_horizon_s`: reclaimable = capacity × threshold − that bound.
All are recomputed every `period_s` (60 s, Koordinator's default), never negative.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from drlsched.errors import UserError
from drlsched.forecast import HoltForecast

RECLAIM_MODELS = ("none", "koordinator", "borg", "peak", "forecast")
# Per model: (CPU threshold, memory threshold, BE CPU suppress threshold), shares of node capacity.
# Koordinator's defaults (slo-controller ColocationStrategy and koordlet's CPU suppress); Borg and the peak
# predictor carry their safety in the estimate, so they lend up to the whole node and BE pods are held only to
# what LS pods leave (Borg throttles non-prod tasks only when the machine runs short). The forecast lends up to
# 75% of the node: the utilisation at which an LS pod's slowdown (ls_slowdown) reaches the default target 4×.
_DEFAULTS = {"none": (1.0, 1.0, 1.0), "koordinator": (0.60, 0.65, 0.65), "borg": (1.0, 0.65, 1.0),
             "peak": (1.0, 0.65, 1.0), "forecast": (0.75, 0.65, 1.0)}


@dataclass(frozen=True)
class ReclaimConfig:
    model: str = "none"
    cpu_threshold: float | None = None  # None: the model's default (_DEFAULTS)
    mem_threshold: float | None = None
    suppress_threshold: float | None = None  # BE pods together get at most capacity × this − LS usage
    period_s: float = 60.0  # recompute batch allocatable this often
    window_s: float = 300.0  # usage aggregated over this long
    borg_margin: float = 0.1  # reservation = usage × (1 + margin) once decayed
    borg_decay_s: float = 600.0  # time constant of the reservation's decay toward usage + margin
    peak_sigmas: float = 3.0
    peak_percentile: float = 98.0
    forecast_alpha: float = 0.1  # Holt's level smoothing
    forecast_beta: float = 0.01  # Holt's trend smoothing (error-correction form: 0 ≤ β ≤ α)
    forecast_horizon_s: float = 300.0  # admit against the forecast's upper bound over this long
    forecast_sigmas: float = 3.0  # z of the prediction interval's upper bound
    evict_mem_threshold: float = 0.70  # Koordinator's BE memory eviction threshold (node memory usage share)
    evict_cpu_satisfaction: float = 0.60  # BE CPU satisfaction below this for evict_cpu_window_s evicts BE pods
    evict_cpu_window_s: float = 60.0
    evict_cpu_target: float = 0.80  # an eviction frees (target − satisfaction) × BE requests
    ls_slowdown_target: float = 4.0  # an LS pod's latency target, as a multiple of its latency on an idle node
    interference: float = 0.0  # extra slowdown per co-running pod (Borg: 0.003); 0 = off

    def __post_init__(self) -> None:
        if self.model not in RECLAIM_MODELS:
            raise UserError(f"unknown reclaim model {self.model!r}; expected one of {', '.join(RECLAIM_MODELS)}")
        for name in ("cpu_threshold", "mem_threshold", "suppress_threshold"):
            v = getattr(self, name)
            if v is not None and not (math.isfinite(v) and 0 < v <= 1):
                raise UserError(f"--reclaim-{name.replace('_threshold', '')}-threshold must be in (0, 1], got {v}")
        if not (math.isfinite(self.interference) and 0 <= self.interference <= 1):
            raise UserError(f"--interference must be in [0, 1], got {self.interference}")
        if not (math.isfinite(self.ls_slowdown_target) and self.ls_slowdown_target > 1):
            raise UserError(f"--ls-slowdown-target must be above 1, got {self.ls_slowdown_target}")
        if not (math.isfinite(self.forecast_alpha) and 0 < self.forecast_alpha <= 1):
            raise UserError(f"forecast_alpha must be in (0, 1], got {self.forecast_alpha}")
        if not (math.isfinite(self.forecast_beta) and 0 <= self.forecast_beta <= self.forecast_alpha):
            raise UserError(f"forecast_beta must be in [0, forecast_alpha={self.forecast_alpha}], "
                            f"got {self.forecast_beta}")
        if not (math.isfinite(self.forecast_horizon_s) and self.forecast_horizon_s > 0):
            raise UserError(f"--forecast-horizon must be a positive number of seconds, got {self.forecast_horizon_s}")
        if not (math.isfinite(self.forecast_sigmas) and self.forecast_sigmas >= 0):
            raise UserError(f"--forecast-sigmas must be 0 or more, got {self.forecast_sigmas}")

    @property
    def enabled(self) -> bool:
        return self.model != "none"

    @property
    def cpu(self) -> float:
        return self.cpu_threshold if self.cpu_threshold is not None else _DEFAULTS[self.model][0]

    @property
    def mem(self) -> float:
        return self.mem_threshold if self.mem_threshold is not None else _DEFAULTS[self.model][1]

    @property
    def suppress(self) -> float:
        return self.suppress_threshold if self.suppress_threshold is not None else _DEFAULTS[self.model][2]


class UsageWindow:
    """The last `w` per-node samples of non-BE usage (a ring), for means, deviations and maxima over the window."""

    def __init__(self, nodes: int, w: int) -> None:
        self.cpu = np.zeros((w, nodes))
        self.mem = np.zeros((w, nodes))
        self.filled = 0
        self.i = 0

    def add(self, cpu: np.ndarray, mem: np.ndarray) -> None:
        self.cpu[self.i] = cpu
        self.mem[self.i] = mem
        self.i = (self.i + 1) % self.cpu.shape[0]
        self.filled = min(self.filled + 1, self.cpu.shape[0])

    def view(self) -> tuple[np.ndarray, np.ndarray]:
        return self.cpu[: self.filled], self.mem[: self.filled]


class NodeForecast:
    """The `forecast` model's state: Holt's method on every node's non-BE CPU and memory usage, one update per
    usage sample (tick); `peak` is the upper bound of the prediction interval over the horizon."""

    def __init__(self, cfg: ReclaimConfig, nodes: int, tick_s: float) -> None:
        # σ² forgets with the usage window's memory: weight tick / window.
        self.holt = HoltForecast((2, nodes), cfg.forecast_alpha, cfg.forecast_beta, min(1.0, tick_s / cfg.window_s))
        self.steps = max(1, math.ceil(cfg.forecast_horizon_s / tick_s))
        self.sigmas = cfg.forecast_sigmas

    def add(self, cpu: np.ndarray, mem: np.ndarray) -> None:
        self.holt.update(np.stack([cpu, mem]))

    def peak(self) -> tuple[np.ndarray, np.ndarray]:
        if not self.holt.seen:
            return np.zeros_like(self.holt.level[0]), np.zeros_like(self.holt.level[1])
        up = np.maximum(self.holt.upper(self.steps, self.sigmas), 0.0)  # a falling trend forecasts no negative use
        return up[0], up[1]


def batch_allocatable(cfg: ReclaimConfig, cap_cpu: np.ndarray, cap_mem: np.ndarray, window: UsageWindow,
                      slot_node: np.ndarray, slot_resv: np.ndarray, slot_hist: np.ndarray,
                      forecast: NodeForecast | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(batch CPU in millicores, batch memory in MiB) per node, floored at 0 and rounded down.

    `slot_*` cover the running non-BE pods only: their node, their Borg reservation (cpu, mem) and their CPU
    usage history over the window (one row per pod). `forecast` is the `forecast` model's state."""
    cpu_use, mem_use = window.view()
    if not len(cpu_use):
        cpu_use, mem_use = np.zeros((1, cap_cpu.size)), np.zeros((1, cap_cpu.size))
    n = cap_cpu.size
    if cfg.model == "koordinator":
        used_cpu, used_mem = cpu_use.mean(axis=0), mem_use.mean(axis=0)
    elif cfg.model == "borg":
        used_cpu = np.bincount(slot_node, weights=slot_resv[:, 0], minlength=n)
        used_mem = np.bincount(slot_node, weights=slot_resv[:, 1], minlength=n)
    elif cfg.model == "forecast":
        if forecast is None:
            raise ValueError("the forecast model needs its NodeForecast")
        used_cpu, used_mem = forecast.peak()
    else:  # peak
        sigma = cpu_use.mean(axis=0) + cfg.peak_sigmas * cpu_use.std(axis=0)
        per_pod = np.percentile(slot_hist, cfg.peak_percentile, axis=1) if len(slot_hist) else np.zeros(0)
        used_cpu = np.maximum(sigma, np.bincount(slot_node, weights=per_pod, minlength=n))
        used_mem = mem_use.max(axis=0)
    batch_cpu = np.floor(np.maximum(cap_cpu * cfg.cpu - used_cpu, 0.0)).astype(np.int64)
    batch_mem = np.floor(np.maximum(cap_mem * cfg.mem - used_mem, 0.0)).astype(np.int64)
    return batch_cpu, batch_mem


def borg_reservations(cfg: ReclaimConfig, resv: np.ndarray, request: np.ndarray, use: np.ndarray, age: np.ndarray,
                      dt: float) -> np.ndarray:
    """Borg's reservations (cpu, mem per row) after `dt` more seconds: the limit for the first 300 s, then an
    exponential decay toward usage × (1 + margin); back up to usage × (1 + margin) (at most the limit) as soon as
    usage exceeds the reservation."""
    target = np.minimum(use * (1.0 + cfg.borg_margin), request)
    decayed = target + (resv - target) * math.exp(-dt / cfg.borg_decay_s)
    new = np.where(use > resv, np.maximum(target, resv), np.where(target < resv, decayed, resv))
    return np.where((age < cfg.window_s)[:, None], request, new)


def ls_slowdown(rho: np.ndarray) -> np.ndarray:
    """An LS pod's latency relative to an idle node, as an M/M/1 queue at the node's CPU utilisation ρ:
    1 / (1 − ρ), with ρ capped at RHO_MAX (a saturated node: 20×). A modelling choice, not a measurement."""
    return 1.0 / (1.0 - np.minimum(rho, RHO_MAX))


RHO_MAX = 0.95  # ls_slowdown's cap on utilisation: a saturated node slows LS pods 20×
MIN_SPEED = 1e-3  # a fully suppressed BE pod still creeps (keeps its completion event finite)
_EPS = 1e-9


def cpu_shares(cap: Any, d_ls: Any, d_be: Any, suppress: float, crowd: Any, mn: Callable[[Any, Any], Any],
               mx: Callable[[Any, Any], Any]) -> tuple[Any, Any, Any, Any, Any]:
    """CFS-like sharing of a node's CPU between its non-BE pods (demand `d_ls`, cpu.shares from their requests)
    and its BE pods (`d_be`, minimal shares, and held by Koordinator's CPU suppression to capacity × `suppress` −
    the non-BE usage). Works on floats (`mn`, `mx` = min, max) or on arrays of nodes (np.minimum, np.maximum).

    Returns (non-BE speed, BE speed, non-BE CPU granted, BE CPU granted, LS slowdown): a class progresses at
    granted / demand (every pod of a class gets the same fraction of its demand, as CFS does for CPU-bound pods
    whose shares follow their requests), divided by `crowd` (interference); LS slowdown is `ls_slowdown` of the
    node's utilisation, times `crowd`."""
    ls_alloc = mn(d_ls, cap)
    be_alloc = mn(d_be, mx(cap * suppress - ls_alloc, 0.0))
    ls_speed = (ls_alloc + _EPS) / (d_ls + _EPS) / crowd
    be_speed = mx((be_alloc + _EPS) / (d_be + _EPS), MIN_SPEED) / crowd
    slow = crowd / (1.0 - mn((ls_alloc + be_alloc) / cap, RHO_MAX))
    return ls_speed, be_speed, ls_alloc, be_alloc, slow
