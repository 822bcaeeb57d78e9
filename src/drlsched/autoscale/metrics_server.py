"""metrics-server's resource metrics as the HPA reads them (kubernetes-sigs/metrics-server v0.8.0
`pkg/storage/pod.go`, `types.go`): every `--metric-resolution` it scrapes each pod's cumulative CPU counter; a
pod's CPU usage is the counter's rate between its last two points, stamped with the newer one's time and the
distance between them as the window. A pod has no metric until it has two points, except that a container started
10 s to one resolution before a scrape gets a point at its start with a zero counter
(`freshContainerMinMetricsResolution`). Usage is reported in nanocores and read by the HPA in millicores, rounded
up (`Quantity.MilliValue`).

The upstream manifest runs `--metric-resolution=15s` (the flag's default is 60 s); the testbed runs 10 s, the
smallest it accepts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from drlsched.autoscale.replicas import PodMetric

MANIFEST_RESOLUTION_S = 15.0
FRESH_CONTAINER_MIN_S = 10.0


@dataclass(frozen=True)
class _Point:
    at_s: float
    start_s: float
    cpu_ns: int  # cumulative CPU time, nanoseconds


@dataclass
class MetricsServer:
    resolution_s: float = MANIFEST_RESOLUTION_S
    fresh_min_s: float = FRESH_CONTAINER_MIN_S  # a replay's cluster, in its workload seconds: 10 s × speed-up
    next_scrape_s: float = 0.0
    last: dict[str, _Point] = field(default_factory=dict)
    prev: dict[str, _Point] = field(default_factory=dict)

    def due(self, now_s: float) -> bool:
        return now_s >= self.next_scrape_s

    def scrape(self, now_s: float, pods: Mapping[str, tuple[float, float]]) -> None:
        """One scrape of the running pods: name -> (start time, cumulative CPU core-seconds since start). Pods
        absent from `pods` (gone, or not running) lose their points, as upstream's store keeps only this batch."""
        self.next_scrape_s = now_s + self.resolution_s
        last: dict[str, _Point] = {}
        prev: dict[str, _Point] = {}
        for name, (start_s, core_s) in pods.items():
            point = _Point(now_s, start_s, int(core_s * 1e9))
            last[name] = point
            age = now_s - start_s
            if start_s < now_s and self.fresh_min_s <= age < self.resolution_s:
                prev[name] = _Point(start_s, start_s, 0)
                continue
            stored = self.last.get(name)
            if stored is None or not start_s < stored.at_s:
                continue  # new, or restarted since the stored point
            if now_s > stored.at_s:
                prev[name] = stored
            elif name in self.prev and self.prev[name].at_s < now_s:
                prev[name] = self.prev[name]
        self.last, self.prev = last, prev

    def pod_metrics(self) -> dict[str, PodMetric]:
        """The PodMetrics metrics.k8s.io serves now."""
        out = {}
        for name, last in self.last.items():
            prev = self.prev.get(name)
            if prev is None or last.cpu_ns < prev.cpu_ns:
                continue
            window = last.at_s - prev.at_s
            nanocores = int((last.cpu_ns - prev.cpu_ns) / window)
            out[name] = PodMetric(-(-nanocores // 1_000_000), last.at_s, window)
        return out
