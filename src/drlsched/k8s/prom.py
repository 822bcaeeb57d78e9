"""A small Prometheus text-exposition registry (format 0.0.4): counters, gauges and histograms with labels.

Hand-written because the lock file has no prometheus_client; the format is simple and stable.
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Callable
from typing import TypeVar

from drlsched.k8s.http_server import HttpServer, Limits, Request, Response

LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)

Labels = tuple[tuple[str, str], ...]
M = TypeVar("M", bound="_Metric")


def _fmt_labels(labels: Labels, extra: tuple[tuple[str, str], ...] = ()) -> str:
    pairs = labels + extra
    if not pairs:
        return ""
    escaped = (v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") for _, v in pairs)
    return "{" + ",".join(f'{k}="{v}"' for (k, _), v in zip(pairs, escaped, strict=True)) + "}"


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


class _Metric:
    kind = ""

    def __init__(self, name: str, help_text: str) -> None:
        self.name = name
        self.help = help_text
        self.lock = threading.Lock()

    def header(self) -> list[str]:
        return [f"# HELP {self.name} {self.help}", f"# TYPE {self.name} {self.kind}"]

    def lines(self) -> list[str]:
        raise NotImplementedError


class Counter(_Metric):
    kind = "counter"

    def __init__(self, name: str, help_text: str) -> None:
        super().__init__(name, help_text)
        self.values: dict[Labels, float] = {}

    def inc(self, amount: float = 1.0, **labels: str) -> None:
        key = tuple(sorted(labels.items()))
        with self.lock:
            self.values[key] = self.values.get(key, 0.0) + amount

    def get(self, **labels: str) -> float:
        with self.lock:
            return self.values.get(tuple(sorted(labels.items())), 0.0)

    def lines(self) -> list[str]:
        with self.lock:
            return [f"{self.name}{_fmt_labels(k)} {_num(v)}" for k, v in sorted(self.values.items())]


class Gauge(Counter):
    kind = "gauge"

    def set(self, value: float, **labels: str) -> None:
        with self.lock:
            self.values[tuple(sorted(labels.items()))] = value


class CallbackGauge(_Metric):
    """A gauge read when scraped (cache sizes, readiness)."""

    kind = "gauge"

    def __init__(self, name: str, help_text: str, read: Callable[[], float]) -> None:
        super().__init__(name, help_text)
        self.read = read

    def lines(self) -> list[str]:
        return [f"{self.name} {_num(self.read())}"]


class Histogram(_Metric):
    kind = "histogram"

    def __init__(self, name: str, help_text: str, buckets: tuple[float, ...] = LATENCY_BUCKETS) -> None:
        super().__init__(name, help_text)
        self.buckets = buckets
        self.series: dict[Labels, tuple[list[int], list[float]]] = {}  # per-bucket counts, [sum]

    def observe(self, value: float, **labels: str) -> None:
        key = tuple(sorted(labels.items()))
        with self.lock:
            counts, total = self.series.setdefault(key, ([0] * (len(self.buckets) + 1), [0.0]))
            counts[bisect.bisect_left(self.buckets, value)] += 1
            total[0] += value

    def lines(self) -> list[str]:
        out = []
        with self.lock:
            for key, (counts, total) in sorted(self.series.items()):
                running = 0
                for bound, n in zip((*self.buckets, float("inf")), counts, strict=True):
                    running += n
                    le = "+Inf" if bound == float("inf") else _num(bound)
                    out.append(f"{self.name}_bucket{_fmt_labels(key, (('le', le),))} {running}")
                out.append(f"{self.name}_sum{_fmt_labels(key)} {_num(total[0])}")
                out.append(f"{self.name}_count{_fmt_labels(key)} {running}")
        return out


class Registry:
    def __init__(self) -> None:
        self.metrics: list[_Metric] = []

    def add(self, metric: M) -> M:
        self.metrics.append(metric)
        return metric

    def exposition(self) -> str:
        out: list[str] = []
        for metric in self.metrics:
            body = metric.lines()
            if body:
                out += metric.header() + body
        return "\n".join(out) + "\n"


def probe(path: str, registry: Registry, ready: Callable[[], bool], not_ready: str = "not ready\n") -> Response:
    """The answer to GET `path` among /metrics, /healthz and /readyz (503 until `ready()`); 404 otherwise."""
    if path == "/metrics":
        return Response(200, registry.exposition().encode(), "text/plain; version=0.0.4")
    if path == "/healthz":
        return Response(200, b"ok\n", "text/plain")
    if path == "/readyz":
        return Response(200, b"ok\n", "text/plain") if ready() else Response(503, not_ready.encode(), "text/plain")
    return Response(404, b"not found\n", "text/plain")


class _Probes:
    def __init__(self, registry: Registry, ready: Callable[[], bool]) -> None:
        self.registry, self.ready = registry, ready

    def get(self, request: Request) -> Response:
        return probe(request.path, self.registry, self.ready)

    def post(self, request: Request) -> Response:
        return Response(405, b"GET only\n", "text/plain", close=True)

    def refuse(self, request: Request, status: int, kind: str, message: str) -> Response:
        return Response(status, f"{message}\n".encode(), "text/plain", close=True)


class MetricsServer(HttpServer):
    """/metrics, /healthz and /readyz (503 until `ready()`) for a process that serves nothing else (the second
    scheduler), on the extender's hardened server (`http_server`)."""

    def __init__(self, address: tuple[str, int], registry: Registry, ready: Callable[[], bool] = lambda: True,
                 ) -> None:
        self.registry = registry
        super().__init__(address, _Probes(registry, ready), Limits(max_body=0, workers=1))
