"""Readers for public cluster traces, producing `drlsched.workload.Workload` (placeholder until issue 3 lands)."""

from __future__ import annotations

import argparse

from drlsched.errors import UserError
from drlsched.workload import Workload

FORMATS: tuple[str, ...] = ()


def add_trace_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--trace", metavar="PATH", help="trace directory or file")
    parser.add_argument("--trace-format", metavar="FMT", help="trace format")


def load_trace(args: argparse.Namespace) -> Workload:
    raise UserError(f"trace format {args.trace_format!r} is not supported yet")
