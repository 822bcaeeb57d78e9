"""Session fixtures: a real control plane (no scheduler at first), drlsched's extender on loopback, and
kube-scheduler configured from deploy/scheduler-config.yaml to call it.

The testbed binaries are built first if the cache lacks them (a no-op once built), so these tests never skip.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import kubernetes
import pytest
import yaml

from drlsched.k8s.extender import Extender, ExtenderServer
from drlsched.k8s.state import ClusterState
from drlsched.k8s.watch import Informer
from drlsched.policies import make_policy
from drlsched.testbed import processes
from drlsched.testbed.build import build
from drlsched.testbed.controlplane import Options, Testbed, down, start_scheduler, up
from drlsched.testbed.nodes import node_manifests

NODES = 200
GPU_NODES = 40
EXTENDER_POLICY = "first-fit"  # its choice is predictable: the lowest-named feasible node
DEPLOY_CONFIG = Path(__file__).resolve().parents[2] / "deploy" / "scheduler-config.yaml"


@pytest.fixture(scope="session")
def testbed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Testbed]:
    build()
    state_dir = tmp_path_factory.mktemp("k8s-testbed")
    running = up(Options(state_dir=state_dir, nodes=NODES, gpu_nodes=GPU_NODES, profile="openb", scheduler="none"))
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


class RunningExtender:
    """drlsched serve, in-process on a fixed loopback port so kube-scheduler's URL stays valid across a kill."""

    def __init__(self, testbed: Testbed) -> None:
        self.port = processes.free_ports(1)[0]
        self.url = f"http://{processes.LOOPBACK}:{self.port}"
        self.api = testbed.api_client()
        self.state = ClusterState()
        self.informer = Informer(self.api, self.state).start()
        assert self.informer.wait_synced(60)
        self.extender = Extender(make_policy(EXTENDER_POLICY), EXTENDER_POLICY, self.state, self.api)
        self.server: ExtenderServer | None = None
        self.start()

    def start(self) -> None:
        self.server = ExtenderServer((processes.LOOPBACK, self.port), self.extender)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def kill(self) -> None:
        assert self.server is not None
        self.server.stop()
        self.server = None


@pytest.fixture(scope="session")
def extender(testbed: Testbed) -> Iterator[RunningExtender]:
    running = RunningExtender(testbed)
    yield running
    if running.server is not None:
        running.kill()
    running.informer.stop()


@pytest.fixture(scope="session")
def kube_scheduler(testbed: Testbed, extender: RunningExtender) -> Testbed:
    """kube-scheduler with the shipped extender configuration, pointed at the loopback extender."""
    config = yaml.safe_load(DEPLOY_CONFIG.read_text())
    config.pop("apiVersion")
    config.pop("kind")
    shipped = config["extenders"][0]
    shipped["urlPrefix"] = extender.url
    del shipped["tlsConfig"]  # the loopback extender serves plain HTTP (TLS is tested in test_extender_server)
    # The shipped 250ms is sized for an extender with a core of its own; here it shares two with the whole
    # control plane and the tests, and a call that timed out would silently leave the choice to kube-scheduler.
    shipped["httpTimeout"] = "5s"
    start_scheduler(testbed, config)
    return testbed


@pytest.fixture
def namespace(core: kubernetes.client.CoreV1Api) -> str:
    name = f"t-{uuid.uuid4().hex[:8]}"
    core.create_namespace({"metadata": {"name": name}})
    return name


def add_gpu_nodes(core: kubernetes.client.CoreV1Api, count: int, group: str) -> list[str]:
    """Fake 8-GPU nodes of this test's own (labelled drlsched.io/test=group), so placements are not disturbed
    by other tests' pods; returns their names in order and waits until kwok has made them Ready."""
    names = []
    for i, manifest in enumerate(node_manifests(count, count, "uniform")):
        name = f"{group}-{i}"
        manifest["metadata"]["name"] = name
        manifest["metadata"]["labels"].update({"kubernetes.io/hostname": name, "drlsched.io/test": group})
        core.create_node(manifest)
        names.append(name)
    wait_for(lambda: all(_ready(core.read_node(n)) for n in names), 60, "test nodes Ready")
    return names


def _ready(node: Any) -> bool:
    return any(c.type == "Ready" and c.status == "True" for c in (node.status.conditions or []))


def wait_for(check: Callable[[], Any], timeout_s: float, what: str, interval_s: float = 0.2) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(interval_s)


def pods_json(core: kubernetes.client.CoreV1Api, namespace: str) -> list[dict[str, Any]]:
    return list(json.loads(core.list_namespaced_pod(namespace, _preload_content=False).data)["items"])


def events_json(core: kubernetes.client.CoreV1Api, namespace: str) -> list[dict[str, Any]]:
    return list(json.loads(core.list_namespaced_event(namespace, _preload_content=False).data)["items"])
