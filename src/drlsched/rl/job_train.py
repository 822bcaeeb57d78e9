"""Training the learned job policy (`drlsched train-jobs`, docs/learning.md "Learned job policy").

Decisions are the job engine's own: every arrival and stage completion asks the policy (jobs/engine.py), so the
policy decides exactly when capacity is freed or can newly be used; the env is the engine with the policy's
clock wired to it (no change to the engine).

1. Imitation of the best tuned heuristic (`weighted-fair:-2` at load 0.85, bench/results/job_policy_lever.json)
   on training seeds: −log-probability of its ranking (Plackett–Luce over the eligible jobs, arrival order) and of
   its limits mapped to the nearest level.
2. PPO (clipped ratio, no critic): each update runs `rollouts` episodes on the same job sequence (same seed), each
   with its own sampling. Reward of decision i: −jobs in the system × (t_{i+1} − t_i) / τ (its episode sum is
   −Σ JCT / τ: mean JCT by Little's law), plus the running average of jobs in the system × Δt / τ (the differential
   reward: returns stay bounded however long the episode). Return: the undiscounted sum after a decision; baseline:
   the mean over the update's rollouts of their return at the same simulated time (Mao et al. 2019, variance
   reduction for input-driven environments). The entropy bonus decays (rl.ppo.entropy_coef).
Seeds: training episodes use seeds 1000 + 100000 · seed + n; validation (picking the best checkpoint) seeds 900…;
evaluation seeds 0–9 are held out.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

import numpy as np
import torch

from drlsched.jobs.engine import JobEngine
from drlsched.jobs.policies import make_job_policy
from drlsched.jobs.workload import JobSource
from drlsched.rl.job_net import JobBatch, JobNet, collate, entropy, limit_log_prob, ranking_log_prob
from drlsched.rl.job_policy import LearnedJobPolicy, Step
from drlsched.rl.ppo import PPOSettings, entropy_coef
from drlsched.rl.reward import RewardWeights

TRAIN_SEED = 1000
VALIDATION_SEED = 900
EXPERT = "weighted-fair:-2"

Logger = Callable[[dict[str, float]], None]


@dataclass
class JobTrainSettings:
    expert: str = EXPERT
    imitation_episodes: int = 6
    imitation_epochs: int = 20
    imitation_lr: float = 3e-3
    minutes: float = 5.0
    updates: int | None = None
    rollouts: int = 4  # episodes per update on the same job sequence
    lr: float = 3e-4
    epochs: int = 3
    minibatch: int = 256
    clip: float = 0.2
    ent_coef: float = 0.01
    ent_coef_end: float = 0.0005
    validate_every: int = 5
    validation_seeds: int = 3
    seed: int = 0

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


@dataclass
class Episode:
    steps: list[Step]
    end_s: float
    jct_mean_s: float
    unfinished: int


def run_episode(source: JobSource, policy: LearnedJobPolicy, seed: int) -> Episode:
    """One run of `source`'s jobs (seed) under `policy`, recording its decisions."""
    policy.record = []
    policy.reset()
    engine = JobEngine(source.arrivals(seed), policy, source.config(), seed)
    policy.clock = lambda: engine.t
    m = engine.run()
    steps, policy.record = policy.record, None
    jct = m["jct_mean_s"]
    return Episode(steps, engine.t, math.nan if jct is None else float(jct), int(m["jobs_unfinished"] or 0))


def job_seconds(ep: Episode) -> np.ndarray:
    """float64[steps]: jobs in the system × seconds until the next decision (the last: until the episode ends);
    their sum is Σ JCT."""
    t = np.array([s.t for s in ep.steps] + [ep.end_s])
    n = np.array([s.jobs for s in ep.steps], dtype=np.float64)
    return n * np.diff(t)


def _actions(steps: list[Step]) -> tuple[JobBatch, torch.Tensor, torch.Tensor]:
    b = collate([s.obs for s in steps])
    return (b, torch.from_numpy(np.concatenate([s.ranks for s in steps])),
            torch.from_numpy(np.concatenate([s.levels for s in steps])))


def log_prob(net: JobNet, steps: list[Step]) -> tuple[torch.Tensor, torch.Tensor]:
    """float[D] log-probabilities of the recorded actions under `net`, and the mean entropy."""
    b, ranks, levels = _actions(steps)
    scores, limits = net(b)
    return ranking_log_prob(scores, b, ranks) + limit_log_prob(limits, b, levels), entropy(scores, limits, b)


def imitate(net: JobNet, source: JobSource, s: JobTrainSettings, log: Logger) -> dict[str, float]:
    """Trains on the expert's decisions over `imitation_episodes` training seeds; returns the final loss, the
    first-pick and limit accuracies, and the expert's mean JCT on those seeds."""
    expert = LearnedJobPolicy(net, expert=make_job_policy(s.expert))
    episodes = [run_episode(source, expert, TRAIN_SEED + 100_000 * s.seed + 50_000 + i)
                for i in range(s.imitation_episodes)]
    steps = [st for ep in episodes for st in ep.steps if st.obs.eligible.any()]
    opt = torch.optim.Adam(net.parameters(), lr=s.imitation_lr)
    rng = np.random.default_rng(s.seed)
    out = {"imitation_decisions": float(len(steps)),
           "expert_jct_mean_s": float(np.mean([ep.jct_mean_s for ep in episodes]))}
    net.train()
    for epoch in range(s.imitation_epochs):
        order = rng.permutation(len(steps))
        losses = []
        for start in range(0, len(steps), s.minibatch):
            lp, _ = log_prob(net, [steps[k] for k in order[start:start + s.minibatch]])
            loss = -lp.mean()
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0)
            opt.step()
            losses.append(float(loss.detach()))
        out["imitation_loss"] = float(np.mean(losses)) if losses else 0.0
        log({"phase": 0.0, "epoch": float(epoch), "imitation_loss": out["imitation_loss"]})
    net.eval()
    out.update(_agreement(net, steps))
    return out


@torch.no_grad()
def _agreement(net: JobNet, steps: list[Step]) -> dict[str, float]:
    """How often the greedy net picks the expert's first job, and its limit for the eligible jobs."""
    first = limit = eligible = 0
    for start in range(0, len(steps), 512):
        chunk = steps[start:start + 512]
        b, ranks, levels = _actions(chunk)
        scores, limits = net(b)
        for d in range(b.decisions):
            rows = torch.nonzero(b.job_dec == d).squeeze(1)
            top = rows[int(scores[rows].argmax())]
            first += int(ranks[top] == 0)
        el = b.eligible
        limit += int((limits.argmax(1)[el] == levels[el]).sum())
        eligible += int(el.sum())
    return {"imitation_first_pick_accuracy": first / max(len(steps), 1),
            "imitation_limit_accuracy": limit / max(eligible, 1)}


def validate(net: JobNet, source: JobSource, s: JobTrainSettings) -> float:
    """Greedy mean JCT over the validation seeds (inf where no job finishes)."""
    policy = LearnedJobPolicy(net)
    jct = float(np.mean([run_episode(source, policy, VALIDATION_SEED + i).jct_mean_s
                         for i in range(s.validation_seeds)]))
    return jct if math.isfinite(jct) else math.inf


def time_baseline(episodes: list[Episode], returns: list[np.ndarray]) -> list[np.ndarray]:
    """Each decision's baseline: the mean over the rollouts of their return at its simulated time (a rollout's
    return is a step function of time: the return of its next decision; 0 after its last)."""
    out = []
    for ep in episodes:
        t = np.array([st.t for st in ep.steps])
        vals = []
        for other, g in zip(episodes, returns, strict=True):
            ot = np.array([st.t for st in other.steps])
            k = np.searchsorted(ot, t, side="left")
            vals.append(np.where(k < g.size, g[np.minimum(k, g.size - 1)], 0.0))
        out.append(np.mean(vals, axis=0))
    return out


def train(net: JobNet, source: JobSource, s: JobTrainSettings, reward: RewardWeights, log: Logger,
          on_best: Callable[[JobNet, float, int], None]) -> dict[str, float]:
    """PPO until `minutes` or `updates`; `on_best(net, validation_jct, update)` is called when the greedy policy's
    validation mean JCT improves (update 0: the imitated start). Returns counters for train.json."""
    opt = torch.optim.Adam(net.parameters(), lr=s.lr, eps=1e-5)
    ent = PPOSettings(ent_coef=s.ent_coef, ent_coef_end=s.ent_coef_end, ent_schedule="exp")
    best = validate(net, source, s)
    on_best(net, best, 0)
    log({"phase": 1.0, "update": 0.0, "validation_jct_mean_s": best})
    t0 = time.perf_counter()
    tau = reward.time_scale_s
    rate: float | None = None  # running average of jobs in the system (the differential reward's)
    update = steps_total = 0
    budget = 60.0 * s.minutes
    while (s.updates is None or update < s.updates) and time.perf_counter() - t0 < budget:
        update += 1
        frac = min(1.0, (time.perf_counter() - t0) / budget)
        if s.updates:
            frac = max(frac, (update - 1) / s.updates)
        seed = TRAIN_SEED + 100_000 * s.seed + update
        sampler = LearnedJobPolicy(net, sample=True, seed=s.seed * 1_000_003 + update)
        episodes = [run_episode(source, sampler, seed) for _ in range(s.rollouts)]
        js = [job_seconds(ep) for ep in episodes]
        dts = [np.diff(np.array([st.t for st in ep.steps] + [ep.end_s])) for ep in episodes]
        mean_rate = float(sum(x.sum() for x in js) / max(sum(d.sum() for d in dts), 1e-9))
        rate = mean_rate if rate is None else 0.9 * rate + 0.1 * mean_rate
        returns = []
        for x, dt in zip(js, dts, strict=True):
            r = -reward.jct * (x - rate * dt) / tau
            returns.append(np.cumsum(r[::-1])[::-1])
        base = time_baseline(episodes, returns)
        adv = np.concatenate([g - b for g, b in zip(returns, base, strict=True)])
        steps = [st for ep in episodes for st in ep.steps]
        keep = np.array([st.obs.eligible.any() for st in steps], dtype=bool)
        steps = [st for st, k in zip(steps, keep, strict=True) if k]
        adv = adv[keep]
        if not steps:  # nothing to choose in any rollout (a tiny workload)
            continue
        if adv.size > 1 and adv.std() > 0:
            adv = (adv - adv.mean()) / adv.std()
        adv_t = torch.from_numpy(adv).float()
        old = torch.tensor([st.logp for st in steps], dtype=torch.float64)
        coef = entropy_coef(ent, frac)
        for group in opt.param_groups:
            group["lr"] = s.lr * (1.0 - 0.9 * frac)
        rng = np.random.default_rng(s.seed * 7 + update)
        net.train()
        kls, clipped = [], []
        for _ in range(s.epochs):
            order = rng.permutation(len(steps))
            for start in range(0, len(steps), s.minibatch):
                idx = order[start:start + s.minibatch]
                lp, h = log_prob(net, [steps[k] for k in idx])
                logratio = lp.double() - old[idx]
                ratio = logratio.exp()
                a = adv_t[idx].double()
                pg = -torch.minimum(ratio * a, ratio.clamp(1 - s.clip, 1 + s.clip) * a).mean()
                loss = pg - coef * h
                opt.zero_grad()
                loss.backward()
                torch.nn.utils.clip_grad_norm_(net.parameters(), 0.5)
                opt.step()
                with torch.no_grad():
                    kls.append(float(((ratio - 1) - logratio).mean()))
                    clipped.append(float(((ratio - 1).abs() > s.clip).double().mean()))
        net.eval()
        steps_total += len(steps)
        row = {"phase": 1.0, "update": float(update), "step": float(steps_total), "seed": float(seed),
               "train_jct_mean_s": float(np.mean([ep.jct_mean_s for ep in episodes])),
               "jobs_in_system": mean_rate, "entropy": float(h.detach()), "ent_coef": coef,
               "approx_kl": float(np.mean(kls)), "clipfrac": float(np.mean(clipped)),
               "wall_s": time.perf_counter() - t0}
        if update % s.validate_every == 0:
            v = validate(net, source, s)
            row["validation_jct_mean_s"] = v
            if v < best:
                best = v
                on_best(net, v, update)
        log(row)
    return {"updates": float(update), "rl_decisions": float(steps_total), "best_validation_jct_mean_s": best,
            "rl_s": time.perf_counter() - t0}
