"""One service on a cluster of nodes, scaled by a replica scaler and (optionally) a node autoscaler: a fixed-step
loop (`step_s`, 1 s) over the pieces of this package.

Each step: provisioned nodes whose delay has passed join; pending pods are placed by a placement policy of
drlsched.policies over the ready nodes (a service pod that fits nowhere preempts a placeholder, as the scheduler
preempts lower-priority pods); bound pods start and become ready after their `Startup` delays; metrics-server
scrapes every 15 s; the scaler syncs every 15 s and sets the replica count (and the placeholders); the node
autoscaler scans (Cluster Autoscaler every 10 s; Karpenter when pending pods change and at its wake-ups); and the
step's requests are served (`services.serve`) and counted.

Scalers (`--scaler`):
- `hpa`: Kubernetes' HPA (`hpa.HorizontalPodAutoscaler`) with the documented default behavior, on the CPU
  utilisation metrics-server reports, target `target_utilization` (80%).
- `overprovision`: the same HPA plus headroom as low-priority placeholder pods of a replica's size (Cluster
  Autoscaler FAQ, "How can I configure overprovisioning"): max(`overprovision_pods`, ⌈fraction × replicas⌉).
  They hold node room (a pending service pod evicts one, which goes pending and makes the node autoscaler add a
  node); without a node autoscaler they change nothing but cost.
- `predictive`: max(the HPA's recommendation, the replicas the Holt-Winters forecast of the rate needs `lead_s`
  ahead) (`predictive.PredictiveScaler`); the HPA runs as the reactive part on the same syncs.
- `ppo:PATH`: the learned scaler (`learned.LearnedScaler`) sets the count at each sync from the history window of
  `scaler_obs.ScalerObserver`, in the checkpoint's action space; `decisions()` runs the same loop with the actions
  sent in from outside (training), in `DriverConfig.actions`.
Pods leave at once when scaled down (no graceful termination), in the ReplicaSet's order: unscheduled first,
then not ready, then the newest.
"""

from __future__ import annotations

import math
from collections.abc import Generator
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from drlsched.autoscale.cluster_autoscaler import DEFAULT_NODE_PROVISION_S, CAConfig, ClusterAutoscaler
from drlsched.autoscale.hpa import Behavior, HorizontalPodAutoscaler, HPAConfig
from drlsched.autoscale.karpenter import Karpenter, KarpenterConfig
from drlsched.autoscale.load import LoadCurve
from drlsched.autoscale.metrics_server import MetricsServer
from drlsched.autoscale.node_groups import NodeGroup, NodeTemplate, NodeView, PodRequest, Provision, Remove
from drlsched.autoscale.predictive import PredictiveConfig, PredictiveScaler
from drlsched.autoscale.replicas import PENDING, RUNNING, Pod
from drlsched.autoscale.scaler_obs import ACTIONS, OPENING_LEVEL, ScalerObserver
from drlsched.autoscale.services import SATURATED_SLOWDOWN, ServiceSpec, Startup, serve
from drlsched.cluster import Cluster
from drlsched.errors import UserError
from drlsched.policies import Option, PodContext, make_policy
from drlsched.workload import PodSpec, QoS

SCALERS = ("hpa", "overprovision", "predictive")
LEARNED_PREFIX = "ppo:"  # ppo:PATH, a policy of `drlsched train-scaler`
NODE_AUTOSCALERS = ("none", "cluster-autoscaler", "karpenter")
DEFAULT_TEMPLATE = NodeTemplate("c8-m32", 8000, 32768)
VIOLATION_MINUTE_SHARE = 0.01  # a minute with more than 1% of its requests violating counts (SimConfig's 1%)


@dataclass(frozen=True)
class DriverConfig:
    scaler: str = "hpa"
    target_utilization: int = 80
    overprovision_pods: int = 0
    overprovision_fraction: float = 0.1
    lead_s: float = 180.0
    alpha: float = 0.5
    beta: float = 0.01
    gamma: float = 0.3
    node_autoscaler: str = "none"
    node_provision_s: float = DEFAULT_NODE_PROVISION_S
    nodes: int = 100  # the cluster (none) or the node group's max size
    template: NodeTemplate = DEFAULT_TEMPLATE
    policy: str = "k8s-default"
    step_s: float = 1.0
    measure_from_s: float = 0.0  # metrics count from here (e.g. after a day the forecast learns from)
    metric_resolution_s: float = 15.0
    startup: Startup = field(default_factory=Startup)
    karpenter: KarpenterConfig = field(default_factory=KarpenterConfig)  # its CPU limit comes from `nodes`
    actions: str = "absolute"  # the action space of decisions() (`scaler_obs.ACTIONS`); a ppo: file brings its own

    def validate(self) -> None:
        if self.scaler not in SCALERS and not self.scaler.startswith(LEARNED_PREFIX):
            raise UserError(f"unknown scaler {self.scaler!r}; choose one of {', '.join(SCALERS)}")
        if self.node_autoscaler not in NODE_AUTOSCALERS:
            raise UserError(f"unknown node autoscaler {self.node_autoscaler!r}; choose one of "
                            f"{', '.join(NODE_AUTOSCALERS)}")
        if not (math.isfinite(self.node_provision_s) and self.node_provision_s >= 0):
            raise UserError(f"--node-provision-s must be a non-negative number of seconds, got {self.node_provision_s}")
        if self.overprovision_pods < 0 or not 0 <= self.overprovision_fraction <= 10:
            raise UserError("overprovision: placeholder pods must be >= 0 and the fraction within [0, 10]")
        if self.actions not in ACTIONS:
            raise UserError(f"unknown scaler action space {self.actions!r}; choose one of {', '.join(ACTIONS)}")
        if self.nodes < 1 or not 0 < self.step_s <= 15:
            raise UserError("the driver needs at least one node and a step in (0, 15] s")


@dataclass
class _Replica:
    name: str
    placeholder: bool
    created_s: float
    since_s: float  # pending since
    node: str | None = None
    start_s: float = math.inf  # container started
    ready_s: float = math.inf
    core_s: float = 0.0  # cumulative CPU, core-seconds


@dataclass
class _Node:
    name: str
    group: str | None
    template: NodeTemplate
    created_s: float
    ready_s: float
    pods: set[str] = field(default_factory=set)
    image: bool = False  # the service's image is cached


@dataclass
class RunResult:
    metrics: dict[str, Any]
    series: dict[str, np.ndarray]  # per minute: rate_rps, replicas, ready, needed, nodes


class Driver:
    def __init__(self, service: ServiceSpec, load: LoadCurve, config: DriverConfig, seed: int = 0,
                 history: LoadCurve | None = None) -> None:
        """`history`: the load before `load` starts, for a run that opens mid-curve (training windows): the
        learned scaler's observer reads it first, so its forecast has its season and its hold its base, and the
        service opens at that observer's target at `scaler_obs.OPENING_LEVEL` (m = 1.5) instead of the bare need."""
        service.validate()
        config.validate()
        self.spec, self.load, self.cfg, self.seed = service, load, config, seed
        self.rng = np.random.default_rng(np.random.SeedSequence([seed, 0x5CA1E]))
        self.policy = make_policy(config.policy)
        self.replicas: dict[str, _Replica] = {}
        self.nodes: dict[str, _Node] = {}
        self.made = 0
        self._next_node_ready = -math.inf  # when the next provisioning node becomes ready
        self.version = 0  # bumps on any change of nodes or bindings
        self._cluster_version = -1
        self._views_version = -1
        self.scale_actions = 0
        t = config.template
        self.group = NodeGroup("pool", (t,), min_size=1, max_size=config.nodes)
        self.ca = ClusterAutoscaler([self.group], CAConfig(), seed) if config.node_autoscaler == "cluster-autoscaler" \
            else None
        self.karpenter = None
        if config.node_autoscaler == "karpenter":
            self.karpenter = Karpenter(self.group, replace(config.karpenter, limit_cpu_m=config.nodes * t.cpu_m))
        self.hpa = HorizontalPodAutoscaler(HPAConfig(service.max_replicas, service.min_replicas,
                                                     config.target_utilization, Behavior()))
        self.predictive = None
        if config.scaler == "predictive":
            self.predictive = PredictiveScaler(PredictiveConfig(
                service.request_m, service.cpu_per_rps_m, service.max_replicas, service.min_replicas,
                config.target_utilization, lead_s=config.lead_s, alpha=config.alpha, beta=config.beta,
                gamma=config.gamma))
        self.ms = MetricsServer(config.metric_resolution_s)
        self.learned = None
        self.observer: ScalerObserver | None = None
        self.expert_log: list[tuple[np.ndarray, int]] | None = None  # set to a list to record (window, action)
        if config.scaler.startswith(LEARNED_PREFIX):
            from drlsched.autoscale.learned import load_scaler

            self.learned = load_scaler(config.scaler[len(LEARNED_PREFIX):])
        self.actions = self.learned.actions if self.learned is not None else config.actions
        # Running sums since the start (requests, violating requests, core-seconds used by the ready replicas and
        # requested by the bound pods): the learned scaler's observation and the training reward read differences.
        self.requests = self.violating = self.used_core_s = self.requested_core_s = 0.0
        self._seen = (0.0, 0.0)
        self._primed = False
        if history is not None:
            self._prime(history)

    def _prime(self, history: LoadCurve) -> None:
        """Feeds `history` to a fresh observer at the HPA's sync period, as if the count had sat at the primed
        level with no violation (the windows' replica rows are those of the primed level)."""
        observer = self.observer = self.new_observer()
        period = self.hpa.config.sync_period_s
        times = np.arange(history.start_s, history.start_s + history.duration_s, period)
        for now, rate in zip(times.tolist(), history.at(times).tolist(), strict=True):
            count = observer.target(OPENING_LEVEL)
            observer.observe(now, rate, count, count, 0.0)
        self._primed = True

    def new_observer(self) -> ScalerObserver:
        """A fresh observer in this run's action space."""
        return ScalerObserver(self.spec, actions=self.actions)

    # --- state ---------------------------------------------------------------------------------------------

    def _new_pod(self, now: float, placeholder: bool) -> _Replica:
        name = f"{'pause' if placeholder else self.spec.name}-{self.made:06d}"
        self.made += 1
        r = _Replica(name, placeholder, now, now)
        self.replicas[name] = r
        return r

    def _add_node(self, name: str, group: str | None, now: float, ready_s: float) -> None:
        self.nodes[name] = _Node(name, group, self.cfg.template, now, ready_s)
        self._next_node_ready = min(self._next_node_ready, ready_s)
        self.version += 1

    def _unbind(self, r: _Replica, now: float) -> None:
        if r.node is not None:
            self.nodes[r.node].pods.discard(r.name)
        r.node, r.start_s, r.ready_s, r.since_s = None, math.inf, math.inf, now
        self.version += 1

    def _delete(self, r: _Replica) -> None:
        if r.node is not None:
            self.nodes[r.node].pods.discard(r.name)
            self.version += 1
        del self.replicas[r.name]

    def _service(self) -> list[_Replica]:
        return [r for r in self.replicas.values() if not r.placeholder]

    def _set_count(self, now: float, placeholder: bool, count: int) -> None:
        pods = [r for r in self.replicas.values() if r.placeholder == placeholder]
        for _ in range(count - len(pods)):
            self._new_pod(now, placeholder)
        if count < len(pods):
            # ReplicaSet's deletion order: unscheduled, then not ready, then the newest.
            pods.sort(key=lambda r: (r.node is not None, r.ready_s <= now, -r.created_s))
            for r in pods[: len(pods) - count]:
                self._delete(r)

    # --- scheduling ---------------------------------------------------------------------------------------

    def _ready_nodes(self, now: float) -> list[_Node]:
        return [n for n in self.nodes.values() if n.ready_s <= now]

    def _cluster(self, now: float) -> tuple[Cluster, list[_Node]]:
        if self._cluster_version != self.version:
            ready = self._ready_nodes(now)
            self._cl = Cluster([n.template.node_spec(n.name) for n in ready])
            self._cl_nodes = ready
            req = self._cl.request(self._podspec("x", now))
            for i, n in enumerate(ready):
                for _ in n.pods:
                    self._cl.allocate(i, req, ())
            self.policy.reset(self._cl, np.random.default_rng(np.random.SeedSequence([self.seed, self.version])))
            self._cluster_version = self.version
        return self._cl, self._cl_nodes

    def _podspec(self, name: str, now: float, placeholder: bool = False) -> PodSpec:
        return PodSpec(name, self.spec.name, now, self.spec.request_m, self.spec.mem_mib,
                       qos=QoS.BE if placeholder else QoS.LS, priority=-1 if placeholder else 0,
                       service=not placeholder)

    def _schedule(self, now: float) -> None:
        pending = sorted((r for r in self.replicas.values() if r.node is None),
                         key=lambda r: (r.placeholder, r.created_s, r.name))
        if not pending or not self._ready_nodes(now):
            return
        for r in pending:
            cluster, ready = self._cluster(now)
            spec = self._podspec(r.name, now, r.placeholder)
            req = cluster.request(spec)
            feasible = cluster.feasible(req)
            if not feasible.any():
                if r.placeholder or not self._preempt(now, ready):
                    continue
                cluster, ready = self._cluster(now)
                feasible = cluster.feasible(req)
                if not feasible.any():
                    continue
            decision = self.policy.select(PodContext(spec, [Option(0, req, feasible)], cluster, now))
            if decision is None:
                continue
            node = ready[decision.node]
            cluster.allocate(decision.node, req, ())
            self._bind(r, node, now)
            self._cluster_version = self.version  # the cluster was updated in place

    def _preempt(self, now: float, ready: list[_Node]) -> bool:
        """Evict one placeholder from a node where that makes room for a service pod."""
        for n in ready:
            holders = [p for p in n.pods if self.replicas[p].placeholder]
            if holders:
                self._unbind(self.replicas[sorted(holders)[0]], now)
                return True
        return False

    def _bind(self, r: _Replica, node: _Node, now: float) -> None:
        r.node = node.name
        node.pods.add(r.name)
        if not r.placeholder:
            start, ready = self.cfg.startup.draw(self.rng, node.image)
            node.image = True
            r.start_s, r.ready_s = now + start, now + ready
        self.version += 1

    # --- node autoscaling ---------------------------------------------------------------------------------

    def _views(self, now: float) -> list[NodeView]:
        if self._views_version != self.version:
            t = self.cfg.template
            self._nv = [NodeView(n.name, n.group, t.cpu_m, t.mem_mib, max_pods=t.max_pods,
                                 pods=tuple(self._request(self.replicas[p]) for p in sorted(n.pods)),
                                 ready=n.ready_s <= now, created_s=n.created_s, template=t.name)
                        for n in self.nodes.values()]
            self._views_version = self.version
        return self._nv

    def _request(self, r: _Replica) -> PodRequest:
        return PodRequest(r.name, self.spec.request_m, self.spec.mem_mib, since_s=r.since_s)

    def _autoscale_nodes(self, now: float) -> None:
        scaler = self.ca or self.karpenter
        if scaler is None:
            return
        pending = [self._request(r) for r in self.replicas.values() if r.node is None]
        if self.ca is not None:
            if not self.ca.due(now):
                return
            actions = self.ca.step(now, pending, self._views(now))
        else:
            assert self.karpenter is not None
            names = {p.name for p in pending}
            if names == self._k_pending and now < self.karpenter.next_wakeup_s():
                return
            self._k_pending = names
            actions = self.karpenter.step(now, pending, self._views(now))
        for a in actions:
            if isinstance(a, Provision):
                for name in a.names:
                    self._add_node(name, a.group, now, now + self.cfg.node_provision_s)
            elif isinstance(a, Remove) and a.node in self.nodes:
                for p in list(self.nodes[a.node].pods):
                    self._unbind(self.replicas[p], now)
                del self.nodes[a.node]
                self.version += 1

    # --- scaling ------------------------------------------------------------------------------------------

    def _hpa_pods(self, now: float) -> list[Pod]:
        out = []
        for r in self._service():
            if r.start_s > now:
                out.append(Pod(r.name, self.spec.request_m, PENDING, None, 0.0, None))
            elif r.ready_s <= now:
                out.append(Pod(r.name, self.spec.request_m, RUNNING, True, r.ready_s, r.start_s))
            else:
                out.append(Pod(r.name, self.spec.request_m, RUNNING, False, r.start_s, r.start_s))
        return out

    def _observe(self, now: float, rate: float) -> np.ndarray:
        """The learned scaler's history window after this sync (`scaler_obs`)."""
        if self.observer is None:
            self.observer = self.new_observer()
        service = self._service()
        ready = sum(1 for r in service if r.ready_s <= now)
        requests, bad = self.requests - self._seen[0], self.violating - self._seen[1]
        self._seen = (self.requests, self.violating)
        return self.observer.observe(now, rate, ready, len(service), bad / requests if requests > 0 else 0.0)

    def _sync(self, now: float, rate: float, action: int | None = None) -> None:
        current = len(self._service())
        if action is not None or self.learned is not None:
            if action is None:
                assert self.learned is not None
                action = self.learned.act(self._observe(now, rate))
            assert self.observer is not None  # made by _observe
            desired = self.observer.apply(action)
            self.hpa.next_sync_s = now + self.hpa.config.sync_period_s  # on the HPA's sync period, instead of it
        else:
            decision = self.hpa.reconcile(now, current, self._hpa_pods(now), self.ms.pod_metrics())
            desired = decision.desired
        if self.predictive is not None:
            self.predictive.observe(now, rate)
            desired = self.predictive.desired(desired)
        if self.expert_log is not None and action is None:  # imitation data: what this scaler did, as an action
            window = self._observe(now, rate).copy()
            assert self.observer is not None
            label = self.observer.nearest(desired)
            self.observer.apply(label)  # a step scaler's level follows the expert
            self.expert_log.append((window, label))
        desired = min(self.spec.max_replicas, max(self.spec.min_replicas, desired))
        if desired != current:
            self.scale_actions += 1
            self._set_count(now, False, desired)
        if self.cfg.scaler == "overprovision":
            headroom = max(self.cfg.overprovision_pods, math.ceil(self.cfg.overprovision_fraction * desired))
            self._set_count(now, True, headroom)

    # --- the loop -----------------------------------------------------------------------------------------

    def run(self) -> RunResult:
        """The whole run with the configured scaler."""
        loop = self._loop(external=False)
        try:
            next(loop)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]
        raise AssertionError("the loop yields only to an external scaler")

    def decisions(self) -> Generator[np.ndarray, int, RunResult]:
        """The run as a generator for an external scaler (training): it yields the learned scaler's observation at
        every sync and takes the action (`ScalerObserver.apply`'s, in `DriverConfig.actions`) sent back; returns the
        result."""
        return self._loop(external=True)

    def _loop(self, external: bool) -> Generator[np.ndarray, int, RunResult]:
        spec, cfg, dt = self.spec, self.cfg, self.cfg.step_s
        steps = math.ceil(self.load.duration_s / dt)
        times = self.load.start_s + dt * np.arange(steps)
        rates = self.load.at(times)
        needed = np.maximum(spec.min_replicas, spec.replicas_for(rates))
        initial = int(min(spec.max_replicas, needed[0]))
        if self._primed:
            assert self.observer is not None
            initial = max(initial, self.observer.target(OPENING_LEVEL))
        per_node = max(1, min(cfg.template.cpu_m // spec.request_m, cfg.template.mem_mib // spec.mem_mib))
        n0 = cfg.nodes if cfg.node_autoscaler == "none" else min(cfg.nodes, max(1, math.ceil(initial / per_node)))
        for i in range(n0):
            self._add_node(f"node-{i:04d}", None if cfg.node_autoscaler == "none" else "pool", -1.0, -1.0)
        for _ in range(initial):  # the service starts warm: its first replicas are ready at time 0
            self._new_pod(-1.0, False)
        self._schedule(-1.0)
        for r in self._service():
            r.start_s = r.ready_s = -1.0
        if cfg.scaler == "overprovision":
            self._set_count(-1.0, True, max(cfg.overprovision_pods, math.ceil(cfg.overprovision_fraction * initial)))
        self._k_pending: set[str] = set()
        n_service = initial

        minutes = math.ceil(self.load.duration_s / 60.0) + 1
        req_min, bad_min = np.zeros(minutes), np.zeros(minutes)
        ready_count = np.zeros(steps, dtype=np.int64)
        pods_count = np.zeros(steps, dtype=np.int64)
        replicas_count = np.zeros(steps, dtype=np.int64)
        nodes_count = np.zeros(steps, dtype=np.int64)
        in_burst = np.zeros(steps, dtype=bool)
        measured = times >= cfg.measure_from_s
        for a, b in self.load.bursts:
            in_burst[(times >= a) & (times < b)] = True
        burst_slow: list[np.ndarray] = []
        burst_w: list[np.ndarray] = []
        last_pending_check = -1
        seen_version, next_change = -1, -math.inf
        ready: list[_Replica] = []
        node_of = busy = cap = acc = np.zeros(0)
        bound = 0
        for k in range(steps):
            now = float(times[k])
            rate = float(rates[k])
            if now >= self._next_node_ready:
                self._next_node_ready = min((n.ready_s for n in self.nodes.values() if n.ready_s > now),
                                            default=math.inf)
                self.version += 1
            if self.version != last_pending_check or k % 5 == 0:
                self._schedule(now)
                last_pending_check = self.version
            if self.ms.due(now):
                _flush(ready, acc)
                acc = np.zeros(len(ready))
                self.ms.scrape(now, {r.name: (r.start_s, r.core_s) for r in self._service() if r.start_s <= now})
            if self.hpa.due(now):
                action = (yield self._observe(now, rate)) if external else None
                self._sync(now, rate, action)
            self._autoscale_nodes(now)
            if self.version != seen_version or now >= next_change:
                # The ready set changed (a bind, a removal, a replica became ready): recompute who serves.
                _flush(ready, acc)
                service = self._service()
                ready = [r for r in service if r.ready_s <= now]
                index = {n: i for i, n in enumerate(self.nodes)}
                node_of = np.fromiter((index[str(r.node)] for r in ready), np.int64, len(ready))
                busy = np.bincount(np.fromiter((index[str(r.node)] for r in service if r.node is not None
                                                and r.start_s <= now), np.int64), minlength=len(index))
                cap = np.full(len(index), float(cfg.template.cpu_m))
                acc = np.zeros(len(ready))
                bound = sum(1 for r in self.replicas.values() if r.node is not None)
                next_change = min((t for r in service for t in (r.start_s, r.ready_s) if t > now), default=math.inf)
                seen_version = self.version
                n_service = len(service)
            served = serve(spec, rate, node_of, cap, busy)
            acc += served.usage_m * (dt / 1000.0)
            self.requests += rate * dt
            self.violating += rate * dt * served.violating_share
            self.used_core_s += float(served.usage_m.sum()) * dt / 1000.0
            self.requested_core_s += bound * spec.request_m * dt / 1000.0
            if now < cfg.measure_from_s:
                continue
            m = int((now - self.load.start_s) // 60)
            req_min[m] += rate * dt
            bad_min[m] += rate * dt * served.violating_share
            if in_burst[k] and rate > 0:
                if ready:
                    burst_slow.append(served.slowdown)
                    burst_w.append(np.full(len(ready), rate * dt / len(ready)))
                else:
                    burst_slow.append(np.array([SATURATED_SLOWDOWN]))
                    burst_w.append(np.array([rate * dt]))
            ready_count[k] = len(ready)
            replicas_count[k] = n_service
            pods_count[k] = bound
            nodes_count[k] = len(self.nodes)
        m0 = int(np.argmax(measured)) if measured.any() else steps
        metrics = self.metrics_of(times[m0:], rates[m0:], needed[m0:], req_min, bad_min, ready_count[m0:],
                                  pods_count[m0:], nodes_count[m0:], burst_slow, burst_w)
        return RunResult(metrics,
                         per_minute(times, dt, rates, replicas_count, ready_count, needed, nodes_count))

    def metrics_of(self, times: np.ndarray, rates: np.ndarray, needed: np.ndarray, req_min: np.ndarray,
                   bad_min: np.ndarray, ready: np.ndarray, pods: np.ndarray, nodes: np.ndarray,
                   burst_slow: list[np.ndarray], burst_w: list[np.ndarray]) -> dict[str, Any]:
        """The metrics dict of a run's per-step arrays (also of a replay's sampled ones, drlsched.autoscale.replay)."""
        dt = self.cfg.step_s
        total = float(req_min.sum())
        share = np.divide(bad_min, req_min, out=np.zeros_like(bad_min), where=req_min > 0)
        replica_h = float(pods.sum()) * dt / 3600.0
        needed_h = float(needed.sum()) * dt / 3600.0
        p99 = None
        if burst_slow:
            s, w = np.concatenate(burst_slow), np.concatenate(burst_w)
            order = np.argsort(s)
            cum = np.cumsum(w[order])
            p99 = float(s[order][np.searchsorted(cum, 0.99 * cum[-1])])
        # Enough replicas: as many ready as the SLA needs (demand / limit at most 1 − 1/target, where the
        # slowdown reaches its target); time to scale: from a burst's start until enough from then on to its end.
        rho = 1.0 - 1.0 / self.spec.slowdown_target
        enough = ready >= np.ceil(rates * self.spec.cpu_per_rps_m / (rho * self.spec.limit_ratio * self.spec.request_m))
        ttscale = []
        for a, b in self.load.bursts:
            if times.size == 0 or a < times[0]:
                continue  # before the measured part
            inside = np.flatnonzero((times >= a) & (times < b))
            if inside.size == 0:
                continue
            short = np.flatnonzero(~enough[inside])
            ttscale.append(0.0 if short.size == 0 else float(min(times[inside[short[-1]]] + dt, b) - a))
        return {
            "scaler": self.cfg.scaler, "node_autoscaler": self.cfg.node_autoscaler, "policy": self.cfg.policy,
            "seed": self.seed, "duration_s": float(times.size * dt),
            "requests": total,
            "sla_violation_rate": float(bad_min.sum() / total) if total > 0 else 0.0,
            "violation_minutes": int(np.count_nonzero(share > VIOLATION_MINUTE_SHARE)),
            "slowdown_p99_burst": p99,
            "replica_hours": replica_h,
            "node_hours": float(nodes.sum()) * dt / 3600.0,
            "overprovision_ratio": replica_h / needed_h if needed_h > 0 else None,
            "scale_actions": self.scale_actions,
            "time_to_scale_p50_s": float(np.median(ttscale)) if ttscale else None,
            "bursts": len(ttscale),
            "peak_rps": float(rates.max()) if rates.size else 0.0,
        }


def _flush(ready: list[_Replica], acc: np.ndarray) -> None:
    """Fold the CPU the ready replicas used since the last flush into their counters."""
    for r, used in zip(ready, acc.tolist(), strict=True):
        r.core_s += used


def per_minute(times: np.ndarray, dt: float, rates: np.ndarray, replicas: np.ndarray, ready: np.ndarray,
                needed: np.ndarray, nodes: np.ndarray) -> dict[str, np.ndarray]:
    k = max(1, round(60.0 / dt))
    idx = np.arange(0, times.size, k)
    return {"minute": idx * dt / 60.0, "rate_rps": rates[idx], "replicas": replicas[idx], "ready": ready[idx],
            "needed": needed[idx], "nodes": nodes[idx]}
