"""Kubernetes Events as client-go's recorder (`tools/record`) writes them, for every drlsched component: each event
is tried up to 12 times while the apiserver is unreachable or failing (429, 5xx), waiting 0.5 s then doubling up
to 10 s, and its name is fixed before the first try (`<object>.<unix nanos in hex>`), so a retry of a write whose
answer was lost meets a 409 instead of recording the event twice. Events stay best effort: refused outright (a
4xx, or this replica not leading), after the last try, or when the component stops, they are given up with a log
line.

`record` posts on the caller's thread (the second scheduler calls it from its bind pool); `submit` queues the
event for one worker thread (a controller's pass must not wait out the retries), in order; `drain` waits for the
queue."""

from __future__ import annotations

import datetime as dt
import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

import kubernetes

from drlsched.k8s import prom
from drlsched.k8s.client import NotLeading, request

log = logging.getLogger("drlsched.k8s")

TRIES = 12  # client-go tools/record maxTriesPerEvent
RETRY_S = 0.5  # the first wait between tries, doubling up to RETRY_MAX_S (client-go waits 10 s)
RETRY_MAX_S = 10.0


def now_rfc3339() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def involved(kind: str, name: str, uid: str = "", namespace: str | None = None) -> dict[str, str]:
    """The `involvedObject` of an event on a core/v1 object (a Pod, a Node)."""
    ref = {"apiVersion": "v1", "kind": kind, "name": name, "uid": uid}
    if namespace is not None:
        ref["namespace"] = namespace
    return ref


class EventRecorder:
    """Events by `component` (source.component, reportingComponent) from `instance` (reportingInstance).
    `post(path, body)` makes the API call (default: `request` on `api`); `stop` ends retries early."""

    def __init__(self, api: kubernetes.client.ApiClient | None, component: str, instance: str | None = None,
                 stop: threading.Event | None = None, post: Callable[[str, dict[str, Any]], object] | None = None,
                 ) -> None:
        self.component = component
        self.instance = instance or component
        self.stop = stop or threading.Event()
        self.post = post or (lambda path, body: request(api, "POST", path, body))  # type: ignore[arg-type]
        self.outcomes = prom.Counter("drlsched_events_total", "Events by outcome (recorded, dropped).")
        self._queue: queue.Queue[tuple[dict[str, Any], str, str, str, str] | None] = queue.Queue()
        self._worker: threading.Thread | None = None
        self._lock = threading.Lock()

    def body(self, obj: dict[str, str], namespace: str, type_: str, reason: str, message: str) -> dict[str, Any]:
        now = now_rfc3339()
        return {
            "metadata": {"name": f"{obj['name']}.{time.time_ns():x}", "namespace": namespace},
            "involvedObject": obj, "reason": reason, "message": message, "type": type_,
            "source": {"component": self.component}, "reportingComponent": self.component,
            "reportingInstance": self.instance, "firstTimestamp": now, "lastTimestamp": now, "count": 1,
        }

    def record(self, obj: dict[str, str], namespace: str, type_: str, reason: str, message: str) -> bool:
        """Posts one event now, retrying as client-go does; whether it was recorded."""
        body = self.body(obj, namespace, type_, reason, message)
        delay = RETRY_S
        for attempt in range(1, TRIES + 1):
            try:
                self.post(f"/api/v1/namespaces/{namespace}/events", body)
                self.outcomes.inc(outcome="recorded")
                return True
            except Exception as err:
                status = getattr(err, "status", None)
                if status == 409:  # an earlier try landed and its answer was lost
                    self.outcomes.inc(outcome="recorded")
                    return True
                transient = not isinstance(err, NotLeading) and (status is None or status == 429 or status >= 500)
                if not transient or attempt == TRIES or self.stop.wait(delay):
                    log.info("event %s for %s %s not recorded after %d tries: %s", reason, obj.get("kind"),
                             obj.get("name"), attempt, str(err).splitlines()[0] if str(err) else type(err).__name__)
                    self.outcomes.inc(outcome="dropped")
                    return False
                delay = min(delay * 2, RETRY_MAX_S)
        return False

    def submit(self, obj: dict[str, str], namespace: str, type_: str, reason: str, message: str) -> None:
        """Queues the event for the recorder's worker thread (started on first use)."""
        with self._lock:
            if self._worker is None:
                self._worker = threading.Thread(target=self._run, name=f"events-{self.component}", daemon=True)
                self._worker.start()
        self._queue.put((obj, namespace, type_, reason, message))

    def drain(self, timeout_s: float = 30.0) -> bool:
        """Waits until every submitted event was recorded or given up; whether that happened in time."""
        deadline = time.monotonic() + timeout_s
        while self._queue.unfinished_tasks:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.01)
        return True

    def _run(self) -> None:
        while True:
            item = self._queue.get()
            try:
                if item is None:
                    return
                self.record(*item)
            finally:
                self._queue.task_done()
