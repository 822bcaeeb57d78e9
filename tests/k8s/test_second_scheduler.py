"""drlsched as a second scheduler on the real control plane: 1,000 pods on 200 fake nodes, none lost or bound
twice; unschedulable pods get FailedScheduling; an apiserver restart mid-run loses nothing."""

from __future__ import annotations

import json
import os
import ssl
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import kubernetes
import pytest

from drlsched.k8s import quantity
from drlsched.k8s.client import api_client
from drlsched.k8s.objects import pod_manifest
from drlsched.k8s.second_scheduler import SecondScheduler
from drlsched.policies import make_policy
from drlsched.testbed import controlplane, processes
from drlsched.testbed.pki import Pki
from drlsched.testbed.pods import create_pods

from .conftest import NODES, events_json, pods_json, wait_for

NAME = "drl-scheduler"


@pytest.fixture
def scheduler(testbed: controlplane.Testbed) -> Iterator[SecondScheduler]:
    running = SecondScheduler(api_client(testbed.kubeconfig), make_policy("k8s-default"), NAME).start()
    assert running.informer.wait_synced(60)
    yield running
    running.stop()


def _pods(count: int, prefix: str = "p", **kwargs: object) -> list[dict]:
    manifests = [pod_manifest(f"{prefix}{i:04d}", cpu="500m", memory="1Gi", duration=None, **kwargs)
                 for i in range(count)]
    for m in manifests:
        m["spec"]["schedulerName"] = NAME
    return manifests


def _all_bound(core: kubernetes.client.CoreV1Api, namespace: str, count: int) -> list[dict]:
    pods = pods_json(core, namespace)
    return pods if len(pods) == count and all(p["spec"].get("nodeName") for p in pods) else []


def _check_once_each(core: kubernetes.client.CoreV1Api, namespace: str, pods: list[dict]) -> None:
    """One Scheduled event per pod (none bound twice) and no node over-committed."""
    events = Counter(e["involvedObject"]["name"] for e in events_json(core, namespace) if e["reason"] == "Scheduled")
    assert set(events) == {p["metadata"]["name"] for p in pods}
    assert max(events.values()) == 1
    for p in pods:
        assert next(c for c in p["status"].get("conditions", []) if c["type"] == "PodScheduled")["status"] == "True"
    nodes = {n["metadata"]["name"]: n for n in _nodes(core)}
    cpu = Counter()
    for p in pods:
        cpu[p["spec"]["nodeName"]] += 500
    for node, used in cpu.items():
        assert used <= quantity.milli_cpu(nodes[node]["status"]["allocatable"]["cpu"])


def _nodes(core: kubernetes.client.CoreV1Api) -> list[dict]:
    return list(json.loads(core.list_node(_preload_content=False).data)["items"])


def test_binds_1000_pods_on_200_nodes_none_lost_or_double_bound(
    scheduler: SecondScheduler, api: kubernetes.client.ApiClient, core: kubernetes.client.CoreV1Api, namespace: str
) -> None:
    assert len(_nodes(core)) >= NODES
    create_pods(api, namespace, _pods(1000))
    pods = wait_for(lambda: _all_bound(core, namespace, 1000), 180, "1,000 pods bound", interval_s=1.0)
    wait_for(lambda: sum(e["reason"] == "Scheduled" for e in events_json(core, namespace)) >= 1000, 30,
             "1,000 Scheduled events")
    _check_once_each(core, namespace, pods)
    assert scheduler.outcomes.get(outcome="bound") == 1000
    assert scheduler.outcomes.get(outcome="conflict") == 0 and scheduler.outcomes.get(outcome="bind_error") == 0
    assert len({p["spec"]["nodeName"] for p in pods}) > 100  # k8s-default spreads (LeastAllocated)


def test_an_unschedulable_pod_gets_failed_scheduling_then_binds_when_room_appears(
    scheduler: SecondScheduler, core: kubernetes.client.CoreV1Api, namespace: str
) -> None:
    huge = _pods(1, prefix="huge", gpus=64)[0]
    core.create_namespaced_pod(namespace, huge)
    event = wait_for(lambda: [e for e in events_json(core, namespace) if e["reason"] == "FailedScheduling"], 30,
                     "a FailedScheduling event")[0]
    assert event["type"] == "Warning" and "Insufficient nvidia.com/gpu" in event["message"]
    pod = wait_for(lambda: [c for c in (core.read_namespaced_pod("huge0000", namespace).status.conditions or [])
                            if c.type == "PodScheduled"], 30, "PodScheduled=False")[0]
    assert pod.status == "False" and pod.reason == "Unschedulable"
    assert scheduler.pending() == 1  # requeued with backoff, not dropped


def test_node_selectors_are_honoured(scheduler: SecondScheduler, core: kubernetes.client.CoreV1Api,
                                     namespace: str) -> None:
    pinned, nowhere = _pods(2, prefix="sel")
    pinned["spec"]["nodeSelector"] = {"kubernetes.io/hostname": "kwok-cpu-00150"}
    nowhere["spec"]["nodeSelector"] = {"drlsched.io/rack": "no-such-rack"}
    core.create_namespaced_pod(namespace, pinned)
    core.create_namespaced_pod(namespace, nowhere)
    wait_for(lambda: core.read_namespaced_pod("sel0000", namespace).spec.node_name == "kwok-cpu-00150", 30,
             "the pinned pod on its node")
    event = wait_for(lambda: [e for e in events_json(core, namespace) if e["reason"] == "FailedScheduling"], 30,
                     "FailedScheduling for the unmatched selector")[0]
    assert event["involvedObject"]["name"] == "sel0001" and "didn't match Pod's node selector" in event["message"]


def _restart_apiserver(testbed: controlplane.Testbed) -> None:
    """Stops kube-apiserver and starts it again with the same command line (its port and etcd data stay)."""
    proc = testbed.processes["kube-apiserver"]
    argv = Path(f"/proc/{proc['pid']}/cmdline").read_bytes().rstrip(b"\0").split(b"\0")
    processes.stop(proc["pid"], proc["binary"])
    pid = processes.start([os.fsdecode(a) for a in argv], Path(proc["log"]))
    testbed.processes["kube-apiserver"] = {**proc, "pid": pid}
    testbed.save()
    pki = Pki(testbed.state_dir / "pki")
    ca = ssl.create_default_context(cafile=str(pki.ca_cert))
    admin_token = pki.tokens()["admin"]
    processes.wait_until(lambda: processes.http_ok(f"{testbed.apiserver_url}/readyz", ca, admin_token), 120,
                         lambda: processes.runs(pid, proc["binary"]), "kube-apiserver", Path(proc["log"]))


def test_an_apiserver_restart_mid_run_loses_nothing(
    testbed: controlplane.Testbed, scheduler: SecondScheduler, api: kubernetes.client.ApiClient,
    core: kubernetes.client.CoreV1Api, namespace: str,
) -> None:
    create_pods(api, namespace, _pods(300, prefix="a"))
    wait_for(lambda: sum(bool(p["spec"].get("nodeName")) for p in pods_json(core, namespace)) >= 100, 60,
             "a third bound")
    _restart_apiserver(testbed)
    relists = scheduler.informer.relists
    create_pods(api, namespace, _pods(200, prefix="b"))
    pods = wait_for(lambda: _all_bound(core, namespace, 500), 180, "all 500 pods bound", interval_s=1.0)
    assert scheduler.informer.relists > relists or scheduler.informer.relists >= 4  # it re-listed after the gap
    wait_for(lambda: sum(e["reason"] == "Scheduled" for e in events_json(core, namespace)) >= 500, 60,
             "500 Scheduled events")
    _check_once_each(core, namespace, pods)
