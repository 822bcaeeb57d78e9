"""Window options shared by all formats: start, duration, sampling, pod cap, node scaling, option errors."""

from __future__ import annotations

from dataclasses import replace

import pytest
from trace_helpers import FIXTURES, load, namespace

from drlsched.errors import UserError
from drlsched.traces import extsort, load_trace, load_window, podtable

OPENB = FIXTURES / "alibaba-gpu-v2023"
V2018 = FIXTURES / "alibaba-v2018"


def test_start_and_duration_shift_to_zero() -> None:
    workload = load(OPENB, "alibaba-gpu-v2023", start=427061.0, duration=200000.0)
    pods = list(workload.iter_pods())
    assert [pod.uid for pod in pods] == ["openb-pod-0001", "openb-pod-0002", "openb-pod-0003"]
    assert [pod.arrival_s for pod in pods] == [0.0, 500000 - 427061, 600000 - 427061]
    assert workload.duration_s == 200000.0
    assert workload.info["pods"] == 3 and workload.info["window_start_s"] == 427061.0


def test_arrival_speedup_compresses_arrivals_not_durations() -> None:
    plain = load(OPENB, "alibaba-gpu-v2023", start=427061.0, duration=200000.0)
    fast = load(OPENB, "alibaba-gpu-v2023", start=427061.0, duration=200000.0, arrival_speedup=100.0)
    slow_pods, fast_pods = list(plain.iter_pods()), list(fast.iter_pods())
    assert [p.uid for p in fast_pods] == [p.uid for p in slow_pods]  # the same trace-time window
    assert [p.arrival_s for p in fast_pods] == [p.arrival_s / 100.0 for p in slow_pods]
    assert [p.work_s for p in fast_pods] == [p.work_s for p in slow_pods]
    assert fast.duration_s == 2000.0 and fast.info["arrival_speedup"] == 100.0
    assert load(OPENB, "alibaba-gpu-v2023", arrival_speedup=10.0).duration_s == 80001.0
    with pytest.raises(UserError, match="--arrival-speedup"):
        load(OPENB, "alibaba-gpu-v2023", arrival_speedup=0.0)


def test_duration_defaults_to_one_second_past_the_last_arrival() -> None:
    assert load(OPENB, "alibaba-gpu-v2023").duration_s == 800001.0
    assert load(OPENB, "alibaba-gpu-v2023", max_pods=2).duration_s == 427062.0


def test_max_pods() -> None:
    workload = load(OPENB, "alibaba-gpu-v2023", max_pods=4)
    assert [pod.uid for pod in workload.iter_pods()][-1] == "openb-pod-0003"
    assert workload.info["pods"] == 4


def test_sampling_keeps_whole_jobs_and_is_deterministic() -> None:
    full = list(load(V2018, "alibaba-v2018").iter_pods())
    picks = []
    for seed in range(12):
        kept = list(load(V2018, "alibaba-v2018", sample_rate=0.5, seed=seed).iter_pods())
        jobs = {pod.job_id for pod in kept}
        assert sorted(pod.uid for pod in kept) == sorted(pod.uid for pod in full if pod.job_id in jobs)
        again = list(load(V2018, "alibaba-v2018", sample_rate=0.5, seed=seed).iter_pods())
        assert [pod.uid for pod in again] == [pod.uid for pod in kept]
        picks.append(frozenset(jobs))
    assert len(set(picks)) > 1  # seeds differ


def test_pods_can_be_replayed_twice() -> None:
    workload = load(V2018, "alibaba-v2018")
    assert [p.uid for p in workload.iter_pods()] == [p.uid for p in workload.iter_pods()]


def test_nodes_scale_proportionally() -> None:
    base = load(OPENB, "alibaba-gpu-v2023").nodes
    grown = load(OPENB, "alibaba-gpu-v2023", nodes=9).nodes
    assert len(grown) == 9 and len({node.name for node in grown}) == 9
    assert {node.gpu_model for node in grown} == {node.gpu_model for node in base}
    assert "openb-node-0001-copy1" in {node.name for node in grown}
    shrunk = load(OPENB, "alibaba-gpu-v2023", nodes=2).nodes
    assert len(shrunk) == 2 and all(node in base for node in shrunk)


def test_many_runs_merge_in_arrival_order(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(podtable, "CHUNK_ROWS", 2)  # every two pods a sorted run of their own
    monkeypatch.setattr(extsort, "MERGE_BUDGET_ROWS", 1)  # read one row at a time,
    monkeypatch.setattr(extsort, "MIN_BATCH_ROWS", 1)
    monkeypatch.setattr(extsort, "FAN_IN", 2)  # merge runs in pairs, level after level
    merged = [(p.arrival_s, p.uid) for p in load(V2018, "alibaba-v2018").iter_pods()]
    monkeypatch.undo()
    single = [(p.arrival_s, p.uid) for p in load(V2018, "alibaba-v2018").iter_pods()]
    assert [a for a, _ in merged] == sorted(a for a, _ in merged)
    assert sorted(merged) == sorted(single)


@pytest.mark.parametrize(("options", "message"), [
    ({"start": -1.0}, "--start must be a non-negative number"),
    ({"duration": 0.0}, "--duration must be a positive number"),
    ({"max_pods": 0}, "--max-pods must be a positive number"),
    ({"nodes": -3}, "--nodes must be a positive number"),
    ({"sample_rate": 1.5}, r"--sample-rate must be in \(0, 1\]"),
    ({"machine_memory_mib": -5}, "--machine-memory-mib must be a positive number"),
    ({"trace_format": None}, "--trace-format is required"),
    ({"trace_format": "azure"}, "unknown trace format 'azure'"),
    ({"trace": "/nonexistent/trace"}, "does not exist"),
    ({"trace": None}, "no trace given"),
])
def test_option_errors(options: dict[str, object], message: str) -> None:
    renamed = {{"trace": "path", "trace_format": "format"}.get(k, k): v for k, v in options.items()}
    with pytest.raises(UserError, match=message):
        load_trace(replace(namespace(OPENB, "alibaba-gpu-v2023"), **renamed))


def test_wrong_directory_names_the_expected_files(tmp_path) -> None:
    with pytest.raises(UserError, match="no google-2019 tables found"):
        load(OPENB, "google-2019")
    (tmp_path / "openb_pod_list_a.csv").write_text("x\n")
    (tmp_path / "openb_pod_list_b.csv").write_text("x\n")
    with pytest.raises(UserError, match="several files could be the pods table"):
        load(tmp_path, "alibaba-gpu-v2023")


def test_empty_window_is_a_user_error() -> None:
    with pytest.raises(UserError, match="selects no pods"):
        load(OPENB, "alibaba-gpu-v2023", start=1e9)


@pytest.mark.parametrize("fmt", ["alibaba-v2018", "alibaba-gpu-v2020", "google-2019"])
def test_sampling_while_reading_keeps_the_trace_origin(fmt: str) -> None:
    full = load(FIXTURES / fmt, fmt)
    for seed in range(6):
        sampled = load_window(namespace(FIXTURES / fmt, fmt, sample_rate=0.4, seed=seed), allow_empty=True)
        assert sampled.info["sampled_while_reading"] == 0.4
        assert sampled.info["window_start_s"] == full.info["window_start_s"]
        jobs = {pod.job_id for pod in sampled.iter_pods()}
        expected = [(p.uid, p.arrival_s) for p in full.iter_pods() if p.job_id in jobs]
        assert [(p.uid, p.arrival_s) for p in sampled.iter_pods()] == expected


def test_trace_origin_zero_is_positive_zero() -> None:
    info = load(OPENB, "alibaba-gpu-v2023").info
    assert str(info["trace_first_arrival_s"]) == "0.0"
