"""The `drlsched` command line: every subcommand registers itself from its own module."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import NoReturn

from drlsched import __version__
from drlsched.errors import UserError


class _Parser(argparse.ArgumentParser):
    """argparse's checks, but a bad argument is one line (`drlsched SUB: error: ...`, exit 2), as every other
    bad input: the usage it would print first is what `--help` is for. Subcommand parsers inherit the class."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    from drlsched import cli_fill, cli_replay, cli_sim
    from drlsched.autoscale import cli as autoscale_cli
    from drlsched.k8s import cli as k8s_cli
    from drlsched.rl import cli as rl_cli
    from drlsched.rl import job_cli, packer_cli
    from drlsched.testbed import cli as testbed_cli
    from drlsched.traces import cli as traces_cli

    parser = _Parser(prog="drlsched", description="Learned pod placement for Kubernetes, and its simulator.")
    parser.add_argument("--version", action="version", version=f"drlsched {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module in (cli_sim, cli_fill, traces_cli, testbed_cli, rl_cli, packer_cli, job_cli, k8s_cli, cli_replay,
                   autoscale_cli):
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except UserError as err:
        print(f"drlsched: error: {err}", file=sys.stderr)
        return err.exit_code
    except KeyboardInterrupt:
        print("drlsched: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
