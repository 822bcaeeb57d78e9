"""Metrics of a replay computed from an observed timeline (no cluster needed)."""

import pytest

from drlsched.cluster import Cluster
from drlsched.replay import PodRecord, _metrics
from drlsched.workload import NodeSpec, PodSpec, QoS


def rec(name, job, node, ready, bound, ended, cpu=1000, **kw):
    spec = PodSpec(name, job, 0.0, cpu, 1024, usage_cpu=0.5, **kw)
    return PodRecord(spec, name, ready=ready, bound=bound, started=bound if bound >= 0 else -1.0, ended=ended,
                     node=node)


def test_timeline_metrics_in_workload_seconds():
    cluster = Cluster([NodeSpec("a", 4000, 8192), NodeSpec("b", 4000, 8192)])
    records = [
        rec("p1", "j1", "a", 0.0, 0.1, 1.1),
        rec("p2", "j1", "b", 0.0, 0.2, 2.0, qos=QoS.LS),
        rec("p3", "j2", "a", 1.0, 1.0, 1.0),  # ended the instant it was bound
        rec("p4", "j3", "b", 2.0, 2.5, -1.0),  # still running, bound after every pod that finished
        rec("p5", "j4", "", 2.0, -1.0, -1.0),  # never placed
    ]
    m = _metrics(records, cluster, speedup=10.0)
    assert m["pods_scheduled"] == 4 and m["pods_unschedulable"] == 1
    assert m["jct_p50_s"] == pytest.approx(10.0)  # j2: 0 s; j1: 20 s (jobs not finished are left out)
    assert m["sla_violation_rate"] == 0.0  # p2 waited 2 s of workload time
    assert m["makespan_s"] == pytest.approx(20.0)
    # p1 (10 s) + p2 (18 s) of 1000m each over 20 s of 8000m: (10 + 18) * 1000 / (20 * 8000).
    assert m["cpu_alloc"] == pytest.approx(28 / 160)
    assert m["cpu_util"] == pytest.approx(0.5 * 28 / 160)


def test_service_traffic_flows_only_between_pods_placed_at_the_same_time():
    # The simulator's model: w0 talks to w1 only while both are bound; w2 arrives after w0 ended.
    cluster = Cluster([NodeSpec("a", 4000, 8192), NodeSpec("b", 4000, 8192)])
    records = [
        rec("w0", "j", "a", 0.0, 0.0, 1.0, traffic_mbps=80.0),
        rec("w1", "j", "b", 0.0, 0.0, 2.0, traffic_mbps=80.0),
        rec("w2", "j", "a", 1.5, 1.5, 3.0, traffic_mbps=80.0),
    ]
    m = _metrics(records, cluster, speedup=10.0)
    # Workload seconds of remote talk: w0 10 (w1 remote), w1 10 (w0) + 5 (w2), w2 5 (w1) + 0 alone; 10 MB/s.
    assert m["cross_node_traffic_gb"] == pytest.approx(30 * 10.0 / 1000.0)


def test_anomalies_from_the_observed_timeline_and_the_parts_a_replay_cannot_see():
    cluster = Cluster([NodeSpec("a", 4000, 8192)])
    records = [
        rec("ok", "j1", "a", 0.0, 0.1, 1.0),
        rec("late", "j2", "a", 0.0, 7.0, 8.0),  # pending 70 s of workload time: unschedulable and a slow start
        rec("ls", "j3", "a", 0.0, 0.6, 2.0, qos=QoS.LS),  # pending 6 s: its SLA, and a start 6 s after creation
        rec("evicted", "j4", "a", 0.0, 5.0, 9.0),
        rec("never", "j5", "", 1.0, -1.0, -1.0),  # nothing runs at the end: it waits for ever
        rec("child", "j6", "", -1.0, -1.0, -1.0),  # never created (parents unfinished): not a pod of the cluster
    ]
    ev = records[3]
    ev.evictions, ev.waited, ev.queued, ev.startup = 1, 0.2, 4.8, 0.1  # 2 s + 2 s pending, a fast first start
    m = _metrics(records, cluster, speedup=10.0)
    assert m["anomalies"] == {"unschedulable_60s": 2, "bind_failed": None, "evicted": 1,
                              "preempted_or_migrated": None, "sla_breach": 1, "startup_slow": 2}
    assert sorted(m["anomalies_unavailable"]) == ["bind_failed", "preempted_or_migrated"]
    assert m["anomaly_rate"] == pytest.approx(4 / 6)  # late, ls, evicted, never


def test_a_replay_that_placed_nothing_reports_nulls_and_warns_of_the_missing_scheduler():
    from drlsched.metrics import null_warning
    from drlsched.replay import placement_warning

    cluster = Cluster([NodeSpec("a", 4000, 8192)])
    m = _metrics([rec("p1", "j1", "", 0.0, -1.0, -1.0), rec("p2", "j2", "", 0.5, -1.0, -1.0)], cluster,
                 speedup=10.0, end=3.0)
    m["pods"], m["pods_scheduled"] = 2, 0  # as replay() adds them
    assert m["pending_p99_s"] is None and m["jct_p99_s"] is None  # not 0.0, the best possible value
    assert m["anomaly_rate"] == 1.0 and m["anomalies"]["unschedulable_60s"] == 2
    warning = placement_warning(m, "drl-scheduler")
    assert warning is not None and "\n" not in warning and "no pod was placed" in warning
    assert "no scheduler named 'drl-scheduler'" in warning
    assert "kube-scheduler" in (placement_warning(m, "default-scheduler") or "")
    assert "pending_p99_s" in (null_warning([m]) or "")
    assert placement_warning({"pods": 2, "pods_scheduled": 1}, "drl-scheduler") is None
