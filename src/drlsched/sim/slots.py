"""Running pods as rows of arrays (slots), so usage ticks are array operations; a pod's usage on its node.

The table owns the pods in slots, their node and their current usage (cpu, mem, gpu); other rooms keep their
own per-slot columns (drlsched.sim.columns) that the table grows and moves with its rows."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from drlsched.cluster import Cluster
from drlsched.sim.columns import SlotColumns
from drlsched.sim.entities import Run


class SlotTable(SlotColumns):
    def __init__(self, cluster: Cluster, owners: Sequence[SlotColumns], on_use: Callable[[float, float], None],
                 cap: int = 1024) -> None:
        """`owners`: the rooms with per-slot columns of this capacity; `on_use(d_mem, d_gpu)` hears every change
        of the cluster's (capacity-capped) memory and GPU usage."""
        self.cluster = cluster
        self.owners = list(owners)
        self.on_use = on_use
        self.runs: list[Run] = []
        self.s_node = np.zeros(cap, dtype=np.int64)
        self.s_use = np.zeros((cap, 3))
        self.slot_arrays = ["s_node", "s_use"]

    def __len__(self) -> int:
        return len(self.runs)

    def nodes(self) -> np.ndarray:
        return self.s_node[: len(self.runs)]

    def use(self) -> np.ndarray:
        """Current usage (cpu, mem, gpu) of the running pods, one row per slot."""
        return self.s_use[: len(self.runs)]

    def run(self, i: int) -> Run:
        return self.runs[i]

    def add(self, run: Run) -> int:
        i = len(self.runs)
        if i == self.s_node.shape[0]:
            self.grow_slots()
            for owner in self.owners:
                owner.grow_slots()
        self.runs.append(run)
        run.slot = i
        self.s_node[i] = run.node
        return i

    def place_use(self, run: Run, cpu: float, mem: float, gpu: float) -> None:
        """A starting pod's first usage, added to its node."""
        self.s_use[run.slot] = (cpu, mem, gpu)
        self._apply_use(run.node, cpu, mem, gpu)

    def remove(self, run: Run) -> float:
        """Take a pod out of its slot and its usage off its node; returns the CPU it was using."""
        i, last = run.slot, len(self.runs) - 1
        use_cpu, use_mem, use_gpu = self.s_use[i].tolist()
        self._apply_use(run.node, -use_cpu, -use_mem, -use_gpu)
        moved = self.runs[last]
        self.runs[i] = moved
        moved.slot = i
        self.move_slot(i, last)
        for owner in self.owners:
            owner.move_slot(i, last)
        self.runs.pop()
        run.slot = -1
        return use_cpu

    def resampled(self, use: np.ndarray | None) -> None:
        """A usage tick's new usage of every running pod (None: no pod runs): per node on the cluster."""
        c = self.cluster
        if use is None:
            c.use_cpu[:] = 0.0
            c.use_mem[:] = 0.0
            c.use_gpu[:] = 0.0
            return
        n = len(self.runs)
        self.s_use[:n] = use
        nodes = self.s_node[:n]
        size = c.size
        c.use_cpu = np.bincount(nodes, weights=use[:, 0], minlength=size)
        c.use_mem = np.bincount(nodes, weights=use[:, 1], minlength=size)
        c.use_gpu = np.bincount(nodes, weights=use[:, 2], minlength=size)

    def _apply_use(self, node: int, cpu: float, mem: float, gpu: float) -> None:
        """Add a pod's usage to its node (negative amounts remove it); report the capped memory and GPU change."""
        c = self.cluster
        c.use_cpu[node] += cpu
        cap_mem = c.cap_mem[node]
        old_mem = c.use_mem[node]
        new_mem = old_mem + mem
        c.use_mem[node] = new_mem
        d_mem = min(new_mem, cap_mem) - min(old_mem, cap_mem)
        if gpu:
            c.use_gpu[node] += gpu
        self.on_use(d_mem, gpu)
