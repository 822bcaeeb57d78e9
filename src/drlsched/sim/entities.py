"""The simulated things, apart from the timeline and the rooms: a job and a pod's run (spark-sched-sim keeps its
entities apart from its timeline the same way). Rooms write the fields of a run that belong to their concern
(named beside each field)."""

from __future__ import annotations

from collections import Counter

from drlsched.cluster import PodRequest
from drlsched.sched.jobs import Job
from drlsched.sched.queue import Entry
from drlsched.sim.config import INF
from drlsched.workload import PodSpec

# Pod states.
WAITING, PENDING, STARTING, RUNNING, DONE = range(5)


class SimJob(Job["Run"]):
    __slots__ = ("done", "last_done", "placed", "racks", "service", "submit", "talkers", "total", "unplaceable")

    def __init__(self, submit: float) -> None:
        super().__init__()
        self.submit = submit
        self.total = 0
        self.done = 0
        self.last_done = submit
        self.placed: Counter[int] = Counter()  # node -> this job's bound pods (traffic)
        self.racks: Counter[int] = Counter()
        self.talkers: dict[Run, None] = {}  # running pods with service traffic (ordered: deterministic sums)
        self.unplaceable = False
        self.service = False  # has long-running pods: not a job that finishes, left out of the JCT


class Run:
    __slots__ = ("bind_t", "clk", "entry", "epoch", "gpu_ids", "gpus", "hint", "job", "node", "ready_t", "req",
                 "sat0", "sat_time", "series", "service_end", "slot", "slow0", "slow_sum", "spec", "start_t",
                 "startup", "state", "traffic_t", "work")

    def __init__(self, spec: PodSpec, job: SimJob, startup: float) -> None:
        self.spec = spec
        self.job = job
        self.startup = startup  # admission; relocation redraws it on a restart
        self.ready_t = spec.arrival_s  # cycle
        self.entry: Entry[Run] | None = None  # cycle: while in the scheduling queue
        self.hint: tuple[int, ...] = ()  # admission: its queueing-hint row (the least demanding option's request)
        self.bind_t = -1.0  # runtime
        self.start_t = -1.0
        self.node = -1
        self.clk = -1  # its progress clock: its node's, or with reclaim its node's BE clock (node + nodes) for BE
        self.gpu_ids: tuple[int, ...] = ()
        self.gpus = spec.gpus
        self.req: PodRequest | None = None
        self.state = WAITING
        self.epoch = 0  # bumped when it leaves a node: its pending events are stale
        self.slot = -1  # slots
        self.sat0 = 0.0  # clocks
        self.sat_time = 0.0
        self.slow0 = 0.0
        self.slow_sum = 0.0  # ∫ slowdown dt while running (LS latency relative to an idle node)
        self.series = -1  # usage: the real usage series driving its CPU (--usage-trace), -1 = none
        self.work = 0.0  # runtime; relocation on a restart
        self.service_end = INF
        self.traffic_t = 0.0  # traffic: service traffic is accounted up to here
