"""What a format reader gets and fills: its files, bad-row policy, unit scales, the cluster, `info`."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from drlsched.traces.csvio import BadRows
from drlsched.workload import NodeSpec


@dataclass
class Context:
    files: dict[str, list[Path]]
    bad: BadRows
    machine_cpu_m: int  # what 1.0 of a normalised CPU amount is, for traces that normalise
    machine_mem_mib: int  # likewise for memory
    default_nodes: int  # cluster size when the trace has no machine table (before --nodes scaling)
    nodes: list[NodeSpec] = field(default_factory=list)  # filled in place: the store holds this list

    @property
    def info(self) -> dict[str, object]:
        return self.bad.info

    def count(self, key: str, amount: int = 1) -> None:
        """Adds to an `info` counter: every dropped or adjusted value is counted, never silently lost."""
        self.info[key] = int(self.info.get(key, 0)) + amount  # type: ignore[call-overload]

    def homogeneous_nodes(self, prefix: str) -> None:
        """The cluster for traces without a machine table: `default_nodes` copies of the scale machine."""
        self.info["nodes_assumed"] = (f"{self.default_nodes} x {self.machine_cpu_m}m CPU, "
                                      f"{self.machine_mem_mib}Mi memory (no machine table in the trace)")
        self.nodes.extend(NodeSpec(f"{prefix}-{i:05d}", self.machine_cpu_m, self.machine_mem_mib)
                          for i in range(self.default_nodes))
