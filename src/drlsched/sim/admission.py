"""Arrivals and jobs: a pod's run and cold start drawn at arrival, its job and the DAG gate (drlsched.sched.jobs),
pods that fit no node even on an empty cluster, and a job's end (its JCT)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from drlsched.cluster import Cluster
from drlsched.errors import UserError
from drlsched.fragmentation import ShapeCounter
from drlsched.sched.cycle import gpu_options, hint_request
from drlsched.sched.jobs import JobBook
from drlsched.sim.entities import Run, SimJob
from drlsched.workload import PodSpec


def draw_startup(rng: np.random.Generator, mean_s: float, std_s: float) -> float:
    """A cold start: normal, at least 50 ms."""
    return max(0.05, float(rng.normal(mean_s, std_s)))


class Admission:
    def __init__(self, cluster: Cluster, shapes: ShapeCounter, rng: np.random.Generator, startup: tuple[float, float],
                 allow_unschedulable: bool, series_for: Callable[[PodSpec], int],
                 unschedulable: Callable[[str, PodSpec], None]) -> None:
        """`rng`: per-pod draws in arrival order (the same for every policy); `series_for`: the real usage series
        an arriving pod replays; `unschedulable(msg, spec)` counts a pod that fits no empty node."""
        self.cluster = cluster
        self.rng = rng
        self.startup = startup
        self.allow_unschedulable = allow_unschedulable
        self.series_for = series_for
        self.unschedulable = unschedulable
        self.shapes = shapes  # the pod shapes seen (typical pods for fragmentation and policies): counted here
        self.jobs: dict[str, SimJob] = {}
        self.book: JobBook[Run] = JobBook()
        self._fit_cache: dict[tuple, bool] = {}  # type: ignore[type-arg]

    def arrive(self, spec: PodSpec) -> Run | None:
        """A pod arrives: its run if it is ready to be queued now (its parent tasks done), else None."""
        job = self.jobs.get(spec.job_id)
        if job is None:
            job = self.jobs[spec.job_id] = SimJob(spec.arrival_s)
        job.total += 1
        job.service |= spec.service
        startup = spec.startup_s if spec.startup_s is not None else draw_startup(self.rng, *self.startup)
        run = Run(spec, job, startup)
        run.req = self.cluster.request(spec)
        run.series = self.series_for(spec)
        run.hint = hint_request(spec, self.cluster, run.req).row()
        self.shapes.add(run.req.cpu, run.req.gpus, run.req.gpu_milli, run.req.model_mask)
        if not self._fits_somewhere_empty(run):
            job.count(spec.task)  # its task never finishes: the job's later tasks wait for ever, as in Kubernetes
            self._reject(run)
            return None
        return run if self.book.arrive(job, spec, run) else None

    def released(self) -> list[Run]:
        """Pods whose parent tasks have all finished since the last call."""
        return list(self.book.release()) if self.book.pending_release else []

    def finish(self, run: Run, t: float) -> float | None:
        """A pod finished: its job's JCT if that ends the job (jobs with services or unplaceable pods have none)."""
        spec, job = run.spec, run.job
        self.book.finish(job, spec.task, run.node)
        job.done += 1
        job.last_done = t
        jct = None
        if job.done == job.total and not job.n_waiting:
            if not job.unplaceable and not job.service:
                jct = t - job.submit
            self.jobs.pop(spec.job_id, None)
        return jct

    def waiting(self) -> int:
        """Pods still waiting on their parent tasks."""
        return sum(j.n_waiting for j in self.jobs.values())

    def _fits_somewhere_empty(self, run: Run) -> bool:
        spec = run.spec
        key = (spec.cpu_m, spec.mem_mib, spec.gpus, spec.gpu_milli, spec.gpu_models, spec.tolerations,
               spec.gpu_options)
        fits = self._fit_cache.get(key)
        if fits is None:
            c = self.cluster
            fits = self._fit_cache[key] = any(c.fits_when_empty(c.request(spec, g)) for g in gpu_options(spec))
        return fits

    def _reject(self, run: Run) -> None:
        spec = run.spec
        reason = self.cluster.infeasible_reason(run.req)  # type: ignore[arg-type]
        msg = (f"pod {spec.uid} (job {spec.job_id}: {spec.cpu_m}m CPU, {spec.mem_mib}Mi, {spec.gpus} GPU"
               f"{' x ' + str(spec.gpu_milli) + 'm' if spec.gpus else ''}"
               f"{' model ' + '|'.join(spec.gpu_models) if spec.gpu_models else ''}) fits no node even on an "
               f"empty cluster: {reason}")
        if not self.allow_unschedulable:
            raise UserError(msg + "; pass --allow-unschedulable to count such pods and go on")
        self.unschedulable(msg, spec)
        run.job.unplaceable = True
