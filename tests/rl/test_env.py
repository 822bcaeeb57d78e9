"""The env follows the Gymnasium API, its masks are exactly the simulator's feasibility, and it is deterministic."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import drlsched.rl
from drlsched.rl.env import EnvConfig, SchedulingEnv
from drlsched.rl.features import MAX_OPTIONS


@pytest.mark.filterwarnings("ignore:.*infinity:UserWarning")
def test_gymnasium_env_checker(batch_config: EnvConfig) -> None:
    check_env(SchedulingEnv(batch_config), skip_render_check=True)


def test_registered_id_makes_the_env(batch_config: EnvConfig) -> None:
    env = gym.make(drlsched.rl.ENV_ID, config=batch_config)
    obs, info = env.reset(seed=3)
    assert obs["action_mask"].shape == (4 * MAX_OPTIONS + 1,)  # the last: hold
    assert np.array_equal(info["action_mask"], obs["action_mask"])


def _random_episode(env: SchedulingEnv, seed: int, check: bool = False, max_steps: int = 400) -> list[float]:
    obs, _ = env.reset(seed=seed)
    rng = np.random.default_rng(seed)
    rewards = []
    for _ in range(max_steps):
        mask = obs["action_mask"]
        if check:
            ctx = env.ctx
            assert ctx is not None
            c = ctx.cluster
            expected = np.zeros((c.size, MAX_OPTIONS), dtype=np.int8)
            for k, o in enumerate(ctx.options[:MAX_OPTIONS]):
                expected[:, k] = o.feasible
                r = o.request
                for node in np.flatnonzero(mask[:-1].reshape(c.size, MAX_OPTIONS)[:, k]):
                    # An allowed node really has room for the request.
                    assert c.cap_cpu[node] - c.req_cpu[node] >= r.cpu
                    assert c.cap_mem[node] - c.req_mem[node] >= r.mem
                    assert c.pods[node] < c.max_pods[node]
                    if r.gpus:
                        assert c.full_free_gpus[node] >= r.gpus or r.gpu_milli < 1000
            assert np.array_equal(mask[:-1], expected.reshape(-1))
            assert mask[-1] == 0  # no reclaim model: no hold
            assert mask.any()
        obs, reward, term, trunc, _ = env.step(int(rng.choice(np.flatnonzero(mask))))
        rewards.append(reward)
        if term or trunc:
            break
    return rewards


def test_masks_allow_only_feasible_nodes() -> None:
    for scenario in ("batch", "ml-gpu"):
        env = SchedulingEnv(EnvConfig(scenario=scenario, nodes=6, duration_s=60.0, load=2.0))
        assert len(_random_episode(env, seed=1, check=True)) > 10


def test_masked_action_leaves_the_pod_pending(batch_config: EnvConfig) -> None:
    env = SchedulingEnv(batch_config)
    obs, _ = env.reset(seed=0)
    for _ in range(200):  # until a pod that does not fit everywhere
        bad = np.flatnonzero(obs["action_mask"] == 0)
        if bad.size:
            placed = env.sim.acc.pods_scheduled  # type: ignore[union-attr]
            obs, reward, _, _, info = env.step(int(bad[0]))
            assert info["invalid_action"] and reward <= -batch_config.invalid_penalty + 1.0
            assert env.sim.acc.pods_scheduled == placed  # type: ignore[union-attr]
            return
        obs, _, term, _, _ = env.step(int(np.flatnonzero(obs["action_mask"])[0]))
        assert not term
    raise AssertionError("no masked action in 200 steps")


def test_same_seed_same_episode(batch_config: EnvConfig) -> None:
    a = _random_episode(SchedulingEnv(batch_config), seed=5)
    b = _random_episode(SchedulingEnv(batch_config), seed=5)
    assert a == b
    assert a != _random_episode(SchedulingEnv(batch_config), seed=6)


def test_episode_ends_with_metrics(batch_config: EnvConfig) -> None:
    env = SchedulingEnv(batch_config)
    obs, _ = env.reset(seed=2)
    while True:
        obs, _, term, trunc, info = env.step(int(np.flatnonzero(obs["action_mask"])[0]))
        if term:
            assert info["metrics"]["pods_scheduled"] > 0
            break
        assert not trunc


def test_any_node_count() -> None:
    for n in (3, 17):
        env = SchedulingEnv(EnvConfig(scenario="batch", nodes=n, duration_s=10.0))
        obs, _ = env.reset(seed=0)
        assert obs["nodes"].shape[0] == n and env.action_space.n == n * MAX_OPTIONS + 1


def test_data_locality_features_follow_the_parent_tasks_pods() -> None:
    env = SchedulingEnv(EnvConfig(scenario="spark-tpcds", nodes=6, duration_s=120.0, expert="k8s-default"))
    obs, info = env.reset(seed=2)
    seen = 0
    for _ in range(3000):
        ctx = env.ctx
        assert ctx is not None
        share = obs["nodes"][:, 17]
        if ctx.pod.parents:
            # The simulator's own record of where each parent-task pod ran.
            where = [n for p in ctx.pod.parents for n in env.sim.jobs[ctx.pod.job_id].tasks[p].nodes]  # type: ignore[union-attr]
            expected = np.bincount(where, minlength=ctx.cluster.size) / len(where)
            assert np.allclose(share, expected, atol=1e-6)
            seen += 1
        else:
            assert not share.any()
        obs, _, term, trunc, info = env.step(info["expert_action"])
        if term or trunc or seen >= 20:
            break
    assert seen >= 20
