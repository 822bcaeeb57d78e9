"""Metric accounting: the run's Accumulator (drlsched.metrics), the gauges it integrates over time (memory and GPU
in use, CPU and GPU allocated, fragmentation), the sampled series and each LS pod's SLA."""

from __future__ import annotations

import numpy as np

from drlsched.cluster import Cluster, PodRequest
from drlsched.fragmentation import FragmentationTracker, ShapeCounter
from drlsched.metrics import Accumulator, Anomaly
from drlsched.sim.entities import Run
from drlsched.workload import PodSpec, QoS


class Accounting:
    def __init__(self, cluster: Cluster, shapes: ShapeCounter, duration_s: float, series: bool,
                 sla_saturated_fraction: float, sla_pending_s: float) -> None:
        self.cluster = cluster
        self.acc = Accumulator()
        self.frag = FragmentationTracker(cluster, shapes) if cluster.total_gpu_milli else None
        self.duration_s = duration_s
        self.series = series
        self.sla_saturated_fraction = sla_saturated_fraction
        self.sla_pending_s = sla_pending_s
        # Cluster-wide gauges kept current as pods come and go, integrated over time by `advance`.
        self.mem_now = 0.0
        self.gpu_now = 0.0
        self.req_cpu_now = 0
        self.gpu_alloc_now = 0
        self.window_cpu_s: float | None = None  # CPU used by the end of the arrival window

    # --- gauges -----------------------------------------------------------------------------------------------

    def advance(self, now: float, t: float, eff_cpu: float, be_eff: float) -> None:
        """Integrate the gauges from `now` to t (CPU granted: `eff_cpu`, of which to BE pods `be_eff`)."""
        dt = t - now
        if dt > 0 and self.acc.first_arrival is not None:
            a = self.acc
            a.cpu_use_s += eff_cpu * dt
            a.cpu_reclaimed_s += be_eff * dt
            a.mem_use_s += self.mem_now * dt
            a.gpu_use_s += self.gpu_now * dt
            a.cpu_alloc_s += self.req_cpu_now * dt
            a.gpu_alloc_s += self.gpu_alloc_now * dt
            if self.frag is not None:
                self.frag.integrate(a, dt)
            if self.window_cpu_s is None and t >= self.duration_s:
                # CPU used by the end of the arrival window: the steady state, without the drain.
                self.window_cpu_s = a.cpu_use_s - eff_cpu * (t - max(self.duration_s, now))

    def used(self, d_mem: float, d_gpu: float) -> None:
        """Memory (capped at capacity) and GPU in use changed."""
        self.mem_now += d_mem
        if d_gpu:
            self.gpu_now += d_gpu

    def resampled(self) -> None:
        """A usage tick set every node's usage."""
        c = self.cluster
        self.mem_now = float(np.minimum(c.use_mem, c.cap_mem).sum())
        self.gpu_now = float(c.use_gpu.sum())

    def allocated(self, node: int, r: PodRequest, sign: int) -> None:
        """A pod's request was allocated on (sign 1) or released from (−1) a node."""
        if self.frag is not None:
            self.frag.touch(node)
        self.req_cpu_now += sign * r.cpu
        self.gpu_alloc_now += sign * r.gpus * r.gpu_milli

    # --- pod events -------------------------------------------------------------------------------------------

    def arrived(self, t: float) -> None:
        a = self.acc
        a.pods_arrived += 1
        if a.first_arrival is None:
            a.first_arrival = t

    def unschedulable(self, msg: str, spec: PodSpec) -> None:
        self.acc.pods_unschedulable += 1
        self.acc.wait_start(spec.uid, spec.arrival_s)
        if len(self.acc.unschedulable_examples) < 5:
            self.acc.unschedulable_examples.append(msg)

    def queued(self, run: Run, t: float) -> None:
        """A pod entered the scheduling queue: its wait (unschedulable time) starts."""
        self.acc.wait_start(run.spec.uid, t)

    def bound(self, run: Run, t: float, first: bool) -> None:
        """A pod was bound (`first`: for the first time, it counts as scheduled)."""
        self.acc.wait_end(run.spec.uid, t)
        if first:
            self.acc.pods_scheduled += 1
            self.acc.pending.append(t - run.ready_t)
        if run.spec.qos == QoS.BE:
            self.acc.be_pending.append(t - run.ready_t)

    def started(self, run: Run, t: float) -> None:
        """A pod's first start: creation → running (no image pulls modelled), for the pod-startup SLO."""
        self.acc.started(run.spec.uid, t - run.ready_t)

    def finished(self, run: Run, t: float) -> None:
        a = self.acc
        a.pods_finished += 1
        a.finished(run.spec.uid)
        a.last_finish = max(a.last_finish, t)
        if run.spec.qos == QoS.LS:
            self.ls_life(run, t)

    def ls_life(self, run: Run, t: float) -> None:
        """An LS pod's SLA (saturated, or with reclaim too slow, for more than a share of its life; or pending too
        long) and its mean slowdown over its life."""
        a = self.acc
        a.ls_pods += 1
        life = t - run.start_t
        pend = run.bind_t - run.ready_t
        if run.sat_time > self.sla_saturated_fraction * life or pend > self.sla_pending_s:
            a.ls_violations += 1
            a.flag(run.spec.uid, Anomaly.SLA_BREACH)
        if life > 0:
            a.ls_slowdown.append(run.slow_sum / life)

    def job_done(self, jct: float) -> None:
        self.acc.jct.append(jct)

    def evicted(self, uid: str) -> None:
        self.acc.evictions += 1
        self.acc.flag(uid, Anomaly.EVICTED)

    def migrated(self, uid: str) -> None:
        self.acc.migrations += 1
        self.acc.flag(uid, Anomaly.PREEMPTED_OR_MIGRATED)

    def traffic(self, cross_node_mb: float, cross_rack_mb: float) -> None:
        self.acc.cross_node_mb += cross_node_mb
        self.acc.cross_rack_mb += cross_rack_mb

    # --- samples and the end ----------------------------------------------------------------------------------

    def sample(self, t: float, eff_cpu: float, pending: int, running: int) -> None:
        c, a = self.cluster, self.acc
        if self.series:
            frag = self.frag.ratio() if self.frag is not None else 0.0
            gcap = c.total_gpu_milli or 1
            a.series.append((t, eff_cpu / c.total_cpu, self.mem_now / c.total_mem,
                             self.gpu_now / gcap, self.req_cpu_now / c.total_cpu, self.gpu_alloc_now / gcap,
                             float(pending), float(running), frag))

    def close(self, now: float, stuck: int, active: bool) -> None:
        """The end: pods never placed, and the busy window (first arrival to the last completion, or to the end
        if pods are still `active`)."""
        a = self.acc
        a.pods_unschedulable += stuck
        # Pods still pending waited until the end; with nothing left running or starting, for ever.
        a.close_waits(now, forever=not active)
        if a.first_arrival is not None:
            end = now if active else a.last_finish
            a.busy_s = max(0.0, end - a.first_arrival)

    def window_util(self, now: float) -> float:
        """CPU used / capacity from the first arrival to the end of the arrival window (or of the run if sooner)."""
        a = self.acc
        if a.first_arrival is None:
            return 0.0
        used = self.window_cpu_s if self.window_cpu_s is not None else a.cpu_use_s
        span = min(self.duration_s, now) - a.first_arrival
        return used / (span * self.cluster.total_cpu) if span > 0 else 0.0
