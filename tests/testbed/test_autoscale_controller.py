"""`drlsched autoscale` on the testbed, as a process against the real kube-controller-manager (Deployments,
ReplicaSets, the HPA controller) and metrics-server, with KWOK pods whose CPU usage follows a load curve:

- a compressed seasonal burst: drlsched's predictive controller (raising the HPA's minReplicas) has the replicas
  ready when the burst starts, and the same real HPA on its own does not;
- a controller killed (SIGKILL) mid-scale: its successor takes the lease over and resumes without scaling down;
- metrics-server stopped: the count is held, with a Warning Event, and the scale-down fresh metrics would have
  made happens only once they are back.

One testbed for the module: 2 nodes of 96 cores, an HPA sync of 5 s, metrics-server at 10 s. Time is
compressed (a 120 s season, 10 s forecast buckets, 20 s stabilisation windows on both sides); the algorithms are
the same.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes
import numpy as np
import pytest
from polling import until

from drlsched.autoscale.load import LoadCurve
from drlsched.k8s.service_load import ServiceLoad
from drlsched.testbed import controlplane
from drlsched.testbed.build import build
from drlsched.testbed.controlplane import Options, down, start_metrics_server, stop_process, up

SRC = Path(__file__).resolve().parents[2] / "src"
SEASON_S = 120.0
BURST_S = (80.0, 120.0)  # the burst's part of each season
BASE_RPS, BURST_RPS = 2.0, 36.0  # a request costs 100m: 200m, then 3600m over the replicas
COST_M = 100.0
NEEDED = 8  # ⌈3600m / (50% of 1 CPU)⌉: what the burst needs at the HPA's target


@pytest.fixture(scope="module")
def bed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[controlplane.Testbed]:
    build()
    state_dir = tmp_path_factory.mktemp("autoscale-controller-testbed")
    running = up(Options(state_dir=state_dir, nodes=2, metrics_server=True, controller_manager=True,
                         hpa_sync_period_s=5.0))
    try:
        yield running
    finally:
        down(state_dir)


@pytest.fixture(scope="module")
def api(bed: controlplane.Testbed) -> Iterator[kubernetes.client.ApiClient]:
    client = bed.api_client()
    yield client
    client.close()


def _namespace(api: kubernetes.client.ApiClient) -> str:
    name = f"asc-{uuid.uuid4().hex[:6]}"
    kubernetes.client.CoreV1Api(api).create_namespace({"metadata": {"name": name}})
    return name


def _deployment(api: kubernetes.client.ApiClient, ns: str, name: str, replicas: int) -> None:
    labels = {"app": name}
    kubernetes.client.AppsV1Api(api).create_namespaced_deployment(ns, {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
        "spec": {"replicas": replicas, "selector": {"matchLabels": labels}, "template": {
            "metadata": {"labels": labels},
            "spec": {"containers": [{"name": "app", "image": "fake",
                                     "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]}}}})


def _hpa(api: kubernetes.client.ApiClient, ns: str, name: str) -> None:
    kubernetes.client.AutoscalingV2Api(api).create_namespaced_horizontal_pod_autoscaler(ns, {
        "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": {"name": name},
        "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": name},
                 "minReplicas": 1, "maxReplicas": 12,
                 "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {
                     "type": "Utilization", "averageUtilization": 50}}}],
                 # Compressed time: scale down 20 s after the burst instead of 300 s.
                 "behavior": {"scaleDown": {"stabilizationWindowSeconds": 20}}}})


def _controller(bed: controlplane.Testbed, target: str, log: Path, *extra: str) -> subprocess.Popen[bytes]:
    argv = [sys.executable, "-m", "drlsched.cli", "autoscale", "--kubeconfig", str(bed.kubeconfig),
            "--scaler", "predictive", "--target", target, "--max-replicas", "12", "--period", "5",
            "--stale-after", "30", "--season", str(SEASON_S), "--step", "10", "--log-level", "INFO", *extra]
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    return subprocess.Popen(argv, stdout=log.open("wb"), stderr=subprocess.STDOUT, env=env)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


class Driver:
    """Moves every ServiceLoad along its curve once a second, on its own thread (curve time from `start`)."""

    def __init__(self, loads: list[ServiceLoad]) -> None:
        self.loads, self.start = loads, time.monotonic()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def now(self) -> float:
        return time.monotonic() - self.start

    def _run(self) -> None:
        while not self.stop.wait(1.0):
            for load in self.loads:
                try:
                    load.step(self.now())
                except Exception:  # a hiccup: the next second tries again
                    pass

    def __enter__(self) -> Driver:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(10)


def _ready(api: kubernetes.client.ApiClient, ns: str, name: str) -> int:
    return kubernetes.client.AppsV1Api(api).read_namespaced_deployment(name, ns).status.ready_replicas or 0


def _replicas(api: kubernetes.client.ApiClient, ns: str, name: str) -> int:
    return int(kubernetes.client.AppsV1Api(api).read_namespaced_deployment(name, ns).spec.replicas)


def _events(api: kubernetes.client.ApiClient, ns: str) -> list[dict[str, Any]]:
    data = kubernetes.client.CoreV1Api(api).list_namespaced_event(ns, _preload_content=False).data
    return [e for e in json.loads(data)["items"] if e.get("source", {}).get("component") == "drlsched-autoscale"]


def _seasonal() -> LoadCurve:
    seasons = 6
    t = np.arange(int(seasons * SEASON_S)) % SEASON_S
    rate = np.where((t >= BURST_S[0]) & (t < BURST_S[1]), BURST_RPS, BASE_RPS)
    return LoadCurve(rate.astype(float), 1.0)


def _enough_since(series: list[tuple[float, int]]) -> float | None:
    short = [i for i, (_, n) in enumerate(series) if n < NEEDED]
    if not short:
        return series[0][0]
    return None if short[-1] == len(series) - 1 else round(series[short[-1] + 1][0], 1)


def test_predictive_controller_has_replicas_ready_before_the_burst_and_the_real_hpa_does_not(
        bed: controlplane.Testbed, api: kubernetes.client.ApiClient, tmp_path: Path) -> None:
    ns = _namespace(api)
    for name in ("ahead", "hpa"):
        _deployment(api, ns, name, 1)
        _hpa(api, ns, name)
    curve = _seasonal()
    loads = [ServiceLoad(api, ns, f"app={name}", curve, COST_M) for name in ("ahead", "hpa")]
    proc = _controller(bed, f"{ns}/ahead", tmp_path / "controller.log", "--lead", "50",
                       "--downscale-stabilization", "20", "--leader-elect=false")
    third = 2 * SEASON_S + BURST_S[0]  # the third burst: two seasons to learn from
    ready: dict[str, list[tuple[float, int]]] = {"ahead": [], "hpa": []}
    try:
        with Driver(loads) as driver:
            until(lambda: driver.now() >= third - 60, "a minute before the third burst", timeout_s=third + 30,
                  period_s=0.5)

            def sample() -> bool:
                for name, series in ready.items():
                    series.append((driver.now() - third, _ready(api, ns, name)))
                return driver.now() >= third + 35

            until(sample, "the third burst under way", timeout_s=150, period_s=0.5)
    finally:
        _stop(proc)
    log = (tmp_path / "controller.log").read_text()
    # From when each had what the burst needs without a break to the end of the window, relative to the burst's
    # start (s; None: short of it at the end). Both are still up from the second burst at first; they differ in
    # when they come back up for the third.
    since = {name: _enough_since(series) for name, series in ready.items()}
    at_start = {name: next(n for t, n in series if t >= 0) for name, series in ready.items()}
    low = {name: min(n for _, n in series) for name, series in ready.items()}
    print(json.dumps({"ready_at_burst_start": at_start, "needed": NEEDED, "enough_since_s": since,
                      "lowest_ready_in_window": low}))
    assert since["ahead"] is not None and since["ahead"] < 0, f"drlsched: {ready['ahead']}\n{log[-3000:]}"
    assert at_start["ahead"] >= NEEDED > at_start["hpa"]
    assert since["hpa"] is None or since["hpa"] > 0  # the same HPA alone reacts only once the burst is seen
    assert max(n for t, n in ready["hpa"] if t >= 0) > at_start["hpa"]  # it does react, late
    assert proc.returncode == 0
    scaled = [e for e in _events(api, ns) if e["reason"] == "ScaledAhead"]
    assert scaled and all(e["involvedObject"]["name"] == "ahead" for e in scaled)


def test_a_controller_killed_mid_scale_resumes_without_scaling_down(
        bed: controlplane.Testbed, api: kubernetes.client.ApiClient, tmp_path: Path) -> None:
    ns = _namespace(api)
    _deployment(api, ns, "own", 1)  # no HPA: the controller owns spec.replicas
    curve = LoadCurve(np.array([BURST_RPS] * 600, dtype=float), 1.0)  # the burst's load from the start
    lease = ["--target-utilization", "50", "--leader-elect-resource-namespace", ns,
             "--leader-elect-lease-duration", "6", "--leader-elect-renew-deadline", "4",
             "--leader-elect-retry-period", "1"]
    first = _controller(bed, f"{ns}/own", tmp_path / "first.log", *lease)
    seen: list[int] = []
    with Driver([ServiceLoad(api, ns, "app=own", curve, COST_M)]):
        try:
            # The emulated HPA's first step is 1 -> 5 (scale-up policy: +4 pods per 15 s): kill it there.
            until(lambda: 1 < _replicas(api, ns, "own") < NEEDED, "the first scale-up", timeout_s=120,
                  period_s=0.2)
            first.kill()
            first.wait()
            at_kill = _replicas(api, ns, "own")
            second = _controller(bed, f"{ns}/own", tmp_path / "second.log", *lease)
            try:
                def settled() -> bool:
                    seen.append(_replicas(api, ns, "own"))
                    return len(seen) > 20 and seen[-1] >= NEEDED and len(set(seen[-10:])) == 1

                until(settled, "the successor to finish the scale-up", timeout_s=150, period_s=1.0)
            finally:
                _stop(second)
        finally:
            _stop(first)
    assert 1 < at_kill < NEEDED
    assert all(n >= at_kill for n in seen), seen  # never below what the killed controller had set
    assert all(b >= a for a, b in itertools.pairwise(seen)), seen  # no oscillation: only up
    assert seen[-1] >= NEEDED
    second_log = (tmp_path / "second.log").read_text()
    assert "now holds lease" in second_log


def test_stale_metrics_hold_the_count_with_an_event(bed: controlplane.Testbed, api: kubernetes.client.ApiClient,
                                                    tmp_path: Path) -> None:
    ns = _namespace(api)
    _deployment(api, ns, "web", 3)
    state = {"rps": 0.5}  # 50m over 3 replicas: fresh metrics would scale to 1 at once (no stabilisation)

    class Flat(LoadCurve):
        def at(self, t: Any) -> Any:
            return state["rps"]

    curve = Flat(np.array([1.0]), 1.0)
    until(lambda: _ready(api, ns, "web") == 3, "3 ready replicas")
    with Driver([ServiceLoad(api, ns, "app=web", curve, COST_M)]):
        assert stop_process(bed, "metrics-server")
        proc = _controller(bed, f"{ns}/web", tmp_path / "controller.log", "--downscale-stabilization", "0",
                           "--leader-elect=false")
        try:
            def held() -> list[dict[str, Any]]:
                return [e for e in _events(api, ns) if e["reason"] == "MetricsUnavailable"]

            (event,) = until(held, "the MetricsUnavailable event", timeout_s=90)
            time.sleep(20)  # four more passes without metrics
            assert _replicas(api, ns, "web") == 3
            assert len(held()) == 1  # once per episode
            start_metrics_server(bed)
            until(lambda: _replicas(api, ns, "web") == 1, "the scale-down once metrics are back", timeout_s=120)
        finally:
            _stop(proc)
            if "metrics-server" not in bed.processes:
                start_metrics_server(bed)
    assert event["type"] == "Warning" and event["involvedObject"]["name"] == "web"
    assert "holding 3 replicas" in event["message"]
    assert any(e["reason"] == "MetricsRecovered" for e in _events(api, ns))
