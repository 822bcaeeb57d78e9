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
                 "--envs", "2", "--seed", "1", "--out", str(out), "--quiet"]) == 0
    for name in ("policy.pt", "curve.csv", "curve.png", "train.json"):
        assert (out / name).is_file()
    rows = list(csv.DictReader(open(out / "curve.csv")))
    assert rows and int(rows[-1]["step"]) == 512
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
