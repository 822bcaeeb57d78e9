"""Load inputs: `minute,requests` traces (and their refusals, one line with file:line and exit 2), usage series as
load, the seeded flash-sale pattern, Holt-Winters and the predictive rule max(reactive, forecast at lead time)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from drlsched.autoscale.flash_sale import diurnal, flash_sale
from drlsched.autoscale.load import LoadCurve, detect_bursts, read_load, read_load_trace
from drlsched.autoscale.predictive import PredictiveConfig, PredictiveScaler
from drlsched.errors import UserError
from drlsched.forecast import HoltWinters
from drlsched.k8s.service_load import replica_usage_m


def write(tmp_path: Path, text: str, name: str = "load.csv") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_worldcup_form_with_timestamps_gaps_and_peak(tmp_path: Path) -> None:
    path = write(tmp_path, "minute,requests\n1998-04-30 21:30:00,60\n1998-04-30 21:31:00,120\n"
                           "1998-04-30 21:34:00,30\n")
    curve = read_load_trace(path)
    assert curve.step_s == 60.0
    assert curve.rate.tolist() == [1.0, 2.0, 0.0, 0.0, 0.5]  # requests/s; missing minutes had none
    scaled = curve.scaled(10.0)
    assert scaled.peak == 10.0 and scaled.rate.tolist() == [5.0, 10.0, 0.0, 0.0, 2.5]
    assert curve.window(60.0, 180.0).rate.tolist() == [2.0, 0.0]
    assert curve.at(np.array([-1.0, 0.0, 61.0, 299.0, 300.0])).tolist() == [0.0, 1.0, 2.0, 0.5, 0.0]


def test_integer_minutes(tmp_path: Path) -> None:
    assert read_load_trace(write(tmp_path, "minute,requests\n0,6\n2,12\n")).rate.tolist() == [0.1, 0.0, 0.2]


@pytest.mark.parametrize(("text", "line", "says"), [
    ("", 1, "empty load trace"),
    ("minute,requests\n", 2, "no rows"),
    ("time,value\n0,1\n", 1, "does not say its units"),
    ("minute,requests,extra\n0,1,2\n", 1, "does not say its units"),
    ("minute,requests\n0,12\n1,lots\n", 3, "not a number"),
    ("minute,requests\n0,12\nnoon,5\n", 3, "neither a whole number"),
    ("minute,requests\n-3,12\n", 2, "negative minute"),
    ("minute,requests\n0,-5\n", 2, "non-negative"),
    ("minute,requests\n0,5\n2,5\n1,5\n", 4, "out of order"),
    ("minute,requests\n0,5\n0,5\n", 3, "out of order"),
    ("minute,requests\n1998-04-30 21:30:00,5\n1998-04-30 21:29:00,5\n", 3, "out of order"),
    ("minute,requests\n1998-04-30 21:30:30,5\n", 2, "not at a whole minute"),
    ("minute,requests\n0,5\n1\n", 3, "expected 2 fields"),
])
def test_bad_traces_name_file_and_line(tmp_path: Path, text: str, line: int, says: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(UserError, match=says) as err:
        read_load(path)
    assert f"{path}:{line}:" in str(err.value)


def test_bad_trace_on_the_command_line_exits_2_with_one_line(tmp_path: Path) -> None:
    path = write(tmp_path, "minute,requests\n0,5\n2,5\n1,5\n")
    got = subprocess.run([sys.executable, "-m", "drlsched.cli", "load-curve", "--load-trace", str(path)],
                         capture_output=True, text=True)
    assert got.returncode == 2
    assert got.stderr.strip().count("\n") == 0 and f"{path}:4:" in got.stderr and "Traceback" not in got.stderr


def test_cli_summary_and_csv(tmp_path: Path) -> None:
    path = write(tmp_path, "minute,requests\n" + "".join(f"{i},{600 if i == 30 else 60}\n" for i in range(60)))
    out = tmp_path / "curve.csv"
    got = subprocess.run([sys.executable, "-m", "drlsched.cli", "load-curve", "--load-trace", str(path),
                          "--load-peak", "50", "--csv", str(out)], capture_output=True, text=True, check=True)
    summary = json.loads(got.stdout)
    assert summary["peak_rps"] == 50.0 and summary["duration_s"] == 3600.0
    assert summary["bursts"] == [[1800.0, 1860.0]]
    rows = out.read_text().splitlines()
    assert rows[0] == "second,requests_per_second" and rows[31] == "1800.0,50.0"


def test_usage_series_as_load(tmp_path: Path) -> None:
    """A Google 2011 per-job file (a usage-series form) gives the load its shape."""
    path = write(tmp_path, "job_id,day,step_5min,cpu_pct,mem_pct\n" + "".join(
        f"j,1,{s},{10 + s},1\n" for s in range(4)), "jobs.csv")
    curve = read_load(path)
    assert curve.step_s == 60.0 and curve.rate.size == 16
    assert curve.rate[0] == pytest.approx(0.10) and curve.rate[-1] == pytest.approx(0.13)
    with pytest.raises(UserError, match="series 3 does not exist"):
        read_load(path, series=3)


def test_scaling_refuses_a_zero_load() -> None:
    with pytest.raises(UserError, match="zero throughout"):
        LoadCurve(np.zeros(3), 60.0).scaled(5.0)


def test_flash_sale_is_seeded_daily_with_a_10x_burst() -> None:
    a, b, c = flash_sale(1, days=2), flash_sale(1, days=2), flash_sale(2, days=2)
    assert np.array_equal(a.rate, b.rate) and not np.array_equal(a.rate, c.rate)
    assert a.peak == pytest.approx(1.0) and a.duration_s == 2 * 86_400.0
    assert diurnal(np.array([4.0, 21.0])) == pytest.approx([1.0, 2.5])
    (s1, e1), (s2, _) = a.bursts
    assert s2 - s1 == pytest.approx(86_400.0, abs=120.0)  # the same announced hour every day
    before = float(np.median(a.at(np.arange(s1 - 1800.0, s1, 15.0))))
    during = float(np.median(a.at(np.arange(s1 + 300.0, e1, 15.0))))
    assert 7.0 < during / before < 13.0
    ramp_end = s1 + 300.0
    assert a.at(ramp_end) / a.at(s1 - 15.0) > 6.0  # ~10x within 5 minutes
    assert detect_bursts(a)  # the detector finds the sales


def test_holt_winters_learns_a_season() -> None:
    hw = HoltWinters(season=24, alpha=0.3, beta=0.0, gamma=0.3)
    pattern = 100.0 + 50.0 * np.sin(2 * np.pi * np.arange(24) / 24)
    for _ in range(5):
        for y in pattern:
            hw.update(float(y))
    assert hw.seasonal_ready
    assert [hw.forecast(h) for h in (1, 6, 12)] == pytest.approx([pattern[0], pattern[5], pattern[11]], abs=1e-6)
    holt = HoltWinters(season=100, alpha=0.5, beta=0.5, gamma=0.1)
    for t in range(10):
        holt.update(10.0 + 2.0 * t)
    assert holt.forecast(5) == pytest.approx(28.0 + 10.0, rel=0.05)  # before a season: Holt's trend line


def test_predictive_takes_the_max_of_reactive_and_forecast() -> None:
    """A daily spike at the same hour: after one day the forecast asks for the replicas before it comes."""
    cfg = PredictiveConfig(request_m=1000, cpu_per_rps_m=10.0, max_replicas=100, target_utilization=50,
                           step_s=60.0, season_s=3600.0, lead_s=120.0, alpha=0.2, beta=0.0, gamma=0.5)
    scaler = PredictiveScaler(cfg)

    def rate(t: float) -> float:
        return 500.0 if 1800.0 <= t % 3600.0 < 2400.0 else 50.0

    t = 0.0
    while t <= 3 * 3600.0 + 1680.0:  # three seasons, then 2 min before the fourth spike
        scaler.observe(t, rate(t))
        t += 15.0
    assert scaler.replicas_for(500.0) == 10 and scaler.replicas_for(50.0) == 1
    assert scaler.forecast_rate() > 400.0
    assert scaler.desired(reactive=1) >= 9
    assert scaler.desired(reactive=60) == 60  # never below the reactive count
    assert PredictiveScaler(cfg).desired(reactive=3) == 3  # no history: reactive alone
    with pytest.raises(UserError):
        PredictiveScaler(PredictiveConfig(request_m=1000, cpu_per_rps_m=1.0, max_replicas=2, min_replicas=3))


def test_a_replicas_share_of_the_load() -> None:
    """ServiceLoad's per-replica usage: rate × cost / ready replicas, rounded up, at least kwok's 1m."""
    assert replica_usage_m(18.0, 100.0, 2) == 900
    assert replica_usage_m(18.0, 100.0, 4) == 450
    assert replica_usage_m(1.0, 100.0, 3) == 34
    assert replica_usage_m(0.0, 100.0, 2) == 1 and replica_usage_m(5.0, 100.0, 0) == 1
