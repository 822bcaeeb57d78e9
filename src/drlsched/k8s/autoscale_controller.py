"""`drlsched autoscale`: replicas ahead of predicted load for one workload, with the simulator's own scaler objects
(`drlsched.autoscale.predictive.PredictiveScaler`, and `hpa.HorizontalPodAutoscaler` as the reactive part).

Every pass (`period_s`, the HPA's 15 s by default) it reads the target's scale subresource, its pods and their
metrics.k8s.io samples (metrics-server: the usage the real HPA reads). The forecast is of the service's CPU
demand, Σ usage over ready pods in millicores (the request rate times the cost of a request, so the rate's
seasonality without needing the cost), folded into Holt-Winters; the replicas it needs `lead_s` ahead are
⌈demand × 100 / (target % × request)⌉, as `predictive` sizes them in the simulator. Two ways to apply that, chosen
by whether an HPA targets the workload:

- **an HPA exists → raise its `minReplicas`** (`mode = "hpa-floor"`). The real HPA stays the reactive part and the
  only writer of `spec.replicas`; it scales to max(its recommendation, minReplicas), which is exactly `predictive`'s
  max(reactive, forecast). Writing `spec.replicas` under an HPA would make two controllers fight over one field:
  the HPA resets it on its next sync. The HPA's own minimum is kept in the annotation `BASE_MIN_ANNOTATION` on
  first write, so the floor never drops below it and a restarted controller knows it.
- **no HPA → own `spec.replicas`** through the scale subresource (`mode = "replicas"`), with the simulator's HPA
  emulation (default behaviour) on the same pods and metrics as the reactive part: the very decision the
  simulator's `predictive` scaler makes.

The count stays within [min, max] (and within the HPA's maxReplicas). The floor recommendation is held at its
highest over the last `downscale_stabilization_s` (the HPA's 300 s), seeded with the count found at start, so a
restarted controller, whose forecast starts empty, never scales down on taking over; the emulated HPA does the
same for its part.

**Stale or missing metrics hold the current count**: when no ready pod has a sample newer than `stale_after_s`
(metrics-server down, the APIService unavailable, pods unscraped), nothing is written, the forecast gets no
sample, and a Warning Event `MetricsUnavailable` says so once per episode (Normal `MetricsRecovered` when they are
back). A workload at 0 replicas is left alone (the HPA's "scaling disabled"). The controller never scales to zero.

A target that is missing or not a scalable workload (a DaemonSet, a Pod, pods without CPU requests) is refused:
a Warning Event `NotScalable` on it and the controller stops (`refused` says why; the CLI exits 2).

Every replica of the controller reads and forecasts each pass (a standby's forecast is warm when it takes over);
only the leader writes (the Manager's gated client refuses anything else).

A step-action learned scaler (`--scaler ppo:PATH` of `train-scaler --actions step`) moves a multiplier level that
lasts until undone, so the level is state a restart would lose: the leader keeps it in the annotation
`LEVEL_ANNOTATION` on the target whenever it changes; a standby takes it from there every pass and a new leader
(or a restarted one) on its first pass as leader, so the count does not jump back to the opening level's.
"""

from __future__ import annotations

import json
import logging
import math
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import kubernetes

from drlsched.autoscale.hpa import Behavior, HorizontalPodAutoscaler, HPAConfig
from drlsched.autoscale.learned import LearnedScaler, load_scaler
from drlsched.autoscale.predictive import PredictiveConfig, PredictiveScaler
from drlsched.autoscale.replicas import RUNNING, Pod, PodMetric
from drlsched.autoscale.scaler_obs import MULTIPLIERS, OPENING_LEVEL, ScalerObserver
from drlsched.autoscale.services import ServiceSpec
from drlsched.k8s import prom
from drlsched.k8s.autoscale_target import (
    Target,
    TargetRefused,
    Workload,
    annotate,
    find_hpa,
    get_json,
    hpa_cpu_target,
    list_pods,
    pod_metrics,
    read_scale,
    resolve,
    write_scale,
)
from drlsched.k8s.client import request
from drlsched.k8s.events import EventRecorder

log = logging.getLogger("drlsched.k8s")
COMPONENT = "drlsched-autoscale"
BASE_MIN_ANNOTATION = "autoscale.drlsched.io/base-min-replicas"
LEVEL_ANNOTATION = "autoscale.drlsched.io/step-multiplier"
HPA_FLOOR, REPLICAS = "hpa-floor", "replicas"


@dataclass(frozen=True)
class AutoscaleConfig:
    min_replicas: int = 1
    max_replicas: int = 10
    target_utilization: int | None = None  # None: the HPA's CPU target, else 80
    period_s: float = 15.0
    stale_after_s: float = 60.0
    downscale_stabilization_s: float = 300.0
    step_s: float = 60.0
    season_s: float = 86_400.0
    lead_s: float = 180.0
    alpha: float = 0.5
    beta: float = 0.01
    gamma: float = 0.3
    learned: str | None = None  # ppo:PATH's path: the learned scaler of `drlsched train-scaler` decides


@dataclass
class Pass:
    """One pass's outcome, for `--once` and the tests."""

    mode: str = ""
    current: int | None = None  # spec.replicas (replicas mode) or minReplicas (hpa-floor mode) found
    desired: int | None = None  # what the pass set (or would set, on a standby)
    forecast_replicas: int | None = None
    reactive: int | None = None
    demand_m: float | None = None
    metrics: str = ""  # fresh | stale | missing
    action: str = ""  # scaled | held | unchanged | disabled
    message: str = ""
    multiplier: float | None = None  # a step scaler's level in force after the pass


@dataclass
class AutoscaleController:
    api: kubernetes.client.ApiClient
    target: Target
    config: AutoscaleConfig = field(default_factory=AutoscaleConfig)
    clock: Callable[[], float] = time.time
    stop: threading.Event = field(default_factory=threading.Event)
    recorder: EventRecorder | None = None
    workload: Workload | None = None
    refused: str | None = None
    predictive: PredictiveScaler | None = None
    hpa: HorizontalPodAutoscaler | None = None
    floor_history: list[tuple[int, float]] = field(default_factory=list)  # (floor recommendation, time)
    unavailable: bool = False  # in a stale/missing-metrics episode (its Event already recorded)
    last: Pass = field(default_factory=Pass)
    observer: ScalerObserver | None = None
    learned: LearnedScaler | None = field(default=None, init=False)
    # The clock metrics.k8s.io timestamps are on, where `clock` is another (a replay's workload time): sample ages
    # are measured on it, in its seconds.
    sample_clock: Callable[[], float] | None = None
    level_stored: int | None = field(default=None, init=False)  # the level LEVEL_ANNOTATION holds, as last seen
    led: bool = field(default=False, init=False)  # the previous pass was the leader's

    def __post_init__(self) -> None:
        self.learned = load_scaler(self.config.learned) if self.config.learned else None
        if self.recorder is None:
            self.recorder = EventRecorder(self.api, COMPONENT, stop=self.stop,
                                          post=lambda path, body: request(self.api, "POST", path, body))
        self.scale_writes = prom.Counter("drlsched_autoscale_writes_total",
                                         "Replica counts (or HPA minReplicas) written, by mode.")
        self.holds = prom.Counter("drlsched_autoscale_holds_total", "Passes that held the count, by reason.")
        self.desired_gauge = prom.CallbackGauge("drlsched_autoscale_desired_replicas", "The last pass's count.",
                                                lambda: float(self.last.desired or 0))

    def register(self, registry: prom.Registry) -> None:
        for metric in (self.scale_writes, self.holds, self.desired_gauge, self.events.outcomes):
            registry.add(metric)

    @property
    def events(self) -> EventRecorder:
        assert self.recorder is not None
        return self.recorder

    # --- a pass ----------------------------------------------------------------------------------------------

    def reconcile(self, leading: bool) -> Pass:
        """One pass (the Manager runs it on every replica; only a leading one writes)."""
        if self.refused is not None:
            return self.last
        if self.workload is None:
            try:
                self.workload = resolve(self.api, self.target)
            except TargetRefused as err:
                self.refused = str(err)
                log.error("%s", err)
                self.events.record(err.ref, self.target.namespace, "Warning", "NotScalable", str(err))
                self.stop.set()
                self.last = Pass(action="refused", message=str(err))
                return self.last
        now = self.clock()
        scale = read_scale(self.api, self.target)
        hpa = find_hpa(self.api, self.target)
        pods = list_pods(self.api, self.target.namespace, scale.selector)
        try:
            metrics = pod_metrics(self.api, self.target.namespace, scale.selector)
        except kubernetes.client.ApiException as err:  # 503/404: metrics-server or its APIService is gone
            log.info("autoscale %s: metrics.k8s.io answered %s", self.target, err.status)
            metrics = {}
        if self.sample_clock is not None:
            shift = now - self.sample_clock()
            metrics = {n: replace(m, timestamp_s=m.timestamp_s + shift) for n, m in metrics.items()}
        if self._steps() and not (leading and self.led):
            self._resume_level(hpa)
        self.led = leading
        self.last = self._decide(now, scale.replicas, hpa, pods, metrics)
        if leading:
            self._apply(hpa, self.last)
            self._store_level()
        return self.last

    def _steps(self) -> bool:
        return self.learned is not None and self.learned.actions == "step"

    def _resume_level(self, hpa: dict[str, Any] | None) -> None:
        """Take the level in force from the target's annotation (absent: keep this process's own)."""
        text = (get_json(self.api, self.target.path)["metadata"].get("annotations") or {}).get(LEVEL_ANNOTATION)
        if text is None:
            return
        try:
            level = MULTIPLIERS.index(float(text))
        except ValueError:
            if self.level_stored != -1:
                log.warning("autoscale %s: annotation %s=%r is none of the multipliers %s: keeping level %s",
                            self.target, LEVEL_ANNOTATION, text, MULTIPLIERS,
                            MULTIPLIERS[self.observer.level] if self.observer else MULTIPLIERS[OPENING_LEVEL])
            self.level_stored = -1  # rewritten with the level in force on the leader's next pass
            return
        self.observer = self.observer or self._observer(hpa)
        self.observer.resume(level)
        self.level_stored = level

    def _store_level(self) -> None:
        if not self._steps() or self.observer is None or self.observer.level == self.level_stored:
            return
        annotate(self.api, self.target, LEVEL_ANNOTATION, f"{MULTIPLIERS[self.observer.level]:g}")
        self.level_stored = self.observer.level

    def warm_start(self, history: Iterable[tuple[float, float]]) -> None:
        """Folds a history of the workload's CPU demand, (time on `clock`, millicores) in time order, into the
        forecast before the first pass, as if the controller had watched it (a replay that starts mid-day)."""
        self.workload = self.workload or resolve(self.api, self.target)
        hpa = find_hpa(self.api, self.target)
        if self.learned is None:
            feed = self._scalers(hpa)
        else:
            self.observer = self.observer or self._observer(hpa)
            feed = self.observer.forecast
        for t, demand in history:
            feed.observe(t, demand)

    def _target_utilization(self, hpa: dict[str, Any] | None) -> int:
        if self.config.target_utilization is not None:
            return self.config.target_utilization
        return (hpa_cpu_target(hpa) if hpa is not None else None) or 80

    def _bounds(self, hpa: dict[str, Any] | None) -> tuple[int, int]:
        low, high = self.config.min_replicas, self.config.max_replicas
        if hpa is not None:
            low = max(low, _base_min(hpa))
            high = min(high, int(hpa["spec"]["maxReplicas"]))
        return low, max(low, high)

    def _scalers(self, hpa: dict[str, Any] | None) -> PredictiveScaler:
        """Built on the first pass (the request and the HPA's target are known then), as the simulator's driver
        builds them: cost per request 1 (the series is CPU demand in millicores)."""
        c = self.config
        low, high = self._bounds(hpa)
        target = self._target_utilization(hpa)
        assert self.workload is not None
        if self.predictive is None:
            self.predictive = PredictiveScaler(PredictiveConfig(
                self.workload.request_m, 1.0, high, low, target, step_s=c.step_s, season_s=c.season_s,
                lead_s=c.lead_s, alpha=c.alpha, beta=c.beta, gamma=c.gamma))
        if hpa is None and self.hpa is None:
            self.hpa = HorizontalPodAutoscaler(HPAConfig(high, low, target, Behavior(),
                                                         sync_period_s=c.period_s,
                                                         downscale_stabilization_s=c.downscale_stabilization_s))
        return self.predictive

    def _decide(self, now: float, replicas: int, hpa: dict[str, Any] | None, pods: list[Pod],
                metrics: Mapping[str, PodMetric]) -> Pass:
        predictive = self._scalers(hpa)
        mode = HPA_FLOOR if hpa is not None else REPLICAS
        current = int(hpa["spec"].get("minReplicas") or 1) if hpa is not None else replicas
        ready = [p for p in pods if p.phase == RUNNING and p.ready and not p.deleting]
        fresh = {n: m for n, m in metrics.items() if now - m.timestamp_s <= self.config.stale_after_s}
        sampled = [fresh[p.name].value_m for p in ready if p.name in fresh]
        if replicas == 0:
            return Pass(mode, current, current, action="disabled", metrics="n/a",
                        message="the workload is at 0 replicas: scaling is disabled, as the HPA leaves it")
        if not sampled:
            state = "stale" if any(p.name in metrics for p in ready) else "missing"
            return Pass(mode, current, current, metrics=state, action="held",
                        message=f"no fresh metrics.k8s.io sample for any of {len(ready)} ready pods "
                                f"({state}, newer than {self.config.stale_after_s:.0f} s): holding {current} "
                                f"{'minReplicas' if hpa is not None else 'replicas'}")
        # Ready pods serve the load; those without a sample yet are taken to carry the sampled ones' average.
        demand = sum(sampled) * len(ready) / len(sampled)
        if self.learned is not None:
            return self._decide_learned(now, replicas, hpa, mode, current, len(ready), demand)
        predictive.observe(now, demand)
        forecast = predictive.replicas_for(predictive.forecast_rate())
        if hpa is not None:
            floor = self._stabilized(now, current, predictive.desired(0))
            return Pass(mode, current, floor, forecast, None, demand, "fresh")
        assert self.hpa is not None
        decision = self.hpa.reconcile(now, replicas, pods, {n: m for n, m in fresh.items()})
        reactive = decision.desired
        return Pass(mode, current, predictive.desired(reactive), forecast, reactive, demand, "fresh",
                    message=decision.error or "")

    def _decide_learned(self, now: float, replicas: int, hpa: dict[str, Any] | None, mode: str, current: int,
                        ready: int, demand: float) -> Pass:
        """The learned scaler's count from its history window, as in the simulator's driver: the load is the pods'
        CPU demand (cost per request 1 millicore), the window's violation share is 0 (a cluster does not
        report SLA violations to this controller; docs/kubernetes.md); the observer holds the target's base over
        `downscale_stabilization_s`, as in the driver."""
        assert self.learned is not None and self.workload is not None
        if self.observer is None:
            self.observer = self._observer(hpa)
        window = self.observer.observe(now, demand, ready, replicas, 0.0)
        desired = self.observer.apply(self.learned.act(window))
        forecast = math.ceil(self.observer.forecast_need) if self.observer.forecast_need else None
        multiplier = MULTIPLIERS[self.observer.level] if self._steps() else None
        if hpa is not None:
            desired = self._stabilized(now, current, desired)
        return Pass(mode, current, desired, forecast, None, demand, "fresh", multiplier=multiplier)

    def _observer(self, hpa: dict[str, Any] | None) -> ScalerObserver:
        assert self.workload is not None and self.learned is not None
        low, high = self._bounds(hpa)
        return ScalerObserver(ServiceSpec(request_m=self.workload.request_m, cpu_per_rps_m=1.0, min_replicas=low,
                                          max_replicas=high), hold_s=self.config.downscale_stabilization_s,
                              actions=self.learned.actions)

    def _stabilized(self, now: float, current: int, recommendation: int) -> int:
        """The highest floor recommended in the last stabilisation window (the first pass counts the floor found)."""
        window = self.config.downscale_stabilization_s
        if not self.floor_history:
            self.floor_history.append((current, now))
        self.floor_history = [(r, t) for r, t in self.floor_history if t > now - window] + [(recommendation, now)]
        return max(r for r, _ in self.floor_history)

    # --- writes ----------------------------------------------------------------------------------------------

    def _apply(self, hpa: dict[str, Any] | None, result: Pass) -> None:
        ref = self.target.ref(self.workload.uid if self.workload else "")
        ns = self.target.namespace
        if result.action == "held":
            self.holds.inc(reason=result.metrics)
            if not self.unavailable:
                self.unavailable = True
                log.warning("autoscale %s: %s", self.target, result.message)
                self.events.submit(ref, ns, "Warning", "MetricsUnavailable", result.message)
            return
        if result.action == "disabled":
            self.holds.inc(reason="disabled")
            return
        if self.unavailable:
            self.unavailable = False
            self.events.submit(ref, ns, "Normal", "MetricsRecovered",
                               f"metrics.k8s.io samples are fresh again: scaling resumes from {result.current}")
        if result.desired == result.current or result.desired is None or result.current is None:
            result.action = "unchanged"
            return
        if hpa is not None:
            self._write_floor(hpa, result.desired)
            what = f"HPA {hpa['metadata']['name']} minReplicas"
        else:
            write_scale(self.api, self.target, result.desired)
            what = "replicas"
        result.action = "scaled"
        self.scale_writes.inc(mode=result.mode)
        message = (f"{what} {result.current} -> {result.desired} (forecast needs {result.forecast_replicas} in "
                   f"{self.config.lead_s:.0f} s" + (f", reactive {result.reactive}" if result.reactive is not None
                                                    else "") + f"; demand {result.demand_m:.0f}m)")
        log.info("autoscale %s: %s", self.target, message)
        self.events.submit(ref, ns, "Normal", "ScaledAhead", message)

    def _write_floor(self, hpa: dict[str, Any], floor: int) -> None:
        meta = hpa["metadata"]
        annotations = {} if BASE_MIN_ANNOTATION in (meta.get("annotations") or {}) else {
            BASE_MIN_ANNOTATION: str(int(hpa["spec"].get("minReplicas") or 1))}
        patch: dict[str, Any] = {"spec": {"minReplicas": floor}}
        if annotations:
            patch["metadata"] = {"annotations": annotations}
        path = (f"/apis/autoscaling/v2/namespaces/{self.target.namespace}/horizontalpodautoscalers/"
                f"{meta['name']}")
        request(self.api, "PATCH", path, patch, content_type="application/merge-patch+json")


def _base_min(hpa: dict[str, Any]) -> int:
    """The HPA's own minReplicas, before this controller raised it."""
    stored = (hpa["metadata"].get("annotations") or {}).get(BASE_MIN_ANNOTATION)
    try:
        return max(1, int(stored)) if stored is not None else int(hpa["spec"].get("minReplicas") or 1)
    except ValueError:
        return int(hpa["spec"].get("minReplicas") or 1)


def describe_pass(result: Pass) -> str:
    return json.dumps(result.__dict__, sort_keys=True)
