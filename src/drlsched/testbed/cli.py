"""`drlsched testbed ...` (placeholder until the testbed lands)."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    del sub
