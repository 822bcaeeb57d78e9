"""A Deployment-like service: replicas of one pod template sharing a request rate, and what the rate does to them.

- **Load.** The service's request rate (a `LoadCurve`) is spread evenly over its ready replicas (a round-robin
  Service); each replica's CPU demand is its share × `cpu_per_rps_m`.
- **CPU.** A replica requests `request_m` and may burst to `limit_ratio` × that (a Burstable pod, limit 2× request
  by default: a modelling choice). On its node the service's busy replicas share the CPU in proportion to their
  requests (CFS cpu.shares follow requests), so a replica can use min(limit, capacity × request / Σ requests of the
  service's replicas there); placeholder pods (pause containers) use none. Its measured usage, what metrics-server
  sees, is min(demand, that).
- **Latency and SLA**, the simulator's definitions (docs/simulator.md "LS slowdown", "SLA"): a replica's slowdown is
  `drlsched.reclaim.ls_slowdown` of its utilisation ρ = demand / the CPU it can use (M/M/1, ρ capped at 0.95: 20×),
  and a request violates its SLA when it is served at a slowdown above `ls_slowdown_target` (4×, ReclaimConfig's
  default) or finds no ready replica (counted at the saturated slowdown, 20×). The SLA rate is request-weighted.
- **Readiness** = scheduling + image pull + container start + application warm-up (`Startup`):
  - scheduling: the time the pod waits unschedulable (simulated: nodes, preemption of placeholders);
  - container start: normal, mean 1.0 s, σ 0.3 s, at least 0.1 s — the simulator's pod-startup draw (SimConfig
    `startup_mean_s`/`startup_std_s`; the seed article's σ 300 ms of pod creation delay), p99 ≈ 1.7 s, within
    Kubernetes' pod-startup SLO (p99 ≤ 5 s excluding image pull, kubernetes/community
    `sig-scalability/slos/pod_startup_latency.md`);
  - image pull: only for the first replica on a node (kubelet's `IfNotPresent`: later ones find it cached);
    lognormal, median 10 s, σ 0.5 (p99 ≈ 32 s): a modelling choice for a few-hundred-MB image at registry speeds;
  - warm-up: uniform 10–30 s after the container starts, then the readiness probe passes (caches, JIT): a
    modelling choice; the HPA sees a pod as ready only from then.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from drlsched.errors import UserError
from drlsched.reclaim import RHO_MAX, ReclaimConfig, ls_slowdown

LS_SLOWDOWN_TARGET = ReclaimConfig().ls_slowdown_target  # the simulator's SLA target (4×)
SATURATED_SLOWDOWN = float(ls_slowdown(np.array([RHO_MAX]))[0])  # 20×: what a request with no ready replica sees


@dataclass(frozen=True)
class ServiceSpec:
    """One service's pod template and cost of a request."""

    name: str = "web"
    request_m: int = 1000  # CPU request of a replica, millicores
    mem_mib: int = 2048
    limit_ratio: float = 2.0  # CPU limit / request
    cpu_per_rps_m: float = 10.0  # CPU one request per second costs (a replica at 80% of request: 80 rps)
    min_replicas: int = 1
    max_replicas: int = 1000
    slowdown_target: float = LS_SLOWDOWN_TARGET

    def validate(self) -> None:
        if self.min_replicas < 1:
            raise UserError(f"--min-replicas must be at least 1, got {self.min_replicas}")
        if self.min_replicas > self.max_replicas:
            raise UserError(f"--min-replicas {self.min_replicas} is above --max-replicas {self.max_replicas}")
        if self.request_m <= 0 or self.mem_mib <= 0 or not self.limit_ratio >= 1 or not self.cpu_per_rps_m > 0:
            raise UserError("a service needs a positive request, a limit at least its request and a positive cost")
        if not (math.isfinite(self.slowdown_target) and self.slowdown_target > 1):
            raise UserError(f"the SLA slowdown target must be above 1, got {self.slowdown_target}")

    def replicas_for(self, rate: float | np.ndarray, utilization: float = 0.8) -> np.ndarray:
        """Replicas the rate needs at `utilization` of the request (the HPA's default target, 80%)."""
        return np.ceil(np.asarray(rate) * self.cpu_per_rps_m / (utilization * self.request_m) - 1e-9)


@dataclass(frozen=True)
class Startup:
    """The delays after binding before a replica is ready (see the module docstring for their sources)."""

    start_mean_s: float = 1.0
    start_std_s: float = 0.3
    start_min_s: float = 0.1
    pull_median_s: float = 10.0
    pull_sigma: float = 0.5
    warmup_min_s: float = 10.0
    warmup_max_s: float = 30.0

    def draw(self, rng: np.random.Generator, image_cached: bool) -> tuple[float, float]:
        """(container start after binding, ready after binding)."""
        pull = 0.0 if image_cached else float(self.pull_median_s * math.exp(self.pull_sigma * rng.standard_normal()))
        start = pull + max(self.start_min_s, float(rng.normal(self.start_mean_s, self.start_std_s)))
        return start, start + float(rng.uniform(self.warmup_min_s, self.warmup_max_s))


@dataclass(frozen=True)
class Served:
    """One interval's service: per ready replica its CPU usage (millicores) and slowdown."""

    usage_m: np.ndarray
    slowdown: np.ndarray
    violating_share: float  # share of the interval's requests that violate the SLA


def serve(spec: ServiceSpec, rate: float, node_of: np.ndarray, node_cap_m: np.ndarray,
          busy_per_node: np.ndarray) -> Served:
    """The ready replicas (`node_of`: each one's node index) serving `rate` requests per second. `busy_per_node`:
    the service's running replicas per node (ready or warming up: they hold their CPU shares)."""
    n = node_of.size
    if n == 0:
        return Served(np.zeros(0), np.zeros(0), 1.0 if rate > 0 else 0.0)
    demand = rate * spec.cpu_per_rps_m / n
    share = node_cap_m[node_of] / np.maximum(busy_per_node[node_of], 1)  # equal requests: equal shares
    available = np.minimum(spec.request_m * spec.limit_ratio, np.maximum(share, spec.request_m))
    rho = demand / available
    slowdown = ls_slowdown(rho)
    violating = float(np.count_nonzero(slowdown > spec.slowdown_target)) / n
    return Served(np.minimum(demand, available), slowdown, violating)
