"""The scaler replay without a cluster: the window it picks, the metrics of a sampled timeline (worked by hand), the
usage a pod reports, the HPA it writes, the simulator on the window, and the CLI's bad input."""

import numpy as np
import pytest

from drlsched.autoscale.cli_replay import plan_from_args
from drlsched.autoscale.driver import DriverConfig
from drlsched.autoscale.load import LoadCurve
from drlsched.autoscale.replay import (
    Plan,
    Sample,
    compare,
    deployment,
    hpa_manifest,
    make_plan,
    measure,
    simulate_window,
    usage_m,
)
from drlsched.autoscale.services import ServiceSpec
from drlsched.cli import build_parser, main
from drlsched.errors import UserError

SPEC = ServiceSpec(max_replicas=40)  # 1 core a replica, limit 2 cores, 10m a request
NODES = {f"n{i}": 8000 for i in range(4)}


def _flat_burst() -> LoadCurve:
    """10 minutes at 100 rps (1 core of demand), minutes 3-5 at 1000 rps (10 cores): one burst, [180, 360) s."""
    rate = np.r_[np.full(3, 100.0), np.full(3, 1000.0), np.full(4, 100.0)]
    return LoadCurve(rate, 60.0, 0.0, ((180.0, 360.0),))


def _plan(load: LoadCurve, speedup: float = 5.0) -> Plan:
    return Plan(SPEC, DriverConfig(nodes=4), load, load, speedup)


def _sample(t: float, ready: int, replicas: int | None = None) -> Sample:
    nodes = tuple(f"n{i % 4}" for i in range(ready))
    return Sample(t, nodes, nodes, ready, replicas if replicas is not None else ready, 4)


def test_measure_a_late_scale_up_by_hand() -> None:
    # 2 ready replicas until 240 s, then 13 (each on its own share of 4 nodes): the burst's first minute has
    # 10 cores of demand over 2 replicas of at most 2 cores (saturated, every request violates), later 10/13 of a
    # core each (utilisation 0.38 of 2 cores: slowdown 1.6, under the 4x target).
    samples = [_sample(0.0, 2), _sample(200.0, 2, 13), _sample(240.0, 13)]
    metrics, series = measure(_plan(_flat_burst()), samples, NODES)
    assert metrics["violation_minutes"] == 1
    assert metrics["sla_violation_rate"] == pytest.approx(60 * 1000 / (7 * 60 * 100 + 3 * 60 * 1000))
    assert metrics["replica_hours"] == pytest.approx((2 * 240 + 13 * 360) / 3600)
    assert metrics["time_to_scale_p50_s"] == pytest.approx(60.0)
    assert metrics["scale_actions"] == 1  # spec.replicas changed once (2 -> 13)
    assert series["ready"].tolist() == [2, 2, 2, 2, 13, 13, 13, 13, 13, 13]
    assert series["replicas"].tolist()[3:5] == [2, 13]  # spec.replicas raised at 200 s


def test_measure_enough_replicas_all_along_has_no_violation() -> None:
    metrics, _ = measure(_plan(_flat_burst()), [_sample(0.0, 13)], NODES)
    assert metrics["violation_minutes"] == 0 and metrics["sla_violation_rate"] == 0.0
    assert metrics["time_to_scale_p50_s"] == 0.0


def test_measure_packed_replicas_share_their_node() -> None:
    # 8 replicas on one 8-core node get 1 core each (CFS shares by request), not their 2-core limit: at 10 cores of
    # demand they saturate, where spread over 4 nodes they would not.
    packed = Sample(0.0, ("n0",) * 8, ("n0",) * 8, 8, 8, 4)
    spread = _sample(0.0, 8)
    worse, _ = measure(_plan(_flat_burst()), [packed], NODES)
    fine, _ = measure(_plan(_flat_burst()), [spread], NODES)
    assert worse["violation_minutes"] == 3 and fine["violation_minutes"] == 0


@pytest.mark.parametrize("samples", [[], [_sample(10.0, 2), _sample(5.0, 2)]])
def test_measure_refuses_no_or_unordered_samples(samples: list[Sample]) -> None:
    with pytest.raises(ValueError):
        measure(_plan(_flat_burst()), samples, NODES)


def test_usage_follows_serve() -> None:
    assert usage_m(SPEC, 100.0, 4, 8000, 4) == 250  # its share of 1 core of demand
    assert usage_m(SPEC, 1000.0, 2, 8000, 2) == 2000  # capped at the 2-core limit
    assert usage_m(SPEC, 1000.0, 6, 2000, 3) == 1000  # 3 on a 2-core node: their request, at least
    assert usage_m(SPEC, 0.0, 3, 8000, 3) == 1 and usage_m(SPEC, 50.0, 0, 8000, 0) == 1  # kwok's 1m floor


def test_compare_side_by_side() -> None:
    sim = simulate_window(_plan(_flat_burst()))
    real = {**sim.metrics, "violation_minutes": sim.metrics["violation_minutes"] + 1, "source": "replay"}
    series = {**sim.series, "ready": sim.series["ready"] * 2}
    out = compare(real, series, sim)
    assert out["replica_hours"]["rel_diff"] == 0.0 and "source" not in out
    v = out["violation_minutes"]
    assert v["real"] == v["sim"] + 1
    assert out["ready_curve_mard"] == pytest.approx(1.0)


def test_hpa_manifest_divides_the_periods() -> None:
    spec = hpa_manifest(_plan(_flat_burst(), speedup=5.0))["spec"]
    up, down = spec["behavior"]["scaleUp"], spec["behavior"]["scaleDown"]
    assert {p["periodSeconds"] for p in up["policies"]} == {3} and {p["type"] for p in up["policies"]} == {
        "Percent", "Pods"}
    assert down["stabilizationWindowSeconds"] == 60
    assert spec["metrics"][0]["resource"]["target"]["averageUtilization"] == 80


def _flash_sale_plan(scaler: str, speedup: float = 5.0, duration: float | None = None,
                     node_autoscaler: str = "none") -> Plan:
    argv = ["replay", "--scenario", "flash-sale", "--scaler", scaler, "--nodes", "6", "--speedup", str(speedup),
            "--node-autoscaler", node_autoscaler, "--kubeconfig", "k", "--json", "-"]
    return plan_from_args(build_parser().parse_args(argv + (["--duration", str(duration)] if duration else [])))


def test_plan_replays_the_second_days_sale_with_the_first_as_history() -> None:
    plan = _flash_sale_plan("hpa")
    (a, b), = plan.window.bursts
    assert plan.window.start_s > 86_400.0 and plan.window.start_s <= a - 600.0 + plan.load.step_s
    assert plan.end_s == pytest.approx(b + 600.0, abs=plan.load.step_s)
    history = plan.history()
    assert history[0][0] == 0.0 and history[-1][0] < plan.window.start_s
    assert np.diff([t for t, _ in history]).max() == 15.0
    short = _flash_sale_plan("hpa", duration=900.0)
    assert short.window.duration_s == pytest.approx(900.0, abs=short.load.step_s)


def test_the_warm_started_forecast_scales_before_the_sale_and_hpa_after() -> None:
    runs = {s: simulate_window(_flash_sale_plan(s)) for s in ("hpa", "predictive")}
    (a, _), = _flash_sale_plan("hpa").window.bursts
    opens = int((a - _flash_sale_plan("hpa").window.start_s) // 60)  # the minute the sale opens in
    ready = {s: r.series["ready"] for s, r in runs.items()}
    assert ready["predictive"][opens] > ready["hpa"][opens]
    assert runs["predictive"].metrics["violation_minutes"] < runs["hpa"].metrics["violation_minutes"]


def test_plan_bad_speedup() -> None:
    with pytest.raises(UserError):
        _flash_sale_plan("hpa", speedup=20.0)


def test_plan_needs_a_burst_and_a_node_autoscaler_the_cluster_runs() -> None:
    flat = LoadCurve(np.full(10, 5.0), 60.0)
    with pytest.raises(UserError):
        make_plan(SPEC, flat, DriverConfig(), 5.0)
    with pytest.raises(UserError, match="Karpenter"):
        make_plan(SPEC, _flat_burst(), DriverConfig(node_autoscaler="cluster-autoscaler"), 5.0)
    assert make_plan(SPEC, _flat_burst(), DriverConfig(node_autoscaler="karpenter"), 5.0).config.node_autoscaler \
        == "karpenter"


def test_karpenter_as_replayed_runs_its_periods_on_the_real_clock() -> None:
    plan = _flash_sale_plan("hpa", node_autoscaler="karpenter")
    karpenter = plan.config.karpenter
    slowed = karpenter.slowed(plan.speedup)
    assert (slowed.batch_idle_s, slowed.batch_max_s, slowed.poll_s, slowed.validation_s) == (
        karpenter.batch_idle_s * 5, karpenter.batch_max_s * 5, karpenter.poll_s * 5, karpenter.validation_s * 5)
    runs = {r: simulate_window(plan, as_replayed=r) for r in (True, False)}
    nodes = {r: np.asarray(run.series["nodes"]) for r, run in runs.items()}
    # Both start from the nodes the first replicas need and add nodes for the sale.
    assert nodes[True][0] == nodes[False][0] == 1 and nodes[True].max() > 1 and nodes[False].max() > 1
    assert runs[True].metrics["node_hours"] > 0 and runs[True].metrics["node_autoscaler"] == "karpenter"


def test_the_deployment_runs_on_the_pool_it_is_given() -> None:
    spec = deployment(SPEC, 3, "pool-replay")["spec"]["template"]["spec"]
    assert spec["nodeSelector"] == {"karpenter.sh/nodepool": "pool-replay"}
    assert "nodeSelector" not in deployment(SPEC, 3)["spec"]["template"]["spec"]


@pytest.mark.parametrize("argv", [
    ["--scenario", "spark-tpcds", "--scaler", "hpa"],
    ["--scenario", "flash-sale"],
    ["--scenario", "flash-sale", "--scaler", "nope"],
    ["--scenario", "flash-sale", "--scaler", "hpa", "--speedup", "30"],
    ["--scenario", "flash-sale", "--scaler", "hpa", "--min-replicas", "9", "--max-replicas", "3"],
])
def test_cli_bad_input_exits_2(argv: list[str], tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["replay", *argv, "--kubeconfig", str(tmp_path / "missing"), "--json", "-"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "error" in err[0]
    assert "kubeconfig" not in err[0]  # refused before the cluster is asked


def test_cli_a_good_replay_without_a_cluster_asks_for_one(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["replay", "--scenario", "flash-sale", "--scaler", "hpa", "--nodes", "6", "--kubeconfig",
                 str(tmp_path / "missing"), "--json", "-"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "kubeconfig" in err[0]


def test_a_compressed_metrics_server_gives_a_fresh_container_no_early_point() -> None:
    # On the cluster the fresh-container rule (a container 10 s to one resolution old gets a point at its start)
    # runs on the real clock: at x5 it is 50 workload seconds, the resolution too, so it never applies.
    from drlsched.autoscale.metrics_server import MetricsServer

    for fresh_min, expect in ((10.0, True), (50.0, False)):
        ms = MetricsServer(50.0, fresh_min)
        ms.scrape(100.0, {"new": (80.0, 10.0)})
        assert ("new" in ms.pod_metrics()) is expect
