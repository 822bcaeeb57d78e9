"""Batch and Spark jobs as best-effort work: a share of the jobs is BE, and with a reclaim model those jobs run on
what requests hold but usage leaves idle."""

import itertools
from collections import defaultdict

import pytest

from drlsched.reclaim import ReclaimConfig
from drlsched.scenarios import BATCH_BE_SHARE, SPARK_BE_SHARE, make_scenario
from drlsched.simulator import SimConfig, simulate
from drlsched.workload import QoS


@pytest.mark.parametrize("name, share", [("batch", BATCH_BE_SHARE), ("spark-tpcds", SPARK_BE_SHARE),
                                         ("mixed", BATCH_BE_SHARE)])
def test_a_share_of_the_jobs_is_best_effort_whole(name, share):
    pods = list(itertools.islice(make_scenario(name, nodes=20, duration=3600.0, seed=3).pods, 20_000))
    qos = defaultdict(set)
    for p in pods:
        if not p.service:
            qos[p.job_id].add(p.qos)
    assert all(len(q) == 1 for q in qos.values())  # a job runs in one QoS class
    be = sum(q == {QoS.BE} for q in qos.values()) / len(qos)
    assert len(qos) > 300 and abs(be - share) < 0.06
    assert {next(iter(q)) for q in qos.values()} == {QoS.BE, QoS.BURSTABLE}


def test_marking_jobs_best_effort_leaves_the_jobs_as_they_were():
    # The marks come from their own random stream: two seeds' workloads differ, the same seed's are identical.
    def shapes(seed):
        return [(p.uid, p.cpu_m, p.work_s, p.qos) for p in itertools.islice(
            make_scenario("spark-tpcds", nodes=10, duration=600.0, seed=seed).pods, 2000)]

    assert shapes(1) == shapes(1) and shapes(1) != shapes(2)


def _run(model, seed, **thresholds):
    w = make_scenario("batch", nodes=6, duration=300.0, load=2.0, seed=seed)
    return simulate(w, "k8s-default", seed, SimConfig(series=False, reclaim=ReclaimConfig(model, **thresholds)))


@pytest.mark.parametrize("seed", [0, 1])
def test_be_batch_jobs_on_reclaimed_cpu_raise_utilisation_above_the_request_bound_case(seed):
    none = _run("none", seed)
    koord = _run("koordinator", seed, cpu_threshold=0.9, suppress_threshold=0.95)
    # Saturated (load 2): without reclaim requests bind; BE jobs add what the Burstable ones leave unused.
    assert none["cpu_alloc"] > 0.5 and koord["cpu_util_reclaimed"] > 0.1
    assert koord["cpu_util_window"] > none["cpu_util_window"] + 0.03
    assert koord["pods_unschedulable"] == none["pods_unschedulable"] == 0


def test_be_pods_waiting_when_nothing_runs_are_placed_once_the_usage_window_empties():
    # Koordinator's defaults lend nothing while the Burstable jobs run (60% - their ~72% usage): the BE jobs wait
    # until the usage window has forgotten them, and usage ticks must go on until then.
    m = _run("koordinator", 0)
    assert m["pods_unschedulable"] == 0 and m["pods_finished"] == m["pods"]
