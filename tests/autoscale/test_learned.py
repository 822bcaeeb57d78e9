"""The learned replica scaler: its observation and action, the driver's external-decision loop, the checkpoint's
checks, and `train-scaler` end to end into simulate and evaluate."""

import csv
import json
import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch

from drlsched.autoscale.driver import Driver, DriverConfig
from drlsched.autoscale.flash_sale import flash_sale
from drlsched.autoscale.learned import ScalerNet, ScalerNetConfig, load_scaler, save_scaler
from drlsched.autoscale.load import LoadCurve
from drlsched.autoscale.scaler_obs import F_SCALER, HISTORY, MULTIPLIERS, OPENING_LEVEL, STEPS, ScalerObserver
from drlsched.autoscale.scaler_train import ScalerTrainSettings, sale_window
from drlsched.autoscale.services import ServiceSpec
from drlsched.cli import main
from drlsched.errors import UserError
from drlsched.rl.checkpoint import save_policy
from drlsched.rl.network import NetConfig, SchedulerNet


def burst_load() -> LoadCurve:
    rate = np.r_[np.full(20, 400.0), np.full(20, 3200.0)]
    return LoadCurve(rate, 60.0, 0.0, ((1200.0, 2400.0),))


def test_observer_target_follows_the_multiplier() -> None:
    obs = ScalerObserver(ServiceSpec(max_replicas=100))
    window = obs.observe(0.0, 1000.0, ready=5, replicas=6, violating=0.25)
    assert window.shape == (HISTORY, F_SCALER)
    need = 1000.0 * 10.0 / 1000.0  # rate × cost / request: 10 replicas at 100%
    assert window[-1, 1] == pytest.approx(5 / need) and window[-1, 8] == 0.25
    assert window[-1, 3] == 0.0 and window[-1, 4] == 0.0  # no season of history: no forecast yet
    targets = [obs.target(a) for a in range(len(MULTIPLIERS))]
    assert targets == sorted(targets)
    assert targets == [min(100, max(1, math.ceil(m * need - 1e-9))) for m in MULTIPLIERS]
    assert obs.nearest(targets[4]) == 4 and obs.nearest(1) == 0 and obs.nearest(10_000) == len(MULTIPLIERS) - 1


def test_step_actions_move_the_level_in_force_and_the_window_reads_it() -> None:
    """Step actions (spec 3): down / keep / up one level from 1.5, clipped at the ends; the level is the window's
    10th feature (level / 10), and imitation reads an expert's count as the step toward its nearest level."""
    obs = ScalerObserver(ServiceSpec(max_replicas=100), actions="step")
    window = obs.observe(0.0, 1000.0, ready=10, replicas=10, violating=0.0)
    assert window.shape == (HISTORY, F_SCALER + 1) and np.all(window[:, -1] == OPENING_LEVEL / 10)
    up, keep, down = STEPS.index(1), STEPS.index(0), STEPS.index(-1)
    assert [obs.apply(a) for a in (up, up, keep, down)] == [math.ceil(m * 10 - 1e-9) for m in (1.6, 1.8, 1.8, 1.6)]
    assert obs.observe(15.0, 1000.0, ready=16, replicas=16, violating=0.0)[-1, -1] == pytest.approx(0.6)
    for _ in range(20):
        obs.apply(up)
    assert obs.level == len(MULTIPLIERS) - 1 and obs.apply(up) == 30
    assert obs.nearest(30) == keep and obs.nearest(10) == down
    for _ in range(20):
        obs.apply(down)
    assert obs.apply(down) == 9 and obs.nearest(1) == keep and obs.nearest(14) == up
    with pytest.raises(ValueError):
        ScalerObserver(ServiceSpec(), actions="relative")


def test_a_step_scaler_checkpoint_loads_and_climbs_in_the_driver(tmp_path: Path) -> None:
    """A spec-3 file loads as a step scaler (the driver's observer takes its action space); one that always
    steps up reaches m = 3.0 after six syncs and holds it; a spec-2 file still loads as absolute."""
    net = ScalerNet(ScalerNetConfig(encoder="none"), actions="step")
    with torch.no_grad():
        net.actor[-1].weight.zero_()
        net.actor[-1].bias.copy_(torch.tensor([0.0, 0.0, 10.0]))  # always up
    path = tmp_path / "step.pt"
    save_scaler(path, net, {"kind": "scaler"})
    assert torch.load(path, weights_only=True)["obs_spec_version"] == 3 and load_scaler(str(path)).actions == "step"
    rate = np.full(20, 1600.0)  # 16 replicas' worth
    driver = Driver(ServiceSpec(max_replicas=160), LoadCurve(rate, 60.0, 0.0, ()),
                    DriverConfig(scaler=f"ppo:{path}", nodes=20), seed=1)
    result = driver.run()
    assert driver.observer is not None and driver.observer.actions == "step"
    assert driver.observer.level == len(MULTIPLIERS) - 1 and result.series["replicas"][-1] == 48
    absolute = tmp_path / "absolute.pt"
    save_scaler(absolute, ScalerNet(ScalerNetConfig(encoder="none")), {"kind": "scaler"})
    assert torch.load(absolute, weights_only=True)["obs_spec_version"] == 2
    assert load_scaler(str(absolute)).actions == "absolute"


def _constant_run(rate: np.ndarray, multiplier: Callable[[float], float]) -> np.ndarray:
    """Per-minute replicas of a run whose learned scaler picks `multiplier(sync time)`."""
    loop = Driver(ServiceSpec(max_replicas=160), LoadCurve(rate, 60.0, 0.0, ()), DriverConfig(nodes=20),
                  seed=1).decisions()
    now = 0.0
    try:
        next(loop)
        while True:
            loop.send(MULTIPLIERS.index(multiplier(now)))
            now += 15.0
    except StopIteration as stop:
        return np.asarray(stop.value.series["replicas"])


def test_the_base_of_the_target_waits_for_the_scale_down_stabilisation_window() -> None:
    """The load falls from 32 replicas' worth to 8 at 600 s: at m = 2.0 the count stays at 64 until the last high
    base (585 s) leaves the HPA's 300 s window, as upstream holds any recommendation; a lower multiplier on a
    steady load takes effect at once (only the base is held, not the policy's choice)."""
    falling = _constant_run(np.r_[np.full(10, 3200.0), np.full(20, 800.0)], lambda t: 2.0)
    assert list(falling[5:15]) == [64] * 10  # minutes 5-14: held
    assert list(falling[16:]) == [16] * (len(falling) - 16)
    lowered = _constant_run(np.full(30, 3200.0), lambda t: 2.0 if t < 600.0 else 1.0)
    assert list(lowered[5:10]) == [64] * 5 and list(lowered[11:]) == [32] * (len(lowered) - 11)


def test_external_decisions_drive_the_replicas() -> None:
    """A constant action sent through `decisions()` holds ⌈m × need⌉ replicas, on the HPA's 15 s syncs."""
    spec = ServiceSpec(max_replicas=160)
    driver = Driver(spec, burst_load(), DriverConfig(nodes=20), seed=1)
    loop = driver.decisions()
    action = MULTIPLIERS.index(2.0)
    syncs = 0
    try:
        next(loop)
        while True:
            syncs += 1
            loop.send(action)
    except StopIteration as stop:
        result = stop.value
    assert syncs == 2400 // 15  # one decision per sync: at 0, 15, ..., 2385 s
    assert result.series["replicas"][-1] == math.ceil(2.0 * 3200.0 * 10.0 / 1000.0)
    assert driver.requests == pytest.approx(float(burst_load().rate.sum() * 60.0), rel=1e-6)
    assert 0.0 < driver.used_core_s < driver.requested_core_s


def test_training_windows_cut_the_last_day_and_open_before_its_sale() -> None:
    """A window is 4 h of the second day at absolute times with everything before it as history; about half of them
    open 10-50% of a window before that day's sale (seeded)."""
    curve = flash_sale(7, days=2, step_s=15.0, peak=100.0)
    sale = next(a for a, _ in curve.bursts if a >= 86_400.0)
    rng = np.random.default_rng(3)
    before = 0
    for _ in range(200):
        history, window = sale_window(curve, 4 * 3600.0, rng)
        assert window.start_s == history.duration_s >= 86_400.0 and window.duration_s == 4 * 3600.0
        assert np.array_equal(np.r_[history.rate, window.rate], curve.rate[:history.rate.size + window.rate.size])
        assert all(window.start_s <= a < b <= window.start_s + window.duration_s for a, b in window.bursts)
        opens = (sale - window.start_s) / window.duration_s
        before += 0.1 - 1e-6 <= opens <= 0.5 + 1e-6
    assert 70 <= before <= 130


def test_a_primed_run_opens_with_a_season_of_forecast_at_the_primed_level() -> None:
    """`Driver(history=...)`: the first observation already has the forecast's season, the hold its base, and the
    service opens at ⌈1.5 × that base⌉ ready replicas, so a window of the second day sees what a whole run does."""
    curve = flash_sale(7, days=2, step_s=15.0, peak=3200.0)
    history, window = sale_window(curve, 4 * 3600.0, np.random.default_rng(0))
    spec = ServiceSpec(max_replicas=800)
    driver = Driver(spec, window, DriverConfig(nodes=100), seed=1, history=history)
    loop = driver.decisions()
    first = next(loop).copy()
    assert first[-1, 4] == 1.0 and 0.5 < first[-1, 3] < 2.0  # seasoned, and the forecast near the present need
    assert first[-1, 1] == pytest.approx(first[-1, 2]) and first[-1, 1] >= 1.5 - 0.05  # opened warm, all ready
    assert driver.observer is not None
    opened = math.ceil(1.5 * driver.observer.base - 1e-9)
    loop.send(MULTIPLIERS.index(1.5))
    assert len(driver._service()) == opened
    plain = Driver(spec, window, DriverConfig(nodes=100), seed=1).decisions()
    assert next(plain)[-1, 4] == 0.0  # without history: no season yet


def test_presets_weigh_the_trade_differently() -> None:
    eco, batch = ScalerTrainSettings(reward_preset="ecommerce").weights(), ScalerTrainSettings(
        reward_preset="batch").weights()
    assert eco[1] / eco[0] > 5 * batch[1] / batch[0]  # ecommerce pays far more for a violation per utilisation
    with pytest.raises(UserError):
        ScalerTrainSettings(reward_preset="traffic").validate()


def test_the_violation_minute_weight_prices_each_violating_interval() -> None:
    """`--violation-minute-weight W`: the same episode, the same actions; the reward differs by exactly W at the
    decisions whose interval had more than 1% of its requests violating, and nowhere else."""
    from drlsched.autoscale.scaler_train import _Env

    base = dict(nodes=100, num_envs=1, window_h=4.0)
    plain, priced = _Env(ScalerTrainSettings(**base), 0), _Env(ScalerTrainSettings(minute_weight=3.0, **base), 0)
    low = MULTIPLIERS.index(0.9)  # below need: violates once the load rises
    gaps, violating = [], 0
    for _ in range(400):
        _, r0, _ = plain.step(low)
        _, r1, _ = priced.step(low)
        gaps.append(r0 - r1)
        violating += gaps[-1] > 0
    assert set(np.round(gaps, 9)) <= {0.0, 3.0} and violating > 0 and violating < len(gaps)
    with pytest.raises(UserError, match="violation-minute-weight"):
        ScalerTrainSettings(minute_weight=float("nan")).validate()


def test_checkpoint_checks(tmp_path: Path) -> None:
    good = tmp_path / "scaler.pt"
    save_scaler(good, ScalerNet(ScalerNetConfig(encoder="none")), {"kind": "scaler"})
    assert load_scaler(str(good)).act(np.zeros((HISTORY, F_SCALER), np.float32)) in range(len(MULTIPLIERS))
    placement = tmp_path / "placement.pt"
    save_policy(placement, SchedulerNet(NetConfig()), "ppo", {})
    with pytest.raises(UserError, match="placement policy"):
        load_scaler(str(placement))
    tampered = tmp_path / "tampered.pt"
    data = torch.load(good, weights_only=True)
    data["meta"] = {"kind": "edited"}
    torch.save(data, tampered)
    with pytest.raises(UserError, match="sha256"):
        load_scaler(str(tampered))
    junk = tmp_path / "junk.pt"
    junk.write_bytes(b"not a checkpoint")
    with pytest.raises(UserError, match="not a readable"):
        load_scaler(str(junk))
    with pytest.raises(UserError, match="does not exist"):
        load_scaler(str(tmp_path / "missing.pt"))
    other = tmp_path / "other-spec.pt"
    data = torch.load(good, weights_only=True)
    data["obs_spec_version"] = 4
    torch.save(data, other)
    with pytest.raises(UserError, match="another observation or action spec"):
        load_scaler(str(other))
    mismatched = tmp_path / "mismatched.pt"
    data = torch.load(good, weights_only=True)
    data["obs_spec_version"] = 3  # absolute weights under the step spec
    torch.save(data, mismatched)
    with pytest.raises(UserError, match="does not match"):
        load_scaler(str(mismatched))


def test_train_then_simulate_and_evaluate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run"
    assert main(["train-scaler", "--steps", "256", "--envs", "2", "--nodes", "10", "--days", "2", "--bc-episodes", "1",
                 "--window-hours", "4",
                 "--node-autoscaler", "none", "--out", str(out), "--quiet"]) == 0
    for name in ("policy.pt", "curve.csv", "curve.png", "train.json"):
        assert (out / name).stat().st_size > 0
    facts = json.loads((out / "train.json").read_text())
    assert facts["behaviour_clone"]["decisions"] > 0 and facts["steps"] == 256 and facts["peak_rss_mib"] > 0
    assert facts["settings"]["reward_preset"] == "ecommerce" and facts["settings"]["window_h"] == 4.0
    trace = tmp_path / "t.csv"
    trace.write_text("minute,requests\n" + "".join(f"{m},{600 if m < 30 else 4800}\n" for m in range(60)))
    policy = f"ppo:{out / 'policy.pt'}"
    capsys.readouterr()
    assert main(["simulate", "--load-trace", str(trace), "--scaler", policy, "--nodes", "10", "--json", "-"]) == 0
    metrics = json.loads(capsys.readouterr().out)
    assert metrics["scaler"] == policy and metrics["scale_actions"] >= 1
    ev = tmp_path / "ev"
    assert main(["evaluate", "--load-trace", str(trace), "--nodes", "10", "--seeds", "1", "--jobs", "1", "--quiet",
                 "--scalers", f"hpa,{policy}", "--out", str(ev)]) == 0
    assert policy in json.loads((ev / "results.json").read_text())["scalers"]


def test_train_step_actions_end_to_end(tmp_path: Path) -> None:
    """`--actions step`: the file is spec 3 with three logits, keep the likeliest at the start, and its imitation
    labels are steps."""
    out = tmp_path / "step"
    assert main(["train-scaler", "--actions", "step", "--steps", "256", "--envs", "2", "--nodes", "10",
                 "--bc-episodes", "1", "--window-hours", "4", "--node-autoscaler", "none", "--out", str(out),
                 "--quiet"]) == 0
    scaler = load_scaler(str(out / "policy.pt"))
    assert scaler.actions == "step" and scaler.net.actor[-1].out_features == len(STEPS)
    facts = json.loads((out / "train.json").read_text())
    assert facts["settings"]["actions"] == "step" and facts["behaviour_clone"]["decisions"] > 0
    rows = list(csv.DictReader((out / "curve.csv").open()))
    assert all(0.9 <= float(r["mean_multiplier"]) <= 3.0 for r in rows)  # the levels in force, not step indices


@pytest.mark.parametrize("argv", [
    ["train-scaler", "--actions", "relative"],
    ["train-scaler", "--violation-minute-weight", "-1"],
    ["train-scaler", "--violation-minute-weight", "inf"],
    ["train-scaler", "--reward-preset", "traffic"],
    ["train-scaler", "--node-autoscaler", "gke"],
    ["train-scaler", "--days", "9"],
    ["train-scaler", "--window-hours", "0.5"],
    ["train-scaler", "--window-hours", "nan"],
    ["train-scaler", "--window-hours", "4", "--days", "1"],
])
def test_train_bad_input(argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*argv, "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "error" in err[0]
    assert not (tmp_path / "o").exists()
