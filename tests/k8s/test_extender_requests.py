"""Requests that once got a 500 or a silently wrong answer: oversize JSON integers, a node listed twice, a
fractional GPU request; and the cache taking assumptions only from pods the watch knows or trusted callers."""

from __future__ import annotations

import json
from typing import Any

import pytest

from drlsched.k8s.extender import Extender
from drlsched.k8s.objects import ObjectError, pod_manifest, pod_spec
from drlsched.k8s.state import ClusterState
from drlsched.policies import make_policy
from drlsched.testbed.nodes import node_manifests

NODES = node_manifests(4, 2, "openb")
NAMES = [n["metadata"]["name"] for n in NODES]


def _pod(name: str = "p", uid: str = "u-1", gpus: int = 0) -> dict[str, Any]:
    pod = pod_manifest(name, cpu="1", memory="1Gi", gpus=gpus)
    pod["metadata"].update(namespace="default", uid=uid)
    return pod


def _extender() -> Extender:
    return Extender(make_policy("first-fit"), "first-fit")


def test_an_integer_longer_than_python_converts_is_a_400() -> None:
    body = b'{"Pod": {"metadata": {"name": "p"}, "spec": {"priority": ' + b"9" * 5000 + b'}}, "NodeNames": []}'
    status, payload = _extender().handle("filter", body)
    assert status == 400 and "not JSON" in payload["Error"] and "4300" in payload["Error"]


@pytest.mark.parametrize("verb", ["filter", "prioritize"])
def test_a_node_listed_twice_is_a_400(verb: str) -> None:
    extender = _extender()
    body = json.dumps({"Pod": _pod(), "Nodes": {"items": [NODES[0], NODES[1], NODES[0]]}}).encode()
    status, payload = extender.handle(verb, body)
    assert status == 400 and f"Nodes.items lists node {NAMES[0]!r} more than once" == payload["Error"]
    state = ClusterState()
    for node in NODES:
        state.set_node(node)
    cached = Extender(make_policy("first-fit"), "first-fit", state=state)
    body = json.dumps({"Pod": _pod(), "NodeNames": [NAMES[2], NAMES[3], NAMES[2]]}).encode()
    status, payload = cached.handle(verb, body)
    assert status == 400 and f"NodeNames lists node {NAMES[2]!r} more than once" == payload["Error"]
    body = json.dumps({"Pod": _pod(), "NodeNames": NAMES}).encode()
    assert cached.handle(verb, body)[0] == 200


@pytest.mark.parametrize("amount", ["0.5", "500m", "1.5", 0.25])
def test_a_fractional_gpu_request_is_refused(amount: object) -> None:
    pod = _pod()
    pod["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": amount}}
    with pytest.raises(ObjectError, match="is not a whole number of GPUs"):
        pod_spec(pod)
    status, payload = _extender().handle("filter", json.dumps({"Pod": pod, "Nodes": {"items": NODES}}).encode())
    assert status == 400 and "is not a whole number of GPUs" in payload["Error"]
    pod["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": "2"}}
    assert pod_spec(pod).gpus == 2


def _twin_state() -> tuple[ClusterState, list[str]]:
    state = ClusterState()
    twins = node_manifests(2, 2, "uniform")  # two identical empty GPU nodes: LeastAllocated spreads pods
    for node in twins:
        state.set_node(node)
    return state, [n["metadata"]["name"] for n in twins]


def _prioritize(extender: Extender, names: list[str], uid: str, trusted: bool = False) -> str:
    pod = pod_manifest(uid, cpu="32", memory="1Gi", gpus=2)
    pod["metadata"].update(namespace="default", uid=uid)
    status, payload = extender.handle("prioritize", json.dumps({"Pod": pod, "NodeNames": names}).encode(),
                                      trusted=trusted)
    assert status == 200
    return next(hp["Host"] for hp in json.loads(payload) if hp["Score"] == 10)


def test_made_up_pods_from_an_unauthenticated_caller_add_no_assumptions() -> None:
    state, names = _twin_state()
    extender = Extender(make_policy("k8s-default"), "k8s-default", state=state)
    for i in range(40):
        _prioritize(extender, names, f"phantom-{i}")
    assert state.counts() == (2, 0)  # nothing held
    real = pod_manifest("real", cpu="32", memory="1Gi", gpus=2)
    real["metadata"].update(namespace="default", uid="real")
    state.set_pod(real)  # pending, as the watch shows it
    assert state.waiting("real")
    first = _prioritize(extender, names, "real")
    assert state.pod_node("real") == first and state.counts() == (2, 1)
    real["spec"]["nodeName"] = first
    state.set_pod(real)  # bound: no longer waiting, held as confirmed
    assert not state.waiting("real") and state.pod_node("real") == first
    state.pod_deleted("real")
    assert state.counts() == (2, 0)


def test_an_authenticated_caller_may_add_assumptions_which_expire(monkeypatch: pytest.MonkeyPatch) -> None:
    state, names = _twin_state()
    extender = Extender(make_policy("k8s-default"), "k8s-default", state=state)
    first = _prioritize(extender, names, "a", trusted=True)
    assert _prioritize(extender, names, "b", trusted=True) != first
    monkeypatch.setattr("drlsched.k8s.state.time.monotonic", lambda: 1e12)  # past the TTL, unconfirmed
    state.expire_assumed()
    assert state.counts() == (2, 0)


def test_more_nodes_than_the_limit_is_a_400() -> None:
    extender = Extender(make_policy("first-fit"), "first-fit", max_nodes=3)
    status, payload = extender.handle("filter", json.dumps({"Pod": _pod(), "Nodes": {"items": NODES}}).encode())
    assert status == 400 and payload["Error"] == "Nodes.items lists 4 nodes, more than the limit of 3"
    body = json.dumps({"Pod": _pod(), "NodeNames": [f"n{i}" for i in range(4)]}).encode()
    assert "NodeNames lists 4 nodes" in extender.handle("prioritize", body)[1]["Error"]


def test_unchanged_node_objects_reuse_the_cluster_built_for_them(monkeypatch: pytest.MonkeyPatch) -> None:
    converted: list[str] = []
    real = ClusterState.set_node

    def counting(self: ClusterState, node: dict[str, Any]) -> None:
        converted.append(node["metadata"]["name"])
        real(self, node)

    monkeypatch.setattr(ClusterState, "set_node", counting)
    nodes = [dict(n, metadata={**n["metadata"], "resourceVersion": "7"}) for n in NODES]
    extender = _extender()

    def prioritize(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        status, payload = extender.handle("prioritize", json.dumps({"Pod": _pod(), "Nodes": {"items": items}}).encode())
        assert status == 200
        return json.loads(payload)

    first = prioritize(nodes)
    assert prioritize(nodes) == first and len(converted) == len(NODES)  # the second request converted nothing
    changed = [*nodes[:-1], dict(nodes[-1], metadata={**nodes[-1]["metadata"], "resourceVersion": "8"})]
    prioritize(changed)
    assert len(converted) == 2 * len(NODES)  # a new version: rebuilt
    prioritize(NODES)
    prioritize(NODES)  # no resourceVersion (hand-made objects): never reused
    assert len(converted) == 4 * len(NODES)
