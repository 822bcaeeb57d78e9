"""The watch cache tracks each job's pods per node and where finished parent tasks ran, so a policy in Kubernetes
sees the same `job_nodes` / `data_nodes` it sees in the simulator (no control plane needed here)."""

from __future__ import annotations

from typing import Any

import numpy as np

from drlsched.k8s.objects import JOB_LABEL, PARENTS_ANNOTATION, TASK_ANNOTATION, job_label_value, pod_manifest, pod_spec
from drlsched.k8s.placement import Placer
from drlsched.k8s.state import ClusterState
from drlsched.policies import make_policy
from drlsched.testbed.nodes import node_manifests


def _pod(name: str, job: str, task: str, parents: str = "", node: str | None = None,
         phase: str = "Running") -> dict[str, Any]:
    annotations = {TASK_ANNOTATION: task, **({PARENTS_ANNOTATION: parents} if parents else {})}
    pod = pod_manifest(name, "1", "1Gi", 0, None, annotations, {JOB_LABEL: job})
    pod["metadata"]["uid"] = f"uid-{name}"
    if node:
        pod["spec"]["nodeName"] = node
    pod["status"] = {"phase": phase}
    return pod


def _state() -> tuple[ClusterState, list[str]]:
    state = ClusterState()
    nodes = node_manifests(4, 0, "uniform")
    for n in nodes:
        state.set_node(n)
    return state, [n["metadata"]["name"] for n in nodes]


def test_pod_spec_reads_job_task_and_parents() -> None:
    spec = pod_spec(_pod("r-0", "q7", "reduce", parents="map, join"))
    assert (spec.job_id, spec.task, spec.parents) == ("q7", "reduce", ("map", "join"))


def test_job_nodes_follow_binds_and_finishes_and_data_nodes_remember_finished_parents() -> None:
    state, names = _state()
    state.set_pod(_pod("m-0", "q7", "map", node=names[1]))
    state.set_pod(_pod("m-1", "q7", "map", node=names[1]))
    state.set_pod(_pod("m-2", "q7", "map", node=names[2]))
    state.set_pod(_pod("x-0", "other", "map", node=names[3]))
    state.cluster()
    row = state.index
    assert state.job_nodes("q7") == {row[names[1]]: 2, row[names[2]]: 1}
    for name, node in (("m-0", names[1]), ("m-1", names[1]), ("m-2", names[2])):
        state.set_pod(_pod(name, "q7", "map", node=node, phase="Succeeded"))
    assert state.job_nodes("q7") == {}
    assert state.data_nodes("q7", ("map",)) == {row[names[1]]: 2, row[names[2]]: 1}
    assert state.data_nodes("q7", ("other-task",)) == {}
    assert state.data_nodes("other", ("map",)) == {}


def test_data_local_places_a_child_where_its_parents_ran_through_the_placer() -> None:
    state, names = _state()
    for i in range(3):
        state.set_pod(_pod(f"m-{i}", "q7", "map", node=names[2], phase="Succeeded"))
    child = pod_spec(_pod("r-0", "q7", "reduce", parents="map"))
    for seed in range(5):  # the four nodes are equally empty: without locality the pick is a random tie-break
        assert Placer(make_policy("data-local"), seed=seed).choose(state, child, names).node == names[2]


def test_job_label_values_are_valid() -> None:
    assert job_label_value("q000012") == "q000012"
    odd = job_label_value("j_1/with spaces and a very long id " + "x" * 80)
    assert odd.startswith("job-") and len(odd) <= 63
    assert np.all([c.isalnum() or c == "-" for c in odd])


def test_replayed_pods_keep_job_task_parents_and_gpu_model_sets() -> None:
    from drlsched.replay import PodRecord, _manifest
    from drlsched.workload import PodSpec

    spec = PodSpec("u1", "job/with odd id", 0.0, 2000, 4096, gpus=1, gpu_models=("V100M16", "V100M32"),
                   task="reduce", parents=("map",), work_s=10.0)
    manifest = _manifest(PodRecord(spec, "p-1"), 10.0, "drl-scheduler", "run1")
    manifest["metadata"]["uid"] = "uid-p-1"
    back = pod_spec(manifest)
    assert back.gpu_models == ("V100M16", "V100M32") and back.gpus == 1
    assert (back.task, back.parents) == ("reduce", ("map",))
    assert back.job_id == job_label_value("job/with odd id")
    single = pod_spec(_manifest(PodRecord(PodSpec("u2", "j", 0.0, 1000, 1024, gpus=1, gpu_models=("T4",)), "p-2"),
                                10.0, "default-scheduler", "run1"))
    assert single.gpu_models == ("T4",)
    plain = pod_spec(_manifest(PodRecord(PodSpec("u3", "j", 0.0, 1000, 1024), "p-3"), 10.0, "default-scheduler",
                               "run1"))
    assert plain.gpu_models == ()
