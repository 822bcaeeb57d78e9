"""Waiting on a real control plane: poll a check (after an optional step) until it holds or time runs out."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any


def until(check: Callable[[], Any], what: str, step: Callable[[], object] | None = None, timeout_s: float = 120.0,
          period_s: float = 1.0) -> Any:
    """The first truthy value of `check()`; AssertionError naming `what` after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while True:
        if step is not None:
            step()
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}")
        time.sleep(period_s)
