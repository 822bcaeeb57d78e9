"""The learned job policy as a `JobPolicy` (`--job-policy ppo:DIR/policy.pt`), and its checkpoint.

Serving is greedy: jobs that can take freed capacity by descending score, each with its most likely limit level;
jobs that cannot keep their limit, after them in arrival order. Training samples (a Plackett–Luce ranking and a
limit per job, from a seeded generator) and records each decision (`Step`).

Checkpoint: like the other kinds (`rl.checkpoint`: weights_only load, sha256 over header and tensors, bounded
size, shapes checked on a `meta`-device network first) with its own format name and the feature spec it was
trained on, so no other kind of file loads as a job policy and a job policy loads as nothing else.
Layout: format "drlsched-job-policy", format_version 1, features: `feature_spec(history)`, spec: `JobNetSpec`
fields (`history` only where it is not "none": the checkpoints before it have hidden and rounds only), algo:
"ppo" | "dqn" (rl/job_dqn.py; absent in files written before it: ppo), meta: training facts, state, sha256. A
checkpoint's features must be those its spec's history builds. Both algorithms' nets are the same `JobNet` served
the same greedy way; the algo only keeps `ppo:` and `dqn:` honest.

With a history input (rl.job_history) the policy keeps the arrivals it has seen: one policy object per episode
(`reset` between episodes of a training run); `see` takes in a decision it did not make (the guard's, while it
delegates), so the window stays whole.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import numpy as np
import torch

from drlsched.errors import UserError
from drlsched.jobs.model import Job
from drlsched.jobs.policies import Decision, JobPolicy
from drlsched.rl.checkpoint import JOB_POLICY_FORMAT as FORMAT
from drlsched.rl.checkpoint import MAX_WIDTH, checked_net, read_checkpoint, weights, write_checkpoint
from drlsched.rl.job_features import JOB_FEATURE_VERSION, JobObs, feature_spec, observe
from drlsched.rl.job_history import HISTORIES, ArrivalHistory
from drlsched.rl.job_history import HISTORY_VERSION as _HISTORY_VERSION
from drlsched.rl.job_net import JobNet, JobNetSpec, collate

FORMAT_VERSION = 1
ALGOS = ("ppo", "dqn")
MAX_ROUNDS = 64
_OTHER_KINDS = {"drlsched-policy": "a placement policy: use it as --policy ppo:PATH",
                "drlsched-packer": "a learned GPU packer: use it as --policy packer:PATH",
                "drlsched-scaler": "a learned autoscaler"}


@dataclass
class Step:
    """One decision: what was seen, what was done (ranks int64[J], −1 = not ranked; levels int64[J]), its
    log-probability under the policy that took it, the engine time and the jobs in the system."""

    obs: JobObs
    ranks: np.ndarray
    levels: np.ndarray
    logp: float
    t: float
    jobs: int


class LearnedJobPolicy:
    """`decide` per `JobPolicy`. `sample` draws actions from `generator`; `expert` takes that policy's decision
    instead (recorded as the net's action space sees it, for imitation); `record` collects `Step`s, with `clock`
    giving the engine's time."""

    def __init__(self, net: JobNet, name: str = "ppo", sample: bool = False, seed: int = 0,
                 expert: JobPolicy | None = None) -> None:
        self.net = net
        self.name = name
        self.sample = sample
        self.generator = torch.Generator().manual_seed(seed)
        self.expert = expert
        self.record: list[Step] | None = None
        self.clock: Callable[[], float] = lambda: 0.0
        self.arrivals = ArrivalHistory() if net.spec.history != "none" else None

    def reset(self) -> None:
        """Forgets the arrivals seen (a new episode)."""
        if self.arrivals is not None:
            self.arrivals = ArrivalHistory()

    def see(self, jobs: Sequence[Job], executors: int) -> None:
        if self.arrivals is not None:
            self.arrivals.see(jobs, executors)

    def decide(self, jobs: Sequence[Job], executors: int, critical_path: Callable[[Job], float]) -> Decision:
        obs = observe(jobs, executors, critical_path)  # also when empty: the recorded jobs-in-system drops to 0
        if self.arrivals is not None:
            self.arrivals.see(jobs, executors)
            obs.history = self.arrivals.window(executors)
        if self.expert is not None:
            out = self.expert.decide(jobs, executors, critical_path)
            ranks, levels = expert_action(obs, jobs, out)
            logp = 0.0
        elif not obs.eligible.any():  # nothing can take capacity: every job keeps its limit
            ranks, levels, logp = np.full(obs.jobs, -1, dtype=np.int64), np.zeros(obs.jobs, dtype=np.int64), 0.0
            out = to_decision(obs, jobs, ranks, levels)
        else:
            ranks, levels, logp = self.act(obs)
            out = to_decision(obs, jobs, ranks, levels)
        if self.record is not None:
            self.record.append(Step(obs, ranks, levels, logp, self.clock(), len(jobs)))
        return out

    @torch.no_grad()
    def act(self, obs: JobObs) -> tuple[np.ndarray, np.ndarray, float]:
        scores, limits = self.net(collate([obs]))
        elig = obs.eligible
        ranks = np.full(obs.jobs, -1, dtype=np.int64)
        idx = np.flatnonzero(elig)
        s = scores[torch.from_numpy(idx)].double()
        logp = 0.0
        if self.sample:
            # Plackett–Luce by Gumbel-perturbed scores; its log-probability place by place.
            gumbel = -torch.log(-torch.log(torch.rand(idx.size, generator=self.generator, dtype=torch.float64)
                                           .clamp(1e-12, 1 - 1e-12)))
            order = torch.argsort(s + gumbel, descending=True)
            so = s[order]
            logp += float((so - torch.logcumsumexp(so.flip(0), 0).flip(0)).sum())
            lp = torch.log_softmax(limits.double(), 1)
            lv = torch.multinomial(lp.exp(), 1, generator=self.generator).squeeze(1)
            levels = lv.numpy().astype(np.int64)
            logp += float(lp[torch.from_numpy(idx), lv[torch.from_numpy(idx)]].sum())
        else:
            order = torch.argsort(s, descending=True, stable=True)
            levels = limits.argmax(1).numpy().astype(np.int64)
        ranks[idx[order.numpy()]] = np.arange(idx.size)
        return ranks, levels, logp


def to_decision(obs: JobObs, jobs: Sequence[Job], ranks: np.ndarray, levels: np.ndarray) -> Decision:
    """Eligible jobs in rank order with their levels' limits, then the others with their limits, arrival order."""
    ranked = sorted(np.flatnonzero(ranks >= 0), key=lambda k: ranks[k])
    out: Decision = [(jobs[k], float(obs.limits[levels[k]])) for k in ranked]
    out += [(j, j.limit) for k, j in enumerate(jobs) if ranks[k] < 0]
    return out


def expert_action(obs: JobObs, jobs: Sequence[Job], decision: Decision) -> tuple[np.ndarray, np.ndarray]:
    """A heuristic's decision in the net's action space: the eligible jobs in its order, each limit as the
    nearest level (in log) that the mask allows."""
    row = {id(j): k for k, j in enumerate(jobs)}
    ranks = np.full(obs.jobs, -1, dtype=np.int64)
    levels = np.zeros(obs.jobs, dtype=np.int64)
    allowed = np.flatnonzero(obs.limit_mask)
    log_levels = np.log(obs.limits[allowed])
    place = 0
    for job, limit in decision:
        k = row[id(job)]
        if not obs.eligible[k]:
            continue
        ranks[k] = place
        place += 1
        value = min(limit, float(obs.limits[0])) if math.isfinite(limit) else float(obs.limits[0])
        levels[k] = allowed[int(np.argmin(np.abs(log_levels - math.log(max(value, 1.0)))))]
    return ranks, levels


# --- checkpoint ------------------------------------------------------------------------------------------------
def save_job_policy(path: str | Path, net: JobNet, meta: dict[str, Any], algo: str = "ppo") -> str:
    header = {"format": FORMAT, "format_version": FORMAT_VERSION, "features": feature_spec(net.spec.history),
              "spec": net.spec.to_dict(), "algo": algo, "meta": json.loads(json.dumps(meta))}
    return write_checkpoint(path, header, net)


def load_job_net(path: str | Path, algo: str | None = None) -> tuple[JobNet, dict[str, Any]]:
    """The network (eval mode) and the header; anything else (with `algo`: a file of the other algorithm too) is
    a `UserError` with a one-line reason."""
    p = Path(path)
    data = read_checkpoint(p, "job policy")
    fmt = data.get("format")
    if fmt in _OTHER_KINDS:
        raise UserError(f"{p} is {_OTHER_KINDS[str(fmt)]}, not a learned job policy")
    if fmt != FORMAT:
        raise UserError(f"{p} is not a drlsched job policy file")
    if data.get("format_version") != FORMAT_VERSION:
        raise UserError(f"{p} has job policy format version {data.get('format_version')}; this drlsched reads "
                        f"version {FORMAT_VERSION}")
    spec = _spec(p, data.get("spec"))
    found = data.get("features")
    if found != feature_spec(spec.history):
        version = str(found.get("version") if isinstance(found, dict) else None)[:20]
        hist = found.get("history") if isinstance(found, dict) else None
        if isinstance(hist, dict):
            version += f" with history {str(hist.get('kind'))[:20]} version {str(hist.get('version'))[:20]}"
        raise UserError(f"{p} was trained on job feature spec {version}, not the one this drlsched builds for "
                        f"history {spec.history} (version {JOB_FEATURE_VERSION}"
                        + ("" if spec.history == "none" else f" with history version {_HISTORY_VERSION}")
                        + "): retrain the policy")
    found_algo = data.get("algo", "ppo")
    if found_algo not in ALGOS:
        raise UserError(f"{p}: unknown job policy algorithm {str(found_algo)[:20]!r} (expected ppo or dqn)")
    if algo is not None and found_algo != algo:
        raise UserError(f"{p} holds a {found_algo} job policy, not {algo}: use --job-policy {found_algo}:{p}")
    state = weights(p, data)
    # "algo" is part of the digest only where the file has it (older ppo files do not)
    header = {k: data.get(k) for k in ("format", "format_version", "features", "spec", "algo", "meta") if k in data}
    net = cast(JobNet, checked_net(p, lambda: JobNet(spec), header, state, data.get("sha256"), "job policy"))
    return net, header


def _spec(p: Path, raw: object) -> JobNetSpec:
    if not isinstance(raw, dict) or not {"hidden", "rounds"} <= set(raw) <= {"hidden", "rounds", "history"}:
        raise UserError(f"{p} does not describe a job policy network this drlsched builds (spec: expected hidden, "
                        "rounds and optionally history)")
    history = raw.get("history", "none")
    if history not in HISTORIES or (history == "none" and "history" in raw):  # "none" is written as no key
        raise UserError(f"{p}: spec.history must be one of {', '.join(h for h in HISTORIES if h != 'none')} "
                        f"(or absent), not {str(history)[:40]}")
    for key, high in (("hidden", MAX_WIDTH), ("rounds", MAX_ROUNDS)):
        value = raw[key]
        if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= high:
            raise UserError(f"{p}: spec.{key} must be an integer from 1 to {high}, not {str(value)[:40]}")
    return JobNetSpec(raw["hidden"], raw["rounds"], str(history))


def load_job_policy(param: str, algo: str = "ppo") -> JobPolicy:
    """`PATH[:fallback=NAME]`: the policy behind the distribution-shift guard (`rl.job_guard`) with NAME
    (default `weighted-fair:-2`) as its fallback; `fallback=none` serves it unguarded."""
    from drlsched.jobs.policies import make_job_policy
    from drlsched.rl.job_guard import DEFAULT_FALLBACK, GuardedJobPolicy, range_for

    path, sep, fallback = param.partition(":fallback=")
    torch.set_num_threads(1)
    net, header = load_job_net(path, algo)
    learned = LearnedJobPolicy(net, name=f"{algo}:{param}")
    if sep and fallback == "none":
        return learned
    if fallback.partition(":")[0] in ALGOS:
        raise UserError(f"job policy {algo}:{param}: the fallback must be a heuristic, not a learned policy")
    chosen = make_job_policy(fallback or DEFAULT_FALLBACK)
    bounds = range_for(Path(path), header["meta"])
    if bounds is None:
        logging.getLogger("drlsched.jobs").warning("%s: its training episodes filled no guard window: served "
                                                   "unguarded", path)
        return learned
    return GuardedJobPolicy(learned, chosen, bounds)

