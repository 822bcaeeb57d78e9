"""Smoke tests against the real control plane: nodes, the real kube-scheduler, kwok pod lifecycle, metrics."""

from __future__ import annotations

import time
import urllib.request
from datetime import datetime

import kubernetes

from drlsched.k8s.objects import GPU_MODEL_LABEL, GPU_RESOURCE, RACK_LABEL, pod_manifest
from drlsched.testbed import controlplane
from drlsched.testbed.kwok_config import (
    CPU_USAGE_ANNOTATION,
    GPU_METRICS_PATH,
    GPU_UTIL_ANNOTATION,
    MEMORY_USAGE_ANNOTATION,
    RESOURCE_METRICS_PATH,
)
from drlsched.testbed.pods import create_pods, wait_for_phase

# kwok reports times with one-second resolution and runs stages as its queue allows: a pod's measured run time
# may be a second short of its annotation, and a few seconds long while 1,000 pods change state at once.
_EARLY_S = 1
_LATE_S = 15


def _seconds(timestamp: str) -> float:
    return datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp()


def test_all_fake_nodes_are_ready_with_their_capacity_and_labels(
    testbed: controlplane.Testbed, core: kubernetes.client.CoreV1Api
) -> None:
    nodes = core.list_node().items
    assert len(nodes) == testbed.nodes == 100
    for node in nodes:
        ready = [c.status for c in node.status.conditions if c.type == "Ready"]
        assert ready == ["True"], node.metadata.name
        assert node.metadata.labels[RACK_LABEL].startswith("rack-")
        assert not node.spec.taints
    gpu_nodes = [n for n in nodes if GPU_RESOURCE in n.status.allocatable]
    assert len(gpu_nodes) == testbed.gpu_nodes
    for node in gpu_nodes:
        assert int(node.status.allocatable[GPU_RESOURCE]) > 0
        assert node.metadata.labels[GPU_MODEL_LABEL]
    assert {n.metadata.labels[GPU_MODEL_LABEL] for n in gpu_nodes} >= {"G2", "T4", "P100"}


def test_kube_scheduler_binds_1000_pods_that_succeed_after_their_durations(
    api: kubernetes.client.ApiClient, core: kubernetes.client.CoreV1Api, namespace: str
) -> None:
    durations = {i: (10, 20, 30)[i % 3] for i in range(1000)}
    create_pods(
        api,
        namespace,
        [pod_manifest(f"job-{i:04d}", cpu="500m", duration=f"{d}s") for i, d in durations.items()],
    )

    pods = wait_for_phase(api, namespace, "Succeeded", len(durations), timeout_s=600)

    for pod in pods:
        assert pod["spec"]["schedulerName"] == "default-scheduler"
        assert pod["spec"]["nodeName"].startswith("kwok-")
        started = _seconds(pod["status"]["startTime"])
        finished = _seconds(pod["status"]["containerStatuses"][0]["state"]["terminated"]["finishedAt"])
        expected = durations[int(pod["metadata"]["name"].split("-")[1])]
        assert expected - _EARLY_S <= finished - started <= expected + _LATE_S, pod["metadata"]["name"]
        conditions = {c["type"]: c["status"] for c in pod["status"]["conditions"]}
        assert conditions == {
            "PodScheduled": "True",
            "Initialized": "True",
            "Ready": "False",
            "ContainersReady": "False",
        }
    # Every binding was the real scheduler's: it records a Scheduled event for each pod it binds.
    events = core.list_namespaced_event(namespace, field_selector="reason=Scheduled").items
    assert {e.involved_object.name for e in events} == {p["metadata"]["name"] for p in pods}
    assert {e.reporting_component or e.source.component for e in events} == {"default-scheduler"}


def test_gpu_pods_land_only_on_gpu_nodes(
    api: kubernetes.client.ApiClient, core: kubernetes.client.CoreV1Api, namespace: str
) -> None:
    gpu_nodes = {n.metadata.name for n in core.list_node().items if GPU_RESOURCE in n.status.allocatable}
    create_pods(api, namespace, [pod_manifest(f"gpu-{i:03d}", gpus=1 + i % 2, duration=None) for i in range(60)])
    # No node has 16 GPUs: this one must stay Pending, reported unschedulable by the scheduler.
    create_pods(api, namespace, [pod_manifest("too-big", gpus=16, duration=None)])

    pods = wait_for_phase(api, namespace, "Running", 60, timeout_s=300)

    placed = {p["metadata"]["name"]: p["spec"].get("nodeName") for p in pods}
    assert all(placed[f"gpu-{i:03d}"] in gpu_nodes for i in range(60))
    too_big = next(p for p in pods if p["metadata"]["name"] == "too-big")
    assert too_big["status"]["phase"] == "Pending"
    scheduled = [c for c in too_big["status"].get("conditions", []) if c["type"] == "PodScheduled"]
    assert [(c["status"], c["reason"]) for c in scheduled] == [("False", "Unschedulable")]


def test_kwok_serves_kubelet_resource_metrics_from_pod_annotations(
    api: kubernetes.client.ApiClient, testbed: controlplane.Testbed, namespace: str
) -> None:
    usage = {CPU_USAGE_ANNOTATION: "250m", MEMORY_USAGE_ANNOTATION: "300Mi", GPU_UTIL_ANNOTATION: "0.35"}
    create_pods(api, namespace, [pod_manifest("busy", gpus=1, duration=None, annotations=usage)])
    (pod,) = wait_for_phase(api, namespace, "Running", 1, timeout_s=120)
    node = pod["spec"]["nodeName"]

    # kwok fills its pod cache lazily, on the first scrape: a new pod may be missing from that one.
    resource = _scrape_until(testbed.kwok_url + RESOURCE_METRICS_PATH.format(node=node), 'pod="busy"')
    gpu = _scrape_until(testbed.kwok_url + GPU_METRICS_PATH.format(node=node), 'pod="busy"')

    memory = _sample(resource, "pod_memory_working_set_bytes", namespace, "busy")
    assert memory == 300 * 2**20
    assert _sample(resource, "pod_cpu_usage_seconds_total", namespace, "busy") >= 0
    assert _sample(gpu, "pod_gpu_utilization", namespace, "busy") == 0.35


def _scrape_until(url: str, needle: str, timeout_s: float = 30.0) -> str:
    deadline = time.monotonic() + timeout_s
    while True:
        with urllib.request.urlopen(url, timeout=10) as response:
            text = str(response.read().decode())
        if needle in text or time.monotonic() > deadline:
            return text
        time.sleep(0.5)


def _sample(text: str, metric: str, namespace: str, pod: str) -> float:
    for line in text.splitlines():
        if line.startswith(metric + "{") and f'namespace="{namespace}"' in line and f'pod="{pod}"' in line:
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"no {metric} sample for {namespace}/{pod} in:\n{text}")
