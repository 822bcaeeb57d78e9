"""The observation a learned policy sees, built from a `PodContext` alone.

Training (the env) and deployment (`LearnedPolicy`) share this builder, so a policy sees exactly what it was
trained on. Everything here is a function of the pod context and of the contexts seen before it in the same run:
a policy is not shown simulator internals (pending queue, SLA counters) that a real scheduler plugin lacks.

Shapes (N nodes, G option slots, T history length):
- `history`  float32[T, H]: one snapshot of cluster metrics per decision, oldest first, zero-padded at the start;
- `nodes`    float32[N, F_NODE]: per-node state;
- `options`  float32[N, G, F_OPT]: per node and GPU-count option: feasibility and what would be left after placing;
- `pod`      float32[F_POD]: the pod to place;
- `action_mask` int8[N * G + 1]: 1 where (node, option) is feasible; action a = node * G + option slot; the last
  action (N * G, `hold_action`) is the hold: leave the pod pending for now, valid for BE pods under a reclaim model
  only (the admission decision; the simulator retries a held pod after the next cluster event, with backoff).

Reclaim features (zero when no reclaim model is on, or outside the simulator: `PodContext.reclaim` is None):
per node `nodes[:, 18:26]` = LS CPU usage / capacity, its trend (usage minus a 60-s moving average, / capacity),
reclaimable CPU and memory room (batch allocatable − BE batch requests, / capacity), BE batch-CPU requests /
capacity, BE throttling (1 − BE CPU satisfaction), log1p(evictions on the node) and recent evictions (a 60-s decayed
count). The history snapshot (one per decision, `history[t, :]`) carries, besides cluster utilisation and the
decision rate, the signals that precede bursts: mean and max LS usage and trend, mean reclaimable room, mean
throttling, evictions since the last decision, and the job arrival rate (new jobs per minute, 60-s average).

Bump `OBS_SPEC_VERSION` whenever a feature changes meaning or position: checkpoints record it and loading refuses
a mismatch.
"""

from __future__ import annotations

import math
from collections import deque

import numpy as np

from drlsched.cluster import Cluster
from drlsched.policies.base import Decision, PodContext, per_node
from drlsched.workload import GPU_MILLI, QoS

OBS_SPEC_VERSION = 3
MAX_OPTIONS = 3  # GPU-count option slots per node: the default count first, then elastic alternatives
HISTORY = 16
F_NODE = 26
F_OPT = 7
F_POD = 16
F_HIST = 21
TREND_S = 60.0  # time constant of the moving averages behind the trend, eviction and arrival-rate features


def hold_action(n_nodes: int) -> int:
    """The index of the hold action (the last one) for a cluster of `n_nodes`."""
    return n_nodes * MAX_OPTIONS


class ObsBuilder:
    """Turns successive pod contexts of one run into observations (keeps the metric history)."""

    def __init__(self, history: int = HISTORY) -> None:
        self.history = history
        self.cluster: Cluster | None = None
        self.snaps: deque[np.ndarray] = deque(maxlen=history)
        self.last_now = 0.0
        self.same_instant = 0
        self.dt_ema = 1.0

    def reset(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.snaps.clear()
        self.last_now = 0.0
        self.same_instant = 0
        self.dt_ema = 1.0
        c = cluster
        self.cap_cpu = c.cap_cpu.astype(np.float64)
        self.cap_mem = c.cap_mem.astype(np.float64)
        self.has_gpu = c.gpu_count > 0
        self.gpu_den = np.maximum(c.gpu_count, 1).astype(np.float64)
        self.gpu_cap_den = np.maximum(c.cap_gpu_milli, 1).astype(np.float64)
        self.size_cpu = self.cap_cpu / self.cap_cpu.max()
        self.size_mem = self.cap_mem / self.cap_mem.max()
        self.mean_cpu = float(self.cap_cpu.mean())
        self.mean_mem = float(self.cap_mem.mean())
        self.rack = c.rack
        self.n_racks = int(c.rack.max()) + 1
        n = c.size
        self.ls_ema = np.zeros(n)
        self.evict_last = np.zeros(n)
        self.evict_ema = np.zeros(n)
        self.jobs_seen: set[str] = set()
        self.arrival_ema = 0.0  # new jobs per second
        self.evict_sum = 0.0

    def observe(self, ctx: PodContext) -> dict[str, np.ndarray]:
        """The observation for this decision; also records its history snapshot (call once per context)."""
        c = ctx.cluster
        if c is not self.cluster:
            self.reset(c)
        dt = max(0.0, ctx.now - self.last_now)
        nodes = self._nodes(ctx, dt)
        self._push_snapshot(ctx, nodes, dt)
        options, mask = self._options(ctx)
        hist = np.zeros((self.history, F_HIST), dtype=np.float32)
        if self.snaps:
            hist[self.history - len(self.snaps):] = np.stack(self.snaps)
        return {"history": hist, "nodes": nodes, "options": options, "pod": self._pod(ctx),
                "action_mask": mask}

    # --- parts ----------------------------------------------------------------------------------------------

    def _nodes(self, ctx: PodContext, dt: float) -> np.ndarray:
        c = ctx.cluster
        n = c.size
        f = np.empty((n, F_NODE), dtype=np.float32)
        f[:, 0] = (self.cap_cpu - c.req_cpu) / self.cap_cpu
        f[:, 1] = (self.cap_mem - c.req_mem) / self.cap_mem
        f[:, 2] = np.minimum(c.use_cpu / self.cap_cpu, 2.0)
        f[:, 3] = np.minimum(c.use_mem / self.cap_mem, 2.0)
        f[:, 4] = self.has_gpu
        f[:, 5] = c.full_free_gpus / self.gpu_den
        f[:, 6] = c.max_gpu_free / GPU_MILLI
        f[:, 7] = c.use_gpu / self.gpu_cap_den
        f[:, 8] = c.pods / c.max_pods
        f[:, 9] = c.starting_cpu / self.cap_cpu
        f[:, 10] = self.size_cpu
        f[:, 11] = self.size_mem
        # Co-location with the pod's job: pods on the node, and the job's share in the node's rack.
        job_here = per_node(ctx.job_nodes, n)
        total = job_here.sum()
        f[:, 12] = np.log1p(job_here)
        if total:
            per_rack = np.bincount(self.rack, weights=job_here, minlength=self.n_racks)
            f[:, 13] = per_rack[self.rack] / total
        else:
            f[:, 13] = 0.0
        f[:, 14] = c.use_cpu > self.cap_cpu
        # GPU capacity free but stranded on partly used GPUs (fragmentation), as a share of the node's GPUs.
        f[:, 15] = (c.gpu_free.sum(axis=1) - c.full_free_gpus * GPU_MILLI) / self.gpu_cap_den
        # Data locality: where the pod's shuffle input lives (finished parent-task pods per node). A read from
        # the node itself is free; from anywhere else it is cross-node traffic.
        data_here = per_node(ctx.data_nodes, n)
        data_total = data_here.sum()
        f[:, 16] = np.log1p(data_here)
        f[:, 17] = data_here / data_total if data_total else 0.0
        self._reclaim_nodes(ctx, dt, f[:, 18:])
        return f

    def _reclaim_nodes(self, ctx: PodContext, dt: float, f: np.ndarray) -> None:
        """Per-node reclaim features into f[:, 0:8] (see the module docstring); zero without signals."""
        sig = ctx.reclaim
        if sig is None:
            f[:] = 0.0
            return
        c = ctx.cluster
        decay = 1.0 - math.exp(-dt / TREND_S)
        ls = sig.ls_cpu / self.cap_cpu
        self.ls_ema += decay * (ls - self.ls_ema)
        new_evictions = sig.evictions - self.evict_last
        self.evict_last = sig.evictions.copy()
        self.evict_ema = self.evict_ema * (1.0 - decay) + new_evictions
        f[:, 0] = np.minimum(ls, 2.0)
        f[:, 1] = np.clip(ls - self.ls_ema, -1.0, 1.0)
        f[:, 2] = (c.batch_cpu - c.be_cpu) / self.cap_cpu
        f[:, 3] = (c.batch_mem - c.be_mem) / self.cap_mem
        f[:, 4] = c.be_cpu / self.cap_cpu
        f[:, 5] = 1.0 - sig.be_satisfaction
        f[:, 6] = np.log1p(sig.evictions)
        f[:, 7] = np.log1p(self.evict_ema)

    def _options(self, ctx: PodContext) -> tuple[np.ndarray, np.ndarray]:
        c = ctx.cluster
        n = c.size
        opt = np.zeros((n, MAX_OPTIONS, F_OPT), dtype=np.float32)
        mask = np.zeros((n, MAX_OPTIONS), dtype=np.int8)
        for k, o in enumerate(ctx.options[:MAX_OPTIONS]):
            r = o.request
            feas = o.feasible
            mask[:, k] = feas
            opt[:, k, 0] = feas
            opt[:, k, 1] = 1.0
            opt[:, k, 2] = o.gpus / 4.0
            opt[:, k, 3] = np.where(feas, (self.cap_cpu - c.req_cpu - r.cpu) / self.cap_cpu, 0.0)
            opt[:, k, 4] = np.where(feas, (self.cap_mem - c.req_mem - r.mem) / self.cap_mem, 0.0)
            if r.gpus and r.gpu_milli >= GPU_MILLI:
                opt[:, k, 5] = np.where(feas, (c.full_free_gpus - r.gpus) / self.gpu_den, 0.0)
            elif r.gpus:
                opt[:, k, 5] = np.where(feas, (c.max_gpu_free - r.gpu_milli) / GPU_MILLI, 0.0)
            opt[:, k, 6] = k == 0
        hold = ctx.reclaim is not None and ctx.pod.qos == QoS.BE
        return opt, np.append(mask.reshape(-1), np.int8(hold))

    def _pod(self, ctx: PodContext) -> np.ndarray:
        p = ctx.pod
        f = np.zeros(F_POD, dtype=np.float32)
        f[0] = p.cpu_m / self.mean_cpu
        f[1] = p.mem_mib / self.mean_mem
        f[2] = p.gpus / 4.0
        f[3] = (p.gpu_milli if p.gpus else 0) / GPU_MILLI
        f[4 + int(p.qos)] = 1.0  # one-hot QoS over LS, Burstable, BE
        f[7] = p.service
        if p.known_duration and p.work_s is not None:
            f[8] = 1.0
            f[9] = math.log1p(p.work_s) / 10.0
        f[10] = math.log1p(p.traffic_mbps) / 5.0
        f[11] = math.log1p(p.shuffle_in_mb) / 5.0
        f[12] = bool(p.parents)
        f[13] = math.log1p(sum(ctx.job_nodes.values())) / 3.0
        f[14] = len(ctx.options) / MAX_OPTIONS
        f[15] = p.qos == QoS.LS and p.service
        return f

    def _push_snapshot(self, ctx: PodContext, nodes: np.ndarray, dt: float) -> None:
        if ctx.pod.job_id not in self.jobs_seen:  # a job's first pod: the job arrived (about) now
            self.jobs_seen.add(ctx.pod.job_id)
            self.arrival_ema += 1.0 / TREND_S
        self.arrival_ema *= math.exp(-dt / TREND_S)
        if dt == 0.0:
            self.same_instant += 1
        else:
            self.same_instant = 0
            self.dt_ema = 0.9 * self.dt_ema + 0.1 * dt
        self.last_now = ctx.now
        c = ctx.cluster
        alloc_cpu = 1.0 - nodes[:, 0]
        s = np.empty(F_HIST, dtype=np.float32)
        s[0] = nodes[:, 2].mean()
        s[1] = nodes[:, 2].max()
        s[2] = nodes[:, 3].mean()
        s[3] = c.use_gpu.sum() / max(c.total_gpu_milli, 1)
        s[4] = alloc_cpu.mean()
        s[5] = alloc_cpu.max()
        s[6] = 1.0 - nodes[:, 1].mean()
        s[7] = c.used_gpu_milli.sum() / max(c.total_gpu_milli, 1)
        s[8] = nodes[:, 14].mean()
        s[9] = nodes[:, 8].mean()
        s[10] = math.log1p(dt)
        s[11] = math.log1p(self.same_instant) / 3.0  # a burst of decisions at one instant: a queue building up
        s[12] = -math.log(self.dt_ema + 1e-3) / 5.0  # decision rate
        r = nodes[:, 18:]
        s[13] = r[:, 0].mean()
        s[14] = r[:, 0].max()
        s[15] = r[:, 1].mean()
        s[16] = r[:, 1].max()
        s[17] = r[:, 2].mean()
        s[18] = r[:, 5].mean()
        evicted = float(ctx.reclaim.evictions.sum()) if ctx.reclaim is not None else 0.0
        s[19] = math.log1p(evicted - self.evict_sum)
        self.evict_sum = evicted
        s[20] = math.log1p(60.0 * self.arrival_ema) / 3.0
        self.snaps.append(s)


def decision_for(action: int, ctx: PodContext) -> Decision | None:
    """The simulator decision for a flattened action index (node * MAX_OPTIONS + option slot); None for the hold
    action (the pod stays pending)."""
    if action == hold_action(ctx.cluster.size):
        return None
    node, slot = divmod(int(action), MAX_OPTIONS)
    return Decision(node, ctx.options[slot].gpus)


def action_for(decision: Decision | None, ctx: PodContext) -> int:
    """Inverse of `decision_for` (for behaviour cloning from a baseline's decisions)."""
    if decision is None:
        return hold_action(ctx.cluster.size)
    slot = next(k for k, o in enumerate(ctx.options[:MAX_OPTIONS]) if o.gpus == decision.gpus)
    return decision.node * MAX_OPTIONS + slot
