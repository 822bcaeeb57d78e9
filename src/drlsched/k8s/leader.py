"""Leader election on a `coordination.k8s.io/v1` Lease, as client-go's `tools/leaderelection` does it.

Every `retry_period_s` each candidate reads the Lease. The holder renews it (`spec.renewTime`); a candidate takes
it only when it has no holder, or when the record it last saw has not changed for a whole `lease_duration_s` by
the candidate's own clock (no clock is compared across machines). Every write carries the Lease's
`resourceVersion`, so of two candidates racing for an expired lease the apiserver lets one win (409 for the
other). A leader that has not renewed for `renew_deadline_s` stops leading (`is_leader` is false from then on,
and its gated client refuses writes): with client-go's defaults, 15 s lease / 10 s renew deadline / 2 s retry,
it stops writing 5 s before anyone else may start. On a clean stop the leader releases the lease (holder "" and a
1 s duration, client-go's ReleaseOnCancel), so a standby takes over within one retry period; after a crash it
takes over within a lease duration (plus one retry period) of the last renewal.

A replica that lost the lease goes back to candidacy (controller-runtime exits instead and lets the Deployment
restart it; the Manager's callbacks give the controller the same fresh start)."""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import kubernetes

from drlsched.k8s import prom
from drlsched.k8s.backoff import describe
from drlsched.k8s.client import request

log = logging.getLogger("drlsched.k8s")


@dataclass(frozen=True)
class LeaseConfig:
    name: str
    namespace: str = "default"
    identity: str = ""  # default: hostname_<random>, unique per process (client-go's convention)
    lease_duration_s: float = 15.0
    renew_deadline_s: float = 10.0
    retry_period_s: float = 2.0

    def __post_init__(self) -> None:
        if not self.lease_duration_s > self.renew_deadline_s > 0 or not self.retry_period_s > 0:
            raise ValueError("leader election needs lease duration > renew deadline > 0 and a positive retry period")
        # client-go: renewDeadline must exceed JitterFactor (1.2) x retryPeriod.
        if self.renew_deadline_s <= 1.2 * self.retry_period_s:
            raise ValueError("the renew deadline must be longer than 1.2 x the retry period")


def default_identity() -> str:
    return f"{os.environ.get('POD_NAME') or socket.gethostname()}_{uuid.uuid4().hex[:8]}"


def micro_time(t: float) -> str:
    """A metav1.MicroTime (RFC 3339 with microseconds)."""
    return dt.datetime.fromtimestamp(t, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    """Runs the election in its own thread (`start`/`stop`); `is_leader()` is safe from any thread.
    `on_started()` and `on_stopped()` run on the elector's thread."""

    def __init__(self, api: kubernetes.client.ApiClient, cfg: LeaseConfig,
                 on_started: Callable[[], None] | None = None, on_stopped: Callable[[], None] | None = None,
                 clock: Callable[[], float] = time.monotonic, wall: Callable[[], float] = time.time) -> None:
        self.api = api
        self.cfg = cfg if cfg.identity else LeaseConfig(**{**cfg.__dict__, "identity": default_identity()})
        self.identity = self.cfg.identity
        self.on_started, self.on_stopped = on_started, on_stopped
        self.clock, self.wall = clock, wall
        self._lock = threading.Lock()
        self._renewed_at: float | None = None  # our clock when the last successful acquire/renew was sent
        self._observed: tuple[Any, ...] | None = None
        self._observed_at = 0.0
        self._holder = ""
        self.reached = False  # the last round read the Lease: leading, or standing by behind a known holder
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.transitions = prom.Counter("drlsched_leader_transitions_total",
                                        "Times this replica started or stopped leading.")
        self.is_leader_gauge = prom.CallbackGauge("drlsched_leader", "1 while this replica holds the lease.",
                                                  lambda: float(self.is_leader()))
        self.path = f"/apis/coordination.k8s.io/v1/namespaces/{self.cfg.namespace}/leases/{self.cfg.name}"

    # --- state ---------------------------------------------------------------------------------------------

    def is_leader(self) -> bool:
        with self._lock:
            return self._renewed_at is not None and self.clock() - self._renewed_at < self.cfg.renew_deadline_s

    @property
    def holder(self) -> str:
        """The holder in the last record seen ("" for none)."""
        with self._lock:
            return self._holder

    # --- the loop --------------------------------------------------------------------------------------------

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="leader-election", daemon=True)
        self._thread.start()

    def stop(self, release: bool = True, timeout_s: float = 5.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
        if release and self.is_leader():
            self.release()

    def _run(self) -> None:
        leading = False
        while not self._stop.is_set():
            sent = self.clock()
            try:
                self.try_acquire_or_renew(sent)
                self.reached = True
            except Exception as err:  # unreachable apiserver, a 5xx: lose it once the renew deadline passes
                self.reached = False
                log.warning("leader election: cannot read or write lease %s/%s: %s", self.cfg.namespace,
                            self.cfg.name, describe(err))
            now_leading = self.is_leader()
            if now_leading and not leading:
                log.info("leader election: %s now holds lease %s/%s", self.identity, self.cfg.namespace,
                         self.cfg.name)
                self.transitions.inc(change="started")
                if self.on_started is not None:
                    self.on_started()
            elif leading and not now_leading:
                log.warning("leader election: %s lost lease %s/%s (not renewed for %.0f s)", self.identity,
                            self.cfg.namespace, self.cfg.name, self.cfg.renew_deadline_s)
                self.transitions.inc(change="stopped")
                if self.on_stopped is not None:
                    self.on_stopped()
            leading = now_leading
            # client-go waits retryPeriod (with jitter when not leading); no jitter here: every choice seeded.
            self._stop.wait(max(0.0, self.cfg.retry_period_s - (self.clock() - sent)))

    def try_acquire_or_renew(self, sent: float | None = None) -> bool:
        """One round: read the Lease; create, renew or take it if we may. Whether we hold it now."""
        sent = self.clock() if sent is None else sent
        try:
            lease = json.loads(request(self.api, "GET", self.path))
        except kubernetes.client.ApiException as err:
            if err.status != 404:
                raise
            return self._write("POST", self._new_record(None), sent)
        spec = lease.get("spec") or {}
        record = (spec.get("holderIdentity") or "", spec.get("renewTime"), spec.get("acquireTime"),
                  spec.get("leaseTransitions"), spec.get("leaseDurationSeconds"))
        now = self.clock()
        with self._lock:
            if record != self._observed:
                self._observed, self._observed_at = record, now
            self._holder = record[0]
            observed_at = self._observed_at
        holder = record[0]
        duration = float(spec.get("leaseDurationSeconds") or self.cfg.lease_duration_s)
        if holder and holder != self.identity and now < observed_at + duration:
            with self._lock:
                self._renewed_at = None
            return False
        return self._write("PUT", self._new_record(lease), sent)

    def _new_record(self, lease: dict[str, Any] | None) -> dict[str, Any]:
        now = micro_time(self.wall())
        spec = dict((lease or {}).get("spec") or {})
        mine = spec.get("holderIdentity") == self.identity
        spec.update(holderIdentity=self.identity, leaseDurationSeconds=round(self.cfg.lease_duration_s),
                    renewTime=now)
        if not mine:
            spec["acquireTime"] = now
            spec["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + (1 if lease is not None else 0)
        meta = {"name": self.cfg.name, "namespace": self.cfg.namespace}
        if lease is not None:
            meta["resourceVersion"] = lease["metadata"]["resourceVersion"]
        return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": meta, "spec": spec}

    def _write(self, method: str, body: dict[str, Any], sent: float) -> bool:
        path = self.path if method == "PUT" else self.path.rsplit("/", 1)[0]
        try:
            request(self.api, method, path, body, gated=False)
        except kubernetes.client.ApiException as err:
            if err.status == 409:  # another candidate wrote first (or the Lease changed since we read it)
                log.debug("leader election: lost the race for lease %s", self.cfg.name)
                return False
            raise
        with self._lock:
            self._renewed_at = sent
            self._holder = self.identity
        return True

    def release(self) -> None:
        """Hands the lease back (holder "", 1 s duration) so a standby needs not wait out the lease."""
        with self._lock:
            self._renewed_at = None
        try:
            lease = json.loads(request(self.api, "GET", self.path))
            spec = lease.get("spec") or {}
            if spec.get("holderIdentity") != self.identity:
                return
            spec.update(holderIdentity="", leaseDurationSeconds=1, renewTime=micro_time(self.wall()))
            request(self.api, "PUT", self.path, {**lease, "spec": spec}, gated=False)
            log.info("leader election: released lease %s/%s", self.cfg.namespace, self.cfg.name)
        except Exception as err:  # the lease then expires on its own
            log.info("leader election: could not release lease %s: %s", self.cfg.name, describe(err))
