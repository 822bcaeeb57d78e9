"""Rollouts do not depend on how the envs are split over workers: the property the Ray backend relies on."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from drlsched.rl.env import EnvConfig
from drlsched.rl.network import NetConfig, SchedulerNet
from drlsched.rl.ppo import PPOSettings, train_ppo
from drlsched.rl.rollout import ROW_BLOCK, RolloutSettings, RolloutWorker, Trajectory, concat, forward_rows, split_envs


class SplitRollouts:
    """In-process stand-in for the Ray backend: one RolloutWorker per slice, trajectories joined in env order."""

    def __init__(self, env_cfg: EnvConfig, net_cfg: NetConfig, s: RolloutSettings, workers: int = 2) -> None:
        self.workers = [RolloutWorker(env_cfg, seed=s.seed, num_envs=s.num_envs, first=a, count=b - a,
                                      shared=s.shared_workload, num_steps=s.num_steps)
                        for a, b in split_envs(s.num_envs, workers)]

    def collect(self, net: SchedulerNet) -> Trajectory:
        return concat([w.collect(net) for w in self.workers])

    def close(self) -> None:
        for w in self.workers:
            w.close()


def _equal(a: Trajectory, b: Trajectory) -> None:
    for k in a.obs:
        assert np.array_equal(a.obs[k], b.obs[k]), k
    for name in ("actions", "logps", "values", "rewards", "dones", "truncs", "trunc_values", "next_value"):
        assert np.array_equal(getattr(a, name), getattr(b, name)), name
    assert a.finished == b.finished


def test_split_envs() -> None:
    assert split_envs(8, 2) == [(0, 4), (4, 8)]
    assert split_envs(5, 3) == [(0, 2), (2, 4), (4, 5)]


def test_forward_rows_is_batch_invariant(batch_config: EnvConfig) -> None:
    torch.manual_seed(0)
    net = SchedulerNet(NetConfig())
    w = RolloutWorker(batch_config, seed=0, num_envs=7, first=0, count=7, shared=1, num_steps=1)
    obs = w.obs
    logits, values = forward_rows(net, obs)
    for i in range(7):  # each row alone, padded to ROW_BLOCK, gives the same bits as in the batch of 7
        li, vi = forward_rows(net, {k: v[i:i + 1] for k, v in obs.items()})
        assert torch.equal(li[0], logits[i]) and torch.equal(vi[0], values[i])
    assert ROW_BLOCK >= 1


@pytest.mark.parametrize("split", [2, 3])
def test_trajectories_do_not_depend_on_the_split(batch_config: EnvConfig, split: int) -> None:
    torch.manual_seed(0)
    net = SchedulerNet(NetConfig())
    s = PPOSettings(num_envs=4, num_steps=24, seed=5, shared_workload=2)
    cfg = EnvConfig(scenario=batch_config.scenario, nodes=batch_config.nodes, duration_s=batch_config.duration_s,
                    max_steps=10)  # truncation exercises the bootstrap values
    whole = SplitRollouts(cfg, net.cfg, s.rollout_settings(), workers=1)
    parts = SplitRollouts(cfg, net.cfg, s.rollout_settings(), workers=split)
    for _ in range(2):
        a, b = whole.collect(net), parts.collect(net)
        _equal(a, b)
    assert a.truncs.any() and a.dones.any()


def test_training_is_the_same_for_any_split(batch_config: EnvConfig) -> None:
    s = PPOSettings(total_steps=2 * 4 * 32, num_envs=4, num_steps=32, lr=1e-3, seed=3)
    a, rows_a = train_ppo(s, batch_config, NetConfig())
    b, rows_b = train_ppo(s, batch_config, NetConfig(), rollouts=lambda e, n, st: SplitRollouts(e, n, st, 3))
    for (ka, va), (kb, vb) in zip(a.state_dict().items(), b.state_dict().items(), strict=True):
        assert ka == kb and torch.equal(va, vb), ka
    assert same_rows(rows_a, rows_b)


def same_rows(a: list[dict[str, float]], b: list[dict[str, float]]) -> bool:
    """Learning-curve rows equal bit for bit (NaN equal to NaN), timings aside."""
    timing = ("wall_s", "rollout_s", "learn_s")
    return [{k: repr(v) for k, v in r.items() if k not in timing} for r in a] == \
        [{k: repr(v) for k, v in r.items() if k not in timing} for r in b]
