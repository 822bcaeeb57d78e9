"""Scheduling anomalies (`anomaly_rate`, `anomalies.*`) and the null of an empty sample (issue 22 items 4 and 5)."""

import json

import pytest

from drlsched.evaluate import aggregate, mean_ci, paired_ratios
from drlsched.metrics import (
    ANOMALY_KEYS,
    ANOMALY_PARTS,
    METRIC_KEYS,
    Accumulator,
    Anomaly,
    metric_value,
    null_warning,
    summarize,
)


def _summary(acc: Accumulator) -> dict[str, object]:
    return summarize(acc, total_cpu=1000, total_mem=1000, total_gpu_milli=0)


def test_a_pod_with_two_anomalies_counts_once_in_the_rate():
    acc = Accumulator(pods_arrived=4)
    acc.flag("a", Anomaly.EVICTED)
    acc.flag("a", Anomaly.SLA_BREACH)
    acc.flag("a", Anomaly.EVICTED)  # the same anomaly twice: still one pod
    acc.flag("b", Anomaly.PREEMPTED_OR_MIGRATED)
    m = _summary(acc)
    assert m["anomaly_rate"] == pytest.approx(2 / 4)
    assert m["anomalies"] == {"unschedulable_60s": 0, "bind_failed": 0, "evicted": 1, "preempted_or_migrated": 1,
                              "sla_breach": 1, "startup_slow": 0}


def test_unschedulable_time_is_summed_over_stays_and_closed_at_the_end():
    acc = Accumulator(pods_arrived=5)
    acc.wait_start("short", 0.0)
    acc.wait_end("short", 60.0)  # exactly 60 s: not more than 60
    acc.wait_start("long", 0.0)
    acc.wait_end("long", 61.0)
    acc.wait_start("evicted", 0.0)  # 40 s, evicted, 30 s more: 70 s in total
    acc.wait_end("evicted", 40.0)
    acc.flag("evicted", Anomaly.EVICTED)
    acc.wait_start("evicted", 100.0)
    acc.wait_end("evicted", 130.0)
    acc.wait_start("stuck", 10.0)  # still pending when the run ends
    acc.wait_end("migrated", 5.0)  # a bind without a stay in the queue: ignored
    acc.close_waits(100.0)
    assert {p for p, f in acc.anomalies.items() if f & Anomaly.UNSCHEDULABLE_60S} == {"long", "evicted", "stuck"}
    m = _summary(acc)
    assert m["anomalies"]["unschedulable_60s"] == 3 and m["anomaly_rate"] == pytest.approx(3 / 5)


def test_startup_slow_is_beyond_the_5s_slo():
    acc = Accumulator(pods_arrived=2)
    acc.started("fast", 5.0)
    acc.started("slow", 5.5)
    assert acc.anomalies == {"slow": Anomaly.STARTUP_SLOW}


def test_empty_samples_are_null_with_a_one_line_warning():
    m = _summary(Accumulator())
    for key in ("jct_p50_s", "jct_p99_s", "pending_p99_s", "sla_violation_rate", "anomaly_rate",
                "be_pending_p99_s", "ls_slowdown_p50", "ls_slowdown_p99", "cpu_util_reclaimed", "makespan_s"):
        assert m[key] is None, key
    assert m["migrations"] == 0 and m["pods_scheduled"] == 0  # counts stay counts
    json.dumps(m)  # null in JSON
    warning = null_warning([m])
    assert warning is not None and "\n" not in warning and "jct_p99_s" in warning and "no job finished" in warning
    acc = Accumulator(pods_arrived=1, pods_finished=1)
    acc.jct.append(3.0)
    acc.pending.append(0.5)
    acc.ls_pods = 1
    acc.be_pending.append(0.5)
    acc.ls_slowdown.append(1.0)
    acc.cpu_use_s = 1.0
    assert null_warning([_summary(acc)]) is None


def test_evaluate_treats_null_as_missing_not_zero():
    assert mean_ci([None, 2.0, 4.0])["mean"] == pytest.approx(3.0)
    assert mean_ci([None, None]) == {"mean": None, "ci95": None, "n": 0}

    def run(policy, seed, jct):
        metrics = {"policy": policy, "seed": seed, "wall_s": 1.0, "placements_per_s": 1.0,
                   **{k: 1.0 for k in METRIC_KEYS}, "jct_p99_s": jct,
                   "anomalies": dict.fromkeys(ANOMALY_PARTS, 0)}
        return {"metrics": metrics}

    runs = [run("k8s-default", 0, 100.0), run("k8s-default", 1, None), run("ppo", 0, 50.0), run("ppo", 1, 10.0)]
    summary = aggregate(runs, ["k8s-default", "ppo"])
    assert summary["k8s-default"]["jct_p99_s"] == {"mean": 100.0, "ci95": 0.0, "n": 1}
    assert summary["ppo"]["anomalies.evicted"]["n"] == 2
    ratio = paired_ratios(runs, ["k8s-default", "ppo"], "k8s-default")["ppo"]["jct_p99_s"]
    assert ratio == {"mean": 0.5, "ci95": 0.0, "n": 1}  # seed 1 left out: its baseline is null


def test_metric_value_reads_the_nested_parts():
    m = {"anomaly_rate": 0.1, "anomalies": {"evicted": 3}}
    assert metric_value(m, "anomaly_rate") == 0.1 and metric_value(m, "anomalies.evicted") == 3
    with pytest.raises(KeyError):
        metric_value(m, "anomalies.bind_failed")
    assert ANOMALY_KEYS[0] == "anomalies.unschedulable_60s"


# --- each part from a simulation of a hand-made workload ------------------------------------------------------


def _sim(nodes, pods, policy=None, duration=100.0, **cfg):
    from drlsched.policies import make_policy
    from drlsched.simulator import SimConfig, Simulator
    from drlsched.workload import Workload

    sim = Simulator(Workload("t", nodes, pods, duration, drain_s=cfg.pop("drain_s", None)),
                    policy or make_policy("k8s-default"), 0, SimConfig(**cfg))
    return sim.run()


def _pod(uid, t, cpu=1000, mem=1024, work=10.0, **kw):
    from drlsched.workload import PodSpec

    return PodSpec(uid, kw.pop("job", uid), t, cpu, mem, work_s=work, startup_s=kw.pop("startup_s", 1.0),
                   usage_cv=0.0, **kw)


def _node(cpu=2000, mem=8192):
    from drlsched.workload import NodeSpec

    return NodeSpec("n", cpu, mem)


def test_unschedulable_60s_and_startup_slow_in_a_simulation():
    # "b" waits 70 s for "a" to finish (unschedulable > 60 s, and started 71 s after its creation). Then "c"
    # waits 4 s + its 1 s cold start (5 s: within the SLO); "d" takes 6 s to start (a slow cold start).
    pods = [_pod("a", 0.0, cpu=2000, work=69.0), _pod("b", 0.0, cpu=2000, work=5.0)]
    m = _sim([_node(cpu=2000)], pods)
    assert m["anomalies"]["unschedulable_60s"] == 1 and m["anomalies"]["startup_slow"] == 1
    assert m["anomaly_rate"] == pytest.approx(1 / 2)  # "b" has both, counted once
    m = _sim([_node(cpu=2000)], [_pod("a", 0.0, cpu=2000, work=3.0), _pod("c", 0.0, cpu=1000, work=5.0),
                                 _pod("d", 0.0, cpu=500, startup_s=6.0)])
    # "c" waited for "a" (1 s start + 3 s): started at 5 s after its creation, not more than 5 s
    assert m["anomalies"] == {"unschedulable_60s": 0, "bind_failed": 0, "evicted": 0, "preempted_or_migrated": 0,
                              "sla_breach": 0, "startup_slow": 1}


def test_a_pod_that_never_fits_is_unschedulable_however_short_the_run():
    m = _sim([_node(cpu=2000)], [_pod("ok", 0.0), _pod("huge", 0.0, cpu=4000)], duration=5.0,
             allow_unschedulable=True)
    assert m["anomalies"]["unschedulable_60s"] == 1 and m["anomaly_rate"] == pytest.approx(1 / 2)


def test_sla_breach_is_an_ls_pod_that_violated_its_sla():
    from drlsched.workload import QoS

    pods = [_pod("a", 0.0, cpu=2000, work=20.0), _pod("ls", 0.0, cpu=2000, work=5.0, qos=QoS.LS)]
    m = _sim([_node(cpu=2000)], pods)
    assert m["sla_violation_rate"] == 1.0 and m["anomalies"]["sla_breach"] == 1
    assert m["anomalies"]["startup_slow"] == 1 and m["anomaly_rate"] == pytest.approx(1 / 2)


def test_preempted_or_migrated_counts_moved_pods_once():
    import numpy as np

    from drlsched.policies.base import Decision, Migration, Policy
    from drlsched.workload import NodeSpec

    class MoveTwice(Policy):
        name = "move-twice"

        def select(self, ctx):
            return Decision(int(np.flatnonzero(ctx.options[0].feasible)[0]), 0)

        def rebalance(self, cluster, running, now):
            return [Migration(uid, 1 - node) for uid, node in running if uid == "p"] if now < 10 else []

    nodes = [NodeSpec("a", 4000, 8192), NodeSpec("b", 4000, 8192)]
    m = _sim(nodes, [_pod("p", 0.0, work=20.0), _pod("q", 0.0, work=20.0)], MoveTwice(), rebalance_s=4.0,
             tick_s=1000.0)
    assert m["migrations"] == 2 and m["anomalies"]["preempted_or_migrated"] == 1
    assert m["anomaly_rate"] == pytest.approx(1 / 2) and m["anomalies"]["bind_failed"] == 0  # binds never fail


def test_evicted_by_qos_enforcement():
    from drlsched.reclaim import ReclaimConfig
    from drlsched.workload import NodeSpec, PodSpec, QoS

    node = NodeSpec("a", 10_000, 10_000)
    ls = PodSpec("ls", "ls", 0.5, 8000, 100, qos=QoS.LS, service=True, work_s=None, startup_s=1.0, usage_cpu=0.625,
                 usage_cv=0.0)
    be = PodSpec("be", "be", 10.0, 4000, 100, qos=QoS.BE, work_s=200.0, startup_s=1.0, usage_cpu=1.0, usage_cv=0.0)
    m = _sim([node], [ls, be], duration=600.0, drain_s=0.0, tick_s=5.0,
             reclaim=ReclaimConfig("koordinator", cpu_threshold=1.0))
    assert m["evictions"] >= 2 and m["anomalies"]["evicted"] == 1  # evicted several times: one pod
    # It waited 50 s for the first batch allocatable (a slow start), then was bound again at once after each
    # eviction: 50 s in total, not over 60.
    assert m["anomalies"]["startup_slow"] == 1 and m["anomalies"]["unschedulable_60s"] == 0
    assert m["anomaly_rate"] == pytest.approx(1 / 2)
