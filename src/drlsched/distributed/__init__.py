"""Scale-out backends. Ray is an optional extra (`pip install drlsched[ray]`): nothing here imports it until a
command asks for `--backend ray`, so the core package and its CLI work without it."""

from __future__ import annotations

import argparse
from types import ModuleType

from drlsched.errors import UserError

BACKENDS = ("local", "ray")


def load_ray_backend() -> ModuleType:
    """`drlsched.distributed.ray_backend`, or one clear error when Ray is not installed."""
    try:
        import ray  # noqa: F401
    except ImportError:
        raise UserError("--backend ray needs Ray: install drlsched[ray] (pip install 'drlsched[ray]')") from None
    from drlsched.distributed import ray_backend as module

    return module


def add_backend_arguments(p: argparse.ArgumentParser, workers_help: str | None = None) -> None:
    """--backend, --address and (for training) --workers."""
    from drlsched.cli_args import positive_int

    p.add_argument("--backend", choices=BACKENDS, default="local",
                   help="where runs execute: local processes (default) or a Ray cluster (needs drlsched[ray])")
    p.add_argument("--address", metavar="ADDR",
                   help="Ray: address of a running cluster (e.g. ray://head:10001 or auto; default: start a local "
                        "Ray for this command)")
    if workers_help:
        p.add_argument("--workers", type=positive_int, metavar="N", help=workers_help)


def check_backend_arguments(args: argparse.Namespace) -> None:
    """Ray-only options without `--backend ray` are a mistake worth saying, not silently ignoring."""
    if args.backend != "ray":
        for name in ("address", "workers"):
            if getattr(args, name, None) is not None:
                raise UserError(f"--{name} needs --backend ray")
