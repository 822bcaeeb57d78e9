"""Shadow and A/B on the testbed's second scheduler, the stable arm hash, and ab-report's rollback rule."""

from __future__ import annotations

import json
import time
import uuid
from collections import Counter
from dataclasses import asdict
from pathlib import Path
from typing import Any

import kubernetes

from drlsched.k8s import prom
from drlsched.k8s.ab_report import DEADLINE_ANNOTATION, apply_decision, compare, render
from drlsched.k8s.client import api_client
from drlsched.k8s.objects import pod_manifest
from drlsched.k8s.placement import Placer
from drlsched.k8s.rollout import ARM_ANNOTATION, POLICY_ANNOTATION, Rollout, in_candidate_arm
from drlsched.k8s.second_scheduler import SecondScheduler
from drlsched.policies import make_policy
from drlsched.testbed import controlplane
from drlsched.testbed.pods import create_pods
from drlsched.workload import PodSpec

from .conftest import pods_json, wait_for


def test_the_arm_hash_is_stable_and_splits_by_the_fraction() -> None:
    uids = [str(uuid.UUID(int=i)) for i in range(10_000)]
    chosen = [u for u in uids if in_candidate_arm(u, 0.1)]
    assert 850 <= len(chosen) <= 1150
    assert chosen == [u for u in uids if in_candidate_arm(u, 0.1)]  # no per-process salt
    assert set(chosen) <= {u for u in uids if in_candidate_arm(u, 0.5)}  # a larger fraction keeps its pods
    assert not any(in_candidate_arm(u, 0.0) for u in uids) and all(in_candidate_arm(u, 1.0) for u in uids)


def _run(testbed: controlplane.Testbed, api: kubernetes.client.ApiClient, core: kubernetes.client.CoreV1Api,
         namespace: str, rollout: Any, count: int) -> tuple[SecondScheduler, list[dict[str, Any]]]:
    name = f"drl-{uuid.uuid4().hex[:6]}"
    scheduler = SecondScheduler(api_client(testbed.kubeconfig), make_policy("first-fit"), name,
                                rollout=rollout).start()
    try:
        manifests = [pod_manifest(f"p{i:03d}", cpu="100m", memory="128Mi", duration=None) for i in range(count)]
        for m in manifests:
            m["spec"]["schedulerName"] = name
        create_pods(api, namespace, manifests)
        pods = wait_for(lambda: (ps := pods_json(core, namespace)) and len(ps) == count
                        and all(p["spec"].get("nodeName") for p in ps) and ps, 120, "pods bound")
    finally:
        scheduler.stop()
    return scheduler, pods


def test_a_shadow_of_the_live_policy_agrees_on_every_pod(
    testbed: controlplane.Testbed, api: kubernetes.client.ApiClient, core: kubernetes.client.CoreV1Api,
    namespace: str,
) -> None:
    def build(live: Placer, registry: prom.Registry) -> Rollout:
        return Rollout(live, "first-fit", registry, shadow=(Placer(make_policy("first-fit")), "first-fit"))

    scheduler, pods = _run(testbed, api, core, namespace, build, 100)
    assert scheduler.rollout is not None and scheduler.rollout.agreement() == 1.0
    assert scheduler.rollout.shadow_decisions.get(agree="true") == 100
    assert "drlsched_shadow_decisions_total" in scheduler.registry.exposition()
    assert all(p["metadata"]["annotations"][ARM_ANNOTATION] == "control" for p in pods)


def test_ab_places_the_hashed_fraction_with_the_candidate_and_annotates_the_arm(
    testbed: controlplane.Testbed, api: kubernetes.client.ApiClient, core: kubernetes.client.CoreV1Api,
    namespace: str,
) -> None:
    def build(live: Placer, registry: prom.Registry) -> Rollout:
        return Rollout(live, "first-fit", registry, candidate=(Placer(make_policy("random")), "random"),
                       fraction=0.3)

    _, pods = _run(testbed, api, core, namespace, build, 200)
    arms = Counter(p["metadata"]["annotations"][ARM_ANNOTATION] for p in pods)
    assert arms["candidate"] == sum(in_candidate_arm(p["metadata"]["uid"], 0.3) for p in pods)
    assert 30 <= arms["candidate"] <= 90
    for p in pods:
        notes = p["metadata"]["annotations"]
        assert notes[POLICY_ANNOTATION] == ("random" if notes[ARM_ANNOTATION] == "candidate" else "first-fit")
    # First-fit packs its arm onto few nodes; random scatters the candidate's.
    nodes = {arm: {p["spec"]["nodeName"] for p in pods if p["metadata"]["annotations"][ARM_ANNOTATION] == arm}
             for arm in arms}
    assert len(nodes["control"]) < len(nodes["candidate"])
    report = compare({"pods": pods, "all_pods": pods, "nodes": _nodes(core)}, sla_seconds=60)
    assert report.arms["control"].pods + report.arms["candidate"].pods == 200
    assert report.decision == "keep"
    assert "decision: keep" in render(report)


def _nodes(core: kubernetes.client.CoreV1Api) -> list[dict[str, Any]]:
    return list(json.loads(core.list_node(_preload_content=False).data)["items"])


def _pod(arm: str, jct_s: float, deadline_s: float, i: int) -> dict[str, Any]:
    created = "2026-11-30T12:00:00Z"
    finished = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(1796040000 + jct_s))
    return {
        "metadata": {
            "name": f"{arm}-{i}", "creationTimestamp": created,
            "annotations": {ARM_ANNOTATION: arm, POLICY_ANNOTATION: arm, DEADLINE_ANNOTATION: str(deadline_s)},
        },
        "spec": {"nodeName": "n1", "containers": [{"resources": {"requests": {"cpu": "1"}}}]},
        "status": {"phase": "Succeeded",
                   "conditions": [{"type": "PodScheduled", "status": "True", "lastTransitionTime": created}],
                   "containerStatuses": [{"state": {"terminated": {"finishedAt": finished}}}]},
    }


def test_a_worse_candidate_is_rolled_back_and_the_scheduler_follows(tmp_path: Path) -> None:
    control = [_pod("control", 100 + i % 7, 200, i) for i in range(60)]
    candidate = [_pod("candidate", 180 + i % 50, 200, i) for i in range(60)]  # slower; 29 of 60 past 200 s
    nodes = [{"metadata": {"name": "n1"}, "status": {"allocatable": {"cpu": "200"}}}]
    report = compare({"pods": control + candidate, "all_pods": [], "nodes": nodes}, sla_seconds=60)
    assert report.decision == "rollback" and "SLA-violation rate" in report.reason and "JCT" in report.reason
    assert report.arms["candidate"].sla_violation.value == 29 / 60
    state = tmp_path / "rollout.json"
    assert apply_decision(report, state, promote=False) == "rollback"
    assert json.loads(state.read_text())["decision"] == "rollback"

    registry = prom.Registry()
    rollout = Rollout(Placer(make_policy("first-fit")), "first-fit", registry,
                      candidate=(Placer(make_policy("random")), "random"), fraction=1.0, state_file=state)
    pod = PodSpec(uid="u", job_id="j", arrival_s=0, cpu_m=100, mem_mib=100)
    assert rollout.route(pod, "ns").arm == "control"  # rolled back: the candidate places nothing
    assert rollout.rollout_state.get(decision="rollback") == 1


def test_too_few_pods_never_trigger_a_decision() -> None:
    report = compare({"pods": [_pod("candidate", 500, 10, 0)], "all_pods": [], "nodes": []}, sla_seconds=60)
    assert report.decision == "keep" and "too few pods" in report.reason


def test_an_arm_without_pods_has_no_sla_rate_rather_than_zero() -> None:
    report = compare({"pods": [_pod("control", 100, 200, i) for i in range(3)], "all_pods": [], "nodes": []},
                     sla_seconds=60)
    assert report.arms["candidate"].sla_violation is None and report.sla_violation_diff is None
    assert report.arms["control"].sla_violation is not None
    text = render(report)
    assert "candidate" in text and "n/a" in text.splitlines()[2]
    assert json.loads(json.dumps(asdict(report)))["arms"]["candidate"]["sla_violation"] is None
