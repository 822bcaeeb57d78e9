"""What the simulator replays: node specs and pod specs in arrival order.

Scenarios (synthetic, calibrated) and trace loaders both produce a `Workload`. Pods stream: `Workload.pods` may
be a generator, so a trace larger than memory replays without being loaded whole. Units are Kubernetes': CPU in
millicores, memory in MiB, GPU sharing in milli-GPU (1000 = one whole GPU).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from enum import IntEnum

from drlsched.errors import UserError
from drlsched.usage_trace import UsageSeries

GPU_MILLI = 1000


class QoS(IntEnum):
    """Latency-sensitive services are SLA-bound; batch pods trade latency for throughput."""

    LS = 0
    BURSTABLE = 1
    BE = 2

    @classmethod
    def parse(cls, text: str) -> QoS:
        key = text.strip().upper()
        aliases = {"LS": cls.LS, "GUARANTEED": cls.LS, "BURSTABLE": cls.BURSTABLE, "BE": cls.BE,
                   "BESTEFFORT": cls.BE, "BEST-EFFORT": cls.BE}
        if key not in aliases:
            raise ValueError(f"unknown QoS class {text!r} (expected LS, Burstable, BE or Guaranteed)")
        return aliases[key]


@dataclass(frozen=True, slots=True)
class NodeSpec:
    name: str
    cpu_m: int
    mem_mib: int
    gpus: int = 0
    gpu_model: str = ""
    rack: str = "rack-0"
    taints: tuple[str, ...] = ()  # NoSchedule taint keys; a pod must tolerate every one
    max_pods: int = 110

    def validate(self) -> None:
        if self.cpu_m <= 0 or self.mem_mib <= 0:
            raise UserError(f"node {self.name}: cpu and memory must be positive (got {self.cpu_m}m, "
                            f"{self.mem_mib}Mi)")
        if not 0 <= self.gpus <= 64:
            raise UserError(f"node {self.name}: GPU count {self.gpus} outside 0..64")
        if self.max_pods <= 0:
            raise UserError(f"node {self.name}: max_pods must be positive")


@dataclass(slots=True)
class PodSpec:
    """One pod to place.

    `work_s` is the run time at full speed for batch pods (contention stretches it) and the lifetime of
    long-running services (deleted at its end, never stretched). `None` means it runs until the horizon.
    A pod with `parents` is released only when every pod of those tasks (same job) has finished.
    """

    uid: str
    job_id: str
    arrival_s: float
    cpu_m: int
    mem_mib: int
    task: str = ""
    gpus: int = 0  # whole GPUs, or 1 with gpu_milli < 1000 for a shared GPU
    gpu_milli: int = 0  # per-GPU share; 1000 for whole GPUs
    gpu_models: tuple[str, ...] = ()  # allowed GPU models; empty = any
    qos: QoS = QoS.BURSTABLE
    priority: int = 0
    work_s: float | None = None
    service: bool = False  # long-running: lifetime, SLA-bound when LS
    usage_cpu: float = 0.6  # mean usage / request
    usage_cv: float = 0.2  # coefficient of variation of usage between ticks
    usage_mem: float = 0.7
    usage_gpu: float = 0.5
    shuffle_in_mb: float = 0.0  # read at start from the parent tasks' pods
    traffic_mbps: float = 0.0  # exchanged continuously with the job's other running pods
    parents: tuple[str, ...] = ()
    gpu_options: tuple[int, ...] = ()  # elastic: allowed GPU counts; the placement picks one
    elastic_speedup: float = 1.0  # speed with 2 GPUs relative to 1
    checkpointable: bool = False
    tolerations: tuple[str, ...] = ()
    startup_s: float | None = None  # fixed cold start; None draws from the simulator's distribution
    known_duration: bool = True  # whether a scheduler may look at work_s

    def validate(self) -> None:
        where = f"pod {self.uid}"
        if not math.isfinite(self.arrival_s) or self.arrival_s < 0:
            raise UserError(f"{where}: arrival time must be a finite non-negative number, got {self.arrival_s}")
        if self.cpu_m < 0 or self.mem_mib < 0:
            raise UserError(f"{where}: negative request ({self.cpu_m}m CPU, {self.mem_mib}Mi memory)")
        if self.gpus < 0 or self.gpus > 64:
            raise UserError(f"{where}: GPU count {self.gpus} outside 0..64")
        if self.gpus and not 0 < self.gpu_milli <= GPU_MILLI:
            raise UserError(f"{where}: gpu_milli {self.gpu_milli} outside 1..1000")
        if self.gpus > 1 and self.gpu_milli != GPU_MILLI:
            raise UserError(f"{where}: a pod with {self.gpus} GPUs must use whole GPUs (gpu_milli 1000)")
        if self.work_s is not None and (not math.isfinite(self.work_s) or self.work_s < 0):
            raise UserError(f"{where}: duration must be a finite non-negative number, got {self.work_s}")
        if any(g <= 0 for g in self.gpu_options):
            raise UserError(f"{where}: elastic GPU options must be positive, got {self.gpu_options}")


@dataclass
class Workload:
    """A cluster and the pods to replay on it, in non-decreasing arrival order."""

    name: str
    nodes: list[NodeSpec]
    pods: Iterable[PodSpec]
    duration_s: float  # arrivals span [0, duration_s); the simulation then drains
    # Multiplies the usage of service pods over time (diurnal load, bursts); None = constant 1.
    load_curve: Callable[[float], float] | None = None
    info: dict[str, object] = field(default_factory=dict)
    drain_s: float | None = None  # simulated time after the window; None = the simulator's default (10 × it)
    usage: UsageSeries | None = None  # real CPU usage series replayed onto LS pods (--usage-trace)

    def validate_nodes(self) -> None:
        if not self.nodes:
            raise UserError(f"workload {self.name}: the cluster has no nodes")
        seen: set[str] = set()
        for node in self.nodes:
            node.validate()
            if node.name in seen:
                raise UserError(f"workload {self.name}: duplicate node name {node.name}")
            seen.add(node.name)

    def iter_pods(self) -> Iterator[PodSpec]:
        """Pods in arrival order, each validated; out-of-order input is an error, not a silent reorder."""
        last = -math.inf
        for pod in self.pods:
            pod.validate()
            if pod.arrival_s < last:
                raise UserError(f"workload {self.name}: pod {pod.uid} arrives at {pod.arrival_s}s, before the "
                                f"previous pod ({last}s); pods must be in arrival order")
            last = pod.arrival_s
            yield pod
