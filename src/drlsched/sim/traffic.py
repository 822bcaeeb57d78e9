"""The network as the pods see it: shuffle reads over shared links at start (drlsched.network times them) and
service traffic between a job's running pods, cross-node in proportion to the share of those on other nodes."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from drlsched.network import Network
from drlsched.sim.entities import Run, SimJob


class Traffic:
    def __init__(self, rack: np.ndarray, nic_gbps: float, rack_oversubscription: float, share_links: bool,
                 count: Callable[[float, float], None]) -> None:
        """`count(cross_node_mb, cross_rack_mb)` hears every byte counted."""
        self.net = Network(rack, nic_gbps, rack_oversubscription, share_links)
        self.rack = rack
        self.count = count

    def shuffle_read(self, run: Run, t: float) -> float:
        """Seconds the pod's shuffle read takes (the links' shares at t); counts its cross-node and cross-rack MB."""
        spec = run.spec
        if spec.shuffle_in_mb <= 0:
            return 0.0
        sources: list[int] = []
        for p in spec.parents:
            info = run.job.tasks.get(p)
            if info:
                sources.extend(info.nodes)
        if not spec.parents:
            sources = run.job.tasks[spec.task].nodes
        seconds, remote_mb, cross_mb = self.net.read(t, run.node, sources, spec.shuffle_in_mb)
        self.count(remote_mb, cross_mb)
        return seconds

    def place(self, job: SimJob, node: int, t: float) -> None:
        """One more of the job's pods bound to `node` (its spread changes: traffic so far is counted first)."""
        self.account(job, t)
        job.placed[node] += 1
        job.racks[int(self.rack[node])] += 1

    def unplace(self, run: Run, t: float) -> None:
        """A pod leaves its node: its service traffic stops."""
        job = run.job
        self.account(job, t)
        job.talkers.pop(run, None)
        job.placed[run.node] -= 1
        job.racks[int(self.rack[run.node])] -= 1

    def talk(self, run: Run, t: float) -> None:
        """A started pod with service traffic exchanges it from now on."""
        if run.spec.traffic_mbps > 0:
            run.traffic_t = t
            run.job.talkers[run] = None

    def account(self, job: SimJob, t: float) -> None:
        """Service traffic of the job's running pods up to t, at the job's spread over nodes and racks since the
        last accounting; called before every change of that spread, so the integral is exact."""
        others = sum(job.placed.values()) - 1
        for run in job.talkers:
            dt, run.traffic_t = t - run.traffic_t, t
            if others <= 0 or dt <= 0:
                continue
            remote = (others + 1 - job.placed[run.node]) / others
            remote_rack = (others + 1 - job.racks[int(self.rack[run.node])]) / others
            mb = run.spec.traffic_mbps * dt / 8.0
            self.count(mb * remote, mb * remote_rack)

    def summary(self) -> dict[str, float]:
        return self.net.summary()
