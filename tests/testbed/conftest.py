"""Session fixtures: one real control plane (etcd, kube-apiserver, kube-scheduler, kwok) for the tests here.

The binaries are built first if the cache lacks them (a no-op once built), so these tests never skip.
"""

from __future__ import annotations

import uuid
import warnings
from collections.abc import Iterator
from pathlib import Path

import kubernetes
import pytest

from drlsched.testbed.build import build
from drlsched.testbed.controlplane import Options, Testbed, down, up

NODES = 100
GPU_NODES = 30


@pytest.fixture(scope="session")
def binaries() -> Path:
    return build()


@pytest.fixture(scope="session")
def testbed(binaries: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Testbed]:
    state_dir = tmp_path_factory.mktemp("testbed")
    running = up(Options(state_dir=state_dir, nodes=NODES, gpu_nodes=GPU_NODES, profile="openb"))
    try:
        yield running
    finally:
        down(state_dir)


@pytest.fixture(scope="session")
def api(testbed: Testbed) -> Iterator[kubernetes.client.ApiClient]:
    client = testbed.api_client()
    yield client
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        client.close()


@pytest.fixture(scope="session")
def core(api: kubernetes.client.ApiClient) -> kubernetes.client.CoreV1Api:
    return kubernetes.client.CoreV1Api(api)


@pytest.fixture
def namespace(core: kubernetes.client.CoreV1Api) -> str:
    """A fresh namespace per test. Without a controller manager namespaces are never really deleted, so none
    is: the session's control plane is thrown away whole."""
    name = f"t-{uuid.uuid4().hex[:8]}"
    core.create_namespace({"metadata": {"name": name}})
    return name
