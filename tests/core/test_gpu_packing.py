"""The FGD paper's baselines: each one's score on hand-made nodes against its formula (docs/policies.md)."""

import numpy as np
import pytest

from drlsched.cluster import Cluster
from drlsched.errors import UserError
from drlsched.policies import make_policy
from drlsched.policies.base import Option, PodContext
from drlsched.workload import NodeSpec, PodSpec


def cluster_with_load():
    """Node 0: 4 GPUs, one 600m share on GPU0 and a whole GPU1 in use, 20 of 64 cores requested.
    Node 1: 8 idle GPUs, 96 cores. Node 2: 2 GPUs, a 300m share on GPU1, no CPU requested."""
    c = Cluster([NodeSpec("a", 64000, 262144, 4, "T4"), NodeSpec("b", 96000, 393216, 8, "T4"),
                 NodeSpec("c", 32000, 131072, 2, "T4")])
    share = c.request(PodSpec("s", "j", 0.0, 8000, 1024, gpus=1, gpu_milli=600))
    c.allocate(0, share, (0,))
    whole = c.request(PodSpec("w", "j", 0.0, 12000, 1024, gpus=1, gpu_milli=1000))
    c.allocate(0, whole, (1,))
    small = c.request(PodSpec("t", "j", 0.0, 0, 0, gpus=1, gpu_milli=300))
    c.allocate(2, small, (1,))
    return c


def scores(name, cluster, pod):
    policy = make_policy(name)
    policy.reset(cluster, np.random.default_rng(0))
    r = cluster.request(pod)
    nodes = np.flatnonzero(cluster.feasible(r))
    ctx = PodContext(pod, [Option(pod.gpus, r, cluster.feasible(r))], cluster, 0.0)
    return nodes, policy.score(ctx, ctx.options[0], nodes)


SHARE = PodSpec("p", "j", 0.0, 4000, 1024, gpus=1, gpu_milli=250)
TWO = PodSpec("q", "j", 0.0, 16000, 1024, gpus=2, gpu_milli=1000)


def test_best_fit_score_is_the_room_left_after_the_pod():
    _, s = scores("best-fit", cluster_with_load(), SHARE)
    # node a: cpu left 44000-4000, GPU left 2400-250; b: 92000, 7750; c: 28000, 1450
    want = [int((1 - 0.5 * 40000 / 128000 - 0.5 * 2150 / 8000) * 100),
            int((1 - 0.5 * 92000 / 128000 - 0.5 * 7750 / 8000) * 100),
            int((1 - 0.5 * 28000 / 128000 - 0.5 * 1450 / 8000) * 100)]
    assert s.tolist() == want


def test_dot_product_score_is_one_minus_the_half_dot_product():
    _, s = scores("dot-product", cluster_with_load(), TWO)
    nodes_free = [(44000, 2400), (96000, 8000)]  # node c has no two free GPUs
    want = [int(100 * (1 - ((cpu / 128000) * (16000 / 128000) + (gpu / 8000) * (2000 / 8000)) / 2))
            for cpu, gpu in nodes_free]
    assert s.tolist() == want


def test_gpu_clustering_bands():
    c = cluster_with_load()
    _, s = scores("gpu-clustering", c, SHARE)
    # a: shares and 1-GPU pods (50 + 25*(8000-2400)//8000); b: idle (25 + 0); c: only shares (75 + ...)
    assert s.tolist() == [50 + 25 * 5600 // 8000, 25 + 0, 75 + 25 * (8000 - 1700) // 8000]
    one = PodSpec("o", "j", 0.0, 1000, 1024, gpus=1, gpu_milli=1000)
    _, s = scores("gpu-clustering", c, one)
    assert s.tolist() == [50 + 25 * 5600 // 8000, 25, 0 + 25 * 6300 // 8000]
    _, s = scores("gpu-clustering", c, PodSpec("cpu", "j", 0.0, 1000, 1024))
    assert s.tolist() == [0, 0, 0]


def test_gpu_packing_cases():
    c = cluster_with_load()
    _, s = scores("gpu-packing", c, SHARE)
    # a: least free GPU holding 250m is GPU0 (400m free): 100 - (40 // 10); b: all 8 free: max(33-8, 8);
    # c: GPU1 has 700m free: 100 - 70 // 10
    assert s.tolist() == [96, 25, 93]
    _, s = scores("gpu-packing", c, TWO)
    assert s.tolist() == [48, 25]  # a uses two fully free GPUs: max(50 - 2, 33); b idle
    big = Cluster([NodeSpec("x", 96000, 393216, 40, "T4")])
    _, s = scores("gpu-packing", big, SHARE)
    assert s.tolist() == [40]  # an idle node: max(33 - 40, 40)


def test_the_baselines_place_a_share_on_the_best_fitting_gpu():
    for name in ("best-fit", "dot-product", "gpu-clustering", "gpu-packing"):
        c = cluster_with_load()
        policy = make_policy(name)
        policy.reset(c, np.random.default_rng(0))
        r = c.request(SHARE)
        d = policy.select(PodContext(SHARE, [Option(1, r, c.feasible(r))], c, 0.0))
        assert d is not None and c.feasible(r)[d.node]
        assert c.pick_gpus(d.node, r) == ((0,) if d.node == 0 else (1,) if d.node == 2 else (0,))


@pytest.mark.parametrize("name", ["best-fit", "dot-product", "gpu-clustering", "gpu-packing"])
def test_a_gpu_baseline_refuses_a_cluster_without_gpus(name):
    c = Cluster([NodeSpec("a", 4000, 8192)])
    with pytest.raises(UserError, match="no GPU nodes"):
        make_policy(name).reset(c, np.random.default_rng(0))


def test_gpu_kind_counts_follow_binds_and_releases():
    c = cluster_with_load()
    assert c.gpu_kind_pods[0, :3].tolist() == [1, 1, 0]
    r = c.request(TWO)
    c.allocate(1, r, (0, 1))
    assert c.gpu_kind_pods[1, 2] == 1
    c.release(1, r, (0, 1))
    assert c.gpu_kind_pods[1].sum() == 0
