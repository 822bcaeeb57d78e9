"""A trained policy (ppo:/dqn: checkpoint) runs the fill experiment like any baseline."""

from __future__ import annotations

from pathlib import Path

import torch

from drlsched.fill import FillRun, fill_once
from drlsched.rl.checkpoint import save_policy
from drlsched.rl.network import NetConfig, SchedulerNet
from drlsched.scenarios import make_scenario


def test_learned_policy_fills_the_cluster_deterministically(tmp_path: Path) -> None:
    torch.manual_seed(0)
    path = tmp_path / "policy.pt"
    save_policy(path, SchedulerNet(NetConfig()), "ppo", {"scenario": "ml-gpu", "steps": 0})
    w = make_scenario("ml-gpu", nodes=10, duration=1800.0, seed=1)
    pods = list(w.iter_pods())
    runs = [fill_once(FillRun(f"ppo:{path}", 3, w.nodes, pods, 1.0)) for _ in range(2)]
    assert runs[0]["demand"][-1] >= 1.0 and int(runs[0]["placed"]) > 0
    assert runs[0]["allocated_milli"].tolist() == runs[1]["allocated_milli"].tolist()
