"""drlsched as a second scheduler: pods whose spec.schedulerName names it are placed by a policy and bound.

- One decision loop (policies are sequential by nature); binds and events go to a thread pool, as
  kube-scheduler binds asynchronously. A pod is *assumed* on its node the moment it is chosen, so the next
  decision already sees it; a failed bind forgets it again and requeues the pod.
- Never double-binds: a pod already bound in our state is skipped, and the Binding carries the pod's UID, so
  the apiserver refuses (409) a second binding or one for a re-created pod of the same name.
- Never loses a pod: every pending pod of ours is in the queue until the API shows it bound or gone; after any
  watch failure (an apiserver restart) the informer re-lists and the queue is rebuilt from that list.
- The queue is kube-scheduler's, shared with the simulator (`drlsched.sched.queue`). Unschedulable pods get a
  FailedScheduling event and PodScheduled=False and wait until capacity may have freed (a bound pod ends or
  goes, a node appears or changes: NodeResourcesFit's queueing hints; at the latest after 5 min). They are then
  retried after the pods that are not backing off: a pod's backoff doubles from 1 s to 10 s per failed attempt,
  and a pod still backing off is tried only behind the others (SchedulerPopFromBackoffQ). Within each group:
  priority, then when the pod last entered the queue. Failed binds are retried after the backoff.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import kubernetes

from drlsched.k8s import prom
from drlsched.k8s.client import request
from drlsched.k8s.events import EventRecorder, involved
from drlsched.k8s.metrics_pipeline import MetricsStore
from drlsched.k8s.objects import TERMINAL_PHASES, ObjectError, pod_spec
from drlsched.k8s.placement import Placer
from drlsched.k8s.rollout import ARM_ANNOTATION, POLICY_ANNOTATION, Rollout
from drlsched.k8s.state import ClusterState
from drlsched.k8s.watch import Informer
from drlsched.policies import Policy
from drlsched.sched.queue import Entry, SchedulingQueue
from drlsched.workload import PodSpec

log = logging.getLogger("drlsched.k8s")
_BIND_WORKERS = 32


@dataclass
class _Pending:
    namespace: str
    name: str
    spec: PodSpec
    selector: dict[str, str]  # spec.nodeSelector
    reported: str = ""  # the unschedulable reason last written to the API (not repeated while it holds)


class SecondScheduler:
    def __init__(
        self, api: kubernetes.client.ApiClient, policy: Policy, scheduler_name: str,
        metrics: MetricsStore | None = None,
        rollout: Callable[[Placer, prom.Registry], Rollout] | None = None,
    ) -> None:
        """`rollout` builds the shadow / A-B arrangement around the live placer (see drlsched.k8s.rollout)."""
        self.api = api
        self.name = scheduler_name
        self.state = ClusterState()
        self.placer = Placer(policy, metrics=metrics)
        self.registry = prom.Registry()
        # Outcomes: bound, conflict (409: bound already, e.g. by our own bind whose answer was lost),
        # bind_error (retried), unschedulable (requeued with backoff).
        self.outcomes = self.registry.add(prom.Counter("drlsched_scheduler_pods_total", "Scheduling outcomes."))
        self.decision_time = self.registry.add(
            prom.Histogram("drlsched_scheduler_decision_duration_seconds", "Policy time per pod."))
        if metrics is not None:
            metrics.register(self.registry)
        self.rollout = rollout(self.placer, self.registry) if rollout is not None else None
        self.registry.add(prom.CallbackGauge("drlsched_scheduler_pending_pods", "Pods queued.", self.pending))
        self.informer = Informer(api, self.state, on_pod=self._on_pod, on_relist=self._on_relist,
                                 on_node=self._on_node)
        self._queue: SchedulingQueue[_Pending] = SchedulingQueue()  # on the monotonic clock
        self._queued: dict[str, Entry[_Pending]] = {}  # uid -> its queue entry, while in the queue
        self._binding: dict[str, Entry[_Pending]] = {}  # uid -> entry, while being decided or bound
        # Binds whose outcome we do not know (the answer was lost, or a 409): counted and given their Scheduled
        # event when the API shows the pod bound (`_confirmed`), so neither is missed nor doubled.
        self._unsure: dict[str, _Pending] = {}
        self._started_at = ""  # RFC 3339 second of start: bindings before it are a previous instance's
        self._cond = threading.Condition()
        self._stopping = threading.Event()
        # Through this module's `request` (tests replace it); retries end when the scheduler stops.
        self._events = EventRecorder(api, self.name, stop=self._stopping,
                                     post=lambda path, body: request(self.api, "POST", path, body))
        self._pool = _Writes(_BIND_WORKERS)
        self._loop = threading.Thread(target=self._run, name="schedule", daemon=True)

    def start(self) -> SecondScheduler:
        self._started_at = _now()
        self.informer.start()
        self._loop.start()
        self._pool.submit(self._reconcile)
        return self

    def stop(self, grace_s: float = 10.0) -> bool:
        """Ends the decision loop, then gives the binds and events already chosen until `grace_s` to finish.
        False when some were still running (abandoned: the apiserver decides them, and the next scheduler's
        list shows the outcome; a bind that landed without its event gets it then, see `_reconcile`)."""
        deadline = time.monotonic() + grace_s
        self._stopping.set()
        self.informer.stop()
        with self._cond:
            self._cond.notify_all()
        self._loop.join(timeout=grace_s)
        return self._pool.drain(deadline)

    def pending(self) -> int:
        with self._cond:
            return len(self._queue)

    # --- queue, fed by the informer ------------------------------------------------------------------------

    def _ours_and_pending(self, obj: dict[str, Any]) -> bool:
        spec, meta = obj.get("spec") or {}, obj.get("metadata") or {}
        phase = (obj.get("status") or {}).get("phase")
        return (
            spec.get("schedulerName") == self.name
            and not spec.get("nodeName")
            and phase not in TERMINAL_PHASES
            and not meta.get("deletionTimestamp")
        )

    def _on_relist(self) -> None:
        with self._cond:
            self._queue.clear()  # rebuilt from the list that follows: the API's truth after a gap
            self._queued.clear()

    def _on_pod(self, event: str, obj: dict[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        uid = meta.get("uid")
        if not uid:
            return
        self._confirm_if_unsure(uid, obj)
        with self._cond:
            if event != "DELETED" and self._ours_and_pending(obj):
                if uid not in self._queued and uid not in self._binding and self.state.pod_node(uid) is None:
                    try:
                        spec = pod_spec(obj)
                    except ObjectError as err:
                        log.warning("cannot schedule %s/%s: %s", meta.get("namespace"), meta.get("name"), err)
                        return
                    selector = (obj.get("spec") or {}).get("nodeSelector") or {}
                    pending = _Pending(meta.get("namespace", "default"), meta["name"], spec,
                                       {str(k): str(v) for k, v in dict(selector).items()})
                    self._queued[uid] = self._queue.add(pending, spec.priority, time.monotonic())
                    self._cond.notify()
                return
            # Bound, finished or gone: out of the queue, and not requeued after an attempt in flight.
            entry = self._queued.pop(uid, None) or self._binding.get(uid)
            if entry is not None:
                self._queue.remove(entry)
            if (obj.get("spec") or {}).get("nodeName") and (
                    event == "DELETED" or (obj.get("status") or {}).get("phase") in TERMINAL_PHASES):
                self._capacity_freed()

    def _on_node(self, event: str, obj: dict[str, Any]) -> None:
        if event != "DELETED":
            with self._cond:
                self._capacity_freed()

    def _capacity_freed(self) -> None:
        """Unschedulable pods may fit now (NodeResourcesFit's hint for a deleted assigned pod, or a node added or
        changed: queue): back into the queue (caller holds the lock)."""
        if self._queue.wake(time.monotonic()):
            self._cond.notify()

    # --- the decision loop ---------------------------------------------------------------------------------

    def _next(self) -> Entry[_Pending] | None:
        """The next pod in kube-scheduler's order (see the module doc); waits while there is none."""
        with self._cond:
            while not self._stopping.is_set():
                now = time.monotonic()
                entry = self._take(now) if self.informer.is_synced() else None
                if entry is not None:
                    return entry
                self._cond.wait(timeout=max(0.01, min(self._queue.next_change() - now, 1.0)))
            return None

    def _take(self, now: float) -> Entry[_Pending] | None:
        """The queue's next pod at `now`, marked as being decided (caller holds the lock)."""
        self._queue.flush(now)
        entry = self._queue.pop(now)
        if entry is not None:
            uid = entry.pod.spec.uid
            del self._queued[uid]
            self._binding[uid] = entry
        return entry

    def _run(self) -> None:
        while not self._stopping.is_set():
            entry = self._next()
            if entry is not None:
                self._decide(entry)

    def _decide(self, entry: Entry[_Pending]) -> None:
        pending, uid = entry.pod, entry.pod.spec.uid
        started = time.perf_counter()
        routed = self.rollout.route(pending.spec, pending.namespace) if self.rollout else None
        names = self.state.matching(pending.selector)
        choice = (routed.placer if routed else self.placer).choose(self.state, pending.spec, names)
        if self.rollout is not None:
            self.rollout.observe_shadow(self.state, pending.spec, choice, names)
        self.decision_time.observe(time.perf_counter() - started)
        if choice.node is None:
            self.outcomes.inc(outcome="unschedulable")
            if choice.reason != pending.reported:  # kube-scheduler's event recorder also folds repeats
                pending.reported = choice.reason
                self._pool.submit(self._unschedulable, pending, choice.reason)
            self._requeue(uid, pending, park=True)
            return
        self.state.assume(pending.spec, choice.node)
        notes = {ARM_ANNOTATION: routed.arm, POLICY_ANNOTATION: routed.policy} if routed else {}
        self._pool.submit(self._bind, uid, pending, choice.node, notes)

    def _requeue(self, uid: str, pending: _Pending, park: bool = False) -> None:
        """Back into the queue after a failed attempt: an unschedulable pod (`park`) waits for capacity to free
        (unless some freed while it was being decided); a failed bind is retried once its backoff is over. A pod
        that went away meanwhile is dropped."""
        with self._cond:
            entry = self._binding.pop(uid)
            now = time.monotonic()
            if self._queue.park(entry, now) if park else self._queue.requeue_error(entry, now):
                self._queued[uid] = entry
                self._cond.notify()

    def _finished(self, uid: str) -> None:
        """The pod needs no more scheduling (bound, or gone)."""
        with self._cond:
            entry = self._binding.pop(uid, None)
            if entry is not None:
                self._queue.done(entry)

    # --- API writes (thread pool) --------------------------------------------------------------------------

    def _bind(self, uid: str, pending: _Pending, node: str, annotations: dict[str, str]) -> None:
        """Binds with the pod's UID as a precondition; `annotations` are merged into the pod by the apiserver."""
        meta = {"name": pending.name, "namespace": pending.namespace, "uid": uid}
        body = {
            "metadata": {**meta, "annotations": annotations} if annotations else meta,
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        }
        try:
            # Raw: the client cannot parse the Status the apiserver answers with (reference §3).
            request(self.api, "POST", f"/api/v1/namespaces/{pending.namespace}/pods/{pending.name}/binding", body)
        except Exception as err:  # ApiException, or a connection error: the pod may or may not be bound
            self._bind_failed(uid, pending, node, err)
            return
        self._finished(uid)
        with self._cond:
            self._unsure.pop(uid, None)  # an earlier attempt failed after all: this one bound it
        self._scheduled(uid, pending, node)

    def _scheduled(self, uid: str, pending: _Pending, node: str, note: str = "") -> None:
        self.outcomes.inc(outcome="bound")
        self._event(pending, uid, "Normal", "Scheduled",
                    f"Successfully assigned {pending.namespace}/{pending.name} to {node}{note}")

    def _bind_failed(self, uid: str, pending: _Pending, node: str, err: Exception) -> None:
        status = getattr(err, "status", None)
        if status == 409:
            # Already bound: by our own earlier bind whose answer was lost (then this is its success), or by
            # someone else. Binding again would be wrong either way; the watch brings the truth.
            self.outcomes.inc(outcome="conflict")
            self._finished(uid)
            with self._cond:
                self._unsure[uid] = pending
            self._report_earlier_bind(uid, pending)
            return
        if status == 404:  # deleted meanwhile
            self.state.delete_pod(uid)
            self._finished(uid)
            with self._cond:
                self._unsure.pop(uid, None)
            return
        self.outcomes.inc(outcome="bind_error")
        log.warning("binding %s/%s to %s failed (%s); retrying", pending.namespace, pending.name, node,
                    getattr(err, "reason", None) or type(err).__name__)
        if status is None or status >= 500:  # a timeout, a lost connection, a server error: it may have bound
            with self._cond:
                self._unsure[uid] = pending
        self.state.delete_pod(uid)
        self._requeue(uid, pending)

    def _report_earlier_bind(self, uid: str, pending: _Pending) -> None:
        """After a 409: if the pod is bound (pods naming us are bound by us), record that now."""
        try:
            pod = json.loads(request(self.api, "GET", f"/api/v1/namespaces/{pending.namespace}/pods/{pending.name}"))
        except Exception as err:  # the watch's event for the bound pod confirms it instead
            log.info("could not read %s/%s after a conflict: %s", pending.namespace, pending.name, err)
            return
        if pod.get("metadata", {}).get("uid") == uid:
            self._confirm_if_unsure(uid, pod)

    def _confirm_if_unsure(self, uid: str, pod: dict[str, Any]) -> None:
        """The API shows `pod`: if it is bound and its bind's outcome was unknown to us, that bind is confirmed
        now (counted, and its event written, once: whoever pops it from `_unsure` reports it)."""
        node = (pod.get("spec") or {}).get("nodeName")
        if not node:
            if (pod.get("metadata") or {}).get("deletionTimestamp") or \
                    (pod.get("status") or {}).get("phase") in TERMINAL_PHASES:
                with self._cond:
                    self._unsure.pop(uid, None)  # gone unbound: nothing to report
            return
        if (pod.get("spec") or {}).get("schedulerName") != self.name:
            return
        with self._cond:
            pending = None if self._stopping.is_set() else self._unsure.pop(uid, None)
        if pending is not None:  # (stopping: the pool takes no more work; the next instance reconciles)
            self._pool.submit(self._scheduled, uid, pending, str(node))

    def _reconcile(self) -> None:
        """After a restart: pods of ours that a previous instance bound without writing their Scheduled event
        (it was stopped between the two calls) get it now, and count as bound. Pods bound before the events'
        one-hour TTL are left alone; so are those bound since this instance started (their binds report)."""
        backoff = 1.0
        while not self._stopping.is_set():
            try:
                pods = json.loads(request(self.api, "GET", f"/api/v1/pods?fieldSelector=spec.schedulerName%3D"
                                                           f"{self.name}"))["items"]
                events = json.loads(request(self.api, "GET", f"/api/v1/events?fieldSelector=reason%3DScheduled%2C"
                                                             f"source%3D{self.name}"))["items"]
                break
            except Exception as err:  # the apiserver is not there yet: the informer logs that already
                log.debug("event reconciliation deferred: %s", err)
                self._stopping.wait(backoff)
                backoff = min(backoff * 2, 30.0)
        else:
            return
        reported = {(e.get("involvedObject") or {}).get("uid") for e in events}
        horizon = (dt.datetime.now(dt.UTC) - dt.timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
        for pod in pods:
            meta, node = pod.get("metadata") or {}, (pod.get("spec") or {}).get("nodeName")
            bound_at = next((c.get("lastTransitionTime") or "" for c in (pod.get("status") or {}).get("conditions")
                             or [] if c.get("type") == "PodScheduled" and c.get("status") == "True"), "")
            if not node or meta.get("uid") in reported or not horizon <= bound_at < self._started_at:
                continue
            spec = PodSpec(meta["uid"], "", 0.0, 0, 0)  # only the names are needed for the event
            pending = _Pending(meta.get("namespace", "default"), meta.get("name", ""), spec, {})
            self._scheduled(meta["uid"], pending, str(node), " (recorded after a scheduler restart)")

    def _unschedulable(self, pending: _Pending, reason: str) -> None:
        uid = pending.spec.uid
        self._event(pending, uid, "Warning", "FailedScheduling", reason)
        condition = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": reason,
                     "lastTransitionTime": _now()}
        try:
            request(self.api, "PATCH", f"/api/v1/namespaces/{pending.namespace}/pods/{pending.name}/status",
                    {"status": {"conditions": [condition]}}, "application/strategic-merge-patch+json")
        except Exception as err:  # a status we could not write is retried with the pod
            log.info("could not mark %s/%s unschedulable: %s", pending.namespace, pending.name, err)

    def _event(self, pending: _Pending, uid: str, kind: str, reason: str, message: str) -> None:
        """Posts an Event with client-go's retries (drlsched.k8s.events: 12 tries, the name fixed before the first
        so a lost answer meets a 409); given up when the scheduler stops."""
        self._events.record(involved("Pod", pending.name, uid, pending.namespace), pending.namespace, kind, reason,
                            message)


class _Writes(ThreadPoolExecutor):
    """The pool for API writes, which can also be drained against a deadline (`shutdown` waits or does not)."""

    def __init__(self, workers: int) -> None:
        super().__init__(max_workers=workers, thread_name_prefix="bind")
        self._running = 0
        self._idle = threading.Condition()

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        with self._idle:
            self._running += 1
        future = super().submit(fn, *args, **kwargs)
        future.add_done_callback(self._finished)
        return future

    def _finished(self, _: Future[Any]) -> None:
        with self._idle:
            self._running -= 1
            self._idle.notify_all()

    def drain(self, deadline: float) -> bool:
        """Takes no more work and waits for what was submitted until `deadline` (monotonic); True when all
        of it finished."""
        self.shutdown(wait=False)
        with self._idle:
            return self._idle.wait_for(lambda: self._running == 0, timeout=max(0.0, deadline - time.monotonic()))


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
