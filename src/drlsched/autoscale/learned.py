"""The learned replica scaler: its network, its checkpoint (`scaler.pt`) and the object the driver asks.

Network (`ScalerNet`): an encoder over the `scaler_obs` history window — LSTM(64) → Dense(32, ReLU), the seed
article's design, or `none` (the newest sync only, through an MLP of the same size: the no-history ablation) — then
a policy head (one logit per action: per `MULTIPLIERS` entry, or per `STEPS` entry for step actions) and a value
head. Every action is always valid, so there is no mask.

Checkpoint: a dict readable by `torch.load(..., weights_only=True)` with format "drlsched-scaler", the observation
spec version (2: absolute actions, 3: step actions; both are read), the network's dimensions, free-form training
facts and the weights, with a sha256 over all of it (the same canonical digest as placement policies,
`drlsched.rl.checkpoint`). A placement policy file, a file of another observation spec or a damaged file is refused
with one line.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from drlsched.autoscale.scaler_obs import ACTIONS, HISTORY, MULTIPLIERS, SPEC_VERSIONS, action_count, features
from drlsched.errors import UserError
from drlsched.rl.checkpoint import FORMAT as PLACEMENT_FORMAT
from drlsched.rl.checkpoint import check_digest, read_checkpoint, weights, write_checkpoint
from drlsched.rl.network import layer_init

FORMAT = "drlsched-scaler"
FORMAT_VERSION = 1
ENCODERS = ("lstm", "none")
MAX_WIDTH = 1024


@dataclass(frozen=True)
class ScalerNetConfig:
    encoder: str = "lstm"
    lstm: int = 64
    state: int = 32
    hidden: int = 64


class ScalerNet(nn.Module):
    def __init__(self, cfg: ScalerNetConfig | None = None, actions: str = "absolute") -> None:
        super().__init__()
        self.cfg = cfg = cfg or ScalerNetConfig()
        self.actions = actions
        f = features(actions)
        if cfg.encoder == "lstm":
            self.lstm = nn.LSTM(f, cfg.lstm, batch_first=True)
            self.state = nn.Sequential(layer_init(nn.Linear(cfg.lstm, cfg.state)), nn.ReLU())
        else:
            self.state = nn.Sequential(layer_init(nn.Linear(f, cfg.lstm)), nn.ReLU(),
                                       layer_init(nn.Linear(cfg.lstm, cfg.state)), nn.ReLU())
        h = cfg.hidden
        self.actor = nn.Sequential(layer_init(nn.Linear(cfg.state + f, h)), nn.Tanh(),
                                   layer_init(nn.Linear(h, action_count(actions)), gain=0.01))
        self.critic = nn.Sequential(layer_init(nn.Linear(cfg.state + f, h)), nn.Tanh(),
                                    layer_init(nn.Linear(h, 1), gain=1.0))

    def forward(self, window: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """[B, HISTORY, features(actions)] → logits [B, action_count(actions)], values [B]."""
        if self.cfg.encoder == "lstm":
            _, (h_n, _) = self.lstm(window)
            s = self.state(h_n[-1])
        else:
            s = self.state(window[:, -1])
        x = torch.cat([s, window[:, -1]], dim=-1)  # the newest sync also reaches the heads directly
        return self.actor(x), self.critic(x).squeeze(-1)


class LearnedScaler:
    """Greedy actions of a trained `ScalerNet` (the deployed scaler: simulate, evaluate, `drlsched autoscale`)."""

    def __init__(self, net: ScalerNet, meta: dict[str, Any]) -> None:
        self.net, self.meta = net, meta
        self.actions = net.actions  # the action space: the observer of a run must be made with it

    @torch.no_grad()
    def act(self, window: np.ndarray) -> int:
        logits, _ = self.net(torch.from_numpy(np.ascontiguousarray(window, dtype=np.float32))[None])
        return int(logits[0].argmax())


def save_scaler(path: str | Path, net: ScalerNet, meta: dict[str, Any]) -> str:
    """Writes the checkpoint atomically; returns its sha256."""
    return write_checkpoint(path, _header(net.cfg, net.actions, meta), net)


def _header(cfg: ScalerNetConfig, actions: str, meta: dict[str, Any]) -> dict[str, Any]:
    import json

    return {"format": FORMAT, "format_version": FORMAT_VERSION, "obs_spec_version": SPEC_VERSIONS[actions],
            "history": HISTORY, "actions": list(MULTIPLIERS), "net": asdict(cfg), "meta": json.loads(json.dumps(meta))}


@lru_cache(maxsize=8)
def load_scaler(path: str) -> LearnedScaler:
    """The trained scaler at `path`; anything else is a `UserError` with a one-line reason. Cached per process:
    every run of an evaluation shares the one network."""
    p = Path(path)
    data = read_checkpoint(p, "scaler")
    if data.get("format") == PLACEMENT_FORMAT:
        raise UserError(f"{p} holds a placement policy (drlsched train), not a replica scaler (drlsched train-scaler)")
    if data.get("format") != FORMAT:
        raise UserError(f"{p} is not a drlsched scaler file")
    if data.get("format_version") != FORMAT_VERSION:
        raise UserError(f"{p} has scaler format version {data.get('format_version')}; this drlsched reads "
                        f"version {FORMAT_VERSION}")
    spec = data.get("obs_spec_version")
    actions = next((a for a in ACTIONS if SPEC_VERSIONS[a] == spec), None)
    if actions is None or (data.get("history"), data.get("actions")) != (HISTORY, list(MULTIPLIERS)):
        raise UserError(f"{p} was trained on another observation or action spec (version {str(spec)[:20]}): "
                        "retrain it with this drlsched")
    cfg = _config(p, data.get("net"))
    state = weights(p, data)
    with torch.device("meta"):
        expected = ScalerNet(cfg, actions).state_dict()
    if set(state) != set(expected) or any(state[k].shape != v.shape or state[k].dtype != v.dtype
                                          for k, v in expected.items()):
        raise UserError(f"{p} does not match this drlsched's scaler network")
    header = {k: data.get(k) for k in ("format", "format_version", "obs_spec_version", "history", "actions", "net",
                                       "meta")}
    check_digest(p, header, state, data.get("sha256"))
    net = ScalerNet(cfg, actions)
    net.load_state_dict(state)
    net.eval()
    meta = data.get("meta")
    return LearnedScaler(net, meta if isinstance(meta, dict) else {})


def _config(p: Path, net: object) -> ScalerNetConfig:
    names = {f.name for f in fields(ScalerNetConfig)}
    if not isinstance(net, dict) or set(net) != names:
        raise UserError(f"{p} does not describe a scaler network (net: expected the keys {', '.join(sorted(names))})")
    cfg = ScalerNetConfig(**net)
    if cfg.encoder not in ENCODERS:
        raise UserError(f"{p} names an unknown encoder {str(cfg.encoder)[:40]!r} ({', '.join(ENCODERS)})")
    for key in ("lstm", "state", "hidden"):
        value = getattr(cfg, key)
        if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= MAX_WIDTH:
            raise UserError(f"{p}: net.{key} must be an integer from 1 to {MAX_WIDTH}, not {str(value)[:40]}")
    return cfg
