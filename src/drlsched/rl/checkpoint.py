"""`policy.pt`: weights plus everything needed to rebuild and check the policy.

Layout (a dict readable by `torch.load(..., weights_only=True)`: tensors, strings, numbers, lists, dicts only):
    format: "drlsched-policy", format_version: 1, obs_spec_version: int, algo: "ppo" | "dqn",
    net: NetConfig fields, meta: free-form JSON-able training facts (scenario, reward, steps, seed, ...),
    state: the network's state_dict, sha256: hex digest over all of the above.
The digest is computed over a canonical serialisation (sorted JSON of the metadata, then each tensor's name,
dtype, shape and raw bytes in name order), so any edit to weights or metadata is detected on load. It is not
keyed: it catches damage and accidental edits, not a forger, who can recompute it. What protects a loader from
a hostile file is that nothing in it runs (`weights_only`), that the file size and the network's dimensions
are bounded, and that every tensor's shape is checked against a network built on the `meta` device (no
memory) before the real network is allocated.
"""

from __future__ import annotations

import hashlib
import json
import stat
from collections.abc import Callable
from dataclasses import fields
from pathlib import Path
from typing import Any

import torch

from drlsched.errors import UserError
from drlsched.rl.features import OBS_SPEC_VERSION
from drlsched.rl.network import ENCODERS, NetConfig, SchedulerNet

FORMAT = "drlsched-policy"
PACKER_FORMAT = "drlsched-packer"  # rl.packer_checkpoint's files, refused here by name
FORMAT_VERSION = 1
JOB_POLICY_FORMAT = "drlsched-job-policy"  # rl.job_policy's, named here so neither kind loads as the other
MAX_FILE_BYTES = 256 << 20  # a trained policy is well under 1 MiB; this only bounds what a load may cost
MAX_WIDTH = 4096  # largest lstm / state / hidden size accepted (the defaults are 64, 32, 64)
MAX_HISTORY = 1024
_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))


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
    return write_checkpoint(path, header, net)


def write_checkpoint(path: str | Path, header: dict[str, Any], net: torch.nn.Module) -> str:
    """`header` plus the network's weights and their digest, written atomically (temp file, then rename); returns
    the sha256. Shared by every checkpoint format of drlsched."""
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
    data = read_checkpoint(p, "policy")
    if data.get("format") == PACKER_FORMAT:
        raise UserError(f"{p} is a learned packer, not a placement policy: use --policy packer:{p}")
    if data.get("format") == JOB_POLICY_FORMAT:
        raise UserError(f"{p} is a learned job policy, not a placement policy: use it as --job-policy ppo:{p}")
    if data.get("format") != FORMAT:
        raise UserError(f"{p} is not a drlsched policy file")
    if data.get("format_version") != FORMAT_VERSION:
        raise UserError(f"{p} has policy format version {data.get('format_version')}; this drlsched reads "
                        f"version {FORMAT_VERSION}")
    if data.get("obs_spec_version") != OBS_SPEC_VERSION:
        raise UserError(f"{p} was trained on observation spec version {data.get('obs_spec_version')}, but this "
                        f"drlsched builds version {OBS_SPEC_VERSION}: retrain the policy")
    state = weights(p, data)
    header = {k: data.get(k) for k in ("format", "format_version", "obs_spec_version", "algo", "net", "meta")}
    cfg = _net_config(p, header["net"])
    _check_shapes(p, cfg, state)
    check_digest(p, header, state, data.get("sha256"))
    if algo is not None and header["algo"] != algo:
        raise UserError(f"{p} holds a {header['algo']} policy, not {algo}")
    net = SchedulerNet(cfg)
    net.load_state_dict(state)
    net.eval()
    return net, header


def read_checkpoint(p: Path, kind: str) -> dict[str, Any]:
    """The dict a drlsched checkpoint file holds (after `_check_file`; loaded with `weights_only`, so nothing in it
    runs); a damaged file or one that holds no dict is a `UserError` naming `kind` (policy, packer, scaler)."""
    _check_file(p)
    with p.open("rb") as f:
        zipped = f.read(4) == b"PK\x03\x04"  # torch.save's format; torch's own error for anything else is a page
    if not zipped:
        raise UserError(f"{p} is not a readable drlsched {kind} file (not a torch checkpoint)")
    try:
        data = torch.load(p, map_location="cpu", weights_only=True)
    except Exception as err:  # any unpickling failure means the same thing to a user
        text = str(err).strip()
        first = "it holds objects other than tensors and plain data; not loaded" if "eights only load" in text \
            else (text.splitlines()[0] if text else type(err).__name__)
        raise UserError(f"{p} is not a readable drlsched {kind} file ({first[:160]})") from None
    if not isinstance(data, dict):
        raise UserError(f"{p} is not a drlsched {kind} file")
    return data


def weights(p: Path, data: dict[str, Any]) -> dict[str, torch.Tensor]:
    """The checkpoint's state dict, which must map names to tensors."""
    state = data.get("state")
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        raise UserError(f"{p} has no weights")
    return state


def checked_net(p: Path, build: Callable[[], torch.nn.Module], header: dict[str, Any],
                state: dict[str, torch.Tensor], sha256: object, kind: str) -> torch.nn.Module:
    """The network `build` makes, with `state` loaded (eval mode), once the tensors' names, shapes and dtypes match
    a `meta`-device build (no memory) and the digest holds; else a `UserError` naming `kind`."""
    with torch.device("meta"):
        expected = build().state_dict()
    if set(state) != set(expected) or any(state[k].shape != t.shape or state[k].dtype != t.dtype
                                          for k, t in expected.items()):
        raise UserError(f"{p} does not match this drlsched's {kind} network (tensor names or shapes differ)")
    check_digest(p, header, state, sha256)
    net = build()
    net.load_state_dict(state)
    net.eval()
    return net


def check_digest(p: Path, header: dict[str, Any], state: dict[str, torch.Tensor], sha256: object) -> None:
    """Refuses a file whose header or weights changed after it was written."""
    if _digest(header, state) != sha256:
        raise UserError(f"{p} failed its sha256 check: the file was modified after training; refusing to load it")


def _check_file(p: Path) -> None:
    """A regular file of a plausible size; anything else named as it is."""
    try:
        status = p.stat()
    except FileNotFoundError:
        dangling = " (a symbolic link to a missing file)" if p.is_symlink() else ""
        raise UserError(f"policy file {p} does not exist{dangling}") from None
    except OSError as err:  # ELOOP (a symbolic link loop), EACCES, ENOTDIR, ...
        raise UserError(f"policy file {p} cannot be opened: {err.strerror or err}") from None
    for test, kind in _KINDS:
        if test(status.st_mode):
            raise UserError(f"policy file {p} is {kind}, not a file")
    if status.st_size > MAX_FILE_BYTES:
        raise UserError(f"policy file {p} has {status.st_size:,} bytes, more than a drlsched policy can have "
                        f"({MAX_FILE_BYTES:,})")


def _net_config(p: Path, net: object) -> NetConfig:
    """The header's network dimensions (missing ones take their defaults), each checked against its bound."""
    names = {f.name for f in fields(NetConfig)}
    if not isinstance(net, dict) or not set(net) <= names:
        raise UserError(f"{p} does not describe a network this drlsched builds (net: expected the keys "
                        f"{', '.join(sorted(names))})")
    cfg = NetConfig(**net)
    if cfg.encoder not in ENCODERS:
        raise UserError(f"{p} names an unknown encoder {str(cfg.encoder)[:40]!r} ({', '.join(ENCODERS)})")
    for key, limit in (("history", MAX_HISTORY), ("lstm", MAX_WIDTH), ("state", MAX_WIDTH), ("hidden", MAX_WIDTH)):
        value = getattr(cfg, key)
        if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= limit:
            raise UserError(f"{p}: net.{key} must be an integer from 1 to {limit}, not {str(value)[:40]}")
    return cfg


def _check_shapes(p: Path, cfg: NetConfig, state: dict[str, torch.Tensor]) -> None:
    """Every tensor has the name, shape and dtype of the network `cfg` describes (built without memory)."""
    with torch.device("meta"):
        expected = SchedulerNet(cfg).state_dict()
    if set(state) != set(expected):
        extra, missing = sorted(set(state) - set(expected)), sorted(set(expected) - set(state))
        raise UserError(f"{p} does not match this drlsched's network (unexpected tensors: {extra[:3]}, missing: "
                        f"{missing[:3]})")
    for name, tensor in expected.items():
        found = state[name]
        if found.shape != tensor.shape or found.dtype != tensor.dtype:
            raise UserError(f"{p} does not match this drlsched's network ({name} is {found.dtype} "
                            f"{tuple(found.shape)}, expected {tensor.dtype} {tuple(tensor.shape)})")
