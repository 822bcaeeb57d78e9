"""What a format reader gets and fills: its files, bad-row policy, unit scales, the cluster, `info`."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from drlsched.traces.csvio import BadRows
from drlsched.traces.window import keeps_job
from drlsched.workload import NodeSpec


@dataclass
class Context:
    files: dict[str, list[Path]]
    bad: BadRows
    machine_cpu_m: int  # what 1.0 of a normalised CPU amount is, for traces that normalise
    machine_mem_mib: int  # likewise for memory
    default_nodes: int  # cluster size when the trace has no machine table (before --nodes scaling)
    scratch: Path  # a directory for intermediate files (external sorts), removed after the build
    nodes: list[NodeSpec] = field(default_factory=list)  # filled in place: the store holds this list
    # Readers with large side tables drop unsampled jobs while reading (the same decision the window makes
    # later, so applying both is harmless); 1.0 = keep everything.
    sample_rate: float = 1.0
    seed: int = 0
    _kept: dict[str, bool] = field(default_factory=dict)

    @property
    def info(self) -> dict[str, object]:
        return self.bad.info

    def count(self, key: str, amount: int = 1) -> None:
        """Adds to an `info` counter: every dropped or adjusted value is counted, never silently lost."""
        self.info[key] = int(self.info.get(key, 0)) + amount  # type: ignore[call-overload]

    def keep(self, job_id: str, arrival_s: float | None = None) -> bool:
        """Whether a job survives sampling. `arrival_s` (when the row tells it) of a dropped job still counts
        for the trace's first arrival, so that --start means the same with and without sampling."""
        if self.sample_rate >= 1.0:
            return True
        kept = self._kept.get(job_id)
        if kept is None:
            if len(self._kept) > 1_000_000:
                self._kept.clear()
            kept = self._kept[job_id] = keeps_job(job_id, self.sample_rate, self.seed)
        if not kept and arrival_s is not None:
            first = self.info.get("unsampled_first_arrival_s")
            if first is None or arrival_s < first:  # type: ignore[operator]
                self.info["unsampled_first_arrival_s"] = arrival_s
        return kept

    def homogeneous_nodes(self, prefix: str) -> None:
        """The cluster for traces without a machine table: `default_nodes` copies of the scale machine."""
        self.info["nodes_assumed"] = (f"{self.default_nodes} x {self.machine_cpu_m}m CPU, "
                                      f"{self.machine_mem_mib}Mi memory (no machine table in the trace)")
        self.nodes.extend(NodeSpec(f"{prefix}-{i:05d}", self.machine_cpu_m, self.machine_mem_mib)
                          for i in range(self.default_nodes))
