"""`policy.pt`: weights plus everything needed to rebuild and check the policy.

Layout (a dict readable by `torch.load(..., weights_only=True)`: tensors, strings, numbers, lists, dicts only):
    format: "drlsched-policy", format_version: 1, obs_spec_version: int, algo: "ppo" | "dqn",
    net: NetConfig fields, meta: free-form JSON-able training facts (scenario, reward, steps, seed, ...),
    state: the network's state_dict, sha256: hex digest over all of the above.
The digest is computed over a canonical serialisation (sorted JSON of the metadata, then each tensor's name,
dtype, shape and raw bytes in name order), so any edit to weights or metadata is detected on load.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import torch

from drlsched.errors import UserError
from drlsched.rl.features import OBS_SPEC_VERSION
from drlsched.rl.network import NetConfig, SchedulerNet

FORMAT = "drlsched-policy"
FORMAT_VERSION = 1


def _digest(header: dict[str, Any], state: dict[str, torch.Tensor]) -> str:
    h = hashlib.sha256()
    h.update(json.dumps(header, sort_keys=True, separators=(",", ":")).encode())
    for name in sorted(state):
        t = state[name].detach().cpu().contiguous()
        h.update(f"\n{name}:{t.dtype}:{tuple(t.shape)}\n".encode())
        h.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return h.hexdigest()


def save_policy(path: str | Path, net: SchedulerNet, algo: str, meta: dict[str, Any]) -> str:
    """Writes the checkpoint atomically (temp file, then rename); returns its sha256."""
    header = {"format": FORMAT, "format_version": FORMAT_VERSION, "obs_spec_version": OBS_SPEC_VERSION,
              "algo": algo, "net": net.cfg.to_dict(), "meta": json.loads(json.dumps(meta))}
    state = {k: v.detach().cpu().clone() for k, v in net.state_dict().items()}
    digest = _digest(header, state)
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_suffix(p.suffix + ".tmp")
    torch.save({**header, "state": state, "sha256": digest}, tmp)
    tmp.replace(p)
    return digest


def load_policy(path: str | Path, algo: str | None = None) -> tuple[SchedulerNet, dict[str, Any]]:
    """The network (eval mode) and the checkpoint header; a damaged, tampered or incompatible file is a
    `UserError` with a one-line reason."""
    p = Path(path)
    if not p.is_file():
        raise UserError(f"policy file {p} does not exist")
    try:
        data = torch.load(p, map_location="cpu", weights_only=True)
    except Exception as err:  # any unpickling failure means the same thing to a user
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise UserError(f"{p} is not a readable drlsched policy file ({first[:160]})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise UserError(f"{p} is not a drlsched policy file")
    if data.get("format_version") != FORMAT_VERSION:
        raise UserError(f"{p} has policy format version {data.get('format_version')}; this drlsched reads "
                        f"version {FORMAT_VERSION}")
    if data.get("obs_spec_version") != OBS_SPEC_VERSION:
        raise UserError(f"{p} was trained on observation spec version {data.get('obs_spec_version')}, but this "
                        f"drlsched builds version {OBS_SPEC_VERSION}: retrain the policy")
    state = data.get("state")
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise UserError(f"{p} has no weights")
    header = {k: data.get(k) for k in ("format", "format_version", "obs_spec_version", "algo", "net", "meta")}
    if _digest(header, state) != data.get("sha256"):
        raise UserError(f"{p} failed its sha256 check: the file was modified after training; refusing to load it")
    if algo is not None and header["algo"] != algo:
        raise UserError(f"{p} holds a {header['algo']} policy, not {algo}")
    try:
        net = SchedulerNet(NetConfig(**header["net"]))
        net.load_state_dict(state)
    except (TypeError, ValueError, RuntimeError) as err:
        raise UserError(f"{p} does not match this drlsched's network ({str(err).splitlines()[0][:160]})") from None
    net.eval()
    return net, header
