"""The model's check against the data: each profiled query alone at each profiled core limit, its run time in
the model (engine, shared-bandwidth durations) beside the profile's own run (bandwidth.replay)."""

from __future__ import annotations

from dataclasses import dataclass

from drlsched.jobs.bandwidth import calibrate, profile_runtime
from drlsched.jobs.engine import EngineConfig, JobEngine
from drlsched.jobs.model import JobArrival
from drlsched.jobs.policies import Fifo
from drlsched.jobs.profiles import ProfileSet

TOLERANCE = 0.10


@dataclass(frozen=True)
class Cell:
    query: str
    size_gb: int
    cores: int
    profile_s: float
    model_s: float

    @property
    def error(self) -> float:
        return self.model_s / self.profile_s - 1.0


def alone(profiles: ProfileSet, query: str, size: int, cores: int, structure_cores: int | None = None) -> float:
    """Run time of one query alone on `cores` executors (no cold start), its stages from the profile at
    `structure_cores` (default: the same core limit)."""
    spec = calibrate(profiles, query, size, structure_cores or cores)
    cfg = EngineConfig(executors=cores, bandwidth=1.0, startup_mean_s=0.0, startup_std_s=0.0)
    return JobEngine([JobArrival(0, 0.0, spec)], Fifo(), cfg).run()["makespan_s"]


def fidelity_table(profiles: ProfileSet) -> list[Cell]:
    cells = []
    for (query, size), by_cores in sorted(profiles.cells.items(), key=lambda kv: (int(kv[0][0]), kv[0][1])):
        for cores in sorted(by_cores):
            cells.append(Cell(query, size, cores, profile_runtime(profiles, query, size, cores),
                              alone(profiles, query, size, cores)))
    return cells
