"""Helpers for the trace tests (a module with a unique name, not a conftest, so other suites never clash)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from drlsched.traces import TraceSelection, load_trace
from drlsched.workload import PodSpec, Workload

FIXTURES = Path(__file__).parent / "fixtures"


def namespace(trace: Path | str, fmt: str, **options: Any) -> TraceSelection:
    """The trace options a workload command would parse by default, with `options` changed."""
    return TraceSelection(path=str(trace), format=fmt, **options)


def load(trace: Path | str, fmt: str, **options: Any) -> Workload:
    return load_trace(namespace(trace, fmt, **options))


def by_uid(workload: Workload) -> dict[str, PodSpec]:
    return {pod.uid: pod for pod in workload.iter_pods()}
