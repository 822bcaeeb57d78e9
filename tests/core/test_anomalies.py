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
