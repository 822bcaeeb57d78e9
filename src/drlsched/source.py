"""Where a command's workload comes from: a synthetic scenario or a window of a trace, with the sizes asked for.

Built once by the CLI and passed on as a plain value: picklable, so evaluation workers and Ray actors rebuild the
same workload for a seed.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from drlsched.errors import UserError
from drlsched.scenarios import make_scenario
from drlsched.traces import TraceSelection, load_trace
from drlsched.usage_trace import load_usage
from drlsched.workload import Workload


@dataclass(frozen=True)
class WorkloadSource:
    scenario: str | None = None
    trace: TraceSelection | None = None
    nodes: int | None = None
    duration: float | None = None
    load: float = 1.0
    usage_trace: str | None = None  # real CPU usage series for the LS pods (drlsched.usage_trace)
    usage_format: str | None = None
    usage_window: tuple[float, float] | None = None  # the part of the series replayed (--usage-window)
    usage_series: tuple[float, float] | None = None  # (--usage-series)

    def __post_init__(self) -> None:
        if (self.scenario is None) == (self.trace is None):
            raise UserError("give exactly one of --scenario NAME or --trace PATH (with --trace-format)")

    def __call__(self, seed: int) -> Workload:
        """The workload for a seed (a scenario's draw, or the trace window sampled with that seed)."""
        if self.trace is not None:
            w = load_trace(replace(self.trace, seed=seed))
        else:
            assert self.scenario is not None
            w = make_scenario(self.scenario, nodes=self.nodes, duration=self.duration, load=self.load, seed=seed)
        if self.usage_trace is not None:
            w.usage = load_usage(self.usage_trace, self.usage_format, self.usage_window, self.usage_series)
        return w
