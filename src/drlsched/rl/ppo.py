"""PPO with masked node × GPU-option actions, in one file (CleanRL style).

The LSTM encodes the metric-history window carried in each observation, so the policy itself is feed-forward in
the env state: rollouts need no recurrent state, and minibatches can be shuffled steps.

Implementation details (numbers refer to "The 37 implementation details of PPO"): vectorised envs with
same-step autoreset (1), orthogonal init with a 0.01 policy head (2), Adam eps 1e-5 (3), linear LR annealing (4),
GAE with bootstrapping on truncation via V(final_obs) (5), shuffled minibatches (6), per-minibatch advantage
normalisation (7), clipped surrogate (8), total loss pg − ent·H + vf·V (10), global grad-norm clipping (11),
approx-KL / clip fraction / explained variance logged (12). Masks are stored with every step and applied again in
the update. The entropy coefficient decays from `ent_coef` to `ent_coef_end` (linear or exponential). Rewards
are scaled by a running std of the discounted return.

Variance reduction for trace-driven input (`shared_workload=K`, Decima-style): envs run in groups of K that replay
the same workload sequence (same reset seeds); each step's advantage has its group's mean at the same rollout
step subtracted, an input-dependent baseline aligned by decision index. K=1 turns it off.

Behaviour-cloning warm start (`bc_steps`): before PPO, the policy imitates a baseline (default `k8s-default`) by
cross-entropy on the masked logits over that many decisions taken by the baseline (its own Adam, `bc_lr`, `bc_epochs`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector import AutoresetMode, SyncVectorEnv
from torch import nn

from drlsched.rl.env import EnvConfig, SchedulingEnv
from drlsched.rl.network import NetConfig, SchedulerNet, masked_entropy


@dataclass
class PPOSettings:
    total_steps: int = 100_000
    """env steps (decisions) over all envs"""
    minutes: float | None = None
    """wall-clock budget; training stops at whichever of steps and minutes comes first"""
    num_envs: int = 8
    num_steps: int = 128
    """steps per env per rollout"""
    lr: float = 2.5e-4
    anneal_lr: bool = True
    gamma: float = 0.99
    gae_lambda: float = 0.95
    num_minibatches: int = 4
    update_epochs: int = 4
    norm_adv: bool = True
    clip_coef: float = 0.2
    ent_coef: float = 0.01
    ent_coef_end: float = 0.001
    ent_schedule: str = "linear"
    """linear or exp decay of the entropy coefficient over training"""
    vf_coef: float = 0.5
    max_grad_norm: float = 0.5
    target_kl: float | None = None
    norm_reward: bool = True
    shared_workload: int = 1
    bc_steps: int = 0
    bc_expert: str = "k8s-default"
    bc_epochs: int = 10
    bc_lr: float = 1e-3
    seed: int = 0
    threads: int = 1


Logger = Callable[[dict[str, float]], None]


def make_envs(env_cfg: EnvConfig, n: int) -> SyncVectorEnv:
    return SyncVectorEnv([lambda: SchedulingEnv(replace(env_cfg)) for _ in range(n)],
                         autoreset_mode=AutoresetMode.SAME_STEP)


def reset_seeds(seed: int, n: int, shared: int) -> list[int]:
    """Per-env reset seeds; envs of one shared-workload group get the same one (same workload sequence)."""
    return [seed * 10_007 + i // max(1, shared) for i in range(n)]


def obs_to_torch(obs: dict[str, np.ndarray]) -> dict[str, torch.Tensor]:
    return {k: torch.as_tensor(v) for k, v in obs.items()}


def entropy_coef(s: PPOSettings, frac: float) -> float:
    """frac: share of training done, 0 → 1."""
    if s.ent_schedule == "exp" and s.ent_coef > 0 and s.ent_coef_end > 0:
        return s.ent_coef * (s.ent_coef_end / s.ent_coef) ** frac
    return s.ent_coef + (s.ent_coef_end - s.ent_coef) * frac


class RunningStd:
    """Running variance of the discounted return per env, for reward scaling."""

    def __init__(self, n: int, gamma: float) -> None:
        self.ret = np.zeros(n)
        self.gamma = gamma
        self.count, self.mean, self.m2 = 1e-4, 0.0, 0.0

    def scale(self, reward: np.ndarray, done: np.ndarray) -> np.ndarray:
        self.ret = self.ret * self.gamma + reward
        for x in self.ret:
            self.count += 1
            d = x - self.mean
            self.mean += d / self.count
            self.m2 += d * (x - self.mean)
        self.ret[done] = 0.0
        return reward / math.sqrt(self.m2 / self.count + 1e-8)


def behaviour_clone(net: SchedulerNet, env_cfg: EnvConfig, s: PPOSettings, log: Logger | None = None) -> float:
    """Imitate `s.bc_expert` on `s.bc_steps` decisions it takes itself; returns the final imitation accuracy
    (below 1 even for a perfect imitation where the expert breaks ties between equal nodes at random)."""
    opt = torch.optim.Adam(net.parameters(), lr=s.bc_lr, eps=1e-5)
    envs = make_envs(replace(env_cfg, expert=s.bc_expert), s.num_envs)
    obs, info = envs.reset(seed=reset_seeds(s.seed + 7919, s.num_envs, 1))
    buf: dict[str, list[np.ndarray]] = {k: [] for k in obs}
    acts: list[np.ndarray] = []
    for _ in range(max(1, s.bc_steps // s.num_envs)):
        a = info["expert_action"]
        for k in obs:
            buf[k].append(obs[k])
        acts.append(a)
        obs, _, _, _, info = envs.step(a)
    envs.close()
    data = {k: torch.as_tensor(np.concatenate(v)) for k, v in buf.items()}
    y = torch.as_tensor(np.concatenate(acts), dtype=torch.long)
    n = y.shape[0]
    g = torch.Generator().manual_seed(s.seed)
    acc = 0.0
    for epoch in range(s.bc_epochs):
        perm = torch.randperm(n, generator=g)
        correct = 0
        for start in range(0, n, 256):
            idx = perm[start:start + 256]
            logits, _ = net({k: v[idx] for k, v in data.items()})
            loss = nn.functional.cross_entropy(logits, y[idx])
            opt.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(net.parameters(), s.max_grad_norm)
            opt.step()
            correct += int((logits.argmax(-1) == y[idx]).sum())
        acc = correct / n
        if log:
            log({"bc_epoch": epoch, "bc_accuracy": acc, "bc_loss": float(loss.detach())})
    return acc


def train_ppo(s: PPOSettings, env_cfg: EnvConfig, net_cfg: NetConfig, net: SchedulerNet | None = None,
              on_update: Logger | None = None, progress: Any = None) -> tuple[SchedulerNet, list[dict[str, float]]]:
    """Trains and returns the network and one learning-curve row per update."""
    torch.set_num_threads(s.threads)
    torch.manual_seed(s.seed)
    np.random.seed(s.seed)
    net = net or SchedulerNet(net_cfg)
    t0 = time.perf_counter()
    rows: list[dict[str, float]] = []
    if s.bc_steps > 0:
        acc = behaviour_clone(net, env_cfg, s)
        rows.append({"update": 0, "step": 0, "wall_s": time.perf_counter() - t0, "bc_accuracy": acc})

    opt = torch.optim.Adam(net.parameters(), lr=s.lr, eps=1e-5)
    envs = make_envs(env_cfg, s.num_envs)
    n_env, n_steps = s.num_envs, s.num_steps
    batch = n_env * n_steps
    mb_size = max(1, batch // s.num_minibatches)
    num_updates = max(1, s.total_steps // batch)
    obs, _ = envs.reset(seed=reset_seeds(s.seed, n_env, s.shared_workload))
    space: gym.spaces.Dict = envs.single_observation_space  # type: ignore[assignment]
    buf = {k: torch.zeros((n_steps, n_env, *sp.shape), dtype=torch.as_tensor(np.zeros(0, sp.dtype)).dtype)
           for k, sp in space.spaces.items()}
    actions = torch.zeros((n_steps, n_env), dtype=torch.long)
    logps = torch.zeros((n_steps, n_env))
    rewards = torch.zeros((n_steps, n_env))
    dones = torch.zeros((n_steps, n_env))
    values = torch.zeros((n_steps, n_env))
    scaler = RunningStd(n_env, s.gamma) if s.norm_reward else None
    ep_ret = np.zeros(n_env)
    ep_len = np.zeros(n_env, dtype=np.int64)
    next_done = torch.zeros(n_env)
    global_step = 0
    for update in range(1, num_updates + 1):
        if s.minutes is not None and time.perf_counter() - t0 > s.minutes * 60:
            break
        # Share of training done, by steps or by the wall-clock budget, whichever is further along.
        frac = (update - 1) / num_updates
        if s.minutes is not None:
            frac = max(frac, (time.perf_counter() - t0) / (s.minutes * 60))
        if s.anneal_lr:
            opt.param_groups[0]["lr"] = s.lr * (1.0 - frac)
        ent_coef = entropy_coef(s, frac)
        finished: list[dict[str, float]] = []
        raw_sum = 0.0
        for step in range(n_steps):
            global_step += n_env
            for k in buf:
                buf[k][step] = torch.as_tensor(obs[k])
            dones[step] = next_done
            with torch.no_grad():
                logits, value = net(obs_to_torch(obs))
            dist = torch.distributions.Categorical(logits=logits)
            action = dist.sample()
            actions[step], logps[step], values[step] = action, dist.log_prob(action), value
            obs, reward, term, trunc, info = envs.step(action.numpy())
            raw_sum += float(reward.sum())
            ep_ret += reward
            ep_len += 1
            done = term | trunc
            r = scaler.scale(reward, done) if scaler else reward.astype(np.float64)
            if trunc.any():  # bootstrap a cut episode with the value of its last observation
                final = info["final_obs"]
                idx = np.flatnonzero(trunc)
                fin = {k: torch.as_tensor(np.stack([final[i][k] for i in idx])) for k in obs}
                with torch.no_grad():
                    r[idx] += s.gamma * net(fin)[1].numpy()
            rewards[step] = torch.as_tensor(r, dtype=torch.float32)
            next_done = torch.as_tensor(done, dtype=torch.float32)
            for i in np.flatnonzero(done):
                row = {"return": float(ep_ret[i]), "length": float(ep_len[i])}
                fi = info.get("final_info", {})
                if term[i] and "metrics" in fi and fi["_metrics"][i]:
                    m = fi["metrics"]
                    for key in ("cpu_util", "jct_p99_s", "sla_violation_rate", "cross_node_traffic_gb"):
                        row[key] = float(m[key][i])
                finished.append(row)
                ep_ret[i], ep_len[i] = 0.0, 0

        # GAE over the rollout, bootstrapping from the value of the next observation.
        with torch.no_grad():
            next_value = net(obs_to_torch(obs))[1]
        adv = torch.zeros_like(rewards)
        last = torch.zeros(n_env)
        for t in reversed(range(n_steps)):
            nv, nonterm = (next_value, 1.0 - next_done) if t == n_steps - 1 else (values[t + 1], 1.0 - dones[t + 1])
            delta = rewards[t] + s.gamma * nv * nonterm - values[t]
            last = delta + s.gamma * s.gae_lambda * nonterm * last
            adv[t] = last
        returns = adv + values
        if s.shared_workload > 1:
            k = s.shared_workload
            groups = adv.view(n_steps, n_env // k, k)
            adv = (groups - groups.mean(-1, keepdim=True)).view(n_steps, n_env)

        b_obs = {k: v.flatten(0, 1) for k, v in buf.items()}
        b_act, b_logp = actions.flatten(), logps.flatten()
        b_adv, b_ret, b_val = adv.flatten(), returns.flatten(), values.flatten()
        g = torch.Generator().manual_seed(s.seed * 1_000_003 + update)
        clipfracs: list[float] = []
        stop = False
        for _ in range(s.update_epochs):
            perm = torch.randperm(batch, generator=g)
            for start in range(0, batch, mb_size):
                mb = perm[start:start + mb_size]
                mb_obs = {k: v[mb] for k, v in b_obs.items()}
                logits, new_v = net(mb_obs)
                logp_all = torch.log_softmax(logits, -1)
                new_logp = logp_all.gather(1, b_act[mb, None]).squeeze(1)
                entropy = masked_entropy(logits, mb_obs["action_mask"])
                logratio = new_logp - b_logp[mb]
                ratio = logratio.exp()
                with torch.no_grad():
                    approx_kl = float(((ratio - 1) - logratio).mean())
                    clipfracs.append(float(((ratio - 1.0).abs() > s.clip_coef).float().mean()))
                a = b_adv[mb]
                if s.norm_adv and a.numel() > 1:
                    a = (a - a.mean()) / (a.std() + 1e-8)
                pg_loss = torch.max(-a * ratio, -a * ratio.clamp(1 - s.clip_coef, 1 + s.clip_coef)).mean()
                v_loss = 0.5 * ((new_v - b_ret[mb]) ** 2).mean()
                ent = entropy.mean()
                loss = pg_loss - ent_coef * ent + s.vf_coef * v_loss
                opt.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(net.parameters(), s.max_grad_norm)
                opt.step()
            if s.target_kl is not None and approx_kl > s.target_kl:
                stop = True
            if stop:
                break
        var_y = float(b_ret.var())
        explained = float("nan") if var_y == 0 else 1.0 - float((b_ret - b_val).var()) / var_y
        row: dict[str, float] = {
            "update": update, "step": global_step, "wall_s": time.perf_counter() - t0,
            "reward_per_step": raw_sum / batch, "episodes": len(finished),
            "episode_return": _mean(finished, "return"), "cpu_util": _mean(finished, "cpu_util"),
            "jct_p99_s": _mean(finished, "jct_p99_s"), "sla_violation_rate": _mean(finished, "sla_violation_rate"),
            "entropy": float(ent.detach()), "approx_kl": approx_kl, "clipfrac": float(np.mean(clipfracs)),
            "pg_loss": float(pg_loss.detach()), "v_loss": float(v_loss.detach()), "explained_var": explained,
            "lr": opt.param_groups[0]["lr"], "ent_coef": ent_coef,
        }
        rows.append(row)
        if on_update:
            on_update(row)
        if progress is not None:
            progress.update(batch)
            progress.set_postfix(reward=f"{row['reward_per_step']:.4f}", util=f"{row['cpu_util']:.3f}")
    envs.close()
    return net, rows


def _mean(rows: list[dict[str, float]], key: str) -> float:
    vals = [r[key] for r in rows if key in r]
    return float(np.mean(vals)) if vals else float("nan")


def settings_dict(s: PPOSettings) -> dict[str, object]:
    return asdict(s)
