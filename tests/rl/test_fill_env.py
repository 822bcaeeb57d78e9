"""The fill env: an episode is one fill, and its return is the GPU demand that did not fit."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from drlsched.cli import main
from drlsched.fill import FillRun, fill_once
from drlsched.policies import make_policy
from drlsched.rl.features import action_for
from drlsched.rl.fill_env import FillEnv, FillEnvConfig
from drlsched.scenarios import make_scenario


def _config(**kw: object) -> FillEnvConfig:
    return FillEnvConfig(scenario="ml-gpu", nodes=6, duration_s=1800.0, max_demand=1.2, **kw)  # type: ignore[arg-type]


def test_an_episode_is_the_fill_and_its_return_the_failed_gpus() -> None:
    env = FillEnv(_config())
    obs, info = env.reset(seed=0, options={"workload_seed": 7})
    failed_before = env.fill.failed_milli  # pods that failed before the first decision are nobody's doing
    policy = make_policy("first-fit")  # deterministic: the env and `fill_once` must place alike
    policy.reset(env.fill.cluster, np.random.default_rng(0))
    total, steps, terminated = 0.0, 0, False
    while not terminated:
        assert env.ctx is not None and obs["action_mask"].any()
        decision = policy.select(env.ctx)
        assert decision is not None
        obs, reward, terminated, _, info = env.step(action_for(decision, env.ctx))
        assert reward <= 0.0 and reward == pytest.approx(-info["reward_terms"]["failed_gpus"])
        total += reward
        steps += 1
    metrics = info["metrics"]
    w = make_scenario("ml-gpu", nodes=6, duration=1800.0, seed=0)
    curve = fill_once(FillRun("first-fit", 7, w.nodes, list(w.iter_pods()), 1.2))
    left = (int(curve["total_milli"]) - int(curve["allocated_milli"][-1])) / 1000
    assert metrics["gpu_unallocated"] == pytest.approx(left)
    assert metrics["pods_failed"] == curve["pods_failed"][-1]
    # The return is minus the GPU demand that failed from the first decision on.
    assert total == pytest.approx(-(env.fill.failed_milli - failed_before) / 1000)
    assert env.fill.failed_milli > failed_before  # the fill went past what fits: the penalty was exercised
    assert steps == int(curve["placed"])


def test_train_on_the_fill_records_it(tmp_path: Path) -> None:
    out = tmp_path / "fill"
    assert main(["train", "--fill", "--scenario", "ml-gpu", "--nodes", "6", "--duration", "1800", "--steps", "128",
                 "--envs", "2", "--out", str(out), "--quiet"]) == 0
    meta = json.loads((out / "train.json").read_text())["meta"]
    assert meta["scenario"] == "fill:ml-gpu" and meta["nodes"] == 6
    assert main(["fill", "--scenario", "ml-gpu", "--nodes", "6", "--duration", "1800", "--seeds", "1",
                 "--max-demand", "1.0", "--policies", f"k8s-default,ppo:{out / 'policy.pt'}", "--out",
                 str(tmp_path / "eval"), "--jobs", "1"]) == 0


def test_fill_training_refuses_a_cluster_without_gpus(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["train", "--fill", "--scenario", "batch", "--nodes", "4", "--steps", "64", "--out",
                 str(tmp_path)]) == 2
    assert "no GPUs" in capsys.readouterr().err
