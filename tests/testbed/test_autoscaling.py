"""Kubernetes' own autoscalers on the testbed: the real HPA (kube-controller-manager) scales a Deployment when its
pods' usage follows a rising load, to the count drlsched's HPA emulation computes; Karpenter (KWOK provider)
provisions a node for an unschedulable pod and removes it once empty.

One testbed for the module: 2 nodes of 96 cores, kube-controller-manager with a 5 s HPA sync (upstream's is 15 s;
the algorithm is the same), metrics-server at 10 s, Karpenter with a NodePool of the nodes' shape.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import kubernetes
import numpy as np
import pytest
from polling import until

from drlsched.autoscale.hpa import HorizontalPodAutoscaler, HPAConfig
from drlsched.autoscale.load import LoadCurve
from drlsched.autoscale.node_groups import NodeTemplate
from drlsched.autoscale.replicas import Pod, PodMetric
from drlsched.k8s import quantity
from drlsched.k8s.objects import pod_manifest
from drlsched.k8s.service_load import ServiceLoad
from drlsched.testbed import controlplane
from drlsched.testbed.build import build
from drlsched.testbed.controlplane import Options, down, up


@pytest.fixture(scope="module")
def bed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[controlplane.Testbed]:
    build()
    state_dir = tmp_path_factory.mktemp("autoscaling-testbed")
    running = up(Options(state_dir=state_dir, nodes=2, metrics_server=True, controller_manager=True,
                         hpa_sync_period_s=5.0, node_autoscaler="karpenter"))
    try:
        yield running
    finally:
        down(state_dir)


@pytest.fixture(scope="module")
def api(bed: controlplane.Testbed) -> Iterator[kubernetes.client.ApiClient]:
    client = bed.api_client()
    yield client
    client.close()


def _namespace(api: kubernetes.client.ApiClient) -> str:
    name = f"as-{uuid.uuid4().hex[:6]}"
    kubernetes.client.CoreV1Api(api).create_namespace({"metadata": {"name": name}})
    return name


def test_real_hpa_scales_a_deployment_as_the_emulation_does(api: kubernetes.client.ApiClient) -> None:
    ns = _namespace(api)
    labels = {"app": "web"}
    apps = kubernetes.client.AppsV1Api(api)
    hpas = kubernetes.client.AutoscalingV2Api(api)
    apps.create_namespaced_deployment(ns, {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
        "spec": {"replicas": 2, "selector": {"matchLabels": labels}, "template": {
            "metadata": {"labels": labels},
            "spec": {"containers": [{"name": "app", "image": "fake",
                                     "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]}}}})
    hpas.create_namespaced_horizontal_pod_autoscaler(ns, {
        "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "web"},
        "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                 "minReplicas": 2, "maxReplicas": 10,
                 "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {
                     "type": "Utilization", "averageUtilization": 50}}}]}})
    # 2 req/s for the first minute of the curve, then 18 req/s; a request costs 100m of CPU.
    curve = LoadCurve(np.array([2.0, 18.0]), 60.0)
    load = ServiceLoad(api, ns, "app=web", curve, cpu_per_rps_m=100.0)
    clock = {"t": 0.0}

    def status() -> Any:
        return hpas.read_namespaced_horizontal_pod_autoscaler("web", ns).status

    def utilization() -> int | None:
        current = status().current_metrics
        return current[0].resource.current.average_utilization if current and current[0].resource else None

    assert until(lambda: utilization() == 10, "the HPA to read 10% (100m of 1 CPU per pod)",
                  lambda: load.step(clock["t"])) == 1
    assert apps.read_namespaced_deployment("web", ns).spec.replicas == 2  # below target: min replicas hold
    clock["t"] = 60.0  # the burst: 1800m over 2 ready pods, 90%
    until(lambda: utilization() == 90, "the HPA to read 90%", lambda: load.step(clock["t"]))
    replicas = until(lambda: (r := apps.read_namespaced_deployment("web", ns).spec.replicas) > 2 and r,
                      "the HPA to scale the Deployment up", lambda: load.step(clock["t"]))

    emulation = HorizontalPodAutoscaler(HPAConfig(max_replicas=10, min_replicas=2, target_utilization=50))
    pods = [Pod(f"p{i}", 1000) for i in range(2)]
    metrics = {p.name: PodMetric(900, 1_000.0, 10.0) for p in pods}
    assert replicas == emulation.reconcile(1_005.0, 2, pods, metrics).desired == 4  # ⌈2 × 90 / 50⌉


def test_karpenter_provisions_a_node_for_an_unschedulable_pod_and_removes_it_empty(
        api: kubernetes.client.ApiClient) -> None:
    core = kubernetes.client.CoreV1Api(api)
    ns = _namespace(api)
    for i in range(2):  # fill both static nodes past what a second 60-core pod needs
        core.create_namespaced_pod(ns, pod_manifest(f"fill-{i}", cpu="60", memory="1Gi", duration=None))
    core.create_namespaced_pod(ns, pod_manifest("big", cpu="60", memory="1Gi", duration=None))

    def bound() -> str | None:
        pod = core.read_namespaced_pod("big", ns)
        return pod.spec.node_name if pod.status.phase == "Running" else None

    node_name = until(bound, "the big pod to run on a node Karpenter launched")
    node = core.read_node(node_name)
    assert node.metadata.labels["karpenter.sh/nodepool"] == "pool-cpu"
    assert node.metadata.labels["node.kubernetes.io/instance-type"] == "c96-m512"
    # The instance type carries the provider's kube-reserved overhead: allocatable is the template's.
    assert quantity.milli_cpu(node.status.allocatable["cpu"]) == 96_000
    # kwok's node-metrics-path stage gave it the annotation metrics-server follows.
    assert node.metadata.annotations["metrics.k8s.io/resource-metrics-path"].endswith(f"/{node_name}/metrics/resource")
    core.delete_namespaced_pod("big", ns)

    def gone() -> bool:
        return all(n.metadata.name != node_name for n in core.list_node().items)

    until(gone, "Karpenter to remove the empty node")


def test_a_karpenter_replay_needs_a_pool_of_the_simulators_template(api: kubernetes.client.ApiClient) -> None:
    from drlsched.autoscale.driver import DEFAULT_TEMPLATE
    from drlsched.autoscale.replay import karpenter_pool
    from drlsched.errors import UserError

    assert karpenter_pool(api, NodeTemplate("c96-m512", 96000, 524288)) == "pool-cpu"
    with pytest.raises(UserError, match="no NodePool offers instance type c8-m32"):
        karpenter_pool(api, DEFAULT_TEMPLATE)
