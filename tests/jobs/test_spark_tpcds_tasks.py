"""`spark-tpcds` with tasks: the pod scenario's queries as jobs, executors placed on its nodes, shuffle reads over
the network; refusals; evaluate's report and plots."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from drlsched.cli import main
from drlsched.jobs.engine import EngineConfig
from drlsched.jobs.metrics import JOB_METRIC_KEYS, NETWORK_KEYS
from drlsched.jobs.model import Executor, Job
from drlsched.jobs.placed import PlacedJobEngine
from drlsched.jobs.policies import Decision
from drlsched.jobs.spark_tpcds import EXECUTOR_CPU_M, WAVES, executor_slots, spark_tpcds_jobs
from drlsched.jobs.workload import JobSource, run_jobs
from drlsched.policies import make_policy
from drlsched.scenarios import make_scenario

SMALL = ["--scenario", "spark-tpcds", "--nodes", "4", "--duration", "300"]


def test_simulate_runs_every_job_with_network_keys(capsys) -> None:
    rc = main(["simulate", *SMALL, "--policy", "k8s-default", "--job-policy", "fifo", "--json", "-"])
    assert rc == 0
    data = json.loads(capsys.readouterr().out)
    assert all(k in data for k in (*JOB_METRIC_KEYS, *NETWORK_KEYS))
    assert data["jobs"] > 5 and data["jobs_finished"] == data["jobs"] and data["jobs_unfinished"] == 0
    assert data["executors"] == 4 * 16  # 16-core, 64 GiB nodes: 16 one-core 2 GiB executors each
    assert data["cross_node_traffic_gb"] > 0 and data["policy"] == "k8s-default"


def test_jobs_are_the_pod_scenarios_queries_with_tasks() -> None:
    """Same queries, arrivals and core-seconds as the pod scenario for the seed; each stage WAVES tasks per core."""
    nodes, arrivals = spark_tpcds_jobs(4, 300.0, 1.0, seed=3)
    pods = list(make_scenario("spark-tpcds", nodes=4, duration=300.0, load=1.0, seed=3).iter_pods())
    by_job: dict[str, list] = {}
    for p in pods:
        by_job.setdefault(p.job_id, []).append(p)
    assert len(arrivals) == len(by_job) and executor_slots(nodes) == 64
    for a, group in zip(arrivals, by_job.values(), strict=True):
        assert a.arrival_s == group[0].arrival_s
        assert len(a.spec.stages) == len({p.task for p in group})
        core_s = sum(p.cpu_m / EXECUTOR_CPU_M * (p.work_s or 0.0) for p in group)
        assert sum(st.tasks * st.cpu_s for st in a.spec.stages) == pytest.approx(core_s)
        first = [p for p in group if p.task == "stage-0"]
        assert a.spec.stages[0].tasks == len(first) * first[0].cpu_m // EXECUTOR_CPU_M * WAVES
        assert a.spec.stages[0].parents == () and all(st.parents == (i,) for i, st in enumerate(a.spec.stages[1:]))
        assert sum(st.shuffle_mb for st in a.spec.stages) == pytest.approx(sum(p.shuffle_in_mb for p in group))


class _Capped:
    """Every job may hold at most `cap` executors, in arrival order."""

    name = "capped"

    def __init__(self, cap: int) -> None:
        self.cap = cap

    def decide(self, jobs: Sequence[Job], executors: int, critical_path: Callable[[Job], float]) -> Decision:
        return [(j, float(self.cap)) for j in jobs]


class _Checked(PlacedJobEngine):
    """Checks, at every placement and task launch, the executor limit and that no node is over-allocated."""

    most = 0

    def _place(self, ex: Executor, job: Job, t: float) -> bool:
        placed = super()._place(ex, job, t)
        self.cluster.check_invariants()
        assert sum(self.job_nodes[job.ident].values()) <= job.limit  # the job's executor pods on the nodes
        return placed

    def _task_start(self, ex: Executor, job: Job, s: int, t: float) -> float:
        assert ex.node >= 0 and job.running <= job.executors <= job.limit
        self.most = max(self.most, job.executors)
        return super()._task_start(ex, job, s, t)


@pytest.mark.parametrize("cap", [1, 3])
def test_executor_limits_hold_and_nodes_never_overflow(cap: int) -> None:
    nodes, arrivals = spark_tpcds_jobs(3, 200.0, 1.0, seed=1)
    cfg = EngineConfig(executors=executor_slots(nodes))
    engine = _Checked(arrivals, _Capped(cap), cfg, 1, nodes, make_policy("k8s-default"))
    out = engine.run()
    assert out["jobs_finished"] == len(arrivals) and engine.most == cap
    assert int(engine.cluster.pods.sum()) == 0 and int(engine.cluster.req_cpu.sum()) == 0  # every executor left


def test_placement_moves_cross_node_traffic() -> None:
    """data-local keeps a job's executors near its shuffle outputs: fewer bytes cross nodes than k8s-default's
    spreading (same jobs, same job policy)."""
    source = JobSource(scenario="spark-tpcds", nodes=6, duration_s=300.0, load=1.0)
    spread = run_jobs(source, "fifo", 0, "k8s-default")
    local = run_jobs(source, "fifo", 0, "data-local")
    assert spread["jobs"] == local["jobs"] and local["jobs_finished"] == local["jobs"]
    assert local["cross_node_traffic_gb"] < 0.9 * spread["cross_node_traffic_gb"]


def test_same_seed_same_run() -> None:
    source = JobSource(scenario="spark-tpcds", nodes=3, duration_s=200.0, load=1.0)
    a = run_jobs(source, "fair", 2, "data-local")
    b = run_jobs(source, "fair", 2, "data-local")
    assert {k: a[k] for k in (*JOB_METRIC_KEYS, *NETWORK_KEYS) if k != "task_completions_per_s"} == \
           {k: b[k] for k in (*JOB_METRIC_KEYS, *NETWORK_KEYS) if k != "task_completions_per_s"}


@pytest.mark.parametrize("argv, needle", [
    (["--policy", "k8s-default", "--job-policy", "nope"], "nope"),
    (["--policy", "nope", "--job-policy", "fifo"], "nope"),
    (["--policy", "k8s-default", "--job-policy", "fifo", "--batch", "3"], "--batch"),
    (["--policy", "k8s-default", "--job-policy", "weighted-fair:x"], "weighted-fair:x"),
])
def test_bad_input_one_line_exit_2(argv: list[str], needle: str, capsys) -> None:
    assert main(["simulate", *SMALL, *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and needle in err and "Traceback" not in err


def test_evaluate_crosses_job_and_placement_policies_and_writes_plots(tmp_path: Path) -> None:
    rc = main(["evaluate", *SMALL, "--policies", "k8s-default,data-local", "--job-policies", "fifo,fair",
               "--seeds", "2", "--jobs", "1", "--out", str(tmp_path)])
    assert rc == 0
    results = json.loads((tmp_path / "results.json").read_text())
    entries = ["fifo+k8s-default", "fifo+data-local", "fair+k8s-default", "fair+data-local"]
    assert results["meta"]["entries"] == entries and list(results["policies"]) == entries
    ratios = results["ratio_vs_fifo+k8s-default"]
    assert set(ratios) == set(entries[1:]) and "cross_node_traffic_gb" in ratios["fifo+data-local"]
    assert all(k in results["policies"]["fair+data-local"] for k in (*JOB_METRIC_KEYS, *NETWORK_KEYS))
    report = (tmp_path / "report.md").read_text()
    assert all(e in report for e in entries) and "cross-node (GB)" in report and "job_metrics.png" in report
    for plot in ("jct_cdf.png", "job_metrics.png"):
        data = (tmp_path / plot).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000


def test_without_a_job_policy_spark_tpcds_stays_pod_level(capsys) -> None:
    assert main(["simulate", *SMALL, "--policy", "k8s-default", "--json", "-"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert "pods" in data and "job_policy" not in data and "executor_starts" not in data
