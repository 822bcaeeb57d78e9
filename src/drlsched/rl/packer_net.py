"""The learned GPU packer's network (issue 26 item 3): one MLP scores every candidate node from its own features
(`packer_features`) and the pod's context, with the same weights for every node, so it runs at any node count.

logit(n) = −scale · growth(n) + MLP([node features, growth(n) − least growth], context)(n)

The first term is FGD's own choice (least fragmentation growth, in GPUs), with a learned sharpness `scale`; the
MLP learns corrections to it, and its last layer starts near zero, so an untrained packer is FGD. Nodes outside
the mask (infeasible, or padding) get `MASKED`.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch
from torch import nn

from drlsched.rl.packer_features import CONTEXT_SHAPES

MASKED = -1e8  # not -inf: softmax and entropy stay finite
CONTEXT_WIDTH = 3 + 3 * CONTEXT_SHAPES
GROWTH_SCALE = 20.0  # initial sharpness: 0.05 GPU more growth costs one unit of logit


@dataclass(frozen=True)
class PackerSpec:
    """What a packer checkpoint was built for: the per-node GPU slots and GPU models of its feature layout, how
    many of FGD's best nodes it rescores (`candidates`, 0 = every feasible node), and its width."""

    slots: int
    models: tuple[str, ...]
    candidates: int = 16
    hidden: int = 64

    @property
    def node_width(self) -> int:
        return self.slots + 1 + len(self.models) + 3  # packer_features.node_feature_count's layout

    def to_dict(self) -> dict[str, object]:
        d = asdict(self)
        d["models"] = list(self.models)
        return d


class PackerNet(nn.Module):
    def __init__(self, spec: PackerSpec) -> None:
        super().__init__()
        self.spec = spec
        h = spec.hidden
        self.node = nn.Linear(spec.node_width + 1, h)  # + the growth relative to the least among candidates
        self.ctx = nn.Linear(CONTEXT_WIDTH, h)
        self.mid = nn.Linear(h, h)
        self.out = nn.Linear(h, 1)
        nn.init.normal_(self.out.weight, std=1e-3)
        nn.init.zeros_(self.out.bias)
        # [1], not a 0-d tensor: the checkpoint digest views its bytes
        self.log_scale = nn.Parameter(torch.full((1,), math.log(GROWTH_SCALE)))

    def forward(self, nodes: torch.Tensor, ctx: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """nodes: [B, N, node_width] (growth, in GPUs, last), ctx: [B, CONTEXT_WIDTH], mask: bool [B, N]
        → logits [B, N]."""
        growth = nodes[..., -1]
        least = torch.where(mask, growth, torch.full_like(growth, float("inf"))).amin(dim=1, keepdim=True)
        rel = torch.where(mask, growth - least, torch.zeros_like(growth))
        x = torch.tanh(self.node(torch.cat((nodes, rel.unsqueeze(-1)), dim=-1)) + self.ctx(ctx).unsqueeze(1))
        x = torch.tanh(self.mid(x))
        logits = self.out(x).squeeze(-1) - self.log_scale.exp() * rel
        return torch.where(mask, logits, torch.full_like(logits, MASKED))
