"""The policy network: a state encoder over the metric history and a per-node scorer shared across nodes.

- State encoder: LSTM(64) over the T history snapshots → Dense(32, ReLU) (the seed article's design); with
  `encoder="framestack"` the flattened window goes through an MLP of the same output size instead, with
  `encoder="none"` only the newest snapshot does (no history: the ablations).
- Scorer: an MLP over [node features, option features, pod features, state embedding], applied to every
  (node, GPU option) pair, gives one logit each; infeasible pairs are masked. No layer depends on the node count.
  Its first layer is linear in the concatenation, so it is computed as a sum of per-part products (node part
  [B,N,H], option part [B,N,G,H], context part [B,H]) instead of materialising the concatenation.
- Hold head (the admission decision, the last action): an MLP over [context part, mean and max of the node
  parts after tanh] gives the hold logit, so holding is weighed against the nodes' state as a whole.
- Value head: an MLP over [state embedding, pod embedding, mean and max of node embeddings].
The same scorer output serves as Q-values for the DQN baseline.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import torch
from torch import nn

from drlsched.rl.features import F_HIST, F_NODE, F_OPT, F_POD, HISTORY, MAX_OPTIONS

MASKED = -1e8  # masked logits (not -inf: keeps softmax and entropy finite)
ENCODERS = ("lstm", "framestack", "none")


@dataclass(frozen=True)
class NetConfig:
    encoder: str = "none"  # "none" (the default: issue 15 measured no worth in history), "lstm" or "framestack"
    history: int = HISTORY
    lstm: int = 64
    state: int = 32
    hidden: int = 64

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def layer_init(layer: nn.Linear, gain: float = float(np.sqrt(2)), bias: float = 0.0) -> nn.Linear:
    nn.init.orthogonal_(layer.weight, gain)
    nn.init.constant_(layer.bias, bias)
    return layer


class SchedulerNet(nn.Module):
    def __init__(self, cfg: NetConfig | None = None) -> None:
        super().__init__()
        self.cfg = cfg = cfg or NetConfig()
        h = cfg.hidden
        if cfg.encoder == "lstm":
            self.lstm = nn.LSTM(F_HIST, cfg.lstm, batch_first=True)
            for name, p in self.lstm.named_parameters():
                if "bias" in name:
                    nn.init.constant_(p, 0.0)
                else:
                    nn.init.orthogonal_(p, 1.0)
            self.state = nn.Sequential(layer_init(nn.Linear(cfg.lstm, cfg.state)), nn.ReLU())
        elif cfg.encoder == "framestack":
            self.stack = nn.Sequential(layer_init(nn.Linear(cfg.history * F_HIST, cfg.lstm)), nn.ReLU(),
                                       layer_init(nn.Linear(cfg.lstm, cfg.state)), nn.ReLU())
        elif cfg.encoder == "none":
            self.stack = nn.Sequential(layer_init(nn.Linear(F_HIST, cfg.lstm)), nn.ReLU(),
                                       layer_init(nn.Linear(cfg.lstm, cfg.state)), nn.ReLU())
        else:
            raise ValueError(f"unknown encoder {cfg.encoder!r} (lstm, framestack or none)")
        self.pod = nn.Sequential(layer_init(nn.Linear(F_POD, h)), nn.Tanh())
        # Actor: first layer split by part (see the module docstring).
        self.a_node = layer_init(nn.Linear(F_NODE, h))
        self.a_opt = layer_init(nn.Linear(F_OPT, h))
        self.a_ctx = layer_init(nn.Linear(cfg.state + h, h))
        self.a_out = nn.Sequential(nn.Tanh(), layer_init(nn.Linear(h, h)), nn.Tanh(),
                                   layer_init(nn.Linear(h, 1), gain=0.01))
        self.a_hold = nn.Sequential(layer_init(nn.Linear(3 * h, h)), nn.Tanh(), layer_init(nn.Linear(h, 1), gain=0.01))
        # Critic.
        self.c_node = nn.Sequential(layer_init(nn.Linear(F_NODE, h)), nn.Tanh())
        self.value_head = nn.Sequential(layer_init(nn.Linear(cfg.state + 3 * h, h)), nn.Tanh(),
                                        layer_init(nn.Linear(h, 1), gain=1.0))

    def encode(self, history: torch.Tensor) -> torch.Tensor:
        """[B, T, H] → [B, state]."""
        if self.cfg.encoder == "lstm":
            _, (h_n, _) = self.lstm(history)
            return self.state(h_n[-1])
        if self.cfg.encoder == "none":
            return self.stack(history[:, -1])
        return self.stack(history.flatten(1))

    def _hold(self, ctx: torch.Tensor, node: torch.Tensor) -> torch.Tensor:
        """Hold logits [B] from the context part [B, h] and the node parts [B, N, h]."""
        t = torch.tanh(node)
        return self.a_hold(torch.cat([ctx, t.mean(dim=-2), t.max(dim=-2).values], dim=-1)).squeeze(-1)

    def forward(self, obs: dict[str, torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        """Masked logits [B, N*G + 1] (the last: hold) and values [B]."""
        s = self.encode(obs["history"])
        pod = self.pod(obs["pod"])
        ctx = self.a_ctx(torch.cat([s, pod], dim=-1))  # [B, h]
        node = self.a_node(obs["nodes"])  # [B, N, h]
        opt = self.a_opt(obs["options"])  # [B, N, G, h]
        pre = opt + node.unsqueeze(2) + ctx[:, None, None, :]
        logits = torch.cat([self.a_out(pre).squeeze(-1).flatten(1), self._hold(ctx, node)[:, None]], 1)  # [B, N*G+1]
        mask = obs["action_mask"].bool()
        logits = torch.where(mask, logits, torch.full_like(logits, MASKED))
        return logits, self._value(s, pod, obs["nodes"])

    def _value(self, s: torch.Tensor, pod: torch.Tensor, nodes: torch.Tensor) -> torch.Tensor:
        """Values [B] from the state and pod embeddings and the node features [B, N, F_NODE]."""
        cn = self.c_node(nodes)
        v_in = torch.cat([s, pod, cn.mean(dim=1), cn.max(dim=1).values], dim=-1)
        return self.value_head(v_in).squeeze(-1)

    @torch.no_grad()
    def value_one(self, obs: dict[str, np.ndarray]) -> float:
        """The critic's estimate for one observation (in the training's scaled-return units)."""
        s = self.encode(torch.from_numpy(obs["history"])[None])
        pod = self.pod(torch.from_numpy(obs["pod"])[None])
        return float(self._value(s, pod, torch.from_numpy(obs["nodes"])[None])[0])

    @torch.no_grad()
    def act_one(self, obs: dict[str, np.ndarray]) -> np.ndarray:
        """Logits for one observation, computed only for feasible pairs (deployment fast path).

        Returns float32[k] over `np.flatnonzero(obs["action_mask"])`, in that order (the hold last)."""
        mask = obs["action_mask"]
        idx = np.flatnonzero(mask[:-1])
        nodes_i, slots = np.divmod(idx, MAX_OPTIONS)
        s = self.encode(torch.from_numpy(obs["history"])[None])
        pod = self.pod(torch.from_numpy(obs["pod"])[None])
        ctx = self.a_ctx(torch.cat([s, pod], dim=-1))[0]
        node = self.a_node(torch.from_numpy(obs["nodes"][nodes_i]))
        opt = self.a_opt(torch.from_numpy(obs["options"][nodes_i, slots]))
        out = self.a_out(opt + node + ctx).squeeze(-1)
        if mask[-1]:  # the hold is weighed against every node, feasible or not, as in `forward`
            out = torch.cat([out, self._hold(ctx, self.a_node(torch.from_numpy(obs["nodes"])))[None]])
        return out.numpy()


def to_torch(obs: dict[str, np.ndarray]) -> dict[str, torch.Tensor]:
    return {k: torch.as_tensor(v) for k, v in obs.items()}


def masked_entropy(logits: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Entropy of the masked categorical, with masked entries' p·log p zeroed."""
    logp = torch.log_softmax(logits, dim=-1)
    p = logp.exp()
    return -torch.where(mask.bool(), p * logp, torch.zeros_like(p)).sum(-1)


__all__ = ["ENCODERS", "MASKED", "MAX_OPTIONS", "NetConfig", "SchedulerNet", "layer_init", "masked_entropy", "to_torch"]
