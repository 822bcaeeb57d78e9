"""`drlsched reclaim`: the node-resource controller that lends what latency-sensitive pods reserve but do not use
to best-effort (BE) pods, as Koordinator's slo-controller and koordlet do.

Every period it reads node and pod usage from metrics.k8s.io (metrics-server; the samples pass the metrics
pipeline's checks: out of order, clock skew, staleness), computes each node's batch allocatable with the
simulator's formulas (`drlsched.reclaim.batch_allocatable`, `borg_reservations`, `UsageWindow`), writes it into
the node's `status.capacity` and `status.allocatable` as `kubernetes.io/batch-cpu` (millicores) and
`kubernetes.io/batch-memory` (bytes) through the status subresource, and evicts BE pods (those requesting batch
resources) through the Eviction API from nodes that breach Koordinator's thresholds:

- memory: node memory usage (the latest sample, less the BE pods evicted earlier that it may still count:
  `reclaim_evictions`) above `evict_mem_threshold` (70%) of capacity: BE pods by memory usage, largest first, the
  fewest that bring it back under the threshold;
- CPU: BE satisfaction (capacity × suppress − non-BE usage, over the BE pods' batch-cpu requests) below
  `evict_cpu_satisfaction` while the BE pods use what they are granted, for `evict_cpu_window_s`: BE pods by CPU
  usage until (target − satisfaction) × their requests are freed.

Evicted pods are deleted (kubelet's and Koordinator's behaviour); re-creating them is their owner's job (a Job, a
replay). A node whose metrics are stale or missing gets batch allocatable 0, so no new BE pod is admitted there,
and a Warning event `BatchResourcesStale` (once per episode) plus a log line. No quantity written is negative,
fractional or NaN (`batch_patch` refuses them). Through a metrics outage the usage window keeps the last fresh
measurement (or the requests, if higher), so nothing is lent afterwards that it would not lend.

`reconcile(leading)` is the pass the controller Manager (`drlsched.k8s.controller`) runs every period; a pass
after a spell without the lease starts from fresh state, as a new process would.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import kubernetes
import numpy as np

from drlsched.k8s import prom, quantity
from drlsched.k8s.client import request
from drlsched.k8s.events import EventRecorder, involved
from drlsched.k8s.metrics_pipeline import MetricsApiCollector, MetricsStore, Sample
from drlsched.k8s.objects import (
    BATCH_CPU_RESOURCE,
    BATCH_MEMORY_RESOURCE,
    ObjectError,
    as_dict,
    node_spec,
    pod_spec,
    rfc3339_seconds,
)
from drlsched.k8s.reclaim_evictions import EvictionLedger, memory_excess, pick_victims
from drlsched.reclaim import NodeForecast, ReclaimConfig, UsageWindow, borg_reservations
from drlsched.reclaim import batch_allocatable as model_batch
from drlsched.workload import QoS

# metrics-server's shortest resolution (the testbed runs it at this): NodeMetrics are a rate over two scrapes this
# far apart, so a controller pass more often than this sees nothing new.
METRICS_RESOLUTION_S = 10

log = logging.getLogger("drlsched.k8s")
COMPONENT = "drlsched-reclaim"
MIB = 2**20


def batch_patch(cpu_m: int, mem_bytes: int) -> dict[str, Any]:
    """The node status patch setting both batch resources (capacity and allocatable alike). Refuses anything but
    non-negative integers: a NaN or a negative quantity must never reach a node."""
    for what, value in (("batch-cpu", cpu_m), ("batch-memory", mem_bytes)):
        if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 0:
            raise ValueError(f"refusing to write {what} = {value!r}: not a non-negative integer")
    quantities = {BATCH_CPU_RESOURCE: str(int(cpu_m)), BATCH_MEMORY_RESOURCE: str(int(mem_bytes))}
    return {"status": {"capacity": quantities, "allocatable": quantities}}


def sane(values: np.ndarray) -> np.ndarray:
    """Usage as the model may see it: NaN and negatives (never expected after the pipeline's checks) become 0."""
    return np.where(np.isfinite(values) & (values > 0), values, 0.0)


@dataclass
class _Pod:
    namespace: str
    name: str
    uid: str
    node: int
    be: bool
    request: tuple[int, int]  # millicores, MiB (batch resources for BE pods)
    use: tuple[float, float]  # millicores, MiB: the window mean, or the request while no sample exists
    start: float  # status.startTime, seconds since the epoch


@dataclass
class _Tracked:
    """A non-BE pod's Borg reservation and CPU history across passes."""

    resv: np.ndarray
    hist: deque[float]


@dataclass
class NodeResult:
    state: str  # fresh | stale | missing (metrics)
    batch_cpu_m: int
    batch_memory_bytes: int
    memory_use_share: float | None
    be_cpu_satisfaction: float | None
    evicted: list[str] = field(default_factory=list)


class ReclaimController:
    """One `step()` per period: collect (unless a poller does), compute, patch, evict. Not thread-safe."""

    def __init__(
        self,
        api: kubernetes.client.ApiClient,
        cfg: ReclaimConfig,
        stale_after_s: float = 180.0,
        collect: Callable[[], tuple[list[Sample], list[Sample]]] | None = None,
        clock: Callable[[], float] = time.time,
        event_namespace: str = "default",
        recorder: EventRecorder | None = None,
    ) -> None:
        if not cfg.enabled:
            raise ValueError("the reclaim controller needs a reclaim model other than none")
        self.api = api
        self.cfg = cfg
        self.clock = clock
        self.event_namespace = event_namespace
        window = max(cfg.period_s, 30.0)
        self.node_usage = MetricsStore(window_s=window, stale_after_s=stale_after_s, clock=clock)
        self.pod_usage = MetricsStore(window_s=window, stale_after_s=stale_after_s, clock=clock)
        if collect is None:
            custom = kubernetes.client.CustomObjectsApi(api)
            collect = MetricsApiCollector(
                lambda resource: custom.list_cluster_custom_object("metrics.k8s.io", "v1beta1", resource)).collect
        self.collect = collect
        self.samples = max(1, math.ceil(cfg.window_s / cfg.period_s))  # passes in the model's usage window
        self._window: UsageWindow | None = None
        self._window_nodes: list[str] = []
        self._forecast: NodeForecast | None = None  # the forecast model's state, one usage sample per pass
        self._tracked: dict[str, _Tracked] = {}
        self._last_step: float | None = None
        self._low_since: dict[str, float] = {}
        self._stale_reported: set[str] = set()
        # Events post from the recorder's thread (their retries must not hold up a pass); through this
        # module's `request`, so a gated client refuses them on a standby.
        self.events = recorder or EventRecorder(api, COMPONENT,
                                                post=lambda path, body: request(self.api, "POST", path, body))
        self.patches = prom.Counter("drlsched_reclaim_node_patches_total", "Node status patches, by outcome.")
        self.evictions = prom.Counter("drlsched_reclaim_evictions_total", "BE pod evictions, by rule and outcome.")
        self._leading = False
        self.new_term()

    def register(self, registry: prom.Registry) -> None:
        for metric in (self.patches, self.evictions, self.events.outcomes):
            registry.add(metric)
        self.node_usage.register(registry)

    def new_term(self) -> None:
        """Forgets what a previous spell as leader computed (windows, reservations, eviction state)."""
        self._window = None
        self._window_nodes = []
        self._forecast = None
        self._tracked = {}
        self._last_step = None
        self._low_since = {}
        self._stale_reported = set()
        self._last_fresh: dict[str, tuple[float, float]] = {}  # node -> non-BE usage at its last fresh pass
        self.ledger = EvictionLedger()

    def reconcile(self, leading: bool) -> dict[str, NodeResult] | None:
        """The Manager's pass: while leading, `step` on the usage polled so far; standing by, nothing (writes
        would be refused anyway). A pass after a spell without the lease starts a new term."""
        if not leading:
            self._leading = False
            return None
        if not self._leading:
            self.new_term()
            self._leading = True
        return self.step(collect=False)

    def poll_usage(self, leading: bool) -> None:
        """The Manager's metrics loop (leader or not: a standby's windows are warm when it takes over)."""
        del leading
        self.node_usage.add(self.poll())

    def poll(self) -> list[Sample]:
        """One collection: pod samples go to the pod store, node samples are returned (a Poller's collect)."""
        nodes, pods = self.collect()
        self.pod_usage.add(pods)
        return nodes

    def step(self, collect: bool = True) -> dict[str, NodeResult]:
        if collect:
            self.node_usage.add(self.poll())
        now = self.clock()
        nodes, specs = self._nodes()
        names = [s.name for s in specs]
        index = {n: i for i, n in enumerate(names)}
        pods, listed = self._pods(index, now)
        n = len(names)
        cap_cpu = np.array([s.cpu_m for s in specs], dtype=np.int64)
        cap_mem = np.array([s.mem_mib for s in specs], dtype=np.int64)
        states, node_cpu, node_mem = [], np.zeros(n), np.zeros(n)
        for i, name in enumerate(names):
            state, means = self.node_usage.state(name)
            states.append(state)
            node_cpu[i], node_mem[i] = means.get("cpu", math.nan), means.get("memory", math.nan)
        fresh = np.array([s == "fresh" for s in states], dtype=bool)
        be = np.array([p.be for p in pods], dtype=bool)
        at = np.array([p.node for p in pods], dtype=np.int64)
        use = np.array([p.use for p in pods], dtype=np.float64).reshape(-1, 2)
        req = np.array([p.request for p in pods], dtype=np.float64).reshape(-1, 2)
        be_use_cpu = np.bincount(at, weights=use[:, 0] * be, minlength=n)
        be_use_mem = np.bincount(at, weights=use[:, 1] * be, minlength=n)
        be_req_cpu = np.bincount(at, weights=req[:, 0] * be, minlength=n)
        # Non-BE usage (LS, Burstable and the system): the node's measured usage less its BE pods'; where the node
        # has no fresh reading, its non-BE requests stand in (the window stays conservative until it returns).
        hp_req_cpu = np.bincount(at, weights=req[:, 0] * ~be, minlength=n)
        hp_req_mem = np.bincount(at, weights=req[:, 1] * ~be, minlength=n)
        ls_cpu = sane(np.where(fresh, node_cpu - be_use_cpu, hp_req_cpu))
        ls_mem = sane(np.where(fresh, node_mem - be_use_mem, hp_req_mem))
        # A stale pass must not lower the window (the system's baseline has no request; a pod may use more than
        # it requests): it repeats the node's last fresh non-BE usage, or its requests where they are higher.
        for i, name in enumerate(names):
            if fresh[i]:
                self._last_fresh[name] = (float(ls_cpu[i]), float(ls_mem[i]))
            elif name in self._last_fresh:
                last_cpu, last_mem = self._last_fresh[name]
                ls_cpu[i], ls_mem[i] = max(ls_cpu[i], last_cpu), max(ls_mem[i], last_mem)
        if self._window is None or self._window_nodes != names:
            self._window, self._window_nodes = UsageWindow(n, self.samples), names
            self._forecast = NodeForecast(self.cfg, n, self.cfg.period_s) if self.cfg.model == "forecast" else None
        self._window.add(ls_cpu, ls_mem)
        if self._forecast is not None:
            self._forecast.add(ls_cpu, ls_mem)
        slot_node, slot_resv, slot_hist = self._non_be(pods, now)
        batch_cpu, batch_mem = model_batch(self.cfg, cap_cpu, cap_mem, self._window, slot_node, slot_resv, slot_hist,
                                           self._forecast)
        batch_cpu = np.where(fresh, batch_cpu, 0)
        batch_mem = np.where(fresh, batch_mem, 0)
        self._last_step = now

        results: dict[str, NodeResult] = {}
        be_lim = np.maximum(cap_cpu * self.cfg.suppress - np.minimum(ls_cpu, cap_cpu), 0.0)
        satisfaction = be_lim / np.maximum(be_req_cpu, 1.0)
        for i, name in enumerate(names):
            cpu_m, mem_bytes = int(batch_cpu[i]), int(batch_mem[i]) * MIB
            self._patch(nodes[name], cpu_m, mem_bytes)
            self._report_state(name, nodes[name], states[i])
            results[name] = NodeResult(
                state=states[i], batch_cpu_m=cpu_m, batch_memory_bytes=mem_bytes,
                memory_use_share=round(float(node_mem[i] / cap_mem[i]), 4) if fresh[i] else None,
                be_cpu_satisfaction=round(float(satisfaction[i]), 4) if fresh[i] and be_req_cpu[i] else None,
            )
        # Evictions: what the latest samples measure, less the BE pods evicted before that they may still count.
        newest = [self.node_usage.latest(name) for name in names]
        self.ledger.update(listed, {name: t for name, (t, _) in zip(names, newest, strict=True)}, now)
        gone_cpu, gone_mem = self.ledger.pending(names)
        latest_mem = np.array([v.get("memory", math.nan) for _, v in newest], dtype=np.float64)
        mem_over = np.where(fresh, memory_excess(latest_mem, gone_mem, cap_mem, self.cfg.evict_mem_threshold), 0.0)
        be_lim_now = np.maximum(cap_cpu * self.cfg.suppress - np.minimum(sane(ls_cpu - gone_cpu), cap_cpu), 0.0)
        self._evict(pods, names, fresh, cap_mem, mem_over, use, be, be_use_cpu, be_lim_now,
                    be_lim_now / np.maximum(be_req_cpu, 1.0), be_req_cpu, now, results)
        lent = sum(r.batch_cpu_m for r in results.values())
        log.info("reclaim (%s): %d nodes, %d fresh, batch-cpu %dm lent, %d BE pods evicted", self.cfg.model, n,
                 int(fresh.sum()), lent, sum(len(r.evicted) for r in results.values()))
        return results

    def reset(self) -> None:
        """Batch allocatable 0 on every node (nothing lent before the first usage report, as in the simulator)."""
        nodes, _ = self._nodes()
        for node in nodes.values():
            self._patch(node, 0, 0)

    # --- reads --------------------------------------------------------------------------------------------

    def _nodes(self) -> tuple[dict[str, dict[str, Any]], list[Any]]:
        body = json.loads(request(self.api, "GET", "/api/v1/nodes"))
        nodes, specs = {}, []
        for node in body.get("items") or []:
            try:
                spec = node_spec(node)
            except ObjectError as err:
                log.warning("ignoring a node: %s", err)
                continue
            if spec.cpu_m > 0 and spec.mem_mib > 0:
                nodes[spec.name] = node
                specs.append(spec)
        specs.sort(key=lambda s: s.name)
        return nodes, specs

    def _pods(self, index: dict[str, int], now: float) -> tuple[list[_Pod], set[str]]:
        """The running pods on known nodes (not terminating), and the keys of every pod listed."""
        body = json.loads(request(self.api, "GET", "/api/v1/pods?fieldSelector=status.phase%3DRunning"))
        pods, listed = [], set()
        for pod in body.get("items") or []:
            meta = as_dict(pod.get("metadata"), "pod.metadata")
            listed.add(f"{meta.get('namespace', 'default')}/{meta.get('name')}")
            node = index.get(str(as_dict(pod.get("spec"), "pod.spec").get("nodeName") or ""))
            if node is None or meta.get("deletionTimestamp"):
                continue
            try:
                spec = pod_spec(pod)
            except ObjectError as err:
                log.warning("ignoring a pod: %s", err)
                continue
            namespace, name = str(meta.get("namespace", "default")), str(meta.get("name"))
            state, means = self.pod_usage.state(f"{namespace}/{name}")
            be = spec.qos == QoS.BE
            # A pod not measured yet: BE pods count as using nothing (their node's non-BE usage is then
            # over-, never under-estimated), others as using their request.
            fallback = (0.0, 0.0) if be else (float(spec.cpu_m), float(spec.mem_mib))
            use = (means.get("cpu", fallback[0]), means.get("memory", fallback[1])) if state == "fresh" else fallback
            started = str(as_dict(pod.get("status"), "pod.status").get("startTime") or "")
            pods.append(_Pod(namespace, name, str(meta.get("uid") or f"{namespace}/{name}"), node, be,
                             (spec.cpu_m, spec.mem_mib), use, rfc3339_seconds(started) if started else now))
        return pods, listed

    def _non_be(self, pods: list[_Pod], now: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The running non-BE pods' node, Borg reservation (updated to now) and CPU history over the window."""
        hp = [p for p in pods if not p.be]
        node = np.array([p.node for p in hp], dtype=np.int64)
        if not hp:
            return node, np.zeros((0, 2)), np.zeros((0, self.samples))
        request_ = np.array([p.request for p in hp], dtype=np.float64)
        use = sane(np.array([p.use for p in hp], dtype=np.float64))
        tracked = [self._tracked.get(p.uid) for p in hp]
        resv = np.array([t.resv if t is not None else r for t, r in zip(tracked, request_, strict=True)])
        age = np.array([now - p.start for p in hp])
        dt_s = now - self._last_step if self._last_step is not None else 0.0
        resv = borg_reservations(self.cfg, resv, request_, use, age, dt_s)
        kept: dict[str, _Tracked] = {}
        for p, t, r, u, req in zip(hp, tracked, resv, use[:, 0], request_[:, 0], strict=True):
            # As in the simulator, the peak predictor starts from the request: a new pod's history is full of it
            # until a window of readings has replaced it.
            hist = t.hist if t is not None else deque([float(req)] * self.samples, maxlen=self.samples)
            hist.append(float(u))
            kept[p.uid] = _Tracked(r, hist)
        self._tracked = kept  # pods that ended are forgotten
        return node, resv, np.array([list(t.hist) for t in kept.values()])

    # --- writes -------------------------------------------------------------------------------------------

    def _patch(self, node: dict[str, Any], cpu_m: int, mem_bytes: int) -> None:
        name = node["metadata"]["name"]
        # Capacity and allocatable alike: either may have been changed (or removed) by someone else.
        if written_batch(node, "capacity") == written_batch(node, "allocatable") == (cpu_m, mem_bytes):
            return
        try:
            request(self.api, "PATCH", f"/api/v1/nodes/{name}/status", batch_patch(cpu_m, mem_bytes),
                    "application/merge-patch+json")
            self.patches.inc(outcome="written")
        except kubernetes.client.ApiException as err:
            self.patches.inc(outcome="error")
            log.warning("could not set the batch resources of node %s: %s %s", name, err.status, err.reason)

    def _report_state(self, name: str, node: dict[str, Any], state: str) -> None:
        if state == "fresh":
            if name in self._stale_reported:
                self._stale_reported.discard(name)
                log.info("metrics of node %s are fresh again: batch resources lent again", name)
                self._event(node, "Normal", "BatchResourcesRestored",
                            "node metrics are fresh again; batch resources are computed from usage again")
            return
        stale_s = self.node_usage.stale_after_s
        message = (f"node metrics are {state} (no usage sample in the last {stale_s:.0f} s from metrics.k8s.io): "
                   f"batch allocatable set to 0, no new BE pods are admitted here")
        log.warning("node %s: %s", name, message)
        if name not in self._stale_reported:
            self._stale_reported.add(name)
            self._event(node, "Warning", "BatchResourcesStale", message)

    def _evict(self, pods: list[_Pod], names: list[str], fresh: np.ndarray, cap_mem: np.ndarray,
               mem_over: np.ndarray, use: np.ndarray, be: np.ndarray, be_use_cpu: np.ndarray, be_lim: np.ndarray,
               satisfaction: np.ndarray, be_req_cpu: np.ndarray, now: float,
               results: dict[str, NodeResult]) -> None:
        """At most one decision per node: the memory rule on `mem_over` (MiB over the threshold), else the CPU
        rule; the fewest BE pods covering the need, largest first."""
        cfg = self.cfg
        # Koordinator's CPU rule: satisfaction low while the BE pods use (nearly) all they are granted.
        low = fresh & (be_req_cpu > 0) & (satisfaction < cfg.evict_cpu_satisfaction) & \
            (np.minimum(be_use_cpu, be_lim) >= 0.9 * be_lim)
        for i, name in enumerate(names):
            if low[i]:
                self._low_since.setdefault(name, now)
            else:
                self._low_since.pop(name, None)
        at = np.array([p.node for p in pods], dtype=np.int64)
        for i, name in enumerate(names):
            cpu_fire = name in self._low_since and now - self._low_since[name] >= cfg.evict_cpu_window_s
            if not (mem_over[i] > 0 or cpu_fire):
                continue
            mine = np.flatnonzero(be & (at == i))
            if not mine.size:
                continue
            if mem_over[i] > 0:
                share = (float(mem_over[i]) + cfg.evict_mem_threshold * cap_mem[i]) / cap_mem[i]
                col, need, why = 1, float(mem_over[i]), (f"node memory usage {share:.0%} above the BE eviction "
                                                         f"threshold {cfg.evict_mem_threshold:.0%}")
                rule = "memory"
                amount_of = use[:, 1]
            else:
                col, need = 0, float((cfg.evict_cpu_target - satisfaction[i]) * be_req_cpu[i])
                why = (f"BE CPU satisfaction {satisfaction[i]:.2f} below {cfg.evict_cpu_satisfaction:.2f} for "
                       f"{cfg.evict_cpu_window_s:.0f} s")
                amount_of = np.array([p.request[0] for p in pods], dtype=np.float64)
                rule = "cpu"
                self._low_since.pop(name, None)
            order = mine[np.argsort(-use[mine, col], kind="stable")]
            for k in order[: pick_victims(amount_of[order], need)].tolist():
                pod = pods[k]
                if self._evict_pod(pod, why):
                    self.evictions.inc(rule=rule, outcome="evicted")
                    self.ledger.add(f"{pod.namespace}/{pod.name}", name, pod.use[0], pod.use[1], now)
                    results[name].evicted.append(f"{pod.namespace}/{pod.name}")
                else:
                    self.evictions.inc(rule=rule, outcome="refused")

    def _evict_pod(self, pod: _Pod, why: str) -> bool:
        body = {"apiVersion": "policy/v1", "kind": "Eviction",
                "metadata": {"name": pod.name, "namespace": pod.namespace}}
        try:
            request(self.api, "POST", f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}/eviction", body)
        except kubernetes.client.ApiException as err:
            # 404: gone already; 429: a PodDisruptionBudget forbids it now (retried next period).
            log.info("eviction of BE pod %s/%s refused: %s %s", pod.namespace, pod.name, err.status, err.reason)
            return False
        log.warning("evicted BE pod %s/%s: %s", pod.namespace, pod.name, why)
        self.events.submit(involved("Pod", pod.name, pod.uid, pod.namespace), pod.namespace, "Warning",
                           "EvictedByReclaim", f"BE pod evicted: {why}")
        return True

    def _event(self, node: dict[str, Any], type_: str, reason: str, message: str) -> None:
        meta = node["metadata"]
        self.events.submit(involved("Node", meta["name"], meta.get("uid", "")), self.event_namespace, type_, reason,
                           message)


def written_batch(node: dict[str, Any], key: str) -> tuple[int, int] | None:
    """The batch resources (millicores, bytes) in the node's `status.<key>`; None where absent or unreadable."""
    try:
        values = as_dict(as_dict(node.get("status"), "node.status").get(key), f"node.status.{key}")
        return (round(quantity.parse(values[BATCH_CPU_RESOURCE])),
                round(quantity.parse(values[BATCH_MEMORY_RESOURCE])))
    except (KeyError, ObjectError, quantity.QuantityError):
        return None
