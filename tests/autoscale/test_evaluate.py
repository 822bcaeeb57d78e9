"""`drlsched evaluate --scalers`: paired seeds, overrides, the report and plots, and bad input."""

import json
from pathlib import Path

import pytest

from drlsched.autoscale.evaluate import parse_scaler
from drlsched.cli import main
from drlsched.errors import UserError


def burst_trace(tmp_path: Path) -> Path:
    trace = tmp_path / "t.csv"
    trace.write_text("minute,requests\n" + "".join(f"{m},{600 if m < 30 else 4800}\n" for m in range(60)))
    return trace


def test_compares_scalers_on_paired_seeds(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "ev"
    argv = ["evaluate", "--load-trace", str(burst_trace(tmp_path)), "--nodes", "10", "--seeds", "2", "--jobs", "1",
            "--scalers", "hpa,hpa:target=50,overprovision:fraction=0.5", "--out", str(out), "--quiet"]
    assert main(argv) == 0
    results = json.loads((out / "results.json").read_text())
    assert results["meta"]["scalers"] == ["hpa", "hpa:target=50", "overprovision:fraction=0.5"]
    assert sorted((r["scaler"], r["seed"]) for r in results["runs"]) == sorted(
        (s, seed) for s in results["meta"]["scalers"] for seed in (0, 1))
    hpa, low = results["scalers"]["hpa"], results["scalers"]["hpa:target=50"]
    # A lower target holds more replicas: the override reached the driver.
    assert low["replica_hours"]["mean"] > hpa["replica_hours"]["mean"]
    ratio = results["ratio_vs_hpa"]["hpa:target=50"]["replica_hours"]
    assert ratio["n"] == 2 and ratio["mean"] > 1.0
    report = (out / "report.md").read_text()
    assert "| hpa:target=50 |" in report and "replicas.png" in report
    assert (out / "replicas.png").stat().st_size > 0 and (out / "cost_violation.png").stat().st_size > 0
    assert "replica-hours" in capsys.readouterr().out


def test_parse_scaler() -> None:
    assert parse_scaler("predictive:target=60:lead=300") == ("predictive", {"target_utilization": 60,
                                                                            "lead_s": 300.0})
    for bad in ("ppo", "hpa:target", "hpa:speed=3", "hpa:target=high"):
        with pytest.raises(UserError):
            parse_scaler(bad)


@pytest.mark.parametrize("extra", [
    ["--scalers", "hpa,nope"],
    ["--scalers", "hpa,hpa"],
    ["--scalers", "hpa:target=x"],
    ["--scalers", "hpa", "--policies", "k8s-default,most-allocated"],
    ["--scalers", "hpa", "--min-replicas", "9", "--max-replicas", "3"],
    ["--scalers", "overprovision:fraction=-1"],
    ["--scenario", "batch", "--scalers", "hpa"],
])
def test_bad_input_one_line_exit_2(extra: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["evaluate", "--out", str(tmp_path / "ev"), "--nodes", "10", "--quiet", *extra]
    if "--scenario" not in extra:
        argv += ["--load-trace", str(burst_trace(tmp_path))]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "error" in err[0]
    assert not (tmp_path / "ev").exists()  # nothing written before the check
