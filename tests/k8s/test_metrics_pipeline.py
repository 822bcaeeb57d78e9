"""The metrics pipeline: data-quality checks on a fake clock, the request-based fallback, and the collectors —
kubelet resource metrics from the testbed's kwok, Prometheus from a loopback stub, NVML from a fake module."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import SimpleNamespace
from typing import Any

import kubernetes
import pytest

from drlsched.k8s.metrics_pipeline import (
    KubeletCollector,
    MetricsStore,
    NvmlCollector,
    PrometheusCollector,
    Sample,
    parse_node_metrics,
)
from drlsched.k8s.objects import pod_manifest, pod_spec
from drlsched.k8s.placement import Placer
from drlsched.k8s.state import ClusterState
from drlsched.policies import make_policy
from drlsched.testbed import controlplane
from drlsched.testbed.kwok_config import CPU_USAGE_ANNOTATION, MEMORY_USAGE_ANNOTATION, RESOURCE_METRICS_PATH
from drlsched.testbed.nodes import node_manifests

from .conftest import wait_for


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def test_out_of_order_skewed_and_invalid_samples_are_dropped_and_counted() -> None:
    clock = Clock()
    store = MetricsStore(window_s=60, stale_after_s=30, skew_tolerance_s=5, clock=clock)
    store.add([Sample("n1", "cpu", 100, clock.now - 10), Sample("n1", "cpu", 300, clock.now - 5)])
    store.add([Sample("n1", "cpu", 999, clock.now - 8)])  # older than the newest: out of order
    store.add([Sample("n1", "cpu", 999, clock.now + 60)])  # from the future: skewed clock
    store.add([Sample("n1", "cpu", float("nan"), clock.now), Sample("n1", "cpu", -1, clock.now)])
    assert store.rejected.get(reason="out_of_order") == 1
    assert store.rejected.get(reason="clock_skew") == 1
    assert store.rejected.get(reason="invalid") == 2
    assert store.state("n1") == ("fresh", {"cpu": 200.0})  # the window's mean
    assert store.state("n2") == ("missing", {})
    clock.now += 40
    assert store.state("n1") == ("stale", {})


def test_stale_metrics_trigger_the_request_based_fallback() -> None:
    clock = Clock()
    store = MetricsStore(stale_after_s=30, clock=clock)
    state = ClusterState()
    for node in node_manifests(3, 0, "uniform"):
        state.set_node(node)
    bound = pod_manifest("busy", cpu="8", memory="16Gi")
    bound["metadata"]["uid"] = "u1"
    bound["spec"]["nodeName"] = "kwok-cpu-00001"
    state.set_pod(bound)
    store.add([Sample(n, "cpu", 50_000.0, clock.now) for n in ("kwok-cpu-00000", "kwok-cpu-00001")])
    placer = Placer(make_policy("trimaran"), metrics=store, refresh_s=0)
    pod = pod_manifest("new", cpu="1")
    pod["metadata"]["uid"] = "u2"
    # Fresh: nodes 0 and 1 look busy (50 cores used), node 2 has no data and falls back to its requests (0).
    placer.choose(state, pod_spec(pod))
    cluster = state.cluster()
    assert list(cluster.use_cpu) == [50_000.0, 50_000.0, 0.0]
    assert store.fallbacks.get(reason="missing") == 1 and store.fallbacks.get(reason="stale") == 0
    clock.now += 31  # every sample is now stale: usage = requests
    placer.choose(state, pod_spec(pod))
    assert list(cluster.use_cpu) == [0.0, 8000.0, 0.0]
    assert store.fallbacks.get(reason="stale") == 2
    assert store.stale_nodes.get(state="stale") == 2


def test_kubelet_collector_reads_kwoks_resource_metrics(
    testbed: controlplane.Testbed, core: kubernetes.client.CoreV1Api, namespace: str
) -> None:
    node = "kwok-cpu-00199"
    pod = pod_manifest("busy", cpu="4", memory="4Gi", duration=None,
                       annotations={CPU_USAGE_ANNOTATION: "2", MEMORY_USAGE_ANNOTATION: "3Gi"})
    pod["spec"]["nodeName"] = node  # placed directly: no scheduler involved
    core.create_namespaced_pod(namespace, pod)
    wait_for(lambda: core.read_namespaced_pod("busy", namespace).status.phase == "Running", 60, "pod Running")
    collector = KubeletCollector(lambda n: testbed.kwok_url + RESOURCE_METRICS_PATH.format(node=n))
    store = MetricsStore()

    def measured() -> dict[str, float]:
        store.add(collector.collect([node]))
        state, means = store.state(node)
        fresh = state == "fresh" and means.get("memory", 0) >= 3 * 1024 and means.get("cpu", 0) > 0
        return means if fresh else {}

    means = wait_for(measured, 60, "kwok to report the pod's usage", interval_s=1.5)
    assert means["memory"] >= 3 * 1024
    assert 1500 <= means["cpu"] <= 2500  # 2 cores, from two scrapes of a counter


def test_node_metrics_from_metrics_server_are_parsed() -> None:
    body = {"kind": "NodeMetricsList", "items": [
        {"metadata": {"name": "n1"}, "timestamp": "2026-11-30T12:00:00Z", "window": "20s",
         "usage": {"cpu": "1500000000n", "memory": "2097152Ki"}},
        {"metadata": {"name": "broken"}, "usage": {}},
    ]}
    samples = parse_node_metrics(body)
    assert [(s.node, s.name, s.value) for s in samples] == [("n1", "cpu", 1500.0), ("n1", "memory", 2048.0)]
    assert samples[0].timestamp == 1796040000.0


class _Prometheus(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        query = self.path
        result: list[dict[str, Any]] = []
        if "container_cpu_usage_seconds_total" in query:
            result = [{"metric": {"node": "n1"}, "value": [time.time(), "1234.5"]}]
        elif "DCGM_FI_DEV_GPU_UTIL" in query:
            result = [{"metric": {"Hostname": "n1"}, "value": [time.time(), "350"]},
                      {"metric": {}, "value": [time.time(), "1"]}]
        data = json.dumps({"status": "success", "data": {"resultType": "vector", "result": result}}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def prometheus() -> Any:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Prometheus)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_prometheus_collector_queries_cadvisor_and_dcgm_series(prometheus: str) -> None:
    samples = PrometheusCollector(prometheus).collect()
    assert sorted((s.node, s.name, s.value) for s in samples) == [("n1", "cpu", 1234.5), ("n1", "gpu", 350.0)]
    assert PrometheusCollector("http://127.0.0.1:1").collect() == []  # unreachable: nothing, no exception


class _FakeNvml:
    """The subset of pynvml the collector uses, for two GPUs at 30% and 50%."""

    def __init__(self, fail_init: bool = False) -> None:
        self.fail_init = fail_init
        self.shut = False

    def nvmlInit(self) -> None:
        if self.fail_init:
            raise RuntimeError("NVML Shared Library Not Found")

    def nvmlDeviceGetCount(self) -> int:
        return 2

    def nvmlDeviceGetHandleByIndex(self, i: int) -> int:
        return i

    def nvmlDeviceGetUtilizationRates(self, handle: int) -> SimpleNamespace:
        return SimpleNamespace(gpu=(30, 50)[handle], memory=10)

    def nvmlShutdown(self) -> None:
        self.shut = True


def test_nvml_collector_with_a_fake_module_and_without_a_driver() -> None:
    fake = _FakeNvml()
    collector = NvmlCollector("gpu-node", module=fake)  # type: ignore[arg-type]
    (sample,) = collector.collect()
    assert (sample.node, sample.name, sample.value) == ("gpu-node", "gpu", 800.0)
    collector.close()
    assert fake.shut
    broken = NvmlCollector("gpu-node", module=_FakeNvml(fail_init=True))  # type: ignore[arg-type]
    assert not broken.available and "NVML unavailable" in broken.reason and broken.collect() == []
    real = NvmlCollector("here")  # the real module: absent here, or present without a GPU
    assert real.available or real.reason
