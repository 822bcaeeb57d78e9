"""kube-scheduler formulas against the fixture numbers of kubernetes-scheduling.md §7 (Go integer semantics)."""

import numpy as np
import pytest

from drlsched.cluster import Cluster
from drlsched.kube_scoring import (
    balanced_allocation,
    balanced_allocation_v136,
    default_normalize,
    least_requested,
    most_requested,
    num_feasible_nodes_to_find,
    target_load_packing,
    weighted_node_score,
)
from drlsched.policies.base import Option, PodContext
from drlsched.policies.k8s_default import K8sDefault
from drlsched.workload import NodeSpec, PodSpec

GI = 1024**3


def arr(*v):
    return np.array(v, dtype=np.int64)


def test_least_allocated_fixture():
    # Node 4000m / 16Gi, existing NonZero 1000m / 4Gi, pod 1000m / 2Gi -> requested 2000m / 6Gi.
    cpu = least_requested(arr(2000), arr(4000))
    mem = least_requested(arr(6 * GI), arr(16 * GI))
    assert (cpu[0], mem[0]) == (50, 62)
    assert weighted_node_score([cpu, mem], [arr(4000), arr(16 * GI)], [1, 1])[0] == 56


def test_most_allocated_fixture():
    cpu = most_requested(arr(2000), arr(4000))
    mem = most_requested(arr(6 * GI), arr(16 * GI))
    assert weighted_node_score([cpu, mem], [arr(4000), arr(16 * GI)], [1, 1])[0] == 43


def test_balanced_allocation_fixture():
    assert balanced_allocation(arr(2000), arr(4000), arr(6 * GI), arr(16 * GI))[0] == 93


def test_balanced_allocation_v136_scores_the_change_in_balance():
    # Same node and pod as above: balance 93 with the pod, 100 without -> 50 + (50 + 93 - 100) // 2 = 71.
    assert balanced_allocation_v136(arr(2000), arr(1000), arr(4000), arr(6 * GI), arr(4 * GI), arr(16 * GI))[0] == 71
    # Unchanged balance -> 75; perfectly balanced -> perfectly imbalanced -> 50; the reverse -> 100 (PR #135573).
    assert balanced_allocation_v136(arr(2), arr(1), arr(4), arr(2), arr(1), arr(4))[0] == 75
    assert balanced_allocation_v136(arr(4), arr(0), arr(4), arr(0), arr(0), arr(4))[0] == 50
    assert balanced_allocation_v136(arr(4), arr(4), arr(4), arr(4), arr(0), arr(4))[0] == 100


def test_single_resource_and_edge_cases():
    assert least_requested(arr(1000), arr(4000))[0] == 75
    assert least_requested(arr(5000), arr(4000))[0] == 0  # over capacity
    assert least_requested(arr(1), arr(0))[0] == 0  # no capacity
    assert most_requested(arr(5000), arr(4000))[0] == 100  # clamped
    # A resource with allocatable 0 contributes neither score nor weight.
    assert weighted_node_score([arr(80), arr(0)], [arr(10), arr(0)], [1, 5])[0] == 80


@pytest.mark.parametrize(("n", "expected"), [(50, 50), (100, 100), (500, 230), (1000, 420), (5000, 500),
                                             (6000, 300), (15000, 750)])
def test_num_feasible_nodes_to_find(n, expected):
    assert num_feasible_nodes_to_find(n) == expected


def test_default_normalize_fixtures():
    assert default_normalize(arr(0, 1, 2), reverse=True).tolist() == [100, 50, 0]
    assert default_normalize(arr(0, 3, 6), reverse=False).tolist() == [0, 50, 100]
    assert default_normalize(arr(0, 0), reverse=True).tolist() == [100, 100]


def test_target_load_packing_fixture():
    assert target_load_packing(np.array([25.0, 50.0, 75.0, 101.0]), 50).tolist() == [75, 100, 25, 0]


@pytest.mark.parametrize("minor", [32, 36])
def test_k8s_default_hot_path_equals_reference_formulas(minor):
    rng = np.random.default_rng(7)
    nodes = [NodeSpec(f"n{i}", int(rng.integers(1000, 64000)), int(rng.integers(1024, 262144))) for i in range(300)]
    cluster = Cluster(nodes)
    cluster.nz_cpu[:] = rng.integers(0, cluster.cap_cpu + 2000)
    cluster.nz_mem[:] = rng.integers(0, cluster.cap_mem + 2000)
    cluster.req_cpu[:] = np.minimum(cluster.nz_cpu, cluster.cap_cpu)
    cluster.req_mem[:] = np.minimum(cluster.nz_mem, cluster.cap_mem)
    policy = K8sDefault(percentage_of_nodes_to_score=100, minor=minor)
    policy.reset(cluster, rng)
    for i in range(60):
        best_effort = i % 10 == 0
        pod = PodSpec("p", "j", 0.0, 0 if best_effort else int(rng.integers(0, 4000)),
                      0 if best_effort else int(rng.integers(0, 8192)))
        r = cluster.request(pod)
        idx = np.arange(cluster.size)
        got = policy.score(PodContext(pod, [], cluster, 0.0), Option(0, r, np.ones(cluster.size, bool)), idx)
        least = weighted_node_score(
            [least_requested(cluster.nz_cpu + r.nz_cpu, cluster.cap_cpu),
             least_requested(cluster.nz_mem + r.nz_mem, cluster.cap_mem)],
            [cluster.cap_cpu, cluster.cap_mem], [1, 1])
        c = cluster
        if minor >= 36:
            bal = balanced_allocation_v136(c.req_cpu + r.cpu, c.req_cpu, c.cap_cpu, c.req_mem + r.mem, c.req_mem,
                                           c.cap_mem)
        else:
            bal = balanced_allocation(c.req_cpu + r.cpu, c.cap_cpu, c.req_mem + r.mem, c.cap_mem)
        if best_effort and minor >= 33:
            bal = 0  # BalancedAllocation skips best-effort pods from v1.33
        assert np.array_equal(got, least + bal)


def test_pod_backoff_doubles_from_the_initial_to_the_max_and_is_off_with_a_zero_max():
    from drlsched.kube_scoring import pod_backoff_s

    assert [pod_backoff_s(a) for a in range(7)] == [0.0, 1.0, 2.0, 4.0, 8.0, 10.0, 10.0]
    assert pod_backoff_s(10_000) == 10.0
    assert pod_backoff_s(3, 2.0, 20.0) == 8.0 and pod_backoff_s(3, 1.0, 0.0) == 0.0
