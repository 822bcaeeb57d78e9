"""`drlsched train` end to end (tiny), then the policy in `evaluate`; reward files are validated."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from drlsched.cli import main
from drlsched.errors import UserError
from drlsched.rl.reward import load_reward


def test_train_then_evaluate(tmp_path: Path) -> None:
    out = tmp_path / "ppo"
    assert main(["train", "--scenario", "batch", "--nodes", "4", "--duration", "20", "--steps", "512",
                 "--envs", "2", "--seed", "1", "--bc-steps", "64", "--out", str(out), "--quiet"]) == 0
    for name in ("policy.pt", "curve.csv", "curve.png", "train.json"):
        assert (out / name).is_file()
    rows = list(csv.DictReader(open(out / "curve.csv")))
    assert rows and int(rows[-1]["step"]) == 512
    # the curve logs the anomaly rate of finished episodes; batch has no LS pod: no SLA sample, nan rather than 0
    assert any(r["anomaly_rate"] not in ("", "nan") for r in rows)
    assert all(r["sla_violation_rate"] in ("", "nan") for r in rows)
    assert json.loads((out / "train.json").read_text())["steps"] == 512
    # resume continues the step count
    assert main(["train", "--scenario", "batch", "--nodes", "4", "--duration", "20", "--steps", "256",
                 "--envs", "2", "--out", str(out), "--resume", "--quiet"]) == 0
    assert json.loads((out / "train.json").read_text())["steps"] == 768
    ev = tmp_path / "ev"
    assert main(["evaluate", "--scenario", "batch", "--nodes", "4", "--duration", "20", "--seeds", "2",
                 "--policies", f"k8s-default,ppo:{out / 'policy.pt'}", "--out", str(ev), "--quiet",
                 "--jobs", "1"]) == 0
    results = json.loads((ev / "results.json").read_text())
    assert f"ppo:{out / 'policy.pt'}" in results["policies"]


def test_train_dqn_tiny(tmp_path: Path) -> None:
    assert main(["train", "--algo", "dqn", "--nodes", "4", "--duration", "20", "--steps", "256", "--envs", "2",
                 "--out", str(tmp_path / "dqn"), "--quiet"]) == 0
    assert (tmp_path / "dqn" / "policy.pt").is_file()


def test_reward_file(tmp_path: Path) -> None:
    good = tmp_path / "r.yaml"
    good.write_text("utilization: 0.5\nviolation: 0.4\njct: 0.1\n")
    w = load_reward(good)
    assert (w.utilization, w.violation, w.migration, w.jct) == (0.5, 0.4, 0.1, 0.1)
    bad = tmp_path / "bad.yaml"
    bad.write_text("utilisation: 0.5\n")
    with pytest.raises(UserError, match="unknown keys utilisation"):
        load_reward(bad)


TRACE = Path(__file__).parent.parent / "traces" / "fixtures" / "alibaba-v2018"


def test_train_on_trace_windows_then_evaluate_the_held_out_rest(tmp_path: Path) -> None:
    out = tmp_path / "trace"
    trace = ["--trace", str(TRACE), "--trace-format", "alibaba-v2018"]
    assert main(["train", *trace, "--duration", "300", "--span", "400", "--steps", "128", "--envs", "2",
                 "--out", str(out), "--quiet"]) == 0
    meta = json.loads((out / "train.json").read_text())["meta"]
    assert meta["scenario"] == "alibaba-v2018:alibaba-v2018" and meta["nodes"] == 3  # the trace's machines
    ev = tmp_path / "ev"
    assert main(["evaluate", *trace, "--start", "400", "--seeds", "1", "--policies",
                 f"k8s-default,ppo:{out}", "--out", str(ev), "--quiet", "--jobs", "1"]) == 0


def test_train_windows_come_from_the_training_span_only() -> None:
    from drlsched.rl.trace_windows import TraceWindows
    from drlsched.traces import TraceSelection

    windows = TraceWindows(TraceSelection(str(TRACE), "alibaba-v2018"), start_s=100.0, span_s=250.0, window_s=50.0)
    for seed in range(20):
        wl = windows(seed)
        start = float(wl.info["window_start_s"])  # type: ignore[arg-type]
        assert 100.0 <= start <= 300.0
        assert all(0.0 <= p.arrival_s < 50.0 for p in wl.pods)  # arrivals count from the window start


def test_train_json_records_the_node_count_trained_on(tmp_path: Path) -> None:
    out = tmp_path / "scaled"
    assert main(["train", "--trace", str(TRACE), "--trace-format", "alibaba-v2018", "--nodes", "7", "--duration",
                 "300", "--span", "400", "--steps", "64", "--envs", "1", "--out", str(out), "--quiet"]) == 0
    assert json.loads((out / "train.json").read_text())["meta"]["nodes"] == 7
    scenario = tmp_path / "scenario"
    assert main(["train", "--scenario", "batch", "--nodes", "5", "--duration", "20", "--steps", "64", "--envs", "1",
                 "--out", str(scenario), "--quiet"]) == 0
    assert json.loads((scenario / "train.json").read_text())["meta"]["nodes"] == 5


@pytest.mark.parametrize("extra, message", [
    (["--scenario", "batch"], "not both"),
    (["--duration", "500", "--span", "400"], "shorter than one window"),
])
def test_train_trace_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str],
                            message: str) -> None:
    argv = ["train", "--trace", str(TRACE), "--trace-format", "alibaba-v2018", *extra, "--out", str(tmp_path)]
    assert main(argv) == 2
    assert message in capsys.readouterr().err


USAGE = Path(__file__).parents[1] / "core" / "fixtures" / "usage" / "machine_usage.csv"


def test_train_on_a_part_of_real_usage(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import drlsched.source

    calls = []
    real = drlsched.source.load_usage

    def spy(*args: object) -> object:
        calls.append(args)
        return real(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(drlsched.source, "load_usage", spy)
    out = tmp_path / "ppo"
    assert main(["train", "--scenario", "colocation", "--nodes", "2", "--duration", "60", "--reclaim", "koordinator",
                 "--steps", "64", "--envs", "1", "--usage-trace", str(USAGE), "--usage-window", "0:3m",
                 "--usage-series", "0:0.5", "--out", str(out), "--quiet"]) == 0
    assert calls and all(c == (str(USAGE), None, (0.0, 180.0), (0.0, 0.5)) for c in calls)  # every episode's
    meta = json.loads((out / "train.json").read_text())["meta"]
    assert meta["usage"] == {"trace": str(USAGE), "format": None, "window": "0:3m", "series": "0:0.5"}


@pytest.mark.parametrize("extra, message", [
    (["--usage-trace", str(USAGE), "--usage-series", "0.5"], "--usage-series expects FROM:TO"),
    (["--usage-series", "0:0.5"], "needs --usage-trace"),
    (["--usage-trace", str(USAGE), "--fill"], "not with --trace or --fill"),
])
def test_train_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str],
                            message: str) -> None:
    assert main(["train", "--scenario", "colocation", *extra, "--out", str(tmp_path)]) == 2
    assert message in capsys.readouterr().err
