"""Baseline policies: the node each one should pick in small hand-made clusters."""

import numpy as np
import pytest

from drlsched.cluster import Cluster
from drlsched.errors import UserError
from drlsched.fragmentation import ShapeCounter, TypicalPods, fragmentation_ratio, node_fragmentation
from drlsched.policies import BASELINES, make_policy
from drlsched.policies.base import Option, PodContext
from drlsched.policies.k8s_default import K8sDefault
from drlsched.workload import NodeSpec, PodSpec


def ctx_for(cluster, pod, typical=None):
    r = cluster.request(pod)
    return PodContext(pod, [Option(pod.gpus, r, cluster.feasible(r))], cluster, 0.0, {}, typical)


def two_nodes():
    c = Cluster([NodeSpec("a", 4000, 8192), NodeSpec("b", 4000, 8192)])
    # node a half full
    filler = c.request(PodSpec("f", "j", 0.0, 2000, 4096))
    c.allocate(0, filler, ())
    return c


def pick(name, cluster, pod, seed=0, typical=None):
    policy = make_policy(name)
    policy.reset(cluster, np.random.default_rng(seed))
    decision = policy.select(ctx_for(cluster, pod, typical))
    return None if decision is None else decision.node


def test_spread_versus_pack():
    pod = PodSpec("p", "j", 0.0, 1000, 2048)
    assert pick("k8s-default", two_nodes(), pod) == 1  # LeastAllocated spreads
    assert pick("most-allocated", two_nodes(), pod) == 0  # bin packing
    assert pick("first-fit", two_nodes(), pod) == 0


def test_data_local_follows_the_shuffle_input_then_the_job():
    c = two_nodes()  # k8s-default alone would spread to node b
    pod = PodSpec("p", "j", 0.0, 1000, 2048, parents=("map",), shuffle_in_mb=10.0)
    policy = make_policy("data-local")
    policy.reset(c, np.random.default_rng(0))
    ctx = ctx_for(c, pod)
    assert policy.select(ctx).node == 1
    ctx.data_nodes = {0: 3, 1: 1}
    assert policy.select(ctx).node == 0
    ctx.data_nodes, ctx.job_nodes = {}, {0: 2}
    assert policy.select(ctx).node == 0


def test_tetris_prefers_aligned_free_space():
    # Pod is CPU-heavy; node a has lots of free CPU but little memory, node b the opposite.
    c = Cluster([NodeSpec("a", 8000, 8192), NodeSpec("b", 8000, 8192)])
    c.allocate(0, c.request(PodSpec("f", "j", 0.0, 1000, 6000)), ())
    c.allocate(1, c.request(PodSpec("g", "j", 0.0, 6000, 1000)), ())
    assert pick("tetris", c, PodSpec("p", "j", 0.0, 2000, 500)) == 0


def test_trimaran_fills_towards_target():
    c = Cluster([NodeSpec("a", 10000, 8192), NodeSpec("b", 10000, 8192)])
    c.use_cpu[:] = [2000.0, 0.0]  # node a at 20%: with the pod (1.5 cores predicted) 35%, nearest the 40% target
    assert pick("trimaran", c, PodSpec("p", "j", 0.0, 1000, 100)) == 0


def test_no_feasible_node_returns_none():
    for name in BASELINES:
        if not make_policy(name).needs_gpus:
            assert pick(name, two_nodes(), PodSpec("p", "j", 0.0, 5000, 100)) is None


def test_unknown_policy_is_a_user_error():
    with pytest.raises(UserError, match="unknown policy"):
        make_policy("best-ever")


def test_random_tie_break_is_uniform_among_best():
    c = Cluster([NodeSpec(f"n{i}", 4000, 8192) for i in range(4)])
    policy = K8sDefault()
    policy.reset(c, np.random.default_rng(1))
    pod = PodSpec("p", "j", 0.0, 100, 100)
    picks = [policy.select(ctx_for(c, pod)).node for _ in range(400)]
    counts = np.bincount(picks, minlength=4)
    assert counts.min() > 60  # all four identical nodes chosen about equally


def test_percentage_of_nodes_to_score_rotates_start():
    c = Cluster([NodeSpec(f"n{i:03d}", 4000, 8192) for i in range(500)])
    policy = K8sDefault()
    policy.reset(c, np.random.default_rng(0))
    option = Option(0, c.request(PodSpec("p", "j", 0.0, 100, 100)), np.ones(500, bool))
    first = policy.candidates(option)
    assert first.size == 230 and first[0] == 0 and policy.next_start == 230
    second = policy.candidates(option)
    assert second[0] == 230 and second[-1] == (230 + 229) % 500


def test_the_rotation_walks_nodes_in_the_order_the_api_lists_them():
    # kube-scheduler's node tree (one zone) holds nodes as the API lists them, by name, not as they were given.
    names = [f"n{i:03d}" for i in range(500)]
    shuffled = list(np.random.default_rng(3).permutation(names))
    c = Cluster([NodeSpec(n, 4000, 8192) for n in shuffled])
    policy = K8sDefault()
    policy.reset(c, np.random.default_rng(0))
    option = Option(0, c.request(PodSpec("p", "j", 0.0, 100, 100)), np.ones(500, bool))
    first = policy.candidates(option)
    assert [c.names[i] for i in first] == names[:230]
    assert [c.names[i] for i in policy.candidates(option)][:2] == ["n230", "n231"]


def typical(cpu, gpus, milli, freq):
    return TypicalPods(np.array(cpu), np.array(gpus), np.array(milli), np.zeros(len(cpu), dtype=np.int64),
                       np.array(freq, dtype=float))


def test_fgd_fragmentation_hand_example():
    # One node with 2 GPUs: 300m free and 1000m free, 8 cores left. Shapes: a 500m share (p=.5), 1 GPU (p=.5).
    free = np.array([[300, 1000]])
    t = typical([1000, 1000], [1, 1], [500, 1000], [0.5, 0.5])
    frag = node_fragmentation(free, np.array([8000]), np.array([1]), t)
    # 500m shape: the 300m GPU cannot hold it -> 300; 1-GPU shape: the 300m GPU is a fragment -> 300.
    assert frag[0] == pytest.approx(300.0)
    # Without CPU left nothing is hostable: every idle share (1300) is fragmented.
    assert node_fragmentation(free, np.array([0]), np.array([1]), t)[0] == pytest.approx(1300.0)
    assert fragmentation_ratio(free, np.array([8000]), np.array([1]), t) == pytest.approx(300 / 1300)


def test_the_incremental_fragmentation_tracker_equals_the_whole_cluster_measure():
    from drlsched.fragmentation import FragmentationTracker

    c = Cluster([NodeSpec(f"g{i}", 32000, 65536, 4, "T4") for i in range(6)])
    shapes = ShapeCounter(refresh_every=4)
    tracker = FragmentationTracker(c, shapes)
    rng = np.random.default_rng(7)
    held = []
    for step in range(60):
        if held and rng.random() < 0.4:
            node, r, ids = held.pop(int(rng.integers(len(held))))
            c.release(node, r, ids)
        else:
            pod = PodSpec(f"p{step}", "j", 0.0, int(rng.choice([1000, 4000])), 1024, gpus=1,
                          gpu_milli=int(rng.choice([250, 500, 1000])))
            r = c.request(pod)
            shapes.add(r.cpu, r.gpus, r.gpu_milli, r.model_mask)
            fits = np.flatnonzero(c.feasible(r))
            if not fits.size:
                continue
            node = int(fits[rng.integers(fits.size)])
            ids = c.pick_gpus(node, r)
            c.allocate(node, r, ids)
            held.append((node, r, ids))
        tracker.touch(node)
        expected = fragmentation_ratio(c.gpu_free, c.cap_cpu - c.req_cpu, c.node_model_bit, shapes.current)
        assert tracker.ratio() == pytest.approx(expected)


def test_fgd_packs_shares_instead_of_breaking_whole_gpus():
    nodes = [NodeSpec("a", 32000, 65536, 2, "T4"), NodeSpec("b", 32000, 65536, 2, "T4")]
    c = Cluster(nodes)
    half = c.request(PodSpec("h", "j", 0.0, 1000, 100, gpus=1, gpu_milli=500))
    c.allocate(0, half, (0,))  # node a: GPU0 has 500m free
    t = typical([1000, 1000], [1, 1], [500, 1000], [0.5, 0.5])
    pod = PodSpec("p", "j", 0.0, 1000, 100, gpus=1, gpu_milli=500)
    policy = make_policy("fgd")
    policy.reset(c, np.random.default_rng(0))
    d = policy.select(ctx_for(c, pod, t))
    assert (d.node, d.gpu_ids) == (0, (0,))  # fills the half-used GPU, keeping whole GPUs whole


def test_shape_counter_frequencies():
    sc = ShapeCounter(refresh_every=1)
    for _ in range(3):
        sc.add(1000, 1, 500, 0)
    sc.add(2000, 2, 1000, 0)
    sc.add(500, 0, 0, 0)  # CPU-only shapes are not part of the GPU target workload
    assert sc.current is not None and sc.current.freq.tolist() == [0.75, 0.25]


def test_gpu_model_constraint_and_taints_filter():
    c = Cluster([NodeSpec("a", 8000, 8192, 1, "T4"), NodeSpec("b", 8000, 8192, 1, "V100", taints=("dedicated",))])
    assert c.feasible(c.request(PodSpec("p", "j", 0.0, 100, 100, gpus=1, gpu_milli=1000,
                                        gpu_models=("V100",)))).tolist() == [False, False]
    tolerant = PodSpec("q", "j", 0.0, 100, 100, gpus=1, gpu_milli=1000, gpu_models=("V100",),
                       tolerations=("dedicated",))
    assert c.feasible(c.request(tolerant)).tolist() == [False, True]
    assert c.feasible(c.request(PodSpec("r", "j", 0.0, 100, 100))).tolist() == [True, False]


def test_data_local_cuts_shuffle_traffic_on_spark():
    from drlsched.scenarios import make_scenario
    from drlsched.simulator import Simulator

    traffic = {}
    for name in ("k8s-default", "data-local"):
        wl = make_scenario("spark-tpcds", nodes=10, duration=300.0, seed=4)
        traffic[name] = Simulator(wl, make_policy(name), 4).run()["cross_node_traffic_gb"]
    assert traffic["data-local"] < 0.9 * traffic["k8s-default"]
