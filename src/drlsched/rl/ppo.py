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

Rollouts come from workers that each own a slice of the envs (`drlsched.rl.rollout`: per-env seeding and action
sampling, so the split does not change a number); the learner below joins their trajectories in env order and does
everything that looks across envs: reward scaling, GAE, the shared-workload baseline and the update. The local
backend is one worker in this process; `drlsched.distributed.ray_backend` runs workers as Ray actors.

Variance reduction for trace-driven input (`shared_workload=K`, Decima-style): envs run in groups of K that replay
the same workload sequence (same reset seeds); each step's advantage has its group's mean at the same rollout
step subtracted, an input-dependent baseline aligned by decision index. K=1 turns it off.

Behaviour-cloning warm start (`bc_steps`): before PPO, the policy imitates a baseline (default `k8s-default`) by
cross-entropy on the masked logits over that many decisions taken by the baseline (its own Adam, `bc_lr`, `bc_epochs`).
The hold action is left out of that cross-entropy: a heuristic never holds, and imitating it would teach the policy
never to, which PPO then hardly explores.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np
import torch
from torch import nn

from drlsched.rl.env import EnvConfig
from drlsched.rl.network import MASKED, NetConfig, SchedulerNet, masked_entropy
from drlsched.rl.rollout import LocalRollouts, Rollouts, RolloutSettings, make_envs, reset_seeds
from drlsched.rl.scaling import RunningStd

RolloutsFactory = Callable[[EnvConfig, NetConfig, RolloutSettings], Rollouts]


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

    def rollout_settings(self) -> RolloutSettings:
        return RolloutSettings(seed=self.seed, num_envs=self.num_envs, num_steps=self.num_steps,
                               shared_workload=self.shared_workload, threads=self.threads)


Logger = Callable[[dict[str, float]], None]


def entropy_coef(s: PPOSettings, frac: float) -> float:
    """frac: share of training done, 0 → 1."""
    if s.ent_schedule == "exp" and s.ent_coef > 0 and s.ent_coef_end > 0:
        return s.ent_coef * (s.ent_coef_end / s.ent_coef) ** frac
    return s.ent_coef + (s.ent_coef_end - s.ent_coef) * frac


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
            # A heuristic expert never holds: the hold is left out of the imitation (not taught "never"), so PPO
            # still explores it after the warm start.
            logits = torch.cat([logits[:, :-1], torch.full_like(logits[:, -1:], MASKED)], dim=1)
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
              on_update: Logger | None = None, progress: Any = None, rollouts: RolloutsFactory | None = None
              ) -> tuple[SchedulerNet, list[dict[str, float]]]:
    """Trains and returns the network and one learning-curve row per update. `rollouts` makes the rollout backend
    (default `LocalRollouts`: all envs in this process; `drlsched.distributed.ray_backend.RayRollouts`: Ray
    actors); the result is the same for either."""
    torch.set_num_threads(s.threads)
    torch.manual_seed(s.seed)
    np.random.seed(s.seed)
    net = net or SchedulerNet(net_cfg)
    t0 = time.perf_counter()
    rows: list[dict[str, float]] = []
    if s.bc_steps > 0:
        if progress is not None:  # the warm start takes a while before the first PPO step: say what is going on
            label = getattr(progress, "desc", "")  # a disabled tqdm (--quiet) has no desc
            progress.set_description_str(f"{label}: imitating {s.bc_expert}")
        acc = behaviour_clone(net, env_cfg, s, log=None if progress is None else
                              lambda r: progress.set_postfix(epoch=int(r["bc_epoch"]) + 1,
                                                             accuracy=f"{r['bc_accuracy']:.3f}"))
        if progress is not None:
            progress.set_description_str(label)
        rows.append({"update": 0, "step": 0, "wall_s": time.perf_counter() - t0, "bc_accuracy": acc})

    opt = torch.optim.Adam(net.parameters(), lr=s.lr, eps=1e-5)
    workers = (rollouts or LocalRollouts)(env_cfg, net.cfg, s.rollout_settings())
    n_env, n_steps = s.num_envs, s.num_steps
    batch = n_env * n_steps
    mb_size = max(1, batch // s.num_minibatches)
    num_updates = max(1, s.total_steps // batch)
    scaler = RunningStd(n_env, s.gamma) if s.norm_reward else None
    next_done = torch.zeros(n_env)
    global_step = 0
    util = "-"  # the bar's utilisation: the last one measured (an update whose rollouts end no episode has none)
    try:
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
            t_rollout = time.perf_counter()
            traj = workers.collect(net)
            t_learn = time.perf_counter()
            global_step += batch
            finished = [ep for _, _, ep in traj.finished]
            raw_sum = sum(float(traj.rewards[t].sum()) for t in range(n_steps))
            # Rewards are scaled here, over all envs in env order, so the scale does not depend on the workers.
            scaled = np.zeros((n_steps, n_env))
            for t in range(n_steps):
                r = scaler.scale(traj.rewards[t], traj.dones[t]) if scaler else traj.rewards[t].astype(np.float64)
                cut = np.flatnonzero(traj.truncs[t])  # bootstrap a cut episode with the value of its last obs
                r[cut] += s.gamma * traj.trunc_values[t, cut]
                scaled[t] = r
            rewards = torch.as_tensor(scaled, dtype=torch.float32)
            values = torch.from_numpy(traj.values)
            # dones[t]: an episode ended just before step t (CleanRL's layout), carried over from the last rollout.
            dones = torch.cat([next_done[None], torch.as_tensor(traj.dones[:-1], dtype=torch.float32)])
            next_done = torch.as_tensor(traj.dones[-1], dtype=torch.float32)

            # GAE over the rollout, bootstrapping from the value of the next observation.
            next_value = torch.from_numpy(traj.next_value)
            adv = torch.zeros_like(rewards)
            last = torch.zeros(n_env)
            for t in reversed(range(n_steps)):
                nv, nonterm = ((next_value, 1.0 - next_done) if t == n_steps - 1
                               else (values[t + 1], 1.0 - dones[t + 1]))
                delta = rewards[t] + s.gamma * nv * nonterm - values[t]
                last = delta + s.gamma * s.gae_lambda * nonterm * last
                adv[t] = last
            returns = adv + values
            if s.shared_workload > 1:
                k = s.shared_workload
                groups = adv.view(n_steps, n_env // k, k)
                adv = (groups - groups.mean(-1, keepdim=True)).view(n_steps, n_env)

            b_obs = {k: torch.from_numpy(v).flatten(0, 1) for k, v in traj.obs.items()}
            b_act, b_logp = torch.from_numpy(traj.actions).flatten(), torch.from_numpy(traj.logps).flatten()
            b_adv, b_ret, b_val = adv.flatten(), returns.flatten(), values.flatten()
            g = torch.Generator().manual_seed(s.seed * 1_000_003 + update)
            clipfracs: list[float] = []
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
                    break
            var_y = float(b_ret.var())
            explained = float("nan") if var_y == 0 else 1.0 - float((b_ret - b_val).var()) / var_y
            now = time.perf_counter()
            row: dict[str, float] = {
                "update": update, "step": global_step, "wall_s": now - t0,
                "reward_per_step": raw_sum / batch, "episodes": len(finished),
                "episode_return": _mean(finished, "return"), "cpu_util": _mean(finished, "cpu_util"),
                "jct_p99_s": _mean(finished, "jct_p99_s"),
                "sla_violation_rate": _mean(finished, "sla_violation_rate"),
                "anomaly_rate": _mean(finished, "anomaly_rate"),
                "entropy": float(ent.detach()), "approx_kl": approx_kl, "clipfrac": float(np.mean(clipfracs)),
                "pg_loss": float(pg_loss.detach()), "v_loss": float(v_loss.detach()), "explained_var": explained,
                "lr": opt.param_groups[0]["lr"], "ent_coef": ent_coef,
                "rollout_s": t_learn - t_rollout, "learn_s": now - t_learn,
            }
            rows.append(row)
            if on_update:
                on_update(row)
            if progress is not None:
                progress.update(batch)
                if not math.isnan(row["cpu_util"]):
                    util = f"{row['cpu_util']:.3f}"
                progress.set_postfix(reward=f"{row['reward_per_step']:.4f}", util=util)
    finally:
        workers.close()
    return net, rows


def _mean(rows: list[dict[str, float]], key: str) -> float:
    vals = [r[key] for r in rows if key in r]
    return float(np.mean(vals)) if vals else float("nan")


def settings_dict(s: PPOSettings) -> dict[str, object]:
    return asdict(s)
