"""Pod usage: every running pod uses request × a usage ratio, resampled at each usage tick (log-normal noise
around its mean; services scaled by the workload's load curve); with --usage-trace, real CPU series drive the
LS pods, handed out in arrival order from a seeded start."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from drlsched.sim.columns import SlotColumns
from drlsched.sim.entities import Run
from drlsched.usage_trace import UsageSeries
from drlsched.workload import PodSpec, QoS


class UsageModel(SlotColumns):
    def __init__(self, usage: UsageSeries | None, load_curve: Callable[[float], float] | None, tick_s: float,
                 seed: int, start_rng: np.random.Generator, rng: np.random.Generator, cap: int = 1024) -> None:
        """`start_rng` draws where a part of the series starts; `rng` the usage noise."""
        self.usage = usage
        self.load_curve = load_curve
        self.tick_s = tick_s
        self.rng = rng
        self.s_base = np.zeros((cap, 3))  # request × mean usage ratio: cpu, mem, gpu
        self.s_sigma = np.zeros(cap)
        self.s_service = np.zeros(cap, dtype=bool)
        self.slot_arrays = ["s_base", "s_sigma", "s_service"]
        if usage is not None:
            # Real usage series, resampled to the tick, handed to LS pods in arrival order from a seeded start.
            self.u_grid, self.u_len = usage.grid(tick_s)
            self.u_next = seed % len(self.u_len)
            # A part of the series (--usage-window/--usage-series): each seed replays it from its own point, so the
            # seeds cover the part, not only its first minutes; the same point for every series keeps them in step.
            drawn = int(start_rng.integers(int(self.u_len.max())))
            self.u_off = drawn if usage.drawn_start else 0
            self.s_series = np.full(cap, -1, dtype=np.int64)
            self.slot_arrays.append("s_series")

    def series_for(self, spec: PodSpec) -> int:
        """The real series an arriving pod replays (LS pods, in turn), -1 for none."""
        if self.usage is None or spec.qos != QoS.LS:
            return -1
        series = self.u_next
        self.u_next = (self.u_next + 1) % len(self.u_len)
        return series

    def start(self, run: Run, t: float) -> tuple[float, float, float]:
        """A pod's mean usage row in its slot; returns its usage now (cpu, mem, gpu)."""
        i, spec, r = run.slot, run.spec, run.req
        assert r is not None
        base_cpu = r.cpu * spec.usage_cpu
        base_mem = r.mem * spec.usage_mem
        base_gpu = r.gpus * r.gpu_milli * spec.usage_gpu
        self.s_base[i] = (base_cpu, base_mem, base_gpu)
        self.s_sigma[i] = math.sqrt(math.log1p(spec.usage_cv ** 2))
        self.s_service[i] = spec.service
        # As at usage ticks, the load curve scales the CPU of services; memory and GPU keep their mean.
        use_cpu = base_cpu * self.load_curve(t) if (spec.service and self.load_curve) else base_cpu
        if self.usage is not None:
            self.s_series[i] = run.series
            if run.series >= 0:  # a real series drives its CPU: request × the series (× its mean ratio if a shape)
                base_cpu = r.cpu * (spec.usage_cpu if self.usage.relative else 1.0)
                self.s_base[i, 0] = base_cpu
                self.s_sigma[i] = 0.0
                k = (int(t // self.tick_s) + self.u_off) % self.u_len[run.series]
                use_cpu = base_cpu * float(self.u_grid[run.series, k])
        return use_cpu, base_mem, base_gpu

    def resample(self, t: float, n: int) -> np.ndarray | None:
        """The usage (cpu, mem, gpu) of the n running pods at a usage tick (None when none runs)."""
        if not n:
            return None
        sigma = self.s_sigma[:n]
        noise = np.exp(self.rng.standard_normal(n) * sigma - 0.5 * sigma * sigma)
        use = self.s_base[:n] * noise[:, None]
        use[:, 1] = self.s_base[:n, 1]  # memory holds steady; CPU and GPU fluctuate
        series = self.s_series[:n] if self.usage is not None else None
        if self.load_curve is not None:
            load = self.load_curve(t)
            use[self.s_service[:n] if series is None else self.s_service[:n] & (series < 0), 0] *= load
        if series is not None:
            rows = np.flatnonzero(series >= 0)
            j = series[rows]
            use[rows, 0] *= self.u_grid[j, (int(t // self.tick_s) + self.u_off) % self.u_len[j]]
        return use
