"""The `forecast` reclaim model: Holt's linear trend per node, admission against its upper bound over a horizon."""

import json
import subprocess
import sys

import numpy as np
import pytest

from drlsched.errors import UserError
from drlsched.forecast import HoltForecast
from drlsched.reclaim import NodeForecast, ReclaimConfig, UsageWindow, batch_allocatable

CAP_CPU, CAP_MEM = np.full(2, 10_000.0), np.full(2, 20_000.0)
NO_PODS = np.zeros(0, dtype=np.int64), np.zeros((0, 2)), np.zeros((0, 1))


def test_holt_follows_a_linear_trend_and_forecasts_along_it():
    f = HoltForecast((3,), alpha=0.3, beta=0.05, var_weight=0.1)
    slopes = np.array([5.0, 0.0, -2.0])
    for t in range(300):
        f.update(1000.0 + slopes * t)
    assert f.trend == pytest.approx(slopes, abs=1e-6)
    assert f.level == pytest.approx(1000.0 + slopes * 299, abs=1e-3)
    # No noise left: the band is the trend line itself; the bound over 10 steps is its highest point.
    assert f.upper(10, 3.0) == pytest.approx(1000.0 + slopes * 299 + np.maximum(slopes * 10, slopes), abs=1e-2)


def test_holt_band_widens_with_noise_and_with_the_horizon():
    rng = np.random.default_rng(0)
    f = HoltForecast((2,), alpha=0.1, beta=0.01, var_weight=0.05)
    for _ in range(400):
        f.update(np.array([500.0, 500.0]) + rng.normal(0.0, [1.0, 50.0]))
    one, far = f.upper(1, 3.0), f.upper(20, 3.0)
    assert one[1] - f.level[1] > 20 * (one[0] - f.level[0]) > 0  # σ ≈ 50 vs ≈ 1
    assert np.all(far - f.trend * 20 > one - f.trend)  # σ_h grows with h


def test_a_series_starts_at_its_first_non_zero_value():
    f = HoltForecast((1,), alpha=0.1, beta=0.01, var_weight=0.05)
    f.update(np.array([0.0]))  # an empty node: no pods yet
    f.update(np.array([800.0]))  # its first pods: a step, not a trend
    f.update(np.array([800.0]))
    assert f.level[0] == 800.0 and f.trend[0] == 0.0 and f.var[0] == 0.0


def _forecast_after(series: np.ndarray, **kw) -> tuple[np.ndarray, np.ndarray]:
    cfg = ReclaimConfig("forecast", **kw)
    fc = NodeForecast(cfg, 2, tick_s=15.0)
    for cpu in series:
        fc.add(cpu, np.full(2, 1000.0))
    return batch_allocatable(cfg, CAP_CPU, CAP_MEM, UsageWindow(2, 1), *NO_PODS, forecast=fc)


def test_reclaimable_shrinks_before_a_predictable_rise():
    # Node 0 ramps up to 3000 m, node 1 has sat at 3000 m: same usage now, but node 0's is about to rise.
    t = np.arange(60.0)
    cpu, _ = _forecast_after(np.stack([50.0 * t + 50.0, np.full(60, 3000.0)], axis=1), forecast_sigmas=0.0)
    assert cpu[1] == 0.75 * 10_000 - 3000
    assert cpu[0] < cpu[1] - 10 * 50  # 300 s = 20 ticks ahead at +50 m per tick, less what the level lags


def test_forecast_batch_allocatable_is_never_negative_nor_above_the_threshold():
    t = np.arange(60.0)
    # Node 0 climbs past its capacity; node 1 falls steeply, to 100 m now, so its trend line goes below 0 within
    # the horizon: a forecast below 0 must not lend more than the threshold.
    cpu, mem = _forecast_after(np.stack([200.0 * t, 6000.0 - 100.0 * t], axis=1), forecast_sigmas=0.0)
    assert cpu[0] == 0 and cpu[1] == 0.75 * 10_000
    assert np.all(mem >= 0) and np.all(mem <= 0.65 * 20_000)


@pytest.mark.parametrize("kw", [{"forecast_alpha": 0.0}, {"forecast_alpha": 1.5}, {"forecast_beta": 0.5},
                                {"forecast_beta": -0.01}, {"forecast_horizon_s": 0.0},
                                {"forecast_sigmas": float("nan")}, {"forecast_sigmas": -1.0}])
def test_bad_forecast_settings_are_user_errors(kw):
    with pytest.raises(UserError):
        ReclaimConfig("forecast", **kw)


def _cli(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "drlsched.cli", *args], capture_output=True, text=True,
                          timeout=timeout)


@pytest.mark.parametrize("args", [["--forecast-horizon", "-5"], ["--forecast-sigmas", "nan"],
                                  ["--ls-slowdown-target", "0.5"]])
def test_bad_forecast_options_exit_2_with_one_line(args):
    res = _cli("simulate", "--scenario", "colocation", "--nodes", "2", "--duration", "60", "--policy",
               "k8s-default", "--reclaim", "forecast", "--quiet", *args)
    assert res.returncode == 2 and "Traceback" not in res.stderr and len(res.stderr.strip().splitlines()) == 1


def test_simulate_and_evaluate_run_the_forecast_model(tmp_path):
    res = _cli("simulate", "--scenario", "colocation", "--nodes", "3", "--duration", "600", "--policy",
               "k8s-default", "--reclaim", "forecast", "--json", str(tmp_path / "m.json"), "--quiet")
    assert res.returncode == 0, res.stderr
    m = json.loads((tmp_path / "m.json").read_text())
    assert m["reclaim"] == "forecast" and m["cpu_util_reclaimed"] > 0
    res = _cli("evaluate", "--scenario", "colocation", "--nodes", "2", "--duration", "300", "--policies",
               "k8s-default", "--reclaim", "koordinator,forecast", "--seeds", "2", "--jobs", "1", "--out",
               str(tmp_path / "ev"), "--quiet")
    assert res.returncode == 0, res.stderr
    results = json.loads((tmp_path / "ev" / "results.json").read_text())
    assert set(results["policies"]) == {"k8s-default@koordinator", "k8s-default@forecast"}
