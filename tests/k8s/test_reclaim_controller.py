"""The reclaim controller without a cluster: the quantities it writes (units, never negative or NaN), staleness,
evictions, the batch resources in pods, the extender's state and the CLI's input checks, and the colocation keys
of a replay."""

from __future__ import annotations

import json
import math
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from drlsched.cli import main
from drlsched.cluster import Cluster
from drlsched.k8s import reclaim_controller
from drlsched.k8s.metrics_pipeline import Sample, parse_pod_metrics
from drlsched.k8s.objects import BATCH_CPU_RESOURCE, BATCH_MEMORY_RESOURCE, pod_manifest, pod_spec
from drlsched.k8s.reclaim_controller import ReclaimController, batch_patch, pick_victims
from drlsched.k8s.state import ClusterState
from drlsched.reclaim import ReclaimConfig
from drlsched.replay import PodRecord, _metrics
from drlsched.workload import NodeSpec, PodSpec, QoS

NOW = 1_800_000_000.0
MIB = 2**20


def _node(name: str, cpu: str = "4", memory: str = "8Gi") -> dict[str, Any]:
    resources = {"cpu": cpu, "memory": memory, "pods": "110"}
    return {"metadata": {"name": name, "uid": f"uid-{name}"},
            "status": {"capacity": dict(resources), "allocatable": dict(resources)}}


def _pod(name: str, node: str, cpu: str, memory: str, batch: bool = False) -> dict[str, Any]:
    pod = pod_manifest(name, cpu, memory, duration=None, batch=batch)
    pod["metadata"].update(namespace="default", uid=f"uid-{name}")
    pod["spec"]["nodeName"] = node
    pod["status"] = {"phase": "Running", "startTime": "2027-01-15T08:00:00Z"}
    return pod


class FakeApi:
    """Serves nodes and pods to the controller's raw calls and records what it writes."""

    def __init__(self, nodes: list[dict[str, Any]], pods: list[dict[str, Any]]) -> None:
        self.nodes, self.pods = nodes, pods
        self.writes: list[tuple[str, str, Any]] = []
        self.drain: Callable[[], object] = lambda: None  # waits for the controller's queued events

    def __call__(self, api: object, method: str, path: str, body: Any = None, content_type: str = "") -> bytes:
        del api, content_type
        if method == "GET":
            return json.dumps({"items": self.nodes if path == "/api/v1/nodes" else self.pods}).encode()
        self.writes.append((method, path, body))
        return b"{}"

    def patches(self) -> dict[str, dict[str, str]]:
        return {path.split("/")[4]: body["status"]["allocatable"] for m, path, body in self.writes if m == "PATCH"}

    def posts(self, suffix: str) -> list[Any]:
        self.drain()
        return [body for m, path, body in self.writes if m == "POST" and path.endswith(suffix)]


def _controller(monkeypatch: pytest.MonkeyPatch, fake: FakeApi, nodes: list[Sample], pods: list[Sample],
                model: str = "koordinator") -> ReclaimController:
    monkeypatch.setattr(reclaim_controller, "request", fake)
    controller = ReclaimController(None, ReclaimConfig(model=model), stale_after_s=60.0,  # type: ignore[arg-type]
                                   collect=lambda: (nodes, pods), clock=lambda: NOW)
    fake.drain = controller.events.drain
    return controller


def test_the_patch_carries_integer_millicores_and_bytes_and_refuses_negative_nan_or_fractions() -> None:
    patch = batch_patch(1400, 3276 * MIB)
    assert patch["status"]["allocatable"] == patch["status"]["capacity"] == {
        BATCH_CPU_RESOURCE: "1400", BATCH_MEMORY_RESOURCE: str(3276 * MIB)}
    assert batch_patch(np.int64(0), 0)["status"]["allocatable"][BATCH_CPU_RESOURCE] == "0"
    for cpu, mem in ((-1, 0), (0, -5), (math.nan, 0), (0, math.inf), (1.5, 0), (True, 0)):
        with pytest.raises(ValueError, match="refusing"):
            batch_patch(cpu, mem)  # type: ignore[arg-type]


def test_koordinator_batch_allocatable_in_kubernetes_units_and_zero_for_a_node_without_metrics(
        monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeApi([_node("a"), _node("b")], [_pod("ls", "a", "2", "4Gi"), _pod("be", "a", "500m", "512Mi", True)])
    node_samples = [Sample("a", "cpu", 1500.0, NOW - 1), Sample("a", "memory", 2560.0, NOW - 1)]
    pod_samples = [Sample("default/be", "cpu", 500.0, NOW - 1), Sample("default/be", "memory", 512.0, NOW - 1)]
    results = _controller(monkeypatch, fake, node_samples, pod_samples).step()
    # Non-BE usage on a: node 1500m / 2560 MiB less the BE pod's 500m / 512 MiB.
    cpu = math.floor(4000 * 0.60 - 1000)
    mem = math.floor(8192 * 0.65 - 2048)
    assert fake.patches()["a"] == {BATCH_CPU_RESOURCE: str(cpu), BATCH_MEMORY_RESOURCE: str(mem * MIB)}
    assert (results["a"].state, results["a"].batch_cpu_m, results["a"].batch_memory_bytes) == ("fresh", cpu, mem * MIB)
    # b has no sample at all: nothing is lent there, and an event says why.
    assert fake.patches()["b"] == {BATCH_CPU_RESOURCE: "0", BATCH_MEMORY_RESOURCE: "0"}
    events = fake.posts("/events")
    assert [(e["reason"], e["involvedObject"]["name"], e["type"]) for e in events] == [
        ("BatchResourcesStale", "b", "Warning")]
    assert "batch allocatable set to 0" in events[0]["message"]


@pytest.mark.parametrize("model", ["koordinator", "borg", "peak", "forecast"])
def test_usage_above_the_threshold_or_garbage_usage_writes_zero_not_a_negative(
        monkeypatch: pytest.MonkeyPatch, model: str) -> None:
    fake = FakeApi([_node("a")], [_pod("ls", "a", "4", "8Gi")])
    node_samples = [Sample("a", "cpu", 4100.0, NOW - 1), Sample("a", "memory", 8000.0, NOW - 1),
                    Sample("a", "cpu", math.nan, NOW)]  # the NaN is dropped by the pipeline's checks
    pod_samples = [Sample("default/ls", "cpu", 4100.0, NOW - 1), Sample("default/ls", "memory", 8000.0, NOW - 1)]
    controller = _controller(monkeypatch, fake, node_samples, pod_samples, model)
    for _ in range(3):
        controller.step()
    assert fake.patches()["a"] == {BATCH_CPU_RESOURCE: "0", BATCH_MEMORY_RESOURCE: "0"}


@pytest.mark.parametrize("model", ["borg", "peak"])
def test_borg_and_peak_hold_a_new_pods_request_like_the_simulator(monkeypatch: pytest.MonkeyPatch,
                                                                  model: str) -> None:
    fake = FakeApi([_node("a")], [_pod("ls", "a", "2", "4Gi")])
    node_samples = [Sample("a", "cpu", 500.0, NOW - 1), Sample("a", "memory", 1024.0, NOW - 1)]
    pod_samples = [Sample("default/ls", "cpu", 500.0, NOW - 1), Sample("default/ls", "memory", 1024.0, NOW - 1)]
    _controller(monkeypatch, fake, node_samples, pod_samples, model).step()
    # The pod uses 500m of its 2 cores: Borg reserves its request for 300 s, the peak predictor's per-pod
    # percentile starts from it; both lend 4000m x 1.0 - 2000m.
    assert fake.patches()["a"][BATCH_CPU_RESOURCE] == "2000"


def test_a_memory_burst_evicts_the_nodes_be_pods_largest_first_through_the_eviction_api(
        monkeypatch: pytest.MonkeyPatch) -> None:
    pods = [_pod("ls", "a", "2", "4Gi"), _pod("be-small", "a", "100m", "256Mi", True),
            _pod("be-big", "a", "100m", "1Gi", True), _pod("be-other", "b", "100m", "1Gi", True)]
    fake = FakeApi([_node("a"), _node("b")], pods)
    # a: 6000 of 8192 MiB (73% > 70%: 265 MiB over): the largest BE pod (900 MiB) covers it.
    node_samples = [Sample("a", "cpu", 1000.0, NOW - 1), Sample("a", "memory", 6000.0, NOW - 1),
                    Sample("b", "cpu", 100.0, NOW - 1), Sample("b", "memory", 1000.0, NOW - 1)]
    pod_samples = [Sample(f"default/{n}", "memory", m, NOW - 1) for n, m in
                   (("be-small", 200.0), ("be-big", 900.0), ("be-other", 900.0))]
    results = _controller(monkeypatch, fake, node_samples, pod_samples).step()
    evictions = fake.posts("/eviction")
    assert [(e["kind"], e["apiVersion"], e["metadata"]["name"]) for e in evictions] == [
        ("Eviction", "policy/v1", "be-big")]
    assert results["a"].evicted == ["default/be-big"] and results["b"].evicted == []
    assert [e["reason"] for e in fake.posts("/events")] == ["EvictedByReclaim"]


def test_pick_victims_takes_the_fewest_that_cover_the_need() -> None:
    assert pick_victims(np.array([5.0, 3.0, 1.0]), 6.0) == 2
    assert pick_victims(np.array([5.0, 3.0, 1.0]), 5.0) == 1
    assert pick_victims(np.array([5.0, 3.0]), 100.0) == 2
    assert pick_victims(np.array([5.0]), 0.0) == 0


def test_batch_pods_are_be_pods_and_fit_only_on_batch_allocatable_in_the_schedulers_state() -> None:
    be = _pod("be", "", "1500m", "1Gi", batch=True)
    del be["spec"]["nodeName"]
    requests = be["spec"]["containers"][0]["resources"]["requests"]
    assert requests == {BATCH_CPU_RESOURCE: "1500", BATCH_MEMORY_RESOURCE: str(2**30)}
    spec = pod_spec(be)
    assert (spec.qos, spec.cpu_m, spec.mem_mib) == (QoS.BE, 1500, 1024)
    assert pod_spec(_pod("ls", "a", "2", "1Gi")).qos != QoS.BE
    state = ClusterState()
    lent, empty = _node("lent"), _node("empty")
    lent["status"]["allocatable"].update(batch_patch(2000, 2 * 2**30)["status"]["allocatable"])
    state.set_node(lent)
    state.set_node(empty)
    cluster = state.cluster()
    fits = cluster.feasible(cluster.request(spec))
    assert [n for n, ok in zip(cluster.names, fits, strict=True) if ok] == ["lent"]
    # A new batch allocatable updates the arrays in place (no rebuild): now nothing fits.
    generation = state.generation
    lent["status"]["allocatable"].update(batch_patch(1000, 2 * 2**30)["status"]["allocatable"])
    state.set_node(lent)
    assert state.generation == generation and not state.cluster().feasible(cluster.request(spec)).any()


def test_pod_metrics_are_keyed_by_namespace_and_name_with_containers_summed() -> None:
    body = {"items": [{"metadata": {"name": "p", "namespace": "ns"}, "timestamp": "2027-01-15T08:00:00Z",
                       "containers": [{"name": "a", "usage": {"cpu": "250m", "memory": "1Gi"}},
                                      {"name": "b", "usage": {"cpu": "1500000n", "memory": "512Mi"}}]},
                      {"metadata": {"name": "broken"}}]}
    samples = parse_pod_metrics(body)
    assert [(s.node, s.name, round(s.value, 3)) for s in samples] == [
        ("ns/p", "cpu", 251.5), ("ns/p", "memory", 1536.0)]


@pytest.mark.parametrize("argv", [
    ["--model", "none"],
    ["--model", "borg", "--period", "0"],
    ["--model", "peak", "--stale-after", "nan"],
    ["--model", "koordinator", "--reclaim-cpu-threshold", "1.5"],
    ["--model", "koordinator", "--evict-mem-threshold", "-0.1"],
    ["--model", "koordinator", "--kubeconfig", "/nonexistent/kubeconfig"],
])
def test_bad_reclaim_options_exit_2_with_one_line(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    try:
        code = main(["reclaim", *argv])
    except SystemExit as exc:  # argparse's own checks (a choice not offered)
        code = exc.code
    assert code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert err.strip().splitlines()[-1].startswith(("drlsched: error: ", "drlsched reclaim: error: "))


def test_replayed_colocation_counts_evictions_be_pending_and_cpu_on_reclaimed_capacity() -> None:
    cluster = Cluster([NodeSpec("a", 4000, 8192)], reclaim=True)
    ls = PodSpec("ls", "svc", 0.0, 2000, 1024, qos=QoS.LS, usage_cpu=0.25)
    be = PodSpec("be", "job", 0.0, 1000, 1024, qos=QoS.BE, usage_cpu=0.5)
    records = [PodRecord(ls, "ls", ready=0.0, bound=0.0, started=0.0, ended=2.0, node="a"),
               # evicted once (created again under another name), bound 1 s after its first creation
               PodRecord(be, "be", ready=0.0, bound=1.0, started=1.0, ended=2.0, node="a", evictions=1)]
    m = _metrics(records, cluster, speedup=10.0)
    assert m["evictions"] == 1
    assert m["be_pending_p99_s"] == pytest.approx(10.0)
    # LS 500m for 20 s, BE 500m for 10 s: a third of the CPU used ran on reclaimed capacity.
    assert m["cpu_util_reclaimed"] == pytest.approx(5000 / 15000)


def test_a_replay_that_followed_the_load_curve_integrates_the_services_usage_at_it() -> None:
    cluster = Cluster([NodeSpec("a", 4000, 8192)], reclaim=True)
    svc = PodSpec("svc", "app", 0.0, 2000, 1024, qos=QoS.LS, service=True, usage_cpu=0.25)
    job = PodSpec("job", "j", 0.0, 1000, 1024, usage_cpu=0.5)
    records = [PodRecord(svc, "svc", ready=0.0, bound=0.0, started=0.0, ended=2.0, node="a"),
               PodRecord(job, "job", ready=0.0, bound=0.0, started=0.0, ended=2.0, node="a")]
    flat = _metrics(records, cluster, speedup=10.0)
    doubled = _metrics(records, cluster, speedup=10.0, load=lambda t: 2.0)
    # 500m of service usage becomes 1000m; the job's 500m stays.
    assert doubled["cpu_util"] == pytest.approx(flat["cpu_util"] * 1500 / 1000)


@pytest.mark.parametrize("elect, failed", [("--leader-elect=false", "reconcile pass failed"),
                                           ("--leader-elect=true", "cannot read or write lease")])
def test_reclaim_exits_0_on_sigterm_while_the_api_is_unreachable(tmp_path: Path, elect: str, failed: str) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "c",
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1", "insecure-skip-tls-verify": True}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}]}))
    proc = subprocess.Popen([sys.executable, "-m", "drlsched.cli", "reclaim", "--model", "koordinator",
                             "--kubeconfig", str(kubeconfig), "--period", "1", "--metrics-interval", "1", elect],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        assert proc.stderr is not None
        # Wait for a failed pass (the loop is running and survives it), then stop it.
        while failed not in proc.stderr.readline():
            assert time.monotonic() < deadline and proc.poll() is None
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


# --- issue 27: evict only what is needed, repair capacity, conservative through an outage ----------------------

GIB = 1024  # MiB


class Feed:
    """A clock and the samples metrics.k8s.io would serve, both moved by the test."""

    def __init__(self) -> None:
        self.t = NOW
        self.nodes: list[Sample] = []
        self.pods: list[Sample] = []

    def clock(self) -> float:
        return self.t

    def collect(self) -> tuple[list[Sample], list[Sample]]:
        return self.nodes, self.pods

    def node(self, name: str, cpu_m: float, mem_mib: float) -> None:
        self.nodes = [Sample(name, "cpu", cpu_m, self.t - 1), Sample(name, "memory", mem_mib, self.t - 1)]

    def pod(self, key: str, cpu_m: float, mem_mib: float) -> None:
        self.pods = [s for s in self.pods if s.node != key] + [Sample(key, "cpu", cpu_m, self.t - 1),
                                                                Sample(key, "memory", mem_mib, self.t - 1)]


def _fed(monkeypatch: pytest.MonkeyPatch, fake: FakeApi, feed: Feed, period_s: float = 15.0) -> ReclaimController:
    monkeypatch.setattr(reclaim_controller, "request", fake)
    controller = ReclaimController(None, ReclaimConfig(model="koordinator", period_s=period_s),  # type: ignore[arg-type]
                                   stale_after_s=45.0, collect=feed.collect, clock=feed.clock)
    fake.drain = controller.events.drain
    return controller


@pytest.mark.parametrize("fresh_sample", [False, True], ids=["before-a-new-sample", "after-a-new-sample"])
def test_a_memory_burst_evicts_exactly_the_be_pods_needed_to_get_under_the_threshold(
        monkeypatch: pytest.MonkeyPatch, fresh_sample: bool) -> None:
    # The reproduction: a 512 GiB node, BE pods using 10, 20 and 30 GiB, an LS pod raised to 340 GiB:
    # 400.25 GiB is 78% (threshold 70% = 358.4 GiB); evicting be-30 and be-20 brings it to 68.4%.
    pods = [_pod("ls", "big", "8", "340Gi")] + [_pod(f"be-{g}", "big", "1", f"{g}Gi", True) for g in (10, 20, 30)]
    fake = FakeApi([_node("big", "96", "512Gi")], pods)
    feed = Feed()
    for g in (10, 20, 30):
        feed.pod(f"default/be-{g}", 500.0, g * GIB)
    feed.pod("default/ls", 8000.0, 340 * GIB)
    feed.node("big", 9550.0, 400 * GIB + 256)
    controller = _fed(monkeypatch, fake, feed)
    first = controller.step()
    assert sorted(first["big"].evicted) == ["default/be-20", "default/be-30"]
    # The evicted pods leave the API; the next pass comes before or after metrics-server measures the node again.
    fake.pods = [p for p in fake.pods if p["metadata"]["name"] not in ("be-20", "be-30")]
    feed.t += 15.0
    feed.pods = [s for s in feed.pods if s.node not in ("default/be-20", "default/be-30")]
    if fresh_sample:
        feed.node("big", 8550.0, 350 * GIB + 256)
    for _ in range(3):
        assert controller.step()["big"].evicted == []
        feed.t += 15.0
        feed.node("big", 8550.0, 350 * GIB + 256)
    assert [e["metadata"]["name"] for e in fake.posts("/eviction")] == ["be-30", "be-20"]


def test_tampered_capacity_is_repaired_as_well_as_allocatable(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeApi([_node("a")], [_pod("ls", "a", "2", "4Gi")])
    feed = Feed()
    feed.node("a", 1000.0, 2048.0)
    feed.pod("default/ls", 1000.0, 2048.0)
    controller = _fed(monkeypatch, fake, feed)
    controller.step()
    (patch,) = [body for m, _, body in fake.writes if m == "PATCH"]
    for key in ("capacity", "allocatable"):
        fake.nodes[0]["status"][key].update(patch["status"][key])
    feed.t += 15.0
    feed.node("a", 1000.0, 2048.0)
    controller.step()
    assert len([m for m, _, _ in fake.writes if m == "PATCH"]) == 1  # unchanged: not written again
    fake.nodes[0]["status"]["capacity"][BATCH_CPU_RESOURCE] = "1"  # the tampering
    feed.t += 15.0
    feed.node("a", 1000.0, 2048.0)
    controller.step()
    patches = [body for m, _, body in fake.writes if m == "PATCH"]
    assert len(patches) == 2 and patches[1]["status"]["capacity"] == patch["status"]["capacity"]
    del fake.nodes[0]["status"]["capacity"][BATCH_MEMORY_RESOURCE]  # removed from capacity only
    fake.nodes[0]["status"]["capacity"][BATCH_CPU_RESOURCE] = patch["status"]["capacity"][BATCH_CPU_RESOURCE]
    feed.t += 15.0
    feed.node("a", 1000.0, 2048.0)
    controller.step()
    assert len([m for m, _, _ in fake.writes if m == "PATCH"]) == 3


def test_a_metrics_outage_never_makes_the_window_lend_more_afterwards(monkeypatch: pytest.MonkeyPatch) -> None:
    # A node with only a BE pod: its non-BE usage is the system's 50m / 256 MiB, which no pod requests.
    fake = FakeApi([_node("a")], [_pod("be", "a", "500m", "512Mi", True)])
    feed = Feed()
    feed.node("a", 550.0, 768.0)
    feed.pod("default/be", 500.0, 512.0)
    controller = _fed(monkeypatch, fake, feed, period_s=60.0)
    before = controller.step()["a"].batch_cpu_m
    assert before == 4000 * 6 // 10 - 50
    for _ in range(2):  # metrics-server down for two passes: stale, nothing lent
        feed.t += 60.0
        assert controller.step()["a"] == reclaim_controller.NodeResult("stale", 0, 0, None, None)
    feed.t += 60.0
    feed.node("a", 550.0, 768.0)
    feed.pod("default/be", 500.0, 512.0)
    after = controller.step()["a"]
    assert after.state == "fresh" and after.batch_cpu_m <= before


def test_a_new_term_as_leader_starts_from_fresh_state_and_a_standby_pass_writes_nothing(
        monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeApi([_node("a")], [_pod("ls", "a", "2", "4Gi")])
    feed = Feed()
    feed.node("a", 1000.0, 2048.0)
    controller = _fed(monkeypatch, fake, feed)
    controller.poll_usage(False)
    assert controller.reconcile(False) is None and fake.writes == []
    assert controller.reconcile(True) is not None and fake.patches()
    window = controller._window
    feed.t += 15.0
    feed.node("a", 1000.0, 2048.0)
    controller.poll_usage(True)
    controller.reconcile(True)
    assert controller._window is window
    controller.reconcile(False)
    controller.reconcile(True)
    assert controller._window is not window
