"""`drlsched trace-info` (placeholder until issue 3 lands)."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    del sub
