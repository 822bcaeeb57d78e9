"""Helpers for the trace tests (a module with a unique name, not a conftest, so other suites never clash)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from drlsched.traces import add_trace_arguments, load_trace
from drlsched.workload import PodSpec, Workload

FIXTURES = Path(__file__).parent / "fixtures"


def namespace(trace: Path | str, fmt: str, **options: Any) -> argparse.Namespace:
    """The options a workload command would parse, with the core's --nodes/--duration/--seed defaults."""
    parser = argparse.ArgumentParser()
    add_trace_arguments(parser)
    args = parser.parse_args(["--trace", str(trace), "--trace-format", fmt])
    args.nodes, args.duration, args.seed = None, None, 0
    for key, value in options.items():
        setattr(args, key, value)
    return args


def load(trace: Path | str, fmt: str, **options: Any) -> Workload:
    return load_trace(namespace(trace, fmt, **options))


def by_uid(workload: Workload) -> dict[str, PodSpec]:
    return {pod.uid: pod for pod in workload.iter_pods()}
