"""The autoscaling driver on short loads: scalers, node autoscalers, metrics, and the CLI's bad input."""

import numpy as np
import pytest

from drlsched.autoscale.driver import Driver, DriverConfig
from drlsched.autoscale.load import LoadCurve
from drlsched.autoscale.services import ServiceSpec
from drlsched.cli import main
from drlsched.errors import UserError

KEYS = ("sla_violation_rate", "violation_minutes", "slowdown_p99_burst", "replica_hours", "node_hours",
        "overprovision_ratio", "scale_actions", "time_to_scale_p50_s")


def burst_load(base: float = 400.0, factor: float = 8.0) -> LoadCurve:
    """40 min at `base` requests/s, then 40 min at factor x: one burst."""
    rate = np.r_[np.full(40, base), np.full(40, base * factor)]
    return LoadCurve(rate, 60.0, 0.0, ((2400.0, 4800.0),))


def run(scaler: str = "hpa", nodes: int = 20, **kw):  # type: ignore[no-untyped-def]
    return Driver(ServiceSpec(max_replicas=8 * nodes), burst_load(), DriverConfig(scaler=scaler, nodes=nodes, **kw),
                  seed=1).run()


def test_hpa_scales_through_a_burst() -> None:
    res = run()
    m = res.metrics
    assert all(k in m for k in KEYS)
    assert 0.0 < m["sla_violation_rate"] < 0.5  # the burst costs violations until the replicas are ready
    assert m["scale_actions"] >= 2
    assert 0 < m["time_to_scale_p50_s"] < 2400
    # Before the burst the HPA holds about what the load needs at 80%; at the end it holds the burst's.
    assert res.series["ready"][-1] >= ServiceSpec().replicas_for(3200.0) * 0.8
    assert m["slowdown_p99_burst"] >= 4.0
    assert m["node_hours"] == pytest.approx(20 * 80 / 60, rel=1e-6)  # a fixed cluster


def test_same_seed_same_metrics() -> None:
    assert run().metrics == run().metrics


def test_predictive_never_below_reactive() -> None:
    hpa, pred = run(), run("predictive")
    assert pred.metrics["replica_hours"] >= hpa.metrics["replica_hours"] * 0.95


@pytest.mark.parametrize("autoscaler", ["cluster-autoscaler", "karpenter"])
def test_node_autoscalers_add_nodes_for_the_burst(autoscaler: str) -> None:
    res = run(node_autoscaler=autoscaler, node_provision_s=60.0)
    assert res.series["nodes"][0] < res.series["nodes"].max() <= 20
    assert res.metrics["sla_violation_rate"] > 0.0


def test_overprovision_holds_placeholder_room() -> None:
    hpa = run(node_autoscaler="cluster-autoscaler")
    over = run("overprovision", node_autoscaler="cluster-autoscaler", overprovision_fraction=0.5)
    assert over.metrics["replica_hours"] > hpa.metrics["replica_hours"]  # placeholders hold a replica's request
    assert over.metrics["node_hours"] >= hpa.metrics["node_hours"]


@pytest.mark.parametrize("kw", [{"scaler": "ppo"}, {"node_autoscaler": "gke"}, {"node_provision_s": -1.0}])
def test_bad_config(kw: dict) -> None:
    with pytest.raises(UserError):
        DriverConfig(**kw).validate()


@pytest.mark.parametrize("argv", [
    ["--scenario", "flash-sale", "--scaler", "nope"],
    ["--scenario", "flash-sale", "--scaler", "hpa", "--min-replicas", "9", "--max-replicas", "3"],
    ["--scenario", "flash-sale", "--scaler", "hpa", "--node-provision-s", "-5"],
    ["--scenario", "flash-sale"],
])
def test_cli_bad_input_exits_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "error" in err[0]


def test_cli_load_trace(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:  # type: ignore[no-untyped-def]
    trace = tmp_path / "t.csv"
    trace.write_text("minute,requests\n" + "".join(f"{m},{600 if m < 30 else 4800}\n" for m in range(60)))
    assert main(["simulate", "--load-trace", str(trace), "--scaler", "hpa", "--nodes", "10", "--json", "-"]) == 0
    out = capsys.readouterr().out
    assert '"sla_violation_rate"' in out and '"scaler": "hpa"' in out
    bad = tmp_path / "bad.csv"
    bad.write_text("minute,requests\n0,5\n0,6\n")
    assert main(["simulate", "--load-trace", str(bad), "--scaler", "hpa"]) == 2
    assert f"{bad}:3" in capsys.readouterr().err
