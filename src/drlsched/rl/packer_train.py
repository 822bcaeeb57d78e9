"""Training the learned GPU packer (`drlsched train-packer`, docs/learning.md "Learned GPU packer").

1. Imitation: fills of the population (seeds 1000, 1001, ...) placed by the expert (`fgd-lookahead` or `fgd`),
   scored on the packer's own candidates; the loss is −log of the probability the packer gives the expert's
   equally best candidates (ties are one choice). Steps where every candidate ties teach nothing and are dropped.
2. Fine-tuning on the fill objective: PPO (clipped ratio) over fills sampled from the packer (seeds 2000, ...),
   `episodes` fills per update on the same seed, so the same pods arrive in the same order. Reward: minus the GPUs
   of each pod that fails (the fill env's reward: the return is allocated − submitted GPUs, so maximising it is
   leaving fewest GPUs unallocated); a decision's return is the discounted failures after it, and its baseline
   the mean return of the update's fills at the same pod (paired episodes).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

import numpy as np
import torch

from drlsched.fill import Fill, values_at
from drlsched.policies.fgd_lookahead import FGDLookahead
from drlsched.rl.packer_net import CONTEXT_WIDTH, PackerNet
from drlsched.rl.packer_policy import PackerObs, PackerPolicy
from drlsched.workload import GPU_MILLI, NodeSpec, PodSpec

IMITATION_SEED = 1000
RL_SEED = 2000


@dataclass
class PackerTrainSettings:
    expert: str = "fgd-lookahead"
    imitation_fills: int = 2
    imitation_epochs: int = 6
    imitation_lr: float = 3e-3
    rl_minutes: float = 5.0
    rl_updates: int | None = None  # at most this many updates (None: until rl_minutes)
    episodes: int = 2  # fills per update, same seed
    rl_lr: float = 1e-4
    rl_epochs: int = 2
    clip: float = 0.2
    gamma: float = 0.995
    entropy: float = 0.0
    max_demand: float = 1.3
    batch: int = 1024
    seed: int = 0

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


@dataclass
class Batch:
    """Decisions padded to the candidate count K."""

    nodes: np.ndarray  # float32[S, K, D]
    ctx: np.ndarray  # float32[S, CONTEXT_WIDTH]
    mask: np.ndarray  # bool[S, K]
    target: np.ndarray  # bool[S, K] (imitation: the expert's best) or the one-hot action (fine-tuning)


class _Recorder:
    def __init__(self, k: int, width: int) -> None:
        self.k, self.width = k, width
        self.nodes: list[np.ndarray] = []
        self.ctx: list[np.ndarray] = []
        self.mask: list[np.ndarray] = []
        self.target: list[np.ndarray] = []

    def add(self, obs: PackerObs, target: np.ndarray) -> None:
        n = obs.nodes.size
        x = np.zeros((self.k, self.width), dtype=np.float32)
        x[:n] = obs.features
        m = np.zeros(self.k, dtype=bool)
        m[:n] = True
        t = np.zeros(self.k, dtype=bool)
        t[:n] = target
        self.nodes.append(x)
        self.ctx.append(obs.context)
        self.mask.append(m)
        self.target.append(t)

    def batch(self) -> Batch:
        if not self.nodes:
            return Batch(np.zeros((0, self.k, self.width), np.float32), np.zeros((0, CONTEXT_WIDTH), np.float32),
                         np.zeros((0, self.k), bool), np.zeros((0, self.k), bool))
        return Batch(np.stack(self.nodes), np.stack(self.ctx), np.stack(self.mask), np.stack(self.target))


def concat(batches: list[Batch]) -> Batch:
    return Batch(*(np.concatenate([getattr(b, f) for b in batches]) for f in ("nodes", "ctx", "mask", "target")))


def expert_cost(expert: FGDLookahead | None, packer: PackerPolicy, obs: PackerObs, typical: object) -> np.ndarray:
    """The expert's cost of each candidate (lower is better): FGD's growth, or the lookahead's."""
    if expert is None or typical is None:
        return obs.delta
    return expert.cost(obs.option.request, obs.nodes, obs.delta, obs.choice, typical)  # type: ignore[arg-type]


def imitation_fill(nodes: list[NodeSpec], pods: list[PodSpec], seed: int, max_demand: float, packer: PackerPolicy,
                   expert_name: str) -> tuple[Batch, dict[str, np.ndarray]]:
    """One fill placed by the expert, recorded on the packer's candidates; and the fill's curve."""
    fill = Fill(nodes, pods, seed, max_demand)
    packer.reset(fill.cluster, fill.policy_rng)
    expert = None
    if expert_name == "fgd-lookahead":
        expert = FGDLookahead()
        expert.reset(fill.cluster, fill.policy_rng)
        expert.scores = packer.scores  # one score cache for both
    rec = _Recorder(packer.spec.candidates, packer.spec.node_width)
    gen = fill.decisions()
    try:
        ctx = next(gen)
        while True:
            obs = packer.observe(ctx)
            if obs is None:
                ctx = gen.send(None)
                continue
            cost = expert_cost(expert, packer, obs, ctx.typical)
            best = cost <= cost.min() + 1e-9
            if not best.all():
                rec.add(obs, best)
            pick = packer.break_tie(np.flatnonzero(best))
            ctx = gen.send(packer.decide(obs, pick))
    except StopIteration as stop:
        curve: dict[str, np.ndarray] = stop.value
    return rec.batch(), curve


def _torch(b: Batch, idx: np.ndarray) -> tuple[torch.Tensor, ...]:
    return (torch.from_numpy(b.nodes[idx]), torch.from_numpy(b.ctx[idx]), torch.from_numpy(b.mask[idx]),
            torch.from_numpy(b.target[idx]))


def imitate(net: PackerNet, data: Batch, s: PackerTrainSettings, rng: np.random.Generator,
            log: Callable[[dict[str, float]], None]) -> float:
    """Trains on the expert's choices; returns the final accuracy (the argmax among the expert's best)."""
    opt = torch.optim.Adam(net.parameters(), lr=s.imitation_lr)
    n = data.mask.shape[0]
    acc = 0.0
    for epoch in range(s.imitation_epochs):
        order = rng.permutation(n)
        losses, hits = [], 0
        for start in range(0, n, s.batch):
            x, c, m, t = _torch(data, order[start:start + s.batch])
            logits = net(x, c, m)
            loss = (torch.logsumexp(logits, 1) - torch.logsumexp(logits.masked_fill(~t, -1e9), 1)).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
            hits += int(t.gather(1, logits.argmax(1, keepdim=True)).sum())
        acc = hits / max(n, 1)
        log({"phase": 0.0, "epoch": float(epoch), "imitation_loss": float(np.mean(losses)) if losses else 0.0,
             "imitation_accuracy": acc})
    return acc


def failed_gpus(curve: dict[str, np.ndarray]) -> np.ndarray:
    """float64[submissions]: the GPUs of each submitted pod that failed (0 for those placed)."""
    total = float(curve["total_milli"])
    submitted = np.diff(np.round(curve["demand"] * total), prepend=0.0)
    placed = np.diff(curve["allocated_milli"].astype(np.float64), prepend=0.0)
    return np.maximum(submitted - placed, 0.0) / GPU_MILLI


def sampled_fill(nodes: list[NodeSpec], pods: list[PodSpec], seed: int, max_demand: float, packer: PackerPolicy,
                 rng: np.random.Generator) -> tuple[Batch, np.ndarray, np.ndarray, dict[str, np.ndarray]]:
    """One fill with actions sampled from the packer's softmax: the decisions (target: one-hot action), their
    old log-probabilities, the submission index of each, and the curve."""
    fill = Fill(nodes, pods, seed, max_demand)
    packer.reset(fill.cluster, fill.policy_rng)
    rec = _Recorder(packer.spec.candidates, packer.spec.node_width)
    logps: list[float] = []
    where: list[int] = []
    gen = fill.decisions()
    try:
        ctx = next(gen)
        while True:
            obs = packer.observe(ctx)
            if obs is None:
                ctx = gen.send(None)
                continue
            if obs.nodes.size == 1:
                ctx = gen.send(packer.decide(obs, 0))
                continue
            z = packer.logits(obs).astype(np.float64)
            p = np.exp(z - z.max())
            p /= p.sum()
            a = int(rng.choice(p.size, p=p))
            one = np.zeros(p.size, dtype=bool)
            one[a] = True
            rec.add(obs, one)
            logps.append(float(np.log(p[a])))
            where.append(len(fill.series["demand"]))
            ctx = gen.send(packer.decide(obs, a))
    except StopIteration as stop:
        curve: dict[str, np.ndarray] = stop.value
    return rec.batch(), np.array(logps), np.array(where, dtype=np.int64), curve


def returns_after(failed: np.ndarray, gamma: float) -> np.ndarray:
    """G[j] = −Σ_{k>j} γ^(k−j−1) failed[k]: the discounted failures after submission j."""
    g = np.zeros(failed.size)
    acc = 0.0
    for j in range(failed.size - 1, -1, -1):
        g[j] = acc
        acc = -failed[j] + gamma * acc
    return g


def fine_tune(net: PackerNet, packer: PackerPolicy, nodes: list[NodeSpec], pods: list[PodSpec],
              s: PackerTrainSettings, rng: np.random.Generator, log: Callable[[dict[str, float]], None]) -> int:
    """PPO on the fill objective until `rl_minutes` (or `rl_updates`); returns the decisions trained on."""
    opt = torch.optim.Adam(net.parameters(), lr=s.rl_lr)
    t0 = time.perf_counter()
    steps = update = 0
    while (s.rl_updates is None or update < s.rl_updates) and time.perf_counter() - t0 < 60.0 * s.rl_minutes:
        seed = RL_SEED + s.seed * 100_000 + update
        runs = [sampled_fill(nodes, pods, seed, s.max_demand, packer, rng) for _ in range(s.episodes)]
        returns = [returns_after(failed_gpus(curve), s.gamma) for *_, curve in runs]
        base = np.mean(returns, axis=0)  # the same submission order in every fill of the update
        adv = np.concatenate([(g - base)[where] for g, (_, _, where, _) in zip(returns, runs, strict=True)])
        data = concat([b for b, *_ in runs])
        old = torch.from_numpy(np.concatenate([lp for _, lp, _, _ in runs]))
        if adv.size > 1 and adv.std() > 0:
            adv = (adv - adv.mean()) / adv.std()
        adv_t = torch.from_numpy(adv)
        net.train()
        for _ in range(s.rl_epochs):
            order = rng.permutation(adv.size)
            for start in range(0, adv.size, s.batch):
                idx = order[start:start + s.batch]
                x, c, m, t = _torch(data, idx)
                logp_all = torch.log_softmax(net(x, c, m), dim=1)
                logp = logp_all.masked_fill(~t, 0.0).sum(1).double()
                ratio = (logp - old[idx]).exp()
                a = adv_t[idx]
                loss = -torch.minimum(ratio * a, ratio.clamp(1 - s.clip, 1 + s.clip) * a).mean()
                if s.entropy:
                    p = logp_all.exp()
                    loss = loss + s.entropy * (p * logp_all.masked_fill(~m, 0.0)).sum(1).mean()
                opt.zero_grad()
                loss.backward()
                opt.step()
        net.eval()
        steps += adv.size
        at100 = [values_at(curve, 1.0)["gpu_unallocated"] for *_, curve in runs]
        at_end = [values_at(curve, s.max_demand)["gpu_unallocated"] for *_, curve in runs]
        log({"phase": 1.0, "update": float(update), "step": float(steps), "seed": float(seed),
             "gpu_unallocated_at_100": float(np.mean(at100)), "gpu_unallocated_at_end": float(np.mean(at_end)),
             "wall_s": time.perf_counter() - t0})
        update += 1
    return steps
