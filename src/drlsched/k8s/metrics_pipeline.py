"""Live node usage for the policies: collectors, a rolling per-node window with data-quality checks, and the
fallback to request-based features.

Metric time series are the article's main cause of scheduler failures, so every sample is checked on arrival:

- **out of order**: a timestamp not after the last accepted one of its series is dropped;
- **clock skew**: a timestamp further than `skew_tolerance_s` ahead of our clock is dropped (a source whose
  clock runs ahead would otherwise look fresh forever);
- **stale**: a node whose newest sample is older than `stale_after_s` is not trusted;
- **missing**: a node with no sample at all.

A node that is stale or missing is scored from its requests instead (use = requested), and that fallback is
counted per reason. All counts are exported (`MetricsStore.register`).

Series are keyed (node, name) with names `cpu` (millicores), `memory` (MiB), `gpu` (milli-GPU in use, i.e.
utilisation × GPUs × 1000): the units of `Cluster.use_cpu`, `use_mem`, `use_gpu`.
"""

from __future__ import annotations

import json
import logging
import math
import re
import threading
import time
import urllib.parse
import urllib.request
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numpy as np

from drlsched.cluster import Cluster
from drlsched.k8s import prom, quantity
from drlsched.k8s.client import connection_error
from drlsched.k8s.objects import rfc3339_seconds

log = logging.getLogger("drlsched.k8s")
SERIES = ("cpu", "memory", "gpu")


@dataclass(frozen=True, slots=True)
class Sample:
    node: str
    name: str  # one of SERIES
    value: float
    timestamp: float  # the source's clock, seconds since the epoch


class MetricsStore:
    """Rolling windows of samples per (node, series), aligned to one clock (`clock`, wall time by default)."""

    def __init__(
        self,
        window_s: float = 60.0,
        stale_after_s: float = 30.0,
        skew_tolerance_s: float = 5.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.window_s = window_s
        self.stale_after_s = stale_after_s
        self.skew_tolerance_s = skew_tolerance_s
        self.clock = clock
        self.lock = threading.Lock()
        self._series: dict[tuple[str, str], deque[tuple[float, float]]] = {}
        self.rejected = prom.Counter("drlsched_metrics_samples_rejected_total", "Samples dropped, by reason.")
        self.accepted = prom.Counter("drlsched_metrics_samples_total", "Samples accepted, by series.")
        self.fallbacks = prom.Counter("drlsched_fallbacks_total", "Nodes scored from requests, by reason.")
        self.stale_nodes = prom.Gauge("drlsched_metrics_nodes", "Nodes by data state at the last use.")

    def register(self, registry: prom.Registry) -> None:
        for metric in (self.accepted, self.rejected, self.fallbacks, self.stale_nodes):
            registry.add(metric)

    def add(self, samples: Iterable[Sample]) -> None:
        now = self.clock()
        with self.lock:
            for s in samples:
                if not math.isfinite(s.value) or not math.isfinite(s.timestamp) or s.value < 0:
                    self.rejected.inc(reason="invalid")
                    continue
                if s.timestamp > now + self.skew_tolerance_s:
                    self.rejected.inc(reason="clock_skew")
                    continue
                series = self._series.setdefault((s.node, s.name), deque())
                if series and s.timestamp <= series[-1][0]:
                    self.rejected.inc(reason="out_of_order")
                    continue
                series.append((s.timestamp, s.value))
                while series and series[0][0] < now - self.window_s:
                    series.popleft()
                self.accepted.inc(series=s.name)

    def state(self, node: str) -> tuple[str, dict[str, float]]:
        """("fresh", {series: window mean}) or ("stale" | "missing", {})."""
        now = self.clock()
        with self.lock:
            windows = {name: self._series.get((node, name)) for name in SERIES}
            present = {name: w for name, w in windows.items() if w}
            if not present:
                return "missing", {}
            newest = max(w[-1][0] for w in present.values())
            if newest < now - self.stale_after_s:
                return "stale", {}
            return "fresh", {
                name: float(np.mean([v for t, v in w if t >= now - self.window_s] or [w[-1][1]]))
                for name, w in present.items()
            }

    def latest(self, node: str) -> tuple[float, dict[str, float]]:
        """(timestamp of the newest sample, {series: its newest value}); (-inf, {}) without samples. Unlike
        `state`, not averaged and not checked for staleness (the caller does)."""
        with self.lock:
            present = {name: w for name in SERIES if (w := self._series.get((node, name)))}
            if not present:
                return -math.inf, {}
            return max(w[-1][0] for w in present.values()), {name: w[-1][1] for name, w in present.items()}

    def apply(self, cluster: Cluster) -> dict[str, int]:
        """Sets the cluster's measured usage from fresh windows; stale and missing nodes fall back to their
        requests. Returns how many nodes are in each state."""
        counts = {"fresh": 0, "stale": 0, "missing": 0}
        for i, name in enumerate(cluster.names):
            state, means = self.state(name)
            counts[state] += 1
            if state == "fresh":
                cluster.use_cpu[i] = means.get("cpu", float(cluster.req_cpu[i]))
                cluster.use_mem[i] = means.get("memory", float(cluster.req_mem[i]))
                cluster.use_gpu[i] = means.get("gpu", float(cluster.used_gpu_milli[i]))
            else:
                cluster.use_cpu[i] = float(cluster.req_cpu[i])
                cluster.use_mem[i] = float(cluster.req_mem[i])
                cluster.use_gpu[i] = float(cluster.used_gpu_milli[i])
                self.fallbacks.inc(reason=state)
        if counts["stale"]:
            log.info("%d node(s) with stale metrics scored from their requests", counts["stale"])
        for state, n in counts.items():
            self.stale_nodes.set(n, state=state)
        return counts


# --- Prometheus text format (kubelet /metrics/resource, as kwok emulates it) -----------------------------------

_LINE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)(?:\s+(-?\d+))?\s*$')
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse_exposition(text: str) -> list[tuple[str, dict[str, str], float, float | None]]:
    """(name, labels, value, timestamp in seconds or None) for each sample line; comments and junk skipped."""
    out = []
    for line in text.splitlines():
        match = _LINE.match(line.strip())
        if match is None:
            continue
        name, labels, value, ts = match.groups()
        try:
            number = float(value)
        except ValueError:
            continue
        out.append((name, dict(_LABEL.findall(labels or "")), number, int(ts) / 1000 if ts else None))
    return out


class KubeletCollector:
    """kubelet's resource metrics (`/metrics/resource`): node CPU is a counter of core-seconds, turned into
    millicores from two scrapes; memory is the working set. `url_for(node)` gives each node's endpoint."""

    def __init__(self, url_for: Callable[[str], str], clock: Callable[[], float] = time.time) -> None:
        self.url_for = url_for
        self.clock = clock
        self._last_cpu: dict[str, tuple[float, float]] = {}  # node -> (timestamp, core-seconds)

    def collect(self, nodes: Iterable[str]) -> list[Sample]:
        samples = []
        for node in nodes:
            try:
                with urllib.request.urlopen(self.url_for(node), timeout=5) as response:
                    text = response.read().decode(errors="replace")
            except OSError as err:
                log.info("kubelet metrics of %s unavailable: %s", node, err)
                continue
            samples += self.parse(node, text)
        return samples

    def parse(self, node: str, text: str) -> list[Sample]:
        samples = []
        for name, _, value, ts in parse_exposition(text):
            stamp = ts if ts is not None else self.clock()
            if name == "node_memory_working_set_bytes":
                samples.append(Sample(node, "memory", value / 2**20, stamp))
            elif name == "node_cpu_usage_seconds_total":
                last = self._last_cpu.get(node)
                self._last_cpu[node] = (stamp, value)
                if last is not None and stamp > last[0] and value >= last[1]:
                    samples.append(Sample(node, "cpu", (value - last[1]) / (stamp - last[0]) * 1000, stamp))
        return samples


def parse_node_metrics(body: dict[str, Any]) -> list[Sample]:
    """A metrics.k8s.io/v1beta1 NodeMetricsList (metrics-server): usage at the end of each window."""
    samples = []
    for item in body.get("items") or []:
        try:
            node = item["metadata"]["name"]
            stamp = rfc3339_seconds(item["timestamp"])
            usage = item["usage"]
            samples.append(Sample(node, "cpu", quantity.parse(usage["cpu"]) * 1000, stamp))
            samples.append(Sample(node, "memory", quantity.parse(usage["memory"]) / 2**20, stamp))
        except (KeyError, TypeError, ValueError) as err:
            log.info("skipping a NodeMetrics item: %s", err)
    return samples


def parse_pod_metrics(body: dict[str, Any]) -> list[Sample]:
    """A metrics.k8s.io/v1beta1 PodMetricsList, keyed "namespace/name" in `Sample.node` (its containers summed):
    the per-pod usage the reclaim controller subtracts (BE pods) and tracks (Borg reservations, peak percentiles)."""
    samples = []
    for item in body.get("items") or []:
        try:
            meta = item["metadata"]
            key = f"{meta.get('namespace', 'default')}/{meta['name']}"
            stamp = rfc3339_seconds(item["timestamp"])
            containers = item.get("containers") or []
            cpu = sum(quantity.parse(c["usage"]["cpu"]) for c in containers) * 1000
            mem = sum(quantity.parse(c["usage"]["memory"]) for c in containers) / 2**20
            samples += [Sample(key, "cpu", cpu, stamp), Sample(key, "memory", mem, stamp)]
        except (KeyError, TypeError, ValueError) as err:
            log.info("skipping a PodMetrics item: %s", err)
    return samples


class MetricsApiCollector:
    """NodeMetrics and PodMetrics from the metrics.k8s.io API (metrics-server; `kubectl top`'s source). `list_api`
    lists one resource ("nodes" or "pods") and returns the decoded List; an unavailable API (metrics-server down:
    503) collects nothing this round, so the nodes' windows age and go stale; an unreachable apiserver raises."""

    def __init__(self, list_api: Callable[[str], dict[str, Any]]) -> None:
        self.list_api = list_api

    def collect(self) -> tuple[list[Sample], list[Sample]]:
        """(node samples, pod samples)."""
        out: list[list[Sample]] = []
        for resource, parse in (("nodes", parse_node_metrics), ("pods", parse_pod_metrics)):
            try:
                out.append(parse(self.list_api(resource)))
            except Exception as err:  # any API failure: this round is empty and the data ages
                if connection_error(err):
                    raise  # the apiserver itself is unreachable: the caller backs off (and logs) once
                log.info("metrics.k8s.io %s unavailable: %s", resource, str(err).splitlines()[0] if str(err) else err)
                out.append([])
        return out[0], out[1]


PROMETHEUS_QUERIES = {
    "cpu": 'sum by (node) (rate(container_cpu_usage_seconds_total{container!=""}[1m])) * 1000',
    "memory": 'sum by (node) (container_memory_working_set_bytes{container!=""}) / 1048576',
    "gpu": "sum by (Hostname, hostname) (DCGM_FI_DEV_GPU_UTIL) * 10",
}


class PrometheusCollector:
    """Instant queries against a Prometheus server (`/api/v1/query`), one per series, each `sum by (node)`.

    The default queries read cAdvisor's container metrics and the DCGM exporter's GPU utilisation (percent);
    DCGM labels the node `Hostname` in released images (`hostname` from 2026-05), so both are tried."""

    def __init__(self, url: str, queries: dict[str, str] | None = None) -> None:
        self.url = url.rstrip("/")
        self.queries = queries or PROMETHEUS_QUERIES

    def collect(self) -> list[Sample]:
        samples = []
        for name, query in self.queries.items():
            address = f"{self.url}/api/v1/query?{urllib.parse.urlencode({'query': query})}"
            try:
                with urllib.request.urlopen(address, timeout=10) as response:
                    body = json.loads(response.read())
            except (OSError, ValueError) as err:
                log.info("Prometheus query for %s failed: %s", name, err)
                continue
            samples += self.parse(name, body)
        return samples

    @staticmethod
    def parse(name: str, body: dict[str, Any]) -> list[Sample]:
        if body.get("status") != "success":
            return []
        samples = []
        for result in body.get("data", {}).get("result", []):
            labels = result.get("metric", {})
            node = labels.get("node") or labels.get("hostname") or labels.get("Hostname")
            try:
                stamp, value = float(result["value"][0]), float(result["value"][1])
            except (KeyError, IndexError, TypeError, ValueError):
                continue
            if node:
                samples.append(Sample(node, name, value, stamp))
        return samples


class NvmlCollector:
    """GPU utilisation and memory of this node through NVML (nvidia-ml-py's `pynvml`). Where the module or a
    driver is missing it reports itself unavailable and collects nothing, so CPU-only hosts run unchanged."""

    def __init__(self, node: str, module: ModuleType | None = None, clock: Callable[[], float] = time.time) -> None:
        self.node = node
        self.clock = clock
        self.nvml: Any = module
        self.reason = ""
        if self.nvml is None:
            try:
                import pynvml  # type: ignore[import-not-found]

                self.nvml = pynvml
            except ImportError:
                self.reason = "nvidia-ml-py is not installed"
                return
        try:
            self.nvml.nvmlInit()
        except Exception as err:  # pynvml raises NVMLError subclasses (no driver, no device)
            self.reason = f"NVML unavailable: {err}"
            self.nvml = None

    @property
    def available(self) -> bool:
        return self.nvml is not None

    def collect(self) -> list[Sample]:
        if self.nvml is None:
            return []
        nvml = self.nvml
        try:
            utils = [nvml.nvmlDeviceGetUtilizationRates(nvml.nvmlDeviceGetHandleByIndex(i)).gpu
                     for i in range(nvml.nvmlDeviceGetCount())]
        except Exception as err:  # a device that fell off the bus must not stop scheduling
            log.warning("NVML query failed: %s", err)
            return []
        # Percent per GPU summed and scaled to milli-GPU, the unit of Cluster.use_gpu.
        return [Sample(self.node, "gpu", float(sum(utils)) * 10, self.clock())]

    def close(self) -> None:
        if self.nvml is not None:
            self.nvml.nvmlShutdown()
            self.nvml = None


class Poller:
    """Runs `collect` every `interval_s` in a thread and feeds the store; a failing round is logged, not fatal."""

    def __init__(self, store: MetricsStore, collect: Callable[[], list[Sample]], interval_s: float) -> None:
        self.store = store
        self.collect = collect
        self.interval_s = interval_s
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, name="metrics", daemon=True)

    def start(self) -> Poller:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.stopping.set()

    def _run(self) -> None:
        while not self.stopping.is_set():
            try:
                self.store.add(self.collect())
            except Exception as err:  # the next round retries; decisions fall back meanwhile
                log.warning("metrics collection failed: %s", err)
            self.stopping.wait(self.interval_s)
