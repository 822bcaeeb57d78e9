"""`drlsched serve` (scheduler extender), `drlsched schedule` (second scheduler) and `drlsched reclaim` (the
node-resource controller for BE pods on reclaimed capacity)."""

from __future__ import annotations

import argparse
import logging
import os
import signal
import ssl
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from types import FrameType

from drlsched.cli_common import add_reclaim_thresholds
from drlsched.errors import UserError
from drlsched.k8s import admit_cli, prom
from drlsched.k8s.client import LOOPBACK, api_client
from drlsched.k8s.controller import add_controller_arguments, controller_options
from drlsched.k8s.metrics_pipeline import KubeletCollector, MetricsStore, Poller, PrometheusCollector
from drlsched.k8s.placement import Placer
from drlsched.k8s.rollout import Rollout
from drlsched.policies import make_policy
from drlsched.reclaim import RECLAIM_MODELS

# What SIGTERM leaves to requests and binds under way. Kubernetes' default grace period is 30 s; an API call
# times out after 35 s (connect 5 + read 30), so one to a hung apiserver is abandoned, not waited out.
STOP_GRACE_S = 10.0


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    serve = sub.add_parser("serve", help="run the kube-scheduler extender service (filter/prioritize/bind)")
    _policy_args(serve)
    serve.add_argument("--host", default=LOOPBACK, help="address to listen on (default %(default)s)")
    serve.add_argument("--port", type=int, default=8888, help="port (default %(default)s; 0 picks a free one)")
    serve.add_argument("--max-body-mib", type=int, default=32, help="largest request body accepted (MiB)")
    serve.add_argument("--max-nodes", type=int, default=15_000,
                       help="most nodes one request may list (default %(default)s)")
    serve.add_argument("--workers", type=int, default=4, help="threads answering requests (default %(default)s)")
    tls = serve.add_argument_group("TLS (deploy/ uses all three: kube-scheduler presents a client certificate)")
    tls.add_argument("--tls-cert", type=Path, metavar="PEM", help="serve HTTPS with this certificate (chain)")
    tls.add_argument("--tls-key", type=Path, metavar="PEM", help="the certificate's private key")
    tls.add_argument("--tls-client-ca", type=Path, metavar="PEM",
                     help="require a client certificate signed by this CA for filter/prioritize/bind (GETs for "
                          "probes and /metrics need none)")
    _rollout_args(serve)
    serve.set_defaults(func=_serve)

    schedule = sub.add_parser("schedule", help="run drlsched as a second scheduler (pods naming it in schedulerName)")
    _policy_args(schedule)
    schedule.add_argument("--scheduler-name", default="drl-scheduler", help="spec.schedulerName to serve")
    schedule.add_argument("--metrics-port", type=int,
                          help="serve /metrics, /healthz and /readyz (ready once the watch has listed the cluster)")
    schedule.add_argument("--metrics-host", default=LOOPBACK, help="address for --metrics-port (default %(default)s)")
    _rollout_args(schedule)
    schedule.set_defaults(func=_schedule)

    reclaim = sub.add_parser("reclaim", help="run the node-resource controller: batch resources for BE pods from "
                                             "measured usage, and BE evictions (docs/kubernetes.md)")
    reclaim.add_argument("--kubeconfig", type=Path, help="kubeconfig of the cluster (default: in-cluster)")
    reclaim.add_argument("--model", required=True, choices=[m for m in RECLAIM_MODELS if m != "none"],
                         help="how reclaimable capacity is estimated (the simulator's --reclaim models)")
    reclaim.add_argument("--period", type=float, default=60.0,
                         help="seconds between passes (default %(default)s, Koordinator's)")
    reclaim.add_argument("--window", type=float, default=300.0,
                         help="seconds of usage the model aggregates (default %(default)s)")
    reclaim.add_argument("--metrics-interval", type=float, default=15.0,
                         help="seconds between reads of metrics.k8s.io between passes (default %(default)s)")
    reclaim.add_argument("--stale-after", type=float, default=180.0,
                         help="seconds without a node usage sample after which its batch allocatable is 0")
    add_reclaim_thresholds(reclaim)
    reclaim.add_argument("--evict-mem-threshold", type=float, default=0.70, metavar="SHARE",
                         help="evict BE pods from a node whose memory usage passes this share (default 0.70)")
    reclaim.add_argument("--event-namespace", default="default", help="namespace of the controller's Node events")
    reclaim.add_argument("--once", action="store_true", help="one pass, print its result as JSON, exit")
    reclaim.add_argument("--log-level", default="INFO", choices=("DEBUG", "INFO", "WARNING", "ERROR"))
    add_controller_arguments(reclaim, lease_name="drlsched-reclaim")
    reclaim.set_defaults(func=_reclaim)

    from drlsched.k8s import cli_autoscale  # `drlsched autoscale` (its own module)

    cli_autoscale.register(sub)

    report = sub.add_parser("ab-report", help="compare the A/B arms of placed pods; optionally apply rollback")
    report.add_argument("--kubeconfig", type=Path, help="kubeconfig of the cluster (default: in-cluster)")
    report.add_argument("--namespace", help="only this namespace (default: all)")
    report.add_argument("--sla-seconds", type=float, default=60.0,
                        help="a pod violates its SLA when it waits longer than this to be scheduled, or runs "
                             "past its drlsched.io/deadline-seconds annotation (default %(default)s)")
    report.add_argument("--apply", type=Path, metavar="STATE_FILE",
                        help="write the decision (rollback when the candidate is worse) to this rollout state file")
    report.add_argument("--promote", action="store_true", help="with --apply: promote a candidate that is better")
    report.set_defaults(func=_ab_report)

    admit_cli.register(sub)


def _policy_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--policy", default="k8s-default", help="policy name, or ppo:PATH / dqn:PATH")
    parser.add_argument("--kubeconfig", type=Path, help="kubeconfig of the cluster to watch")
    parser.add_argument("--in-cluster", action="store_true", help="use the pod's service account instead")
    parser.add_argument("--log-level", default="INFO", choices=("DEBUG", "INFO", "WARNING", "ERROR"))
    metrics = parser.add_argument_group("live metrics (load-aware policies; without any, usage is taken as zero)")
    metrics.add_argument("--kubelet-metrics", metavar="URL",
                         help="kubelet resource-metrics URL with {node}, e.g. kwok's "
                              "http://127.0.0.1:PORT/metrics/nodes/{node}/metrics/resource")
    metrics.add_argument("--prometheus", metavar="URL", help="Prometheus server (cAdvisor and DCGM series)")
    metrics.add_argument("--metrics-interval", type=float, default=10.0, help="seconds between collections")
    metrics.add_argument("--stale-after", type=float, default=30.0,
                         help="seconds without a sample after which a node is scored from its requests")


def _rollout_args(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("shadow and A/B rollout of a candidate policy")
    group.add_argument("--shadow", metavar="POLICY", help="score every pod with this policy too, without acting")
    group.add_argument("--ab", metavar="POLICY", help="place a fraction of pods with this candidate policy")
    group.add_argument("--ab-fraction", type=float, default=0.1, help="share of pods for --ab (default 0.1)")
    group.add_argument("--ab-key", choices=("uid", "namespace"), default="uid",
                       help="hash the pod's UID, or its namespace (whole namespaces in one arm)")
    group.add_argument("--rollout-state", type=Path, metavar="FILE",
                       help="follow promote/rollback decisions written here by `drlsched ab-report --apply`")


def _rollout(args: argparse.Namespace) -> Callable[[Placer, prom.Registry], Rollout] | None:
    if args.shadow is None and args.ab is None:
        if args.rollout_state is not None:
            raise UserError("--rollout-state needs --ab")
        return None
    if not 0.0 <= args.ab_fraction <= 1.0:
        raise UserError(f"--ab-fraction must be between 0 and 1, not {args.ab_fraction}")
    shadow = make_policy(args.shadow) if args.shadow else None
    candidate = make_policy(args.ab) if args.ab else None

    def build(live: Placer, registry: prom.Registry) -> Rollout:
        return Rollout(
            live, args.policy, registry,
            shadow=(Placer(shadow, metrics=live.metrics), args.shadow) if shadow else None,
            candidate=(Placer(candidate, metrics=live.metrics), args.ab) if candidate else None,
            fraction=args.ab_fraction, key=args.ab_key, state_file=args.rollout_state,
        )

    return build


def _metrics(args: argparse.Namespace, nodes: Callable[[], list[str]]) -> tuple[MetricsStore | None, list[Poller]]:
    """The metrics store and its pollers for the options given (none: no store)."""
    if args.kubelet_metrics is None and args.prometheus is None:
        return None, []
    if args.metrics_interval <= 0 or args.stale_after <= 0:
        raise UserError("--metrics-interval and --stale-after must be positive")
    if args.kubelet_metrics is not None and "{node}" not in args.kubelet_metrics:
        raise UserError("--kubelet-metrics must contain {node}, where each node's name goes")
    store = MetricsStore(window_s=max(60.0, 3 * args.metrics_interval), stale_after_s=args.stale_after)
    pollers = []
    if args.kubelet_metrics is not None:
        kubelet = KubeletCollector(lambda node: args.kubelet_metrics.replace("{node}", node))
        pollers.append(Poller(store, lambda: kubelet.collect(nodes()), args.metrics_interval))
    if args.prometheus is not None:
        pollers.append(Poller(store, PrometheusCollector(args.prometheus).collect, args.metrics_interval))
    return store, pollers


def _stop_on_signals(stop: threading.Event) -> None:
    def handler(signum: int, frame: FrameType | None) -> None:
        del signum, frame
        stop.set()

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)


def _wait_for_stop(stop: threading.Event) -> None:
    """Blocks the main thread until SIGTERM or SIGINT. Python runs signal handlers in the main thread only,
    between bytecodes; a signal the kernel hands to another thread only marks the handler pending, and an
    untimed wait would never wake to run it. Waking every fraction of a second bounds that delay."""
    while not stop.wait(0.25):
        pass


def _exit_abandoning(what: str) -> None:
    """Exits now although `what` still runs in worker threads (the interpreter would wait for them)."""
    logging.getLogger("drlsched.k8s").warning("exiting with %s still in flight", what)
    logging.shutdown()
    sys.stdout.flush()
    os._exit(0)


def _logging(level: str) -> None:
    logging.basicConfig(level=level, stream=sys.stderr, format="drlsched: %(asctime)s %(levelname)s %(message)s")


def _serve(args: argparse.Namespace) -> int:
    from drlsched.k8s.extender import Extender, ExtenderServer
    from drlsched.k8s.http_server import Limits
    from drlsched.k8s.state import ClusterState
    from drlsched.k8s.watch import Informer

    _logging(args.log_level)
    if not 0 <= args.port <= 65535:
        raise UserError(f"--port must be between 0 and 65535, not {args.port}")
    if args.max_body_mib < 1:
        raise UserError("--max-body-mib must be at least 1")
    if args.max_nodes < 1 or args.workers < 1:
        raise UserError("--max-nodes and --workers must be at least 1")
    tls = _tls(args)
    policy = make_policy(args.policy)
    rollout = _rollout(args)  # options first: a bad one is reported before the kubeconfig is read
    state = ClusterState() if args.kubeconfig is not None or args.in_cluster else None
    metrics, pollers = _metrics(args, state.node_names if state is not None else list)
    informer = api = ready = None
    if state is not None:
        api = api_client(args.kubeconfig)
        informer = Informer(api, state)
        ready = threading.Event()
    extender = Extender(policy, args.policy, state, api, ready, max_body=args.max_body_mib << 20,
                        max_nodes=args.max_nodes, metrics=metrics, rollout=rollout)
    try:
        server = ExtenderServer((args.host, args.port), extender, tls,
                                Limits(max_body=extender.max_body, workers=args.workers))
    except OSError as err:
        raise UserError(f"cannot listen on {args.host}:{args.port}: {err.strerror or err}") from None
    stop = threading.Event()
    _stop_on_signals(stop)
    for poller in pollers:
        poller.start()
    if informer is not None and ready is not None:
        informer.start()
        threading.Thread(target=lambda: informer.wait_synced(3600) and ready.set(), daemon=True).start()
    threading.Thread(target=server.serve_forever, name="http", daemon=True).start()
    logging.getLogger("drlsched.k8s").info(
        "extender for policy %s on %s (%s)", args.policy, server.url,
        "node cache from the API" if state is not None else "scoring the Nodes in each request")
    print(server.url, flush=True)
    _wait_for_stop(stop)
    if informer is not None:
        informer.stop()
    if not server.stop(grace_s=STOP_GRACE_S):
        _exit_abandoning("requests")
    return 0


def _tls(args: argparse.Namespace) -> ssl.SSLContext | None:
    from drlsched.k8s.http_server import tls_context

    if args.tls_cert is None and args.tls_key is None:
        if args.tls_client_ca is not None:
            raise UserError("--tls-client-ca needs --tls-cert and --tls-key")
        return None
    if args.tls_cert is None or args.tls_key is None:
        raise UserError("--tls-cert and --tls-key go together")
    try:
        return tls_context(args.tls_cert, args.tls_key, args.tls_client_ca)
    except (OSError, ssl.SSLError) as err:
        files = ", ".join(str(f) for f in (args.tls_cert, args.tls_key, args.tls_client_ca) if f is not None)
        raise UserError(f"cannot load the TLS files {files}: {err.strerror or err}") from None


def _schedule(args: argparse.Namespace) -> int:
    from drlsched.k8s.second_scheduler import SecondScheduler

    _logging(args.log_level)
    policy = make_policy(args.policy)
    if args.kubeconfig is None and not args.in_cluster:
        raise UserError("the second scheduler needs --kubeconfig PATH or --in-cluster")
    metrics, pollers = _metrics(args, lambda: scheduler.state.node_names())
    rollout = _rollout(args)  # options first: a bad one is reported before the kubeconfig is read
    scheduler = SecondScheduler(api_client(args.kubeconfig), policy, args.scheduler_name, metrics, rollout)
    stop = threading.Event()
    _stop_on_signals(stop)
    if args.metrics_port is not None:
        try:
            server = prom.MetricsServer((args.metrics_host, args.metrics_port), scheduler.registry,
                                        ready=scheduler.informer.is_synced)
        except OSError as err:
            raise UserError(f"cannot listen on {args.metrics_host}:{args.metrics_port}: {err.strerror}") from None
        threading.Thread(target=server.serve_forever, name="metrics-http", daemon=True).start()
    for poller in pollers:
        poller.start()
    scheduler.start()
    _wait_for_stop(stop)
    if not scheduler.stop(grace_s=STOP_GRACE_S):
        _exit_abandoning("binds")
    return 0


def _ab_report(args: argparse.Namespace) -> int:
    from drlsched.k8s.ab_report import apply_decision, compare, fetch_pods, render

    report = compare(fetch_pods(api_client(args.kubeconfig), args.namespace), args.sla_seconds)
    print(render(report))
    if args.apply is not None:
        apply_decision(report, args.apply, args.promote)
    return 0


def _reclaim(args: argparse.Namespace) -> int:
    import dataclasses
    import json

    from drlsched.k8s.controller import Manager
    from drlsched.k8s.reclaim_controller import COMPONENT, NodeResult, ReclaimController
    from drlsched.reclaim import ReclaimConfig

    _logging(args.log_level)
    for name in ("period", "window", "metrics_interval", "stale_after"):
        value = getattr(args, name)
        if not (value > 0 and value < float("inf")):
            raise UserError(f"--{name.replace('_', '-')} must be a positive number of seconds, not {value}")
    if not 0 < args.evict_mem_threshold <= 1:
        raise UserError(f"--evict-mem-threshold must be in (0, 1], got {args.evict_mem_threshold}")
    options = controller_options(args)
    cfg = ReclaimConfig(model=args.model, cpu_threshold=args.reclaim_cpu_threshold,
                        mem_threshold=args.reclaim_mem_threshold, suppress_threshold=args.suppress_threshold,
                        period_s=args.period, window_s=args.window, evict_mem_threshold=args.evict_mem_threshold)
    api = api_client(args.kubeconfig, retry_connections=False)
    manager = Manager(COMPONENT, api, options)
    controller = ReclaimController(api, cfg, stale_after_s=args.stale_after, event_namespace=args.event_namespace)
    controller.events.instance = manager.identity
    controller.register(manager.registry)
    if args.once:
        results: dict[str, NodeResult] = {}
        manager.add("reconcile", args.period, lambda leading: results.update(controller.step()))
        manager.run_once()
        controller.events.drain(timeout_s=STOP_GRACE_S)
        print(json.dumps({name: dataclasses.asdict(r) for name, r in results.items()}, indent=2))
        return 0
    # Usage is read every --metrics-interval by every replica (a standby's windows are warm when it takes over);
    # passes run every --period exactly, on the leader only.
    manager.add("metrics", args.metrics_interval, controller.poll_usage, leader_only=False)
    manager.add("reconcile", args.period, controller.reconcile, leader_only=False)
    stop = threading.Event()
    _stop_on_signals(stop)
    code = manager.run(stop)
    controller.events.drain(timeout_s=STOP_GRACE_S)
    return code
