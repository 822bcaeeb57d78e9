"""The foundation every drlsched controller runs on (`drlsched reclaim` now; `drlsched admit` and `drlsched
autoscale` next), after controller-runtime's manager:

- **Leader election** (`drlsched.k8s.leader`, a coordination.k8s.io/v1 Lease, client-go's 15 s / 10 s / 2 s):
  on by default, `--leader-elect=false` for one replica. The Manager gates its API client's writes on the lease
  (`client.gate_writes`), so a standby can read and warm its caches but never write.
- **Passes on their own period**: each `add`ed loop runs every `period_s` exactly, anchored at the start and
  again when this replica starts leading (its first pass as leader runs at once; a pass that overruns skips the
  missed slots, never bursts to catch up). `reconcile(leading)` gets whether this replica
  leads; loops added `leader_only` run only then (all writes should live there).
- **Errors**: a failing pass is a warning line with the error's one-line description and a back-off (1 s doubling
  to 30 s, `drlsched.k8s.backoff`) before that loop runs again; `run_once` (`--once`) turns a connection error
  into one UserError line (exit 2).
- **Shutdown** on SIGTERM/SIGINT (the caller's `stop` event): the pass under way finishes, the lease is released.
- **Probes and metrics** on `--health-port`: `/healthz` (alive), `/readyz` (ready when leading or standing by,
  i.e. the last round reached the apiserver), `/metrics` (Prometheus: passes by loop and outcome, leadership,
  events, and whatever the controller registers in `manager.registry`).

See docs/kubernetes.md, "Controllers", for the API a new controller implements.
"""

from __future__ import annotations

import argparse
import logging
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import kubernetes

from drlsched.errors import UserError
from drlsched.k8s import prom
from drlsched.k8s.backoff import Backoff, describe
from drlsched.k8s.client import LOOPBACK, NotLeading, connection_error, gate_writes, request
from drlsched.k8s.leader import LeaderElector, LeaseConfig

log = logging.getLogger("drlsched.k8s")
_SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
_TICK_S = 0.25  # longest wait between checks of the stop event (signal handlers run on the main thread only)


@dataclass(frozen=True)
class ControllerOptions:
    leader_elect: bool = True
    lease: LeaseConfig = field(default_factory=lambda: LeaseConfig("drlsched-controller"))
    health_host: str = LOOPBACK
    health_port: int | None = None


def _bool(text: str) -> bool:
    value = text.strip().lower()
    if value in ("true", "1", "yes"):
        return True
    if value in ("false", "0", "no"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, not {text!r}")


def add_controller_arguments(parser: argparse.ArgumentParser, lease_name: str) -> None:
    """The options every drlsched controller takes (kube-scheduler's flag names for leader election)."""
    group = parser.add_argument_group("leader election, probes and metrics (every drlsched controller)")
    group.add_argument("--leader-elect", type=_bool, nargs="?", const=True, default=True, metavar="BOOL",
                       help="hold a coordination.k8s.io Lease before writing (default true; "
                            "--leader-elect=false for a single replica)")
    group.add_argument("--leader-elect-resource-name", default=lease_name, metavar="NAME",
                       help="the Lease's name (default %(default)s)")
    group.add_argument("--leader-elect-resource-namespace", metavar="NS",
                       help="the Lease's namespace (default: the pod's, else default)")
    group.add_argument("--leader-elect-lease-duration", type=float, default=15.0, metavar="S",
                       help="seconds a standby waits after the last renewal before taking over (default 15)")
    group.add_argument("--leader-elect-renew-deadline", type=float, default=10.0, metavar="S",
                       help="seconds the leader keeps trying to renew before it stops leading (default 10)")
    group.add_argument("--leader-elect-retry-period", type=float, default=2.0, metavar="S",
                       help="seconds between election rounds (default 2)")
    group.add_argument("--health-port", type=int, metavar="PORT",
                       help="serve /healthz, /readyz and /metrics on this port (0 picks one; default off)")
    group.add_argument("--health-host", default=LOOPBACK, help="address for --health-port (default %(default)s)")


def controller_options(args: argparse.Namespace) -> ControllerOptions:
    """The options of `add_controller_arguments`, checked (UserError: one line, exit 2)."""
    namespace = args.leader_elect_resource_namespace
    if namespace is None:
        try:
            namespace = _SERVICE_ACCOUNT_NAMESPACE.read_text().strip() or "default"
        except OSError:
            namespace = "default"
    for name in ("lease_duration", "renew_deadline", "retry_period"):
        value = getattr(args, f"leader_elect_{name}")
        if not (value > 0 and value < float("inf")):
            raise UserError(f"--leader-elect-{name.replace('_', '-')} must be a positive number of seconds, "
                            f"not {value}")
    if args.health_port is not None and not 0 <= args.health_port <= 65535:
        raise UserError(f"--health-port must be between 0 and 65535, not {args.health_port}")
    try:
        lease = LeaseConfig(args.leader_elect_resource_name, namespace,
                            lease_duration_s=args.leader_elect_lease_duration,
                            renew_deadline_s=args.leader_elect_renew_deadline,
                            retry_period_s=args.leader_elect_retry_period)
    except ValueError as err:
        raise UserError(str(err)) from None
    return ControllerOptions(args.leader_elect, lease, args.health_host, args.health_port)


Reconcile = Callable[[bool], object]


@dataclass
class _Loop:
    name: str
    period_s: float
    reconcile: Reconcile
    leader_only: bool
    due: float = 0.0
    backoff: Backoff = field(default_factory=Backoff)


class Manager:
    """Runs a controller's loops (see the module doc). Not thread-safe: configure, then `run` or `run_once`."""

    def __init__(self, component: str, api: kubernetes.client.ApiClient, options: ControllerOptions,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.component = component
        self.api = api
        self.options = options
        self.clock = clock
        self.registry = prom.Registry()
        self.loops: list[_Loop] = []
        self.passes = self.registry.add(prom.Counter("drlsched_controller_passes_total",
                                                     "Controller passes, by loop and outcome."))
        self._reached = False  # without election: the last pass reached the apiserver
        self.elector: LeaderElector | None = None
        if options.leader_elect:
            self.elector = LeaderElector(api, options.lease)
            self.registry.add(self.elector.transitions)
            self.registry.add(self.elector.is_leader_gauge)
            gate_writes(api, self.elector.is_leader)
        self.server: prom.MetricsServer | None = None
        # Each replica names itself to the apiserver (audit logs, managedFields): replicas sharing one
        # credential are still told apart.
        api.user_agent = f"{component}/{self.identity}"

    @property
    def identity(self) -> str:
        return self.elector.identity if self.elector is not None else self.component

    def add(self, name: str, period_s: float, reconcile: Reconcile, leader_only: bool = True) -> None:
        """Runs `reconcile(leading)` every `period_s` (only while leading when `leader_only`)."""
        self.loops.append(_Loop(name, period_s, reconcile, leader_only))

    def leading(self) -> bool:
        return self.elector is None or self.elector.is_leader()

    def ready(self) -> bool:
        """Leading, or standing by: the last election round (or, without election, pass) reached the API."""
        return self.elector.reached if self.elector is not None else self._reached

    # --- running ---------------------------------------------------------------------------------------------

    def run_once(self) -> None:
        """Every loop once (`--once`): with leader election, only if the lease can be had now. Connection errors
        and refusals are one UserError line."""
        try:
            if self.elector is None:
                request(self.api, "GET", "/api")  # reachable at all? (else the pass logs a line per call)
            elif not self.elector.try_acquire_or_renew():
                raise UserError(f"lease {self.options.lease.namespace}/{self.options.lease.name} is held by "
                                f"{self.elector.holder}: another replica leads (--leader-elect=false to run "
                                f"a pass anyway)")
            for loop in self.loops:
                loop.reconcile(True)
        except UserError:
            raise
        except Exception as err:
            if connection_error(err):
                raise UserError(f"cannot reach the Kubernetes API at {self.api.configuration.host}: "
                                f"{describe(err)}") from None
            if isinstance(err, kubernetes.client.ApiException):
                raise UserError(f"the Kubernetes API refused a request: {describe(err)}") from None
            raise
        finally:
            if self.elector is not None and self.elector.is_leader():
                self.elector.release()

    def run(self, stop: threading.Event) -> int:
        """Serves probes, runs the election and the loops until `stop` is set; returns the exit code (0)."""
        if self.options.health_port is not None:
            try:
                self.server = prom.MetricsServer((self.options.health_host, self.options.health_port),
                                                 self.registry, ready=self.ready)
            except OSError as err:
                raise UserError(f"cannot listen on {self.options.health_host}:{self.options.health_port}: "
                                f"{err.strerror or err}") from None
            threading.Thread(target=self.server.serve_forever, name="health-http", daemon=True).start()
            log.info("%s: probes and metrics on %s", self.component, self.server.url)
        if self.elector is not None:
            self.elector.start()
            log.info("%s: leader election on lease %s/%s as %s", self.component, self.options.lease.namespace,
                     self.options.lease.name, self.elector.identity)
        start = self.clock()
        for loop in self.loops:
            loop.due = start
        was_leading = False
        try:
            while not stop.is_set():
                now = self.clock()
                leading = self.elector is not None and self.leading()
                if leading and not was_leading:
                    # Just took the lease (controller-runtime starts its runnables then): every loop runs now,
                    # not up to a period later, and its period is anchored here.
                    for loop in self.loops:
                        loop.due = min(loop.due, now)
                was_leading = leading
                for loop in self.loops:
                    if now >= loop.due and not stop.is_set():
                        self._pass(loop, now)
                wake = min((loop.due for loop in self.loops), default=now + _TICK_S)
                stop.wait(min(_TICK_S, max(0.0, wake - self.clock())))
        finally:
            if self.elector is not None:
                self.elector.stop(release=True)
            if self.server is not None:
                self.server.stop(grace_s=1.0)
        return 0

    def _pass(self, loop: _Loop, now: float) -> None:
        leading = self.leading()
        delay = 0.0
        if loop.leader_only and not leading:
            self.passes.inc(loop=loop.name, outcome="standby")
        else:
            try:
                loop.reconcile(leading)
                self.passes.inc(loop=loop.name, outcome="ok")
                loop.backoff.succeeded()
                if self.elector is None:
                    self._reached = True
            except NotLeading:  # the lease was lost during the pass: its remaining writes were refused
                self.passes.inc(loop=loop.name, outcome="not_leading")
                log.info("%s %s pass cut short: the lease is no longer held", self.component, loop.name)
            except Exception as err:  # an API hiccup, the apiserver gone: back off, the next pass retries
                self.passes.inc(loop=loop.name, outcome="error")
                delay = loop.backoff.failed()
                if self.elector is None:
                    self._reached = False
                log.warning("%s %s pass failed: %s; next try in %.0f s", self.component, loop.name, describe(err),
                            max(delay, loop.period_s))
        # Exactly every period from the start; slots missed while a pass overran (or backed off) are skipped.
        loop.due += loop.period_s
        resume = max(self.clock(), now + delay)
        if loop.due < resume:
            loop.due += loop.period_s * math.ceil((resume - loop.due) / loop.period_s)
