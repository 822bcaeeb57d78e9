"""Replay a workload on a real cluster and compute the simulator's metrics from what the API shows.

Pods are created at their arrival times divided by `speedup` (a DAG child when its parent tasks have finished,
as in the simulator), with their run time (also divided) as the KWOK duration annotation and their mean usage as
KWOK usage annotations. A watch records, on the replayer's clock, when each pod is bound, starts and succeeds;
times are multiplied back by `speedup`, so the metrics are in workload seconds and comparable with a
simulation of the same workload. What KWOK does not model is not invented: there is no CPU contention (batch
pods run for their annotated time; utilisation is request × mean usage ratio while running), so the SLA counts
pending-time violations only.

With a reclaim model (`reclaim`), BE pods request batch resources and the reclaim controller
(`drlsched.k8s.reclaim_controller`) runs beside the replay on the cluster's metrics.k8s.io, its period and window
divided by `speedup` (never under metrics-server's 10 s resolution), nothing lent before its first pass one period
in (as in the simulator). A pod the controller evicts is created again
under a new name (the simulator's requeue: its progress is lost, its JCT runs from its first creation) and counted
in `evictions`. The workload's load curve (daily cycle, bursts) is then applied to the running services' CPU usage
annotations every `USAGE_PERIOD_S` (wall), so the controller measures what the simulator's reclaim model sees.
"""

from __future__ import annotations

import itertools
import json
import logging
import math
import queue
import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace

import kubernetes
import numpy as np
import urllib3
from kubernetes.watch.watch import iter_resp_lines

from drlsched.cluster import Cluster
from drlsched.errors import UserError
from drlsched.fragmentation import FragmentationTracker, ShapeCounter
from drlsched.k8s.objects import (
    CPU_USAGE_ANNOTATION,
    GPU_MODEL_LABEL,
    GPU_UTIL_ANNOTATION,
    JOB_LABEL,
    MEMORY_USAGE_ANNOTATION,
    PARENTS_ANNOTATION,
    TASK_ANNOTATION,
    job_label_value,
    node_specs,
    pod_manifest,
)
from drlsched.k8s.reclaim_controller import METRICS_RESOLUTION_S, ReclaimController
from drlsched.metrics import STARTUP_SLO_S, UNSCHEDULABLE_S, Accumulator, Anomaly, summarize
from drlsched.reclaim import ReclaimConfig
from drlsched.sched.jobs import Job, JobBook
from drlsched.simulator import horizon
from drlsched.workload import PodSpec, QoS, Workload

log = logging.getLogger("drlsched.replay")
POD_LABEL = "drlsched.io/replay"
MIN_DURATION_MS = 10
SLA_PENDING_S = 5.0
CREATE_THREADS = 8
USAGE_PERIOD_S = 5.0  # wall seconds between updates of the services' usage annotations (with reclaim)


@dataclass
class PodRecord:
    spec: PodSpec
    name: str
    due: float = -1.0  # replayer clock when the schedule says to create it (arrival, or its parents' end)
    ready: float = -1.0  # replayer clock when its create request went out
    bound: float = -1.0
    started: float = -1.0
    ended: float = -1.0
    node: str = ""
    evictions: int = 0
    startup: float = -1.0  # replayer seconds from its (first) creation to its first observed start
    queued: float = -1.0  # replayer clock when its current stay in the queue began, after an eviction (-1: ready)
    waited: float = 0.0  # replayer seconds it was pending in earlier stays (before evictions)


def as_replayed(spec: PodSpec) -> PodSpec:
    """The pod as vanilla Kubernetes runs it: no GPU sharing (a share takes a whole GPU) and no elastic GPU count.
    Simulate `replayed_workload(w)` to compare a simulation with a replay of w pod for pod."""
    return replace(spec, gpu_milli=1000, gpu_options=(), elastic_speedup=1.0) if spec.gpus else spec


def replayed_workload(workload: Workload) -> Workload:
    return replace(workload, pods=map(as_replayed, workload.pods))


def _manifest(rec: PodRecord, speedup: float, scheduler_name: str, run_id: str, batch: bool = False,
              ) -> dict[str, object]:
    spec = rec.spec
    duration = None
    if spec.work_s is not None:
        duration = f"{max(MIN_DURATION_MS, round(1000 * spec.work_s / speedup))}ms"
    annotations = {
        CPU_USAGE_ANNOTATION: f"{max(1, round(spec.cpu_m * spec.usage_cpu))}m",
        MEMORY_USAGE_ANNOTATION: f"{max(1, round(spec.mem_mib * spec.usage_mem))}Mi",
    }
    if spec.task:
        annotations[TASK_ANNOTATION] = spec.task
    if spec.parents:
        annotations[PARENTS_ANNOTATION] = ",".join(spec.parents)
    if spec.gpus:
        annotations[GPU_UTIL_ANNOTATION] = f"{spec.usage_gpu:.3f}"
    m = pod_manifest(rec.name, f"{spec.cpu_m}m", f"{spec.mem_mib}Mi", spec.gpus, duration, annotations,
                     {POD_LABEL: run_id, JOB_LABEL: job_label_value(spec.job_id)},
                     batch=batch and spec.qos == QoS.BE)
    if scheduler_name != "default-scheduler":
        m["spec"]["schedulerName"] = scheduler_name  # type: ignore[index]
    if spec.gpus and spec.gpu_models:  # one of several models: required node affinity (a selector is one value)
        term = {"matchExpressions": [{"key": GPU_MODEL_LABEL, "operator": "In", "values": list(spec.gpu_models)}]}
        m["spec"]["affinity"] = {  # type: ignore[index]
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}}
    return m


class _Watcher(threading.Thread):
    """Pushes (pod name, node, phase, replayer time, deleted) for every change of the run's pods.

    Events are decoded as plain JSON: the client's model deserialisation costs milliseconds per event, which at
    hundreds of pods a second starves the thread that creates the pods."""

    def __init__(self, core: kubernetes.client.CoreV1Api, namespace: str, run_id: str, clock: Callable[[], float],
                 out: queue.Queue) -> None:
        super().__init__(daemon=True)
        self.core, self.namespace, self.run_id, self.clock, self.out = core, namespace, run_id, clock, out
        self.stop = threading.Event()

    def run(self) -> None:
        version = None
        while not self.stop.is_set():
            kwargs = {"label_selector": f"{POD_LABEL}={self.run_id}", "timeout_seconds": 5, "watch": True,
                      "_preload_content": False}
            if version:
                kwargs["resource_version"] = version
            try:
                resp = self.core.list_namespaced_pod(self.namespace, **kwargs)
            except (kubernetes.client.ApiException, urllib3.exceptions.HTTPError):
                time.sleep(0.2)
                continue
            try:
                for line in iter_resp_lines(resp):
                    if not line.strip():
                        continue
                    ev = json.loads(line)
                    pod = ev["object"]
                    if ev["type"] == "ERROR":
                        if pod.get("code") == 410:  # resource version too old: watch again from now
                            version = None
                        break
                    version = pod["metadata"]["resourceVersion"]
                    if ev["type"] != "BOOKMARK":
                        self.out.put((pod["metadata"]["name"], pod["spec"].get("nodeName") or "",
                                      pod.get("status", {}).get("phase"), self.clock(), ev["type"] == "DELETED"))
                    if self.stop.is_set():
                        break
            except (urllib3.exceptions.HTTPError, ValueError):
                time.sleep(0.2)
            finally:
                resp.release_conn()


def replay(workload: Workload, core: kubernetes.client.CoreV1Api, *, namespace: str = "default",
           scheduler_name: str = "default-scheduler", speedup: float = 1.0, pending_timeout_s: float = 30.0,
           horizon_s: float | None = None, keep_pods: bool = False,
           progress: Callable[[int, int], None] | None = None,
           reclaim: ReclaimConfig | None = None) -> dict[str, object]:
    """Replay the workload's pods on the cluster behind `core`; returns the simulator's metric keys.

    The replay stops when every pod has finished, or at `horizon_s` workload seconds (default: the simulator's
    horizon, the window then 10 × it), where pods still running count as running at the end as in a simulation.
    The run's pods are deleted at the end unless `keep_pods`."""
    if not (math.isfinite(speedup) and speedup > 0):
        raise UserError(f"--speedup must be a positive number, got {speedup}")
    batch = reclaim is not None and reclaim.enabled
    cluster = Cluster(node_specs(core), reclaim=batch)
    if not cluster.size:
        raise UserError("the cluster has no nodes")
    controller = _Controller(core.api_client, reclaim, speedup) if reclaim is not None and batch else None
    run_id = uuid.uuid4().hex[:10]
    stop_s = (horizon_s if horizon_s is not None else horizon(workload.duration_s, workload.drain_s)) / speedup
    t0 = time.monotonic()

    def clock() -> float:
        return time.monotonic() - t0

    events: queue.Queue = queue.Queue()
    watcher = _Watcher(core, namespace, run_id, clock, events)
    watcher.start()
    records: dict[str, PodRecord] = {}
    jobs: dict[str, Job[PodRecord]] = {}
    book: JobBook[PodRecord] = JobBook()
    seq = itertools.count()
    pods_iter = workload.iter_pods()
    nxt = next(pods_iter, None)
    created = finished = 0

    # Creates go out from a few threads: one request at a time falls behind the arrival schedule at a few
    # hundred pods a second, which would stretch the workload (the replay reports its lag, `submit_lag_p99_s`).
    pool = ThreadPoolExecutor(CREATE_THREADS, thread_name_prefix="drlsched-replay-create")
    refused: list[str] = []

    def post(rec: PodRecord) -> None:
        if rec.ready < 0:  # an evicted pod created again keeps its first creation time
            rec.ready = clock()
        try:
            resp = core.create_namespaced_pod(namespace, _manifest(rec, speedup, scheduler_name, run_id, batch),
                                              _preload_content=False)
            resp.read()
            resp.release_conn()
        except kubernetes.client.ApiException as err:
            refused.append(f"the API refused pod {rec.name}: {err.status} {err.reason}")
        except urllib3.exceptions.HTTPError as err:
            refused.append(f"cannot create pod {rec.name}: {err}")

    def create(rec: PodRecord, due: float) -> None:
        nonlocal created
        rec.due = due
        created += 1
        pool.submit(post, rec)

    def release(t: float) -> None:
        for rec in book.release():
            create(rec, max(t, rec.spec.arrival_s / speedup))

    def requeue(rec: PodRecord) -> None:
        """An evicted pod goes back to the queue: created again under a new name, its progress lost."""
        del records[rec.name]
        rec.evictions += 1
        rec.waited += max(0.0, rec.bound - (rec.queued if rec.queued >= 0 else rec.ready))
        rec.queued = clock()
        rec.bound = rec.started = -1.0
        rec.node = ""
        rec.name = f"r{next(seq):06d}-{run_id}"
        records[rec.name] = rec
        pool.submit(post, rec)

    def follow_load(t: float) -> None:
        """The services' CPU usage at the workload's load curve now (the simulator's `load_curve` factor)."""
        assert workload.load_curve is not None
        load = workload.load_curve(t * speedup)
        for rec in list(records.values()):
            if rec.spec.service and rec.started >= 0 > rec.ended:
                value = f"{max(1, round(rec.spec.cpu_m * rec.spec.usage_cpu * load))}m"
                pool.submit(_annotate, core, namespace, rec.name, {CPU_USAGE_ANNOTATION: value})

    if controller is not None:
        controller.start()
    next_usage = 0.0 if controller is not None and workload.load_curve is not None else math.inf
    try:
        last_change = clock()
        while True:
            if refused:
                raise UserError(refused[0])
            now = clock()
            if now >= next_usage:
                next_usage = now + USAGE_PERIOD_S
                follow_load(now)
            while nxt is not None and nxt.arrival_s / speedup <= now:
                spec = as_replayed(nxt)
                rec = PodRecord(spec, f"r{next(seq):06d}-{run_id}")
                records[rec.name] = rec
                if book.arrive(jobs.setdefault(spec.job_id, Job()), spec, rec):
                    create(rec, spec.arrival_s / speedup)
                nxt = next(pods_iter, None)
            release(now)  # after the whole instant: parents arriving with a child count
            waiting = any(j.n_waiting for j in jobs.values())
            if nxt is None and not waiting and finished == created:
                break
            if nxt is None and now - last_change > pending_timeout_s:
                break  # nothing has moved for a while: only unschedulable pods (or their children) are left
            if now >= stop_s:
                break
            wait = 0.05 if nxt is None else min(0.05, max(0.001, nxt.arrival_s / speedup - now))
            try:
                name, node, phase, at, deleted = events.get(timeout=wait)
            except queue.Empty:
                continue
            rec = records.get(name)
            if rec is None:
                continue
            last_change = at
            if deleted and rec.ended < 0:
                requeue(rec)  # only the reclaim controller deletes a running pod during a replay
                continue
            if node and rec.bound < 0:
                rec.bound, rec.node = at, node
            if phase in ("Running", "Succeeded") and rec.started < 0:
                rec.started = at
                if rec.startup < 0:
                    rec.startup = at - rec.ready
            if phase in ("Succeeded", "Failed") and rec.ended < 0:
                rec.ended = at
                finished += 1
                book.finish(jobs[rec.spec.job_id], rec.spec.task)
                release(at)
                if progress:
                    progress(finished, len(records))
    finally:
        if controller is not None:
            controller.stop()
        pool.shutdown(wait=True, cancel_futures=True)
        watcher.stop.set()
        if not keep_pods:
            _delete_run(core, namespace, run_id)
    wall = clock()
    followed = workload.load_curve if math.isfinite(next_usage) else None
    metrics = _metrics(list(records.values()), cluster, speedup, min(wall, stop_s), followed)
    lags = [(r.ready - r.due) * speedup for r in records.values() if r.ready >= 0]
    metrics["submit_lag_p99_s"] = float(np.percentile(lags, 99)) if lags else None  # none created: no sample
    metrics.update({"policy": scheduler_name, "scenario": workload.name, "nodes": cluster.size,
                    "pods": len(records), "wall_s": wall,
                    "pods_finished": finished, "pods_running_at_end": int(metrics["pods_scheduled"]) - finished,
                    "placements_per_s": metrics["pods_scheduled"] / wall if wall > 0 else 0.0,
                    "source": "replay", "speedup": speedup})
    return metrics


class _Controller(threading.Thread):
    """The reclaim controller beside a replay: nothing lent until its first pass, one period after the start (the
    simulator's "batch allocatable is 0 until the first usage report"), then one pass every period."""

    def __init__(self, api: kubernetes.client.ApiClient, cfg: ReclaimConfig, speedup: float) -> None:
        super().__init__(daemon=True, name="drlsched-replay-reclaim")
        period = max(float(METRICS_RESOLUTION_S), cfg.period_s / speedup)
        scaled = replace(cfg, period_s=period, window_s=max(period, cfg.window_s / speedup))
        self.controller = ReclaimController(api, scaled, stale_after_s=6 * METRICS_RESOLUTION_S)
        self.period = period
        self.stopping = threading.Event()
        self.controller.reset()

    def run(self) -> None:
        while not self.stopping.wait(self.period):
            try:
                self.controller.step()
            except Exception as err:  # an API hiccup: the next period retries
                log.warning("reclaim pass failed: %s", err)

    def stop(self) -> None:
        self.stopping.set()
        self.join(timeout=60)


def _annotate(core: kubernetes.client.CoreV1Api, namespace: str, name: str, annotations: dict[str, str]) -> None:
    try:
        resp = core.patch_namespaced_pod(name, namespace, {"metadata": {"annotations": annotations}},
                                         _preload_content=False)
        resp.read()
        resp.release_conn()
    except (kubernetes.client.ApiException, urllib3.exceptions.HTTPError) as err:  # gone meanwhile: nothing to do
        log.info("could not update the usage of pod %s: %s", name, err)


def _delete_run(core: kubernetes.client.CoreV1Api, namespace: str, run_id: str) -> None:
    try:
        core.delete_collection_namespaced_pod(namespace, label_selector=f"{POD_LABEL}={run_id}",
                                              grace_period_seconds=0, _preload_content=False)
    except (kubernetes.client.ApiException, urllib3.exceptions.HTTPError) as err:
        log.warning("could not delete the replay's pods (label %s=%s): %s", POD_LABEL, run_id, err)


def _metrics(records: list[PodRecord], cluster: Cluster, speedup: float, end: float | None = None,
             load: Callable[[float], float] | None = None) -> dict[str, object]:
    """The simulator's metrics from the observed timeline (workload seconds = replayer seconds × speedup); `end`
    is when the replay stopped (default: the last completion), the end of pods still running. `load`: the load
    curve the services' usage annotations followed (their CPU usage is integrated at it)."""
    acc = Accumulator()
    bound = [r for r in records if r.bound >= 0]
    acc.pods_arrived = len(records)
    acc.pods_scheduled = len(bound)
    acc.pods_unschedulable = len(records) - len(bound)
    acc.pods_finished = sum(1 for r in records if r.ended >= 0)
    acc.evictions = sum(r.evictions for r in records)
    created = [r.ready for r in records if r.ready >= 0]
    first = min(created) if created else 0.0
    ends = [r.ended for r in records if r.ended >= 0]
    last = max(ends) if ends else first
    running = any(r.bound >= 0 > r.ended for r in records)
    stop = end if end is not None and running else last
    acc.first_arrival = first * speedup
    acc.last_finish = last * speedup
    acc.busy_s = max(0.0, stop - first) * speedup
    index = {name: i for i, name in enumerate(cluster.names)}
    jobs: dict[str, list[PodRecord]] = {}
    for r in records:
        jobs.setdefault(r.spec.job_id, []).append(r)
        if r.bound >= 0:
            acc.pending.append((r.bound - r.ready) * speedup)
            if cluster.reclaim and r.spec.qos == QoS.BE:
                acc.be_pending.append((r.bound - r.ready) * speedup)
        if r.spec.qos == QoS.LS and r.ended >= 0:
            acc.ls_pods += 1
            if (r.bound - r.ready) * speedup > SLA_PENDING_S:
                acc.ls_violations += 1
                acc.flag(r.name, Anomaly.SLA_BREACH)
        _flag_anomalies(r, acc, speedup, stop, running)
    for pods in jobs.values():
        if all(r.ended >= 0 for r in pods):
            acc.jct.append((max(r.ended for r in pods) - min(r.ready for r in pods)) * speedup)
        _job_traffic(pods, cluster, index, acc, speedup)
    _integrate(records, cluster, index, acc, speedup, stop, load)
    out = summarize(acc, total_cpu=cluster.total_cpu, total_mem=cluster.total_mem,
                    total_gpu_milli=cluster.total_gpu_milli)
    out["anomalies"].update(dict.fromkeys(UNOBSERVED, None))  # type: ignore[union-attr]
    out["anomalies_unavailable"] = dict(UNOBSERVED)
    return out


# Anomaly parts a replay cannot see from the pods' watch, and why (null in `anomalies`; docs/replay.md).
UNOBSERVED = {
    "bind_failed": "a failed bind shows in the scheduler's events, not in the pod: not watched",
    "preempted_or_migrated": "nothing migrates in a replay, and a preempted pod is deleted like an evicted one: "
                             "counted in evicted",
}


def _flag_anomalies(r: PodRecord, acc: Accumulator, speedup: float, stop: float, running: bool) -> None:
    """The anomalies of one replayed pod the watch shows (the parts not in UNOBSERVED): pending more than 60 s in
    total (a pod never bound waited until the replay stopped, for ever when nothing ran any more), evicted, and a
    start more than 5 s after its creation (KWOK pulls no images)."""
    if r.ready < 0:  # never created (a DAG child of unfinished tasks): not a pod of the cluster
        return
    since = r.queued if r.queued >= 0 else r.ready
    if r.bound >= 0:
        waited = r.waited + r.bound - since
    else:
        waited = r.waited + max(stop - since, 0.0) if running else math.inf
    if waited * speedup > UNSCHEDULABLE_S:
        acc.flag(r.name, Anomaly.UNSCHEDULABLE_60S)
    if r.evictions:
        acc.flag(r.name, Anomaly.EVICTED)
    startup = r.startup if r.startup >= 0 or r.evictions else r.started - r.ready if r.started >= 0 else -1.0
    if startup * speedup > STARTUP_SLO_S:
        acc.flag(r.name, Anomaly.STARTUP_SLOW)


def placement_warning(metrics: dict[str, object], scheduler_name: str) -> str | None:
    """One line when the replay created pods but none was bound (every metric of placed pods is then null), naming
    the likely cause; None otherwise."""
    if not metrics.get("pods") or metrics.get("pods_scheduled"):
        return None
    if scheduler_name == "default-scheduler":
        cause = ("is kube-scheduler running (and, with --scheduler drl-extender, the extender it calls), and do the "
                 "pods fit the nodes?")
    else:
        cause = (f"the likely cause: no scheduler named {scheduler_name!r} is running on the cluster (start one with "
                 f"`drlsched schedule --scheduler-name {scheduler_name} --kubeconfig ...`)")
    return (f"drlsched: warning: no pod was placed (0 of {metrics['pods']} bound, so the metrics of placed "
            f"pods are null): {cause}")


def _job_traffic(pods: list[PodRecord], cluster: Cluster, index: dict[str, int], acc: Accumulator,
                 speedup: float) -> None:
    """The simulator's traffic model on the real placements: shuffle reads from the parent tasks' nodes at start,
    and service traffic with the job's other pods over the run time."""
    by_task: dict[str, list[int]] = {}
    for r in pods:
        if r.node:
            by_task.setdefault(r.spec.task, []).append(index[r.node])
    placed = [index[r.node] for r in pods if r.node]
    for r in pods:
        if not r.node:
            continue
        node = index[r.node]
        if r.spec.shuffle_in_mb > 0:
            sources = [n for p in r.spec.parents for n in by_task.get(p, [])] if r.spec.parents else [
                n for n in by_task.get(r.spec.task, []) if n != node]
            if sources:
                acc.cross_node_mb += r.spec.shuffle_in_mb * sum(1 for n in sources if n != node) / len(sources)
        if r.spec.traffic_mbps > 0 and len(placed) > 1 and r.started >= 0 <= r.ended:
            acc.cross_node_mb += r.spec.traffic_mbps / 8.0 * speedup * _remote_seconds(r, pods)


def _remote_seconds(talker: PodRecord, pods: list[PodRecord]) -> float:
    """∫ share of the job's other bound pods that sit on other nodes, over the talker's run (replayer seconds):
    the simulator's service traffic, which flows only between pods placed at the same time."""
    bound = [(r.bound, r.ended if r.ended >= 0 else math.inf, r.node != talker.node)
             for r in pods if r is not talker and r.node]
    cuts = sorted({talker.started, talker.ended, *(t for b, e, _ in bound for t in (b, e)
                                                    if talker.started < t < talker.ended)})
    total = 0.0
    for lo, hi in itertools.pairwise(cuts):
        live = [remote for b, e, remote in bound if b <= lo < e]
        if live:
            total += (hi - lo) * sum(live) / len(live)
    return total


def _integrate(records: list[PodRecord], cluster: Cluster, index: dict[str, int], acc: Accumulator,
               speedup: float, end: float, load: Callable[[float], float] | None = None) -> None:
    """Time integrals of allocation and emulated usage, and GPU fragmentation, replaying arrival/bind/end in order.
    As in the simulator, a pod's shape counts towards the typical shapes when it arrives, bound or not."""
    events: list[tuple[float, int, PodRecord]] = [(r.ready, 0, r) for r in records if r.ready >= 0]
    for r in records:
        if r.bound < 0:
            continue
        events.append((r.bound, 1, r))
        # Releases sort before allocations at the same instant (capacity frees first), except a pod's own
        # release, which must follow its allocation when it ends the instant it is bound (or never ended).
        stop = max(r.ended if r.ended >= 0 else end, r.bound)
        events.append((stop, -1 if stop > r.bound else 2, r))
    events.sort(key=lambda e: (e[0], e[1]))
    shapes = ShapeCounter()
    frag = FragmentationTracker(cluster, shapes) if cluster.total_gpu_milli else None
    gpu_ids: dict[str, tuple[int, ...]] = {}
    prev = events[0][0] if events else 0.0
    alloc_cpu = alloc_gpu = use_cpu = use_mem = use_gpu = use_be = use_svc = 0.0
    for t, sign, r in events:
        dt = (t - prev) * speedup
        if dt > 0:
            acc.cpu_reclaimed_s += use_be * dt
            acc.cpu_alloc_s += alloc_cpu * dt
            acc.gpu_alloc_s += alloc_gpu * dt
            # Services' usage at the load curve they followed, taken at the start of each interval.
            acc.cpu_use_s += (use_cpu + use_svc * (load(prev * speedup) - 1.0 if load else 0.0)) * dt
            acc.mem_use_s += use_mem * dt
            acc.gpu_use_s += use_gpu * dt
            if frag is not None:
                frag.integrate(acc, dt)
        prev = t
        spec = r.spec
        req = cluster.request(spec)
        if sign == 0:
            shapes.add(req.cpu, req.gpus, req.gpu_milli, req.model_mask)
            continue
        node = index[r.node]
        if sign == 2:
            sign = -1
        if sign > 0:
            ids = cluster.pick_gpus(node, req) if cluster.feasible(req)[node] else ()
            gpu_ids[r.name] = ids
            cluster.allocate(node, req, ids)
        else:
            cluster.release(node, req, gpu_ids.pop(r.name))
        if frag is not None:
            frag.touch(node)
        alloc_cpu += sign * spec.cpu_m
        alloc_gpu += sign * spec.gpus * (spec.gpu_milli or 1000)
        if r.started >= 0:  # emulated usage, counted from binding (KWOK starts pods at once)
            use_cpu += sign * spec.cpu_m * spec.usage_cpu
            if req.batch:  # a BE pod on batch resources: its usage runs on reclaimed capacity
                use_be += sign * spec.cpu_m * spec.usage_cpu
            if spec.service:
                use_svc += sign * spec.cpu_m * spec.usage_cpu
            use_mem += sign * spec.mem_mib * spec.usage_mem
            use_gpu += sign * spec.gpus * (spec.gpu_milli or 1000) * spec.usage_gpu
