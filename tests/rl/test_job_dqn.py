"""The job-level DQN (rl/job_dqn.py): masks respected, a training step with a finite loss, checkpoints by algo."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch

from drlsched.cli import main
from drlsched.jobs.policies import make_job_policy
from drlsched.jobs.workload import JobSource
from drlsched.rl.job_dqn import EpsilonGreedy, JobDQNSettings, td_loss, train_dqn, transitions
from drlsched.rl.job_net import JobNet, JobNetSpec
from drlsched.rl.job_policy import load_job_net, save_job_policy
from drlsched.rl.job_train import run_episode
from drlsched.rl.reward import PRESETS

SMALL = ["--nodes", "4", "--duration", "7200"]
SOURCE = JobSource(nodes=4, duration_s=7200.0)


def test_exploring_and_greedy_actions_never_pick_a_masked_job_or_limit() -> None:
    torch.manual_seed(0)
    for eps in (0.0, 1.0):
        actor = EpsilonGreedy(JobNet(JobNetSpec(8, 2)), eps, seed=3)
        ep = run_episode(JobSource(nodes=2, duration_s=7200.0), actor, 1000)  # 2 nodes: duplicate levels masked
        chosen = [st for st in ep.steps if st.obs.eligible.any()]
        assert chosen and any(not st.obs.limit_mask.all() for st in chosen)
        for st in ep.steps:
            ranked = st.ranks >= 0
            assert np.array_equal(ranked, st.obs.eligible)  # exactly the eligible jobs are ranked
            assert sorted(st.ranks[ranked]) == list(range(int(ranked.sum())))
            assert st.obs.limit_mask[st.levels[ranked]].all()


def test_a_training_step_runs_with_a_finite_loss_and_moves_the_net() -> None:
    torch.manual_seed(0)
    net = JobNet(JobNetSpec(8, 2))
    ep = run_episode(SOURCE, EpsilonGreedy(net, 0.5, seed=1), 1000)
    rewards = -np.arange(len(ep.steps), dtype=np.float64)
    batch = transitions(ep.steps, rewards, 0.9, 3)
    assert batch and batch[-1].next_obs is None and any(t.next_obs is not None for t in batch)
    assert all(t.obs.eligible[t.job] and t.obs.limit_mask[t.level] for t in batch)
    target = JobNet(JobNetSpec(8, 2))
    target.load_state_dict(net.state_dict())
    before = [p.detach().clone() for p in net.parameters()]
    loss = td_loss(net, target, batch[:32])
    assert math.isfinite(float(loss.detach())) and float(loss.detach()) > 0
    loss.backward()
    torch.optim.Adam(net.parameters(), lr=1e-2).step()
    assert any(not torch.equal(a, b) for a, b in zip(before, net.parameters(), strict=True))
    rows: list[dict[str, float]] = []
    s = JobDQNSettings(episodes=3, learning_starts=10, batch=8, validate_every=2, validation_seeds=1)
    out = train_dqn(JobNet(JobNetSpec(8, 2)), SOURCE, s, PRESETS["jct"], rows.append, lambda *_: None)
    assert out["grad_steps"] > 0 and any(math.isfinite(r.get("loss", math.nan)) for r in rows)


def test_n_step_returns_sum_the_unchosen_decisions_rewards() -> None:
    ep = run_episode(SOURCE, EpsilonGreedy(JobNet(JobNetSpec(8, 2)), 0.0, seed=0), 1000)
    rewards = np.ones(len(ep.steps))
    one = transitions(ep.steps, rewards, 1.0, 1)
    el = [i for i, st in enumerate(ep.steps) if st.obs.eligible.any()]
    assert [t.ret for t in one] == [float(b - a) for a, b in zip(el, [*el[1:], len(ep.steps)], strict=True)]


def test_checkpoint_round_trip_and_the_other_algo_is_refused_in_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "run"
    assert main(["train-jobs", "--algo", "dqn", *SMALL, "--updates", "2", "--validation-seeds", "1",
                 "--out", str(out)]) == 0
    assert "best validation JCT" in capsys.readouterr().err  # the training bar's objective
    net, header = load_job_net(out / "policy.pt", "dqn")
    assert header["algo"] == "dqn" and header["meta"]["algo"] == "dqn"
    again = tmp_path / "again.pt"
    save_job_policy(again, net, header["meta"], "dqn")
    net2, _ = load_job_net(again, "dqn")
    assert all(torch.equal(a, b) for a, b in zip(net.state_dict().values(), net2.state_dict().values(),
                                                 strict=True))
    assert make_job_policy(f"dqn:{out / 'policy.pt'}:fallback=none").name.startswith("dqn:")
    ppo = tmp_path / "ppo.pt"
    save_job_policy(ppo, JobNet(JobNetSpec()), {})
    for spec, words in ((f"ppo:{out / 'policy.pt'}", "holds a dqn job policy, not ppo"),
                        (f"dqn:{ppo}", "holds a ppo job policy, not dqn")):
        assert main(["simulate", "--scenario", "tpch", *SMALL, "--job-policy", spec]) == 2
        err = capsys.readouterr().err.strip()
        assert words in err and "\n" not in err
