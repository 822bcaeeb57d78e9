"""`drlsched autoscale` without a cluster: a fake apiserver serving one Deployment (its scale subresource, pods,
metrics.k8s.io samples and optionally an HPA) and recording what the controller writes. Scaling ahead of a
seasonal burst, the HPA floor, holding on stale or missing metrics with one Event, refusing unscalable targets,
a restart that does not scale down, a standby that never writes, and the CLI's one-line errors."""

from __future__ import annotations

import datetime as dt
import json
import math
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import kubernetes
import pytest
import yaml

from drlsched.cli import build_parser, main
from drlsched.k8s import autoscale_controller, autoscale_target
from drlsched.k8s.autoscale_controller import (
    BASE_MIN_ANNOTATION,
    LEVEL_ANNOTATION,
    AutoscaleConfig,
    AutoscaleController,
)
from drlsched.k8s.autoscale_target import go_duration_s, parse_target

from .test_deploy_reclaim import _permission

NS = "shop"
T0 = 1_800_000_000.0


def _stamp(t: float) -> str:
    return dt.datetime.fromtimestamp(t, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class FakeCluster:
    """A Deployment `web` (1 CPU per replica) whose ready pods follow spec.replicas at once, with per-pod usage
    `demand_m / replicas` sampled at `sample_t` (None: the metrics API answers 503)."""

    def __init__(self, replicas: int = 2, hpa: dict[str, Any] | None = None, kind: str = "deployments") -> None:
        self.replicas = replicas
        self.hpa = hpa
        self.kind = kind
        self.now = T0
        self.demand_m = 200.0
        self.sample_t: float | None = T0
        self.writes: list[tuple[str, str, Any]] = []
        self.exists = True
        self.annotations: dict[str, str] = {}

    def clock(self) -> float:
        return self.now

    def _pods(self) -> list[dict[str, Any]]:
        return [{"metadata": {"name": f"web-{i}"},
                 "spec": {"containers": [{"name": "app", "resources": {"requests": {"cpu": "1"}}}]},
                 "status": {"phase": "Running", "startTime": _stamp(T0 - 3600),
                            "conditions": [{"type": "Ready", "status": "True",
                                            "lastTransitionTime": _stamp(T0 - 3600)}]}}
                for i in range(self.replicas)]

    def __call__(self, api: object, method: str, path: str, body: Any = None, content_type: str = "",
                 gated: bool = True) -> bytes:
        del api, content_type, gated
        path = unquote(path)
        if method != "GET":
            self.writes.append((method, path, body))
            if path.endswith("/scale"):
                self.replicas = body["spec"]["replicas"]
            elif path == f"/apis/apps/v1/namespaces/{NS}/{self.kind}/web":
                self.annotations.update(body["metadata"]["annotations"])
            elif "horizontalpodautoscalers/" in path and self.hpa is not None:
                self.hpa["spec"].update(body["spec"])
                self.hpa["metadata"].setdefault("annotations", {}).update(
                    (body.get("metadata") or {}).get("annotations") or {})
            return b"{}"
        base = f"/apis/apps/v1/namespaces/{NS}/{self.kind}/web"
        if path == base:
            if not self.exists:
                raise kubernetes.client.ApiException(status=404, reason="Not Found")
            return json.dumps({"metadata": {"name": "web", "uid": "uid-web", "annotations": self.annotations},
                               "spec": {"template": {"spec": {
                "containers": [{"name": "app", "resources": {"requests": {"cpu": "1"}}}]}}}}).encode()
        if path == f"{base}/scale":
            return json.dumps({"spec": {"replicas": self.replicas}, "status": {"selector": "app=web"}}).encode()
        if path.endswith("/horizontalpodautoscalers"):
            return json.dumps({"items": [self.hpa] if self.hpa else []}).encode()
        if path.startswith(f"/api/v1/namespaces/{NS}/pods"):
            return json.dumps({"items": self._pods()}).encode()
        if path.startswith(f"/apis/metrics.k8s.io/v1beta1/namespaces/{NS}/pods"):
            if self.sample_t is None:
                raise kubernetes.client.ApiException(status=503, reason="Service Unavailable")
            share = math.ceil(self.demand_m / max(1, self.replicas))
            return json.dumps({"items": [
                {"metadata": {"name": p["metadata"]["name"]}, "timestamp": _stamp(self.sample_t), "window": "10s",
                 "containers": [{"name": "app", "usage": {"cpu": f"{share}m"}}]} for p in self._pods()]}).encode()
        raise kubernetes.client.ApiException(status=404, reason="Not Found")

    def posts(self, controller: AutoscaleController) -> list[dict[str, Any]]:
        controller.events.drain()
        return [b for m, p, b in self.writes if m == "POST" and p.endswith("/events")]

    def scale_writes(self) -> list[int]:
        return [b["spec"]["replicas"] for m, p, b in self.writes if p.endswith("/scale")]


_BUILT: list[AutoscaleController] = []


@pytest.fixture(autouse=True)
def _drain_events(monkeypatch: pytest.MonkeyPatch) -> Any:
    """Post every test's queued Events before its fake goes: the recorder posts from a thread through the module's
    `request`, which the next test patches to its own fake."""
    yield
    while _BUILT:
        _BUILT.pop().events.drain()


def _controller(monkeypatch: pytest.MonkeyPatch, fake: FakeCluster, target: str = f"{NS}/web",
                **cfg: Any) -> AutoscaleController:
    monkeypatch.setattr(autoscale_controller, "request", fake)
    monkeypatch.setattr(autoscale_target, "request", fake)
    config = AutoscaleConfig(**{"max_replicas": 20, "period_s": 15.0, **cfg})
    controller = AutoscaleController(None, parse_target(target), config, clock=fake.clock)  # type: ignore[arg-type]
    _BUILT.append(controller)
    return controller


def _hpa(min_replicas: int = 2, max_replicas: int = 10) -> dict[str, Any]:
    return {"metadata": {"name": "web-hpa"},
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                     "minReplicas": min_replicas, "maxReplicas": max_replicas,
                     "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {
                         "type": "Utilization", "averageUtilization": 50}}}]}}


def _burst(t: float, season: float = 600.0) -> float:
    """Demand (millicores): 400m most of the season, 4000m for its last 120 s."""
    return 4000.0 if t % season >= season - 120.0 else 400.0


def _run(fake: FakeCluster, controller: AutoscaleController, until: float, leading: bool = True) -> list[Any]:
    out = []
    while fake.now < until:
        fake.demand_m = _burst(fake.now - T0)
        fake.sample_t = fake.now
        out.append((fake.now - T0, controller.reconcile(leading)))
        fake.now += 15.0
    return out


def test_without_an_hpa_it_owns_replicas_and_scales_before_a_seasonal_burst(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeCluster(replicas=1)
    controller = _controller(monkeypatch, fake, step_s=30.0, season_s=600.0, lead_s=90.0, target_utilization=80,
                             downscale_stabilization_s=30.0)
    passes = _run(fake, controller, T0 + 3 * 600.0)
    assert {p.mode for _, p in passes} == {"replicas"}
    # Third season: before its burst (at 480 s) the forecast has already raised replicas to what 4000m needs at
    # 80% of 1 CPU (5), while the reactive part (the HPA emulation) still asks for what 400m needs.
    before = [(t, p) for t, p in passes if 1200.0 + 400.0 <= t < 1200.0 + 480.0]
    assert before and max(p.desired for _, p in before) >= 5
    assert all(p.reactive is not None and p.reactive < 5 for _, p in before)
    assert fake.replicas >= 1 and max(fake.scale_writes()) <= 20
    assert all(p.desired >= 1 for _, p in passes)  # never to zero
    scaled = [e for e in fake.posts(controller) if e["reason"] == "ScaledAhead"]
    assert scaled and scaled[0]["involvedObject"]["kind"] == "Deployment" and scaled[0]["type"] == "Normal"


def test_with_an_hpa_it_raises_min_replicas_and_never_writes_the_scale(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeCluster(replicas=2, hpa=_hpa(min_replicas=2, max_replicas=8))
    controller = _controller(monkeypatch, fake, step_s=30.0, season_s=600.0, lead_s=90.0,
                             downscale_stabilization_s=30.0)
    passes = _run(fake, controller, T0 + 3 * 600.0)
    assert {p.mode for _, p in passes} == {"hpa-floor"}
    assert fake.scale_writes() == []
    floors = [b["spec"]["minReplicas"] for m, p, b in fake.writes if "horizontalpodautoscalers/web-hpa" in p]
    # At the HPA's 50% target 4000m needs 8 replicas; the floor never leaves [the HPA's own min 2, its max 8].
    assert max(floors) == 8 and min(floors) >= 2
    assert fake.hpa is not None and fake.hpa["metadata"]["annotations"][BASE_MIN_ANNOTATION] == "2"
    # The stored minimum is the HPA's own, not a floor this controller wrote.
    assert sum(1 for m, p, b in fake.writes if (b.get("metadata") or {}).get("annotations")) == 1


@pytest.mark.parametrize("failure", ["stale", "missing"])
def test_stale_or_missing_metrics_hold_the_count_with_one_event(monkeypatch: pytest.MonkeyPatch,
                                                                failure: str) -> None:
    fake = FakeCluster(replicas=4)
    controller = _controller(monkeypatch, fake, stale_after_s=60.0)
    fake.demand_m = 400.0  # what 1 replica serves: fresh metrics would scale down (after stabilisation)
    for _ in range(30):
        if failure == "stale":
            fake.sample_t = T0 - 120.0
        else:
            fake.sample_t = None
        result = controller.reconcile(True)
        assert result.action == "held" and result.metrics == failure and result.desired == 4
        fake.now += 15.0
    assert fake.scale_writes() == [] and fake.replicas == 4
    events = fake.posts(controller)
    assert [(e["type"], e["reason"]) for e in events] == [("Warning", "MetricsUnavailable")]
    assert "holding 4 replicas" in events[0]["message"]
    fake.sample_t = fake.now
    assert controller.reconcile(True).metrics == "fresh"
    assert [e["reason"] for e in fake.posts(controller)][-1] == "MetricsRecovered"


def test_a_workload_at_zero_replicas_is_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeCluster(replicas=0)
    controller = _controller(monkeypatch, fake)
    assert controller.reconcile(True).action == "disabled"
    assert fake.writes == []


@pytest.mark.parametrize(("target", "kind", "exists"), [
    (f"{NS}/daemonset/web", "DaemonSet", True),
    (f"{NS}/web", "Deployment", False),
])
def test_an_unscalable_or_missing_target_is_refused_with_an_event(monkeypatch: pytest.MonkeyPatch, target: str,
                                                                  kind: str, exists: bool) -> None:
    fake = FakeCluster(kind="daemonsets" if kind == "DaemonSet" else "deployments")
    fake.exists = exists
    controller = _controller(monkeypatch, fake, target=target)
    result = controller.reconcile(True)
    assert result.action == "refused" and controller.refused and controller.stop.is_set()
    (event,) = fake.posts(controller)
    assert (event["type"], event["reason"], event["involvedObject"]["kind"]) == ("Warning", "NotScalable", kind)
    assert fake.scale_writes() == []


def test_a_restarted_controller_does_not_scale_down_while_its_forecast_is_empty(
        monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeCluster(replicas=6)  # a previous controller scaled up; its forecast died with it
    controller = _controller(monkeypatch, fake, downscale_stabilization_s=300.0)
    fake.demand_m = 2400.0  # what 3 replicas serve at 80%
    counts = []
    for _ in range(19):  # 270 s, inside the stabilisation window
        fake.sample_t = fake.now
        counts.append(controller.reconcile(True).desired)
        fake.now += 15.0
    assert counts == [6] * 19 and fake.scale_writes() == []


def test_the_hpa_floor_is_held_after_a_restart(monkeypatch: pytest.MonkeyPatch) -> None:
    hpa = _hpa(min_replicas=7, max_replicas=10)
    hpa["metadata"]["annotations"] = {BASE_MIN_ANNOTATION: "2"}  # raised to 7 by the previous controller
    fake = FakeCluster(replicas=7, hpa=hpa)
    controller = _controller(monkeypatch, fake, downscale_stabilization_s=300.0)
    for _ in range(10):
        fake.sample_t = fake.now
        assert controller.reconcile(True).desired == 7
        fake.now += 15.0
    assert fake.writes == []


def test_a_standby_forecasts_but_never_writes(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeCluster(replicas=1)
    controller = _controller(monkeypatch, fake, step_s=30.0, season_s=600.0, lead_s=90.0)
    passes = _run(fake, controller, T0 + 2 * 600.0, leading=False)
    assert fake.writes == []
    assert controller.predictive is not None and controller.predictive.model.count > 20
    assert max(p.desired for _, p in passes) > 1  # it knows what it would set on taking over


def test_targets_and_durations_parse() -> None:
    assert str(parse_target("shop/web")) == "shop/deployment/web"
    assert parse_target("shop/statefulset/db").path == "/apis/apps/v1/namespaces/shop/statefulsets/db"
    assert parse_target("shop/DaemonSet/agent").path == "/apis/apps/v1/namespaces/shop/daemonsets/agent"
    pod = parse_target("shop/pod/p")
    assert not pod.scalable and pod.path == "/api/v1/namespaces/shop/pods/p"
    assert go_duration_s("10s") == 10.0 and go_duration_s("1m0.5s") == 60.5 and go_duration_s("500ms") == 0.5
    with pytest.raises(ValueError):
        go_duration_s("10 parsecs")


@pytest.mark.parametrize(("args", "message"), [
    (["--min-replicas", "5", "--max-replicas", "3"], "--min-replicas 5 is above --max-replicas 3"),
    (["--min-replicas", "0"], "never scales to zero"),
    (["--scaler", "ppo:model.pt"], "does not exist"),
    (["--scaler", "magic"], "unknown --scaler"),
    (["--target", "web"], "--target must be NAMESPACE/DEPLOYMENT"),
    (["--target", "shop/lambda/web"], "unknown kind"),
    (["--lead", "-1"], "lead time"),
])
def test_bad_options_are_one_line_and_exit_2(capsys: pytest.CaptureFixture[str], args: list[str],
                                             message: str) -> None:
    base = {"--scaler": "predictive", "--target": "shop/web", "--max-replicas": "10"}
    for flag, value in zip(args[::2], args[1::2], strict=True):
        base[flag] = value
    argv = ["autoscale", "--kubeconfig", "/nonexistent"] + [x for kv in base.items() for x in kv]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1


MANIFEST = Path(__file__).resolve().parents[2] / "deploy" / "autoscale-controller.yaml"


def test_the_manifest_runs_a_command_drlsched_accepts_and_its_rbac_covers_every_call(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    objects = [o for o in yaml.safe_load_all(MANIFEST.read_text()) if o]
    (deployment,) = [o for o in objects if o["kind"] == "Deployment"]
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    args = build_parser().parse_args(container["command"][1:])
    assert args.func.__name__ == "_autoscale" and args.leader_elect is True and args.kubeconfig is None
    target = parse_target(args.target)
    (binding,) = [o for o in objects if o["kind"] == "RoleBinding" and o["roleRef"]["kind"] == "ClusterRole"]
    assert binding["metadata"]["namespace"] == target.namespace
    rules = [r for o in objects if o["kind"] == "ClusterRole" for r in o["rules"]]
    calls: list[tuple[str, str]] = []
    # both modes, each scaling once; and a step scaler, which also keeps its level on the target
    for hpa, learned in ((None, None), (_hpa(), None), (None, _step_policy(tmp_path, 2))):
        fake = FakeCluster(replicas=1, hpa=hpa)
        fake.demand_m = 6000.0
        controller = _controller(monkeypatch, fake, learned=learned)  # in NS: the binding's rules
        recorded = fake.__call__

        def recording(api: object, method: str, path: str, body: Any = None, content_type: str = "",
                      gated: bool = True, recorded: Any = recorded) -> bytes:
            calls.append((method, path.split("?")[0]))
            return recorded(api, method, path, body, content_type, gated)  # type: ignore[no-any-return]

        monkeypatch.setattr(autoscale_controller, "request", recording)
        monkeypatch.setattr(autoscale_target, "request", recording)
        actions = []
        for _ in range(12):  # the floor rises once the forecast has a bucket (60 s)
            fake.sample_t = fake.now
            actions.append(controller.reconcile(True).action)
            fake.now += 15.0
        assert "scaled" in actions
        controller.events.drain()
    assert {m for m, _ in calls} == {"GET", "PATCH", "POST"}
    for method, path in calls:
        group, resource, verb = _permission(method, path)
        assert any(group in r["apiGroups"] and resource in r["resources"] and verb in r["verbs"] for r in rules), \
            (method, path)
    (lease_role,) = [o for o in objects if o["kind"] == "Role"]
    assert lease_role["metadata"]["namespace"] == deployment["metadata"]["namespace"]
    assert lease_role["rules"][0]["verbs"] == ["get", "create", "update"]


def _step_policy(tmp_path: Path, step: int) -> str:
    """A step-action checkpoint (spec 3) that always takes `step` (0 down, 1 keep, 2 up)."""
    import torch

    from drlsched.autoscale.learned import ScalerNet, ScalerNetConfig, save_scaler

    net = ScalerNet(ScalerNetConfig(encoder="none"), actions="step")
    with torch.no_grad():
        net.actor[-1].weight.zero_()
        net.actor[-1].bias.copy_(torch.tensor([10.0 * (a == step) for a in range(3)]))
    path = tmp_path / f"step-{step}.pt"
    save_scaler(path, net, {"kind": "scaler"})
    return str(path)


def test_a_step_scaler_climbs_one_level_per_pass(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A step-action policy that always steps up: the controller keeps its level across passes, 1.6, 1.8, 2.0, 2.5,
    3.0 × 2400m / 1000m, then stays at the top; the level in force is on the target's annotation."""
    fake = FakeCluster(replicas=2)
    controller = _controller(monkeypatch, fake, learned=_step_policy(tmp_path, 2))
    fake.demand_m = 2400.0
    desired, levels = [], []
    for _ in range(6):
        result = controller.reconcile(True)
        desired.append(result.desired)
        levels.append(result.multiplier)
        fake.now += 15.0
        fake.sample_t = fake.now
    assert desired == [4, 5, 5, 6, 8, 8]
    assert levels == [1.6, 1.8, 2.0, 2.5, 3.0, 3.0]
    assert fake.annotations == {LEVEL_ANNOTATION: "3"}
    workload = f"/apis/apps/v1/namespaces/{NS}/deployments/web"
    assert len([b for m, p, b in fake.writes if m == "PATCH" and p == workload]) == 5  # only when the level changes


def test_a_step_scalers_level_survives_a_restart_and_a_standby_follows_it(monkeypatch: pytest.MonkeyPatch,
                                                                        tmp_path: Path) -> None:
    """The leader climbs to 1.8; a standby takes the leader's level each pass (and never writes); a successor that
    only keeps continues at 1.8 (5 replicas), not at the opening 1.5 (4)."""
    fake = FakeCluster(replicas=2)
    fake.demand_m = 2400.0
    up, keep = _step_policy(tmp_path, 2), _step_policy(tmp_path, 1)
    leader = _controller(monkeypatch, fake, learned=up)
    standby = _controller(monkeypatch, fake, learned=up)
    seen = []
    for _ in range(2):
        assert leader.reconcile(True).multiplier is not None
        leader.events.drain()  # its Event is posted from a thread: not the standby's write
        writes = len(fake.writes)
        seen.append(standby.reconcile(False).multiplier)  # the leader's level, then its own step up
        assert len(fake.writes) == writes
        fake.now += 15.0
        fake.sample_t = fake.now
    assert seen == [1.8, 2.0] and fake.annotations == {LEVEL_ANNOTATION: "1.8"}
    successor = _controller(monkeypatch, fake, learned=keep)
    first = successor.reconcile(True)
    assert (first.multiplier, first.desired) == (1.8, 5)
    fresh = FakeCluster(replicas=2)
    fresh.demand_m = 2400.0
    alone = _controller(monkeypatch, fresh, learned=keep)
    assert alone.reconcile(True).desired == 4  # no annotation: the opening level


def test_a_bad_level_annotation_is_logged_and_overwritten(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                           caplog: pytest.LogCaptureFixture) -> None:
    fake = FakeCluster(replicas=2)
    fake.demand_m = 2400.0
    fake.annotations[LEVEL_ANNOTATION] = "7"
    controller = _controller(monkeypatch, fake, learned=_step_policy(tmp_path, 1))
    with caplog.at_level("WARNING", logger="drlsched.k8s"):
        result = controller.reconcile(True)
    assert (result.multiplier, result.desired) == (1.5, 4)
    assert "is none of the multipliers" in caplog.text
    assert fake.annotations == {LEVEL_ANNOTATION: "1.5"}


def test_a_learned_scaler_sets_the_count_from_its_window(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """`--scaler ppo:PATH`: the policy's multiplier on the pods' CPU demand (in replicas of 1 CPU) sets the count;
    a placement checkpoint given instead is one line, exit 2."""
    import torch

    from drlsched.autoscale.learned import ScalerNet, ScalerNetConfig, save_scaler
    from drlsched.autoscale.scaler_obs import MULTIPLIERS

    net = ScalerNet(ScalerNetConfig(encoder="none"))
    with torch.no_grad():  # a policy that always picks m = 2.0
        net.actor[-1].weight.zero_()
        net.actor[-1].bias.copy_(torch.tensor([10.0 if m == 2.0 else 0.0 for m in MULTIPLIERS]))
    path = tmp_path / "policy.pt"
    save_scaler(path, net, {"kind": "scaler"})
    fake = FakeCluster(replicas=2)
    controller = _controller(monkeypatch, fake, learned=str(path))
    fake.demand_m = 2400.0
    result = controller.reconcile(True)
    assert (result.mode, result.desired, result.metrics) == ("replicas", 5, "fresh")  # ⌈2.0 × 2400m / 1000m⌉
    assert fake.scale_writes() == [5]
    fake.demand_m = 1200.0  # the target falls to 3, held at 5 through the scale-down stabilisation window
    held = []
    for _ in range(25):
        fake.now += 15.0
        fake.sample_t = fake.now
        held.append(controller.reconcile(True).desired)
    assert held == [5] * 20 + [3] * 5  # the high base leaves the 300 s window after it (at the cutoff it counts)
    from drlsched.rl.checkpoint import save_policy
    from drlsched.rl.network import NetConfig, SchedulerNet

    placement = tmp_path / "placement.pt"
    save_policy(placement, SchedulerNet(NetConfig()), "ppo", {})
    base = ["autoscale", "--kubeconfig", "/nonexistent", "--target", "shop/web", "--max-replicas", "10"]
    assert main([*base, "--scaler", f"ppo:{placement}"]) == 2
    assert main([*base, "--scaler", f"ppo:{tmp_path / 'missing.pt'}"]) == 2


@pytest.mark.parametrize("warm", [True, False])
def test_a_warm_start_forecasts_on_its_first_pass_on_a_workload_clock(monkeypatch: pytest.MonkeyPatch,
                                                                      warm: bool) -> None:
    # A replay's controller: its clock is workload time (far from the epoch the metrics carry), the samples' ages
    # are measured on the real clock, and two seasons of demand are folded in before its first pass.
    fake = FakeCluster(replicas=1)
    w0 = T0 + 1e6  # workload time: a sample stamped now on the real clock would be 1e6 s old on it
    controller = _controller(monkeypatch, fake, step_s=30.0, season_s=600.0, lead_s=90.0, target_utilization=80,
                             stale_after_s=60.0)
    controller.clock = lambda: w0 + 1200.0 + 400.0 + (fake.now - T0)
    controller.sample_clock = fake.clock
    if warm:
        controller.warm_start((w0 + t, _burst(t)) for t in range(0, 1200 + 400, 15))
    fake.demand_m = 400.0
    result = controller.reconcile(True)
    assert result.metrics == "fresh"
    # 80 s before the third burst: only a forecast that has seen two seasons asks for what 4000m needs (5).
    assert (result.desired >= 5) == warm and result.reactive is not None and result.reactive < 5
