"""A test module's own control plane, for modules that need one shaped otherwise than the session's."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import kubernetes
import pytest

from drlsched.testbed.build import build
from drlsched.testbed.controlplane import Options, down, up


def own_bed(tmp_path_factory: pytest.TempPathFactory, name: str,
            options: Callable[[Path], Options]) -> Iterator[kubernetes.client.ApiClient]:
    """Starts a control plane with `options` of its state directory and yields its API (`yield from` in a
    module-scoped fixture); stops it after the module."""
    build()
    state_dir = tmp_path_factory.mktemp(name)
    client = up(options(state_dir)).api_client()
    try:
        yield client
    finally:
        client.close()
        down(state_dir)
