"""The interfaces rooms see of each other, wired by the engine: a room types its collaborators with these, never
with another room's class, so no room imports another."""

from __future__ import annotations

from typing import NamedTuple, Protocol

import numpy as np

from drlsched.cluster import PodRequest
from drlsched.policies.base import Decision, Option
from drlsched.sim.entities import Run, SimJob


class Shares(NamedTuple):
    """A usage tick's CPU sharing on every node (with reclaim: computed by qos, adopted by clocks)."""

    speed: np.ndarray  # every clock's speed (non-BE clocks, then BE clocks)
    eff: np.ndarray  # CPU granted per node
    be_eff: np.ndarray  # of which to BE pods
    slow: np.ndarray  # per clock
    saturated: np.ndarray  # per clock
    use_be: np.ndarray  # BE CPU demand per node


class SlotView(Protocol):
    """The running pods, one row per slot (read-only)."""

    def __len__(self) -> int: ...
    def nodes(self) -> np.ndarray: ...
    def use(self) -> np.ndarray: ...
    def run(self, i: int) -> Run: ...


class ClockOps(Protocol):
    """Progress clocks and CPU sharing, as the pod runtime drives them."""

    def clock_of(self, run: Run) -> int: ...
    def touch(self, clk: int, t: float) -> None: ...
    def join(self, run: Run) -> None: ...
    def leave(self, run: Run, t: float) -> None: ...
    def add_demand(self, run: Run, cpu: float) -> None: ...
    def add_work(self, run: Run, work: float) -> bool: ...
    def refresh(self, node: int, t: float, force: bool = False) -> None: ...


class SlotOps(SlotView, Protocol):
    def add(self, run: Run) -> int: ...
    def place_use(self, run: Run, cpu: float, mem: float, gpu: float) -> None: ...
    def remove(self, run: Run) -> float: ...


class PodUsage(Protocol):
    """The usage model as a starting pod meets it: its mean usage rows, and its usage now (cpu, mem, gpu)."""

    def start(self, run: Run, t: float) -> tuple[float, float, float]: ...


class PodRows(Protocol):
    """Another room with per-pod rows filled when a pod starts (with reclaim, qos)."""

    def start(self, run: Run, t: float) -> None: ...


class TrafficOps(Protocol):
    def shuffle_read(self, run: Run, t: float) -> float: ...
    def place(self, job: SimJob, node: int, t: float) -> None: ...
    def unplace(self, run: Run, t: float) -> None: ...
    def talk(self, run: Run, t: float) -> None: ...


class Ledger(Protocol):
    """What the pod runtime reports to accounting."""

    def allocated(self, node: int, r: PodRequest, sign: int) -> None: ...
    def bound(self, run: Run, t: float, first: bool) -> None: ...
    def started(self, run: Run, t: float) -> None: ...


class RuntimeOps(Protocol):
    """The pod runtime, as relocation moves pods."""

    by_uid: dict[str, Run]

    def stop(self, run: Run, t: float, replan: bool = True) -> None: ...
    def bind(self, run: Run, d: Decision, options: list[Option], t: float) -> None: ...


class Progress(Protocol):
    def progress(self, run: Run, t: float) -> float: ...
