"""kube-scheduler + drlsched extender on the real control plane: placements follow the policy, and pods are
still scheduled while the extender is down (ignorable)."""

from __future__ import annotations

import json
import uuid

import kubernetes

from drlsched.k8s.objects import pod_manifest
from drlsched.testbed import controlplane

from .conftest import RunningExtender, add_gpu_nodes, events_json, pods_json, wait_for


def _gpu_pod(name: str, group: str) -> dict:
    pod = pod_manifest(name, cpu="1", memory="1Gi", gpus=1, duration=None)
    pod["spec"]["nodeSelector"] = {"drlsched.io/test": group}
    return pod


def test_kube_scheduler_places_gpu_pods_where_the_policy_says(
    kube_scheduler: controlplane.Testbed, extender: RunningExtender, core: kubernetes.client.CoreV1Api, namespace: str
) -> None:
    # kube-scheduler alone (LeastAllocated) would spread these over the three empty nodes; first-fit packs
    # the lowest-named node's 8 GPUs first. One pod at a time, so each decision sees the previous binding.
    group = f"ext-{uuid.uuid4().hex[:6]}"
    nodes = add_gpu_nodes(core, 3, group)
    wait_for(lambda: set(nodes) <= set(extender.state.node_names()), 30, "the extender's cache to see the nodes")
    placed = []
    for i in range(12):
        core.create_namespaced_pod(namespace, _gpu_pod(f"p{i:02d}", group))
        pod = wait_for(lambda i=i: core.read_namespaced_pod(f"p{i:02d}", namespace).spec.node_name, 30,
                       f"pod p{i:02d} bound")
        uid = core.read_namespaced_pod(f"p{i:02d}", namespace).metadata.uid
        wait_for(lambda uid=uid: extender.state.pod_node(uid), 30, "the extender's cache to see the binding")
        placed.append(pod)
    assert placed == [nodes[0]] * 8 + [nodes[1]] * 4
    assert extender.extender.decisions.get(outcome="placed") >= 12
    scheduled = [e for e in events_json(core, namespace) if e["reason"] == "Scheduled"]
    assert len(scheduled) == 12


def test_pods_are_scheduled_while_the_extender_is_down(
    kube_scheduler: controlplane.Testbed, extender: RunningExtender, core: kubernetes.client.CoreV1Api, namespace: str
) -> None:
    group = f"kill-{uuid.uuid4().hex[:6]}"
    add_gpu_nodes(core, 2, group)
    for i in range(5):
        core.create_namespaced_pod(namespace, _gpu_pod(f"before{i}", group))
    wait_for(lambda: all(p["spec"].get("nodeName") for p in pods_json(core, namespace)), 60, "pods bound")
    before = extender.extender.requests.get(verb="prioritize", code="200")
    extender.kill()
    try:
        for i in range(10):
            core.create_namespaced_pod(namespace, _gpu_pod(f"after{i}", group))
        pods = wait_for(
            lambda: (ps := pods_json(core, namespace)) and all(p["spec"].get("nodeName") for p in ps) and ps,
            60, "every pod bound with the extender down",
        )
        assert len(pods) == 15
        assert extender.extender.requests.get(verb="prioritize", code="200") == before  # nobody asked us
    finally:
        extender.start()


def test_bind_verb_binds_through_the_api_and_refuses_a_second_binding(
    extender: RunningExtender, core: kubernetes.client.CoreV1Api, namespace: str
) -> None:
    pod = pod_manifest("tobind", duration=None)
    pod["spec"]["schedulerName"] = "nobody"  # no scheduler touches it
    uid = core.create_namespaced_pod(namespace, pod).metadata.uid
    args = {"PodName": "tobind", "PodNamespace": namespace, "PodUID": uid, "Node": "kwok-cpu-00100"}
    status, result = extender.extender.handle("bind", json.dumps(args).encode())
    assert (status, result) == (200, {"Error": ""})
    assert core.read_namespaced_pod("tobind", namespace).spec.node_name == "kwok-cpu-00100"
    status, result = extender.extender.handle("bind", json.dumps({**args, "Node": "kwok-cpu-00101"}).encode())
    assert status == 200 and "409" in result["Error"]  # already bound: an ExtenderBindingResult error
    assert core.read_namespaced_pod("tobind", namespace).spec.node_name == "kwok-cpu-00100"
