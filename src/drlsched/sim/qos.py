"""QoS enforcement on reclaimed resources (--reclaim): what the reclaim model sees (the usage window, Borg
reservations, per-pod history, forecasts), the batch allocatable it sets every `period_s`, the CPU shares of
non-BE and BE pods at usage ticks (suppression) and Koordinator's BE evictions (drlsched.reclaim has the models).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from drlsched.cluster import Cluster
from drlsched.policies.base import ReclaimSignals
from drlsched.reclaim import NodeForecast, ReclaimConfig, UsageWindow, batch_allocatable, borg_reservations, cpu_shares
from drlsched.sim.columns import SlotColumns
from drlsched.sim.config import INF
from drlsched.sim.entities import Run
from drlsched.sim.ports import Shares, SlotView
from drlsched.workload import QoS


class QoSEnforcer(SlotColumns):
    def __init__(self, rc: ReclaimConfig, cluster: Cluster, tick_s: float, cap: int = 1024) -> None:
        self.rc = rc
        self.cluster = cluster
        n = cluster.size
        # Per running pod: BE or not, requests (cpu, mem), start time, Borg reservation, CPU usage history.
        self.hist_w = max(1, math.ceil(rc.window_s / tick_s))
        self.s_be = np.zeros(cap, dtype=bool)
        self.s_req = np.zeros((cap, 2))
        self.s_start = np.zeros(cap)
        self.s_resv = np.zeros((cap, 2))
        self.s_hist = np.zeros((cap, self.hist_w))
        self.slot_arrays = ["s_be", "s_req", "s_start", "s_resv", "s_hist"]
        self.window = UsageWindow(n, self.hist_w)
        self.forecast = NodeForecast(rc, n, tick_s) if rc.model == "forecast" else None
        self.hist_i = 0
        self.reclaim_t = rc.period_s  # batch allocatable is 0 until the first usage report
        self.resv_t = 0.0
        self.low_since = np.full(n, INF)  # since when BE CPU satisfaction has been low, per node
        self.satisfaction = np.ones(n)
        self.node_evictions = np.zeros(n)

    def start(self, run: Run, t: float) -> None:
        """A pod's rows: its requests, start time, reservation (its limit at first) and history."""
        i, r = run.slot, run.req
        assert r is not None
        self.s_be[i] = run.spec.qos == QoS.BE
        self.s_req[i] = (r.cpu, r.mem)
        self.s_start[i] = t
        self.s_resv[i] = (r.cpu, r.mem)
        self.s_hist[i] = r.cpu  # the peak predictor starts from the request

    def signals(self, use_be: list[float]) -> ReclaimSignals:
        """What a policy that asks for them sees (`wants_reclaim_signals`)."""
        return ReclaimSignals(np.maximum(self.cluster.use_cpu - np.asarray(use_be), 0.0),
                              np.minimum(self.satisfaction, 1.0), self.node_evictions.copy())

    def tick(self, t: float, slots: SlotView) -> tuple[Shares, list[int]]:
        """CPU shares on every node, the reclaim model's usage window and Borg reservations, and every `period_s`
        the batch allocatable; returns the shares and the nodes where room for BE pods grew."""
        c, rc = self.cluster, self.rc
        size, n = c.size, len(slots)
        be = self.s_be[:n]
        nodes = slots.nodes()
        use = slots.use()
        use_be = np.bincount(nodes, weights=use[:, 0] * be, minlength=size)
        d_ls = np.maximum(c.use_cpu - use_be, 0.0)
        crowd = 1.0 + rc.interference * np.maximum(c.pods - 1, 0)
        ls_speed, be_speed, ls_alloc, be_alloc, slow = cpu_shares(c.cap_cpu, d_ls, use_be, rc.suppress, crowd,
                                                                  np.minimum, np.maximum)
        shares = Shares(np.concatenate([ls_speed, be_speed]), ls_alloc + be_alloc, be_alloc,
                        np.concatenate([slow, np.ones(size)]),
                        np.concatenate([slow > rc.ls_slowdown_target, np.zeros(size, dtype=bool)]), use_be)
        # What the reclaim model sees: the non-BE pods' usage per node and per pod.
        hp = ~be
        hp_mem = np.bincount(nodes, weights=use[:, 1] * hp, minlength=size)
        self.window.add(d_ls, hp_mem)
        if self.forecast is not None:
            self.forecast.add(d_ls, hp_mem)
        self.s_hist[:n, self.hist_i] = use[:, 0]
        self.hist_i = (self.hist_i + 1) % self.hist_w
        if rc.model == "borg":
            self.s_resv[:n] = borg_reservations(rc, self.s_resv[:n], self.s_req[:n], use[:, :2], t - self.s_start[:n],
                                                t - self.resv_t)
            self.resv_t = t
        grew: list[int] = []
        if t >= self.reclaim_t:
            self.reclaim_t = t + rc.period_s
            free0 = c.batch_cpu - c.be_cpu, c.batch_mem - c.be_mem
            c.batch_cpu, c.batch_mem = batch_allocatable(rc, c.cap_cpu, c.cap_mem, self.window, nodes[hp],
                                                         self.s_resv[:n][hp], self.s_hist[:n][hp], self.forecast)
            # Room for BE pods grew on these nodes: parked BE pods may fit there now (the queueing hint).
            grew = np.flatnonzero((c.batch_cpu - c.be_cpu > free0[0]) | (c.batch_mem - c.be_mem > free0[1])).tolist()
        # Koordinator's CPU eviction: BE satisfaction (what suppression grants / BE requests) low while BE pods
        # use what they are granted, for long enough.
        be_lim = np.maximum(c.cap_cpu * rc.suppress - ls_alloc, 0.0)
        satisfaction = be_lim / np.maximum(c.be_cpu, 1)
        low = (c.be_cpu > 0) & (satisfaction < rc.evict_cpu_satisfaction) & (be_alloc >= 0.9 * be_lim)
        self.low_since = np.where(low, np.minimum(self.low_since, t), INF)
        self.satisfaction = satisfaction
        return shares, grew

    def evict(self, t: float, slots: SlotView, evict: Callable[[Run, float], None]) -> None:
        """Koordinator's BE evictions: on a node above the memory threshold, BE pods by memory use (largest
        first) until under it; on a node whose BE satisfaction stayed low for the window, BE pods by CPU use until
        (target − satisfaction) × BE requests of CPU are freed. `evict` takes each pod off (back to the queue)."""
        c, rc = self.cluster, self.rc
        mem_over = c.use_mem - rc.evict_mem_threshold * c.cap_mem
        cpu_fire = t - self.low_since >= rc.evict_cpu_window_s
        hot = np.flatnonzero(((mem_over > 0) | cpu_fire) & (c.be_cpu > 0))
        if not hot.size:
            return
        for node in hot.tolist():
            n = len(slots)  # evictions on the previous node moved slots
            use = slots.use()
            mine = np.flatnonzero(self.s_be[:n] & (slots.nodes() == node))
            if mem_over[node] > 0:
                col, need = 1, mem_over[node]
            else:
                col, need = 0, (rc.evict_cpu_target - self.satisfaction[node]) * c.be_cpu[node]
                self.low_since[node] = INF
            order = mine[np.argsort(-use[mine, col], kind="stable")]
            amount = use[order, col] if col else self.s_req[order, 0]
            k = int(np.searchsorted(np.cumsum(amount), need)) + 1
            for run in [slots.run(i) for i in order[:k].tolist()]:
                self.node_evictions[run.node] += 1
                evict(run, t)
