"""Masked Double DQN on the same env and backbone as PPO, in one file (CleanRL style): the baseline for
"PPO learns faster than DQN".

The scorer's per-(node, GPU option) outputs are the Q-values. The mask is applied in the three places a value
method needs it: ε-greedy exploration draws among feasible actions only, the greedy argmax is over feasible
actions, and the target's argmax/max is over the next state's feasible actions (the next mask is stored in the
replay buffer with the next observation). Double DQN: the online net picks the next action, the target net values it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import torch
from torch import nn

from drlsched.rl.env import EnvConfig
from drlsched.rl.network import NetConfig, SchedulerNet
from drlsched.rl.rollout import make_envs, obs_to_torch, reset_seeds
from drlsched.rl.scaling import RunningStd


@dataclass
class DQNSettings:
    total_steps: int = 100_000
    """env steps (decisions) over all envs"""
    minutes: float | None = None
    num_envs: int = 8
    lr: float = 2.5e-4
    buffer_size: int = 20_000
    batch_size: int = 128
    gamma: float = 0.99
    target_every: int = 1_000
    """env steps between hard target-network updates"""
    eps_start: float = 1.0
    eps_end: float = 0.05
    eps_fraction: float = 0.3
    """share of training over which ε decays linearly"""
    learning_starts: int = 1_000
    train_every: int = 1
    """vector steps between gradient steps"""
    norm_reward: bool = True
    log_every: int = 1_024
    seed: int = 0
    threads: int = 1


class Replay:
    """Fixed-size ring buffer of (obs, action, reward, next_obs, done) with dict observations as numpy arrays."""

    def __init__(self, size: int, example: dict[str, np.ndarray]) -> None:
        self.size, self.pos, self.full = size, 0, False
        self.obs = {k: np.zeros((size, *v.shape), v.dtype) for k, v in example.items()}
        self.next = {k: np.zeros((size, *v.shape), v.dtype) for k, v in example.items()}
        self.act = np.zeros(size, np.int64)
        self.rew = np.zeros(size, np.float32)
        self.done = np.zeros(size, np.float32)

    def add(self, obs: dict[str, np.ndarray], act: int, rew: float, nxt: dict[str, np.ndarray], done: bool) -> None:
        i = self.pos
        for k in self.obs:
            self.obs[k][i] = obs[k]
            self.next[k][i] = nxt[k]
        self.act[i], self.rew[i], self.done[i] = act, rew, done
        self.pos = (i + 1) % self.size
        self.full = self.full or self.pos == 0

    def __len__(self) -> int:
        return self.size if self.full else self.pos

    def sample(self, n: int, rng: np.random.Generator) -> tuple[Any, ...]:
        idx = rng.integers(len(self), size=n)
        t = torch.as_tensor
        return ({k: t(v[idx]) for k, v in self.obs.items()}, t(self.act[idx]), t(self.rew[idx]),
                {k: t(v[idx]) for k, v in self.next.items()}, t(self.done[idx]))


def train_dqn(s: DQNSettings, env_cfg: EnvConfig, net_cfg: NetConfig, net: SchedulerNet | None = None,
              on_log: Callable[[dict[str, float]], None] | None = None, progress: Any = None
              ) -> tuple[SchedulerNet, list[dict[str, float]]]:
    torch.set_num_threads(s.threads)
    torch.manual_seed(s.seed)
    rng = np.random.default_rng(s.seed)
    net = net or SchedulerNet(net_cfg)
    target = SchedulerNet(net.cfg)
    target.load_state_dict(net.state_dict())
    opt = torch.optim.Adam(net.parameters(), lr=s.lr)
    envs = make_envs(env_cfg, s.num_envs)
    obs, _ = envs.reset(seed=reset_seeds(s.seed, s.num_envs, 1))
    replay = Replay(s.buffer_size, {k: v[0] for k, v in obs.items()})
    scaler = RunningStd(s.num_envs, s.gamma) if s.norm_reward else None
    t0 = time.perf_counter()
    rows: list[dict[str, float]] = []
    step, vstep, since_target = 0, 0, 0
    raw_sum, raw_n, losses, utils = 0.0, 0, [], []
    next_log = s.log_every
    while step < s.total_steps:
        if s.minutes is not None and time.perf_counter() - t0 > s.minutes * 60:
            break
        frac = step / s.total_steps
        if s.minutes is not None:
            frac = max(frac, (time.perf_counter() - t0) / (s.minutes * 60))
        eps = max(s.eps_end, s.eps_start + (s.eps_end - s.eps_start) * frac / s.eps_fraction)
        with torch.no_grad():
            q, _ = net(obs_to_torch(obs))
        action = q.argmax(-1).numpy()
        for i in range(s.num_envs):
            if rng.random() < eps:
                action[i] = rng.choice(np.flatnonzero(obs["action_mask"][i]))
        nxt, reward, term, trunc, info = envs.step(action)
        done = term | trunc
        r = scaler.scale(reward, done) if scaler else reward
        for i in range(s.num_envs):
            nobs = info["final_obs"][i] if done[i] else {k: v[i] for k, v in nxt.items()}
            replay.add({k: v[i] for k, v in obs.items()}, int(action[i]), float(r[i]), nobs, bool(term[i]))
            if term[i] and "metrics" in info.get("final_info", {}) and info["final_info"]["_metrics"][i]:
                utils.append(float(info["final_info"]["metrics"]["cpu_util"][i]))
        raw_sum += float(reward.sum())
        raw_n += s.num_envs
        obs = nxt
        step += s.num_envs
        vstep += 1
        since_target += s.num_envs
        if step >= s.learning_starts and vstep % s.train_every == 0:
            b_obs, b_act, b_rew, b_next, b_done = replay.sample(s.batch_size, rng)
            with torch.no_grad():
                next_a = net(b_next)[0].argmax(-1, keepdim=True)
                next_q = target(b_next)[0].gather(1, next_a).squeeze(1)
                has_next = b_next["action_mask"].any(-1).float()  # a terminal state has no feasible action
                y = b_rew + s.gamma * next_q * (1.0 - b_done) * has_next
            q_sa = net(b_obs)[0].gather(1, b_act[:, None]).squeeze(1)
            loss = nn.functional.smooth_l1_loss(q_sa, y)
            opt.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(net.parameters(), 10.0)
            opt.step()
            losses.append(float(loss.detach()))
        if since_target >= s.target_every:
            target.load_state_dict(net.state_dict())
            since_target = 0
        if progress is not None:
            progress.update(s.num_envs)
        if step >= next_log:
            next_log += s.log_every
            row = {"step": step, "wall_s": time.perf_counter() - t0, "reward_per_step": raw_sum / max(raw_n, 1),
                   "cpu_util": float(np.mean(utils)) if utils else float("nan"), "episodes": len(utils),
                   "td_loss": float(np.mean(losses)) if losses else float("nan"), "epsilon": eps}
            rows.append(row)
            raw_sum, raw_n, losses, utils = 0.0, 0, [], []
            if on_log:
                on_log(row)
            if progress is not None:
                progress.set_postfix(reward=f"{row['reward_per_step']:.4f}", util=f"{row['cpu_util']:.3f}")
    envs.close()
    return net, rows


def settings_dict(s: DQNSettings) -> dict[str, object]:
    return asdict(s)
