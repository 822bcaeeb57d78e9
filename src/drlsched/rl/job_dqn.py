"""A masked double DQN for the job-level decision (`drlsched train-jobs --algo dqn`): the baseline of issue 24 §4's
PPO-vs-DQN comparison, on the same network (rl/job_net.py), masks, decisions and reward as the PPO trainer.

The network's two heads become Q-value heads: the job score is Q(s, j), the value of giving freed capacity first to
eligible job j (with its best limit), and the limit logits are Q(s, j, l), the value of doing so with limit level l.
At optimum Q(s, j) = max_l Q(s, j, l); both are regressed to the same target. Masks act as in the PPO policy: jobs
that are not eligible and masked limit levels carry NEG, so the greedy argmax never picks them, exploration draws
among the allowed ones only, and the target's max is over the next state's eligible jobs. Serving is therefore the
PPO policy's greedy path unchanged (eligible jobs by descending score, each at its argmax level).

The action learnt is the decision's first pick and its level; the rest of the ranking follows Q (the greedy order).
Reward per decision: the PPO trainer's, −(jobs in system × Δt − running average × Δt) / τ (differential), summed
over the decisions where nothing could be chosen up to the next eligible one. n-step returns over the eligible
decisions, discount γ per decision, bootstrapped by the target net at the online net's argmax (double DQN), Huber
loss, rewards divided by a running standard deviation. Seeds as the PPO trainer's (training 1000 + 100000·seed + n,
validation 900…).
"""

from __future__ import annotations

import copy
import math
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass

import numpy as np
import torch

from drlsched.jobs.workload import JobSource
from drlsched.rl.job_features import JobObs
from drlsched.rl.job_net import JobNet, collate
from drlsched.rl.job_policy import LearnedJobPolicy
from drlsched.rl.job_train import TRAIN_SEED, JobTrainSettings, job_seconds, run_episode, validate
from drlsched.rl.reward import RewardWeights

Logger = Callable[[dict[str, float]], None]


@dataclass
class JobDQNSettings:
    minutes: float = 5.0
    episodes: int | None = None  # at most this many training episodes (tests, short runs)
    lr: float = 3e-4
    gamma: float = 0.99
    n_step: int = 5
    buffer: int = 20_000  # transitions (eligible decisions)
    batch: int = 64
    replay_ratio: float = 0.25  # gradient steps per new transition
    learning_starts: int = 500
    target_every: int = 250  # gradient steps between hard target-network copies
    eps_start: float = 1.0
    eps_end: float = 0.05
    eps_fraction: float = 0.25  # share of the budget over which ε decays linearly
    validate_every: int = 5  # episodes
    validation_seeds: int = 3
    seed: int = 0

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


@dataclass
class Transition:
    obs: JobObs
    job: int  # row of the first pick
    level: int
    ret: float  # n-step discounted (scaled) reward
    next_obs: JobObs | None  # None: the episode ended first
    discount: float  # γ^n for the bootstrap


class EpsilonGreedy(LearnedJobPolicy):
    """With probability ε the first pick is a uniformly drawn eligible job at a uniformly drawn allowed level; the
    rest (and otherwise everything) greedy in Q."""

    def __init__(self, net: JobNet, eps: float, seed: int) -> None:
        super().__init__(net, name="dqn")
        self.eps = eps
        self.rng = np.random.default_rng(seed)

    def act(self, obs: JobObs) -> tuple[np.ndarray, np.ndarray, float]:
        ranks, levels, _ = super().act(obs)  # greedy (sample=False)
        if self.rng.random() < self.eps:
            idx = np.flatnonzero(obs.eligible)
            pick = int(self.rng.choice(idx))
            ranks = np.where((ranks >= 0) & (ranks < ranks[pick]), ranks + 1, ranks)
            ranks[pick] = 0
            levels = levels.copy()
            levels[pick] = int(self.rng.choice(np.flatnonzero(obs.limit_mask)))
        return ranks, levels, 0.0


def transitions(steps: Sequence, rewards: np.ndarray, gamma: float, n: int) -> list[Transition]:
    """The eligible decisions of one episode as n-step transitions. `rewards` float[steps]: each decision's reward;
    a decision where nothing was eligible adds its reward to the eligible decision before it (rewards before the
    first eligible one have no action to credit and are dropped)."""
    el = [i for i, st in enumerate(steps) if st.obs.eligible.any()]
    if not el:
        return []
    bounds = [*el, len(steps)]
    r = np.array([rewards[bounds[k]:bounds[k + 1]].sum() for k in range(len(el))])
    out = []
    for k, i in enumerate(el):
        m = min(n, len(el) - k)
        g = float(np.sum(r[k:k + m] * gamma ** np.arange(m)))
        nxt = steps[el[k + m]].obs if k + m < len(el) else None
        first = int(np.flatnonzero(steps[i].ranks == 0)[0])
        out.append(Transition(steps[i].obs, first, int(steps[i].levels[first]), g, nxt, gamma ** m))
    return out


def _rows(obs: Sequence[JobObs], picks: Sequence[int]) -> torch.Tensor:
    off = np.cumsum([0] + [o.jobs for o in obs])[:-1]
    return torch.from_numpy(off + np.asarray(picks, dtype=np.int64))


def td_loss(net: JobNet, target: JobNet, batch: Sequence[Transition]) -> torch.Tensor:
    """Huber loss of Q(s, j) and Q(s, j, l) at the taken first pick against r + γⁿ Q_target(s', argmax_online)."""
    b = collate([t.obs for t in batch])
    scores, limits = net(b)
    rows = _rows([t.obs for t in batch], [t.job for t in batch])
    q_job = scores[rows]
    q_lim = limits[rows, torch.tensor([t.level for t in batch])]
    y = torch.tensor([t.ret for t in batch], dtype=torch.float32)
    live = [k for k, t in enumerate(batch) if t.next_obs is not None]
    if live:
        nxt = [batch[k].next_obs for k in live]
        nb = collate(nxt)  # type: ignore[arg-type]
        with torch.no_grad():
            online, _ = net(nb)
            tgt, _ = target(nb)
            dec = nb.job_dec
            best = torch.full((nb.decisions,), -math.inf).scatter_reduce(0, dec, online, "amax")
            # the first row of each decision holding its max (ties: any; masked rows hold NEG, never the max)
            hit = online >= best[dec]
            row = torch.full((nb.decisions,), nb.job_dec.numel(), dtype=torch.int64).scatter_reduce(
                0, dec[hit], torch.nonzero(hit).squeeze(1), "amin")
            disc = torch.tensor([batch[k].discount for k in live], dtype=torch.float32)
            y = y.index_add(0, torch.tensor(live), disc * tgt[row])
    huber = torch.nn.functional.smooth_l1_loss
    return huber(q_job, y) + huber(q_lim, y)


def train_dqn(net: JobNet, source: JobSource, s: JobDQNSettings, reward: RewardWeights, log: Logger,
              on_best: Callable[[JobNet, float, int], None]) -> dict[str, float]:
    """DQN until `minutes` or `episodes`; `on_best(net, validation_jct, episode)` when the greedy validation mean
    JCT improves (episode 0: the untrained start). Rows logged per episode: step (eligible decisions so far, as the
    PPO trainer counts them), wall_s, train_jct_mean_s, eps, loss."""
    vs = JobTrainSettings(validation_seeds=s.validation_seeds)
    best = validate(net, source, vs)
    on_best(net, best, 0)
    log({"phase": 1.0, "update": 0.0, "step": 0.0, "validation_jct_mean_s": best})
    target = copy.deepcopy(net)
    target.eval()
    opt = torch.optim.Adam(net.parameters(), lr=s.lr, eps=1e-5)
    replay: deque[Transition] = deque(maxlen=s.buffer)
    rng = np.random.default_rng(s.seed)
    tau = reward.time_scale_s
    rate: float | None = None
    var: float | None = None  # running variance of the per-decision reward (the scale Q is learnt in)
    t0 = time.perf_counter()
    budget = 60.0 * s.minutes
    episode = steps_total = grads = 0
    debt = 0.0
    while (s.episodes is None or episode < s.episodes) and time.perf_counter() - t0 < budget:
        episode += 1
        frac = (time.perf_counter() - t0) / budget
        if s.episodes:
            frac = max(frac, (episode - 1) / s.episodes)
        eps = s.eps_end + (s.eps_start - s.eps_end) * max(0.0, 1.0 - frac / s.eps_fraction)
        actor = EpsilonGreedy(net, eps, seed=s.seed * 1_000_003 + episode)
        ep = run_episode(source, actor, TRAIN_SEED + 100_000 * s.seed + episode)
        x = job_seconds(ep)
        dt = np.diff(np.array([st.t for st in ep.steps] + [ep.end_s]))
        mean_rate = float(x.sum() / max(dt.sum(), 1e-9))
        rate = mean_rate if rate is None else 0.9 * rate + 0.1 * mean_rate
        r = -reward.jct * (x - rate * dt) / tau
        v = float(r.var()) if r.size > 1 else 1.0
        var = v if var is None else 0.9 * var + 0.1 * v
        new = transitions(ep.steps, r / math.sqrt(max(var, 1e-8)), s.gamma, s.n_step)
        replay.extend(new)
        steps_total += len(new)
        losses = []
        if len(replay) >= min(s.learning_starts, s.buffer):
            debt += s.replay_ratio * len(new)
            net.train()
            while debt >= 1.0:
                debt -= 1.0
                batch = [replay[k] for k in rng.integers(0, len(replay), size=s.batch)]
                loss = td_loss(net, target, batch)
                opt.zero_grad()
                loss.backward()
                torch.nn.utils.clip_grad_norm_(net.parameters(), 10.0)
                opt.step()
                losses.append(float(loss.detach()))
                grads += 1
                if grads % s.target_every == 0:
                    target.load_state_dict(net.state_dict())
            net.eval()
        row = {"phase": 1.0, "update": float(episode), "step": float(steps_total), "eps": eps,
               "train_jct_mean_s": ep.jct_mean_s, "jobs_in_system": mean_rate,
               "loss": float(np.mean(losses)) if losses else math.nan, "grad_steps": float(grads),
               "wall_s": time.perf_counter() - t0}
        if episode % s.validate_every == 0:
            val = validate(net, source, vs)
            row["validation_jct_mean_s"] = val
            if val < best:
                best = val
                on_best(net, val, episode)
        log(row)
    return {"episodes": float(episode), "rl_decisions": float(steps_total), "grad_steps": float(grads),
            "best_validation_jct_mean_s": best, "rl_s": time.perf_counter() - t0}
