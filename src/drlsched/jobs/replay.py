"""`drlsched replay --scenario tpch --job-policy NAME`: the job-level simulator's workload on a real cluster, with
the `drlsched admit` controller deciding which job's executor pods start.

The simulator (jobs/engine.py) stays the reference and does the driver's work: its stages, tasks, task run times
(the shared I/O bandwidth included) and executor idle timeouts run on the replay's clock (wall seconds × speedup),
so a task ends when the engine says. What the cluster decides instead of the engine is *when an executor joins its
job*: where the simulator draws a cold start, the replay creates the job's executor pods with the scheduling gate
`drlsched.io/admission` and its `drlsched.io/job` label, the admit controller (`AdmitController`, in-process,
the chosen job policy, the engine's executor pool) removes gates in the policy's order and limits, kube-scheduler
binds the pods to KWOK nodes, and the executor joins when its pod is seen Running. Its job's limit is the one the
controller's last pass set (an executor above it leaves at its next task boundary, as in the simulator); an
executor that leaves (idle timeout, lowered limit, job done) is its pod deleted.

Like Spark's dynamic allocation, a job asks for executors for its runnable tasks not yet served: it keeps as many
pods not yet running as its pending tasks, never more than the executors the cluster has free at the time (so a
busy cluster holds few gated pods), and deletes unbound ones its pending tasks no longer need. Policies that need
per-job metadata (weighted-fair, srpt-oracle, sjf-cp) get the engine's remaining work and critical path at every
decision point, as the policy file would give them. JCT runs from a job's arrival to its last task's end, in
workload seconds, so the metrics are the simulator's keys and comparable with `drlsched simulate`.
"""

from __future__ import annotations

import itertools
import logging
import math
import queue
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Protocol

import kubernetes
import numpy as np
import urllib3

from drlsched.errors import UserError
from drlsched.jobs.engine import INF, EngineConfig, JobEngine
from drlsched.jobs.model import Executor, Job, JobArrival
from drlsched.jobs.policies import make_job_policy
from drlsched.k8s.admission import GATE, NEEDS, PolicyFile
from drlsched.k8s.admit_controller import COMPONENT, AdmitController
from drlsched.k8s.events import EventRecorder
from drlsched.k8s.objects import JOB_LABEL, job_label_value, pod_manifest
from drlsched.replay import CREATE_THREADS, POD_LABEL, _delete_run, _Watcher

log = logging.getLogger("drlsched.replay")
ADMIT_PERIOD_S = 0.5  # wall seconds between controller passes when nothing asks for one sooner
ADMIT_GAP_S = 0.1  # the least wall time between two passes (each lists the namespace's pods)


@dataclass
class ExecutorPod:
    name: str
    job: int
    created: float  # workload seconds when its create went out
    released: float = -1.0  # when the controller's pass that removed its gate began
    bound: float = -1.0
    running: float = -1.0
    executor: Executor | None = None
    deleted: bool = False  # its delete went out
    seen: bool = False  # the watch has shown it
    gone: bool = False  # the API says it is deleted or ended


class PodOps(Protocol):
    """What the engine asks of the cluster (the API in a replay, a fake in tests)."""

    def create(self, pod: ExecutorPod, job: Job) -> None: ...

    def delete(self, pod: ExecutorPod) -> None: ...


class LiveJobEngine(JobEngine):
    """The engine with executors as pods: it never starts one itself (no drawn cold start), it asks `ops` for
    pods and an executor joins when `pod_event` says its pod runs; limits come from `set_limits`."""

    def __init__(self, arrivals: Sequence[JobArrival], policy_name: str, config: EngineConfig, ops: PodOps,
                 run_id: str = "run", seed: int = 0) -> None:
        super().__init__(arrivals, make_job_policy(policy_name), config, seed)
        self.ops = ops
        self.run_id = run_id
        self.need = NEEDS.get(self.policy.name.partition(":")[0])
        self.pods: dict[str, ExecutorPod] = {}  # every pod of the run, by name (gone ones too: their timings)
        self.unready: dict[int, list[ExecutorPod]] = {}  # per job, its pods not running yet, oldest first
        self.pod_of: dict[int, ExecutorPod] = {}  # executor ident -> its pod
        self.by_label: dict[str, int] = {}
        self.meta = PolicyFile(executors=config.executors)
        self.dirty = False
        self.names = itertools.count()

    @staticmethod
    def label(job_id: int) -> str:
        return job_label_value(f"job-{job_id}")

    # --- what the engine decided itself, now through the cluster ------------------------------------------------
    def _arrive(self, a: JobArrival, t: float) -> None:
        self.by_label[self.label(a.job_id)] = a.job_id
        super()._arrive(a, t)

    def _decide(self, t: float) -> None:
        """The controller decides limits and order; here only the metadata it needs is published."""
        if self.need is not None:
            self.meta = PolicyFile(self.cfg.executors, {
                self.label(j.ident): {"remaining_work_s": max(0.0, j.remaining_work_s),
                                      "critical_path_s": self._critical_path(j)} for j in self.active})
        self.dirty = True

    def _dispatch(self, t: float) -> None:
        self.dirty = True  # pods are asked for once per step of the driver (`reconcile`)

    def _release(self, ex: Executor, job: Job, t: float) -> None:
        super()._release(ex, job, t)
        pod = self.pod_of.pop(ex.ident)
        self._delete(pod)

    def _finish(self, job: Job, t: float) -> None:
        super()._finish(job, t)
        for pod in self.unready.pop(job.ident, []):
            self._delete(pod)

    def _delete(self, pod: ExecutorPod) -> None:
        if not pod.deleted:
            pod.deleted = True
            self.ops.delete(pod)
        self.dirty = True

    # --- from the cluster -------------------------------------------------------------------------------------
    def reconcile(self, t: float) -> int:
        """Each job's pods not yet running: up to its pending tasks, created only while executors are free;
        unbound ones beyond its pending tasks deleted. Returns the pods created."""
        if not self.dirty:
            return 0
        self.dirty = False
        created = 0
        free = max(0, self.free)
        for job in self.active:
            waiting = self.unready.setdefault(job.ident, [])
            want = min(job.pending, free)
            while len(waiting) < want:
                pod = ExecutorPod(f"x{job.ident:05d}-{next(self.names):06d}-{self.run_id}", job.ident, t)
                self.pods[pod.name] = pod
                waiting.append(pod)
                self.ops.create(pod, job)
                created += 1
            extra = len(waiting) - job.pending
            for pod in [p for p in waiting if p.bound < 0][::-1][:max(0, extra)]:  # newest unbound first
                waiting.remove(pod)
                self._delete(pod)
        return created

    def pod_event(self, name: str, node: str, phase: str | None, deleted: bool, t: float) -> bool:
        """A change the watch saw; whether the controller has something new to decide (a pod it can release
        landed, or one that held an executor is gone)."""
        pod = self.pods.get(name)
        if pod is None or pod.gone:
            return False
        first = not pod.seen
        pod.seen = True
        if deleted or phase in ("Succeeded", "Failed"):
            pod.gone = True
            if pod.executor is None:  # never joined: it no longer serves its job's pending tasks
                waiting = self.unready.get(pod.job, [])
                if pod in waiting:
                    waiting.remove(pod)
                self.dirty = True
            elif not pod.deleted:
                log.warning("executor pod %s ended under a running job: its executor stays counted", name)
            return True
        if node and pod.bound < 0:
            pod.bound = t
        if phase == "Running" and pod.running < 0 and not pod.deleted:
            pod.running = t
            self._join(pod, t)
        return first

    def _join(self, pod: ExecutorPod, t: float) -> None:
        """Its pod runs: the executor joins its job (the engine's executor-ready), or the pod goes unused."""
        job = self.jobs.get(pod.job)
        waiting = self.unready.get(pod.job, [])
        if pod in waiting:
            waiting.remove(pod)
        if job is None:
            self._delete(pod)
            return
        ex = Executor(next(self.ex_ids), job.ident, t, True, False, 0)
        pod.executor = ex
        self.pod_of[ex.ident] = pod
        job.executors += 1
        self.free -= 1
        self.acc.executor_starts += 1
        self._next(ex, job, t)

    def set_limits(self, limits: dict[str, float | None], t: float) -> None:
        """The controller's last pass: each job's limit (None: none); idle executors above it leave now."""
        for key, limit in limits.items():
            job = self.jobs.get(self.by_label.get(key.rpartition("/")[2], -1))
            if job is None:
                continue
            job.limit = INF if limit is None else limit
            while job.executors > job.limit and job.idle:
                self._release(job.idle.pop(), job, t)

    def done(self) -> bool:
        return len(self.acc.jct) == len(self.arrivals)


class KubePods:
    """Creates and deletes executor pods through the API from a few threads (one request at a time falls behind
    at a few hundred pods a second)."""

    def __init__(self, core: kubernetes.client.CoreV1Api, namespace: str, run_id: str,
                 scheduler_name: str = "default-scheduler", clock: Callable[[], float] = time.monotonic) -> None:
        self.core, self.namespace, self.run_id, self.scheduler_name = core, namespace, run_id, scheduler_name
        self.pool = ThreadPoolExecutor(CREATE_THREADS, thread_name_prefix="drlsched-replay-create")
        # Deletes free executors the controller counts until they are gone: a burst of creates must not delay them.
        self.deletes = ThreadPoolExecutor(CREATE_THREADS // 2, thread_name_prefix="drlsched-replay-delete")
        self.refused: list[str] = []
        self.clock = clock
        self.lags: list[float] = []  # wall seconds from asking for a write to its answer (queue included)

    def create(self, pod: ExecutorPod, job: Job) -> None:
        m = pod_manifest(pod.name, f"{job.spec.executor_cpu_m}m", f"{job.spec.executor_mem_mib}Mi", duration=None,
                         labels={POD_LABEL: self.run_id, JOB_LABEL: LiveJobEngine.label(job.ident)})
        m["spec"]["schedulingGates"] = [{"name": GATE}]
        if self.scheduler_name != "default-scheduler":
            m["spec"]["schedulerName"] = self.scheduler_name
        self.pool.submit(self._call, self.clock(), self.core.create_namespaced_pod, pod.name, self.namespace, m)

    def delete(self, pod: ExecutorPod) -> None:
        self.deletes.submit(self._call, self.clock(), self.core.delete_namespaced_pod, pod.name, pod.name,
                            self.namespace, grace_period_seconds=0)

    def _call(self, asked: float, fn: Callable[..., object], name: str, *args: object, **kwargs: object) -> None:
        try:
            resp = fn(*args, _preload_content=False, **kwargs)
            resp.read()  # type: ignore[attr-defined]
            resp.release_conn()  # type: ignore[attr-defined]
        except kubernetes.client.ApiException as err:
            if err.status != 404:  # a pod already gone needs no delete
                self.refused.append(f"the API refused pod {name}: {err.status} {err.reason}")
        except urllib3.exceptions.HTTPError as err:
            self.refused.append(f"cannot reach the API for pod {name}: {err}")
        self.lags.append(self.clock() - asked)

    def close(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)
        self.deletes.shutdown(wait=True, cancel_futures=True)


class _Admit(threading.Thread):
    """The admit controller beside the replay: a pass when the driver asks (pods created or freed), else every
    ADMIT_PERIOD_S; each pass takes the engine's latest metadata and hands back the limits it set."""

    def __init__(self, controller: AdmitController, engine: LiveJobEngine, clock: Callable[[], float]) -> None:
        super().__init__(daemon=True, name="drlsched-replay-admit")
        self.controller, self.engine, self.clock = controller, engine, clock
        self.wake = threading.Event()
        self.stopping = threading.Event()
        self.passes_out: queue.Queue[tuple[dict[str, float | None], list[str], float]] = queue.Queue()
        self.passes = 0

    def run(self) -> None:
        while not self.stopping.is_set():
            self.wake.wait(ADMIT_PERIOD_S)
            self.wake.clear()
            if self.stopping.is_set():
                return
            began = time.monotonic()
            at = self.clock()
            self.controller.meta = self.engine.meta
            try:
                result = self.controller.step()
            except Exception as err:  # an API hiccup: the next pass retries
                log.warning("admit pass failed: %s", err)
            else:
                self.passes += 1
                self.passes_out.put((result.limits, result.released, at))
            time.sleep(max(0.0, ADMIT_GAP_S - (time.monotonic() - began)))

    def stop(self) -> None:
        self.stopping.set()
        self.wake.set()
        self.join(timeout=30)


@dataclass
class JobReplayResult:
    metrics: dict[str, object]
    jct: list[float] = field(default_factory=list)


def replay_jobs(arrivals: Sequence[JobArrival], config: EngineConfig, job_policy: str,
                core: kubernetes.client.CoreV1Api, *, namespace: str = "default", speedup: float = 1.0,
                horizon_s: float | None = None, pending_timeout_s: float = 30.0, seed: int = 0,
                scheduler_name: str = "default-scheduler", keep_pods: bool = False,
                progress: Callable[[int, int], None] | None = None) -> JobReplayResult:
    """Replay the jobs on the cluster behind `core` with the admit controller under `job_policy`; the engine's
    metric keys plus the replay's (executor start latency, passes). Stops when every job has finished, at
    `horizon_s` workload seconds, or when jobs wait `pending_timeout_s` wall seconds with no task running and no
    pod event."""
    if not (math.isfinite(speedup) and speedup > 0):
        raise UserError(f"--speedup must be a positive number, got {speedup}")
    run_id = uuid.uuid4().hex[:10]
    t0 = time.monotonic()

    def clock() -> float:
        return time.monotonic() - t0

    ops = KubePods(core, namespace, run_id, scheduler_name, clock)
    engine = LiveJobEngine(arrivals, job_policy, config, ops, run_id, seed)
    # Events would double the API writes per executor start on a small testbed; the replay measures, it posts none.
    recorder = EventRecorder(None, COMPONENT, post=lambda path, body: None)
    controller = AdmitController(core.api_client, make_job_policy(job_policy), executors=config.executors,
                                 namespace=namespace, recorder=recorder)
    events: queue.Queue = queue.Queue()
    watcher = _Watcher(core, namespace, run_id, clock, events)
    admit = _Admit(controller, engine, clock)
    stop_w = (horizon_s if horizon_s is not None else config.horizon_s) / speedup
    watcher.start()
    admit.start()
    engine.start()
    last_event = 0.0
    tasks_seen = 0
    delays: list[float] = []  # workload seconds between a pod event's arrival and the driver acting on it
    try:
        while True:
            if ops.refused:
                raise UserError(ops.refused[0])
            now = clock()
            if engine.done() or now >= stop_w:
                break
            wait = min(0.05, max(0.0, (engine.next_event_s() / speedup) - now))
            batch = []
            try:
                batch.append(events.get(timeout=wait))
                while True:
                    batch.append(events.get_nowait())
            except queue.Empty:
                pass
            news = False
            for name, node, phase, at, deleted in batch:  # each at its own time, after the engine's before it
                engine.advance(at * speedup)
                engine.clock_to(at * speedup)
                news = engine.pod_event(name, node, phase, deleted, at * speedup) or news
                last_event = at
            if batch:
                delays.append((clock() - batch[0][3]) * speedup)
            while not admit.passes_out.empty():
                limits, released, at = admit.passes_out.get_nowait()
                engine.advance(at * speedup)
                engine.clock_to(at * speedup)
                engine.set_limits(limits, at * speedup)
                for key in released:
                    pod = engine.pods.get(key.partition("/")[2])
                    if pod is not None:
                        pod.released = at * speedup
            now = clock()
            engine.advance(now * speedup)
            engine.clock_to(now * speedup)
            engine.reconcile(now * speedup)
            if news:
                admit.wake.set()
            if progress is not None:
                progress(len(engine.acc.jct), len(arrivals))
            if engine.running or engine.acc.tasks_done != tasks_seen or not engine.active:
                tasks_seen, last_event = engine.acc.tasks_done, now
            if now - last_event > pending_timeout_s:  # jobs wait, yet no task runs and no pod moved: stuck
                log.warning("nothing ran and no executor pod moved for %.0f s: stopping (is kube-scheduler "
                            "running, and do the executors fit the nodes?)", pending_timeout_s)
                break
    finally:
        admit.stop()
        ops.close()
        watcher.stop.set()
        if not keep_pods:
            _delete_run(core, namespace, run_id)
    wall = clock()
    metrics: dict[str, object] = dict(engine.finish(wall))
    metrics.update(start_latency(list(engine.pods.values())))
    metrics["driver_delay_p99_s"] = float(np.percentile(delays, 99)) if delays else None
    lags = np.asarray(ops.lags) * speedup
    metrics["pod_write_lag_p50_s"] = float(np.percentile(lags, 50)) if lags.size else None
    metrics["pod_write_lag_p99_s"] = float(np.percentile(lags, 99)) if lags.size else None
    metrics.update({"source": "replay", "speedup": speedup, "wall_s": wall, "admit_passes": admit.passes,
                    "executor_pods": next(engine.names)})
    return JobReplayResult(metrics, list(engine.acc.jct))


def start_latency(pods: Sequence[ExecutorPod]) -> dict[str, float | None]:
    """Workload seconds from the controller's release of an executor pod to its Running (the replay's cold start:
    the gate patch, kube-scheduler's bind, KWOK's start, the watch): median and P99 over the pods that ran."""
    ran = [p for p in pods if p.running >= 0 <= p.released and p.bound >= 0]
    out: dict[str, float | None] = {}
    for key, values in (("executor_start", [p.running - p.released for p in ran]),
                        ("release_to_bind", [p.bound - p.released for p in ran]),
                        ("bind_to_running", [p.running - p.bound for p in ran])):
        out[f"{key}_p50_s"] = float(np.percentile(values, 50)) if values else None
        out[f"{key}_p99_s"] = float(np.percentile(values, 99)) if values else None
    return out
