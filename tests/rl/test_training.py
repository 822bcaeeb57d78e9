"""PPO learns on a toy scenario, DQN runs, and training is deterministic for a seed."""

from __future__ import annotations

import numpy as np
import torch

from drlsched.rl.dqn import DQNSettings, train_dqn
from drlsched.rl.env import EnvConfig
from drlsched.rl.network import NetConfig
from drlsched.rl.ppo import PPOSettings, entropy_coef, train_ppo


def _tiny(steps: int, **kw: object) -> PPOSettings:
    return PPOSettings(total_steps=steps, num_envs=4, num_steps=64, lr=1e-3, seed=3, **kw)  # type: ignore[arg-type]


def test_ppo_improves_reward_on_toy_scenario(toy_config: EnvConfig) -> None:
    # Random placement sends half the pods to the small nodes, where they run 2-3x slower; the policy learns to
    # prefer the big ones: reward (minus jobs in system) rises and the P99 job time of finished episodes falls.
    _, rows = train_ppo(_tiny(256 * 24), toy_config, NetConfig())
    curve = [r["reward_per_step"] for r in rows]
    first, last = np.mean(curve[:3]), np.mean(curve[-3:])
    assert last > first + 0.15 * abs(first), (first, last)
    jct = [r["jct_p99_s"] for r in rows if np.isfinite(r["jct_p99_s"])]
    assert np.mean(jct[-3:]) < 0.75 * np.mean(jct[:3]), jct


def test_ppo_same_seed_same_weights(batch_config: EnvConfig) -> None:
    a, rows_a = train_ppo(_tiny(512), batch_config, NetConfig())
    b, rows_b = train_ppo(_tiny(512), batch_config, NetConfig())
    for (ka, va), (kb, vb) in zip(a.state_dict().items(), b.state_dict().items(), strict=True):
        assert ka == kb and torch.equal(va, vb)
    assert [r["reward_per_step"] for r in rows_a] == [r["reward_per_step"] for r in rows_b]


def test_framestack_and_shared_workload_variants_run(batch_config: EnvConfig) -> None:
    _, rows = train_ppo(_tiny(256, shared_workload=2, bc_steps=128, bc_epochs=1), batch_config,
                        NetConfig(encoder="framestack"))
    assert rows[0]["bc_accuracy"] >= 0 and rows[-1]["step"] == 256


def test_dqn_runs(batch_config: EnvConfig) -> None:
    _, rows = train_dqn(DQNSettings(total_steps=512, num_envs=4, learning_starts=128, log_every=256,
                                    batch_size=32), batch_config, NetConfig())
    assert rows and all(np.isfinite(r["td_loss"]) for r in rows)


def test_entropy_schedules() -> None:
    s = PPOSettings(ent_coef=0.01, ent_coef_end=0.001)
    assert entropy_coef(s, 0.0) == 0.01 and abs(entropy_coef(s, 1.0) - 0.001) < 1e-12
    s.ent_schedule = "exp"
    assert abs(entropy_coef(s, 0.5) - 0.01 * 0.1 ** 0.5) < 1e-12
