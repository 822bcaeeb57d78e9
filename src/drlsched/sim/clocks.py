"""CPU sharing and progress clocks: how fast the pods on each node progress, and the integrals of saturation and
LS slowdown they accumulate.

One clock per node; with reclaim a second one per node (index node + nodes) for its BE pods, which progress at
their own share (CPU suppression). A clock's virtual time advances at its speed; a batch pod finishes when its
clock reaches the pod's target (a heap per clock), so a speed change re-plans one event per clock.
Python lists, not arrays: they are read and written one node at a time on every pod event, where numpy scalar
access costs several times more; usage ticks convert them to arrays once.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable

import numpy as np

from drlsched.cluster import Cluster
from drlsched.reclaim import RHO_MAX, ReclaimConfig, cpu_shares, ls_slowdown
from drlsched.sim.entities import Run
from drlsched.sim.ports import Shares
from drlsched.workload import QoS

EPS = 1e-7


class Clocks:
    def __init__(self, cluster: Cluster, rc: ReclaimConfig | None, plan: Callable[[float, int, int], None]) -> None:
        """`rc`: the reclaim configuration when reclaim is on (a BE clock per node); `plan(when, clock, version)`
        schedules a clock's next completion event."""
        self.cluster = cluster
        self.rc = rc
        self._plan_event = plan
        n = cluster.size
        k = 2 * n if rc is not None else n
        self.speed = [1.0] * k
        self.clock = [0.0] * k
        self.sat_cum = [0.0] * k
        self.slow = [1.0] * k  # LS slowdown on the node (ls_slowdown of its CPU utilisation)
        self.slow_cum = [0.0] * k
        self.node_t = [0.0] * k
        self.saturated = [False] * k
        self.node_heap: list[list] = [[] for _ in range(k)]  # type: ignore[type-arg]
        self.node_ver = [0] * k
        self.seq = itertools.count()
        self.eff_cpu = [0.0] * n  # min(usage, capacity); with reclaim, what the CPU shares grant
        self.be_eff = [0.0] * n  # of which BE pods (with reclaim)
        self.use_be = [0.0] * n  # BE pods' CPU demand (with reclaim)
        self.cap_cpu = [float(x) for x in cluster.cap_cpu]
        # Cluster-wide sums kept current as pods come and go (accounting integrates them over time).
        self.sum_eff_cpu = 0.0
        self.sum_be_eff = 0.0

    # --- one clock --------------------------------------------------------------------------------------------

    def clock_of(self, run: Run) -> int:
        """The clock a pod starting on its node progresses by (the BE clock for BE pods under reclaim)."""
        return run.node + self.cluster.size if self.rc is not None and run.spec.qos == QoS.BE else run.node

    def touch(self, clk: int, t: float) -> None:
        """Bring a clock (its virtual time, saturated time and slowdown integral) up to t before its state
        changes."""
        dt = t - self.node_t[clk]
        if dt > 0:
            self.clock[clk] += dt * self.speed[clk]
            if self.saturated[clk]:
                self.sat_cum[clk] += dt
            self.slow_cum[clk] += dt * self.slow[clk]
            self.node_t[clk] = t

    def join(self, run: Run) -> None:
        """A pod starts on its clock: its saturation and slowdown integrals count from now."""
        run.sat0 = self.sat_cum[run.clk]
        run.slow0 = self.slow_cum[run.clk]

    def leave(self, run: Run, t: float) -> None:
        """A pod's saturated time and slowdown integral up to t (it leaves its clock, or the run ends)."""
        self.touch(run.clk, t)
        run.sat_time += self.sat_cum[run.clk] - run.sat0
        run.slow_sum += self.slow_cum[run.clk] - run.slow0

    def add_demand(self, run: Run, cpu: float) -> None:
        """A BE pod's CPU demand joins (or, negative, leaves) its node's BE demand."""
        if run.clk >= self.cluster.size:
            self.use_be[run.node] += cpu

    def add_work(self, run: Run, work: float) -> bool:
        """A batch pod's completion target on its clock; True if it is now the clock's next completion."""
        heap = self.node_heap[run.clk]
        heapq.heappush(heap, (self.clock[run.clk] + work, next(self.seq), run, run.epoch))
        return heap[0][2] is run

    def progress(self, run: Run, t: float) -> float:
        """Seconds of work a running batch pod with a finite target has done."""
        self.touch(run.clk, t)
        target = next((e[0] for e in self.node_heap[run.clk] if e[2] is run and e[3] == run.epoch), None)
        return max(0.0, run.work - (target - self.clock[run.clk])) if target is not None else 0.0

    def due(self, clk: int, t: float, version: int) -> list[Run] | None:
        """The pods whose targets the clock reached by t (None: a stale event, the clock was re-planned)."""
        if version != self.node_ver[clk]:
            return None
        self.touch(clk, t)
        heap = self.node_heap[clk]
        clock = self.clock[clk]
        finished = []
        while heap and (heap[0][2].epoch != heap[0][3] or heap[0][0] <= clock + EPS * max(1.0, clock)):
            _, _, run, epoch = heapq.heappop(heap)
            if run.epoch == epoch:
                finished.append(run)
        return finished

    def plan(self, clk: int, t: float) -> None:
        heap = self.node_heap[clk]
        while heap and heap[0][2].epoch != heap[0][3]:
            heapq.heappop(heap)
        self.node_ver[clk] += 1
        if heap:
            when = t + max(0.0, heap[0][0] - self.clock[clk]) / self.speed[clk]
            self._plan_event(when, clk, self.node_ver[clk])

    # --- a node's sharing after its usage changed -------------------------------------------------------------

    def refresh(self, node: int, t: float, force: bool = False) -> None:
        """Recompute a node's speed and saturation after its usage changed; re-plan its next completion."""
        if self.rc is not None:
            self._refresh_shared(node, t, force)
            return
        use = float(self.cluster.use_cpu[node])
        cap = self.cap_cpu[node]
        eff = min(use, cap)
        self.sum_eff_cpu += eff - self.eff_cpu[node]
        self.eff_cpu[node] = eff
        self.saturated[node] = use > cap * (1 + 1e-9)
        self.slow[node] = 1.0 / (1.0 - min(eff / cap, RHO_MAX))
        speed = cap / use if use > cap else 1.0
        if speed != self.speed[node] or force:
            self.speed[node] = speed
            self.plan(node, t)

    def _refresh_shared(self, node: int, t: float, force: bool) -> None:
        """With reclaim: the node's CPU shared between its non-BE and BE pods (`cpu_shares`); both clocks move."""
        rc = self.rc
        assert rc is not None
        be = node + self.cluster.size
        self.touch(node, t)
        self.touch(be, t)
        d_be = self.use_be[node]
        d_ls = max(float(self.cluster.use_cpu[node]) - d_be, 0.0)
        share = cpu_shares(self.cap_cpu[node], d_ls, d_be, rc.suppress, self._crowd(node), min, max)
        ls_speed, be_speed, ls_alloc, be_alloc, slow = share
        eff = ls_alloc + be_alloc
        self.sum_eff_cpu += eff - self.eff_cpu[node]
        self.sum_be_eff += be_alloc - self.be_eff[node]
        self.eff_cpu[node] = eff
        self.be_eff[node] = be_alloc
        self.slow[node] = slow
        self.saturated[node] = slow > rc.ls_slowdown_target
        for clk, speed in ((node, ls_speed), (be, be_speed)):
            if speed != self.speed[clk] or force:
                self.speed[clk] = speed
                self.plan(clk, t)

    def _crowd(self, node: int) -> float:
        """Interference: 1 + the configured slowdown per co-running pod (Borg's CPI study: ~0.3% each)."""
        f = self.rc.interference  # type: ignore[union-attr]
        return 1.0 + f * max(int(self.cluster.pods[node]) - 1, 0) if f else 1.0

    # --- usage ticks ------------------------------------------------------------------------------------------

    def advance_all(self, t: float) -> None:
        """Bring every clock to t under the old usage (before a usage tick resamples it)."""
        dt = t - np.array(self.node_t)
        self.clock = (np.array(self.clock) + dt * np.array(self.speed)).tolist()
        self.sat_cum = (np.array(self.sat_cum) + np.where(self.saturated, dt, 0.0)).tolist()
        self.slow_cum = (np.array(self.slow_cum) + dt * np.array(self.slow)).tolist()
        self.node_t = [t] * len(self.node_t)

    def saturation(self) -> np.ndarray:
        """Without reclaim: pods on a node whose CPU demand exceeds its capacity progress at capacity / demand;
        returns the new speeds."""
        c = self.cluster
        cap = c.cap_cpu
        eff = np.minimum(c.use_cpu, cap)
        self.eff_cpu = eff.tolist()
        self.sum_eff_cpu = float(eff.sum())
        self.slow = ls_slowdown(eff / cap).tolist()
        saturated = c.use_cpu > cap * (1 + 1e-9)
        self.saturated = saturated.tolist()
        return np.where(saturated, cap / np.maximum(c.use_cpu, 1e-9), 1.0)

    def set_shares(self, s: Shares) -> np.ndarray:
        """With reclaim: the tick's sharing as drlsched.sim.qos computed it; returns the new speeds."""
        self.use_be = s.use_be.tolist()
        self.eff_cpu = s.eff.tolist()
        self.be_eff = s.be_eff.tolist()
        self.sum_eff_cpu = float(s.eff.sum())
        self.sum_be_eff = float(s.be_eff.sum())
        self.slow = s.slow.tolist()
        self.saturated = s.saturated.tolist()
        return s.speed

    def set_speeds(self, new_speed: np.ndarray, t: float) -> None:
        """Adopt a tick's speeds; re-plan the clocks whose speed changed and that have pods to finish."""
        changed = np.flatnonzero(new_speed != np.array(self.speed))
        self.speed = new_speed.tolist()
        for clk in changed:
            if self.node_heap[clk]:
                self.plan(int(clk), t)
