"""A trained network as a placement `Policy`, usable wherever a baseline is (`--policy ppo:DIR/policy.pt`)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from drlsched.cluster import Cluster
from drlsched.errors import UserError
from drlsched.kube_scoring import num_feasible_nodes_to_find
from drlsched.policies.base import Decision, PodContext, Policy
from drlsched.rl.checkpoint import load_policy
from drlsched.rl.features import MAX_OPTIONS, ObsBuilder, decision_for
from drlsched.rl.network import SchedulerNet


class LearnedPolicy(Policy):
    """Greedy (highest-logit) choice over the feasible (node, GPU option) pairs and, for BE pods under a reclaim
    model, the hold (None: the pod stays pending); deterministic for a state.

    Like kube-scheduler (percentageOfNodesToScore), on large clusters only the first `num_feasible_nodes_to_find`
    feasible nodes from a rotating start are scored (all of them below 100 nodes, 10% at 5,000): it bounds the
    decision latency and keeps the comparison with `k8s-default` like for like. `score_all=True` scores every one.
    """

    wants_data_nodes = True  # the observation's data-locality features
    wants_reclaim_signals = True  # and its reclaim features

    def __init__(self, net: SchedulerNet, name: str = "learned", history: int | None = None,
                 score_all: bool = False) -> None:
        self.net = net
        self.name = name
        self.score_all = score_all
        self.builder = ObsBuilder(history or net.cfg.history)

    def reset(self, cluster: Cluster, rng: np.random.Generator) -> None:
        super().reset(cluster, rng)
        self.builder.reset(cluster)
        self.next_start = 0
        self._last: tuple[PodContext, dict[str, np.ndarray]] | None = None
        self.to_find = cluster.size if self.score_all else num_feasible_nodes_to_find(cluster.size)

    def select(self, ctx: PodContext) -> Decision | None:
        obs = self.builder.observe(ctx)
        self._last = (ctx, obs)
        idx = np.flatnonzero(obs["action_mask"])
        if idx.size == 0:
            return None
        if idx.size == 1:
            return decision_for(int(idx[0]), ctx)
        n = ctx.cluster.size
        if self.to_find < n:
            nodes = np.unique(idx[idx < n * MAX_OPTIONS] // MAX_OPTIONS)
            if nodes.size > self.to_find:
                split = int(np.searchsorted(nodes, self.next_start))
                chosen = np.concatenate((nodes[split:], nodes[:split]))[: self.to_find]
                self.next_start = (int(chosen[-1]) + 1) % n
                keep = np.zeros(n, dtype=bool)
                keep[chosen] = True
                obs["action_mask"] = obs["action_mask"] * np.append(np.repeat(keep, MAX_OPTIONS), True).astype(np.int8)
                idx = np.flatnonzero(obs["action_mask"])
        scores = self.net.act_one(obs)
        return decision_for(int(idx[int(np.argmax(scores))]), ctx)

    def predicted_value(self, ctx: PodContext) -> float:
        """The critic's value of the state the last `select` saw for this context (the shadow's predicted
        reward, in the training's scaled-return units; for DQN the best feasible Q-value); observing again would
        add a history snapshot."""
        obs = self._last[1] if self._last is not None and self._last[0] is ctx else self.builder.observe(ctx)
        if self.name.startswith("dqn:"):  # DQN trains no value head: its value is the best feasible Q
            q = self.net.act_one(obs)
            return float(q.max()) if q.size else float("nan")
        return self.net.value_one(obs)


def load_learned(spec: str) -> LearnedPolicy:
    """`ppo:PATH` or `dqn:PATH` → the policy in PATH (a policy.pt, or a directory holding one)."""
    algo, _, path = spec.partition(":")
    if algo not in ("ppo", "dqn") or not path:
        raise UserError(f"learned policy {spec!r}: expected ppo:PATH or dqn:PATH")
    p = Path(path)
    if p.is_dir():
        p = p / "policy.pt"
    torch.set_num_threads(1)  # one decision at a time: extra threads only add contention on small matrices
    net, _ = load_policy(p, algo=algo)
    return LearnedPolicy(net, name=spec)
