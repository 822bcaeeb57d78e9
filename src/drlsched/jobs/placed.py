"""The job engine on a cluster of nodes: executors are pods that a placement policy (`--policy`) places, and a
task's shuffle read crosses the network (docs/simulator.md "Executors on nodes").

Each new executor is one pod (the job's executor shape) shown to the placement policy through the same
`PodContext` as in the pod simulator: its job's executors per node (`job_nodes`) and, for policies that want
them, where the outputs of the parents of the stage it will serve lie (`data_nodes`); it is bound on the chosen
node and releases its room when it leaves the job. A task of a stage with parents first reads its share of the
stage's shuffle from the nodes where its parent stages' tasks ran (shuffle outputs outlive their executors, as
with Spark's external shuffle service): `drlsched.network` times the read over the NICs and rack uplinks it
crosses, shared with the reads active there, and counts the bytes crossing nodes and racks.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import numpy as np

from drlsched.cluster import Cluster, PodRequest
from drlsched.jobs.engine import EngineConfig, JobEngine
from drlsched.jobs.model import Executor, Job, JobArrival
from drlsched.jobs.policies import JobPolicy
from drlsched.network import Network
from drlsched.policies.base import Policy
from drlsched.sched.cycle import decide, pod_context
from drlsched.workload import NodeSpec, PodSpec, QoS


class PlacedJobEngine(JobEngine):
    def __init__(self, arrivals: Sequence[JobArrival], policy: JobPolicy, config: EngineConfig, seed: int,
                 nodes: list[NodeSpec], placement: Policy, nic_gbps: float = 10.0,
                 rack_oversubscription: float = 1.0) -> None:
        super().__init__(arrivals, policy, config, seed)
        for a in self.arrivals:
            if any(st.io_s > 0 and st.shuffle_mb > 0 for st in a.spec.stages):
                raise ValueError(f"job {a.spec.name}: a stage with both the I/O model and a shuffle read")
        self.cluster = Cluster(nodes)
        self.placement = placement
        placement.reset(self.cluster, np.random.default_rng(np.random.SeedSequence([seed, 0x9ACE])))
        self.net = Network(self.cluster.rack, nic_gbps, rack_oversubscription)
        self.job_nodes: dict[int, Counter[int]] = {}  # job → node → its executors there
        self.outputs: dict[tuple[int, int], list[int]] = {}  # (job, stage) → the node of each of its tasks
        self.sources: dict[tuple[int, int], list[int]] = {}  # (job, stage) → its parents' task nodes
        self.requests: dict[int, tuple[PodSpec, PodRequest]] = {}  # job → its executor pod and request
        self.cross_node_mb = 0.0
        self.cross_rack_mb = 0.0

    def _request(self, job: Job) -> tuple[PodSpec, PodRequest]:
        got = self.requests.get(job.ident)
        if got is None:
            spec = PodSpec(uid=f"{job.spec.name}-executor", job_id=str(job.ident), task="executor",
                           arrival_s=job.arrival_s, cpu_m=job.spec.executor_cpu_m, mem_mib=job.spec.executor_mem_mib,
                           qos=QoS.BURSTABLE, work_s=None)
            got = self.requests[job.ident] = (spec, self.cluster.request(spec))
        return got

    def _place(self, ex: Executor, job: Job, t: float) -> bool:
        spec, request = self._request(job)
        stage = job.runnable[0] if job.runnable else None
        parents = job.spec.stages[stage].parents if stage is not None else ()
        if parents:  # the stage it will serve first: its data lies where its parents ran (data-local)
            spec.parents = tuple(f"stage-{p}" for p in parents)
        else:
            spec.parents = ()
        nodes = self.job_nodes.setdefault(job.ident, Counter())
        ctx = pod_context(spec, self.cluster, t, job_nodes=nodes, default_request=request,
                          policy=self.placement,
                          data_nodes=lambda: dict(Counter(self._parent_nodes(job.ident, stage))))
        decision = decide(self.placement, ctx)
        if decision is None:
            return False
        ex.node = decision.node
        self.cluster.allocate(decision.node, request, ())
        nodes[decision.node] += 1
        return True

    def _parent_nodes(self, job: int, stage: int | None) -> list[int]:
        """Where the outputs of a stage's parents lie: one node per parent task (cached once they are done)."""
        if stage is None:
            return []
        key = (job, stage)
        got = self.sources.get(key)
        if got is None:
            got = []
            for p in self.jobs[job].spec.stages[stage].parents:
                got.extend(self.outputs.get((job, p), ()))
            self.sources[key] = got
        return got

    def _unplace(self, ex: Executor, job_id: int) -> None:
        self.cluster.release(ex.node, self.requests[job_id][1], ())
        self.job_nodes[job_id][ex.node] -= 1
        ex.node = -1

    def _release(self, ex: Executor, job: Job, t: float) -> None:
        self._unplace(ex, job.ident)
        super()._release(ex, job, t)

    def _ready(self, ex: Executor, t: float) -> None:
        if ex.job not in self.jobs:  # its job finished during the cold start: the pod ends unused
            self._unplace(ex, ex.job)
        super()._ready(ex, t)

    def _task_start(self, ex: Executor, job: Job, s: int, t: float) -> float:
        self.outputs.setdefault((job.ident, s), []).append(ex.node)
        st = job.spec.stages[s]
        if st.shuffle_mb <= 0 or not st.parents:
            return 0.0
        seconds, remote_mb, cross_mb = self.net.read(t, ex.node, self._parent_nodes(job.ident, s),
                                                     st.shuffle_mb / st.tasks)
        self.cross_node_mb += remote_mb
        self.cross_rack_mb += cross_mb
        return seconds

    def _finish(self, job: Job, t: float) -> None:
        super()._finish(job, t)
        for i in range(len(job.stages)):
            self.outputs.pop((job.ident, i), None)
            self.sources.pop((job.ident, i), None)

    def network_summary(self) -> dict[str, float]:
        """Cross-node and cross-rack shuffle bytes (GB), and the network's wait and slowdown (drlsched.network)."""
        return {"cross_node_traffic_gb": self.cross_node_mb / 1000.0,
                "cross_rack_traffic_gb": self.cross_rack_mb / 1000.0, **self.net.summary()}
