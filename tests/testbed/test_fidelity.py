"""The simulator's k8s-default places pods where the real kube-scheduler (v1.36, the testbed's) does."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import kubernetes
import numpy as np
import pytest

from drlsched.fidelity import compare
from drlsched.testbed.controlplane import Options, down, up


@pytest.fixture(scope="module")
def small_cluster(binaries: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[kubernetes.client.CoreV1Api]:
    # Its own cluster: the shared one has other tests' pods coming and going, and 100 nodes (this needs < 100
    # so that kube-scheduler scores every feasible node).
    state = tmp_path_factory.mktemp("fidelity")
    testbed = up(Options(state_dir=state, nodes=30, gpu_nodes=10, profile="openb"))
    api = testbed.api_client()
    try:
        yield kubernetes.client.CoreV1Api(api)
    finally:
        api.close()
        down(state)


def test_real_placements_are_among_the_simulators_top_nodes(small_cluster: kubernetes.client.CoreV1Api) -> None:
    small_cluster.create_namespace({"metadata": {"name": "fidelity"}})
    result = compare(small_cluster, "fidelity", 150, np.random.default_rng(3))
    assert result.pods == 150
    assert result.agreement == 1.0, result.disagreements
