"""The learned GPU packer as a placement `Policy` (`--policy packer:PATH`): FGD's fragmentation growth for every
feasible node (its incremental score cache), FGD's `candidates` best nodes rescored by `PackerNet`, the
highest logit wins (ties as FGD: at random), and a GPU share goes to the GPU FGD picks on that node."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from drlsched.cluster import Cluster
from drlsched.errors import UserError
from drlsched.policies.base import Decision, Option, PodContext, Policy
from drlsched.policies.fgd import _Scores
from drlsched.rl.packer_features import context_features, node_features
from drlsched.rl.packer_net import PackerNet, PackerSpec


@dataclass(frozen=True, slots=True)
class PackerObs:
    """One decision as the network sees it: the option, the candidate nodes (indices into the cluster), their
    features in the checkpoint's layout, the context, FGD's GPU choice per candidate, and FGD's growth."""

    option: Option
    nodes: np.ndarray
    features: np.ndarray  # float32[len(nodes), spec.node_width]
    context: np.ndarray  # float32[CONTEXT_WIDTH]
    choice: np.ndarray  # int64[len(nodes)]: FGD's GPU for a share, -1 otherwise
    delta: np.ndarray  # float64[len(nodes)]: FGD's growth, milli-GPU


class FeatureLayout:
    """Maps a cluster's `node_features` columns onto a checkpoint's layout: GPU models by name (a model the
    packer never saw has no one-hot bit), GPU slots padded with -1 (missing GPUs)."""

    def __init__(self, spec: PackerSpec, cluster: Cluster) -> None:
        g = cluster.gpu_exists.shape[1]
        if g > spec.slots:
            raise UserError(f"the cluster has nodes with {g} GPUs, but this packer was trained for at most "
                            f"{spec.slots} per node")
        self.spec, self.g = spec, g
        m = len(cluster.model_bit)
        known = {name: i for i, name in enumerate(spec.models)}
        pairs = [(1 + g + j, 1 + spec.slots + known[name]) for j, name in enumerate(cluster.gpu_models)
                 if name in known]
        src = list(range(g)) + [g] + [s for s, _ in pairs] + [1 + g + m + k for k in range(3)]
        dst = list(range(g)) + [spec.slots] + [d for _, d in pairs] + [1 + spec.slots + len(spec.models) + k
                                                                       for k in range(3)]
        self.src, self.dst = np.array(src), np.array(dst)

    def features(self, cluster: Cluster, nodes: np.ndarray, delta: np.ndarray) -> np.ndarray:
        raw = node_features(cluster, nodes, delta)
        out = np.zeros((nodes.size, self.spec.node_width), dtype=np.float32)
        out[:, self.g:self.spec.slots] = -1.0
        out[:, self.dst] = raw[:, self.src]
        out[:, self.spec.slots] *= self.g / self.spec.slots  # GPU count over the layout's slots
        return out


class PackerPolicy(Policy):
    name = "packer"

    def __init__(self, net: PackerNet, name: str = "packer") -> None:
        self.net, self.name, self.spec = net, name, net.spec

    def reset(self, cluster: Cluster, rng: np.random.Generator) -> None:
        super().reset(cluster, rng)
        self.scores = _Scores(cluster)
        self.layout = FeatureLayout(self.spec, cluster)

    def observe(self, ctx: PodContext) -> PackerObs | None:
        """The first option that fits somewhere, its FGD-best candidates and their features; None if none fits."""
        c = self.cluster
        for option in ctx.options:
            nodes = np.flatnonzero(option.feasible)
            if nodes.size == 0:
                continue
            if ctx.typical is None or c.total_gpu_milli == 0:  # no target workload yet: no growth to weigh
                delta, choice = np.zeros(nodes.size), np.full(nodes.size, -1)
            else:
                delta, choice = self.scores.get(option.request, nodes, ctx.typical)
            k = self.spec.candidates
            if k and nodes.size > k:
                top = np.argpartition(delta, k - 1)[:k]
                top.sort()
                nodes, delta, choice = nodes[top], delta[top], choice[top]
            return PackerObs(option, nodes, self.layout.features(c, nodes, delta),
                             context_features(c, option.request, ctx.typical), choice, delta)
        return None

    def logits(self, obs: PackerObs) -> np.ndarray:
        with torch.no_grad():
            x = self.net(torch.from_numpy(obs.features)[None], torch.from_numpy(obs.context)[None],
                         torch.ones((1, obs.nodes.size), dtype=torch.bool))
        return x[0].numpy()

    def decide(self, obs: PackerObs, i: int) -> Decision:
        ids = (int(obs.choice[i]),) if obs.choice[i] >= 0 else None
        return Decision(int(obs.nodes[i]), obs.option.gpus, ids)

    def select(self, ctx: PodContext) -> Decision | None:
        obs = self.observe(ctx)
        if obs is None:
            return None
        if obs.nodes.size == 1:
            return self.decide(obs, 0)
        scores = self.logits(obs)
        best = np.flatnonzero(scores >= scores.max() - 1e-6)
        return self.decide(obs, int(np.searchsorted(obs.nodes, self.break_tie(obs.nodes[best]))))


def load_packer(spec: str) -> PackerPolicy:
    """`packer:PATH` → the packer in PATH (a policy.pt, or a directory holding one)."""
    from drlsched.rl.packer_checkpoint import load_packer_net

    _, _, path = spec.partition(":")
    if not path:
        raise UserError(f"learned packer {spec!r}: expected packer:PATH")
    p = Path(path)
    if p.is_dir():
        p = p / "policy.pt"
    torch.set_num_threads(1)  # one small decision at a time
    net, _ = load_packer_net(p)
    return PackerPolicy(net, name=spec)
