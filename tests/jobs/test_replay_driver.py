"""The job replay's driver (jobs/replay.py) without a cluster: a fake admits executor pods in fifo order and starts
each a fixed time after its release. With that fake's start time as the simulator's (fixed) cold start, the
replay's engine must reproduce the simulator job for job; and the refusals of `replay --job-policy`."""

from __future__ import annotations

import heapq
import math
from dataclasses import replace

import pytest

from drlsched.cli import main
from drlsched.jobs.engine import EngineConfig, JobEngine
from drlsched.jobs.model import JobArrival, JobSpec, StageSpec
from drlsched.jobs.policies import make_job_policy
from drlsched.jobs.replay import ExecutorPod, LiveJobEngine, start_latency
from drlsched.jobs.workload import JobSource


class FifoCluster:
    """`pool` executor slots; gated pods released oldest job first, its oldest pod first; a released pod runs
    `start_s` later; a deleted pod frees its slot at once."""

    def __init__(self, pool: int, start_s: float = 1.0) -> None:
        self.pool, self.start_s = pool, start_s
        self.gated: list[ExecutorPod] = []
        self.released: set[str] = set()
        self.starts: list[tuple[float, str]] = []
        self.deleted: list[str] = []

    def create(self, pod: ExecutorPod, job: object) -> None:
        self.gated.append(pod)

    def delete(self, pod: ExecutorPod) -> None:
        self.deleted.append(pod.name)
        if pod in self.gated:
            self.gated.remove(pod)
        self.released.discard(pod.name)

    def release(self, t: float) -> None:
        self.gated.sort(key=lambda p: (p.job, p.name))
        while self.gated and len(self.released) < self.pool:
            pod = self.gated.pop(0)
            pod.released = t
            self.released.add(pod.name)
            heapq.heappush(self.starts, (t + self.start_s, pod.name))


def drive(engine: LiveJobEngine, cluster: FifoCluster) -> None:
    """The replay's loop on a virtual clock: engine events and pod starts in time order."""
    engine.start()
    while not engine.done():
        t_engine = engine.next_event_s()
        t_pod = cluster.starts[0][0] if cluster.starts else math.inf
        assert min(t_engine, t_pod) < math.inf, "stuck: no event and jobs left"
        if t_pod <= t_engine:
            t, name = heapq.heappop(cluster.starts)
            engine.advance(t)
            engine.clock_to(t)
            engine.pod_event(name, "node-0", "Running", False, t)
        else:
            engine.advance(t_engine)
        engine.reconcile(engine.t)
        for job in engine.active:  # never more pods waiting than tasks to serve
            assert len(engine.unready.get(job.ident, [])) <= job.pending
        cluster.release(engine.t)


@pytest.mark.parametrize(("nodes", "duration"), [(3, 7200.0), (8, 3600.0)])
def test_fifo_replay_reproduces_the_simulator(nodes: int, duration: float) -> None:
    source = JobSource(nodes=nodes, duration_s=duration, load=0.85)
    cfg = replace(source.config(), startup_std_s=0.0)  # the simulator's cold start fixed at its 1 s mean
    arrivals = source.arrivals(1)
    sim = JobEngine(arrivals, make_job_policy("fifo"), cfg, 1)
    expected = sim.run()
    live = LiveJobEngine(arrivals, "fifo", cfg, FifoCluster(cfg.executors, cfg.startup_mean_s))
    drive(live, live.ops)  # type: ignore[arg-type]
    got = live.finish(0.0)
    assert len(arrivals) >= 1 and got["jobs_finished"] == len(arrivals)
    assert list(live.acc.jct) == pytest.approx(list(sim.acc.jct), rel=1e-9)
    assert got["executor_starts"] == expected["executor_starts"]
    assert got["tasks_done"] == expected["tasks_done"]
    lat = start_latency(list(live.pods.values()))
    assert lat["executor_start_p50_s"] == pytest.approx(1.0)


def _one_job(tasks: int) -> list[JobArrival]:
    spec = JobSpec("j", "0", 1, (StageSpec(0, tasks, 10.0, 0.0), StageSpec(1, 1, 5.0, 0.0, parents=(0,))), 1)
    return [JobArrival(0, 0.0, spec)]


def test_lowered_limit_leaves_at_task_boundaries() -> None:
    cfg = EngineConfig(executors=8)
    cluster = FifoCluster(8)
    engine = LiveJobEngine(_one_job(8), "fifo", cfg, cluster)
    engine.start()
    engine.advance(0.0)
    assert engine.reconcile(0.0) == 8  # one pod per pending task, all 8 free
    for pod in list(engine.pods.values()):
        engine.pod_event(pod.name, "node-0", "Running", False, 1.0)
    engine.set_limits({"ns/job-0": 2}, 2.0)
    assert cluster.deleted == []  # all busy: nobody is killed mid-task
    engine.advance(11.0)  # the tasks end at 11: six executors leave, two stay for stage 1 (one busy, one idle)
    assert len(cluster.deleted) == 6
    assert engine.jobs[0].executors == 2


def test_pod_running_after_its_job_ended_is_deleted_unused() -> None:
    cluster = FifoCluster(4)
    engine = LiveJobEngine(_one_job(1), "fifo", EngineConfig(executors=4), cluster)
    engine.start()
    engine.advance(0.0)
    engine.reconcile(0.0)
    first = next(iter(engine.pods.values()))
    engine.pod_event(first.name, "node-0", "Running", False, 1.0)
    engine.advance(math.inf)  # its two tasks run on the one executor: the job ends at 16
    assert engine.done() and list(engine.acc.jct) == [16.0]
    late = ExecutorPod("late", 0, 2.0)
    engine.pods["late"] = late
    engine.pod_event("late", "node-0", "Running", False, 17.0)
    assert "late" in cluster.deleted and late.executor is None


def test_unknown_job_policy_fails_before_any_cluster() -> None:
    from drlsched.errors import UserError

    with pytest.raises(UserError, match="unknown job policy"):
        LiveJobEngine(_one_job(1), "nope", EngineConfig(executors=1), FifoCluster(1))


@pytest.mark.parametrize(("argv", "needle"), [
    (["--scenario", "ml-gpu", "--job-policy", "fifo"], "--job-policy needs a job workload"),
    (["--scenario", "tpch", "--job-policy", "weighted-fair:x"], "weighted-fair:x"),
    (["--scenario", "spark-tpcds", "--job-policy", "fifo"], "not spark-tpcds"),
    (["--scenario", "tpch", "--job-policy", "fifo"], "kubeconfig /nonexistent/kubeconfig does not exist"),
])
def test_replay_job_policy_refusals_exit_2(argv: list[str], needle: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["replay", *argv, "--kubeconfig", "/nonexistent/kubeconfig", "--json", "-"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and needle in err
