"""`drlsched replay --scenario flash-sale --scaler NAME`: one service's sale on a real cluster, under the real HPA or
drlsched's autoscale controller, measured with the simulator's metrics and compared with the simulator's run of
the same window (docs/replay.md "Scalers").

- **What is replayed.** A two-day flash-sale (or `--load-trace`): the first day and the second up to the window are
  the forecast's history; the window is the last sale, from `lead_in_s` before it opens to `TAIL_S` after its hold
  (or `duration_s` from its start). The service is a Deployment of the simulator's replica (request, limit 2×)
  that starts with the replicas the window's first rate needs, all ready, as the simulator's does.
- **Load.** Every `TICK_S` (real) each pod's KWOK CPU usage annotation is set to what the simulator's `serve` has
  it use: its share of rate × cost over the ready replicas, capped at the CPU it can use on its node (its limit, or
  its share of the node by requests), so metrics-server and the HPA read what the simulator's metrics-server reads.
- **Scalers.** `hpa`: a real HPA (autoscaling/v2) at the simulator's target with the default behaviour written out
  with its periods divided by the speedup (scale up max(100%, 4 pods), down 100%, per 15 s; 300 s down-scale
  stabilisation). `predictive`: the same HPA and drlsched's autoscale controller raising its minReplicas
  (`hpa-floor`), the simulator's max(reactive, forecast). `ppo:PATH`: the controller owning spec.replicas with the
  learned scaler (no HPA), as the simulator's learned scaler sets the count. The controller runs in-process, one
  pass per 15 workload seconds, on a workload-time clock (its forecast buckets, season, lead and stabilisation in
  workload seconds; metric ages on the real clock), warm-started with the history's demand at the simulator's
  syncs, as the simulator's scaler has watched it.
- **Measured.** A sampler records each pod's node, readiness and the replica count every `TICK_S`; the per-second
  workload timeline (each second held at the latest sample) is served with `services.serve` and summed with the
  driver's own `metrics_of`, so every key (`violation_minutes`, `replica_hours`, `sla_violation_rate`,
  `time_to_scale_p50_s`, ...) means what it means in `simulate`; the per-minute ready-replica curve comes too.
- **Speed-up.** Workload time = real time × speedup. The HPA syncs every 15 s / speedup (the testbed's
  `hpa_sync_period_s`); what runs on the cluster's real clock (metrics-server's 10 s resolution, the HPA's CPU
  initialisation and readiness delays) lasts × speedup, and KWOK pods are ready at once (no image pull, no
  warm-up): `simulate_window` runs the simulator under those conditions as well as at its defaults.
"""

from __future__ import annotations

import json
import logging
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import kubernetes
import numpy as np
import urllib3

from drlsched.autoscale.driver import LEARNED_PREFIX, Driver, DriverConfig, RunResult, per_minute
from drlsched.autoscale.hpa import HorizontalPodAutoscaler
from drlsched.autoscale.load import LoadCurve
from drlsched.autoscale.metrics_server import FRESH_CONTAINER_MIN_S, MetricsServer
from drlsched.autoscale.node_groups import NodeTemplate
from drlsched.autoscale.services import SATURATED_SLOWDOWN, ServiceSpec, Startup, serve
from drlsched.errors import UserError
from drlsched.k8s import quantity
from drlsched.k8s.autoscale_controller import AutoscaleConfig, AutoscaleController
from drlsched.k8s.autoscale_target import Target
from drlsched.k8s.objects import (
    CPU_USAGE_ANNOTATION,
    INSTANCE_TYPE_LABEL,
    KARPENTER_GROUP,
    KARPENTER_VERSION,
    NODEPOOL_LABEL,
)
from drlsched.k8s.reclaim_controller import METRICS_RESOLUTION_S
from drlsched.k8s.service_load import pod_ready

log = logging.getLogger("drlsched.replay")
SCALERS = ("hpa", "predictive")  # and ppo:PATH
SYNC_S = 15.0  # the HPA's sync and the controller's pass, workload seconds
LEAD_IN_S = 600.0
TAIL_S = 600.0
TICK_S = 0.5  # real seconds between samples
MAX_SPEEDUP = 15.0  # the HPA's behaviour periods are whole seconds: 15 s / speedup >= 1
KWOK_STARTUP = Startup(pull_median_s=0.0, warmup_min_s=0.0, warmup_max_s=0.0)  # ready once started
SERVICE = "web"
LABEL = "drlsched.io/replay-service"


@dataclass(frozen=True)
class Plan:
    """One replay: the service, the driver's settings, the whole load (the history) and the replayed window."""

    spec: ServiceSpec
    config: DriverConfig
    load: LoadCurve
    window: LoadCurve  # a part of `load`, on its times (window.start_s is the replay's t = 0)
    speedup: float
    seed: int = 0

    @property
    def end_s(self) -> float:
        return self.window.start_s + self.window.duration_s

    @property
    def hpa_period_s(self) -> int:
        """The HPA's behaviour period and sync on the cluster, real seconds."""
        return max(1, round(SYNC_S / self.speedup))

    def history(self) -> list[tuple[float, float]]:
        """(time, rate) at the simulator's syncs before the window: what its scaler has watched by then."""
        t = np.arange(self.load.start_s, self.window.start_s, SYNC_S)
        return list(zip(t.tolist(), self.load.at(t).tolist(), strict=True))

    def initial_replicas(self) -> int:
        """The driver's warm start: the replicas the first rate needs at 80%, all ready."""
        needed = max(self.spec.min_replicas, int(self.spec.replicas_for(float(self.window.at(self.window.start_s)))))
        return min(self.spec.max_replicas, needed)


def make_plan(spec: ServiceSpec, load: LoadCurve, config: DriverConfig, speedup: float, seed: int = 0,
              lead_in_s: float = LEAD_IN_S, duration_s: float | None = None) -> Plan:
    """The window around the load's last burst (UserError for a load without one or a speed-up out of range)."""
    if not (math.isfinite(speedup) and 0 < speedup <= MAX_SPEEDUP):
        raise UserError(f"replay --scaler: --speedup must be in (0, {MAX_SPEEDUP:g}] (the HPA's periods are whole "
                        f"seconds, 15 s / speedup), got {speedup:g}")
    if config.node_autoscaler == "cluster-autoscaler":
        raise UserError("replay --scaler: the cluster's node autoscaler is Karpenter (Cluster Autoscaler is emulated "
                        "only: its module is not served here); use --node-autoscaler none or karpenter")
    if not load.bursts:
        raise UserError("replay --scaler replays a burst, and the load has none")
    a, b = load.bursts[-1]
    start = max(load.start_s, a - lead_in_s)
    end = start + duration_s if duration_s is not None else b + TAIL_S
    end = min(end, load.start_s + load.duration_s)
    lo = int((start - load.start_s) // load.step_s)
    hi = math.ceil((end - load.start_s) / load.step_s)
    if hi <= lo:
        raise UserError(f"replay --scaler: the window {start:g}:{end:g} s holds none of the load")
    t0 = load.start_s + lo * load.step_s
    bursts = tuple((max(t0, x), y) for x, y in load.bursts if y > t0 and x < load.start_s + hi * load.step_s)
    window = LoadCurve(load.rate[lo:hi].copy(), load.step_s, t0, bursts)
    return Plan(spec, config, load, window, speedup, seed)


# --- the simulator on the window ------------------------------------------------------------------------------


def simulate_window(plan: Plan, as_replayed: bool = True) -> RunResult:
    """The simulator on the replayed window with the same warm start; `as_replayed`: under the replay's conditions.
    What the replay cannot compress runs on the cluster's real clock, so it lasts × speedup in workload time:
    metrics-server's resolution (10 s) and its fresh-container point (a container 10 s to one resolution old), the
    HPA's CPU initialisation period (300 s) and initial readiness delay (30 s), Karpenter's batching, disruption
    poll and command validation; and KWOK pods are ready once started (no image pull, no warm-up). A node's
    provisioning delay is the testbed's registration delay, set to the simulator's / speedup: the same."""
    cfg = plan.config
    if as_replayed:
        cfg = replace(cfg, metric_resolution_s=METRICS_RESOLUTION_S * plan.speedup, startup=KWOK_STARTUP,
                      karpenter=cfg.karpenter.slowed(plan.speedup))
    driver = Driver(plan.spec, plan.window, cfg, plan.seed)
    if as_replayed:
        driver.ms = MetricsServer(cfg.metric_resolution_s, FRESH_CONTAINER_MIN_S * plan.speedup)
        hpa = driver.hpa.config
        driver.hpa = HorizontalPodAutoscaler(replace(
            hpa, cpu_initialization_s=hpa.cpu_initialization_s * plan.speedup,
            initial_readiness_delay_s=hpa.initial_readiness_delay_s * plan.speedup))
    history = plan.history()
    if driver.predictive is not None:
        for t, rate in history:
            driver.predictive.observe(t, rate)
    if driver.learned is not None:
        driver.observer = driver.new_observer()
        for t, rate in history:
            driver.observer.forecast.observe(t, rate)
    return driver.run()


# --- the sampled timeline -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Sample:
    """The service's state at workload time `t_s`."""

    t_s: float
    ready_nodes: tuple[str, ...]  # the node of each ready replica
    running_nodes: tuple[str, ...]  # the node of each started replica (ready or not: they hold CPU shares)
    bound: int  # replicas bound to a node
    replicas: int  # spec.replicas
    nodes: int


def measure(plan: Plan, samples: list[Sample], node_cpu_m: dict[str, int]) -> tuple[dict[str, Any],
                                                                                   dict[str, np.ndarray]]:
    """The simulator's metrics and per-minute series of a sampled timeline: each workload second holds the latest
    sample (before the first: the first), served as the driver serves its ready replicas."""
    if not samples:
        raise ValueError("no samples")
    ts = np.array([s.t_s for s in samples])
    if np.any(np.diff(ts) < 0):
        raise ValueError("samples out of time order")
    spec, dt = plan.spec, plan.config.step_s
    steps = math.ceil(plan.window.duration_s / dt)
    times = plan.window.start_s + dt * np.arange(steps)
    rates = plan.window.at(times)
    needed = np.maximum(spec.min_replicas, spec.replicas_for(rates))
    held = np.clip(np.searchsorted(ts, times, side="right") - 1, 0, len(samples) - 1)
    names = sorted(node_cpu_m)
    index = {n: i for i, n in enumerate(names)}
    cap = np.array([float(node_cpu_m[n]) for n in names])
    minutes = steps // max(1, round(60.0 / dt)) + 1
    req_min, bad_min = np.zeros(minutes), np.zeros(minutes)
    ready_count = np.zeros(steps, dtype=np.int64)
    bound = np.zeros(steps, dtype=np.int64)
    replicas = np.zeros(steps, dtype=np.int64)
    nodes = np.zeros(steps, dtype=np.int64)
    burst_slow: list[np.ndarray] = []
    burst_w: list[np.ndarray] = []
    in_burst = np.zeros(steps, dtype=bool)
    for a, b in plan.window.bursts:
        in_burst[(times >= a) & (times < b)] = True
    views: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    for k in range(steps):
        s = samples[int(held[k])]
        if int(held[k]) not in views:
            node_of = np.fromiter((index[n] for n in s.ready_nodes if n in index), np.int64)
            busy = np.bincount(np.fromiter((index[n] for n in s.running_nodes if n in index), np.int64),
                               minlength=len(names))
            views[int(held[k])] = (node_of, busy)
        node_of, busy = views[int(held[k])]
        rate = float(rates[k])
        served = serve(spec, rate, node_of, cap, busy)
        m = int((times[k] - plan.window.start_s) // 60)
        req_min[m] += rate * dt
        bad_min[m] += rate * dt * served.violating_share
        if in_burst[k] and rate > 0:
            if node_of.size:
                burst_slow.append(served.slowdown)
                burst_w.append(np.full(node_of.size, rate * dt / node_of.size))
            else:
                burst_slow.append(np.array([SATURATED_SLOWDOWN]))
                burst_w.append(np.array([rate * dt]))
        ready_count[k], bound[k], replicas[k], nodes[k] = node_of.size, s.bound, s.replicas, s.nodes
    calc = Driver(spec, plan.window, replace(plan.config, scaler="hpa"), plan.seed)
    calc.scale_actions = int(np.count_nonzero(np.diff([s.replicas for s in samples])))
    metrics = calc.metrics_of(times, rates, needed, req_min, bad_min, ready_count, bound, nodes, burst_slow, burst_w)
    metrics["scaler"] = plan.config.scaler
    return metrics, per_minute(times, dt, rates, replicas, ready_count, needed, nodes)


def usage_m(spec: ServiceSpec, rate: float, ready: int, node_cpu_m: float, busy_on_node: int) -> int:
    """A ready replica's CPU (millicores, at least kwok's 1m floor), as `services.serve` has it use: its share of
    the demand, at most what it can use on its node."""
    if ready == 0:
        return 1
    available = min(spec.request_m * spec.limit_ratio, max(node_cpu_m / max(busy_on_node, 1), spec.request_m))
    return max(1, math.ceil(min(rate * spec.cpu_per_rps_m / ready, available)))


def compare(real: dict[str, Any], real_series: dict[str, np.ndarray], sim: RunResult) -> dict[str, Any]:
    """Each metric side by side with its relative difference (real / simulated − 1), and the ready-replica curves'
    mean absolute relative difference over the window's minutes."""
    out: dict[str, Any] = {}
    for key, value in real.items():
        other = sim.metrics.get(key)
        if isinstance(value, bool) or not isinstance(value, int | float) or not isinstance(other, int | float):
            continue
        rel = (value / other - 1.0) if other else (0.0 if value == other else None)
        out[key] = {"real": value, "sim": other, "rel_diff": rel}
    a, b = np.asarray(real_series["ready"], float), np.asarray(sim.series["ready"], float)
    n = min(a.size, b.size)
    out["ready_curve_mard"] = float(np.mean(np.abs(a[:n] - b[:n]) / np.maximum(b[:n], 1.0))) if n else None
    return out


# --- the cluster side -----------------------------------------------------------------------------------------


def deployment(spec: ServiceSpec, replicas: int, pool: str | None = None) -> dict[str, Any]:
    """The service's Deployment; with a Karpenter NodePool `pool`, its pods run only on that pool's nodes."""
    labels = {LABEL: SERVICE}
    selector = {"nodeSelector": {NODEPOOL_LABEL: pool}} if pool else {}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": SERVICE},
            "spec": {"replicas": replicas, "selector": {"matchLabels": labels}, "template": {
                "metadata": {"labels": labels},
                "spec": {**selector, "terminationGracePeriodSeconds": 0, "containers": [{
                    "name": "app", "image": "fake",
                    "resources": {"requests": {"cpu": f"{spec.request_m}m", "memory": f"{spec.mem_mib}Mi"},
                                  "limits": {"cpu": f"{round(spec.request_m * spec.limit_ratio)}m",
                                             "memory": f"{spec.mem_mib}Mi"}}}]}}}}


def hpa_manifest(plan: Plan) -> dict[str, Any]:
    """The simulator's HPA: its target, and upstream's default behaviour with the periods divided by the
    speed-up (the stabilisation window too; the controller-manager's sync is the testbed's option)."""
    period = plan.hpa_period_s
    return {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": {"name": SERVICE},
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": SERVICE},
                     "minReplicas": plan.spec.min_replicas, "maxReplicas": plan.spec.max_replicas,
                     "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {
                         "type": "Utilization", "averageUtilization": plan.config.target_utilization}}}],
                     "behavior": {
                         "scaleUp": {"stabilizationWindowSeconds": 0, "selectPolicy": "Max", "policies": [
                             {"type": "Percent", "value": 100, "periodSeconds": period},
                             {"type": "Pods", "value": 4, "periodSeconds": period}]},
                         "scaleDown": {"stabilizationWindowSeconds": max(1, round(300.0 / plan.speedup)),
                                       "selectPolicy": "Max",
                                       "policies": [{"type": "Percent", "value": 100, "periodSeconds": period}]}}}}


@dataclass(eq=False)  # a Thread: hashed by identity
class _Pass(threading.Thread):
    """drlsched's autoscale controller beside the replay: one pass every SYNC_S workload seconds."""

    controller: AutoscaleController
    period_real_s: float
    stopping: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        super().__init__(daemon=True, name="drlsched-replay-autoscale")

    def run(self) -> None:
        while not self.stopping.is_set():
            try:
                self.controller.reconcile(leading=True)
            except Exception as err:  # an API hiccup: the next pass retries
                log.warning("autoscale pass failed: %s", err)
            self.stopping.wait(self.period_real_s)

    def stop(self) -> None:
        self.stopping.set()
        self.join(timeout=30)
        self.controller.stop.set()
        self.controller.events.drain(timeout_s=10)


def _pods(core: kubernetes.client.CoreV1Api, namespace: str) -> list[dict[str, Any]]:
    data = core.list_namespaced_pod(namespace, label_selector=f"{LABEL}={SERVICE}", _preload_content=False).data
    return [p for p in json.loads(data)["items"] if not p["metadata"].get("deletionTimestamp")]


def _node_cpu(core: kubernetes.client.CoreV1Api, pool: str | None = None) -> dict[str, int]:
    """Allocatable CPU of the cluster's nodes (with a pool: of its nodes)."""
    selector = f"{NODEPOOL_LABEL}={pool}" if pool else ""
    data = json.loads(core.list_node(label_selector=selector, _preload_content=False).data)["items"]
    return {n["metadata"]["name"]: quantity.milli_cpu(n["status"]["allocatable"]["cpu"]) for n in data}


def _claims(api: kubernetes.client.ApiClient, pool: str) -> int:
    """The pool's NodeClaims: launching, running and terminating nodes, what the pool is paying for."""
    return len(kubernetes.client.CustomObjectsApi(api).list_cluster_custom_object(
        KARPENTER_GROUP, KARPENTER_VERSION, "nodeclaims", label_selector=f"{NODEPOOL_LABEL}={pool}")["items"])


def karpenter_pool(api: kubernetes.client.ApiClient, template: NodeTemplate) -> str:
    """The Karpenter NodePool that offers the simulator's node template (UserError where none does)."""
    hint = "(on the testbed: `drlsched.testbed.scaler_bed.scaler_bed`, as bench/kubernetes/replay_scaler.py " \
        "--node-autoscaler karpenter starts it)"
    try:
        pools = kubernetes.client.CustomObjectsApi(api).list_cluster_custom_object(
            KARPENTER_GROUP, KARPENTER_VERSION, "nodepools")["items"]
    except kubernetes.client.ApiException as err:
        raise UserError(f"replay --node-autoscaler karpenter: the cluster serves no Karpenter NodePools "
                        f"({err.status} {err.reason}) {hint}") from None
    for p in pools:
        for req in ((p.get("spec") or {}).get("template") or {}).get("spec", {}).get("requirements", []):
            if req.get("key") == INSTANCE_TYPE_LABEL and template.name in req.get("values", []):
                return str(p["metadata"]["name"])
    raise UserError(f"replay --node-autoscaler karpenter: no NodePool offers instance type {template.name}, the "
                    f"simulator's node ({template.cpu_m}m CPU, {template.mem_mib} MiB) {hint}")


def _set_usage(core: kubernetes.client.CoreV1Api, namespace: str, name: str, value: str) -> None:
    try:
        core.patch_namespaced_pod(name, namespace, {"metadata": {"annotations": {CPU_USAGE_ANNOTATION: value}}},
                                  _preload_content=False).release_conn()
    except (kubernetes.client.ApiException, urllib3.exceptions.HTTPError):
        pass  # deleted meanwhile: it serves nothing any more


def _follow_load(core: kubernetes.client.CoreV1Api, namespace: str, plan: Plan, pods: list[dict[str, Any]],
                 rate: float, node_cpu_m: dict[str, int]) -> None:
    ready = [p for p in pods if pod_ready(p)]
    running: dict[str, int] = {}
    for p in pods:
        if (p.get("status") or {}).get("phase") == "Running":
            node = p["spec"].get("nodeName", "")
            running[node] = running.get(node, 0) + 1
    names = {p["metadata"]["name"] for p in ready}
    for p in pods:
        name, node = p["metadata"]["name"], p["spec"].get("nodeName", "")
        value = usage_m(plan.spec, rate, len(ready), node_cpu_m.get(node, 0), running.get(node, 0)) \
            if name in names else 1
        if (p["metadata"].get("annotations") or {}).get(CPU_USAGE_ANNOTATION) != f"{value}m":
            _set_usage(core, namespace, name, f"{value}m")


def _sample(t_s: float, pods: list[dict[str, Any]], replicas: int, nodes: int) -> Sample:
    return Sample(t_s, tuple(p["spec"].get("nodeName", "") for p in pods if pod_ready(p)),
                  tuple(p["spec"].get("nodeName", "") for p in pods
                        if (p.get("status") or {}).get("phase") == "Running"),
                  sum(1 for p in pods if p["spec"].get("nodeName")), replicas, nodes)


def _wait(what: str, done: Callable[[], bool], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not done():
        if time.monotonic() > deadline:
            raise UserError(f"replay --scaler: {what} within {timeout_s:.0f} s")
        time.sleep(0.5)


def _metrics_ready(api: kubernetes.client.ApiClient, namespace: str, want: int) -> bool:
    try:
        items = kubernetes.client.CustomObjectsApi(api).list_namespaced_custom_object(
            "metrics.k8s.io", "v1beta1", namespace, "pods", label_selector=f"{LABEL}={SERVICE}")["items"]
    except kubernetes.client.ApiException:
        return False
    return len(items) >= want


def replay_scaler(api: kubernetes.client.ApiClient, plan: Plan, namespace: str,
                  progress: Callable[[float, float], None] | None = None) -> tuple[dict[str, Any],
                                                                                   dict[str, np.ndarray]]:
    """Runs the plan's window on the cluster (a namespace of its own, emptied of the replay's objects at the end);
    returns the metrics and per-minute series of `measure`, with the replay's facts."""
    core, apps = kubernetes.client.CoreV1Api(api), kubernetes.client.AppsV1Api(api)
    scaling = kubernetes.client.AutoscalingV2Api(api)
    scaler, spec, speedup = plan.config.scaler, plan.spec, plan.speedup
    pool = karpenter_pool(api, plan.config.template) if plan.config.node_autoscaler == "karpenter" else None
    if pool is not None:
        _wait(f"the nodes of NodePool {pool} from an earlier run to go (the replay starts it empty)",
              lambda: _claims(api, pool) == 0, 300.0)
    initial = plan.initial_replicas()
    start_rate = float(plan.window.at(plan.window.start_s))
    try:
        apps.create_namespaced_deployment(namespace, deployment(spec, initial, pool))
    except kubernetes.client.ApiException as err:
        raise UserError(f"replay --scaler: cannot create Deployment {SERVICE} in namespace {namespace}: {err.status} "
                        f"{err.reason} (a replay's leftovers? delete it or use another --namespace)") from None
    runner: _Pass | None = None
    samples: list[Sample] = []
    try:
        _wait(f"{initial} ready replicas of the Deployment (is kube-controller-manager running? `drlsched testbed "
              "up --controller-manager`)", lambda: sum(map(pod_ready, _pods(core, namespace))) >= initial,
              180.0 + (plan.config.node_provision_s / speedup if pool else 0.0))
        node_cpu_m = _node_cpu(core, pool)  # with a pool: the nodes Karpenter launched for the first replicas
        _follow_load(core, namespace, plan, _pods(core, namespace), start_rate, node_cpu_m)
        _wait("metrics.k8s.io samples of every replica (is metrics-server running? `drlsched testbed up "
              "--metrics-server`)", lambda: _metrics_ready(api, namespace, initial), 120.0)
        if not scaler.startswith(LEARNED_PREFIX):
            scaling.create_namespaced_horizontal_pod_autoscaler(namespace, hpa_manifest(plan))
        t0 = time.monotonic()

        def clock() -> float:
            return plan.window.start_s + (time.monotonic() - t0) * speedup

        if scaler != "hpa":
            learned = scaler[len(LEARNED_PREFIX):] if scaler.startswith(LEARNED_PREFIX) else None
            cfg = AutoscaleConfig(min_replicas=spec.min_replicas, max_replicas=spec.max_replicas,
                                  target_utilization=plan.config.target_utilization, period_s=SYNC_S,
                                  stale_after_s=6.0 * METRICS_RESOLUTION_S, lead_s=plan.config.lead_s,
                                  alpha=plan.config.alpha, beta=plan.config.beta, gamma=plan.config.gamma,
                                  learned=learned)
            controller = AutoscaleController(api, Target(namespace, "deployments", SERVICE), cfg, clock=clock,
                                             sample_clock=time.time)
            controller.warm_start((t, rate * spec.cpu_per_rps_m) for t, rate in plan.history())
            runner = _Pass(controller, SYNC_S / speedup)
            runner.start()
        nodes, k = len(node_cpu_m), 0
        while (now := clock()) < plan.end_s:
            try:
                if pool is not None:  # nodes come and go: every node seen keeps its CPU for `measure`
                    node_cpu_m.update(_node_cpu(core, pool))
                    nodes = _claims(api, pool)
                pods = _pods(core, namespace)
                replicas = int(apps.read_namespaced_deployment(SERVICE, namespace).spec.replicas)
                samples.append(_sample(now, pods, replicas, nodes))
                if k % 2 == 0:
                    _follow_load(core, namespace, plan, pods, float(plan.window.at(now)), node_cpu_m)
            except (kubernetes.client.ApiException, urllib3.exceptions.HTTPError) as err:
                log.warning("replay sample at %.0f s failed (the next tick retries): %s", now, err)
            k += 1
            if progress:
                progress(now - plan.window.start_s, plan.window.duration_s)
            time.sleep(max(0.0, t0 + k * TICK_S - time.monotonic()))
    finally:
        if runner is not None:
            runner.stop()
        _clean(scaling, apps, core, namespace)
    metrics, series = measure(plan, samples, node_cpu_m)
    lag = float(np.percentile(np.diff([s.t_s for s in samples]), 99)) if len(samples) > 1 else None
    metrics.update({"source": "replay", "speedup": speedup, "samples": len(samples), "sample_gap_p99_s": lag,
                    "window_s": [plan.window.start_s, plan.end_s], "node_pool": pool})
    return metrics, series


def _clean(scaling: kubernetes.client.AutoscalingV2Api, apps: kubernetes.client.AppsV1Api,
           core: kubernetes.client.CoreV1Api, namespace: str) -> None:
    for delete in (lambda: scaling.delete_namespaced_horizontal_pod_autoscaler(SERVICE, namespace),
                   lambda: apps.delete_namespaced_deployment(SERVICE, namespace, propagation_policy="Background"),
                   lambda: core.delete_collection_namespaced_pod(namespace, label_selector=f"{LABEL}={SERVICE}",
                                                                 grace_period_seconds=0)):
        try:
            delete()
        except (kubernetes.client.ApiException, urllib3.exceptions.HTTPError) as err:
            if getattr(err, "status", None) != 404:
                log.warning("replay: could not clean up: %s", err)
