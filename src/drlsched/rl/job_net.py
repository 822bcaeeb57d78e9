"""The learned job policy's network: Decima's structure (Mao et al., SIGCOMM 2019) over `job_features`.

Per-stage embeddings h⁰ = f₀(x); R rounds of message passing from a stage's children to it, h = h⁰ + g(Σ_children
f(h)) (plain index_add over the edge list); a job's summary z = q([Σ_its stages φ(h), job features]); the global
summary the mean over the decision's jobs of ψ(z), plus, with `history="lstm"`, W·LSTM(recent arrivals and
utilisation) (rl.job_history: the load shift a decision's jobs do not show; W starts at zero, so a history net
starts as the same function as one without, and fine-tuning from a no-history checkpoint starts where it was;
adding W·e to the summary is the same as concatenating e to it before the heads' first layer). Two heads read
[z, global]: a job score (which job takes freed capacity first: a Plackett–Luce ranking of the jobs that can take
it) and logits over the executor-limit levels.
Jobs that cannot take capacity have no score, masked limit levels no logit, so neither can be chosen.

Batches hold D decisions joined into one graph (`collate`): stage rows of every decision, job rows of every
decision (`job_dec` int64[J] says whose), edges offset into the joined rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np
import torch
from torch import nn

from drlsched.rl.job_features import JOB_WIDTH, LIMIT_SHARES, STAGE_WIDTH, JobObs
from drlsched.rl.job_history import HISTORIES, HISTORY_WIDTH

NEG = -1e9


@dataclass(frozen=True)
class JobNetSpec:
    hidden: int = 32
    rounds: int = 4
    history: str = "none"  # rl.job_history.HISTORIES

    def to_dict(self) -> dict[str, object]:
        """Without history the two keys of checkpoints before it (so those keep loading, and match)."""
        d: dict[str, object] = asdict(self)
        if self.history == "none":
            del d["history"]
        return d


@dataclass
class JobBatch:
    """D decisions: stage_x float32[S, STAGE_WIDTH], stage_job int64[S], edges int64[2, C], job_x float32[J,
    JOB_WIDTH], job_dec int64[J], eligible bool[J], limit_mask bool[J, L], decisions D; history float32[D, T,
    HISTORY_WIDTH] where every decision carries one, else None."""

    stage_x: torch.Tensor
    stage_job: torch.Tensor
    edges: torch.Tensor
    job_x: torch.Tensor
    job_dec: torch.Tensor
    eligible: torch.Tensor
    limit_mask: torch.Tensor
    decisions: int
    history: torch.Tensor | None = None


def collate(obs: Sequence[JobObs]) -> JobBatch:
    stage_off = np.cumsum([0] + [o.stage_x.shape[0] for o in obs])
    job_off = np.cumsum([0] + [o.jobs for o in obs])
    return JobBatch(
        torch.from_numpy(np.concatenate([o.stage_x for o in obs])),
        torch.from_numpy(np.concatenate([o.stage_job + job_off[i] for i, o in enumerate(obs)])),
        torch.from_numpy(np.concatenate([o.edges + stage_off[i] for i, o in enumerate(obs)], axis=1)),
        torch.from_numpy(np.concatenate([o.job_x for o in obs])),
        torch.from_numpy(np.concatenate([np.full(o.jobs, i, dtype=np.int64) for i, o in enumerate(obs)])),
        torch.from_numpy(np.concatenate([o.eligible for o in obs])),
        torch.from_numpy(np.concatenate([np.broadcast_to(o.limit_mask, (o.jobs, o.limit_mask.size)) for o in obs])),
        len(obs),
        torch.from_numpy(np.stack([o.history for o in obs])) if obs and all(o.history is not None for o in obs)
        else None)


def _mlp(i: int, h: int, o: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(i, h), nn.ReLU(), nn.Linear(h, o))


class JobNet(nn.Module):
    def __init__(self, spec: JobNetSpec) -> None:
        super().__init__()
        self.spec = spec
        h = spec.hidden
        self.stage_in = _mlp(STAGE_WIDTH, h, h)
        self.message = _mlp(h, h, h)
        self.update = _mlp(h, h, h)
        self.stage_out = _mlp(h, h, h)
        self.job_in = _mlp(h + JOB_WIDTH, h, h)
        self.global_in = _mlp(h, h, h)
        self.score = _mlp(2 * h, h, 1)
        self.limit = _mlp(2 * h, h, len(LIMIT_SHARES))
        if spec.history not in HISTORIES:
            raise ValueError(f"unknown history {spec.history!r} ({', '.join(HISTORIES)})")
        if spec.history == "lstm":
            self.history = nn.LSTM(HISTORY_WIDTH, h, batch_first=True)
            self.history_out = nn.Linear(h, h)
            nn.init.zeros_(self.history_out.weight)
            nn.init.zeros_(self.history_out.bias)

    def forward(self, b: JobBatch) -> tuple[torch.Tensor, torch.Tensor]:
        """float32[J] job scores (NEG where not eligible) and float32[J, L] limit logits (NEG where masked)."""
        h0 = self.stage_in(b.stage_x)
        h = h0
        child, parent = b.edges[0], b.edges[1]
        for _ in range(self.spec.rounds):
            msg = torch.zeros_like(h).index_add_(0, parent, self.message(h)[child])
            h = h0 + self.update(msg)
        n_jobs = b.job_x.shape[0]
        pooled = torch.zeros(n_jobs, h.shape[1]).index_add_(0, b.stage_job, self.stage_out(h))
        z = self.job_in(torch.cat([pooled, b.job_x], 1))
        g = torch.zeros(b.decisions, z.shape[1]).index_add_(0, b.job_dec, self.global_in(z))
        count = torch.zeros(b.decisions).index_add_(0, b.job_dec, torch.ones(n_jobs)).clamp(min=1.0)
        g = g / count[:, None]
        if self.spec.history == "lstm":
            if b.history is None:
                raise ValueError("a history network needs each decision's history (JobObs.history)")
            _, (h_n, _) = self.history(b.history)
            g = g + self.history_out(h_n[-1])
        g = g[b.job_dec]
        zg = torch.cat([z, g], 1)
        scores = self.score(zg).squeeze(1).masked_fill(~b.eligible, NEG)
        limits = self.limit(zg).masked_fill(~b.limit_mask, NEG)
        return scores, limits


def ranking_log_prob(scores: torch.Tensor, b: JobBatch, ranks: torch.Tensor) -> torch.Tensor:
    """float[D]: log-probability of each decision's Plackett–Luce ranking of its eligible jobs. `ranks` int64[J]:
    each eligible job's place in its decision's ranking (0 first), −1 for the others."""
    width = int(ranks.max().item()) + 1 if ranks.numel() else 0
    if width <= 0:
        return torch.zeros(b.decisions)
    grid = torch.full((b.decisions, width), float("-inf"))
    sel = ranks >= 0
    grid = grid.index_put((b.job_dec[sel], ranks[sel]), scores[sel])
    # Σ_p s_p − logsumexp_{q ≥ p} s_q over the filled places (−inf pads sit after each ranking's last place).
    tail = torch.logcumsumexp(grid.flip(1), 1).flip(1)
    filled = torch.isfinite(grid)
    return torch.where(filled, grid - tail, torch.zeros_like(grid)).sum(1)


def limit_log_prob(limits: torch.Tensor, b: JobBatch, choice: torch.Tensor) -> torch.Tensor:
    """float[D]: Σ over each decision's eligible jobs of log p(its limit level); `choice` int64[J] (any value for
    jobs that are not eligible)."""
    logp = torch.log_softmax(limits, 1).gather(1, choice.clamp(min=0)[:, None]).squeeze(1)
    logp = torch.where(b.eligible, logp, torch.zeros_like(logp))
    return torch.zeros(b.decisions).index_add_(0, b.job_dec, logp)


def entropy(scores: torch.Tensor, limits: torch.Tensor, b: JobBatch) -> torch.Tensor:
    """Mean over decisions of the first pick's entropy plus the mean limit entropy of eligible jobs."""
    first = torch.full((b.decisions,), 0.0)
    top = torch.full((b.decisions,), NEG).scatter_reduce(0, b.job_dec, scores.detach(), "amax")
    w = (scores - top[b.job_dec]).exp() * b.eligible
    total = torch.zeros(b.decisions).index_add_(0, b.job_dec, w).clamp(min=1e-12)
    p = w / total[b.job_dec]
    first = first.index_add_(0, b.job_dec, -(p * torch.log(p.clamp(min=1e-12))))
    lp = torch.log_softmax(limits, 1)
    h_lim = -(lp.exp() * lp.masked_fill(~b.limit_mask, 0.0)).sum(1)
    h_lim = (h_lim * b.eligible).sum() / b.eligible.sum().clamp(min=1)
    return first.mean() + h_lim
