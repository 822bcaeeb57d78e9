"""A small env window for the training tests (as in tests/rl)."""

from __future__ import annotations

import pytest

from drlsched.rl.env import EnvConfig


@pytest.fixture
def batch_config() -> EnvConfig:
    return EnvConfig(scenario="batch", nodes=4, duration_s=20.0)
