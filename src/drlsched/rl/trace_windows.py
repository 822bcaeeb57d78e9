"""Training episodes cut from a real trace: each workload seed is one window of it.

`drlsched train --trace PATH --trace-format FMT` trains on windows of `--duration` seconds whose starts are drawn
uniformly (from the workload seed) within `[--start, --start + --span)` of the trace, so a held-out part of the
trace (e.g. its second half, evaluated with `drlsched evaluate --trace ... --start HALF`) is never trained on.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from drlsched.errors import UserError
from drlsched.traces import TraceSelection, load_trace, load_window
from drlsched.workload import Workload


@dataclass(frozen=True)
class TraceWindows:
    """Picklable `workload_fn` for the env: seed → a window of the trace (same nodes in every window)."""

    trace: TraceSelection  # the trace and its options (--cache, --nodes, ...)
    start_s: float  # the training span, seconds after the trace's first arrival
    span_s: float
    window_s: float
    nodes: int = 0  # the cluster's size (the trace's nodes after --nodes scaling), for the run's record

    def __call__(self, seed: int) -> Workload:
        rng = np.random.default_rng(seed)
        offset = float(rng.uniform(0.0, max(0.0, self.span_s - self.window_s)))
        return load_window(replace(self.trace, start=self.start_s + offset, duration=self.window_s, seed=seed),
                           allow_empty=True)


def trace_windows(trace: TraceSelection, window_s: float, span_s: float | None) -> TraceWindows:
    """Checks the trace once (a clear error for a bad path or an empty span) and sizes the training span, which
    starts at `trace.start`."""
    workload = load_trace(replace(trace, duration=span_s, seed=0))
    info = workload.info
    first, last = float(info["trace_first_arrival_s"]), float(info["trace_last_arrival_s"])
    span = span_s if span_s is not None else max(0.0, last - first - trace.start)
    if span < window_s:
        raise UserError(f"the training span ({span:g} s from --start {trace.start:g}) is shorter than one window "
                        f"(--duration {window_s:g} s); lower --duration or widen --span")
    return TraceWindows(trace, float(trace.start), span, window_s, nodes=len(workload.nodes))
