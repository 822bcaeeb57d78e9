"""`drlsched admit`: job-level admission with pod scheduling gates, as Kueue admits workloads. Pods are created
with the gate `drlsched.io/admission` and a `drlsched.io/job` label; each pass lists the pods (and nodes), rebuilds
the job state from them (`drlsched.k8s.admission`), asks the job policy for each job's executor limit and order,
and removes the gate from the pods that fit: kube-scheduler (unmodified), the extender or the second scheduler
places them from there.

- **Only releases.** The one write to a pod is a JSON patch that removes this gate (others stay) and stamps the
  `drlsched.io/admitted` annotation, preconditioned on the gates it saw (`test`), so a pod changed since the list
  is skipped, never released twice. Nothing is deleted or evicted: a lowered limit only stops further releases.
- **Stateless across restarts.** Nothing but event deduplication lives between passes: a restarted controller,
  or one whose apiserver restarted, rebuilds everything from the gates, and a released pod counts as released
  because it carries no gate, whoever released it.
- **Never by guess.** A gated pod without a job label, or with a malformed one, stays gated with a Warning
  event (once per pod) and is counted; so is a job the policy needs metadata for (`--policy-file`) that has none.
- **Events** on every pod it releases (`Admitted`) or holds (`AdmissionHeld`, once per pod and reason).
- Writes go through `client.request`, gated on the Lease by the Manager: a standby never releases.
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import kubernetes

from drlsched.errors import UserError
from drlsched.jobs.policies import Drf, JobPolicy
from drlsched.k8s import prom
from drlsched.k8s.admission import (
    ADMITTED_ANNOTATION,
    GATE,
    PodRef,
    PolicyFile,
    Snapshot,
    executor_slots,
    load_policy_file,
    plan,
    snapshot,
)
from drlsched.k8s.client import request
from drlsched.k8s.events import EventRecorder, involved
from drlsched.k8s.leader import micro_time
from drlsched.k8s.objects import ObjectError, node_spec

log = logging.getLogger("drlsched.k8s")
COMPONENT = "drlsched-admit"


@dataclass
class PassResult:
    executors: int
    released: list[str] = field(default_factory=list)  # namespace/name, in release order
    held: dict[str, str] = field(default_factory=dict)  # namespace/name -> why
    unattributed: dict[str, str] = field(default_factory=dict)
    limits: dict[str, float | None] = field(default_factory=dict)  # job -> its limit (None: none), policy order


def release_patch(ref: PodRef, stamp: str) -> list[dict[str, Any]]:
    """The JSON patch releasing `ref`: our gate removed, the others kept, only if the gates are still as seen."""
    seen = [{"name": g} for g in ref.gates]
    rest = [g for g in seen if g["name"] != GATE]
    ops: list[dict[str, Any]] = [{"op": "test", "path": "/spec/schedulingGates", "value": seen}]
    ops.append({"op": "replace", "path": "/spec/schedulingGates", "value": rest} if rest else
               {"op": "remove", "path": "/spec/schedulingGates"})
    ops.append({"op": "add", "path": f"/metadata/annotations/{ADMITTED_ANNOTATION.replace('/', '~1')}",
                "value": stamp} if ref.annotated else
               {"op": "add", "path": "/metadata/annotations", "value": {ADMITTED_ANNOTATION: stamp}})
    return ops


class AdmitController:
    """One `reconcile(leading)` per period (the Manager's loop). Not thread-safe."""

    def __init__(self, api: kubernetes.client.ApiClient, policy: JobPolicy, executors: int | None = None,
                 policy_file: Path | None = None, namespace: str | None = None,
                 recorder: EventRecorder | None = None, identity: str = COMPONENT,
                 clock: Callable[[], float] = time.time, workers: int = 8) -> None:
        self.api = api
        self.workers = workers  # concurrent release patches (the API client's pool holds 32 connections)
        self.policy = policy
        self.executors = executors
        self.policy_path = policy_file
        self.meta = load_policy_file(policy_file) if policy_file is not None else PolicyFile()
        self._meta_mtime = policy_file.stat().st_mtime if policy_file is not None else 0.0
        self.namespace = namespace
        self.identity = identity
        self.clock = clock
        self.events = recorder or EventRecorder(api, COMPONENT, instance=identity,
                                                post=lambda path, body: request(self.api, "POST", path, body))
        self.releases = prom.Counter("drlsched_admit_releases_total",
                                     "Gate removals, by outcome (released, gone, conflict, refused).")
        self.unattributed_total = prom.Counter("drlsched_admit_unattributed_total",
                                               "Gated pods found without a valid job label (each counted once).")
        self.pods = prom.Gauge("drlsched_admit_pods", "Pods of the last pass, by state (gated, released, "
                                                      "unattributed, held_no_metadata).")
        self.jobs = prom.Gauge("drlsched_admit_jobs", "Jobs with gated or released pods in the last pass.")
        self._reported: dict[str, str] = {}  # pod uid -> the last hold/warning reason posted
        self._leading = False

    def register(self, registry: prom.Registry) -> None:
        for metric in (self.releases, self.unattributed_total, self.pods, self.jobs, self.events.outcomes):
            registry.add(metric)

    def reconcile(self, leading: bool) -> PassResult | None:
        """The Manager's pass: a step while leading; a new spell as leader re-posts the hold events once."""
        if not leading:
            self._leading = False
            return None
        if not self._leading:
            self._reported = {}
            self._leading = True
        return self.step()

    # --- the pass ----------------------------------------------------------------------------------------------

    def step(self) -> PassResult:
        self._reload_policy_file()
        pods = self._list("/api/v1/pods" if self.namespace is None else f"/api/v1/namespaces/{self.namespace}/pods")
        snap = snapshot(pods)
        executors = self._executors(snap, pods)
        grants, missing = plan(snap, self.policy, executors, self.meta)
        result = PassResult(executors)
        self._warn_unattributed(snap, result)
        for ref, why in missing:
            result.held[ref.key] = why
            self._report(ref, "Warning", "JobMetadataMissing", why)
        stamp = f"{micro_time(self.clock())} by {self.identity}"
        wave = [(grant, ref) for grant in grants for ref in grant.release]
        # The pass's releases are all decided: their patches go concurrently, their results are read in order.
        with ThreadPoolExecutor(max(1, min(self.workers, len(wave)))) as pool:
            done = list(pool.map(lambda item: self._release(item[1], stamp), wave))
        for (grant, ref), ok in zip(wave, done, strict=True):
            if ok:
                result.released.append(ref.key)
                self.events.submit(involved("Pod", ref.name, ref.uid, ref.namespace), ref.namespace, "Normal",
                                   "Admitted", f"released by job policy {self.policy.name}: job "
                                   f"{grant.job.key}, limit {grant.limit:g} executors")
        for grant in grants:
            result.limits[grant.job.key] = None if math.isinf(grant.limit) else grant.limit
            for ref, why in grant.held:
                result.held[ref.key] = why
                self._report(ref, "Normal", "AdmissionHeld", f"held by job policy {self.policy.name}: {why}")
        # Forget pods no longer gated (released, deleted): the memory of posted events stays bounded.
        still = {r.uid for j in snap.jobs for r in j.gated} | {r.uid for r, _ in snap.unattributed}
        self._reported = {uid: why for uid, why in self._reported.items() if uid in still}
        gated = sum(len(j.gated) for j in snap.jobs) - len(result.released)
        self.pods.set(gated, state="gated")
        self.pods.set(snap.released + len(result.released), state="released")
        self.pods.set(len(snap.unattributed), state="unattributed")
        self.pods.set(len(missing), state="held_no_metadata")
        self.jobs.set(len(snap.jobs))
        if result.released or missing or snap.unattributed:
            log.info("admit (%s): %d jobs, %d executors: released %d, %d still gated, %d unattributed",
                     self.policy.name, len(snap.jobs), executors, len(result.released), gated,
                     len(snap.unattributed))
        return result

    def _list(self, path: str) -> list[dict[str, Any]]:
        return list(json.loads(request(self.api, "GET", path)).get("items") or [])

    def _executors(self, snap: Snapshot, pods: list[dict[str, Any]]) -> int:
        """The pool: --executors, else the policy file's, else what the nodes fit of the median executor."""
        nodes: list[dict[str, Any]] | None = None
        if isinstance(self.policy, Drf):  # DRF's shares are of the cluster's real capacity
            nodes = self._list("/api/v1/nodes")
            self.policy.cluster_cpu_m, self.policy.cluster_mem_mib = _capacity(nodes)
        fixed = self.executors if self.executors is not None else self.meta.executors
        if fixed is not None:
            return fixed
        sizes = sorted((j.cpu_m or 1000, j.mem_mib or 1024) for j in snap.jobs)
        if not sizes:
            return 0
        cpu_m, mem_mib = sizes[len(sizes) // 2]
        return executor_slots(nodes if nodes is not None else self._list("/api/v1/nodes"), pods, cpu_m, mem_mib)

    def _release(self, ref: PodRef, stamp: str) -> bool:
        path = f"/api/v1/namespaces/{ref.namespace}/pods/{ref.name}"
        try:
            request(self.api, "PATCH", path, release_patch(ref, stamp), content_type="application/json-patch+json")
        except kubernetes.client.ApiException as err:
            if err.status is None or err.status >= 500 or err.status == 429:
                raise  # the apiserver's trouble: the pass fails and backs off; the next one retries
            # 404: deleted since the list; 409/422: changed since (the precondition failed): the next pass sees it.
            outcome = {404: "gone", 409: "conflict", 422: "conflict"}.get(err.status, "refused")
            self.releases.inc(outcome=outcome)
            log.info("release of pod %s skipped: HTTP %s %s", ref.key, err.status, err.reason)
            return False
        self.releases.inc(outcome="released")
        return True

    def _warn_unattributed(self, snap: Snapshot, result: PassResult) -> None:
        for ref, why in snap.unattributed:
            result.unattributed[ref.key] = why
            if ref.uid not in self._reported:
                self.unattributed_total.inc()
                log.warning("pod %s stays gated: %s", ref.key, why)
            self._report(ref, "Warning", "JobUnknown", f"left gated, never released by guess: {why}")

    def _report(self, ref: PodRef, type_: str, reason: str, message: str) -> None:
        """One event per pod and reason (a pass every few seconds must not post one each time)."""
        if self._reported.get(ref.uid) == reason:
            return
        self._reported[ref.uid] = reason
        self.events.submit(involved("Pod", ref.name, ref.uid, ref.namespace), ref.namespace, type_, reason, message)

    def _reload_policy_file(self) -> None:
        """A policy file changed on disk (a ConfigMap update) is read again; a bad one keeps the last good one."""
        if self.policy_path is None:
            return
        try:
            mtime = self.policy_path.stat().st_mtime
            if mtime == self._meta_mtime:
                return
            self._meta_mtime = mtime
            self.meta = load_policy_file(self.policy_path)
            log.info("policy file %s read again", self.policy_path)
        except (OSError, UserError) as err:
            log.warning("policy file %s: %s; keeping the last one read", self.policy_path, err)


def _capacity(nodes: list[dict[str, Any]]) -> tuple[float, float]:
    cpu = mem = 0.0
    for node in nodes:
        try:
            spec = node_spec(node)
        except ObjectError:
            continue
        cpu += spec.cpu_m
        mem += spec.mem_mib
    return cpu, mem
