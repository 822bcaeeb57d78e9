"""Fake node manifests: counts, shapes dealt in the profile's proportions, labels."""

from __future__ import annotations

from collections import Counter

import pytest

from drlsched.k8s.objects import GPU_MODEL_LABEL, GPU_RESOURCE, RACK_LABEL
from drlsched.testbed.nodes import PROFILES, node_manifests


@pytest.mark.parametrize("profile", sorted(PROFILES))
def test_first_gpu_nodes_have_gpus_and_a_model_label(profile: str) -> None:
    nodes = node_manifests(50, 20, profile)
    assert len(nodes) == 50
    assert len({n["metadata"]["name"] for n in nodes}) == 50
    for node in nodes[:20]:
        assert int(node["status"]["allocatable"][GPU_RESOURCE]) > 0
        assert node["metadata"]["labels"][GPU_MODEL_LABEL]
    for node in nodes[20:]:
        assert GPU_RESOURCE not in node["status"]["allocatable"]
        assert GPU_MODEL_LABEL not in node["metadata"]["labels"]


def test_shapes_follow_the_profile_weights() -> None:
    gpu_shapes, _ = PROFILES["openb"]
    total = sum(s.weight for s in gpu_shapes)
    nodes = node_manifests(total, total, "openb")
    models = Counter(n["metadata"]["labels"][GPU_MODEL_LABEL] for n in nodes)
    assert models == Counter({s.model: s.weight for s in gpu_shapes})


def test_racks_hold_twenty_nodes_each() -> None:
    racks = Counter(n["metadata"]["labels"][RACK_LABEL] for n in node_manifests(45, 5, "uniform"))
    assert racks == {"rack-000": 20, "rack-001": 20, "rack-002": 5}


def test_scenario_profile_is_the_scenarios_own_cluster() -> None:
    from drlsched.k8s.quantity import mebibytes, milli_cpu
    from drlsched.scenarios import make_scenario

    manifests = node_manifests(12, 0, "scenario:ml-gpu")
    specs = make_scenario("ml-gpu", nodes=12).nodes
    assert [m["metadata"]["name"] for m in manifests] == [s.name for s in specs]
    for m, spec in zip(manifests, specs, strict=True):
        alloc = m["status"]["allocatable"]
        assert milli_cpu(alloc["cpu"]) == spec.cpu_m and mebibytes(alloc["memory"]) == spec.mem_mib
        assert int(alloc.get("nvidia.com/gpu", "0")) == spec.gpus
        assert m["metadata"]["labels"].get("drlsched.io/gpu-model", "") == spec.gpu_model


def test_exact_nodes_read_back_as_the_same_specs() -> None:
    # A trace's cluster (odd sizes, a P100 with one GPU, its own names and racks), as a replay needs it.
    from drlsched.k8s.objects import node_spec
    from drlsched.testbed.nodes import exact_node_manifests
    from drlsched.workload import NodeSpec

    specs = [NodeSpec("openb-node-0007", 8000, 61440, 1, "P100", rack="r3", max_pods=64),
             NodeSpec("openb-node-0100", 32000, 262144, 0, "", rack="r9")]
    assert [node_spec(m) for m in exact_node_manifests(specs)] == specs
