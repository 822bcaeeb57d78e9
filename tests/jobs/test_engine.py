"""The job engine's executor rules and the job policies' decisions (small hand-made jobs, no timing)."""

from __future__ import annotations

import math

import pytest

from drlsched.errors import UserError
from drlsched.jobs.engine import EngineConfig, JobEngine
from drlsched.jobs.model import JobArrival, JobSpec, StageSpec
from drlsched.jobs.policies import JOB_POLICIES, Fair, Fifo, SrptOracle, WeightedFair, make_job_policy
from drlsched.jobs.workload import JobSource, run_jobs


def _job(name: str, tasks: int, cpu: float = 1.0, io: float = 0.0, stages: int = 1) -> JobSpec:
    st = tuple(StageSpec(i, tasks, cpu, io, parents=(i - 1,) if i else ()) for i in range(stages))
    return JobSpec(name, "0", 1, st, profile_cores=1)


def _cfg(executors: int, **kw: float) -> EngineConfig:
    return EngineConfig(executors=executors, startup_mean_s=1.0, startup_std_s=0.0, **kw)


def test_fifo_single_job_uses_all_executors_once() -> None:
    m = JobEngine([JobArrival(0, 0.0, _job("a", 40, cpu=2.0))], Fifo(), _cfg(10)).run()
    assert m["tasks_done"] == 40
    assert m["executor_starts"] == 10  # no churn: each executor stays for all its tasks
    assert m["makespan_s"] == pytest.approx(1.0 + 4 * 2.0)  # cold start, then 4 waves


def test_shared_bandwidth_slows_every_job() -> None:
    """Two I/O-only jobs together: each reads at half the bandwidth, so the pair takes the sum of both alone."""
    alone = JobEngine([JobArrival(0, 0.0, _job("a", 4, cpu=0.0, io=1.0))], Fifo(), _cfg(8)).run()["makespan_s"]
    both = JobEngine([JobArrival(0, 0.0, _job("a", 4, cpu=0.0, io=1.0)),
                      JobArrival(1, 0.0, _job("b", 4, cpu=0.0, io=1.0))], Fifo(), _cfg(8)).run()["makespan_s"]
    assert alone == pytest.approx(1.0 + 4.0)
    assert both == pytest.approx(1.0 + 8.0)


def test_idle_executors_leave_after_the_timeout() -> None:
    """A 1-task second stage leaves 9 executors idle; they stay the timeout, then leave (allocated time shows it)."""
    spec = JobSpec("a", "0", 1, (StageSpec(0, 10, 1.0, 0.0), StageSpec(1, 1, 100.0, 0.0, parents=(0,))), 1)
    m = JobEngine([JobArrival(0, 0.0, spec)], Fifo(), _cfg(10, idle_timeout_s=5.0)).run()
    busy = 10 * 1.0 + 100.0
    alloc = 10 * 1.0 + 10 * 1.0 + 9 * 5.0 + 100.0  # cold starts, first stage, 9 idle until the timeout, the task
    assert m["executor_util"] == pytest.approx(busy / alloc)


def test_lowered_limit_releases_at_task_boundaries_never_killing() -> None:
    """srpt-oracle takes executors from a big job for a small one only as its tasks end."""
    arrivals = [JobArrival(0, 0.0, _job("big", 100, cpu=10.0)), JobArrival(1, 5.0, _job("small", 4, cpu=1.0))]
    m = JobEngine(arrivals, SrptOracle(), _cfg(4)).run()
    assert m["tasks_done"] == 104
    # the small job waits for the big one's running tasks (started at t=1, end at 11), cold start, one wave: done
    # at 13; the big one gets its executors back (cold start again, ready at 14) for its other 24 waves
    assert m["jct_mean_s"] == pytest.approx(((13.0 - 5.0) + (14.0 + 24 * 10.0)) / 2)
    assert m["executor_starts"] == 12


def test_policies_decide_limits() -> None:
    arrivals = [JobArrival(i, 0.0, _job(str(i), 10 * (i + 1))) for i in range(3)]
    engine = JobEngine(arrivals, Fair(), _cfg(9))
    for a in arrivals:
        engine._arrive(a, 0.0)
    jobs = engine.active
    assert [lim for _, lim in Fair().decide(jobs, 9, engine._critical_path)] == [3.0, 3.0, 3.0]
    assert [lim for _, lim in Fair(2.0).decide(jobs, 9, engine._critical_path)] == [6.0, 6.0, 6.0]
    assert all(math.isinf(lim) for _, lim in Fifo().decide(jobs, 9, engine._critical_path))
    small_first = WeightedFair(-1.0).decide(jobs, 9, engine._critical_path)
    assert small_first[0][1] > small_first[2][1]
    assert WeightedFair(0.0).decide(jobs, 9, engine._critical_path)[0][1] == 3.0


@pytest.mark.parametrize("name", JOB_POLICIES)
def test_every_policy_finishes_every_job(name: str) -> None:
    m = run_jobs(JobSource(nodes=2, batch=6), name, 0)
    assert m["jobs_finished"] == 6 and m["jobs_unfinished"] == 0


@pytest.mark.parametrize(("spec", "message"), [("nope", "unknown job policy"), ("weighted-fair:x", "α must be"),
                                               ("fair:0", "above 0"), ("fifo:1", "takes no parameter")])
def test_bad_job_policy_is_one_line(spec: str, message: str) -> None:
    with pytest.raises(UserError, match=message):
        make_job_policy(spec)
