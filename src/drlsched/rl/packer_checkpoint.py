"""A learned packer's `policy.pt`: like a placement policy's (`rl.checkpoint`: weights_only load, sha256 over
the header and tensors, bounded size, shapes checked on a `meta`-device network first), with its own format name
and the packer feature layout's version, so neither kind of file loads as the other.

Layout: format: "drlsched-packer", format_version: 1, feature_version: `PACKER_FEATURE_VERSION`,
spec: `PackerSpec` fields, meta: training facts, state: the network's state_dict, sha256.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, cast

from drlsched.errors import UserError
from drlsched.rl.checkpoint import FORMAT as POLICY_FORMAT
from drlsched.rl.checkpoint import MAX_WIDTH, PACKER_FORMAT, checked_net, read_checkpoint, weights, write_checkpoint
from drlsched.rl.packer_net import PackerNet, PackerSpec

FORMAT = PACKER_FORMAT
FORMAT_VERSION = 1
# The per-node feature layout (packer_features and packer_net's inputs); bump on any change to it.
PACKER_FEATURE_VERSION = 1
MAX_SLOTS = 64
MAX_MODELS = 64
MAX_CANDIDATES = 100_000


def save_packer(path: str | Path, net: PackerNet, meta: dict[str, Any]) -> str:
    """Writes the checkpoint atomically; returns its sha256."""
    header = {"format": FORMAT, "format_version": FORMAT_VERSION, "feature_version": PACKER_FEATURE_VERSION,
              "spec": net.spec.to_dict(), "meta": json.loads(json.dumps(meta))}
    return write_checkpoint(path, header, net)


def load_packer_net(path: str | Path) -> tuple[PackerNet, dict[str, Any]]:
    """The network (eval mode) and the header; anything else is a `UserError` with a one-line reason."""
    p = Path(path)
    data = read_checkpoint(p, "packer")
    if data.get("format") == POLICY_FORMAT:
        raise UserError(f"{p} is a placement policy ({data.get('algo')}), not a learned packer: use "
                        f"--policy {data.get('algo')}:{p}")
    if data.get("format") != FORMAT:
        raise UserError(f"{p} is not a drlsched packer file")
    if data.get("format_version") != FORMAT_VERSION:
        raise UserError(f"{p} has packer format version {data.get('format_version')}; this drlsched reads "
                        f"version {FORMAT_VERSION}")
    if data.get("feature_version") != PACKER_FEATURE_VERSION:
        raise UserError(f"{p} was trained on packer feature version {data.get('feature_version')}, but this "
                        f"drlsched builds version {PACKER_FEATURE_VERSION}: retrain the packer")
    state = weights(p, data)
    header = {k: data.get(k) for k in ("format", "format_version", "feature_version", "spec", "meta")}
    spec = _spec(p, header["spec"])
    net = cast(PackerNet, checked_net(p, lambda: PackerNet(spec), header, state, data.get("sha256"), "packer"))
    return net, header


def _spec(p: Path, raw: object) -> PackerSpec:
    if not isinstance(raw, dict) or set(raw) != {"slots", "models", "candidates", "hidden"}:
        raise UserError(f"{p} does not describe a packer this drlsched builds (spec: expected slots, models, "
                        f"candidates, hidden)")
    models = raw["models"]
    if not isinstance(models, list) or len(models) > MAX_MODELS or not all(isinstance(m, str) for m in models):
        raise UserError(f"{p}: spec.models must be a list of at most {MAX_MODELS} GPU model names")
    for key, low, high in (("slots", 1, MAX_SLOTS), ("candidates", 0, MAX_CANDIDATES), ("hidden", 1, MAX_WIDTH)):
        value = raw[key]
        if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
            raise UserError(f"{p}: spec.{key} must be an integer from {low} to {high}, not {str(value)[:40]}")
    return PackerSpec(raw["slots"], tuple(models), raw["candidates"], raw["hidden"])
