"""Synthetic scenarios reproduce the published statistics they are calibrated to (traces.md §6)."""

from collections import Counter

import numpy as np
import pytest

from drlsched.errors import UserError
from drlsched.scenarios import SCENARIOS, make_scenario
from drlsched.workload import GPU_MILLI


def pods_of(name, **kw):
    return list(make_scenario(name, seed=11, **kw).pods)


def test_batch_matches_alibaba_v2018():
    pods = pods_of("batch", duration=600.0)
    jobs = Counter(p.job_id for p in pods)
    tasks = Counter()
    durations = {}
    cpu = []
    for p in pods:
        tasks[(p.job_id, p.task)] += 1
        durations[(p.job_id, p.task)] = p.work_s
        cpu.append(p.cpu_m)
    per_job = Counter(j for j, _ in tasks)
    assert np.median(list(per_job.values())) == pytest.approx(3, abs=1)  # tasks per job: p50 3
    assert np.median(list(durations.values())) == pytest.approx(10, rel=0.3)  # task duration: p50 10 s
    shares = Counter(cpu)
    assert shares[1000] / len(cpu) == pytest.approx(0.523, abs=0.1)  # plan_cpu 100: 52%
    assert shares[500] / len(cpu) == pytest.approx(0.445, abs=0.1)  # plan_cpu 50: 44.5%
    assert any(p.parents for p in pods) and len(jobs) > 100
    assert all(float(p.arrival_s).is_integer() for p in pods)  # whole-second stamps as in the trace


def test_ml_gpu_matches_openb():
    pods = pods_of("ml-gpu", duration=40 * 3600.0)
    n = len(pods)
    gpu0 = sum(p.gpus == 0 for p in pods) / n
    sharing = sum(p.gpus == 1 and p.gpu_milli < GPU_MILLI for p in pods) / n
    assert gpu0 == pytest.approx(0.1335, abs=0.04)
    assert sharing == pytest.approx(0.378, abs=0.05)
    assert np.median([p.cpu_m for p in pods]) == pytest.approx(11300, rel=0.15)
    assert any(p.gpu_models for p in pods) and any(p.gpu_options for p in pods)
    assert any(p.gpus == 8 for p in pods)


def test_ecommerce_services_and_load_curve():
    w = make_scenario("ecommerce", seed=2)
    pods = list(w.pods)
    assert all(p.service and p.qos.name == "LS" for p in pods)
    curve = [w.load_curve(t) for t in np.linspace(0, w.duration_s, 2000)]
    assert max(curve) / min(curve) > 2.4  # diurnal 2.5x, plus bursts


def test_load_scales_arrivals():
    low = len(pods_of("spark-tpcds", duration=600.0, load=0.5))
    high = len(pods_of("spark-tpcds", duration=600.0, load=1.0))
    assert 1.6 < high / low < 2.4


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_every_scenario_generates_valid_pods(name):
    w = make_scenario(name, nodes=8, duration=120.0, seed=1)
    w.validate_nodes()
    assert len(w.nodes) == 8
    pods = list(w.iter_pods())
    assert pods


@pytest.mark.parametrize(("kw", "match"), [({"nodes": 0}, "--nodes"), ({"duration": -1.0}, "--duration"),
                                           ({"load": float("nan")}, "--load"), ({"nodes": 10**9}, "--nodes")])
def test_bad_sizes_are_user_errors(kw, match):
    with pytest.raises(UserError, match=match):
        make_scenario("batch", **kw)


def test_every_ml_gpu_pod_fits_its_cluster_when_empty():
    from drlsched.cluster import Cluster

    # Model-constrained pods once drew more CPU than their model's nodes have (seed 900 at 40 nodes did).
    for nodes in (5, 40):
        for seed in (*range(0, 600, 20), 900):
            wl = make_scenario("ml-gpu", nodes=nodes, seed=seed, duration=1800.0)
            cluster = Cluster(wl.nodes)
            assert all(cluster.fits_when_empty(cluster.request(p)) for p in wl.pods), (nodes, seed)
