"""Simulator invariants and mechanics on small hand-made workloads."""

import numpy as np
import pytest

from drlsched.errors import UserError
from drlsched.policies import make_policy
from drlsched.policies.base import Migration, Policy
from drlsched.simulator import SimConfig, Simulator, simulate
from drlsched.workload import NodeSpec, PodSpec, QoS, Workload


def wl(nodes, pods, duration=100.0, name="test"):
    return Workload(name, nodes, pods, duration)


def run(nodes, pods, policy="k8s-default", seed=0, **cfg):
    sim = Simulator(wl(nodes, pods), make_policy(policy), seed, SimConfig(**cfg))
    return sim, sim.run()


def fixed(uid, t, cpu=1000, mem=1024, work=10.0, **kw):
    return PodSpec(uid, kw.pop("job", uid), t, cpu, mem, work_s=work, startup_s=1.0, usage_cv=0.0, **kw)


def test_single_pod_timeline():
    _, m = run([NodeSpec("a", 4000, 8192)], [fixed("p", 0.0, work=10.0)])
    assert m["pods_scheduled"] == 1 and m["pods_finished"] == 1
    assert m["jct_p50_s"] == pytest.approx(11.0)  # 1 s cold start + 10 s of work
    assert m["makespan_s"] == pytest.approx(11.0)


def test_contention_slows_batch_pods():
    # Two pods each using 150% of a 1000m request on a 2000m node: demand 3000m, speed 2/3.
    pods = [fixed(f"p{i}", 0.0, cpu=1000, work=30.0, usage_cpu=1.5) for i in range(2)]
    _, m = run([NodeSpec("a", 2000, 8192)], pods, tick_s=1000.0)
    assert m["jct_p99_s"] == pytest.approx(1.0 + 30.0 * 1.5, rel=1e-6)
    _, alone = run([NodeSpec("a", 2000, 8192)], pods[:1], tick_s=1000.0)
    assert alone["jct_p99_s"] == pytest.approx(31.0)


def test_ls_pod_on_saturated_node_violates_sla():
    svc = fixed("svc", 0.0, cpu=1000, work=50.0, qos=QoS.LS, service=True, usage_cpu=1.0)
    hog = fixed("hog", 0.0, cpu=1000, work=20.0, usage_cpu=2.0)
    _, m = run([NodeSpec("a", 2000, 8192)], [svc, hog], tick_s=1000.0)
    assert m["sla_violation_rate"] == 1.0
    _, ok = run([NodeSpec("a", 2000, 8192)], [svc], tick_s=1000.0)
    assert ok["sla_violation_rate"] == 0.0


def test_pending_longer_than_slo_is_a_violation():
    first = fixed("a", 0.0, cpu=2000, work=20.0)
    late = fixed("b", 0.0, cpu=2000, work=5.0, qos=QoS.LS)
    _, m = run([NodeSpec("n", 2000, 8192)], [first, late])
    assert m["pods_scheduled"] == 2 and m["sla_violation_rate"] == 1.0
    assert m["pending_p99_s"] > 20.0  # waited for the first pod to finish (unschedulable queue retry)


def test_priority_orders_the_queue():
    blocker = fixed("a", 0.0, cpu=2000, work=10.0)
    low = fixed("low", 1.0, cpu=2000, work=1.0)
    high = fixed("high", 2.0, cpu=2000, work=1.0, priority=10)
    sim = Simulator(wl([NodeSpec("n", 2000, 8192)], [blocker, low, high]), make_policy("first-fit"), 0)
    m = sim.run()
    assert m["pods_finished"] == 3
    pend = np.frombuffer(sim.acc.pending, dtype=np.float64)
    assert pend[1] < pend[2]  # high (arrived later) was bound before low


def test_dag_children_wait_for_parents_and_read_shuffle():
    parent = [fixed(f"m{i}", 0.0, job="j", task="M1", work=10.0) for i in range(2)]
    child = fixed("r", 0.0, job="j", task="R2", work=5.0, parents=("M1",), shuffle_in_mb=1000.0)
    nodes = [NodeSpec("a", 1000, 8192), NodeSpec("b", 1000, 8192), NodeSpec("c", 1000, 8192)]
    _, m = run(nodes, [*parent, child])
    # parents 11 s, then child: 1 s start + 5 s + remote shuffle (some of 1000 MB at 10 Gbit/s)
    assert m["jct_p50_s"] > 17.0
    assert m["cross_node_traffic_gb"] > 0


def test_unschedulable_pod_is_a_clear_error_or_counted():
    pods = [fixed("ok", 0.0), fixed("huge", 0.0, cpu=64000)]
    with pytest.raises(UserError, match="fits no node even on an empty cluster: Insufficient cpu"):
        run([NodeSpec("a", 4000, 8192)], pods)
    _, m = run([NodeSpec("a", 4000, 8192)], pods, allow_unschedulable=True)
    assert m["pods_unschedulable"] == 1 and m["pods_scheduled"] == 1


def test_out_of_order_arrivals_are_rejected():
    with pytest.raises(UserError, match="arrival order"):
        run([NodeSpec("a", 4000, 8192)], [fixed("a", 5.0), fixed("b", 1.0)])


class MoveEverything(Policy):
    name = "move"

    def select(self, ctx):
        from drlsched.policies.base import Decision

        return Decision(int(np.flatnonzero(ctx.options[0].feasible)[0]), 0)

    def rebalance(self, cluster, running, now):
        return [Migration(uid, 1 - node) for uid, node in running]


@pytest.mark.parametrize("checkpointable", [False, True])
def test_migration_restarts_and_loses_progress_unless_checkpointable(checkpointable):
    pod = fixed("p", 0.0, work=20.0, checkpointable=checkpointable)
    nodes = [NodeSpec("a", 4000, 8192), NodeSpec("b", 4000, 8192)]
    sim = Simulator(wl(nodes, [pod]), MoveEverything(), 0, SimConfig(rebalance_s=4.0, tick_s=1000.0))
    # Only the first rebalance tick (t=4) moves it: afterwards the policy would move it back, so stop there.
    sim.policy.rebalance = lambda c, r, t, orig=sim.policy.rebalance: orig(c, r, t) if t < 5 else []
    m = sim.run()
    assert m["migrations"] == 1
    # Started at t=1, at t=4 it had 3 s of progress; restart with a 1 s cold start.
    assert m["jct_p50_s"] == pytest.approx(4.0 + 1.0 + (17.0 if checkpointable else 20.0))


def test_elastic_pod_uses_the_chosen_gpu_count():
    pod = PodSpec("e", "j", 0.0, 1000, 1024, gpus=1, gpu_milli=1000, gpu_options=(1, 2), elastic_speedup=2.0,
                  work_s=20.0, startup_s=1.0)
    nodes = [NodeSpec("g", 8000, 16384, 2, "T4")]

    class TwoGpus(Policy):
        name = "two"

        def select(self, ctx):
            from drlsched.policies.base import Decision

            opt = next(o for o in ctx.options if o.gpus == 2)
            return Decision(int(np.flatnonzero(opt.feasible)[0]), 2)

    m = Simulator(wl(nodes, [pod]), TwoGpus(), 0).run()
    assert m["jct_p50_s"] == pytest.approx(11.0)  # 20 s of work at 2x speed-up, plus the cold start
    assert simulate(wl(nodes, [pod]), "k8s-default")["jct_p50_s"] == pytest.approx(21.0)


def test_invariants_hold_on_every_scenario_and_policy():
    from drlsched.policies import BASELINES
    from drlsched.scenarios import SCENARIOS, make_scenario

    for scenario in SCENARIOS:
        for policy in BASELINES:
            w = make_scenario(scenario, nodes=12, duration=300.0, seed=3)
            sim = Simulator(w, make_policy(policy), 3, SimConfig(check_invariants=True, allow_unschedulable=True))
            m = sim.run()
            assert m["pods"] == m["pods_finished"] + m["pods_running_at_end"] + m["pods_unschedulable"], (
                scenario, policy)
            assert 0.0 <= m["cpu_util"] <= 1.0 and 0.0 <= m["cpu_alloc"] <= 1.0
            sla = m["sla_violation_rate"]  # null without LS pods (an empty sample)
            assert (sla is None or 0.0 <= sla <= 1.0) and 0.0 <= m["gpu_fragmentation"] <= 1.0
            assert 0.0 <= m["anomaly_rate"] <= 1.0 and all(0 <= n <= m["pods"] for n in m["anomalies"].values())
            sim.cluster.check_invariants()


def test_same_seed_same_metrics_other_seed_other_workload():
    from drlsched.scenarios import make_scenario

    def metrics(seed):
        m = simulate(make_scenario("mixed", nodes=10, duration=300.0, seed=seed), "k8s-default", seed=seed)
        return {k: v for k, v in m.items() if k not in ("wall_s", "placements_per_s")}

    assert metrics(5) == metrics(5)
    assert metrics(5) != metrics(6)


def test_driving_decisions_by_hand_equals_run():
    from drlsched.scenarios import make_scenario

    def fresh():
        return Simulator(make_scenario("ml-gpu", nodes=10, duration=1800.0, seed=2), make_policy("fgd"), 2,
                         SimConfig(allow_unschedulable=True))

    expected = fresh().run()
    sim = fresh()
    gen = sim.decisions()
    count = 0
    try:
        ctx = next(gen)
        while True:
            assert ctx.options and ctx.options[0].feasible.shape == (sim.cluster.size,)
            count += 1
            ctx = gen.send(sim.policy.select(ctx))
    except StopIteration as stop:
        got = stop.value
    drop = ("wall_s", "placements_per_s")
    assert {k: v for k, v in got.items() if k not in drop} == {k: v for k, v in expected.items() if k not in drop}
    assert count >= got["pods_scheduled"]


def test_data_nodes_tell_where_parent_output_lives():
    seen = {}

    class Watching(Policy):
        name = "watch"
        wants_data_nodes = True

        def select(self, ctx):
            from drlsched.policies.base import Decision

            seen[ctx.pod.uid] = dict(ctx.data_nodes)
            return Decision(int(np.flatnonzero(ctx.options[0].feasible)[0]), 0)

    parents = [fixed(f"m{i}", 0.0, job="j", task="M1", work=5.0) for i in range(3)]
    child = fixed("r", 0.0, job="j", task="R2", work=5.0, parents=("M1",))
    nodes = [NodeSpec("a", 1000, 8192), NodeSpec("b", 1000, 8192), NodeSpec("c", 1000, 8192)]
    Simulator(wl(nodes, [*parents, child]), Watching(), 0).run()
    assert seen["r"] == {0: 1, 1: 1, 2: 1} and seen["m0"] == {}


def test_service_traffic_counts_every_second_a_pod_runs_not_just_whole_ticks():
    # Two talking pods on separate nodes for 10 s each, shorter than one 15 s tick: all 10 s count, both ways.
    nodes = [NodeSpec("a", 1000, 8192), NodeSpec("b", 1000, 8192)]
    pods = [fixed(f"w{i}", 0.0, job="j", work=10.0, traffic_mbps=800.0) for i in range(2)]
    _, m = run(nodes, pods, tick_s=15.0)
    assert m["cross_node_traffic_gb"] == pytest.approx(2 * 800.0 * 10.0 / 8.0 / 1000.0)


def test_absolute_gpu_metrics_are_time_averages_in_gpus():
    # One 2-GPU node; a 700m share runs 0..100 s: 1.3 GPUs unallocated, and GPU0's 300m left cannot hold the
    # only typical shape (700m), so 0.3 GPUs are fragmented: 23% of the idle 1.3 GPUs.
    pod = PodSpec("p", "p", 0.0, 1000, 1024, gpus=1, gpu_milli=700, work_s=100.0, startup_s=0.0, usage_cv=0.0)
    _, m = run([NodeSpec("a", 8000, 16384, 2, "T4")], [pod], tick_s=50.0)
    assert m["makespan_s"] == pytest.approx(100.0)
    assert m["gpu_unallocated"] == pytest.approx(1.3)
    assert m["gpu_fragmented"] == pytest.approx(0.3)
    assert m["gpu_fragmentation"] == pytest.approx(0.3 / 1.3)


def test_gpu_metrics_are_zero_without_gpus():
    _, m = run([NodeSpec("a", 4000, 8192)], [fixed("p", 0.0)])
    assert m["gpu_unallocated"] == 0.0 and m["gpu_fragmented"] == 0.0
